// The ONNX form of batch_multiclass_non_max_suppression (ops/detection.h): what onnx_graph.cc
// emits for that op. Internal to the core.
//
// ONNX's NonMaxSuppression keeps, per image and class, the boxes the greedy NMS keeps (scores >
// score_threshold, a box suppressed when its IoU with a kept one is > iou_threshold, at most
// max_detections_per_class), as Trainyard's kernel and TensorFlow's do; but it returns them as a
// list of (image, class, box) rows, neither merged across classes nor sorted nor padded. The
// composition merges them exactly as the kernel does:
//   kept scores scattered into a dense [N, classes * anchors] matrix of -inf (slot c * A + a);
//   the anchors whose clipped box has no area set to -inf (the kernel drops them after clipping);
//   TopK over each row to max_total_detections: by decreasing score, equal scores in increasing
//   slot, i.e. lower class first and then lower anchor, which is the kernel's order (its stable
//   sort keeps classes in order and each class's NMS pops equal scores by lower anchor);
//   the slots holding -inf are padding: zeros (anchor index -1), and num_detections counts the
//   others.
// Boxes are clipped to the clip window, or without one to the extent of all the batch's boxes as
// the kernel computes it, and moved into the window's frame with change_coordinate_frame (1 /
// extent computed in f32 as the kernel does).
//
// With a box per class (q = classes, Faster R-CNN's second stage), each image's classes are
// images of their own to NonMaxSuppression (class c of image n at n * C + c, over the boxes of
// class c); a detection's box is its anchor's box of its class, and a box of no area after
// clipping drops that class's slot.
//
// Left out, each an Unimplemented error naming the option (no exact ONNX form here): soft NMS
// (soft_nms_sigma > 0: its scores decay, which NonMaxSuppression cannot give), class-agnostic NMS,
// combined NMS, q other than 1 or the classes, and num_valid_boxes. Exactness assumes ONNX
// Runtime's NonMaxSuppression pops equal scores by lower box index as TensorFlow's kernel does; its
// IoU is TensorFlow's arithmetic up to float rounding, so a box at an IoU within rounding of the
// threshold may be kept by one and suppressed by the other.
#ifndef TRAINYARD_CORE_SRC_ONNX_NMS_H_
#define TRAINYARD_CORE_SRC_ONNX_NMS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "trainyard/ops/detection.h"
#include "trainyard/proto/onnx.pb.h"

namespace trainyard::onnx_internal {

struct NmsGraphOutputs {
  std::string boxes;           // f32 [N, M, 4]
  std::string scores;          // f32 [N, M]
  std::string classes;         // f32 [N, M], 0-based
  std::string num_detections;  // i32 [N]
  std::string anchor_indices;  // i64 [N, M], -1 in padding
};

// Why the op with these attributes has no ONNX form here (naming the option), or empty.
std::string nms_unsupported(const MultiClassNmsAttrs& attrs, int64_t q, int64_t classes,
                            bool has_num_valid_boxes);

// Adds the composition's nodes and initializers to `graph`: `boxes` f32 [N, anchors, q, 4] and
// `scores` f32 [N, anchors, classes] are value names; `unique` turns a wanted name into an unused
// one. `clip_windows`, when not empty, names an f32 [N, 4] value: each image's clip window in
// place of the attributes', the boxes then put in its frame ((box - window min) * (1 / window
// size), in f32). The caller has checked nms_unsupported.
NmsGraphOutputs add_multiclass_nms(onnx::GraphProto& graph,
                                   const std::function<std::string(const std::string&)>& unique,
                                   const std::string& boxes, const std::string& scores,
                                   int64_t anchors, int64_t classes, int64_t q,
                                   const MultiClassNmsAttrs& attrs,
                                   const std::string& clip_windows = "");

}  // namespace trainyard::onnx_internal

#endif  // TRAINYARD_CORE_SRC_ONNX_NMS_H_
