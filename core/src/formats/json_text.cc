#include "trainyard/json.h"

#include <cstdint>

#include "trainyard/error.h"

namespace trainyard {
namespace {

constexpr std::size_t kMaxDocument = 1 << 20;
constexpr int kMaxDepth = 64;

class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  JsonValue document() {
    if (text_.size() > kMaxDocument) {
      throw ConfigError(source_ + ": " + std::to_string(text_.size()) +
                        " bytes of JSON, more than the 1 MiB allowed");
    }
    JsonValue v = value(0);
    space();
    if (i_ != text_.size()) fail("text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(source_ + ": invalid JSON: " + what + " at byte " + std::to_string(i_));
  }

  void space() {
    while (i_ < text_.size() &&
           (text_[i_] == ' ' || text_[i_] == '\t' || text_[i_] == '\n' || text_[i_] == '\r')) {
      ++i_;
    }
  }

  bool take(char c) {
    space();
    if (i_ < text_.size() && text_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }

  bool word(std::string_view w) {
    if (text_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }

  // `depth` is the number of arrays and objects around the value.
  JsonValue value(int depth) {
    space();
    if (i_ >= text_.size()) fail("unexpected end");
    JsonValue v;
    const char c = text_[i_];
    if ((c == '{' || c == '[') && depth >= kMaxDepth) fail("nesting deeper than 64");
    if (c == '{') {
      ++i_;
      v.kind = JsonValue::Kind::kObject;
      if (take('}')) return v;
      do {
        space();
        if (i_ >= text_.size() || text_[i_] != '"') fail("expected a member name");
        std::string key = string();
        expect(':');
        v.object.emplace_back(std::move(key), value(depth + 1));
      } while (take(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      v.kind = JsonValue::Kind::kArray;
      if (take(']')) return v;
      do {
        v.array.push_back(value(depth + 1));
      } while (take(','));
      expect(']');
    } else if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      v.text = string();
    } else if (word("true")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = true;
    } else if (word("false")) {
      v.kind = JsonValue::Kind::kBool;
    } else if (word("null")) {
    } else {
      v.kind = JsonValue::Kind::kNumber;
      v.text = number();
    }
    return v;
  }

  std::string number() {
    const std::size_t start = i_;
    auto digits = [&] {
      const std::size_t from = i_;
      while (i_ < text_.size() && text_[i_] >= '0' && text_[i_] <= '9') ++i_;
      return i_ > from;
    };
    if (i_ < text_.size() && text_[i_] == '-') ++i_;
    if (i_ < text_.size() && text_[i_] == '0') {
      ++i_;
    } else if (!digits()) {
      fail("expected a value");
    }
    if (i_ < text_.size() && text_[i_] == '.') {
      ++i_;
      if (!digits()) fail("expected digits after '.'");
    }
    if (i_ < text_.size() && (text_[i_] == 'e' || text_[i_] == 'E')) {
      ++i_;
      if (i_ < text_.size() && (text_[i_] == '+' || text_[i_] == '-')) ++i_;
      if (!digits()) fail("expected an exponent");
    }
    return std::string(text_.substr(start, i_ - start));
  }

  uint32_t hex4() {
    if (text_.size() - i_ < 4) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = text_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        v |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        v |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        fail("bad \\u escape");
      }
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // A string literal starting at the opening quote.
  std::string string() {
    ++i_;
    std::string out;
    for (;;) {
      if (i_ >= text_.size()) fail("unterminated string");
      const char c = text_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= text_.size()) fail("unterminated escape");
      const char e = text_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!word("\\u")) fail("a lone high surrogate");
            const uint32_t low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("a bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("a lone low surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail(std::string("unknown escape \\") + e);
      }
    }
  }

  std::string_view text_;
  const std::string& source_;
  std::size_t i_ = 0;
};

}  // namespace

JsonValue parse_json(std::string_view text, const std::string& source) {
  return JsonParser(text, source).document();
}

}  // namespace trainyard
