// The YouTube-8M readers (plugin yt8m_readers), created through the plugin registry and fed
// records built with the generated tf.Example / tf.SequenceExample classes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "test_registry.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/options.h"
#include "trainyard/reader.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard {
namespace {

const RecordLocation kWhere{"train-00.tfrecord", 17};

PluginRegistry& registry() { return test::plugin_registry(); }

std::shared_ptr<Reader> make_reader(std::string_view name,
                                    const std::map<std::string, OptionValue>& options = {}) {
  return registry().create<Reader>(ClassKind::kReader, name, options);
}

std::shared_ptr<Reader> video_reader(const std::map<std::string, OptionValue>& options = {}) {
  return make_reader("YT8MAggregatedFeatureReader", options);
}

std::shared_ptr<Reader> frame_reader(const std::map<std::string, OptionValue>& options = {}) {
  return make_reader("YT8MFrameFeatureReader", options);
}

// --- Building records -------------------------------------------------------------------------

void set_floats(wire::tf::Features* features, const std::string& key, const std::vector<float>& v) {
  auto* list = (*features->mutable_feature())[key].mutable_float_list();
  for (float x : v) list->add_value(x);
}

void set_int64s(wire::tf::Features* features, const std::string& key,
                const std::vector<int64_t>& v) {
  auto* list = (*features->mutable_feature())[key].mutable_int64_list();
  for (int64_t x : v) list->add_value(x);
}

void set_bytes(wire::tf::Features* features, const std::string& key, const std::string& value) {
  (*features->mutable_feature())[key].mutable_bytes_list()->add_value(value);
}

std::vector<float> ramp(int n, float start, float step = 1.0f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = start + step * static_cast<float>(i);
  return v;
}

// A 2018-style video-level record: id, labels, mean_rgb[1024], mean_audio[128].
wire::tf::Example video_example(const std::string& id = "vid0",
                                const std::vector<int64_t>& labels = {3, 7}) {
  wire::tf::Example example;
  set_bytes(example.mutable_features(), "id", id);
  set_int64s(example.mutable_features(), "labels", labels);
  set_floats(example.mutable_features(), "mean_rgb", ramp(1024, 0.0f, 0.001f));
  set_floats(example.mutable_features(), "mean_audio", ramp(128, -1.0f, 0.01f));
  return example;
}

std::string serialize(const google::protobuf::MessageLite& message) {
  std::string out;
  EXPECT_TRUE(message.SerializeToString(&out));
  return out;
}

// One frame of a feature list: `values` as uint8 bytes.
std::string frame_bytes(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(static_cast<unsigned char>(v)));
  return out;
}

void add_frame(wire::tf::SequenceExample* sequence, const std::string& name,
               const std::string& bytes) {
  auto& list = (*sequence->mutable_feature_lists()->mutable_feature_list())[name];
  list.add_feature()->mutable_bytes_list()->add_value(bytes);
}

// A frame-level record with `frames` frames of rgb[4] and audio[2]; frame t holds rgb
// (t, t+1, t+2, t+3) and audio (100+t, 200+t).
wire::tf::SequenceExample small_sequence(int frames, const std::vector<int64_t>& labels = {1}) {
  wire::tf::SequenceExample sequence;
  set_bytes(sequence.mutable_context(), "id", "seq0");
  set_int64s(sequence.mutable_context(), "labels", labels);
  for (int t = 0; t < frames; ++t) {
    add_frame(&sequence, "rgb", frame_bytes({t, t + 1, t + 2, t + 3}));
    add_frame(&sequence, "audio", frame_bytes({100 + t, 200 + t}));
  }
  return sequence;
}

const std::map<std::string, OptionValue> kSmallFrameOptions = {
    {"feature_names", std::vector<std::string>{"rgb", "audio"}},
    {"feature_sizes", std::vector<int64_t>{4, 2}},
    {"max_frames", int64_t{5}},
};

