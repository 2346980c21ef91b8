// The detection ops: the Object Detection API's batched multi-class non-max suppression.
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "engine/ops/common.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_DETECTION_OPS(X) \
  X(kBatchMulticlassNms, "batch_multiclass_non_max_suppression", -1, 5, MultiClassNmsAttrs, "(boxes f32 [B, A, q, 4], scores f32 [B, A, C][, num_valid_boxes i32 [B]]) -> (boxes [B, M, 4], scores [B, M], classes [B, M] 0-based, num_detections i32 [B], anchor_indices i64 [B, M] -1 in padding), M = max_total_detections; per class greedy NMS (IoU > iou_threshold suppresses, scores > score_threshold, max_detections_per_class), merged by score (ties: lower class), clipped, zero-area boxes dropped; no gradient")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(detection, TRAINYARD_DETECTION_OPS)

namespace ops {

using namespace ops_internal;

NmsDetections batch_multiclass_non_max_suppression(const Tensor& boxes, const Tensor& scores,
                                                   const MultiClassNmsAttrs& attrs,
                                                   const Tensor* num_valid_boxes) {
  const char* op = "batch_multiclass_non_max_suppression";
  Backend& backend = num_valid_boxes != nullptr
                         ? common_backend(op, {&boxes, &scores, num_valid_boxes})
                         : common_backend(op, {&boxes, &scores});
  if (boxes.dtype() != DType::kF32 || scores.dtype() != DType::kF32) {
    invalid(op, "boxes and scores must be f32, got " + boxes.description() + " and " +
                    scores.description());
  }
  const Shape& b = boxes.shape();
  const Shape& s = scores.shape();
  if (b.rank() != 4 || b[3] != 4 || s.rank() != 3 || s[0] != b[0] || s[1] != b[1] || s[2] < 1 ||
      (b[2] != 1 && b[2] != s[2])) {
    invalid(op,
            "boxes must be [batch, anchors, q, 4] with q 1 or the number of classes and "
            "scores [batch, anchors, classes], got " +
                boxes.description() + " and " + scores.description());
  }
  if (num_valid_boxes != nullptr &&
      (num_valid_boxes->dtype() != DType::kI32 || num_valid_boxes->shape().rank() != 1 ||
       num_valid_boxes->shape()[0] != b[0])) {
    invalid(op, "num_valid_boxes must be i32 [" + std::to_string(b[0]) + "], got " +
                    num_valid_boxes->description());
  }
  if (attrs.max_total_detections < 1 || attrs.max_detections_per_class < 0) {
    invalid(op, "max_total_detections " + std::to_string(attrs.max_total_detections) +
                    " must be positive and max_detections_per_class " +
                    std::to_string(attrs.max_detections_per_class) + " not negative");
  }
  if (!(attrs.iou_threshold >= 0.0f && attrs.iou_threshold <= 1.0f)) {
    invalid(op, "iou_threshold " + std::to_string(attrs.iou_threshold) + " is outside [0, 1]");
  }
  if (std::isnan(attrs.score_threshold)) invalid(op, "score_threshold is NaN");
  if (attrs.change_coordinate_frame && !attrs.has_clip_window) {
    invalid(op, "change_coordinate_frame needs a clip window");
  }
  if (!(attrs.soft_nms_sigma >= 0.0f)) {
    invalid(op, "soft_nms_sigma " + std::to_string(attrs.soft_nms_sigma) + " is negative");
  }
  if (attrs.use_combined_nms) {
    // post_processing.batch_multiclass_non_max_suppression's refusals with use_combined_nms.
    if (attrs.change_coordinate_frame) invalid(op, "combined NMS has no change_coordinate_frame");
    if (attrs.use_class_agnostic_nms) invalid(op, "combined NMS has no class-agnostic NMS");
    if (attrs.soft_nms_sigma != 0.0f) invalid(op, "combined NMS has no soft NMS");
    if (num_valid_boxes != nullptr) invalid(op, "combined NMS takes no num_valid_boxes");
  }
  if (attrs.has_clip_window && !(attrs.clip_window[2] > attrs.clip_window[0] &&
                                 attrs.clip_window[3] > attrs.clip_window[1])) {
    invalid(op, "the clip window [" + std::to_string(attrs.clip_window[0]) + ", " +
                    std::to_string(attrs.clip_window[1]) + ", " +
                    std::to_string(attrs.clip_window[2]) + ", " +
                    std::to_string(attrs.clip_window[3]) + "] has no area");
  }
  const int64_t batch = b[0];
  const int64_t m = attrs.max_total_detections;
  std::array<Tensor, 5> outputs = {Tensor::empty(backend, Shape{batch, m, 4}, DType::kF32),
                                   Tensor::empty(backend, Shape{batch, m}, DType::kF32),
                                   Tensor::empty(backend, Shape{batch, m}, DType::kF32),
                                   Tensor::empty(backend, Shape{batch}, DType::kI32),
                                   Tensor::empty(backend, Shape{batch, m}, DType::kI64)};
  std::vector<Tensor> inputs = {boxes, scores};
  if (num_valid_boxes != nullptr) inputs.push_back(*num_valid_boxes);
  launch(backend, kBatchMulticlassNms, inputs, outputs, &attrs);
  return {outputs[0], outputs[1], outputs[2], outputs[3], outputs[4]};
}

}  // namespace ops

}  // namespace trainyard
