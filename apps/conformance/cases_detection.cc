// Op cases of the detection family (op_cases.h): batch_multiclass_non_max_suppression over
// random boxes (corners in either order, many overlaps) and scores, with one box per anchor and
// one per class, class-agnostic, limited anchors, a clip window with its coordinate frame, soft
// NMS and combined NMS;
// and over ties: boxes on an integer grid with integer scores (equal scores within and across
// classes, IoUs and scores equal to the thresholds, zero-area boxes), and fixed boxes with
// identical, flipped and zero-area duplicates and pairs of IoU exactly 0.5 and 0.25.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

namespace {

Outputs detections(const ops::NmsDetections& d) {
  return {d.boxes, d.scores, d.classes, d.num_detections, d.anchor_indices};
}

void nms_case(std::vector<OpCase>& c, std::string name, int64_t q, MultiClassNmsAttrs attrs,
              std::vector<double> num_valid_boxes = {}, double box_low = 0.0,
              double box_high = 1.0) {
  std::vector<InputSpec> inputs = {f32(Shape{2, 24, q, 4}, box_low, box_high),
                                   f32(Shape{2, 24, 3}, 0.0, 1.0)};
  const bool limited = !num_valid_boxes.empty();
  if (limited) inputs.push_back(fixed(Shape{2}, DType::kI32, std::move(num_valid_boxes)));
  c.push_back({"batch_multiclass_non_max_suppression", std::move(name), std::move(inputs),
               [attrs, limited](Backend&, const Inputs& x) {
                 return detections(ops::batch_multiclass_non_max_suppression(
                     x[0], x[1], attrs, limited ? &x[2] : nullptr));
               },
               kElementwise});
}

// Ties: boxes with integer corners in [0, 6] (either order, some without area) and integer
// scores in [0, 3], so that equal scores, IoUs equal to iou_threshold and scores equal to
// score_threshold are common.
void nms_tie_case(std::vector<OpCase>& c, std::string name, int64_t q, MultiClassNmsAttrs attrs) {
  c.push_back({"batch_multiclass_non_max_suppression",
               std::move(name),
               {ints(Shape{2, 24, q, 4}, 0, 6), ints(Shape{2, 24, 3}, 0, 3)},
               [attrs](Backend&, const Inputs& x) {
                 return detections(ops::batch_multiclass_non_max_suppression(x[0], x[1], attrs));
               },
               kElementwise});
}

// Ties on fixed boxes, one per anchor: the second image holds the first's anchors in reverse
// order, so that the anchor kept from each group of equal candidates changes between them.
void nms_fixed_tie_case(std::vector<OpCase>& c, std::string name, MultiClassNmsAttrs attrs) {
  const std::vector<std::vector<double>> boxes = {
      {0, 0, 2, 2}, {0, 0, 2, 2},   {2, 2, 0, 0}, {0, 0, 2, 2},  // identical, one flipped
      {4, 0, 6, 2}, {4, 0, 6, 1},                                // IoU exactly 0.5
      {0, 4, 2, 6}, {0, 4, 2, 4.5},                              // IoU exactly 0.25
      {3, 3, 3, 5}, {3, 3, 3, 5},                                // identical, zero area
      {1, 1, 3, 3}, {5, 5, 6, 6}};
  const std::vector<std::vector<double>> scores = {
      {0.5, 0.5, 0.5},   {0.5, 0.75, 0.5}, {0.5, 0.5, 0.25}, {0.75, 0.5, 0.5},
      {0.5, 0.5, 0.5},   {0.5, 0.5, 0.75}, {0.25, 0.5, 0.5}, {0.5, 0.25, 0.5},
      {0.75, 0.75, 0.5}, {0.75, 0.5, 0.5}, {0.5, 0.5, 0.5},  {0.25, 0.25, 0.25}};
  const auto n = static_cast<int64_t>(boxes.size());
  std::vector<double> box_values, score_values;
  for (int image = 0; image < 2; ++image) {
    for (int64_t i = 0; i < n; ++i) {
      const auto anchor = static_cast<std::size_t>(image == 0 ? i : n - 1 - i);
      box_values.insert(box_values.end(), boxes[anchor].begin(), boxes[anchor].end());
      score_values.insert(score_values.end(), scores[anchor].begin(), scores[anchor].end());
    }
  }
  c.push_back({"batch_multiclass_non_max_suppression",
               std::move(name),
               {fixed(Shape{2, n, 1, 4}, DType::kF32, std::move(box_values)),
                fixed(Shape{2, n, 3}, DType::kF32, std::move(score_values))},
               [attrs](Backend&, const Inputs& x) {
                 return detections(ops::batch_multiclass_non_max_suppression(x[0], x[1], attrs));
               },
               kElementwise});
}

}  // namespace

