// The label map's text format reader and label_map_util's lookups (see label_map.h).
#include "trainyard/pkg/detection/label_map.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "trainyard/error.h"
#include "trainyard/user_file.h"

namespace trainyard::detection {
namespace {

enum class TokenKind { kEnd, kIdentifier, kNumber, kString, kSymbol };

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;  // identifier, number spelling, unescaped string, or the symbol
  int line = 0;
};

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kEnd:
      return "the end of the file";
    case TokenKind::kString:
      return "a string";
    default:
      return "'" + token.text + "'";
  }
}

// Splits the text into tokens one at a time; strings are unescaped and adjacent string
// literals joined, as protobuf's tokenizer and parser do.
class Lexer {
 public:
  Lexer(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw ConfigError(source_ + ":" + std::to_string(line) + ": " + what);
  }

  const Token& peek() {
    if (!has_peeked_) {
      peeked_ = read();
      has_peeked_ = true;
    }
    return peeked_;
  }

  Token next() {
    peek();
    has_peeked_ = false;
    return std::move(peeked_);
  }

 private:
  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  static bool is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  // One quoted literal starting at pos_ (the quote), unescaped onto `out`.
  void read_string_literal(std::string& out) {
    const char quote = text_[pos_++];
    const int start_line = line_;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') {
        fail(start_line, "string literal is not closed before the end of the line");
      }
      const char c = text_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
      } else {
        if (pos_ >= text_.size()) fail(line_, "string literal ends in a lone backslash");
        const char e = text_[pos_++];
        switch (e) {
          case 'a':
            out += '\a';
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
          case 'v':
            out += '\v';
            break;
          case '\\':
            out += '\\';
            break;
          case '?':
            out += '?';
            break;
          case '\'':
            out += '\'';
            break;
          case '"':
            out += '"';
            break;
          case 'x':
          case 'X': {
            int value = 0;
            int digits = 0;
            while (digits < 2 && pos_ < text_.size() && hex_value(text_[pos_]) >= 0) {
              value = value * 16 + hex_value(text_[pos_++]);
              ++digits;
            }
            if (digits == 0) fail(line_, "\\x escape without hex digits in a string literal");
            out += static_cast<char>(value);
            break;
          }
          case 'u':
          case 'U': {
            const int want = e == 'u' ? 4 : 8;
            uint32_t code = 0;
            for (int i = 0; i < want; ++i) {
              if (pos_ >= text_.size() || hex_value(text_[pos_]) < 0) {
                fail(line_, std::string("\\") + e + " escape needs " + std::to_string(want) +
                                " hex digits in a string literal");
              }
              code = code * 16 + static_cast<uint32_t>(hex_value(text_[pos_++]));
            }
            if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
              fail(line_, "\\" + std::string(1, e) + " escape is not a Unicode code point");
            }
            append_utf8(out, code);
            break;
          }
          default:
            if (e >= '0' && e <= '7') {
              int value = e - '0';
              for (int i = 0;
                   i < 2 && pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '7'; ++i) {
                value = value * 8 + (text_[pos_++] - '0');
              }
              if (value > 0xFF) fail(line_, "octal escape above \\377 in a string literal");
              out += static_cast<char>(value);
            } else {
              fail(line_, std::string("invalid escape sequence \\") + e + " in a string literal");
            }
        }
      }
      if (out.size() > kMaxLabelNameBytes) {
        fail(start_line, "string longer than " + std::to_string(kMaxLabelNameBytes) + " bytes");
      }
    }
  }

  Token read() {
    skip_space_and_comments();
    Token token;
    token.line = line_;
    if (pos_ >= text_.size()) return token;
    const char c = text_[pos_];
    if (is_ident_start(c)) {
      const std::size_t start = pos_;
      while (pos_ < text_.size() && (is_ident_start(text_[pos_]) || is_digit(text_[pos_]))) {
        ++pos_;
      }
      token.kind = TokenKind::kIdentifier;
      token.text = std::string(text_.substr(start, pos_ - start));
      if (token.text.size() > kMaxLabelNameBytes) fail(line_, "identifier too long");
      return token;
    }
    if (is_digit(c) || c == '-' || c == '.') {
      const std::size_t start = pos_;
      ++pos_;
      while (pos_ < text_.size() && (is_ident_start(text_[pos_]) || is_digit(text_[pos_]) ||
                                     text_[pos_] == '.' || text_[pos_] == '+' ||
                                     (text_[pos_] == '-' && pos_ > start &&
                                      (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E')))) {
        ++pos_;
        if (pos_ - start > 64) fail(line_, "number too long");
      }
      token.kind = TokenKind::kNumber;
      token.text = std::string(text_.substr(start, pos_ - start));
      return token;
    }
    if (c == '"' || c == '\'') {
      token.kind = TokenKind::kString;
      read_string_literal(token.text);
      // Adjacent literals are one string.
      while (true) {
        skip_space_and_comments();
        if (pos_ < text_.size() && (text_[pos_] == '"' || text_[pos_] == '\'')) {
          read_string_literal(token.text);
        } else {
          break;
        }
      }
      return token;
    }
    if (std::strchr("{}<>:;,[]", c) != nullptr) {
      ++pos_;
      token.kind = TokenKind::kSymbol;
      token.text = std::string(1, c);
      return token;
    }
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", byte);
      fail(line_, std::string("unexpected byte ") + hex);
    }
    fail(line_, std::string("unexpected character '") + c + "'");
  }

  std::string_view text_;
  const std::string& source_;
  std::size_t pos_ = 0;
  int line_ = 1;
  Token peeked_;
  bool has_peeked_ = false;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : lexer_(text, source) {}

  std::vector<LabelMapItem> parse() {
    std::vector<LabelMapItem> items;
    while (lexer_.peek().kind != TokenKind::kEnd) {
      Token field = lexer_.next();
      if (field.kind != TokenKind::kIdentifier) {
        lexer_.fail(field.line, "expected a field name (item), found " + describe(field));
      }
      if (field.text != "item") {
        lexer_.fail(field.line, "StringIntLabelMap has no field '" + field.text +
                                    "' (its only field is 'item')");
      }
      if (items.size() >= kMaxLabelMapItems) {
        lexer_.fail(field.line,
                    "more than " + std::to_string(kMaxLabelMapItems) + " items in the label map");
      }
      items.push_back(parse_item(field.line));
      skip_separator();
    }
    return items;
  }

 private:
  void skip_separator() {
    const Token& t = lexer_.peek();
    if (t.kind == TokenKind::kSymbol && (t.text == ";" || t.text == ",")) lexer_.next();
  }

  bool is_symbol(const Token& t, const char* s) {
    return t.kind == TokenKind::kSymbol && t.text == s;
  }

  void expect_colon(const Token& field) {
    Token t = lexer_.next();
    if (!is_symbol(t, ":")) {
      lexer_.fail(t.line, "expected ':' after '" + field.text + "', found " + describe(t));
    }
  }

  // Opens a message value: an optional ':' then '{' or '<'; returns the closing symbol.
  std::string open_message(const Token& field) {
    if (is_symbol(lexer_.peek(), ":")) lexer_.next();
    Token t = lexer_.next();
    if (is_symbol(t, "{")) return "}";
    if (is_symbol(t, "<")) return ">";
    lexer_.fail(t.line, "expected '{' after '" + field.text + "', found " + describe(t));
  }

  std::string read_string(const Token& field) {
    expect_colon(field);
    Token t = lexer_.next();
    if (t.kind != TokenKind::kString) {
      lexer_.fail(t.line, "field '" + field.text + "' takes a string, found " + describe(t));
    }
    return std::move(t.text);
  }

  // An int32 literal as protobuf's parser takes it: optional '-', decimal, 0x hex or 0 octal.
  int32_t parse_int32(const Token& field, const Token& t) {
    if (t.kind != TokenKind::kNumber) {
      lexer_.fail(t.line, "field '" + field.text + "' takes an integer, found " + describe(t));
    }
    std::string_view s = t.text;
    const bool negative = !s.empty() && s.front() == '-';
    if (negative) s.remove_prefix(1);
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
      base = 16;
      s.remove_prefix(2);
    } else if (s.size() > 1 && s[0] == '0') {
      base = 8;
      s.remove_prefix(1);
    }
    if (s.empty()) {
      lexer_.fail(t.line, "field '" + field.text + "' takes an integer, found '" + t.text + "'");
    }
    int64_t value = 0;
    for (char c : s) {
      int digit = -1;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      if (digit < 0 || digit >= base) {
        lexer_.fail(t.line, "field '" + field.text + "' takes an integer, found '" + t.text + "'");
      }
      value = value * base + digit;
      if (value > int64_t{1} << 32) break;
    }
    if (negative) value = -value;
    if (value < std::numeric_limits<int32_t>::min() ||
        value > std::numeric_limits<int32_t>::max()) {
      lexer_.fail(t.line, "field '" + field.text + "': " + t.text + " is out of int32 range");
    }
    return static_cast<int32_t>(value);
  }

  int32_t read_int32(const Token& field) {
    expect_colon(field);
    return parse_int32(field, lexer_.next());
  }

  // A repeated int32: `f: 1` or `f: [1, 2]`; the values are checked and dropped.
  void skip_repeated_int32(const Token& field) {
    expect_colon(field);
    if (!is_symbol(lexer_.peek(), "[")) {
      parse_int32(field, lexer_.next());
      return;
    }
    lexer_.next();
    if (is_symbol(lexer_.peek(), "]")) {
      lexer_.next();
      return;
    }
    while (true) {
      parse_int32(field, lexer_.next());
      Token t = lexer_.next();
      if (is_symbol(t, "]")) return;
      if (!is_symbol(t, ",")) {
        lexer_.fail(t.line, "expected ',' or ']' in the list of '" + field.text + "', found " +
                                describe(t));
      }
    }
  }

  void skip_frequency(const Token& field) {
    expect_colon(field);
    Token t = lexer_.next();
    if (t.kind == TokenKind::kIdentifier) {
      if (t.text != "UNSPECIFIED" && t.text != "FREQUENT" && t.text != "COMMON" &&
          t.text != "RARE") {
        lexer_.fail(t.line,
                    "field 'frequency' takes UNSPECIFIED, FREQUENT, COMMON or RARE, "
                    "found '" +
                        t.text + "'");
      }
      return;
    }
    const int32_t value = parse_int32(field, t);
    if (value < 0 || value > 3) {
      lexer_.fail(t.line, "field 'frequency': " + t.text + " is not a LVISFrequency value");
    }
  }

  void once(std::map<std::string, int>& seen, const Token& field) {
    auto [it, inserted] = seen.emplace(field.text, field.line);
    if (!inserted) {
      lexer_.fail(field.line, "StringIntLabelMapItem field '" + field.text +
                                  "' given twice (first on line " + std::to_string(it->second) +
                                  ")");
    }
  }

  LabelMapItem parse_item(int line) {
    Token item_token{TokenKind::kIdentifier, "item", line};
    const std::string close = open_message(item_token);
    LabelMapItem item;
    item.line = line;
    std::map<std::string, int> seen;
    while (true) {
      Token field = lexer_.next();
      if (field.kind == TokenKind::kSymbol && field.text == close) break;
      if (field.kind == TokenKind::kEnd) {
        lexer_.fail(line, "item is not closed with '" + close + "' before the end of the file");
      }
      if (field.kind != TokenKind::kIdentifier) {
        lexer_.fail(field.line,
                    "expected a field name or '" + close + "' in item, found " + describe(field));
      }
      if (field.text == "name") {
        once(seen, field);
        item.name = read_string(field);
      } else if (field.text == "display_name") {
        once(seen, field);
        item.display_name = read_string(field);
        item.has_display_name = true;
      } else if (field.text == "id") {
        once(seen, field);
        item.id = read_int32(field);
      } else if (field.text == "ancestor_ids" || field.text == "descendant_ids") {
        skip_repeated_int32(field);
      } else if (field.text == "instance_count") {
        once(seen, field);
        read_int32(field);
      } else if (field.text == "frequency") {
        once(seen, field);
        skip_frequency(field);
      } else if (field.text == "keypoints") {
        lexer_.fail(field.line,
                    "StringIntLabelMapItem field 'keypoints' is not supported (keypoint label "
                    "maps are not read; remove the keypoints)");
      } else {
        lexer_.fail(field.line, "StringIntLabelMapItem has no field '" + field.text +
                                    "' (known: name, id, display_name; ignored: ancestor_ids, "
                                    "descendant_ids, frequency, instance_count)");
      }
      skip_separator();
    }
    return item;
  }

  Lexer lexer_;
};

