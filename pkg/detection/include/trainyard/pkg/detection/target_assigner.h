// The Object Detection API's TargetAssigner (core/target_assigner.py): match groundtruth boxes
// to anchors by a similarity and a matcher, then give each anchor its classification target,
// its regression target (the matched box encoded by the box coder) and their weights.
//
// Anchors and groundtruth boxes are [N, 4] and [M, 4] float arrays (box_ops.h). Labels are
// [M, label_size] rows (SSD: one-hot over num_classes + 1 with column 0 the background, see
// one_hot_with_background); the unmatched class label is one row of label_size (SSD: 1 at the
// background column, or all zeros with encode_background_as_zeros).
//
// For anchor a with match result r (matcher.h):
//   matched (r >= 0): cls_targets[a] = labels[r], cls_weights[a] = groundtruth_weights[r],
//                     reg_targets[a] = encode(gt[r], anchor a), reg_weights[a] = weights[r];
//   unmatched (-1):   cls_targets[a] = unmatched_class_label, cls_weights[a] =
//                     negative_class_weight, reg_targets[a] = 0, reg_weights[a] = 0;
//   ignored (-2):     cls_targets[a] = unmatched_class_label, cls_weights[a] = 0, reg 0, 0.
// Groundtruth boxes of weight 0 are not valid rows for the matcher. cls_weights is per anchor;
// the API tiles it over the label's columns ([A, label_size]), which is the same number.
#ifndef TRAINYARD_PKG_DETECTION_TARGET_ASSIGNER_H_
#define TRAINYARD_PKG_DETECTION_TARGET_ASSIGNER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "trainyard/pkg/detection/box_coder.h"
#include "trainyard/pkg/detection/matcher.h"
#include "trainyard/pkg/detection/region_similarity_calculator.h"

namespace trainyard::detection {

struct TargetAssignment {
  int64_t num_anchors = 0;
  int64_t label_size = 0;
  int64_t code_size = 0;
  std::vector<float> cls_targets;  // [num_anchors, label_size]
  std::vector<float> cls_weights;  // [num_anchors]
  std::vector<float> reg_targets;  // [num_anchors, code_size]
  std::vector<float> reg_weights;  // [num_anchors]
  Match match;                     // rows: groundtruth boxes, columns: anchors
};

class TargetAssigner {
 public:
  // All three must be non-null (InvalidArgument otherwise); negative_class_weight in [0, 1].
  TargetAssigner(std::shared_ptr<const RegionSimilarityCalculator> similarity_calc,
                 std::shared_ptr<const Matcher> matcher, std::shared_ptr<const BoxCoder> box_coder,
                 double negative_class_weight = 1.0);

  // groundtruth_labels: [M, label_size]; empty means the API's default of a binary problem
  // (label_size 1, every box labelled 1, unmatched label 0) and then unmatched_class_label must
  // be empty too. groundtruth_weights: [M] or empty for all 1. M may be 0 (every anchor is then
  // unmatched). Throws InvalidArgument on inconsistent sizes.
  TargetAssignment assign(std::span<const float> anchors, std::span<const float> groundtruth_boxes,
                          std::span<const float> groundtruth_labels = {},
                          std::span<const float> unmatched_class_label = {},
                          std::span<const float> groundtruth_weights = {}) const;

  const BoxCoder& box_coder() const { return *box_coder_; }
  double negative_class_weight() const { return negative_class_weight_; }

 private:
  std::shared_ptr<const RegionSimilarityCalculator> similarity_calc_;
  std::shared_ptr<const Matcher> matcher_;
  std::shared_ptr<const BoxCoder> box_coder_;
  double negative_class_weight_;
};

// Rows [M, num_classes + 1] one-hot at column classes[i] for 1-based class ids (the label map's
// ids, 0 is the background column), as SSD pads the groundtruth one-hot with a background
// column. Throws InvalidArgument for an id outside [0, num_classes].
std::vector<float> one_hot_with_background(std::span<const int64_t> classes, int64_t num_classes);

// The SSD unmatched_class_label: [num_classes + 1] with 1 at column 0, or all zeros when
// encode_background_as_zeros.
std::vector<float> background_class_label(int64_t num_classes,
                                          bool encode_background_as_zeros = false);

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_TARGET_ASSIGNER_H_
