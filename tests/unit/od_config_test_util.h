// What the OD pipeline.config tests (od_config_test.cc, od_config_faster_rcnn_test.cc) share:
// the message of the error a call throws, and a converted model's params as "key = value" lines.
#ifndef TRAINYARD_TESTS_UNIT_OD_CONFIG_TEST_UTIL_H_
#define TRAINYARD_TESTS_UNIT_OD_CONFIG_TEST_UTIL_H_

#include <charconv>
#include <cstdint>
#include <string>
#include <vector>

#include "trainyard/core/config.h"
#include "trainyard/error.h"

namespace trainyard::test {

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
