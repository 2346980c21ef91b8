// The SDK's tf.Example view (example.h) against protobuf's own parser of the same messages:
// for every input, both accept or both reject, and what they accept reads the same. Inputs are
// records TensorFlow's encoders write, the encodings they do not write but protobuf accepts
// (unpacked numbers, repeated keys and lists, unknown fields, groups), every truncation of a
// record, and seeded random corruptions of them.
#include "trainyard/example.h"

#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard {
namespace {

const RecordLocation kWhere{"train-00.tfrecord", 3};

// Protobuf logs every key that is not UTF-8 it rejects; the corruptions make thousands.
const bool kQuietProtobuf = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

// A canonical form both parsers' results convert to: key -> "kind:values".
using Canonical = std::map<std::string, std::string>;

std::string float_text(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return std::to_string(bits);  // bit patterns, so NaNs and -0 compare exactly
}

std::string canonical(const wire::tf::Feature& f) {
  std::string out;
  switch (f.kind_case()) {
    case wire::tf::Feature::kBytesList:
      out = "b:";
      for (const std::string& v : f.bytes_list().value()) out += std::to_string(v.size()) + v + ",";
      break;
    case wire::tf::Feature::kFloatList:
      out = "f:";
      for (float v : f.float_list().value()) out += float_text(v) + ",";
      break;
    case wire::tf::Feature::kInt64List:
      out = "i:";
      for (int64_t v : f.int64_list().value()) out += std::to_string(v) + ",";
      break;
    case wire::tf::Feature::KIND_NOT_SET:
      out = "none";
      break;
  }
  return out;
}

std::string canonical(const ExampleFeature& f) {
  std::string out;
  switch (f.kind()) {
    case ExampleFeature::Kind::kBytes:
      out = "b:";
      for (std::string_view v : f.bytes()) out += std::to_string(v.size()) + std::string(v) + ",";
      break;
    case ExampleFeature::Kind::kFloat:
      out = "f:";
      for (float v : f.floats()) out += float_text(v) + ",";
      break;
    case ExampleFeature::Kind::kInt64:
      out = "i:";
      for (int64_t v : f.int64s()) out += std::to_string(v) + ",";
      break;
    case ExampleFeature::Kind::kNone:
      out = "none";
      break;
  }
  return out;
}

Canonical canonical(const wire::tf::Features& features) {
  Canonical out;
  for (const auto& [key, f] : features.feature()) out[key] = canonical(f);
  return out;
}

Canonical canonical(const ExampleFeatures& features) {
  Canonical out;
  for (const auto& [key, f] : features) out[std::string(key)] = canonical(f);
  return out;
}

Canonical canonical(const wire::tf::FeatureLists& lists) {
  Canonical out;
  for (const auto& [key, list] : lists.feature_list()) {
    std::string v;
    for (const wire::tf::Feature& f : list.feature()) v += "[" + canonical(f) + "]";
    out[key] = v;
  }
  return out;
}

Canonical canonical(const ExampleMap<ExampleFeatureList>& lists) {
  Canonical out;
  for (const auto& [key, list] : lists) {
    std::string v;
    for (const ExampleFeature& f : list) v += "[" + canonical(f) + "]";
    out[std::string(key)] = v;
  }
  return out;
}

// Both parsers on `record`; a mismatch is a failure naming the input.
void expect_same_example(const std::string& record, const std::string& label) {
  wire::tf::Example reference;
  const bool reference_ok = reference.ParseFromString(record);
  std::string error;
  ParsedExample ours;
  try {
    ours = parse_example(record, kWhere);
  } catch (const DataLoss& e) {
    error = e.what();
  }
  ASSERT_EQ(reference_ok, error.empty())
      << label << ": protobuf " << (reference_ok ? "accepts" : "rejects")
      << " it; the view says: " << (error.empty() ? "accepted" : error);
  if (reference_ok) {
    EXPECT_EQ(canonical(reference.features()), canonical(ours.features)) << label;
  } else {
    EXPECT_EQ(error.rfind("train-00.tfrecord, record 3: the record (", 0), 0u) << error;
  }
}

void expect_same_sequence(const std::string& record, const std::string& label) {
  wire::tf::SequenceExample reference;
  const bool reference_ok = reference.ParseFromString(record);
  std::string error;
  ParsedSequenceExample ours;
  try {
    ours = parse_sequence_example(record, kWhere);
  } catch (const DataLoss& e) {
    error = e.what();
  }
  ASSERT_EQ(reference_ok, error.empty())
      << label << ": protobuf " << (reference_ok ? "accepts" : "rejects")
      << " it; the view says: " << (error.empty() ? "accepted" : error);
  if (reference_ok) {
    EXPECT_EQ(canonical(reference.context()), canonical(ours.context)) << label;
    EXPECT_EQ(canonical(reference.feature_lists()), canonical(ours.feature_lists)) << label;
  }
}

// Wire-format writers for the encodings protobuf's serializer never produces.
std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string tag(uint32_t field, uint32_t wire) { return varint((uint64_t{field} << 3) | wire); }
std::string delimited(uint32_t field, const std::string& body) {
  return tag(field, 2) + varint(body.size()) + body;
}
std::string fixed32(float f) {
  std::string out(4, '\0');
  std::memcpy(out.data(), &f, 4);
  return out;
}
// Features { feature { key: k value: <feature> } } as an Example.
std::string example_with(const std::string& key, const std::string& feature) {
  return delimited(1, delimited(1, delimited(1, key) + delimited(2, feature)));
}

wire::tf::Example sample_example() {
  wire::tf::Example e;
  auto& map = *e.mutable_features()->mutable_feature();
  map["id"].mutable_bytes_list()->add_value("vid\0eo", 6);
  for (float v : {0.5f, -1.25f, 3e-39f, -0.0f}) map["mean_rgb"].mutable_float_list()->add_value(v);
  for (int64_t v : {0LL, 7LL, -1LL, 1LL << 62}) map["labels"].mutable_int64_list()->add_value(v);
  map["empty"];
  map["none_floats"].mutable_float_list();
  return e;
}

wire::tf::SequenceExample sample_sequence() {
  wire::tf::SequenceExample s;
  (*s.mutable_context()->mutable_feature())["id"].mutable_bytes_list()->add_value("v");
  (*s.mutable_context()->mutable_feature())["labels"].mutable_int64_list()->add_value(3);
  auto& lists = *s.mutable_feature_lists()->mutable_feature_list();
  for (int t = 0; t < 3; ++t) {
    lists["rgb"].add_feature()->mutable_bytes_list()->add_value(std::string(4, char('a' + t)));
    lists["audio"].add_feature()->mutable_bytes_list()->add_value(std::string(2, char('x' + t)));
  }
  lists["empty_list"];
  return s;
}

TEST(ExampleViewTest, ReadsWhatProtobufWrites) {
  const std::string record = sample_example().SerializeAsString();
  expect_same_example(record, "sample");
  ParsedExample e = parse_example(record, kWhere);
  ASSERT_NE(e.features.find("id"), nullptr);
  EXPECT_EQ(e.features.find("id")->bytes()[0], std::string_view("vid\0eo", 6));
  EXPECT_EQ(e.features.find("mean_rgb")->floats().size(), 4u);
  EXPECT_EQ(e.features.find("labels")->int64s()[2], -1);
  EXPECT_EQ(e.features.find("empty")->kind(), ExampleFeature::Kind::kNone);
  EXPECT_EQ(e.features.find("empty")->description(), "an empty Feature (no list set)");
  EXPECT_EQ(e.features.find("mean_rgb")->description(), "a float list of 4 values");
  EXPECT_EQ(e.features.find("none_floats")->kind(), ExampleFeature::Kind::kFloat);
  EXPECT_EQ(e.features.find("missing"), nullptr);
  EXPECT_EQ(e.features.describe_keys("features"),
            "features 'empty', 'id', 'labels', 'mean_rgb', 'none_floats'");
  expect_same_sequence(sample_sequence().SerializeAsString(), "sample sequence");
  expect_same_example("", "empty record");
  expect_same_sequence("", "empty sequence record");
}

TEST(ExampleViewTest, AcceptsWhatProtobufAcceptsAndMergesAsItDoes) {
  const std::string floats_unpacked =
      tag(1, 5) + fixed32(1.5f) + tag(1, 5) + fixed32(2.5f) + delimited(1, fixed32(3.5f));
  expect_same_example(example_with("f", delimited(2, floats_unpacked)), "unpacked floats");
  const std::string ints_unpacked = tag(1, 0) + varint(5) + delimited(1, varint(6) + varint(7));
  expect_same_example(example_with("i", delimited(3, ints_unpacked)), "unpacked int64s");
  // The same list twice appends; another list replaces; the same key twice keeps the last.
  expect_same_example(example_with("f", delimited(2, delimited(1, fixed32(1))) +
                                            delimited(2, delimited(1, fixed32(2)))),
                      "float list twice");
  expect_same_example(
      example_with("k", delimited(2, delimited(1, fixed32(1))) + delimited(1, delimited(1, "x"))),
      "float list then bytes list");
  expect_same_example(example_with("k", delimited(3, tag(1, 0) + varint(1))) +
                          example_with("k", delimited(1, delimited(1, "y"))) +
                          example_with("a", ""),
                      "one key in two entries");
  ParsedExample twice = parse_example(example_with("k", delimited(3, tag(1, 0) + varint(1))) +
                                          example_with("k", delimited(1, delimited(1, "y"))),
                                      kWhere);
  ASSERT_EQ(twice.features.size(), 1u);
  EXPECT_EQ(twice.features.find("k")->kind(), ExampleFeature::Kind::kBytes);
  // Entries without a key or a value; unknown fields of every wire type; a group.
  expect_same_example(delimited(1, delimited(1, delimited(2, delimited(1, delimited(1, "v"))))),
                      "entry without key");
  expect_same_example(delimited(1, delimited(1, delimited(1, "k"))), "entry without value");
  const std::string unknown = tag(9, 0) + varint(300) + tag(10, 1) + std::string(8, 'x') +
                              delimited(11, "abc") + tag(12, 5) + std::string(4, 'y') + tag(13, 3) +
                              tag(14, 0) + varint(1) + tag(13, 4);
  expect_same_example(unknown + example_with("k", unknown + delimited(2, unknown)), "unknowns");
  // A known field number with another wire type is an unknown field.
  expect_same_example(tag(1, 0) + varint(5) + example_with("k", tag(2, 5) + fixed32(1)),
                      "wire type mismatch");
  // Negative and 10-byte int64s.
  expect_same_example(
      example_with("i", delimited(3, delimited(1, varint(~0ULL) + varint(1ULL << 63)))),
      "extreme int64s");
}

TEST(ExampleViewTest, RejectsWhatProtobufRejects) {
  expect_same_example(example_with("\xff\xfe", delimited(1, "")), "key not UTF-8");
  expect_same_example(example_with("\xed\xa0\x80", delimited(1, "")), "surrogate key");
  expect_same_example(example_with("\xc0\x80", delimited(1, "")), "overlong key");
  expect_same_example(example_with("ok\xe2\x82\xac", delimited(1, "")), "euro sign key");
  expect_same_example(example_with("f", delimited(2, delimited(1, "abcde"))),
                      "packed floats not a multiple of 4");
  expect_same_example(example_with("i", delimited(3, delimited(1, "\x80"))),
                      "truncated packed varint");
  expect_same_example(tag(3, 4), "end group at top level");
  expect_same_example(tag(3, 3) + tag(4, 4), "group ended by another field");
  expect_same_example(tag(3, 3), "unterminated group");
  expect_same_example(tag(3, 6), "wire type 6");
  expect_same_example(std::string(1, '\0'), "tag 0");
  expect_same_example(std::string("\x88\x80\x80\x80\x80\x00", 6), "6-byte tag");
  // A 5-byte tag past 32 bits keeps its low 32 (the fuzzer found this one).
  expect_same_example(std::string("\xf5\xf6\xf5\xfa\x61", 5) + "abcd", "tag past 32 bits");
  expect_same_example(std::string("\x80\x80\x80\x80\x10", 5), "tag of 2^32");
  expect_same_example(tag(9, 0) + std::string(11, '\xff'), "11-byte varint");
  expect_same_example(tag(9, 1) + "1234567", "truncated fixed64");
  std::string deep;
  for (int i = 0; i < 120; ++i) deep += tag(9, 3);
  for (int i = 0; i < 120; ++i) deep += tag(9, 4);
  expect_same_example(deep, "groups 120 deep");
}

TEST(ExampleViewTest, EveryTruncationAgreesWithProtobuf) {
  const std::string example = sample_example().SerializeAsString();
  for (std::size_t n = 0; n < example.size(); ++n) {
    expect_same_example(example.substr(0, n), "example cut at " + std::to_string(n));
  }
  const std::string sequence = sample_sequence().SerializeAsString();
  for (std::size_t n = 0; n < sequence.size(); ++n) {
    expect_same_sequence(sequence.substr(0, n), "sequence cut at " + std::to_string(n));
  }
}

TEST(ExampleViewTest, RandomCorruptionsAgreeWithProtobuf) {
  std::mt19937 rng(20261124);
  const std::string records[] = {sample_example().SerializeAsString(),
                                 sample_sequence().SerializeAsString()};
  for (int i = 0; i < 20000; ++i) {
    const bool sequence = i % 2 == 1;
    std::string r = records[sequence];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % r.size();
      switch (rng() % 3) {
        case 0:
          r[at] = static_cast<char>(rng());
          break;
        case 1:
          r[at] = static_cast<char>(r[at] ^ (1 << (rng() % 8)));
          break;
        default:
          r.erase(at, 1 + rng() % 3);
          if (r.empty()) r = "x";
          break;
      }
    }
    if (sequence) {
      expect_same_sequence(r, "corruption " + std::to_string(i));
    } else {
      expect_same_example(r, "corruption " + std::to_string(i));
    }
    if (testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace trainyard
