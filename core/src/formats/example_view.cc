// tf.Example and tf.SequenceExample from the wire format (example.h), without Protobuf.
//
// The messages (core/proto/feature.proto, example.proto):
//   Example        { Features features = 1; }
//   SequenceExample{ Features context = 1; FeatureLists feature_lists = 2; }
//   Features       { map<string, Feature> feature = 1; }         entries {1: key, 2: value}
//   FeatureLists   { map<string, FeatureList> feature_list = 1; }
//   FeatureList    { repeated Feature feature = 1; }
//   Feature        { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
//                                 Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
//   Int64List { repeated int64 value = 1 [packed]; }
// A field whose number or wire type is not one of these is an unknown field and skipped, as
// protobuf's generated parsers do.
#include "trainyard/example.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "trainyard/error.h"

namespace trainyard {

std::size_t ExampleFeature::size() const {
  switch (kind_) {
    case Kind::kBytes:
      return bytes_.size();
    case Kind::kFloat:
      return floats_.size();
    case Kind::kInt64:
      return int64s_.size();
    case Kind::kNone:
      break;
  }
  return 0;
}

std::string ExampleFeature::description() const {
  const std::size_t n = size();
  const std::string values = std::to_string(n) + (n == 1 ? " value" : " values");
  switch (kind_) {
    case Kind::kBytes:
      return "a bytes list of " + values;
    case Kind::kFloat:
      return "a float list of " + values;
    case Kind::kInt64:
      return "an int64 list of " + values;
    case Kind::kNone:
      break;
  }
  return "an empty Feature (no list set)";
}

namespace {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// Nesting of messages and groups protobuf accepts (its default recursion limit).
constexpr int kMaxDepth = 100;

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF), as
// protobuf checks proto3 strings.
bool is_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    p += n + 1;
  }
  return true;
}

}  // namespace

// Reads one record. Every method takes the bytes of one message ([begin, end) of the record)
// and throws DataLoss through fail() on malformed input.
class ExampleParser {
 public:
  ExampleParser(std::string_view record, const RecordLocation& where, const char* type_name)
      : record_(record), where_(where), type_name_(type_name) {}

  ParsedExample example() {
    ParsedExample out;
    Span s = whole();
    while (!s.done()) {
      const Tag t = tag(s);
      if (t.field == 1 && t.wire == kLengthDelimited) {
        features(sub(s), out.features);
      } else {
        skip(s, t, 0);
      }
    }
    finish(out.features);
    return out;
  }

  ParsedSequenceExample sequence_example() {
    ParsedSequenceExample out;
    Span s = whole();
    while (!s.done()) {
      const Tag t = tag(s);
      if (t.field == 1 && t.wire == kLengthDelimited) {
        features(sub(s), out.context);
      } else if (t.field == 2 && t.wire == kLengthDelimited) {
        feature_lists(sub(s), out.feature_lists);
      } else {
        skip(s, t, 0);
      }
    }
    finish(out.context);
    finish(out.feature_lists);
    return out;
  }

 private:
  struct Span {
    const char* p;
    const char* end;
    bool done() const { return p == end; }
  };
  struct Tag {
    uint32_t field;
    uint32_t wire;
    const char* at;  // where the tag starts, for errors
  };

  Span whole() const { return {record_.data(), record_.data() + record_.size()}; }

  [[noreturn]] void fail(const char* at, const std::string& what) const {
    throw DataLoss(where_.file + ", record " + std::to_string(where_.record_index) +
                   ": the record (" + std::to_string(record_.size()) +
                   " bytes) does not parse as a serialized " + type_name_ + ": " + what +
                   " at byte " + std::to_string(at - record_.data()));
  }

