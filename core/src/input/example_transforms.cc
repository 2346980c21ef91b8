#include "trainyard/example_transforms.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "trainyard/error.h"

namespace trainyard {

ExampleTransform::~ExampleTransform() = default;

RandomHorizontalFlip::RandomHorizontalFlip(Options options) : options_(std::move(options)) {
  if (!(options_.probability >= 0.0f && options_.probability <= 1.0f)) {
    throw InvalidArgument("RandomHorizontalFlip: probability is " +
                          std::to_string(options_.probability) + "; it must be in [0, 1]");
  }
  if (options_.image.empty()) {
    throw InvalidArgument("RandomHorizontalFlip: the image feature name is empty");
  }
}

std::vector<FeatureSpec> RandomHorizontalFlip::features(std::vector<FeatureSpec> input) const {
  auto find = [&](const std::string& name) {
    return std::find_if(input.begin(), input.end(),
                        [&](const FeatureSpec& s) { return s.name == name; });
  };
  auto image = find(options_.image);
  if (image == input.end()) {
    throw InvalidArgument("RandomHorizontalFlip: no image feature '" + options_.image + "'");
  }
  if (image->shape.size() < 3) {
    throw InvalidArgument("RandomHorizontalFlip: image feature '" + options_.image + "' has rank " +
                          std::to_string(image->shape.size()) +
                          "; it must be [..., height, width, channels]");
  }
  if (!options_.boxes.empty()) {
    auto boxes = find(options_.boxes);
    if (boxes == input.end()) {
      throw InvalidArgument("RandomHorizontalFlip: no boxes feature '" + options_.boxes +
                            "' (give an empty name to flip the image alone)");
    }
    if (boxes->dtype != DType::kF32 || boxes->shape.size() != 2 || boxes->shape[1] != 4) {
      throw InvalidArgument("RandomHorizontalFlip: boxes feature '" + options_.boxes + "' is " +
                            dtype_name(boxes->dtype) + " of rank " +
                            std::to_string(boxes->shape.size()) +
                            "; it must be f32 [num_boxes, 4]");
    }
  }
  if (!options_.masks.empty()) {
    auto masks = find(options_.masks);
    if (masks != input.end() && masks->shape.size() != 3) {
      throw InvalidArgument("RandomHorizontalFlip: instance masks feature '" + options_.masks +
                            "' has rank " + std::to_string(masks->shape.size()) +
                            "; it must be [num_boxes, height, width]");
    }
  }
  return input;
}

void RandomHorizontalFlip::flip_image(std::byte* data, const std::vector<int64_t>& shape,
                                      std::size_t element_size) {
  const std::size_t rank = shape.size();
  const auto width = static_cast<std::size_t>(shape[rank - 2]);
  const std::size_t pixel = static_cast<std::size_t>(shape[rank - 1]) * element_size;
  std::size_t rows = 1;
  for (std::size_t d = 0; d + 2 < rank; ++d) rows *= static_cast<std::size_t>(shape[d]);
  std::vector<std::byte> tmp(pixel);
  for (std::size_t r = 0; r < rows; ++r) {
    std::byte* row = data + r * width * pixel;
    for (std::size_t x = 0; x < width / 2; ++x) {
      std::byte* a = row + x * pixel;
      std::byte* b = row + (width - 1 - x) * pixel;
      std::memcpy(tmp.data(), a, pixel);
      std::memcpy(a, b, pixel);
      std::memcpy(b, tmp.data(), pixel);
    }
  }
}

void RandomHorizontalFlip::flip_boxes(float* boxes, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    float* box = boxes + 4 * i;
    const float xmin = box[1];
    box[1] = 1.0f - box[3];
    box[3] = 1.0f - xmin;
  }
}

void RandomHorizontalFlip::apply(ParsedRecord& record, ExampleRandom& random,
                                 const RecordLocation&) const {
  if (!random.bernoulli(options_.probability)) return;
  ParsedFeature& image = record.features.at(options_.image);
  if (!options_.masks.empty()) {
    auto it = record.features.find(options_.masks);
    if (it != record.features.end()) {
      ParsedFeature& masks = it->second;
      const std::size_t rank = image.shape.size();
      if (masks.shape.size() != 3 || masks.shape[1] != image.shape[rank - 3] ||
          masks.shape[2] != image.shape[rank - 2]) {
        std::string shape;
        for (int64_t d : masks.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
        throw InvalidArgument("RandomHorizontalFlip: instance masks '" + options_.masks +
                              "' are [" + shape + "]; they must be [num_boxes, " +
                              std::to_string(image.shape[rank - 3]) + ", " +
                              std::to_string(image.shape[rank - 2]) + "] of the image");
      }
      // Each plane as an image [N, H, W, 1].
      flip_image(masks.bytes.data(), {masks.shape[0], masks.shape[1], masks.shape[2], 1},
                 dtype_size(masks.dtype));
    }
  }
  flip_image(image.bytes.data(), image.shape, dtype_size(image.dtype));
  if (options_.boxes.empty()) return;
  ParsedFeature& boxes = record.features.at(options_.boxes);
  const std::size_t count = boxes.bytes.size() / (4 * sizeof(float));
  std::vector<float> values(count * 4);
  std::memcpy(values.data(), boxes.bytes.data(), values.size() * sizeof(float));
  flip_boxes(values.data(), count);
  std::memcpy(boxes.bytes.data(), values.data(), values.size() * sizeof(float));
}

}  // namespace trainyard