// --- Reading results --------------------------------------------------------------------------

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
  EXPECT_TRUE(f.shape.empty());
  int32_t v = -1;
  EXPECT_EQ(f.bytes.size(), sizeof(v));
  std::memcpy(&v, f.bytes.data(), sizeof(v));
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

// The message of the InvalidArgument `f` throws; a failure if it throws anything else.
template <class F>
std::string invalid_argument_of(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InvalidArgument, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected InvalidArgument, nothing was thrown";
  return "";
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// Uint8 value -> float32 as TF computes utils.Dequantize(q, 2, -2): q * f32(4/255) + f32(-2 +
// 4/512), each step rounded to float32.
constexpr float kDequantized0 = -1.9921875f;
constexpr float kDequantized128 = 0x1.0081p-6f;
constexpr float kDequantized255 = 2.0078125f;

float dequantized(int q) {
  const float scalar = static_cast<float>(4.0 / 255.0);
  const float bias = static_cast<float>(4.0 / 512.0 - 2.0);
  const float product = static_cast<float>(static_cast<double>(q) * scalar);
  return static_cast<float>(static_cast<double>(product) + bias);
}

// Checks that `record` holds exactly the features `reader` declares, with their dtypes and
// shapes and the matching number of bytes; "features" of the frame reader holds its video's
// frames, `frames` of the declared max_frames rows (reader.h: the core pads the rest).
void expect_matches_declaration(const Reader& reader, const ParsedRecord& record,
                                int64_t frames = -1) {
  std::vector<FeatureSpec> specs = reader.features();
  ASSERT_EQ(specs.size(), record.features.size());
  for (const FeatureSpec& spec : specs) {
    auto it = record.features.find(spec.name);
    ASSERT_NE(it, record.features.end()) << spec.name;
    EXPECT_EQ(it->second.dtype, spec.dtype) << spec.name;
    std::vector<int64_t> shape = spec.shape;
    if (frames >= 0 && spec.name == "features") shape[0] = frames;
    EXPECT_EQ(it->second.shape, shape) << spec.name;
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    EXPECT_EQ(it->second.bytes.size(), static_cast<std::size_t>(elements) * dtype_size(spec.dtype))
        << spec.name;
  }
}

// --- YT8MAggregatedFeatureReader --------------------------------------------------------------

TEST(YT8MAggregatedFeatureReaderTest, DefaultsReadMeanRgbOf1024AndLabelsOf3862Classes) {
  auto reader = video_reader();
  std::vector<FeatureSpec> specs = reader->features();
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].name, "features");
  EXPECT_EQ(specs[0].dtype, DType::kF32);
  EXPECT_EQ(specs[0].shape, std::vector<int64_t>{1024});
  EXPECT_EQ(specs[1].name, "labels");
  EXPECT_EQ(specs[1].dtype, DType::kF32);
  EXPECT_EQ(specs[1].shape, std::vector<int64_t>{3862});
  EXPECT_EQ(specs[2].name, "num_frames");
  EXPECT_EQ(specs[2].dtype, DType::kI32);
  EXPECT_TRUE(specs[2].shape.empty());

  ParsedRecord record = reader->parse(serialize(video_example()), kWhere);
  EXPECT_EQ(floats_of(record, "features"), ramp(1024, 0.0f, 0.001f));
  expect_matches_declaration(*reader, record);
}

