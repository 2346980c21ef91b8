// What the OD pipeline.config tests (od_config_test.cc, od_config_faster_rcnn_test.cc) share:
// the detection task's config dialect loaded as the host loads it, the message of the error a
// call throws, a converted model's params as "key = value" lines, and a converted
// data_augmentation_options step read back.
#ifndef TRAINYARD_TESTS_UNIT_OD_CONFIG_TEST_UTIL_H_
#define TRAINYARD_TESTS_UNIT_OD_CONFIG_TEST_UTIL_H_

#include <charconv>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "trainyard/core/config.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/wire/od_preprocessor.pb.h"

namespace trainyard::test {

// Loads the build's task plugins (load_config_dialects, as the host does before it reads a
// config), once: the detection task registers the Object Detection API's dialect. Its library
// stays loaded, so the registry is kept too.
inline bool load_task_dialects() {
  static const PluginRegistry* registry = [] {
    PluginRegistry::Settings settings;
    settings.plugin_path = {TRAINYARD_PLUGIN_DIR};
    settings.use_environment = false;
    settings.use_default_dirs = false;
    auto* loaded = new PluginRegistry(settings);
    load_config_dialects(*loaded);
    return loaded;
  }();
  return registry != nullptr;
}

// A data_augmentation_options step of a converted config: the API's PreprocessingStep (packed
// by the detection task), read with the tests' copy of od_preprocessor.proto.
inline wire::od::PreprocessingStep od_step(const google::protobuf::Any& step) {
  wire::od::PreprocessingStep out;
  EXPECT_EQ(step.type_url(), "type.googleapis.com/trainyard.od.PreprocessingStep");
  EXPECT_TRUE(out.ParseFromString(step.value()));
  return out;
}

// The what() of the Error fn throws, or "(no error)".
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The shortest text that reads back as `value`.
inline std::string number(double value) {
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, end);
}

// "key = value" per param: floats with an f, lists as [a, b], strings quoted.
inline std::vector<std::string> describe(const config::PluginSpec& spec) {
  std::vector<std::string> out;
  for (const config::Param& p : spec.params()) {
    std::string value;
    switch (p.value_case()) {
      case config::Param::kBoolValue:
        value = p.bool_value() ? "true" : "false";
        break;
      case config::Param::kIntValue:
        value = std::to_string(p.int_value());
        break;
      case config::Param::kFloatValue:
        value = number(p.float_value()) + "f";
        break;
      case config::Param::kStringValue:
        value = "'" + p.string_value() + "'";
        break;
      case config::Param::kFloatList:
        for (double v : p.float_list().value()) value += (value.empty() ? "" : ", ") + number(v);
        value = "[" + value + "]";
        break;
      case config::Param::kIntList:
        for (int64_t v : p.int_list().value()) {
          value += (value.empty() ? "" : ", ") + std::to_string(v);
        }
        value = "[" + value + "]";
        break;
      case config::Param::kStringList:
        for (const std::string& v : p.string_list().value()) {
          value += (value.empty() ? "" : ", ") + v;
        }
        value = "[" + value + "]";
        break;
      case config::Param::VALUE_NOT_SET:
        value = "(none)";
    }
    out.push_back(p.key() + " = " + value);
  }
  return out;
}

}  // namespace trainyard::test

#endif  // TRAINYARD_TESTS_UNIT_OD_CONFIG_TEST_UTIL_H_
