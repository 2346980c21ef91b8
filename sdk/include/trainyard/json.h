// JSON for the small files the core and plugins write and read by hand (traces, safetensors
// headers, TF_CONFIG, a task's record of its run): string literals, and a reader of whole
// documents into JsonValue.
#ifndef TRAINYARD_JSON_H_
#define TRAINYARD_JSON_H_

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "trainyard/export.h"

namespace trainyard {

// `s` as a JSON string literal, quotes included: '"' and '\' escaped, control characters as
// \u00XX.
inline std::string json_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A parsed JSON value. Numbers keep their text (so 4 stays "4" and 1e-08 stays "1e-08").
struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  std::string text;  // kNumber: as written; kString: the decoded string
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in document order

  // Declared here and defaulted below, once JsonValue is complete: clang instantiates the
  // implicit ones' std::pair<std::string, JsonValue> where JsonValue is still incomplete.
  JsonValue();
  JsonValue(const JsonValue&);
  JsonValue(JsonValue&&) noexcept;
  JsonValue& operator=(const JsonValue&);
  JsonValue& operator=(JsonValue&&) noexcept;
  ~JsonValue();

  // The member `key` of an object, or nullptr.
  const JsonValue* find(std::string_view key) const;
};

inline JsonValue::JsonValue() = default;
inline JsonValue::JsonValue(const JsonValue&) = default;
inline JsonValue::JsonValue(JsonValue&&) noexcept = default;
inline JsonValue& JsonValue::operator=(const JsonValue&) = default;
inline JsonValue& JsonValue::operator=(JsonValue&&) noexcept = default;
inline JsonValue::~JsonValue() = default;

inline const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : object) {
    if (k == key) return &v;
  }
  return nullptr;
}

// Parses one JSON document (RFC 8259; \u escapes of the Basic Multilingual Plane and surrogate
// pairs decode to UTF-8). Nesting deeper than 64 and documents over 1 MiB are refused. Throws
// ConfigError "SOURCE: ... at byte N".
TRAINYARD_API JsonValue parse_json(std::string_view text, const std::string& source);

}  // namespace trainyard

#endif  // TRAINYARD_JSON_H_
