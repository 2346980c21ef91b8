// The image classification reader, for tf.Example records in TF-Slim's layout (the
// download_and_convert_*.py scripts, dataset_utils.image_to_tfexample, and
// `trainyard data convert-images` / `convert-mnist`):
//
//   image/encoded      bytes, required: a JPEG or PNG file's bytes
//   image/format       bytes, default "jpeg": "jpeg", "jpg", "JPEG", "png" or "PNG". The data's
//                      own magic bytes choose the decoder (as tf.io.decode_image), so a record
//                      that names the other format still decodes; any other name is an error
//   image/class/label  int64, one value: label - labels_offset must lie in [0, num_classes).
//                      Absent: all-zero labels (unlabeled data for prediction)
//   image/height, image/width   int64, optional; when present they must match the image
//   image/source_id, image/filename   bytes, optional: the record's id, in that order
//
// ImageClassificationReader yields
//   "image"   u8 [-1, -1, channels]: the decoded image, height x width x channels (HWC); the
//             size varies per record, so a per-example transform (image_classification_
//             preprocessing) must give it a fixed size before batching
//   "labels"  f32 [num_classes]: one-hot
// Decoding runs in the reader threads. Errors name the file and record, and the key:
// DataLoss for a malformed record or an undecodable image, InvalidArgument for everything else.
// parse() keeps no state and is safe to call from several threads at once.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/example.h"
#include "trainyard/options.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/plugin.h"
#include "trainyard/reader.h"
#include "trainyard/tensor.h"

namespace trainyard::readers {
namespace {

using Kind = ExampleFeature::Kind;

constexpr const char* kEncoded = "image/encoded";
constexpr const char* kFormat = "image/format";
constexpr const char* kLabel = "image/class/label";
constexpr const char* kHeight = "image/height";
constexpr const char* kWidth = "image/width";
constexpr const char* kSourceId = "image/source_id";
constexpr const char* kFilename = "image/filename";

std::string record_name(const RecordLocation& where) {
  return where.file + ", record " + std::to_string(where.record_index);
}

[[noreturn]] void bad_record(const RecordLocation& where, const std::string& message) {
  throw InvalidArgument(record_name(where) + ": " + message);
}

[[noreturn]] void bad_option(const std::string& message) {
  throw InvalidArgument("ImageClassificationReader: " + message);
}

// The single bytes value of `key`, or nullopt when the record has no such feature.
std::optional<std::string_view> single_bytes(const ExampleFeatures& map, const char* key,
                                             const RecordLocation& where) {
  const ExampleFeature* feature = map.find(key);
  if (feature == nullptr || feature->kind() == Kind::kNone) return std::nullopt;
  if (feature->kind() != Kind::kBytes || feature->size() != 1) {
    bad_record(where, std::string("feature '") + key + "' is " + feature->description() +
                          ", expected a bytes list of 1 value");
  }
  return feature->bytes()[0];
}

std::optional<int64_t> single_int64(const ExampleFeatures& map, const char* key,
                                    const RecordLocation& where) {
  const ExampleFeature* feature = map.find(key);
  if (feature == nullptr || feature->kind() == Kind::kNone) return std::nullopt;
  if (feature->kind() != Kind::kInt64 || feature->size() != 1) {
    bad_record(where, std::string("feature '") + key + "' is " + feature->description() +
                          ", expected an int64 list of 1 value");
  }
  return feature->int64s()[0];
}

class ImageClassificationReader final : public Reader {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"num_classes", OptionType::kInt, "1000",
       "Number of classes: the length of the one-hot labels (set from --num_classes)"},
      {"labels_offset", OptionType::kInt, "0",
       "Subtracted from image/class/label (TF-Slim's --labels_offset: 1 for a 1001-class "
       "dataset with a background class read by a 1000-class model)"},
      {"channels", OptionType::kInt, "3",
       "Channels of the decoded image: 3 (RGB; gray is replicated, alpha dropped) or 1 (gray)"},
      {"max_image_pixels", OptionType::kInt, "67108864",
       "Larger images (height x width, from their header) are refused before decoding"},
  };

  explicit ImageClassificationReader(const Options& options)
      : num_classes_(options.get_int("num_classes")),
        labels_offset_(options.get_int("labels_offset")),
        channels_(options.get_int("channels")),
        max_pixels_(options.get_int("max_image_pixels")) {
    if (num_classes_ <= 0 || num_classes_ > INT32_MAX) {
      bad_option("num_classes is " + std::to_string(num_classes_) +
                 "; expected a positive number of classes");
    }
    if (channels_ != 1 && channels_ != 3) {
      bad_option("channels is " + std::to_string(channels_) + "; expected 1 (gray) or 3 (RGB)");
    }
    if (max_pixels_ <= 0) {
      bad_option("max_image_pixels is " + std::to_string(max_pixels_) +
                 "; expected a positive number of pixels");
    }
  }