TEST(YT8MAggregatedFeatureReaderTest, ConcatenatesFeaturesInTheOrderOfFeatureNames) {
  const std::string bytes = serialize(video_example());
  std::vector<float> rgb = ramp(1024, 0.0f, 0.001f);
  std::vector<float> audio = ramp(128, -1.0f, 0.01f);

  auto rgb_first =
      video_reader({{"feature_names", std::vector<std::string>{"mean_rgb", "mean_audio"}},
                    {"feature_sizes", std::vector<int64_t>{1024, 128}}});
  std::vector<float> expected = rgb;
  expected.insert(expected.end(), audio.begin(), audio.end());
  ParsedRecord record = rgb_first->parse(bytes, kWhere);
  EXPECT_EQ(floats_of(record, "features"), expected);
  EXPECT_EQ(record.features.at("features").shape, std::vector<int64_t>{1152});
  expect_matches_declaration(*rgb_first, record);

  auto audio_first =
      video_reader({{"feature_names", std::vector<std::string>{"mean_audio", "mean_rgb"}},
                    {"feature_sizes", std::vector<int64_t>{128, 1024}}});
  expected = audio;
  expected.insert(expected.end(), rgb.begin(), rgb.end());
  EXPECT_EQ(floats_of(audio_first->parse(bytes, kWhere), "features"), expected);
}

TEST(YT8MAggregatedFeatureReaderTest, LabelsAreMultiHot) {
  auto reader = video_reader();
  ParsedRecord record = reader->parse(serialize(video_example("v", {0, 5, 3861, 5})), kWhere);
  EXPECT_EQ(hot_classes(floats_of(record, "labels")), (std::vector<int64_t>{0, 5, 3861}));
  EXPECT_EQ(record.features.at("labels").shape, std::vector<int64_t>{3862});
}

TEST(YT8MAggregatedFeatureReaderTest, MissingOrEmptyLabelsGiveAllZeroLabels) {
  auto reader = video_reader();
  wire::tf::Example example = video_example("v", {});
  EXPECT_TRUE(hot_classes(floats_of(reader->parse(serialize(example), kWhere), "labels")).empty());
  example.mutable_features()->mutable_feature()->erase("labels");
  EXPECT_TRUE(hot_classes(floats_of(reader->parse(serialize(example), kWhere), "labels")).empty());
}

TEST(YT8MAggregatedFeatureReaderTest, NumFramesIsOne) {
  EXPECT_EQ(num_frames_of(video_reader()->parse(serialize(video_example()), kWhere)), 1);
}

TEST(YT8MAggregatedFeatureReaderTest, ReadsIdFromIdKeyOrVideoIdFor2017Data) {
  EXPECT_EQ(video_reader()->parse(serialize(video_example("abc")), kWhere).id, "abc");

  wire::tf::Example old;
  set_bytes(old.mutable_features(), "video_id", "XyZ1");
  set_int64s(old.mutable_features(), "labels", {4715});
  set_floats(old.mutable_features(), "mean_rgb", ramp(1024, 0.0f));
  auto reader = video_reader({{"id_key", std::string("video_id")}, {"num_classes", int64_t{4716}}});
  ParsedRecord record = reader->parse(serialize(old), kWhere);
  EXPECT_EQ(record.id, "XyZ1");
  EXPECT_EQ(hot_classes(floats_of(record, "labels")), std::vector<int64_t>{4715});

  // The default id_key on 2017 data names the feature and points at the option.
  std::string m = invalid_argument_of([&] { video_reader()->parse(serialize(old), kWhere); });
  EXPECT_HAS(m, "train-00.tfrecord, record 17: feature 'id' is missing");
  EXPECT_HAS(m, "'video_id'");
  EXPECT_HAS(m, "id_key");
}

TEST(YT8MAggregatedFeatureReaderTest, Reads4716ClassesByOption) {
  auto reader = video_reader({{"num_classes", int64_t{4716}}});
  EXPECT_EQ(reader->features()[1].shape, std::vector<int64_t>{4716});
  ParsedRecord record = reader->parse(serialize(video_example("v", {4000, 4715})), kWhere);
  EXPECT_EQ(hot_classes(floats_of(record, "labels")), (std::vector<int64_t>{4000, 4715}));
  expect_matches_declaration(*reader, record);
  // The same label is out of range for the default 3862 classes.
  std::string m = invalid_argument_of(
      [&] { video_reader()->parse(serialize(video_example("v", {4000})), kWhere); });
  EXPECT_HAS(m, "label 4000");
}

