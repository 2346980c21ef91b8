// Non-max suppression on the host, with the semantics of tf.image.non_max_suppression and of the
// Object Detection API's post-processing (core/post_processing.py:
// multiclass_non_max_suppression, class_agnostic_non_max_suppression and
// batch_multiclass_non_max_suppression without static shapes).
//
// Boxes are [ymin, xmin, ymax, xmax] floats (box_ops.h). The IoU of two boxes is computed as
// TensorFlow's kernel does: coordinates reordered so min <= max, 0 when either box has no area.
//
// Cost: single-class NMS filters by score (O(N)), heapifies the S survivors (O(S)) and takes
// them in score order (O(log S) each), comparing each with the boxes kept so far (O(K), K <=
// max_output_size), and stops once max_output_size are kept: O(N + P (log S + K)) for the P
// candidates examined. Areas are computed once per examined box. The multi-class version
// transposes an image's scores to class-major once (O(N C), so each class scans contiguous
// memory), runs it per class and merges the kept boxes of all classes with one sort of at most
// C * max_detections_per_class entries. Measured on this 2-core machine under load (about 4x
// slower than idle): 1,917 anchors x 90 classes with score_threshold 1e-8 in about 16 ms,
// 20,000 x 90 in about 70 ms.
#ifndef TRAINYARD_PKG_DETECTION_NON_MAX_SUPPRESSION_H_
#define TRAINYARD_PKG_DETECTION_NON_MAX_SUPPRESSION_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "trainyard/op.h"
#include "trainyard/ops/detection.h"
#include "trainyard/pkg/detection/box_ops.h"

