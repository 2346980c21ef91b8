#include "trainyard/core/image_transforms.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <utility>

#include "trainyard/error.h"
#include "trainyard/image_ops.h"

namespace trainyard {
namespace {

// vgg_preprocessing's _R_MEAN, _G_MEAN, _B_MEAN.
constexpr float kVggMeans[3] = {123.68f, 116.78f, 103.94f};

std::string record_name(const RecordLocation& where) {
  return where.file + ", record " + std::to_string(where.record_index);
}

// A uniform integer in [0, count), as tf.random_uniform(maxval=count, dtype=int32) draws it.
int64_t uniform_index(ExampleRandom& random, int64_t count) {
  const auto index = static_cast<int64_t>(random.uniform() * static_cast<float>(count));
  return std::min(index, count - 1);
}

}  // namespace

ImageClassificationPreprocessing::ImageClassificationPreprocessing(Options options)
    : options_(std::move(options)) {
  const std::string me = "ImageClassificationPreprocessing: ";
  if (options_.image.empty()) throw InvalidArgument(me + "the image feature name is empty");
  if (options_.fixed_resize_side < 0) {
    throw InvalidArgument(me + "fixed_resize_side is " +
                          std::to_string(options_.fixed_resize_side) +
                          "; expected 0 (no resize) or a positive side");
  }
  if (options_.default_image_size < 1) {
    throw InvalidArgument(me + "default_image_size is " +
                          std::to_string(options_.default_image_size) +
                          "; expected a positive crop size");
  }
}

std::vector<FeatureSpec> ImageClassificationPreprocessing::features(
    std::vector<FeatureSpec> input) const {
  const std::string me = "ImageClassificationPreprocessing: ";
  auto image = std::find_if(input.begin(), input.end(),
                            [&](const FeatureSpec& s) { return s.name == options_.image; });
  if (image == input.end()) {
    std::string known;
    for (const FeatureSpec& s : input) known += (known.empty() ? "" : ", ") + s.name;
    throw InvalidArgument(me + "no image feature '" + options_.image + "' (the features are " +
                          known + ")");
  }
  if ((image->dtype != DType::kU8 && image->dtype != DType::kF32) || image->shape.size() != 3 ||
      image->shape[2] < 1) {
    std::string shape;
    for (int64_t d : image->shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw InvalidArgument(me + "image feature '" + options_.image + "' is " +
                          dtype_name(image->dtype) + " [" + shape +
                          "]; expected u8 or f32 [height, width, channels] with a known number "
                          "of channels");
  }
  const int64_t channels = image->shape[2];
  if (options_.normalization == Normalization::kVgg && channels != 3) {
    throw InvalidArgument(me +
                          "VGG normalization subtracts the mean of each of R, G and B, but "
                          "image feature '" +
                          options_.image + "' has " + std::to_string(channels) +
                          " channels (use INCEPTION, LENET or NONE for gray images)");
  }
  image->dtype = DType::kF32;
  image->shape = {options_.default_image_size, options_.default_image_size, channels};
  return input;
}

void ImageClassificationPreprocessing::apply(ParsedRecord& record, ExampleRandom& random,
                                             const RecordLocation& where) const {
  ParsedFeature& feature = record.features.at(options_.image);
  image::ImageShape shape{feature.shape[0], feature.shape[1], feature.shape[2]};
  const auto channels = static_cast<std::size_t>(shape.channels);
  if (options_.normalization == Normalization::kVgg && channels != 3) {
    throw InvalidArgument(record_name(where) + ": image feature '" + options_.image + "' has " +
                          std::to_string(channels) + " channels; VGG normalization needs 3");
  }

  // 1. Resize (always to f32); without a resize the crop reads the decoded values as they are,
  // so that no f32 copy of a whole large image is made for a small crop.
  std::vector<float> resized_values;
  std::span<const std::byte> source = feature.bytes;
  std::size_t element_size = feature.dtype == DType::kU8 ? 1 : sizeof(float);
  if (options_.fixed_resize_side > 0) {
    const image::ResizeSize size =
        image::smallest_side_size(shape.height, shape.width, options_.fixed_resize_side);
    resized_values.resize(static_cast<std::size_t>(size.height) *
                          static_cast<std::size_t>(size.width) * channels);
    if (feature.dtype == DType::kU8) {
      const std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(feature.bytes.data()),
                                        feature.bytes.size());
      image::resize_bilinear(in, shape, resized_values, size.height, size.width);
    } else {
      std::vector<float> in(feature.bytes.size() / sizeof(float));
      std::memcpy(in.data(), feature.bytes.data(), in.size() * sizeof(float));
      image::resize_bilinear(std::span<const float>(in), shape, resized_values, size.height,
                             size.width);
    }
    shape.height = size.height;
    shape.width = size.width;
    source = std::as_bytes(std::span<const float>(resized_values));
    element_size = sizeof(float);
  }

  // 2. Crop, then to f32 (exact for u8, so the same values as converting first).
  const int64_t crop = options_.default_image_size;
  if (shape.height < crop || shape.width < crop) {
    std::string resized =
        options_.fixed_resize_side > 0
            ? " after resizing its shorter side to " + std::to_string(options_.fixed_resize_side) +
                  " (fixed_resize_side) from " + std::to_string(feature.shape[0]) + " x " +
                  std::to_string(feature.shape[1])
            : "";
    throw InvalidArgument(record_name(where) + ": image feature '" + options_.image + "' is " +
                          std::to_string(shape.height) + " x " + std::to_string(shape.width) +
                          resized + ", smaller than the " + std::to_string(crop) + " x " +
                          std::to_string(crop) + " crop (default_image_size)");
  }
  int64_t top = (shape.height - crop) / 2;
  int64_t left = (shape.width - crop) / 2;
  if (options_.random_crop) {
    top = uniform_index(random, shape.height - crop + 1);
    left = uniform_index(random, shape.width - crop + 1);
  }
  const image::ImageShape out_shape{crop, crop, shape.channels};
  std::vector<float> out(out_shape.elements());
  if (element_size == sizeof(float)) {
    image::crop(source, shape, sizeof(float), top, left, crop, crop,
                std::as_writable_bytes(std::span<float>(out)));
  } else {
    std::vector<uint8_t> window(out.size());
    image::crop(source, shape, 1, top, left, crop, crop,
                std::as_writable_bytes(std::span<uint8_t>(window)));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(window[i]);
  }

  // 3. Flip.
  if (options_.random_flip && random.bernoulli(0.5f)) {
    image::flip_left_right(std::as_writable_bytes(std::span<float>(out)), out_shape, sizeof(float));
  }

  // 4. Normalize.
  switch (options_.normalization) {
    case Normalization::kVgg:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] -= kVggMeans[i % 3];
      break;
    case Normalization::kInception: {
      // convert_image_dtype's scale, then tf.subtract(image, 0.5) and tf.multiply(image, 2.0).
      const float scale = 1.0f / 255.0f;
      for (float& x : out) x = (x * scale - 0.5f) * 2.0f;
      break;
    }
    case Normalization::kLenet:
      for (float& x : out) x = (x - 128.0f) / 128.0f;
      break;
    case Normalization::kNone:
      break;
  }

  feature.dtype = DType::kF32;
  feature.shape = {crop, crop, shape.channels};
  // A new buffer: resizing the decoded image's would keep its whole capacity with the record
  // (a 28 x 28 crop of an 8000 x 8000 image held 192 MB through the shuffle buffer).
  const std::span<const std::byte> result = std::as_bytes(std::span<const float>(out));
  feature.bytes = std::vector<std::byte>(result.begin(), result.end());
}

}  // namespace trainyard