TEST(YT8MAggregatedFeatureReaderTest, MissingFeatureNamesTheKeyAndWhatTheRecordHas) {
  wire::tf::Example example = video_example();
  example.mutable_features()->mutable_feature()->erase("mean_rgb");
  std::string m = invalid_argument_of([&] { video_reader()->parse(serialize(example), kWhere); });
  EXPECT_HAS(m, "train-00.tfrecord, record 17: feature 'mean_rgb' is missing");
  EXPECT_HAS(m, "expected a float list of 1024 values");
  EXPECT_HAS(m, "'id', 'labels', 'mean_audio'");
}

TEST(YT8MAggregatedFeatureReaderTest, WrongFloatCountNamesBothCounts) {
  wire::tf::Example example = video_example();
  (*example.mutable_features()->mutable_feature())["mean_rgb"].mutable_float_list()->Clear();
  set_floats(example.mutable_features(), "mean_rgb", ramp(512, 0.0f));
  std::string m = invalid_argument_of([&] { video_reader()->parse(serialize(example), kWhere); });
  EXPECT_EQ(m, "train-00.tfrecord, record 17: feature 'mean_rgb' has 512 floats, expected 1024");
}

TEST(YT8MAggregatedFeatureReaderTest, WrongTypeNamesWhatWasFound) {
  wire::tf::Example example = video_example();
  (*example.mutable_features()->mutable_feature())["mean_rgb"].Clear();
  set_int64s(example.mutable_features(), "mean_rgb", std::vector<int64_t>(1024, 1));
  std::string m = invalid_argument_of([&] { video_reader()->parse(serialize(example), kWhere); });
  EXPECT_EQ(m,
            "train-00.tfrecord, record 17: feature 'mean_rgb' is an int64 list of 1024 values, "
            "expected a float list of 1024 values");

  example = video_example();
  (*example.mutable_features()->mutable_feature())["labels"].Clear();
  set_floats(example.mutable_features(), "labels", {1.0f});
  m = invalid_argument_of([&] { video_reader()->parse(serialize(example), kWhere); });
  EXPECT_HAS(m, "record 17: feature 'labels' is a float list of 1 value");
  EXPECT_HAS(m, "expected an int64 list");

  example = video_example();
  (*example.mutable_features()->mutable_feature())["id"].Clear();
  set_int64s(example.mutable_features(), "id", {42});
  m = invalid_argument_of([&] { video_reader()->parse(serialize(example), kWhere); });
  EXPECT_HAS(m, "record 17: feature 'id' is an int64 list of 1 value");
  EXPECT_HAS(m, "expected a bytes list of 1 value");

  example = video_example();
  set_bytes(example.mutable_features(), "id", "second");
  m = invalid_argument_of([&] { video_reader()->parse(serialize(example), kWhere); });
  EXPECT_HAS(m, "feature 'id' is a bytes list of 2 values");
}

TEST(YT8MAggregatedFeatureReaderTest, LabelOutOfRangeIsAnError) {
  auto reader = video_reader();
  std::string m = invalid_argument_of([&] {
    reader->parse(serialize(video_example("v", {1, 3862})), kWhere);
  });
  EXPECT_HAS(m, "train-00.tfrecord, record 17: label 3862");
  EXPECT_HAS(m, "'labels'");
  EXPECT_HAS(m, "expected 0 <= label < 3862");
  m = invalid_argument_of([&] { reader->parse(serialize(video_example("v", {-1})), kWhere); });
  EXPECT_HAS(m, "label -1");
}

