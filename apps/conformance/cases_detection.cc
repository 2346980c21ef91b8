// Op cases of the detection family (op_cases.h): batch_multiclass_non_max_suppression over
// random boxes (corners in either order, many overlaps) and scores, with one box per anchor and
// one per class, class-agnostic, limited anchors, and a clip window with its coordinate frame.
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
              std::vector<double> num_valid_boxes = {}) {
  std::vector<InputSpec> inputs = {f32(Shape{2, 24, q, 4}, 0.0, 1.0),
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
}

}  // namespace trainyard::conformance
