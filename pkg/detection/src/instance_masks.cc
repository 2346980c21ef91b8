#include "trainyard/pkg/detection/instance_masks.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard::detection {

namespace {

void check_reframe_shapes(const Tensor& box_masks, std::span<const float> boxes, int64_t height,
                          int64_t width) {
  const Shape& s = box_masks.shape();
  if (s.rank() != 3 || static_cast<int64_t>(boxes.size()) != s[0] * 4 || height < 1 || width < 1) {
    throw InvalidArgument("reframe_box_masks_to_image_masks: box masks " + box_masks.description() +
                          " and " + std::to_string(boxes.size()) + " box coordinates into " +
                          std::to_string(height) + " x " + std::to_string(width) +
                          "; expected [N, h, w], N x 4 and an image of at least 1 x 1");
  }
}

// Box masks [first, first + count) pasted into the image: crop_and_resize of each with the unit
// box relative to its box (transform_boxes_relative_to_boxes, in float32).
Tensor reframe_range(const Tensor& box_masks, std::span<const float> boxes, int64_t first,
                     int64_t count, int64_t height, int64_t width) {
  const Shape& s = box_masks.shape();
  std::vector<float> reverse;
  std::vector<int32_t> index;
  for (int64_t i = 0; i < count; ++i) {
    const float* b = boxes.data() + (first + i) * 4;
    const float h = std::max(b[2] - b[0], 1e-4f);
    const float w = std::max(b[3] - b[1], 1e-4f);
    reverse.insert(reverse.end(),
                   {(0.0f - b[0]) / h, (0.0f - b[1]) / w, (1.0f - b[0]) / h, (1.0f - b[1]) / w});
    index.push_back(static_cast<int32_t>(i));
  }
  Backend& backend = box_masks.backend();
  const Tensor planes = ops::reshape(
      ops::cast(ops::slice(box_masks, {first, 0, 0}, {count, s[1], s[2]}), DType::kF32),
      Shape{count, s[1], s[2], 1});
  return ops::reshape(
      ops::crop_and_resize(planes, Tensor::from_vector(backend, Shape{count, 4}, reverse),
                           Tensor::from_vector(backend, Shape{count}, index), {height, width}),
      Shape{count, height, width});
}

}  // namespace

Tensor reframe_box_masks_to_image_mask_values(const Tensor& box_masks, std::span<const float> boxes,
                                              int64_t height, int64_t width) {
  check_reframe_shapes(box_masks, boxes, height, width);
  NoGradScope no_grad;
  const int64_t n = box_masks.shape()[0];
  if (n == 0) {
    return Tensor::from_vector(box_masks.backend(), Shape{0, height, width}, std::vector<float>{});
  }
  return reframe_range(box_masks, boxes, 0, n, height, width);
}

std::vector<uint8_t> reframe_box_masks_to_image_masks(const Tensor& box_masks,
                                                      std::span<const float> boxes, int64_t height,
                                                      int64_t width) {
  check_reframe_shapes(box_masks, boxes, height, width);
  NoGradScope no_grad;
  const int64_t n = box_masks.shape()[0];
  // At most kChunkPixels f32 image pixels at a time (a few hundred detections on a large image
  // would take gigabytes at once).
  constexpr int64_t kChunkPixels = int64_t{1} << 24;
  const int64_t per_chunk = std::max<int64_t>(1, kChunkPixels / (height * width));
  std::vector<uint8_t> out(static_cast<std::size_t>(n * height * width));
  for (int64_t first = 0; first < n; first += per_chunk) {
    const int64_t k = std::min(per_chunk, n - first);
    const std::vector<float> image =
        reframe_range(box_masks, boxes, first, k, height, width).to_vector<float>();
    std::transform(image.begin(), image.end(),
                   out.begin() + static_cast<std::ptrdiff_t>(first * height * width),
                   [](float v) { return static_cast<uint8_t>(v > 0.5f ? 1 : 0); });
  }
  return out;
}

}  // namespace trainyard::detection
