// The ONNX graph of a captured forward pass (graph_capture.h): what onnx_export.cc writes.
// Internal to the core.
//
// Tensors are told apart as the capture says (storage, byte offset, shape, dtype). A tensor that
// a captured op produced is a graph value, unless every input of that op is a constant: then its
// value, as Trainyard computed it, becomes a constant too (the filled gamma of a batch norm
// without scale). A tensor no captured op produced is a graph input (given by storage), a
// variable (an initializer named by the variable's name), or another host-made constant (an
// initializer "const_K"). A graph value seen under another shape at the same offset is a
// reshape view (a Reshape node); at another offset, an error.
//
// Layout: Trainyard is NHWC with HWIO filters; the graph is NCHW from the first convolution,
// pooling or 4-D batch norm on, with filters stored OIHW and 4-D constants permuted when the
// file is written. A Transpose appears only where a value crosses between the layouts: the NHWC
// image into the first convolution, and a 4-D value into an op that depends on NHWC order
// (slim's flatten reshape, matmul). Elementwise ops, pad, reductions, softmax and concat run in
// whichever layout their input has.
//
// The batch is the dynamic dimension (dim_param "N") of the graph's inputs and outputs, and every
// graph value holds it in one of four places: first (the default), second in a time-major
// [T, B, ...] value (a transpose of [B, T, ...]: a recurrent layer's steps, whose slices along T
// are steps and whose concatenation along T stacks them), merged with the steps in the rows of
// a [T * B, ...] value (step major: the projection of every frame at once), or as the outer
// factor of the rows of a [B * K, ...] value (MoE's [B * classes, mixtures]). Reshape nodes
// keep track with -1 and 0 dimensions; elementwise ops, products, comparisons and where run on
// any of them, row-wise ops (softmax, reductions but over the rows) on the row forms, and so do
// convolutions, pools, batch norms, pads and crop_and_resize, for which each row is an image
// (Faster R-CNN's second stage on its [B * M, ...] crops; crop_and_resize's boxes at M rows an
// image crop image row / M). The capture
// runs at batch 1, so a [1, B, ...] reshape of a batch-major value is also one time-major step
// (read so by a concatenation along the first dimension), and a view of one step of a
// time-major value is read batch-major. An op that would move or merge the batch otherwise is
// an error, as is an output that does not hold it first.
#ifndef TRAINYARD_CORE_SRC_ONNX_GRAPH_H_
#define TRAINYARD_CORE_SRC_ONNX_GRAPH_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/core/graph_capture.h"
#include "trainyard/proto/onnx.pb.h"
#include "trainyard/tensor.h"

namespace trainyard::onnx_internal {

struct GraphSpec {
  std::string model_name;  // the graph's name; errors name it
  int opset = 13;
  // The graph's inputs (the batch's features the forward read) and outputs (what it returned),
  // by name; their first dimension is the batch.
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::vector<std::pair<std::string, Tensor>> outputs;
  // The variables the forward read: their value tensors, by name.
  std::vector<std::pair<std::string, Tensor>> variables;
  // Refuse a capture in which the host read a tensor that depends on the inputs (the detection
  // export: a postprocess that computes on the host would give constants). Off for the other
  // models, whose host reads only bound loops (an LSTM's steps, captured at max_frames).
  bool refuse_host_reads = false;
  // A graph value f32 [N, 4] (made by nodes the caller puts in front): each image's clip window
  // for the last batch_multiclass_non_max_suppression, in place of its attributes' window; its
  // boxes are then put in that window's frame (keep_aspect_ratio_resizer's padded images).
  std::string nms_clip_windows;
};

// The model: IR version 8, the default operator set at spec.opset (13..17). Throws Unimplemented
// naming the op and the model for an op or a use of one that has no ONNX form here (and, with
// refuse_host_reads, naming the op whose output the host read), and InvalidArgument for an opset
// outside 13..17.
onnx::ModelProto build_onnx_model(const GraphCapture& capture, const GraphSpec& spec);

}  // namespace trainyard::onnx_internal

#endif  // TRAINYARD_CORE_SRC_ONNX_GRAPH_H_
