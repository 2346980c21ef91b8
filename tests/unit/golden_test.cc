// Interoperability with real TensorFlow: reads the golden files that TensorFlow itself wrote
// (tests/golden/make_golden.py, which records the TensorFlow version used) with Trainyard's C++
// APIs and checks them against tests/golden/manifest.json. Needs no TensorFlow at test time.
//
//   records.tfrecord(.gz)  TFRecordReader (plain, GZIP); TFRecordWriter reproduces TF's bytes
//   video.tfrecord         YT8MAggregatedFeatureReader through the PluginRegistry
//   frame.tfrecord         YT8MFrameFeatureReader through the PluginRegistry
//   tf1_checkpoint/        CheckpointReader, latest_checkpoint (tf.compat.v1.train.Saver)
//   tf2_checkpoint/        CheckpointReader, latest_checkpoint (tf.train.CheckpointManager)
//   events/{tf1,tf2}/      EventFileReader (simple_value and rank-0 tensor scalars)
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "test_registry.h"
#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/options.h"
#include "trainyard/reader.h"
#include "trainyard/tensor.h"
#include "trainyard/wire/event.pb.h"
#include "trainyard/wire/example.pb.h"
#include "trainyard/wire/summary.pb.h"

#ifndef TRAINYARD_GOLDEN_DIR
#error "TRAINYARD_GOLDEN_DIR must name tests/golden"
#endif

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

const fs::path kGolden = TRAINYARD_GOLDEN_DIR;

std::string golden(const std::string& relative) { return (kGolden / relative).string(); }

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// --- The manifest -------------------------------------------------------------------------------

const Struct& manifest() {
  static const Struct* instance = [] {
    auto* s = new Struct;
    const std::string text = file_bytes(golden("manifest.json"));
    const auto status = google::protobuf::util::JsonStringToMessage(text, s);
    if (!status.ok()) {
      ADD_FAILURE() << "cannot parse " << golden("manifest.json") << ": " << status.ToString();
    }
    return s;
  }();
  return *instance;
}

const Value& at(const Struct& s, const std::string& key) {
  static const Value kNull;
  auto it = s.fields().find(key);
  if (it == s.fields().end()) {
    ADD_FAILURE() << "manifest has no key '" << key << "'";
    return kNull;
  }
  return it->second;
}
const Value& at(const Value& v, const std::string& key) { return at(v.struct_value(), key); }
const Value& at(const std::string& key) { return at(manifest(), key); }

std::string str(const Value& v) { return v.string_value(); }
double num(const Value& v) { return v.number_value(); }
int64_t int_of(const Value& v) {
  // Integers that may exceed 2^53 travel as strings.
  if (v.kind_case() == Value::kStringValue) return std::stoll(v.string_value());
  return static_cast<int64_t>(v.number_value());
}
const ListValue& list(const Value& v) { return v.list_value(); }

std::vector<int64_t> ints_of(const Value& v) {
  std::vector<int64_t> out;
  for (const Value& x : list(v).values()) out.push_back(int_of(x));
  return out;
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// --- Shared helpers -----------------------------------------------------------------------------

PluginRegistry& registry() { return test::plugin_registry(); }

Backend& cpu() {
  static std::shared_ptr<Backend> backend = registry().create<Backend>(ClassKind::kBackend, "cpu");
  return *backend;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
uint64_t bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

// Every record of `path`, checking that the file ends cleanly.
std::vector<std::string> read_records(const std::string& path, Compression compression) {
  TFRecordReader reader(path, compression);
  std::vector<std::string> records;
  std::string record;
  while (true) {
    TFRecordReader::Result r = reader.read(&record);
    if (r.kind == TFRecordReader::Result::kEndOfFile) break;
    EXPECT_EQ(r.kind, TFRecordReader::Result::kRecord) << path << ": " << r.message;
    if (r.kind != TFRecordReader::Result::kRecord) break;
    records.push_back(record);
  }
  return records;
}

std::vector<float> floats_of(const ParsedRecord& record, const std::string& name) {
  const ParsedFeature& f = record.features.at(name);
  EXPECT_EQ(f.dtype, DType::kF32) << name;
  std::vector<float> v(f.bytes.size() / sizeof(float));
  std::memcpy(v.data(), f.bytes.data(), v.size() * sizeof(float));
  return v;
}

int32_t num_frames_of(const ParsedRecord& record) {
  const ParsedFeature& f = record.features.at("num_frames");
  EXPECT_EQ(f.dtype, DType::kI32);
  int32_t v = -1;
  EXPECT_EQ(f.bytes.size(), sizeof v);
  std::memcpy(&v, f.bytes.data(), sizeof v);
  return v;
}

std::vector<int64_t> hot_classes(const std::vector<float>& labels) {
  std::vector<int64_t> hot;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == 1.0f) {
      hot.push_back(static_cast<int64_t>(i));
    } else {
      EXPECT_EQ(labels[i], 0.0f) << "class " << i;
    }
  }
  return hot;
}

