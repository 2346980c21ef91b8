#include "trainyard/pkg/detection/target_assigner.h"

#include <string>
#include <utility>

#include "trainyard/error.h"
#include "trainyard/pkg/detection/box_ops.h"

namespace trainyard::detection {

TargetAssigner::TargetAssigner(std::shared_ptr<const RegionSimilarityCalculator> similarity_calc,
                               std::shared_ptr<const Matcher> matcher,
                               std::shared_ptr<const BoxCoder> box_coder,
                               double negative_class_weight)
    : similarity_calc_(std::move(similarity_calc)),
      matcher_(std::move(matcher)),
      box_coder_(std::move(box_coder)),
      negative_class_weight_(negative_class_weight) {
  if (!similarity_calc_ || !matcher_ || !box_coder_) {
    throw InvalidArgument(
        "TargetAssigner: the similarity calculator, the matcher and the box coder must all be "
        "given");
  }
  if (!(negative_class_weight >= 0.0 && negative_class_weight <= 1.0)) {
    throw InvalidArgument("TargetAssigner: negative_class_weight " +
                          std::to_string(negative_class_weight) + " is outside [0, 1]");
  }
}

TargetAssignment TargetAssigner::assign(std::span<const float> anchors,
                                        std::span<const float> groundtruth_boxes,
                                        std::span<const float> groundtruth_labels,
                                        std::span<const float> unmatched_class_label,
                                        std::span<const float> groundtruth_weights) const {
  const int64_t num_anchors = num_boxes(anchors, "anchors");
  const int64_t num_gt = num_boxes(groundtruth_boxes, "groundtruth_boxes");

  // Labels: the API's binary default is a label of 1 per box and an unmatched label of 0.
  std::vector<float> default_labels, default_unmatched;
  if (groundtruth_labels.empty() && num_gt > 0) {
    if (!unmatched_class_label.empty() && unmatched_class_label.size() != 1) {
      throw InvalidArgument(
          "TargetAssigner.assign: without groundtruth_labels the labels are scalars, but "
          "unmatched_class_label has " +
          std::to_string(unmatched_class_label.size()) + " entries");
    }
    default_labels.assign(static_cast<std::size_t>(num_gt), 1.0f);
    groundtruth_labels = default_labels;
  }
  if (unmatched_class_label.empty()) {
    default_unmatched.assign(1, 0.0f);
    unmatched_class_label = default_unmatched;
  }
  const int64_t label_size = static_cast<int64_t>(unmatched_class_label.size());
  if (groundtruth_labels.size() != static_cast<std::size_t>(num_gt * label_size)) {
    throw InvalidArgument("TargetAssigner.assign: groundtruth_labels hold " +
                          std::to_string(groundtruth_labels.size()) + " values for " +
                          std::to_string(num_gt) + " boxes and labels of " +
                          std::to_string(label_size) +
                          " (the size of unmatched_class_label); they must be [M, label_size]");
  }
  std::vector<float> default_weights;
  if (groundtruth_weights.empty()) {
    default_weights.assign(static_cast<std::size_t>(num_gt), 1.0f);
    groundtruth_weights = default_weights;
  } else if (groundtruth_weights.size() != static_cast<std::size_t>(num_gt)) {
    throw InvalidArgument("TargetAssigner.assign: " + std::to_string(groundtruth_weights.size()) +
                          " groundtruth_weights for " + std::to_string(num_gt) + " boxes");
  }

  std::vector<uint8_t> valid_rows(static_cast<std::size_t>(num_gt));
  for (int64_t i = 0; i < num_gt; ++i) valid_rows[i] = groundtruth_weights[i] > 0.0f ? 1 : 0;
  const std::vector<float> similarity = similarity_calc_->compare(groundtruth_boxes, anchors);

  TargetAssignment t;
  t.num_anchors = num_anchors;
  t.label_size = label_size;
  t.code_size = box_coder_->code_size();
  t.match = matcher_->match(similarity, num_gt, num_anchors, valid_rows);
  const std::vector<int32_t>& results = t.match.match_results();

  // Encode every anchor against its matched box (zeros for the others, as the API gathers) and
  // keep the codes of the matched anchors only.
  std::vector<float> matched_boxes(static_cast<std::size_t>(num_anchors) * 4, 0.0f);
  for (int64_t a = 0; a < num_anchors; ++a) {
    if (results[a] >= 0) {
      for (int k = 0; k < 4; ++k) matched_boxes[4 * a + k] = groundtruth_boxes[4 * results[a] + k];
    }
  }
  const std::vector<float> codes = box_coder_->encode(matched_boxes, anchors);
  const int64_t cs = t.code_size;
  t.reg_targets.assign(static_cast<std::size_t>(num_anchors * cs), 0.0f);
  t.reg_weights.assign(static_cast<std::size_t>(num_anchors), 0.0f);
  t.cls_targets.resize(static_cast<std::size_t>(num_anchors * label_size));
  t.cls_weights.resize(static_cast<std::size_t>(num_anchors));
  const float negative_weight = static_cast<float>(negative_class_weight_);
  for (int64_t a = 0; a < num_anchors; ++a) {
    const int32_t r = results[a];
    float* cls = &t.cls_targets[static_cast<std::size_t>(a * label_size)];
    if (r >= 0) {
      for (int64_t k = 0; k < cs; ++k) t.reg_targets[a * cs + k] = codes[a * cs + k];
      t.reg_weights[a] = groundtruth_weights[r];
      t.cls_weights[a] = groundtruth_weights[r];
      for (int64_t k = 0; k < label_size; ++k) cls[k] = groundtruth_labels[r * label_size + k];
    } else {
      t.cls_weights[a] = r == Match::kUnmatched ? negative_weight : 0.0f;
      for (int64_t k = 0; k < label_size; ++k) cls[k] = unmatched_class_label[k];
    }
  }
  return t;
}

std::vector<float> one_hot_with_background(std::span<const int64_t> classes, int64_t num_classes) {
  const int64_t depth = num_classes + 1;
  std::vector<float> out(classes.size() * static_cast<std::size_t>(depth), 0.0f);
  for (std::size_t i = 0; i < classes.size(); ++i) {
    if (classes[i] < 0 || classes[i] > num_classes) {
      throw InvalidArgument("one_hot_with_background: class id " + std::to_string(classes[i]) +
                            " of box " + std::to_string(i) + " is outside [0, " +
                            std::to_string(num_classes) + "]");
    }
    out[i * depth + classes[i]] = 1.0f;
  }
  return out;
}

std::vector<float> background_class_label(int64_t num_classes, bool encode_background_as_zeros) {
  std::vector<float> out(static_cast<std::size_t>(num_classes + 1), 0.0f);
  if (!encode_background_as_zeros) out[0] = 1.0f;
  return out;
}

}  // namespace trainyard::detection
