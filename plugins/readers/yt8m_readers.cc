// The YouTube-8M readers of the starter code (readers.py):
//
//   YT8MAggregatedFeatureReader  video-level tf.Example: float features such as mean_rgb[1024]
//                                and mean_audio[128], concatenated in feature_names order.
//   YT8MFrameFeatureReader       frame-level tf.SequenceExample: one uint8-quantized bytes
//                                feature per frame and name, dequantized, concatenated per
//                                frame and truncated to max_frames; a shorter video yields
//                                its own frames, which the core pads with zeros to max_frames
//                                where it batches them (reader.h).
//
// Both yield "features" (f32), "labels" (f32 multi-hot over num_classes) and "num_frames" (i32
// scalar), and the video id from the bytes feature id_key ("id"; "video_id" for the 2017 data).
// A missing `labels` feature gives all-zero labels, as TF's VarLenFeature does (test data);
// every other declared feature is required.
//
// Records are read through the SDK's tf.Example view (example.h). A record that is not a
// serialized tf.Example / tf.SequenceExample throws DataLoss "<file>, record <n>: ..." saying
// what is malformed at which byte; every other problem with a record throws InvalidArgument
// "<file>, record <n>: ..." naming the key, what was expected and what was found. parse()
// keeps no state: it is safe to call from several threads at once.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/example.h"
#include "trainyard/options.h"
#include "trainyard/plugin.h"
#include "trainyard/reader.h"
#include "trainyard/tensor.h"

namespace trainyard::readers {
namespace {

using Kind = ExampleFeature::Kind;

constexpr const char* kLabelsKey = "labels";

// ---------------------------------------------------------------------------------------------
// Options shared by both readers.

std::string join(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    if (!out.empty()) out += ",";
    out += v;
  }
  return out;
}

std::string join(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) {
    if (!out.empty()) out += ",";
    out += std::to_string(v);
  }
  return out;
}

[[noreturn]] void bad_option(std::string_view owner, const std::string& message) {
  throw InvalidArgument(std::string(owner) + ": " + message);
}

// The features to read, their sizes and where each starts in the concatenation.
struct Layout {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  int64_t num_classes = 0;
  std::string id_key;
};

Layout read_layout(std::string_view owner, const Options& options) {
  Layout layout;
  layout.names = options.get_string_list("feature_names");
  layout.sizes = options.get_int_list("feature_sizes");
  layout.num_classes = options.get_int("num_classes");
  layout.id_key = options.get_string("id_key");
  if (layout.names.empty()) {
    bad_option(owner, "feature_names is empty; expected at least one feature name");
  }
  if (layout.names.size() != layout.sizes.size()) {
    bad_option(owner, "feature_names has " + std::to_string(layout.names.size()) + " entries (" +
                          join(layout.names) + ") but feature_sizes has " +
                          std::to_string(layout.sizes.size()) + " (" + join(layout.sizes) +
                          "); they must have the same length");
  }
  for (std::size_t i = 0; i < layout.names.size(); ++i) {
    if (layout.names[i].empty()) {
      bad_option(owner, "feature_names[" + std::to_string(i) + "] is empty");
    }
    if (layout.sizes[i] <= 0 || layout.sizes[i] > INT32_MAX) {
      bad_option(owner, "feature_sizes[" + std::to_string(i) + "] (for '" + layout.names[i] +
                            "') is " + std::to_string(layout.sizes[i]) +
                            "; expected a positive size");
    }
    layout.offsets.push_back(layout.total);
    layout.total += layout.sizes[i];
  }
  if (layout.num_classes <= 0 || layout.num_classes > INT32_MAX) {
    bad_option(owner, "num_classes is " + std::to_string(layout.num_classes) +
                          "; expected a positive number of classes");
  }
  if (layout.id_key.empty()) bad_option(owner, "id_key is empty; expected a feature name");
  return layout;
}

// ---------------------------------------------------------------------------------------------
// Record errors. Everything here is on the error path only.

[[noreturn]] void bad_record(const RecordLocation& where, const std::string& message) {
  throw InvalidArgument(where.file + ", record " + std::to_string(where.record_index) + ": " +
                        message);
}

