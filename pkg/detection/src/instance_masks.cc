#include "trainyard/pkg/detection/instance_masks.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard::detection {

std::vector<uint8_t> reframe_box_masks_to_image_masks(const Tensor& box_masks,
                                                      std::span<const float> boxes, int64_t height,
                                                      int64_t width) {
  const Shape& s = box_masks.shape();
  if (s.rank() != 3 || static_cast<int64_t>(boxes.size()) != s[0] * 4 || height < 1 || width < 1) {
    throw InvalidArgument("reframe_box_masks_to_image_masks: box masks " + box_masks.description() +
                          " and " + std::to_string(boxes.size()) + " box coordinates into " +
                          std::to_string(height) + " x " + std::to_string(width) +
                          "; expected [N, h, w], N x 4 and an image of at least 1 x 1");
  }
  const int64_t n = s[0];
  if (n == 0) return {};
  NoGradScope no_grad;
  Backend& backend = box_masks.backend();
  std::vector<float> reverse;
  std::vector<int32_t> index;
  for (int64_t i = 0; i < n; ++i) {
    const float* b = boxes.data() + i * 4;
    const float h = std::max(b[2] - b[0], 1e-4f);
    const float w = std::max(b[3] - b[1], 1e-4f);
    reverse.insert(reverse.end(),
                   {(0.0f - b[0]) / h, (0.0f - b[1]) / w, (1.0f - b[0]) / h, (1.0f - b[1]) / w});
    index.push_back(static_cast<int32_t>(i));
  }
  const Tensor planes = ops::reshape(ops::cast(box_masks, DType::kF32), Shape{n, s[1], s[2], 1});
  const Tensor all_boxes = Tensor::from_vector(backend, Shape{n, 4}, reverse);
  // At most kChunkPixels f32 image pixels at a time (a few hundred detections on a large image
  // would take gigabytes at once).
  constexpr int64_t kChunkPixels = int64_t{1} << 24;
  const int64_t per_chunk = std::max<int64_t>(1, kChunkPixels / (height * width));
  std::vector<uint8_t> out(static_cast<std::size_t>(n * height * width));
  for (int64_t first = 0; first < n; first += per_chunk) {
    const int64_t k = std::min(per_chunk, n - first);
    const std::vector<int32_t> chunk_index(index.begin(), index.begin() + k);
    const std::vector<float> image =
        ops::crop_and_resize(ops::slice(planes, {first, 0, 0, 0}, {k, s[1], s[2], 1}),
                             ops::slice(all_boxes, {first, 0}, {k, 4}),
                             Tensor::from_vector(backend, Shape{k}, chunk_index), {height, width})
            .to_vector<float>();
    std::transform(image.begin(), image.end(),
                   out.begin() + static_cast<std::ptrdiff_t>(first * height * width),
                   [](float v) { return static_cast<uint8_t>(v > 0.5f ? 1 : 0); });
  }
  return out;
}

}  // namespace trainyard::detection