std::vector<int64_t> sorted_unique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// --- (a) TFRecord -------------------------------------------------------------------------------

std::vector<std::string> expected_records() {
  std::vector<std::string> out;
  for (const Value& hex : list(at(at("tfrecord"), "records_hex")).values()) {
    out.push_back(unhex(str(hex)));
  }
  return out;
}

TEST(GoldenTFRecordTest, ReadsTensorFlowsPlainFileIncludingTheEmptyRecord) {
  const std::vector<std::string> want = expected_records();
  ASSERT_EQ(want.size(), 5u);
  ASSERT_TRUE(want[1].empty());
  const std::string path = golden(str(at(at("tfrecord"), "plain_file")));
  EXPECT_EQ(read_records(path, Compression::kAuto), want);
  EXPECT_EQ(read_records(path, Compression::kNone), want);

  const std::string bytes = file_bytes(path);
  EXPECT_EQ(bytes.size(), static_cast<std::size_t>(num(at(at("tfrecord"), "plain_size"))));
  EXPECT_EQ(bytes.substr(0, 21), unhex(str(at(at("tfrecord"), "plain_first_record_hex"))));
  // The format doc's golden vectors, now confirmed against TensorFlow's output.
  EXPECT_EQ(bytes.substr(0, 21), unhex("0500000000000000eab2043e68656c6c6fbb1f1c19"));
  EXPECT_EQ(bytes.substr(21, 16), unhex("000000000000000029039807d8ea82a2"));

  // Offsets: each record starts where the previous one's 16 bytes of framing end.
  TFRecordReader reader(path);
  std::string record;
  uint64_t expected_offset = 0;
  for (const std::string& r : want) {
    TFRecordReader::Result result = reader.read(&record);
    ASSERT_EQ(result.kind, TFRecordReader::Result::kRecord);
    EXPECT_EQ(result.offset, expected_offset);
    expected_offset += 16 + r.size();
  }
  EXPECT_EQ(reader.read(&record).kind, TFRecordReader::Result::kEndOfFile);
  EXPECT_EQ(reader.offset(), bytes.size());
}

TEST(GoldenTFRecordTest, OurWriterReproducesTensorFlowsBytesExactly) {
  const fs::path out =
      fs::temp_directory_path() / ("trainyard_golden_" + std::to_string(::getpid()) + ".tfrecord");
  {
    TFRecordWriter writer(out.string());
    for (const std::string& r : expected_records()) writer.write(r);
    writer.close();
  }
  const std::string ours = file_bytes(out.string());
  fs::remove(out);
  EXPECT_EQ(ours, file_bytes(golden(str(at(at("tfrecord"), "plain_file")))));
}

TEST(GoldenTFRecordTest, ReadsTensorFlowsGzipFile) {
  const std::string path = golden(str(at(at("tfrecord"), "gzip_file")));
  const std::string bytes = file_bytes(path);
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
  EXPECT_EQ(read_records(path, Compression::kAuto), expected_records());
  EXPECT_EQ(read_records(path, Compression::kGzip), expected_records());

  // Seeking in the uncompressed stream lands on the third record.
  TFRecordReader reader(path, Compression::kGzip);
  std::string record;
  uint64_t third = 0;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(reader.read_or_throw(&record));
  third = reader.offset();
  reader.seek(0);
  reader.seek(third);
  ASSERT_TRUE(reader.read_or_throw(&record));
  EXPECT_EQ(record, expected_records()[2]);
}