std::string count_of(int n, const char* singular, const char* plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

[[noreturn]] void missing_feature(const RecordLocation& where, const ExampleFeatures& map,
                                  const char* scope, const std::string& key,
                                  const std::string& expected) {
  std::string message = std::string(scope) + " '" + key + "' is missing; expected " + expected +
                        "; the record has " + map.describe_keys("features");
  if (key == "id" && map.contains("video_id")) {
    message += " (the 2017 data names the id 'video_id': set id_key)";
  } else if (key == "video_id" && map.contains("id")) {
    message += " (data since 2018 names the id 'id': set id_key)";
  }
  bad_record(where, message);
}

// ---------------------------------------------------------------------------------------------
// Parsing helpers shared by both readers.

// The single bytes value of `key`: FixedLenFeature([], tf.string).
std::string read_id(const ExampleFeatures& map, const std::string& key, const char* scope,
                    const RecordLocation& where) {
  const ExampleFeature* feature = map.find(key);
  if (feature == nullptr) missing_feature(where, map, scope, key, "a bytes list of 1 value");
  if (feature->kind() != Kind::kBytes || feature->size() != 1) {
    bad_record(where, std::string(scope) + " '" + key + "' is " + feature->description() +
                          ", expected a bytes list of 1 value (the video id)");
  }
  return std::string(feature->bytes()[0]);
}

// Multi-hot f32 [num_classes] from the int64 list `labels`; absent means no labels.
ParsedFeature read_labels(const ExampleFeatures& map, int64_t num_classes, const char* scope,
                          const RecordLocation& where) {
  ParsedFeature labels{DType::kF32,
                       {num_classes},
                       std::vector<std::byte>(static_cast<std::size_t>(num_classes) * 4)};
  const ExampleFeature* feature = map.find(kLabelsKey);
  if (feature == nullptr || feature->kind() == Kind::kNone) return labels;
  if (feature->kind() != Kind::kInt64) {
    bad_record(where, std::string(scope) + " 'labels' is " + feature->description() +
                          ", expected an int64 list of class indices");
  }
  const std::vector<int64_t>& values = feature->int64s();
  constexpr float kOne = 1.0f;
  std::byte* out = labels.bytes.data();
  for (std::size_t i = 0; i < values.size(); ++i) {
    const int64_t label = values[i];
    if (label < 0 || label >= num_classes) {
      bad_record(where, "label " + std::to_string(label) + " (value " + std::to_string(i) + " of " +
                            scope + " 'labels') is out of range; expected 0 <= label < " +
                            std::to_string(num_classes) + " (num_classes)");
    }
    std::memcpy(out + label * 4, &kOne, sizeof(kOne));
  }
  return labels;
}

ParsedFeature scalar_i32(int32_t value) {
  ParsedFeature feature{DType::kI32, {}, std::vector<std::byte>(sizeof(value))};
  std::memcpy(feature.bytes.data(), &value, sizeof(value));
  return feature;
}

// Dequantization, as TF computes utils.Dequantize in float32: out = float(q) * scalar, then
// out += bias, each rounded to float32. The two steps are separate passes so that no compiler
// fuses them into one multiply-add (a single rounding, which would differ from TF in the last
// bit); both run in fixed-size blocks, which GCC vectorizes at -O2.
constexpr std::size_t kBlock = 16;

void scale(const unsigned char* in, std::size_t n, float scalar, float* __restrict out) {
  std::size_t j = 0;
  for (; j + kBlock <= n; j += kBlock) {
    for (std::size_t k = 0; k < kBlock; ++k) out[j + k] = static_cast<float>(in[j + k]) * scalar;
  }
  for (; j < n; ++j) out[j] = static_cast<float>(in[j]) * scalar;
}

void add(float bias, std::size_t n, float* values) {
  std::size_t j = 0;
  for (; j + kBlock <= n; j += kBlock) {
    for (std::size_t k = 0; k < kBlock; ++k) values[j + k] += bias;
  }
  for (; j < n; ++j) values[j] += bias;
}

// ---------------------------------------------------------------------------------------------

class YT8MAggregatedFeatureReader final : public Reader {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"feature_names", OptionType::kStringList, "mean_rgb",
       "Float features of the tf.Example, concatenated in this order"},
      {"feature_sizes", OptionType::kIntList, "1024",
       "Number of floats of each feature in feature_names"},
      {"num_classes", OptionType::kInt, "3862", "Number of classes (4716 for the 2017 data)"},
      {"id_key", OptionType::kString, "id",
       "Bytes feature holding the video id ('video_id' for the 2017 data)"},
  };

  explicit YT8MAggregatedFeatureReader(const Options& options)
      : layout_(read_layout("YT8MAggregatedFeatureReader", options)) {}

  std::vector<FeatureSpec> features() const override {
    return {{"features", DType::kF32, {layout_.total}},
            {"labels", DType::kF32, {layout_.num_classes}},
            {"num_frames", DType::kI32, {}}};
  }

  ParsedRecord parse(std::string_view record, const RecordLocation& where) const override {
    const ParsedExample example = parse_example(record, where);
    const ExampleFeatures& map = example.features;

    ParsedRecord parsed;
    parsed.id = read_id(map, layout_.id_key, "feature", where);

    std::vector<std::byte> values(static_cast<std::size_t>(layout_.total) * sizeof(float));
    for (std::size_t i = 0; i < layout_.names.size(); ++i) {
      const std::string& name = layout_.names[i];
      const int64_t size = layout_.sizes[i];
      const ExampleFeature* feature = map.find(name);
      if (feature == nullptr) {
        missing_feature(where, map, "feature", name,
                        "a float list of " + std::to_string(size) + " values");
      }
      if (feature->kind() != Kind::kFloat) {
        bad_record(where, "feature '" + name + "' is " + feature->description() +
                              ", expected a float list of " + std::to_string(size) + " values");
      }
      const std::vector<float>& floats = feature->floats();
      if (static_cast<int64_t>(floats.size()) != size) {
        bad_record(where, "feature '" + name + "' has " + std::to_string(floats.size()) +
                              " floats, expected " + std::to_string(size));
      }
      std::memcpy(values.data() + layout_.offsets[i] * sizeof(float), floats.data(),
                  static_cast<std::size_t>(size) * sizeof(float));
    }

    parsed.features.emplace("features",
                            ParsedFeature{DType::kF32, {layout_.total}, std::move(values)});
    parsed.features.emplace("labels", read_labels(map, layout_.num_classes, "feature", where));
    parsed.features.emplace("num_frames", scalar_i32(1));
    return parsed;
  }

 private:
  Layout layout_;
};