  std::vector<FeatureSpec> features() const override {
    return {{"image", DType::kU8, {-1, -1, channels_}}, {"labels", DType::kF32, {num_classes_}}};
  }

  ParsedRecord parse(std::string_view record, const RecordLocation& where) const override {
    const ParsedExample example = parse_example(record, where);
    const ExampleFeatures& map = example.features;

    ParsedRecord parsed;
    if (auto id = single_bytes(map, kSourceId, where)) {
      parsed.id = std::string(*id);
    } else if (auto name = single_bytes(map, kFilename, where)) {
      parsed.id = std::string(*name);
    }

    const std::optional<std::string_view> encoded = single_bytes(map, kEncoded, where);
    if (!encoded) {
      bad_record(where, std::string("feature '") + kEncoded +
                            "' is missing; expected a bytes list of 1 value (a JPEG or PNG "
                            "image); the record has " +
                            map.describe_keys("features"));
    }
    const std::string_view format = single_bytes(map, kFormat, where).value_or("jpeg");
    if (!image::image_format_named(format)) {
      bad_record(where, std::string("feature '") + kFormat + "' is '" + std::string(format) +
                            "'; expected jpeg, jpg, JPEG, png or PNG (raw and other formats are "
                            "not supported)");
    }
    image::DecodedImage decoded = image::decode_image(
        std::as_bytes(std::span<const char>(encoded->data(), encoded->size())),
        static_cast<int>(channels_), record_name(where) + ": " + kEncoded, max_pixels_);
    check_size(map, kHeight, decoded.height, decoded, where);
    check_size(map, kWidth, decoded.width, decoded, where);

    ParsedFeature image_feature{DType::kU8, {decoded.height, decoded.width, channels_}, {}};
    image_feature.bytes.resize(decoded.pixels.size());
    std::memcpy(image_feature.bytes.data(), decoded.pixels.data(), decoded.pixels.size());
    parsed.features.emplace("image", std::move(image_feature));
    parsed.features.emplace("labels", read_label(map, where));
    return parsed;
  }

 private:
  static void check_size(const ExampleFeatures& map, const char* key, int64_t decoded_size,
                         const image::DecodedImage& image, const RecordLocation& where) {
    const std::optional<int64_t> given = single_int64(map, key, where);
    if (given && *given != decoded_size) {
      bad_record(where, std::string("feature '") + key + "' is " + std::to_string(*given) +
                            " but '" + kEncoded + "' decodes to a " + std::to_string(image.height) +
                            " x " + std::to_string(image.width) + " " +
                            image::image_format_name(image.format) + " image");
    }
  }

  ParsedFeature read_label(const ExampleFeatures& map, const RecordLocation& where) const {
    ParsedFeature labels{DType::kF32,
                         {num_classes_},
                         std::vector<std::byte>(static_cast<std::size_t>(num_classes_) * 4)};
    const std::optional<int64_t> label = single_int64(map, kLabel, where);
    if (!label) return labels;
    const int64_t index = *label - labels_offset_;
    if (index < 0 || index >= num_classes_) {
      std::string message = std::string("feature '") + kLabel + "' is " + std::to_string(*label);
      if (labels_offset_ != 0) {
        message += " (" + std::to_string(index) + " after labels_offset " +
                   std::to_string(labels_offset_) + ")";
      }
      bad_record(where, message + "; expected 0 <= label - labels_offset < " +
                            std::to_string(num_classes_) + " (num_classes)");
    }
    constexpr float kOne = 1.0f;
    std::memcpy(labels.bytes.data() + index * 4, &kOne, sizeof(kOne));
    return labels;
  }

  int64_t num_classes_;
  int64_t labels_offset_;
  int64_t channels_;
  int64_t max_pixels_;
};

}  // namespace
}  // namespace trainyard::readers

#define TRAINYARD_IMAGE_READER_CLASSES(X)                                                  \
  X(reader, ImageClassificationReader, trainyard::readers::ImageClassificationReader,      \
    "TF-Slim image tf.Example: JPEG or PNG image/encoded decoded to u8 [H, W, channels], " \
    "one-hot labels from image/class/label")
TRAINYARD_PLUGIN(image_readers, 0, 1, 0, TRAINYARD_IMAGE_READER_CLASSES)