std::string item_ref(const LabelMapItem& item) {
  return "the item on line " + std::to_string(item.line);
}

void validate(const LabelMap& map) {
  const auto fail = [&](const LabelMapItem& item, const std::string& what) {
    throw ConfigError(map.source + ":" + std::to_string(item.line) + ": " + what);
  };
  std::unordered_map<int32_t, const LabelMapItem*> by_id;
  std::unordered_map<std::string_view, const LabelMapItem*> by_name;
  std::unordered_map<std::string_view, const LabelMapItem*> by_display_name;
  for (const LabelMapItem& item : map.items) {
    if (item.id < 0) {
      fail(item, "label map ids must be >= 0, item '" + item.name + "' has id " +
                     std::to_string(item.id));
    }
    if (item.id == 0 && item.name != "background" &&
        !(item.has_display_name && item.display_name == "background")) {
      fail(item, "label map id 0 is reserved for the background label, item '" + item.name +
                     "' has it (only an item named 'background' may)");
    }
    if (auto [it, inserted] = by_id.emplace(item.id, &item); !inserted) {
      fail(item, "duplicate id " + std::to_string(item.id) + ": item '" + item.name +
                     "' and item '" + it->second->name + "' (" + item_ref(*it->second) + ")");
    }
    if (auto [it, inserted] = by_name.emplace(item.name, &item); !inserted) {
      fail(item, "duplicate name '" + item.name + "': item with id " + std::to_string(item.id) +
                     " and item with id " + std::to_string(it->second->id) + " (" +
                     item_ref(*it->second) + ")");
    }
    const std::string& shown = item.label(true);
    if (auto [it, inserted] = by_display_name.emplace(shown, &item); !inserted) {
      fail(item, "duplicate display name '" + shown + "': item with id " + std::to_string(item.id) +
                     " and item with id " + std::to_string(it->second->id) + " (" +
                     item_ref(*it->second) + "; an item without display_name shows its name)");
    }
  }
}

}  // namespace