// --- (b) YouTube-8M video level -----------------------------------------------------------------

// make_golden.py's formula_value: computed in double, rounded once to float.
float formula_value(int64_t i, int64_t seed) {
  return static_cast<float>(static_cast<double>((i * 37 + seed * 11) % 1000) / 1000.0 - 0.5);
}

std::vector<float> expected_vector(const Value& video, const std::string& feature) {
  const Value& spec = at(video, feature);
  std::vector<float> v;
  for (int64_t i = 0; i < int_of(at(spec, "size")); ++i) {
    v.push_back(formula_value(i, int_of(at(spec, "seed"))));
  }
  for (const Value& o : list(at(video, "overrides")).values()) {
    if (str(at(o, "feature")) == feature) {
      v.at(static_cast<std::size_t>(int_of(at(o, "index")))) =
          static_cast<float>(num(at(o, "value")));
    }
  }
  // Cross-check the formula against the values the script actually wrote.
  double sum = 0;
  for (float x : v) sum += x;
  const double want = num(at(spec, "sum"));
  EXPECT_NEAR(sum, want, 1e-12 * std::max(1.0, std::fabs(want))) << feature;
  for (const auto& [index, value] : at(spec, "samples").struct_value().fields()) {
    EXPECT_EQ(bits(v.at(std::stoul(index))), bits(static_cast<float>(num(value))))
        << feature << "[" << index << "]";
  }
  return v;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int mismatches = 0;
  for (std::size_t i = 0; i < got.size() && mismatches < 5; ++i) {
    if (bits(got[i]) != bits(want[i])) {
      ++mismatches;
      ADD_FAILURE() << what << "[" << i << "] is " << got[i] << ", expected " << want[i];
    }
  }
}

TEST(GoldenYT8MTest, VideoLevelExamplesParseAsWritten) {
  const Value& video = at("video");
  const std::vector<std::string> records =
      read_records(golden(str(at(video, "file"))), Compression::kAuto);
  const auto& videos = list(at(video, "videos")).values();
  ASSERT_EQ(records.size(), static_cast<std::size_t>(videos.size()));
  for (std::size_t k = 0; k < records.size(); ++k) {
    const Value& v = videos[static_cast<int>(k)];
    wire::tf::Example example;
    ASSERT_TRUE(example.ParseFromString(records[k])) << "record " << k;
    const auto& features = example.features().feature();
    EXPECT_EQ(features.at("id").bytes_list().value(0), str(at(v, "id")));
    const auto& labels = features.at("labels").int64_list().value();
    EXPECT_EQ(std::vector<int64_t>(labels.begin(), labels.end()), ints_of(at(v, "labels")));
    const auto& rgb = features.at("mean_rgb").float_list().value();
    expect_same_bits(std::vector<float>(rgb.begin(), rgb.end()), expected_vector(v, "mean_rgb"),
                     "proto mean_rgb");
  }
}

TEST(GoldenYT8MTest, AggregatedFeatureReaderReadsTensorFlowsExamples) {
  const Value& video = at("video");
  const std::vector<std::string> records =
      read_records(golden(str(at(video, "file"))), Compression::kAuto);
  const auto& videos = list(at(video, "videos")).values();
  ASSERT_EQ(records.size(), 3u);
  auto both = registry().create<Reader>(
      ClassKind::kReader, "YT8MAggregatedFeatureReader",
      {{"feature_names", std::vector<std::string>{"mean_rgb", "mean_audio"}},
       {"feature_sizes", std::vector<int64_t>{1024, 128}}});
  auto rgb_only = registry().create<Reader>(ClassKind::kReader, "YT8MAggregatedFeatureReader",
                                            std::map<std::string, OptionValue>{});
  for (std::size_t k = 0; k < records.size(); ++k) {
    const Value& v = videos[static_cast<int>(k)];
    const RecordLocation where{"video.tfrecord", static_cast<int64_t>(k)};
    const std::vector<float> rgb = expected_vector(v, "mean_rgb");
    const std::vector<float> audio = expected_vector(v, "mean_audio");
    std::vector<float> concatenated = rgb;
    concatenated.insert(concatenated.end(), audio.begin(), audio.end());

    ParsedRecord record = both->parse(records[k], where);
    EXPECT_EQ(record.id, str(at(v, "id")));
    EXPECT_EQ(record.features.at("features").shape, std::vector<int64_t>{1152});
    expect_same_bits(floats_of(record, "features"), concatenated, "features of " + record.id);
    EXPECT_EQ(hot_classes(floats_of(record, "labels")), sorted_unique(ints_of(at(v, "labels"))));
    EXPECT_EQ(record.features.at("labels").shape, std::vector<int64_t>{3862});
    EXPECT_EQ(num_frames_of(record), 1);

    ParsedRecord defaults = rgb_only->parse(records[k], where);
    expect_same_bits(floats_of(defaults, "features"), rgb, "default features of " + record.id);
  }
}