template <class F>
std::string data_loss_of(F&& f) {
  try {
    f();
  } catch (const DataLoss& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected DataLoss, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected DataLoss, nothing was thrown";
  return "";
}

TEST(YT8MAggregatedFeatureReaderTest, UnparseableBytesAreDataLoss) {
  // Field 31 with the invalid wire type 7 at byte 0.
  const std::string garbage("\xff\xff\xff\xff\x0f not a proto", 17);
  std::string m = data_loss_of([&] { video_reader()->parse(garbage, kWhere); });
  EXPECT_EQ(m,
            "train-00.tfrecord, record 17: the record (17 bytes) does not parse as a serialized "
            "tf.Example: invalid wire type 7 at byte 0");
}

// --- YT8MFrameFeatureReader -------------------------------------------------------------------

TEST(YT8MFrameFeatureReaderTest, DefaultsReadRgbOf1024Into300Frames) {
  auto reader = frame_reader();
  std::vector<FeatureSpec> specs = reader->features();
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].name, "features");
  EXPECT_EQ(specs[0].dtype, DType::kF32);
  EXPECT_EQ(specs[0].shape, (std::vector<int64_t>{300, 1024}));
  EXPECT_EQ(specs[1].name, "labels");
  EXPECT_EQ(specs[1].shape, std::vector<int64_t>{3862});
  EXPECT_EQ(specs[2].name, "num_frames");
  EXPECT_EQ(specs[2].dtype, DType::kI32);
  EXPECT_TRUE(specs[2].shape.empty());

  wire::tf::SequenceExample sequence;
  set_bytes(sequence.mutable_context(), "id", "s");
  set_int64s(sequence.mutable_context(), "labels", {2});
  for (int t = 0; t < 10; ++t) add_frame(&sequence, "rgb", std::string(1024, '\x80'));
  ParsedRecord record = reader->parse(serialize(sequence), kWhere);
  expect_matches_declaration(*reader, record, /*frames=*/10);
  EXPECT_EQ(num_frames_of(record), 10);
  EXPECT_EQ(record.id, "s");
  EXPECT_EQ(hot_classes(floats_of(record, "labels")), std::vector<int64_t>{2});
}

TEST(YT8MFrameFeatureReaderTest, DequantizesExactlyAsTheStarterCode) {
  auto reader =
      frame_reader({{"feature_sizes", std::vector<int64_t>{4}}, {"max_frames", int64_t{1}}});
  wire::tf::SequenceExample sequence;
  set_bytes(sequence.mutable_context(), "id", "q");
  add_frame(&sequence, "rgb", frame_bytes({0, 128, 255, 1}));
  std::vector<float> v = floats_of(reader->parse(serialize(sequence), kWhere), "features");
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0], kDequantized0);
  EXPECT_EQ(v[1], kDequantized128);
  EXPECT_EQ(v[2], kDequantized255);
  EXPECT_EQ(v[3], dequantized(1));
  EXPECT_EQ(v[0], -1.9921875f);
  EXPECT_EQ(v[2], 2.0078125f);
}

TEST(YT8MFrameFeatureReaderTest, QuantizationRangeIsAnOption) {
  auto reader = frame_reader({{"feature_sizes", std::vector<int64_t>{2}},
                              {"max_frames", int64_t{1}},
                              {"max_quantized_value", 1.0},
                              {"min_quantized_value", 0.0}});
  wire::tf::SequenceExample sequence;
  set_bytes(sequence.mutable_context(), "id", "q");
  add_frame(&sequence, "rgb", frame_bytes({0, 255}));
  std::vector<float> v = floats_of(reader->parse(serialize(sequence), kWhere), "features");
  EXPECT_EQ(v[0], static_cast<float>(1.0 / 512.0));
  EXPECT_FLOAT_EQ(v[1], 1.0f + 1.0f / 512.0f);
}

