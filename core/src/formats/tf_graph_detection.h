// The TensorFlow form of batch_multiclass_non_max_suppression (ops/detection.h): what tf_graph.cc
// emits for that op in a detector's SavedModel (saved_model_export.h). Internal to the core.
//
// TensorFlow's NonMaxSuppressionV5 is the greedy NMS of one image and one class (scores >
// score_threshold, a box suppressed when its IoU with a kept one is > iou_threshold, at most
// max_output_size kept, equal scores popped by lower box index), which is the per-class NMS of
// Trainyard's kernel; CombinedNonMaxSuppression is not used, since its per-class queue and its
// merge sort order equal scores arbitrarily. As the API's post_processing does (map_fn over the
// batch, a loop over the classes unrolled in the graph), a While loop runs over the images of
// the (dynamic) batch, and its body holds one NonMaxSuppressionV5 per class; each writes its kept
// scores into row c of a dense [N, classes, anchors] matrix of -inf. The rest is batched, as
// onnx_nms.h's composition: the anchors whose clipped box has no area set to -inf, TopKV2 over
// each image's classes * anchors slots (equal values: lower slot first, i.e. lower class, then
// lower anchor: the kernel's order), the -inf slots padding (zeros, anchor index -1), the boxes
// clipped to the clip window (or the extent of the batch's boxes) and moved into its frame.
//
// With a box per class (q = classes, Faster R-CNN's second stage), class c's NMS runs on the
// boxes of set c, and a detection's box is its anchor's box of its class.
//
// Left out, each an Unimplemented error naming the option: soft NMS, class-agnostic NMS,
// combined NMS and num_valid_boxes.
#ifndef TRAINYARD_CORE_SRC_TF_GRAPH_DETECTION_H_
#define TRAINYARD_CORE_SRC_TF_GRAPH_DETECTION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/core/graph_capture.h"
#include "trainyard/ops/detection.h"
#include "trainyard/proto/saved_model.pb.h"

namespace trainyard::tf_internal {

struct TfNmsOutputs {
  std::string boxes;           // f32 [N, M, 4]
  std::string scores;          // f32 [N, M]
  std::string classes;         // f32 [N, M], 0-based
  std::string num_detections;  // i32 [N]
  std::string anchor_indices;  // i64 [N, M], -1 in padding
};

// Why the op with these attributes has no TensorFlow form here (naming the option), or empty.
std::string tf_nms_unsupported(const MultiClassNmsAttrs& attrs, bool has_num_valid_boxes);

// Adds the composition's nodes (and its loop's functions, to graph.library) to `graph`: `boxes`
// f32 [N, anchors, q, 4] (q 1, or a box per class) and `scores` f32 [N, anchors, classes] are
// tensor names; `unique` turns a
// wanted node name into an unused one. The caller has checked tf_nms_unsupported. With
// `clip_windows` (a tensor name, f32 [N, 4]: GraphSpec::nms_clip_windows) each image's boxes are
// clipped to its own window and given in its frame (change_coordinate_frame), whatever `attrs`
// say of the window.
TfNmsOutputs add_tf_multiclass_nms(tf::GraphDef& graph,
                                   const std::function<std::string(const std::string&)>& unique,
                                   const std::string& boxes, const std::string& scores,
                                   int64_t anchors, int64_t q, int64_t classes,
                                   const MultiClassNmsAttrs& attrs,
                                   const std::string& clip_windows = "");

// The Object Detection API's encoded_image_string_tensor input (exporter.py): `strings`, a
// DT_STRING [N] tensor of encoded images (JPEG, PNG, GIF, BMP), each decoded to uint8 [H, W, 3]
// (DecodeImage, channels 3, animations not expanded) by a While loop over the batch, as the API's
// tf.map_fn of tf.image.decode_image, into a TensorList stacked to [N, H, W, 3] (the images must
// be of one size, as the API's map_fn needs). Returns the name of that uint8 tensor.
std::string add_image_decoding(tf::GraphDef& graph, const std::string& strings);

// The Object Detection API's tf_example input: `serialized`, a DT_STRING [N] tensor of
// serialized tf.Example protos, parsed (ParseExampleV2 of the dense feature image/encoded, a
// string with default '', as the API's TfExampleDecoder reads it) into the encoded images that
// add_image_decoding takes. Returns the name of that DT_STRING [N] tensor.
std::string add_tf_example_parsing(tf::GraphDef& graph, const std::string& serialized);

// Throws Unimplemented, naming `model_name`, where the capture copied to the host a tensor that
// depends on `inputs` (as Faster R-CNN's proposals are computed on the host): the graph would hold
// what the host computed from it as a constant of the captured example. Call it before
// build_tf_graph, whose own copies of constants are host reads too.
void refuse_host_reads(const GraphCapture& capture,
                       const std::vector<std::pair<std::string, Tensor>>& inputs,
                       const std::string& model_name);

}  // namespace trainyard::tf_internal

#endif  // TRAINYARD_CORE_SRC_TF_GRAPH_DETECTION_H_
