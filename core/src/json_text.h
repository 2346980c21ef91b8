// JSON string literals for the files the core writes by hand (traces, safetensors headers,
// model_flags.json).
#ifndef TRAINYARD_CORE_SRC_JSON_TEXT_H_
#define TRAINYARD_CORE_SRC_JSON_TEXT_H_

#include <cstdio>
#include <string>

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

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_JSON_TEXT_H_