TEST(YT8MFrameFeatureReaderTest, ConcatenatesFeaturesPerFrameInTheOrderOfFeatureNames) {
  auto reader = frame_reader(kSmallFrameOptions);
  EXPECT_EQ(reader->features()[0].shape, (std::vector<int64_t>{5, 6}));
  ParsedRecord record = reader->parse(serialize(small_sequence(5)), kWhere);
  expect_matches_declaration(*reader, record);
  std::vector<float> expected;
  for (int t = 0; t < 5; ++t) {
    for (int q : {t, t + 1, t + 2, t + 3, 100 + t, 200 + t}) expected.push_back(dequantized(q));
  }
  EXPECT_EQ(floats_of(record, "features"), expected);

  std::map<std::string, OptionValue> audio_first = kSmallFrameOptions;
  audio_first["feature_names"] = std::vector<std::string>{"audio", "rgb"};
  audio_first["feature_sizes"] = std::vector<int64_t>{2, 4};
  std::vector<float> v =
      floats_of(frame_reader(audio_first)->parse(serialize(small_sequence(5)), kWhere), "features");
  ASSERT_EQ(v.size(), 30u);
  for (int t = 0; t < 5; ++t) {
    std::vector<float> row(v.begin() + 6 * t, v.begin() + 6 * (t + 1));
    std::vector<float> want;
    for (int q : {100 + t, 200 + t, t, t + 1, t + 2, t + 3}) want.push_back(dequantized(q));
    EXPECT_EQ(row, want) << "frame " << t;
  }
}

// A short video yields its own frames, not max_frames of them: the core writes the zeros after
// them where it batches the record (input_memory_budget_test's LeadingRows test).
TEST(YT8MFrameFeatureReaderTest, GivesShortVideosTheirOwnFramesAndCountsThem) {
  auto reader = frame_reader(kSmallFrameOptions);
  ParsedRecord record = reader->parse(serialize(small_sequence(3)), kWhere);
  expect_matches_declaration(*reader, record, /*frames=*/3);
  EXPECT_EQ(num_frames_of(record), 3);
  std::vector<float> v = floats_of(record, "features");
  ASSERT_EQ(v.size(), 18u);
  EXPECT_EQ(v[2 * 6 + 5], dequantized(202));
}

TEST(YT8MFrameFeatureReaderTest, TruncatesLongVideosToMaxFrames) {
  auto reader = frame_reader(kSmallFrameOptions);
  ParsedRecord record = reader->parse(serialize(small_sequence(8)), kWhere);
  expect_matches_declaration(*reader, record, /*frames=*/5);
  EXPECT_EQ(num_frames_of(record), 5);
  std::vector<float> v = floats_of(record, "features");
  ASSERT_EQ(v.size(), 30u);
  for (int t = 0; t < 5; ++t) EXPECT_EQ(v[static_cast<std::size_t>(6 * t)], dequantized(t));
  EXPECT_EQ(v[29], dequantized(204));
}

TEST(YT8MFrameFeatureReaderTest, VideoWithoutFramesHasNoRows) {
  auto reader = frame_reader(kSmallFrameOptions);
  wire::tf::SequenceExample sequence = small_sequence(0);
  auto* lists = sequence.mutable_feature_lists()->mutable_feature_list();
  (*lists)["rgb"];
  (*lists)["audio"];
  ParsedRecord record = reader->parse(serialize(sequence), kWhere);
  expect_matches_declaration(*reader, record, /*frames=*/0);
  EXPECT_EQ(num_frames_of(record), 0);
  EXPECT_TRUE(floats_of(record, "features").empty());
}

TEST(YT8MFrameFeatureReaderTest, ReadsContextIdLabelsAndVideoIdFor2017Data) {
  auto reader = frame_reader(kSmallFrameOptions);
  ParsedRecord record = reader->parse(serialize(small_sequence(2, {0, 17, 3861})), kWhere);
  EXPECT_EQ(record.id, "seq0");
  EXPECT_EQ(hot_classes(floats_of(record, "labels")), (std::vector<int64_t>{0, 17, 3861}));

  wire::tf::SequenceExample old = small_sequence(2, {4715});
  old.mutable_context()->mutable_feature()->erase("id");
  set_bytes(old.mutable_context(), "video_id", "old1");
  std::map<std::string, OptionValue> options = kSmallFrameOptions;
  options["id_key"] = std::string("video_id");
  options["num_classes"] = int64_t{4716};
  auto old_reader = frame_reader(options);
  EXPECT_EQ(old_reader->features()[1].shape, std::vector<int64_t>{4716});
  record = old_reader->parse(serialize(old), kWhere);
  EXPECT_EQ(record.id, "old1");
  EXPECT_EQ(hot_classes(floats_of(record, "labels")), std::vector<int64_t>{4715});

  std::string m = invalid_argument_of([&] { reader->parse(serialize(old), kWhere); });
  EXPECT_HAS(m, "train-00.tfrecord, record 17: context feature 'id' is missing");
  EXPECT_HAS(m, "id_key");
  m = invalid_argument_of([&] { reader->parse(serialize(small_sequence(2, {3862})), kWhere); });
  EXPECT_HAS(m, "train-00.tfrecord, record 17: label 3862");
  EXPECT_HAS(m, "context feature 'labels'");
}