namespace trainyard::detection {

// tf.image.non_max_suppression: the indices of the kept boxes in decreasing score order (equal
// scores: lower index first). Only boxes with score > score_threshold are candidates; a
// candidate is dropped when its IoU with a kept box is > iou_threshold; at most max_output_size
// are kept. boxes [N, 4], scores [N]; throws InvalidArgument on size mismatches, a negative
// max_output_size or an iou_threshold outside [0, 1].
std::vector<int64_t> non_max_suppression(
    std::span<const float> boxes, std::span<const float> scores, int64_t max_output_size,
    float iou_threshold = 0.5f, float score_threshold = -std::numeric_limits<float>::infinity());

// batch_non_max_suppression of post_processing.proto (defaults as there, except
// max_total_detections which the proto also defaults to 100).
struct MultiClassNmsOptions {
  float score_threshold = 0.0f;
  float iou_threshold = 0.6f;
  int64_t max_detections_per_class = 100;
  int64_t max_total_detections = 100;  // must be > 0: the outputs are padded to it
  // One NMS over all boxes, each scored by its best class (that class is its label), instead
  // of one per class; max_detections_per_class is then not used (the API's
  // max_classes_per_detection is 1, the only value it supports).
  bool use_class_agnostic_nms = false;
  // The window boxes are clipped to before the boxes of zero area are dropped. Without one the
  // API clips to the extent of all the batch's boxes, which leaves every box as it is but still
  // drops those of zero area; so does this.
  std::optional<BoxWindow> clip_window;
  // Express the output boxes relative to clip_window (which it then needs).
  bool change_coordinate_frame = false;
  // Soft-NMS when > 0 (soft_non_max_suppression below), per class or class-agnostic; the
  // detections carry the decayed scores, sorted by them.
  float soft_nms_sigma = 0.0f;
  // tf.image.combined_non_max_suppression: per class as above, then the best
  // max_total_detections of all classes, their boxes clipped to [0, 1] and none dropped;
  // clip_window, change_coordinate_frame, use_class_agnostic_nms, soft_nms_sigma and
  // num_valid_boxes are refused with it, as the API refuses them.
  bool use_combined_nms = false;
};

// A kept box of soft_non_max_suppression and its score after the decay.
struct SoftNmsSelection {
  int64_t index;
  float score;
};

// tf.image.non_max_suppression_with_scores with soft_nms_sigma > 0 (TensorFlow's
// NonMaxSuppressionV5 kernel): candidates (score > score_threshold) taken in decreasing score
// (equal scores: lower index first); a candidate's score is multiplied by exp(-0.5 iou^2 /
// sigma) for each box kept since it was last compared (newest first, stopping once it is at or
// below score_threshold); one whose score did not change is kept, one that decayed goes back
// among the candidates while still above score_threshold. No box is suppressed outright. At
// most max_output_size are kept, in the order kept. InvalidArgument for sigma <= 0 or sizes as
// non_max_suppression's.
std::vector<SoftNmsSelection> soft_non_max_suppression(
    std::span<const float> boxes, std::span<const float> scores, int64_t max_output_size,
    float soft_nms_sigma, float score_threshold = -std::numeric_limits<float>::infinity());

// The outputs of batch_multiclass_non_max_suppression (the detection_* outputs of a detection
// model): per image the first num_detections[b] rows are valid, sorted by decreasing score
// (equal scores: lower class, then the per-class NMS order); the rest are zeros.
struct DetectionOutputs {
  int64_t batch_size = 0;
  int64_t max_detections = 0;
  std::vector<float> detection_boxes;    // [batch_size, max_detections, 4]
  std::vector<float> detection_scores;   // [batch_size, max_detections]
  std::vector<float> detection_classes;  // [batch_size, max_detections], 0-based (no background)
  std::vector<int32_t> num_detections;   // [batch_size]
  // The anchor (row of the image's boxes) each detection came from, -1 in padding; not an
  // output of the API, for callers that need the detections' other fields.
  std::vector<int64_t> detection_anchor_indices;  // [batch_size, max_detections]
};

// batch_multiclass_non_max_suppression. boxes: [batch, num_anchors, q, 4] with q == 1 (shared
// boxes) or q == num_classes (a box per class); scores: [batch, num_anchors, num_classes]
// without the background column (strip it first, as SSD does). num_valid_boxes: per image the
// number of leading anchors to consider, or empty for all. Per image and class: NMS with
// score_threshold, iou_threshold and max_detections_per_class (soft with soft_nms_sigma); then
// all classes' kept boxes sorted by score, clipped (boxes of zero area dropped), cut to
// max_total_detections and padded (use_combined_nms: clipped to [0, 1], none dropped).
// Throws InvalidArgument on inconsistent sizes or options.
DetectionOutputs batch_multiclass_non_max_suppression(
    std::span<const float> boxes, std::span<const float> scores, int64_t batch_size,
    int64_t num_anchors, int64_t q, int64_t num_classes, const MultiClassNmsOptions& options = {},
    std::span<const int32_t> num_valid_boxes = {});

// The batch_multiclass_non_max_suppression op (trainyard/ops/detection.h) on host memory, for
// the backends' kernels, one image at a time so that a kernel may run images in parallel.
//
// The op's attributes as options, the clip window resolved: without one the API clips to the
// extent of all the batch's boxes (batch_boxes, the op's whole boxes input).
MultiClassNmsOptions nms_options_from_attrs(const MultiClassNmsAttrs& attrs,
                                            std::span<const float> batch_boxes);

// Where one image's detections go: max_total_detections rows of each output of the op.
struct NmsImageOutputs {
  float* boxes;             // [max_total_detections, 4]
  float* scores;            // [max_total_detections]
  float* classes;           // [max_total_detections]
  int32_t* num_detections;  // one value
  int64_t* anchor_indices;  // [max_total_detections]
};

// Image `image` of the op: boxes [num_anchors, q, 4], scores [num_anchors, num_classes], its
// first num_valid_boxes anchors (-1: all, as the API's slice size); options from
// nms_options_from_attrs. InvalidArgument naming the image when num_valid_boxes is outside
// [-1, num_anchors].
void multiclass_nms_image(int64_t image, std::span<const float> boxes,
                          std::span<const float> scores, int64_t num_anchors, int64_t q,
                          int64_t num_classes, int32_t num_valid_boxes,
                          const MultiClassNmsOptions& options, const NmsImageOutputs& out);

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_NON_MAX_SUPPRESSION_H_