// --- (c) YouTube-8M frame level -----------------------------------------------------------------

int frame_byte(int64_t t, int64_t i, int64_t seed) {
  return static_cast<int>((t * 31 + i * 7 + seed * 13) % 256);
}

// As the starter code's utils.Dequantize(q, 2, -2), each step in float32.
float dequantized(int q) {
  const float scalar = static_cast<float>(4.0 / 255.0);
  const float bias = static_cast<float>(4.0 / 512.0 - 2.0);
  const float product = static_cast<float>(static_cast<double>(q) * scalar);
  return static_cast<float>(static_cast<double>(product) + bias);
}

TEST(GoldenYT8MTest, FrameLevelSequenceExamplesParseAsWritten) {
  const Value& frame = at("frame");
  const std::vector<std::string> records =
      read_records(golden(str(at(frame, "file"))), Compression::kAuto);
  const auto& sequences = list(at(frame, "sequences")).values();
  ASSERT_EQ(records.size(), static_cast<std::size_t>(sequences.size()));
  for (std::size_t k = 0; k < records.size(); ++k) {
    const Value& s = sequences[static_cast<int>(k)];
    wire::tf::SequenceExample sequence;
    ASSERT_TRUE(sequence.ParseFromString(records[k])) << "record " << k;
    EXPECT_EQ(sequence.context().feature().at("id").bytes_list().value(0), str(at(s, "id")));
    const auto& labels = sequence.context().feature().at("labels").int64_list().value();
    EXPECT_EQ(std::vector<int64_t>(labels.begin(), labels.end()), ints_of(at(s, "labels")));
    for (const std::string name : {"rgb", "audio"}) {
      const Value& spec = at(s, name);
      const auto& frames = sequence.feature_lists().feature_list().at(name).feature();
      ASSERT_EQ(frames.size(), int_of(at(s, "num_frames"))) << name;
      int64_t byte_sum = 0;
      for (int t = 0; t < frames.size(); ++t) {
        const std::string& bytes = frames[t].bytes_list().value(0);
        ASSERT_EQ(static_cast<int64_t>(bytes.size()), int_of(at(spec, "size"))) << name;
        for (std::size_t i = 0; i < bytes.size(); ++i) {
          const int q = static_cast<unsigned char>(bytes[i]);
          byte_sum += q;
          ASSERT_EQ(q, frame_byte(t, static_cast<int64_t>(i), int_of(at(spec, "seed"))))
              << name << " frame " << t << " byte " << i;
        }
      }
      EXPECT_EQ(byte_sum, int_of(at(spec, "byte_sum"))) << name;
      const std::string& last = frames[frames.size() - 1].bytes_list().value(0);
      std::vector<int64_t> first4;
      for (std::size_t i = 0; i < 4; ++i) first4.push_back(static_cast<unsigned char>(last[i]));
      EXPECT_EQ(first4, ints_of(at(spec, "last_frame_first_bytes"))) << name;
    }
  }
}

