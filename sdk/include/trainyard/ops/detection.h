// The detection ops of ops.h (core/src/engine/ops/detection.cc declares and implements them): the
// Object Detection API's batched multi-class non-max suppression. Never recorded (no gradient,
// as in TensorFlow). Errors as ops.h says.
#ifndef TRAINYARD_OPS_DETECTION_H_
#define TRAINYARD_OPS_DETECTION_H_

#include <array>
#include <cstdint>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The attribute structs of the detection family's ops (what their kernels receive as
// KernelArgs::attrs; op.h has the family-neutral ones).
// batch_multiclass_non_max_suppression (ops/detection.h): the Object Detection API's
// batch_non_max_suppression options.
struct MultiClassNmsAttrs {
  float score_threshold = 0.0f;
  float iou_threshold = 0.6f;
  int64_t max_detections_per_class = 100;
  int64_t max_total_detections = 100;
  bool use_class_agnostic_nms = false;
  bool has_clip_window = false;  // clip to clip_window, else to the extent of the batch's boxes
  std::array<float, 4> clip_window{};    // ymin, xmin, ymax, xmax
  bool change_coordinate_frame = false;  // boxes relative to clip_window (which it needs)
  // Soft-NMS (Bodla et al.) when > 0, as tf.image.non_max_suppression_with_scores: no box is
  // suppressed outright; each candidate's score is multiplied by exp(-0.5 iou^2 / sigma) for
  // each kept box, and the decayed scores are the detections'.
  float soft_nms_sigma = 0.0f;
  // tf.image.combined_non_max_suppression (the API's use_combined_nms): the per-class NMS, then
  // the best max_total_detections of all classes with their boxes clipped to [0, 1] and none
  // dropped; no clip window, coordinate frame, class-agnostic NMS, soft NMS or num_valid_boxes.
  bool use_combined_nms = false;
};

namespace ops {

// The outputs of batch_multiclass_non_max_suppression, each on the inputs' backend. Per image
// the first num_detections[b] rows hold detections sorted by decreasing score (equal scores:
// lower class first, then the per-class NMS order); the rest are zeros (anchor_indices -1).
struct NmsDetections {
  Tensor boxes;           // f32 [batch, max_total_detections, 4], clipped (attrs.clip_window)
  Tensor scores;          // f32 [batch, max_total_detections]
  Tensor classes;         // f32 [batch, max_total_detections], 0-based (no background column)
  Tensor num_detections;  // i32 [batch]
  Tensor anchor_indices;  // i64 [batch, max_total_detections]: the anchor each detection is of
};

// The API's batch_multiclass_non_max_suppression (post_processing.py, without static shapes).
// boxes: f32 [batch, num_anchors, q, 4] ([ymin, xmin, ymax, xmax]) with q 1 (one box per anchor)
// or num_classes (a box per class); scores: f32 [batch, num_anchors, num_classes] without a
// background column. Per image and class: greedy NMS over the scores > score_threshold (IoU as
// TensorFlow's NMS kernel computes it, a box suppressed when its IoU with a kept box is >
// iou_threshold, at most max_detections_per_class kept); then all classes' kept boxes by score,
// clipped, those of zero area dropped, cut to max_total_detections and padded. With
// use_class_agnostic_nms one NMS over each anchor's best class instead. num_valid_boxes, i32
// [batch] when given, limits image b to its first num_valid_boxes[b] anchors (-1: all of them,
// as the API's slice size; another value outside [0, anchors] is InvalidArgument naming the
// image, raised by the kernel: an asynchronous backend raises it at the next synchronisation).
// InvalidArgument on other dtypes or shapes, max_total_detections < 1,
// max_detections_per_class < 0, iou_threshold outside [0, 1], change_coordinate_frame
// without a clip window, a negative soft_nms_sigma, or use_combined_nms with what it does not
// take (above).
TRAINYARD_API NmsDetections batch_multiclass_non_max_suppression(
    const Tensor& boxes, const Tensor& scores, const MultiClassNmsAttrs& attrs,
    const Tensor* num_valid_boxes = nullptr);

}  // namespace ops

}  // namespace trainyard

#endif  // TRAINYARD_OPS_DETECTION_H_