// ---------------------------------------------------------------------------------------------

class YT8MFrameFeatureReader final : public Reader {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"feature_names", OptionType::kStringList, "rgb",
       "Feature lists of the tf.SequenceExample, concatenated per frame in this order"},
      {"feature_sizes", OptionType::kIntList, "1024",
       "Number of uint8 values per frame of each feature in feature_names"},
      {"num_classes", OptionType::kInt, "3862", "Number of classes (4716 for the 2017 data)"},
      {"id_key", OptionType::kString, "id",
       "Context bytes feature holding the video id ('video_id' for the 2017 data)"},
      {"max_frames", OptionType::kInt, "300",
       "Frames kept per video: longer videos are truncated, shorter ones padded with zeros"},
      {"max_quantized_value", OptionType::kFloat, "2.0", "Value that uint8 255 stands for"},
      {"min_quantized_value", OptionType::kFloat, "-2.0", "Value that uint8 0 stands for"},
  };

  explicit YT8MFrameFeatureReader(const Options& options)
      : layout_(read_layout("YT8MFrameFeatureReader", options)),
        max_frames_(options.get_int("max_frames")) {
    const double max_value = options.get_float("max_quantized_value");
    const double min_value = options.get_float("min_quantized_value");
    if (max_frames_ <= 0 || max_frames_ > INT32_MAX) {
      bad_option("YT8MFrameFeatureReader",
                 "max_frames is " + std::to_string(max_frames_) + "; expected a positive number");
    }
    if (!(max_value > min_value)) {
      bad_option("YT8MFrameFeatureReader", "max_quantized_value (" +
                                               option_value_to_string(max_value) +
                                               ") must be greater than min_quantized_value (" +
                                               option_value_to_string(min_value) + ")");
    }
    // utils.Dequantize: scalar and bias are Python floats, rounded to float32 when they meet
    // the float tensor.
    const double range = max_value - min_value;
    scalar_ = static_cast<float>(range / 255.0);
    bias_ = static_cast<float>(range / 512.0 + min_value);
  }

  std::vector<FeatureSpec> features() const override {
    return {{"features", DType::kF32, {max_frames_, layout_.total}},
            {"labels", DType::kF32, {layout_.num_classes}},
            {"num_frames", DType::kI32, {}}};
  }

  ParsedRecord parse(std::string_view record, const RecordLocation& where) const override {
    const ParsedSequenceExample sequence = parse_sequence_example(record, where);
    const ExampleFeatures& context = sequence.context;

    ParsedRecord parsed;
    parsed.id = read_id(context, layout_.id_key, "context feature", where);

    // Find every feature list and check that they agree on the number of frames.
    const std::size_t num_features = layout_.names.size();
    std::vector<const ExampleFeatureList*> frames(num_features);
    for (std::size_t i = 0; i < num_features; ++i) {
      frames[i] = sequence.feature_lists.find(layout_.names[i]);
      if (frames[i] == nullptr) {
        bad_record(where, "feature list '" + layout_.names[i] +
                              "' is missing; expected one bytes feature of " +
                              std::to_string(layout_.sizes[i]) +
                              " uint8 values per frame; the record has " +
                              sequence.feature_lists.describe_keys("feature lists"));
      }
      if (frames[i]->size() != frames[0]->size()) {
        bad_record(where, "feature list '" + layout_.names[i] + "' has " +
                              count_of(static_cast<int>(frames[i]->size()), "frame", "frames") +
                              " but '" + layout_.names[0] + "' has " +
                              std::to_string(frames[0]->size()) +
                              "; every feature list must have the same number of frames");
      }
    }
    const int total_frames = static_cast<int>(frames[0]->size());
    const int64_t num_frames = std::min<int64_t>(total_frames, max_frames_);

    // Check every frame, including those truncated away: a malformed record is an error
    // whatever max_frames is.
    for (std::size_t i = 0; i < num_features; ++i) {
      const std::size_t size = static_cast<std::size_t>(layout_.sizes[i]);
      for (int t = 0; t < total_frames; ++t) {
        const ExampleFeature& frame = (*frames[i])[static_cast<std::size_t>(t)];
        if (frame.kind() != Kind::kBytes || frame.size() != 1) {
          bad_record(where, "feature list '" + layout_.names[i] + "' frame " + std::to_string(t) +
                                " is " + frame.description() +
                                ", expected a bytes list of 1 value (" + std::to_string(size) +
                                " uint8 values)");
        }
        const std::size_t found = frame.bytes()[0].size();
        if (found != size) {
          bad_record(where, "feature list '" + layout_.names[i] + "' frame " + std::to_string(t) +
                                " has " + std::to_string(found) + " bytes, expected " +
                                std::to_string(size));
        }
      }
    }

    // Dequantize the kept frames row by row. The rows past them, up to max_frames, are zeros
    // that the core writes where it batches the record (reader.h), so the record holds only
    // its own frames.
    const std::size_t row = static_cast<std::size_t>(layout_.total);
    std::vector<std::byte> values;
    values.reserve(static_cast<std::size_t>(num_frames) * row * sizeof(float));
    std::vector<float> row_values(row);
    for (int64_t t = 0; t < num_frames; ++t) {
      float* out = row_values.data();
      for (std::size_t i = 0; i < num_features; ++i) {
        const std::string_view bytes = (*frames[i])[static_cast<std::size_t>(t)].bytes()[0];
        scale(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), scalar_, out);
        out += bytes.size();
      }
      add(bias_, row, row_values.data());
      const auto* first = reinterpret_cast<const std::byte*>(row_values.data());
      values.insert(values.end(), first, first + row * sizeof(float));
    }

    parsed.features.emplace(
        "features", ParsedFeature{DType::kF32, {num_frames, layout_.total}, std::move(values)});
    parsed.features.emplace("labels",
                            read_labels(context, layout_.num_classes, "context feature", where));
    parsed.features.emplace("num_frames", scalar_i32(static_cast<int32_t>(num_frames)));
    return parsed;
  }

 private:
  Layout layout_;
  int64_t max_frames_;
  float scalar_ = 0;  // dequantized = uint8 * scalar_ + bias_
  float bias_ = 0;
};

}  // namespace
}  // namespace trainyard::readers

#define TRAINYARD_YT8M_READER_CLASSES(X)                                                  \
  X(reader, YT8MAggregatedFeatureReader, trainyard::readers::YT8MAggregatedFeatureReader, \
    "YouTube-8M video-level tf.Example: float features concatenated, multi-hot labels")   \
  X(reader, YT8MFrameFeatureReader, trainyard::readers::YT8MFrameFeatureReader,           \
    "YouTube-8M frame-level tf.SequenceExample: dequantized uint8 frames, padded to max_frames")
TRAINYARD_PLUGIN(yt8m_readers, 0, 1, 0, TRAINYARD_YT8M_READER_CLASSES)