TEST(YT8MFrameFeatureReaderTest, MissingFeatureListNamesTheKeyAndWhatTheRecordHas) {
  wire::tf::SequenceExample sequence = small_sequence(3);
  sequence.mutable_feature_lists()->mutable_feature_list()->erase("audio");
  std::string m = invalid_argument_of(
      [&] { frame_reader(kSmallFrameOptions)->parse(serialize(sequence), kWhere); });
  EXPECT_HAS(m, "train-00.tfrecord, record 17: feature list 'audio' is missing");
  EXPECT_HAS(m, "2 uint8 values per frame");
  EXPECT_HAS(m, "the record has feature lists 'rgb'");
}

TEST(YT8MFrameFeatureReaderTest, FeatureListsOfDifferentLengthsAreAnError) {
  wire::tf::SequenceExample sequence = small_sequence(3);
  add_frame(&sequence, "rgb", frame_bytes({1, 2, 3, 4}));
  std::string m = invalid_argument_of(
      [&] { frame_reader(kSmallFrameOptions)->parse(serialize(sequence), kWhere); });
  EXPECT_EQ(m,
            "train-00.tfrecord, record 17: feature list 'audio' has 3 frames but 'rgb' has 4; "
            "every feature list must have the same number of frames");
}

TEST(YT8MFrameFeatureReaderTest, FrameOfWrongSizeIsAnErrorEvenWhenTruncatedAway) {
  wire::tf::SequenceExample sequence = small_sequence(7);
  (*sequence.mutable_feature_lists()->mutable_feature_list())["rgb"]
      .mutable_feature(6)
      ->mutable_bytes_list()
      ->set_value(0, frame_bytes({1, 2, 3}));
  std::string m = invalid_argument_of(
      [&] { frame_reader(kSmallFrameOptions)->parse(serialize(sequence), kWhere); });
  EXPECT_EQ(m, "train-00.tfrecord, record 17: feature list 'rgb' frame 6 has 3 bytes, expected 4");
}

TEST(YT8MFrameFeatureReaderTest, FrameOfWrongTypeNamesWhatWasFound) {
  wire::tf::SequenceExample sequence = small_sequence(3);
  wire::tf::Feature& frame =
      *(*sequence.mutable_feature_lists()->mutable_feature_list())["audio"].mutable_feature(1);
  frame.Clear();
  frame.mutable_float_list()->add_value(0.5f);
  frame.mutable_float_list()->add_value(0.25f);
  std::string m = invalid_argument_of(
      [&] { frame_reader(kSmallFrameOptions)->parse(serialize(sequence), kWhere); });
  EXPECT_HAS(
      m, "train-00.tfrecord, record 17: feature list 'audio' frame 1 is a float list of 2 values");
  EXPECT_HAS(m, "expected a bytes list of 1 value");

  frame.Clear();
  frame.mutable_bytes_list()->add_value(frame_bytes({1, 2}));
  frame.mutable_bytes_list()->add_value(frame_bytes({1, 2}));
  m = invalid_argument_of(
      [&] { frame_reader(kSmallFrameOptions)->parse(serialize(sequence), kWhere); });
  EXPECT_HAS(m, "feature list 'audio' frame 1 is a bytes list of 2 values");
}