TEST(GoldenYT8MTest, FrameFeatureReaderReadsTensorFlowsSequenceExamples) {
  const Value& frame = at("frame");
  const std::vector<std::string> records =
      read_records(golden(str(at(frame, "file"))), Compression::kAuto);
  const auto& sequences = list(at(frame, "sequences")).values();
  ASSERT_EQ(records.size(), 2u);
  constexpr int64_t kMaxFrames = 4;  // pads the 3-frame video, truncates the 5-frame one
  auto reader =
      registry().create<Reader>(ClassKind::kReader, "YT8MFrameFeatureReader",
                                {{"feature_names", std::vector<std::string>{"rgb", "audio"}},
                                 {"feature_sizes", std::vector<int64_t>{1024, 128}},
                                 {"max_frames", kMaxFrames}});
  for (std::size_t k = 0; k < records.size(); ++k) {
    const Value& s = sequences[static_cast<int>(k)];
    ParsedRecord record = reader->parse(records[k], {"frame.tfrecord", static_cast<int64_t>(k)});
    EXPECT_EQ(record.id, str(at(s, "id")));
    const int64_t frames = std::min(int_of(at(s, "num_frames")), kMaxFrames);
    EXPECT_EQ(num_frames_of(record), frames);
    EXPECT_EQ(hot_classes(floats_of(record, "labels")), sorted_unique(ints_of(at(s, "labels"))));
    // The record holds the video's kept frames; the core zero-pads the rows after them to
    // max_frames where it batches it (reader.h, input_memory_budget_test's LeadingRows test).
    EXPECT_EQ(record.features.at("features").shape, (std::vector<int64_t>{frames, 1152}));
    std::vector<float> want;
    for (int64_t t = 0; t < kMaxFrames; ++t) {
      for (const std::string name : {"rgb", "audio"}) {
        const int64_t size = int_of(at(at(s, name), "size"));
        const int64_t seed = int_of(at(at(s, name), "seed"));
        for (int64_t i = 0; i < size; ++i) {
          want.push_back(t < frames ? dequantized(frame_byte(t, i, seed)) : 0.0f);
        }
      }
    }
    std::vector<float> got = floats_of(record, "features");
    got.resize(static_cast<std::size_t>(kMaxFrames * 1152), 0.0f);
    expect_same_bits(got, want, "features of " + record.id);
  }
}

// --- (d) checkpoints ----------------------------------------------------------------------------

struct DTypeName {
  const char* name;
  DType dtype;
  int tf_dtype;
};
constexpr DTypeName kDTypes[] = {{"float32", DType::kF32, 1},
                                 {"float64", DType::kF64, 2},
                                 {"int32", DType::kI32, 3},
                                 {"int64", DType::kI64, 9}};

const DTypeName& dtype_named(const std::string& name) {
  for (const DTypeName& d : kDTypes) {
    if (name == d.name) return d;
  }
  throw InvalidArgument("manifest dtype '" + name + "' is not one golden_test knows");
}

// The tensor's values as strings: exact for every dtype (floats by their bits).
std::vector<std::string> values_of(const Tensor& t) {
  std::vector<std::string> out;
  switch (t.dtype()) {
    case DType::kF32:
      for (float v : t.to_vector<float>()) out.push_back("f32:" + std::to_string(bits(v)));
      break;
    case DType::kF64:
      for (double v : t.to_vector<double>()) out.push_back("f64:" + std::to_string(bits(v)));
      break;
    case DType::kI32:
      for (int32_t v : t.to_vector<int32_t>()) out.push_back(std::to_string(v));
      break;
    case DType::kI64:
      for (int64_t v : t.to_vector<int64_t>()) out.push_back(std::to_string(v));
      break;
    default:
      ADD_FAILURE() << "unexpected dtype " << dtype_name(t.dtype());
  }
  return out;
}

std::vector<std::string> expected_values(const Value& spec, double float_offset = 0) {
  const DType dtype = dtype_named(str(at(spec, "dtype"))).dtype;
  std::vector<std::string> out;
  for (const Value& v : list(at(spec, "values")).values()) {
    switch (dtype) {
      case DType::kF32:
        out.push_back("f32:" + std::to_string(bits(static_cast<float>(num(v) + float_offset))));
        break;
      case DType::kF64:
        out.push_back("f64:" + std::to_string(bits(num(v) + float_offset)));
        break;
      default:
        out.push_back(std::to_string(int_of(v)));
    }
  }
  return out;
}

