// The backends every op test runs on: the CPU reference, and the opaque fixture backend whose
// memory the host cannot read (tests/fixtures/opaque_backend.cc).
#ifndef TRAINYARD_TESTS_UNIT_TEST_BACKENDS_H_
#define TRAINYARD_TESTS_UNIT_TEST_BACKENDS_H_

#include <memory>
#include <string>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/registry.h"

namespace trainyard::test {

inline const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = {"cpu", "opaque"};
  return names;
}

// One backend of each name per process, created from the build tree and the fixtures.
inline std::shared_ptr<Backend> backend(const std::string& name) {
  static std::shared_ptr<PluginRegistry> registry = [] {
    PluginRegistry::Settings settings;
    settings.plugin_path = {std::string(TRAINYARD_FIXTURE_DIR) + "/opaque"};
    settings.use_environment = false;
    return std::make_shared<PluginRegistry>(settings);
  }();
  static std::shared_ptr<Backend> cpu = registry->create<Backend>(ClassKind::kBackend, "cpu");
  static std::shared_ptr<Backend> opaque =
      registry->create<Backend>(ClassKind::kBackend, "opaque");
  return name == "cpu" ? cpu : opaque;
}

}  // namespace trainyard::test

#endif  // TRAINYARD_TESTS_UNIT_TEST_BACKENDS_H_
