// The backends every op test runs on: every backend class found on the plugin path (the
// build's plugins and the opaque fixture, whose memory the host cannot read:
// tests/fixtures/opaque_backend.cc), in name order. A backend that cannot be created here (the
// CUDA backend without a GPU) is left out, saying why on stderr; a new backend plugin is
// tested without editing any list.
#ifndef TRAINYARD_TESTS_UNIT_TEST_BACKENDS_H_
#define TRAINYARD_TESTS_UNIT_TEST_BACKENDS_H_

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"

namespace trainyard::test {

inline PluginRegistry& backend_registry() {
  static std::shared_ptr<PluginRegistry> registry = [] {
    PluginRegistry::Settings settings;
    settings.plugin_path = {std::string(TRAINYARD_FIXTURE_DIR) + "/opaque"};
    settings.use_environment = false;
    return std::make_shared<PluginRegistry>(settings);
  }();
  return *registry;
}

// After the last test, every backend's queued work is finished: a test may end with work still
// queued on a stream (creating variables without reading them back), and that work must not
// run while exit() destroys the statics of the libraries it calls (oneDNN's primitive cache,
// created on first use and so destroyed before any static of this file).
class DrainBackendsAfterTheTests final : public ::testing::Environment {
 public:
  explicit DrainBackendsAfterTheTests(std::vector<std::shared_ptr<Backend>> backends)
      : backends_(std::move(backends)) {}
  void TearDown() override {
    for (const auto& backend : backends_) backend->synchronize();
    backends_.clear();
  }

 private:
  std::vector<std::shared_ptr<Backend>> backends_;
};

// One instance of each usable backend per process, by class name.
inline const std::map<std::string, std::shared_ptr<Backend>>& backend_instances() {
  static const std::map<std::string, std::shared_ptr<Backend>> instances = [] {
    std::map<std::string, std::shared_ptr<Backend>> out;
    PluginRegistry& registry = backend_registry();
    for (const ClassInfo& info : registry.classes()) {
      if (info.kind != ClassKind::kBackend) continue;
      try {
        auto backend = registry.create<Backend>(ClassKind::kBackend, info.class_name);
        backend->allocate(0);  // a backend created without its device says so here
        out.emplace(info.class_name, std::move(backend));
      } catch (const Error& e) {
        std::cerr << "test_backends: not testing backend '" << info.class_name << "': " << e.what()
                  << "\n";
      }
    }
    // The build always has these two: their absence is a broken build, not a smaller test.
    for (const char* required : {"cpu", "opaque"}) {
      if (!out.contains(required)) {
        std::cerr << "test_backends: backend '" << required << "' is missing from the plugin path";
        for (const LibraryProblem& p : registry.problems()) std::cerr << "\n  " << p.message;
        std::cerr << "\n";
        std::abort();
      }
    }
    std::vector<std::shared_ptr<Backend>> all;
    for (const auto& [name, backend] : out) all.push_back(backend);
    ::testing::AddGlobalTestEnvironment(new DrainBackendsAfterTheTests(std::move(all)));
    return out;
  }();
  return instances;
}

inline const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [name, backend] : backend_instances()) out.push_back(name);
    return out;
  }();
  return names;
}

inline std::shared_ptr<Backend> backend(const std::string& name) {
  const auto& instances = backend_instances();
  auto it = instances.find(name);
  if (it == instances.end()) throw NotFound("test_backends: no usable backend '" + name + "'");
  return it->second;
}

}  // namespace trainyard::test

#endif  // TRAINYARD_TESTS_UNIT_TEST_BACKENDS_H_
