// The TensorFlow graph of a captured forward pass (graph_capture.h): what saved_model_export.cc
// wraps in a SavedModel. Internal to the core.
//
// Tensors are told apart as onnx_graph.h describes (storage, byte offset, shape, dtype), and
// resolved the same way: a tensor a captured op produced is a graph value, unless every input of
// that op is a constant (then its value, as Trainyard computed it, is a Const node); a tensor no
// captured op produced is a graph input (a Placeholder), a variable (a TF1 `VariableV2` node of
// the variable's name and shape, read through an Identity "<name>/read", as tf.Variable and
// slim.variable make them), or another host-made constant (a Const). A graph value seen under
// another shape at the same offset is a reshape view (a Reshape node).
//
// The graph stays in Trainyard's layout, which is TensorFlow's own: NHWC values, HWIO filters
// (a depthwise convolution's grouped filter [KH, KW, 1, C * M] is DepthwiseConv2dNative's
// [KH, KW, C, M], the same bytes: a variable of that shape, as slim's depthwise_weights, is read
// as it is, another filter goes through a Reshape). Every op maps to the TensorFlow op that
// computes it (conv2d -> Conv2D or DepthwiseConv2dNative, with SAME / VALID padding or an
// explicit Pad, an add of a per-channel vector -> BiasAdd, batch_norm_inference ->
// FusedBatchNormV3 with is_training false, ...); an op, or a use of one, that has no exact
// TensorFlow form here is an Unimplemented error naming the op and the model. The batch is the
// dynamic first dimension (-1) of the inputs and outputs, and shapes written into the graph
// (Reshape, Slice) keep it dynamic. Inside, a value may hold it elsewhere, as onnx_graph.h
// describes: second in a recurrent layer's time-major [T, B, ...] steps, inside rows [T * B, ...]
// or [B * K, ...]; each value records where, a reshape puts -1 in the dimension that holds it, and
// a view of whole steps is a Slice. A recurrent layer (lstm_sequence, gru_sequence) is captured
// as its composition: the steps unrolled over max_frames, each a MatMul, the gates' ops and a
// SelectV2 of the frame mask that carries the state past a video's frames; a constant of the
// capture's batch (the zero state) must not vary along it and becomes one broadcast row.
#ifndef TRAINYARD_CORE_SRC_TF_GRAPH_H_
#define TRAINYARD_CORE_SRC_TF_GRAPH_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/core/graph_capture.h"
#include "trainyard/proto/saved_model.pb.h"
#include "trainyard/tensor.h"

namespace trainyard::tf_internal {

// TensorFlow's GraphDef version of the graphs written (TensorFlow 1.15's, whose ops these are).
inline constexpr int kGraphDefProducer = 134;

struct GraphSpec {
  std::string model_name;  // errors name it
  // The graph's inputs (Placeholders of that name, first dimension -1) and outputs (Identity
  // nodes of that name), and the variables the forward read (value tensors, by name).
  std::vector<std::pair<std::string, Tensor>> inputs;
  // Inputs the graph computes itself (a serving graph's parsing of serialized examples): the
  // input of that name becomes an Identity of the tensor named here ("node:k"), which the caller
  // adds to the graph, instead of a Placeholder.
  std::map<std::string, std::string> input_sources;
  // The batch size the forward was captured with. Above 1, a reshape whose first dimension is a
  // multiple of it (a batch merged with another dimension, as MoeModel's [B * classes, experts])
  // keeps -1 first and the other dimensions as captured.
  int64_t capture_batch = 1;
  // A tensor the graph computes ("node:k", f32 [N, 4]): each image's clip window [ymin, xmin,
  // ymax, xmax] (the API's _compute_clip_window of its true_image_shapes, for images padded by
  // keep_aspect_ratio_resizer's pad_to_max_dimension). When set, the last
  // batch_multiclass_non_max_suppression the forward ran (the detections') clips each image's
  // boxes to its own window and gives them in its frame (change_coordinate_frame), as the model's
  // postprocess does for a padded image, instead of the window of the op's attributes; an earlier
  // one (Faster R-CNN's of the proposals) keeps its own (there, the padded image).
  std::string nms_clip_windows;
  std::vector<std::pair<std::string, Tensor>> outputs;
  std::vector<std::pair<std::string, Tensor>> variables;
};

struct Graph {
  tf::GraphDef graph;
  // The variables the graph holds as VariableV2 nodes (named by their names), in the order
  // first read, with their values: what the SavedModel's checkpoint must hold.
  std::vector<std::pair<std::string, Tensor>> variables;
};

// Throws Unimplemented naming the op and spec.model_name for an op or a use of one that has no
// TensorFlow form here, InvalidArgument for a scalar input.
Graph build_tf_graph(const GraphCapture& capture, const GraphSpec& spec);

// TensorFlow's DataType for a Trainyard dtype.
tf::DataType tf_dtype(DType dtype);

// Small GraphDef builders. add_node appends a node (inputs "name", "name:k" or "^name").
tf::NodeDef* add_node(tf::GraphDef& graph, const std::string& name, const std::string& op,
                      std::vector<std::string> inputs);
void set_type(tf::NodeDef* node, const std::string& attr, tf::DataType type);
void set_int(tf::NodeDef* node, const std::string& attr, int64_t value);
void set_bool(tf::NodeDef* node, const std::string& attr, bool value);
void set_float(tf::NodeDef* node, const std::string& attr, float value);
void set_string(tf::NodeDef* node, const std::string& attr, const std::string& value);
void set_ints(tf::NodeDef* node, const std::string& attr, const std::vector<int64_t>& values);
void set_types(tf::NodeDef* node, const std::string& attr, const std::vector<tf::DataType>& types);
// A shape attribute; -1 is an unknown dimension.
void set_shape(tf::NodeDef* node, const std::string& attr, const std::vector<int64_t>& dims);
// A Const node of DT_STRING values of shape `dims` ({} a scalar).
tf::NodeDef* add_string_const(tf::GraphDef& graph, const std::string& name,
                              const std::vector<std::string>& values,
                              const std::vector<int64_t>& dims);
// A Const node of DT_INT32 values of shape `dims`.
tf::NodeDef* add_int32_const(tf::GraphDef& graph, const std::string& name,
                             const std::vector<int64_t>& values, const std::vector<int64_t>& dims);

}  // namespace trainyard::tf_internal

#endif  // TRAINYARD_CORE_SRC_TF_GRAPH_H_