  uint64_t varint(Span& s) const {
    const char* start = s.p;
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (s.p == s.end) fail(start, "truncated varint");
      const auto byte = static_cast<unsigned char>(*s.p++);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (byte < 0x80) return value;
    }
    fail(start, "varint longer than 10 bytes");
  }

  // A tag is a varint of at most 5 bytes, read modulo 2^32 as protobuf reads it.
  Tag tag(Span& s) const {
    const char* start = s.p;
    uint64_t t = 0;
    for (int shift = 0;; shift += 7) {
      if (s.p == s.end) fail(start, "truncated tag");
      if (shift == 35) fail(start, "tag longer than 5 bytes");
      const auto byte = static_cast<unsigned char>(*s.p++);
      t |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (byte < 0x80) break;
    }
    const auto bits = static_cast<uint32_t>(t);
    if ((bits >> 3) == 0) fail(start, "invalid field number 0");
    return {bits >> 3, bits & 7, start};
  }

  // The body of a length-delimited field whose tag was just read.
  Span sub(Span& s) const {
    const char* start = s.p;
    const uint64_t length = varint(s);
    if (length > static_cast<uint64_t>(s.end - s.p)) {
      fail(start, "length " + std::to_string(length) + " past the end of the message");
    }
    Span body{s.p, s.p + length};
    s.p = body.end;
    return body;
  }

  // Skips an unknown field's value (a group up to its end tag) of a message nested `level`
  // deep (the record's message is level 0).
  void skip(Span& s, const Tag& t, int level) const {
    const char* start = s.p;
    switch (t.wire) {
      case kVarint:
        varint(s);
        return;
      case kFixed64:
        if (s.end - s.p < 8) fail(start, "truncated fixed64");
        s.p += 8;
        return;
      case kLengthDelimited:
        sub(s);
        return;
      case kFixed32:
        if (s.end - s.p < 4) fail(start, "truncated fixed32");
        s.p += 4;
        return;
      case kStartGroup:
        if (level + 1 > kMaxDepth) fail(t.at, "groups nested too deeply");
        for (;;) {
          if (s.done()) fail(t.at, "unterminated group");
          const Tag inner = tag(s);
          if (inner.wire == kEndGroup) {
            if (inner.field != t.field) fail(inner.at, "end of group with the wrong field number");
            return;
          }
          skip(s, inner, level + 1);
        }
      case kEndGroup:
        fail(t.at, "end of group without a start");
      default:
        fail(t.at, "invalid wire type " + std::to_string(t.wire));
    }
  }

  std::string_view key(Span s) const {
    std::string_view k(s.p, static_cast<std::size_t>(s.end - s.p));
    if (!is_utf8(k)) fail(s.p, "a key that is not UTF-8");
    return k;
  }

  // One map entry: {1: key, 2: value}; a missing key is "", a missing value the default.
  template <class Value, class ParseValue>
  void entry(Span s, std::vector<std::pair<std::string_view, Value>>& entries,
             ParseValue parse_value) {
    entries.emplace_back();
    auto& [k, value] = entries.back();
    while (!s.done()) {
      const Tag t = tag(s);
      if (t.field == 1 && t.wire == kLengthDelimited) {
        k = key(sub(s));
      } else if (t.field == 2 && t.wire == kLengthDelimited) {
        parse_value(sub(s), value);
      } else {
        skip(s, t, 2);
      }
    }
  }

  void features(Span s, ExampleFeatures& out) {
    while (!s.done()) {
      const Tag t = tag(s);
      if (t.field == 1 && t.wire == kLengthDelimited) {
        entry(sub(s), out.entries_, [this](Span v, ExampleFeature& f) { feature(v, f, 3); });
      } else {
        skip(s, t, 1);
      }
    }
  }

  void feature_lists(Span s, ExampleMap<ExampleFeatureList>& out) {
    while (!s.done()) {
      const Tag t = tag(s);
      if (t.field == 1 && t.wire == kLengthDelimited) {
        entry(sub(s), out.entries_, [this](Span v, ExampleFeatureList& l) { feature_list(v, l); });
      } else {
        skip(s, t, 1);
      }
    }
  }

  void feature_list(Span s, ExampleFeatureList& out) {
    while (!s.done()) {
      const Tag t = tag(s);
      if (t.field == 1 && t.wire == kLengthDelimited) {
        out.emplace_back();
        feature(sub(s), out.back(), 4);
      } else {
        skip(s, t, 3);
      }
    }
  }

  // Merges one Feature message into `f`: the same list again appends, another list replaces.
  void feature(Span s, ExampleFeature& f, int level) {
    using Kind = ExampleFeature::Kind;
    while (!s.done()) {
      const Tag t = tag(s);
      if (t.wire != kLengthDelimited || t.field < 1 || t.field > 3) {
        skip(s, t, level);
        continue;
      }
      const Kind kind = t.field == 1 ? Kind::kBytes : t.field == 2 ? Kind::kFloat : Kind::kInt64;
      if (f.kind_ != kind) {
        f.bytes_.clear();
        f.floats_.clear();
        f.int64s_.clear();
        f.kind_ = kind;
      }
      Span list = sub(s);
      if (kind == Kind::kBytes) {
        bytes_list(list, f.bytes_, level + 1);
      } else if (kind == Kind::kFloat) {
        float_list(list, f.floats_, level + 1);
      } else {
        int64_list(list, f.int64s_, level + 1);
      }
    }
  }

  void bytes_list(Span s, std::vector<std::string_view>& out, int level) {
    while (!s.done()) {
      const Tag t = tag(s);
      if (t.field == 1 && t.wire == kLengthDelimited) {
        const Span v = sub(s);
        out.emplace_back(v.p, static_cast<std::size_t>(v.end - v.p));
      } else {
        skip(s, t, level);
      }
    }
  }

  void float_list(Span s, std::vector<float>& out, int level) {
    while (!s.done()) {
      const Tag t = tag(s);
      if (t.field == 1 && t.wire == kLengthDelimited) {
        const Span packed = sub(s);
        const auto bytes = static_cast<std::size_t>(packed.end - packed.p);
        if (bytes % 4 != 0) {
          fail(packed.p, "packed floats of " + std::to_string(bytes) + " bytes");
        }
        const std::size_t at = out.size();
        out.resize(at + bytes / 4);
        copy_floats(packed.p, bytes / 4, out.data() + at);
      } else if (t.field == 1 && t.wire == kFixed32) {
        if (s.end - s.p < 4) fail(s.p, "truncated float");
        out.emplace_back();
        copy_floats(s.p, 1, &out.back());
        s.p += 4;
      } else {
        skip(s, t, level);
      }
    }
  }

  void int64_list(Span s, std::vector<int64_t>& out, int level) {
    while (!s.done()) {
      const Tag t = tag(s);
      if (t.field == 1 && t.wire == kLengthDelimited) {
        Span packed = sub(s);
        while (!packed.done()) out.push_back(static_cast<int64_t>(varint(packed)));
      } else if (t.field == 1 && t.wire == kVarint) {
        out.push_back(static_cast<int64_t>(varint(s)));
      } else {
        skip(s, t, level);
      }
    }
  }

  // Little-endian IEEE floats, as the wire holds them.
  static void copy_floats(const char* in, std::size_t n, float* out) {
    if (n == 0) return;  // `out` may be an empty vector's null data()
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(out, in, n * 4);
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        uint32_t bits = 0;
        for (int b = 3; b >= 0; --b) bits = (bits << 8) | static_cast<unsigned char>(in[4 * i + b]);
        std::memcpy(out + i, &bits, 4);
      }
    }
  }

  // Sorts the entries by key; of a key that occurred more than once the last entry stays, as a
  // protobuf map keeps it.
  template <class Value>
  static void finish(ExampleMap<Value>& map) {
    auto& entries = map.entries_;
    if (entries.size() < 2) return;
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::size_t kept = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i + 1 < entries.size() && entries[i + 1].first == entries[i].first) continue;
      if (kept != i) entries[kept] = std::move(entries[i]);
      ++kept;
    }
    entries.resize(kept);
  }

  std::string_view record_;
  const RecordLocation& where_;
  const char* type_name_;
};

ParsedExample parse_example(std::string_view record, const RecordLocation& where) {
  return ExampleParser(record, where, "tf.Example").example();
}

ParsedSequenceExample parse_sequence_example(std::string_view record, const RecordLocation& where) {
  return ExampleParser(record, where, "tf.SequenceExample").sequence_example();
}

}  // namespace trainyard
