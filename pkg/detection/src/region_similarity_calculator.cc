#include "trainyard/pkg/detection/region_similarity_calculator.h"

#include "trainyard/pkg/detection/box_ops.h"

namespace trainyard::detection {

std::vector<float> IouSimilarity::compare(std::span<const float> boxes1,
                                          std::span<const float> boxes2) const {
  return iou(boxes1, boxes2);
}

std::vector<float> IoaSimilarity::compare(std::span<const float> boxes1,
                                          std::span<const float> boxes2) const {
  return ioa(boxes1, boxes2);
}

std::vector<float> NegSqDistSimilarity::compare(std::span<const float> boxes1,
                                                std::span<const float> boxes2) const {
  const int64_t n = num_boxes(boxes1, "boxes1"), m = num_boxes(boxes2, "boxes2");
  std::vector<float> out(static_cast<std::size_t>(n * m));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      float d = 0.0f;
      for (int k = 0; k < 4; ++k) {
        const float e = boxes1[4 * i + k] - boxes2[4 * j + k];
        d += e * e;
      }
      out[i * m + j] = -d;
    }
  }
  return out;
}

}  // namespace trainyard::detection