TEST(GoldenCheckpointTest, ReadsTensorFlow1SaverCheckpoints) {
  const Value& c = at("tf1_checkpoint");
  const fs::path dir = kGolden / str(at(c, "directory"));
  const std::optional<std::string> latest = latest_checkpoint(dir.string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(fs::path(*latest).lexically_normal(), (dir / str(at(c, "latest"))).lexically_normal());
  EXPECT_EQ(file_bytes((dir / "checkpoint").string()), str(at(c, "checkpoint_state_file")));

  CheckpointReader reader(*latest);
  const Struct& tensors = at(c, "tensors").struct_value();
  std::vector<std::string> names;
  for (const CheckpointTensorInfo& info : reader.tensors()) names.push_back(info.name);
  std::vector<std::string> want_names;
  for (const auto& [name, spec] : tensors.fields()) want_names.push_back(name);
  std::sort(want_names.begin(), want_names.end());
  EXPECT_EQ(names, want_names);  // sorted, and nothing else (a V1 Saver adds no extra tensors)

  for (const auto& [name, spec] : tensors.fields()) {
    SCOPED_TRACE(name);
    const DTypeName& d = dtype_named(str(at(spec, "dtype")));
    const CheckpointTensorInfo& info = reader.info(name);
    EXPECT_TRUE(info.unsupported.empty()) << info.unsupported;
    EXPECT_EQ(info.dtype, d.dtype);
    EXPECT_EQ(info.tf_dtype, d.tf_dtype);
    EXPECT_EQ(info.shape, Shape(ints_of(at(spec, "shape"))));
    Tensor t = reader.read(name, cpu());
    EXPECT_EQ(t.shape(), Shape(ints_of(at(spec, "shape"))));
    EXPECT_EQ(values_of(t), expected_values(spec));
  }

  // The older checkpoint the state file still lists: weights + 100, global_step 3.
  CheckpointReader older((dir / str(at(c, "older"))).string());
  EXPECT_EQ(
      values_of(older.read("model/weights", cpu())),
      expected_values(tensors.fields().at("model/weights"), num(at(c, "older_weights_offset"))));
  EXPECT_EQ(older.read("global_step", cpu()).to_vector<int64_t>(), std::vector<int64_t>{3});
  EXPECT_EQ(values_of(older.read("model/bias", cpu())),
            expected_values(tensors.fields().at("model/bias")));
}

TEST(GoldenCheckpointTest, ReadsTensorFlow2ObjectBasedCheckpoints) {
  const Value& c = at("tf2_checkpoint");
  const fs::path dir = kGolden / str(at(c, "directory"));
  // This state file also has all_model_checkpoint_timestamps and last_preserved_timestamp.
  const std::optional<std::string> latest = latest_checkpoint(dir.string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(fs::path(*latest).lexically_normal(), (dir / str(at(c, "latest"))).lexically_normal());

  CheckpointReader reader(*latest);
  std::vector<std::string> names;
  for (const CheckpointTensorInfo& info : reader.tensors()) names.push_back(info.name);
  std::vector<std::string> want_names;
  for (const Value& n : list(at(c, "names")).values()) want_names.push_back(str(n));
  EXPECT_EQ(names, want_names);

  // The object graph is a DT_STRING scalar: listed, but not readable as a Trainyard tensor.
  const CheckpointTensorInfo& graph = reader.info(str(at(c, "object_graph_name")));
  EXPECT_EQ(graph.tf_dtype, 7);
  EXPECT_FALSE(graph.unsupported.empty());
  EXPECT_THROW(reader.read(graph.name, cpu()), Unimplemented);

  const std::string kernel_name = str(at(c, "kernel_name"));
  EXPECT_EQ(reader.info(kernel_name).tf_dtype, 1);
  Tensor kernel = reader.read(kernel_name, cpu());
  EXPECT_EQ(kernel.shape(), Shape(ints_of(at(c, "kernel_shape"))));
  std::vector<float> want;
  for (const Value& v : list(at(c, "kernel")).values()) want.push_back(static_cast<float>(num(v)));
  EXPECT_EQ(kernel.to_vector<float>(), want);

  Tensor step = reader.read(str(at(c, "step_name")), cpu());
  EXPECT_EQ(step.shape(), Shape{});
  EXPECT_EQ(step.to_vector<int64_t>(), std::vector<int64_t>{int_of(at(c, "step"))});
  EXPECT_EQ(reader.read(str(at(c, "save_counter_name")), cpu()).to_vector<int64_t>(),
            std::vector<int64_t>{int_of(at(c, "save_counter"))});
}

// --- (e) event files ----------------------------------------------------------------------------

struct Scalar {
  std::string tag;
  int64_t step;
  float value;
  friend bool operator==(const Scalar&, const Scalar&) = default;
};

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  return os << s.tag << "@" << s.step << "=" << s.value;
}

std::vector<Scalar> expected_scalars(const Value& spec) {
  std::vector<Scalar> out;
  for (const Value& s : list(at(spec, "scalars")).values()) {
    out.push_back(
        {str(at(s, "tag")), int_of(at(s, "step")), static_cast<float>(num(at(s, "value")))});
  }
  return out;
}

// Reads every event; checks the file_version header and returns the scalars, whichever form
// (simple_value, or a rank-0 DT_FLOAT tensor in tensor_content or float_val) they take.
std::vector<Scalar> read_scalars(const std::string& path, const std::string& form,
                                 const std::string& plugin_name) {
  EventFileReader reader(path);
  wire::tf::Event event;
  EXPECT_TRUE(reader.next(&event)) << path;
  EXPECT_EQ(event.file_version(), "brain.Event:2");
  EXPECT_GT(event.wall_time(), 1.0e9);
  std::vector<Scalar> out;
  while (reader.next(&event)) {
    EXPECT_TRUE(event.has_summary()) << event.DebugString();
    for (const wire::tf::Summary::Value& v : event.summary().value()) {
      Scalar s{v.tag(), event.step(), 0.0f};
      if (form == "simple_value") {
        EXPECT_EQ(v.value_case(), wire::tf::Summary::Value::kSimpleValue) << v.DebugString();
        s.value = v.simple_value();
      } else {
        EXPECT_EQ(v.value_case(), wire::tf::Summary::Value::kTensor) << v.DebugString();
        const wire::tf::TensorProto& t = v.tensor();
        EXPECT_EQ(static_cast<int>(t.dtype()), 1);  // DT_FLOAT
        EXPECT_EQ(t.tensor_shape().dim_size(), 0);
        if (t.tensor_content().size() == sizeof(float)) {
          std::memcpy(&s.value, t.tensor_content().data(), sizeof(float));
        } else {
          EXPECT_EQ(t.float_val_size(), 1) << t.DebugString();
          if (t.float_val_size() > 0) s.value = t.float_val(0);
        }
        EXPECT_EQ(v.metadata().plugin_data().plugin_name(), plugin_name);
      }
      out.push_back(s);
    }
  }
  EXPECT_FALSE(reader.partial_record()) << path;
  return out;
}

TEST(GoldenEventsTest, ReadsTensorFlow2TensorScalars) {
  const Value& spec = at(at("events"), "tf2");
  const std::string path = golden(str(at(spec, "file")));
  EXPECT_EQ(EventFileReader::list_event_files(fs::path(path).parent_path().string()),
            std::vector<std::string>{path});
  EXPECT_EQ(read_scalars(path, str(at(spec, "form")), str(at(spec, "plugin_name"))),
            expected_scalars(spec));
}

TEST(GoldenEventsTest, ReadsTensorFlow1SimpleValueScalars) {
  const Value& spec = at(at("events"), "tf1");
  const std::string path = golden(str(at(spec, "file")));
  EXPECT_EQ(EventFileReader::list_event_files(fs::path(path).parent_path().string()),
            std::vector<std::string>{path});
  EXPECT_EQ(read_scalars(path, str(at(spec, "form")), ""), expected_scalars(spec));
}

TEST(GoldenManifestTest, RecordsTheTensorFlowVersionThatWroteTheFiles) {
  const std::string version = str(at(at("generator"), "tensorflow_version"));
  EXPECT_FALSE(version.empty());
  std::cout << "golden files written by TensorFlow " << version << "\n";
}

}  // namespace
}  // namespace trainyard
