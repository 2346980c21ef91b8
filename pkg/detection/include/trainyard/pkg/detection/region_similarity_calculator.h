// Region similarity calculators of the Object Detection API
// (core/region_similarity_calculator.py): the [N, M] similarity of two box collections that
// a Matcher reads (rows: groundtruth boxes, columns: anchors). Boxes as box_ops.h.
#ifndef TRAINYARD_PKG_DETECTION_REGION_SIMILARITY_CALCULATOR_H_
#define TRAINYARD_PKG_DETECTION_REGION_SIMILARITY_CALCULATOR_H_

#include <span>
#include <vector>

namespace trainyard::detection {

class RegionSimilarityCalculator {
 public:
  virtual ~RegionSimilarityCalculator() = default;
  // Row-major [N, M] for boxes1 [N, 4] and boxes2 [M, 4].
  virtual std::vector<float> compare(std::span<const float> boxes1,
                                     std::span<const float> boxes2) const = 0;
};

// Intersection over union (box_ops.h iou).
class IouSimilarity final : public RegionSimilarityCalculator {
 public:
  std::vector<float> compare(std::span<const float> boxes1,
                             std::span<const float> boxes2) const override;
};

// Intersection over the area of each box of boxes2 (box_ops.h ioa).
class IoaSimilarity final : public RegionSimilarityCalculator {
 public:
  std::vector<float> compare(std::span<const float> boxes1,
                             std::span<const float> boxes2) const override;
};

// Negative squared distance of the corner vectors: -||b1 - b2||^2.
class NegSqDistSimilarity final : public RegionSimilarityCalculator {
 public:
  std::vector<float> compare(std::span<const float> boxes1,
                             std::span<const float> boxes2) const override;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_REGION_SIMILARITY_CALCULATOR_H_