void add_detection_cases(std::vector<OpCase>& c) {
  MultiClassNmsAttrs attrs;
  attrs.score_threshold = 0.2f;
  attrs.iou_threshold = 0.3f;
  attrs.max_detections_per_class = 5;
  attrs.max_total_detections = 8;
  nms_case(c, "nms_shared_boxes", 1, attrs);
  nms_case(c, "nms_box_per_class", 3, attrs);
  nms_case(c, "nms_num_valid_boxes", 1, attrs, {10, -1});  // -1: every anchor
  nms_case(c, "nms_num_valid_boxes_all_and_none", 1, attrs, {24, 0});
  MultiClassNmsAttrs agnostic = attrs;
  agnostic.use_class_agnostic_nms = true;
  nms_case(c, "nms_class_agnostic", 3, agnostic);
  MultiClassNmsAttrs window = attrs;
  window.max_total_detections = 20;
  window.has_clip_window = true;
  window.clip_window = {0.1f, 0.2f, 0.8f, 0.9f};
  window.change_coordinate_frame = true;
  nms_case(c, "nms_clip_window_frame", 1, window);
  // Soft NMS: no box suppressed outright, scores decayed by their overlaps with the kept ones.
  MultiClassNmsAttrs soft = attrs;
  soft.soft_nms_sigma = 0.5f;
  soft.score_threshold = 0.1f;
  nms_case(c, "nms_soft_shared_boxes", 1, soft);
  MultiClassNmsAttrs soft_agnostic = soft;
  soft_agnostic.use_class_agnostic_nms = true;
  soft_agnostic.soft_nms_sigma = 0.2f;
  nms_case(c, "nms_soft_class_agnostic", 3, soft_agnostic);
  // Combined NMS on boxes reaching outside [0, 1]: clipped to it, none of zero area dropped.
  MultiClassNmsAttrs combined = attrs;
  combined.use_combined_nms = true;
  nms_case(c, "nms_combined_box_per_class", 3, combined, {}, -0.3, 1.3);

  // Ties: per class and total cuts inside runs of equal scores; an IoU threshold of 0.5 that
  // exact-IoU pairs meet without exceeding; score_threshold equal to some scores.
  MultiClassNmsAttrs ties = attrs;
  ties.score_threshold = 1.0f;
  ties.iou_threshold = 0.5f;
  ties.max_detections_per_class = 4;
  ties.max_total_detections = 9;
  nms_tie_case(c, "nms_ties_shared_boxes", 1, ties);
  nms_tie_case(c, "nms_ties_box_per_class", 3, ties);
  MultiClassNmsAttrs tie_agnostic = ties;
  tie_agnostic.use_class_agnostic_nms = true;
  nms_tie_case(c, "nms_ties_class_agnostic", 3, tie_agnostic);
  MultiClassNmsAttrs no_suppression = ties;  // every candidate kept: the order alone
  no_suppression.score_threshold = 0.0f;
  no_suppression.iou_threshold = 1.0f;
  no_suppression.max_detections_per_class = 24;
  no_suppression.max_total_detections = 72;
  nms_tie_case(c, "nms_ties_order", 1, no_suppression);
  MultiClassNmsAttrs fixed_ties = ties;
  fixed_ties.score_threshold = 0.25f;
  fixed_ties.max_detections_per_class = 3;
  fixed_ties.max_total_detections = 8;
  nms_fixed_tie_case(c, "nms_ties_duplicates_and_exact_iou", fixed_ties);
  fixed_ties.iou_threshold = 0.25f;
  fixed_ties.max_detections_per_class = 12;
  fixed_ties.max_total_detections = 36;
  nms_fixed_tie_case(c, "nms_ties_duplicates_iou_quarter", fixed_ties);
}

}  // namespace trainyard::conformance
