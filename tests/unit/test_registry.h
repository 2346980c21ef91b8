// The plugin registry unit tests create plugin classes through: the build's plugin directory
// (TRAINYARD_PLUGIN_PATH and the other environment settings ignored), made once per test
// binary and never destroyed, so that an object a test keeps (a reader, a model) never outlives
// the library that made it during static destruction.
#ifndef TRAINYARD_TESTS_UNIT_TEST_REGISTRY_H_
#define TRAINYARD_TESTS_UNIT_TEST_REGISTRY_H_

#include "trainyard/core/registry.h"

namespace trainyard::test {

inline PluginRegistry& plugin_registry() {
  static PluginRegistry* instance = [] {
    PluginRegistry::Settings settings;
    settings.use_environment = false;
    return new PluginRegistry(settings);
  }();
  return *instance;
}

}  // namespace trainyard::test

#endif  // TRAINYARD_TESTS_UNIT_TEST_REGISTRY_H_
