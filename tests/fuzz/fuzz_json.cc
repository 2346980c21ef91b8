// libFuzzer target for the JSON reader, parse_json (core/src/formats/json_text.cc), which reads
// model_flags.json of exported YouTube-8M models and safetensors-style headers: RFC 8259, \u
// escapes and surrogate pairs, the 64-level nesting limit and the 1 MiB bound.
//
// The input is a JSON document. A rejection must be ConfigError naming the source. An accepted
// document is printed back (strings through json_quoted, numbers as their text) and must parse to
// the same value; no value may nest deeper than 64.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "trainyard/error.h"
#include "trainyard/json.h"

namespace trainyard::fuzz {
namespace {

std::string print(const JsonValue& v) {
  switch (v.kind) {
    case JsonValue::Kind::kNull:
      return "null";
    case JsonValue::Kind::kBool:
      return v.boolean ? "true" : "false";
    case JsonValue::Kind::kNumber:
      return v.text;
    case JsonValue::Kind::kString:
      return json_quoted(v.text);
    case JsonValue::Kind::kArray: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.array.size(); ++i) out += (i ? "," : "") + print(v.array[i]);
      return out + "]";
    }
    case JsonValue::Kind::kObject: {
      std::string out = "{";
      for (std::size_t i = 0; i < v.object.size(); ++i) {
        out += (i ? "," : "") + json_quoted(v.object[i].first) + ":" + print(v.object[i].second);
      }
      return out + "}";
    }
  }
  return "?";
}

bool same(const JsonValue& a, const JsonValue& b) {
  if (a.kind != b.kind || a.boolean != b.boolean || a.text != b.text ||
      a.array.size() != b.array.size() || a.object.size() != b.object.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.array.size(); ++i) {
    if (!same(a.array[i], b.array[i])) return false;
  }
  for (std::size_t i = 0; i < a.object.size(); ++i) {
    if (a.object[i].first != b.object[i].first || !same(a.object[i].second, b.object[i].second)) {
      return false;
    }
  }
  return true;
}

int depth(const JsonValue& v) {
  int d = 0;
  for (const JsonValue& e : v.array) d = std::max(d, depth(e));
  for (const auto& [k, e] : v.object) d = std::max(d, depth(e));
  return d + (v.kind == JsonValue::Kind::kArray || v.kind == JsonValue::Kind::kObject ? 1 : 0);
}

}  // namespace
}  // namespace trainyard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  using namespace trainyard::fuzz;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  JsonValue value;
  try {
    value = parse_json(input, "model_flags.json");
  } catch (const ConfigError& e) {
    FUZZ_CHECK(std::string(e.what()).starts_with("model_flags.json"),
               std::string("error without the source's name: ") + e.what());
    return 0;
  }
  FUZZ_CHECK(depth(value) <= 64, "nesting of " + std::to_string(depth(value)) + " accepted");
  const std::string printed = print(value);
  JsonValue again;
  try {
    again = parse_json(printed, "printed");
  } catch (const ConfigError& e) {
    FUZZ_CHECK(false, std::string("the printed document does not parse: ") + e.what() + "\n" +
                          printed.substr(0, 200));
  }
  FUZZ_CHECK(same(value, again), "the printed document parses to another value");
  return 0;
}