LabelMap parse_label_map(std::string_view text, const std::string& name_for_errors) {
  if (text.size() > kMaxLabelMapBytes) {
    throw ConfigError(name_for_errors + ": label map of " + std::to_string(text.size()) +
                      " bytes is larger than the limit of " + std::to_string(kMaxLabelMapBytes));
  }
  LabelMap map;
  map.source = name_for_errors;
  map.items = Parser(text, name_for_errors).parse();
  validate(map);
  return map;
}

LabelMap load_label_map(const std::string& path) {
  return parse_label_map(read_user_file(path, "label map", kMaxLabelMapBytes), path);
}

std::unordered_map<std::string, int32_t> label_map_dict(const LabelMap& map,
                                                        bool use_display_name) {
  std::unordered_map<std::string, int32_t> dict;
  for (const LabelMapItem& item : map.items) dict.emplace(item.label(use_display_name), item.id);
  return dict;
}

std::optional<int32_t> label_map_id(const LabelMap& map, std::string_view label,
                                    bool use_display_name) {
  for (const LabelMapItem& item : map.items) {
    if (item.label(use_display_name) == label) return item.id;
  }
  return std::nullopt;
}

const LabelMapItem* label_map_item(const LabelMap& map, int32_t id) {
  for (const LabelMapItem& item : map.items) {
    if (item.id == id) return &item;
  }
  return nullptr;
}

const std::string& label_map_name(const LabelMap& map, int32_t id, bool use_display_name) {
  if (const LabelMapItem* item = label_map_item(map, id)) return item->label(use_display_name);
  std::ostringstream known;
  std::vector<int32_t> ids;
  for (const LabelMapItem& item : map.items) ids.push_back(item.id);
  std::sort(ids.begin(), ids.end());
  if (ids.empty()) {
    known << "it has no items";
  } else {
    known << "its ids are " << ids.front() << ".." << ids.back() << " (" << ids.size() << " items)";
  }
  throw NotFound("label map " + map.source + " has no id " + std::to_string(id) + "; " +
                 known.str());
}

int32_t label_map_max_id(const LabelMap& map) {
  int32_t max_id = 0;
  for (const LabelMapItem& item : map.items) max_id = std::max(max_id, item.id);
  return max_id;
}

std::vector<Category> label_map_categories(const LabelMap& map, bool use_display_name) {
  std::vector<Category> categories;
  for (const LabelMapItem& item : map.items) {
    if (item.id >= 1) categories.push_back({item.id, item.label(use_display_name)});
  }
  return categories;
}

}  // namespace trainyard::detection