TEST(YT8MFrameFeatureReaderTest, UnparseableBytesAreDataLoss) {
  // The context (field 1) claims 4 GiB with 5 bytes left.
  const std::string garbage("\x0a\xff\xff\xff\xff\x0f", 6);
  std::string m = data_loss_of([&] { frame_reader()->parse(garbage, kWhere); });
  EXPECT_EQ(m,
            "train-00.tfrecord, record 17: the record (6 bytes) does not parse as a serialized "
            "tf.SequenceExample: length 4294967295 past the end of the message at byte 1");
}

TEST(YT8MFrameFeatureReaderTest, ParseIsThreadSafe) {
  auto reader = frame_reader(kSmallFrameOptions);
  std::vector<std::string> records;
  std::vector<ParsedRecord> expected;
  for (int n = 0; n < 8; ++n) {
    records.push_back(serialize(small_sequence(n + 1, {n})));
    expected.push_back(reader->parse(records.back(), kWhere));
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < 200; ++i) {
        const std::size_t n = static_cast<std::size_t>((i + w) % 8);
        ParsedRecord got = reader->parse(records[n], kWhere);
        for (const auto& [name, feature] : expected[n].features) {
          if (got.features.at(name).bytes != feature.bytes)
            ++mismatches[static_cast<std::size_t>(w)];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// --- Option validation ------------------------------------------------------------------------

TEST(YT8MReaderOptionsTest, FeatureNamesAndSizesMustHaveTheSameLength) {
  for (const char* name : {"YT8MAggregatedFeatureReader", "YT8MFrameFeatureReader"}) {
    std::string m = invalid_argument_of([&] {
      make_reader(name, {{"feature_names", std::vector<std::string>{"a", "b"}},
                         {"feature_sizes", std::vector<int64_t>{1024}}});
    });
    EXPECT_HAS(m, name);
    EXPECT_HAS(m, "feature_names has 2 entries (a,b) but feature_sizes has 1 (1024)");
  }
}

TEST(YT8MReaderOptionsTest, SizesAndNumClassesMustBePositive) {
  for (const char* name : {"YT8MAggregatedFeatureReader", "YT8MFrameFeatureReader"}) {
    std::string m = invalid_argument_of([&] {
      make_reader(name, {{"feature_names", std::vector<std::string>{"a", "b"}},
                         {"feature_sizes", std::vector<int64_t>{4, 0}}});
    });
    EXPECT_HAS(m, "feature_sizes[1] (for 'b') is 0");
    m = invalid_argument_of([&] { make_reader(name, {{"num_classes", int64_t{0}}}); });
    EXPECT_HAS(m, "num_classes is 0");
    m = invalid_argument_of([&] {
      make_reader(name, {{"feature_names", std::vector<std::string>{}},
                         {"feature_sizes", std::vector<int64_t>{}}});
    });
    EXPECT_HAS(m, "feature_names is empty");
  }
}

TEST(YT8MReaderOptionsTest, MaxFramesMustBePositive) {
  std::string m = invalid_argument_of([&] { frame_reader({{"max_frames", int64_t{0}}}); });
  EXPECT_HAS(m, "YT8MFrameFeatureReader");
  EXPECT_HAS(m, "max_frames is 0");
}

TEST(YT8MReaderOptionsTest, MaxQuantizedValueMustExceedMin) {
  std::string m = invalid_argument_of([&] {
    frame_reader({{"max_quantized_value", -2.0}, {"min_quantized_value", 2.0}});
  });
  EXPECT_HAS(m, "max_quantized_value (-2) must be greater than min_quantized_value (2)");
  m = invalid_argument_of([&] {
    frame_reader({{"max_quantized_value", 1.0}, {"min_quantized_value", 1.0}});
  });
  EXPECT_HAS(m, "max_quantized_value");
}

}  // namespace
}  // namespace trainyard
