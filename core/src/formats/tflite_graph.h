// The TFLite model of a captured forward pass (graph_capture.h): what tflite_export.cc writes.
// Internal to the core.
//
// Tensors are told apart as the capture says (storage, byte offset, shape, dtype). A tensor that
// a live captured op produced is a subgraph tensor, unless every input of that op is a constant:
// then its value, as Trainyard computed it, is a constant too. A tensor no captured op produced
// is a graph input (given by storage), a variable (a constant named by the variable's name) or
// another host-made constant ("const_K"). A tensor seen under another shape at the same offset
// of the same storage is a reshape view (a RESHAPE); at another offset, an error. Everything
// stays in Trainyard's NHWC layout; only filters are stored in TFLite's layouts.
#ifndef TRAINYARD_CORE_SRC_TFLITE_GRAPH_H_
#define TRAINYARD_CORE_SRC_TFLITE_GRAPH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/core/graph_capture.h"
#include "trainyard/tensor.h"

namespace trainyard::tflite_internal {

// SSD's post-processing as export_tflite_ssd_graph.py appends it: the custom operator
// TFLite_Detection_PostProcess, reading the box encodings [1, anchors, 4], the class scores
// [1, anchors, classes (+ 1 with a background column)] and the anchors, with its options (a
// flexbuffer map under the node attribute names the script sets), giving the detection boxes
// [1, D, 4], classes [1, D], scores [1, D] and their number [1], where D is max_detections *
// max_classes_per_detection.
struct DetectionPostProcess {
  std::vector<float> anchors;  // [anchors, 4]: ycenter, xcenter, height, width (normalized)
  int32_t max_detections = 10;
  int32_t max_classes_per_detection = 1;
  int32_t detections_per_class = 100;
  bool use_regular_nms = false;
  float nms_score_threshold = 0.0f;
  float nms_iou_threshold = 0.6f;
  int32_t num_classes = 0;  // without the background
  // The box coder's scales (faster_rcnn_box_coder's y_scale, x_scale, height_scale, width_scale).
  float y_scale = 10.0f, x_scale = 10.0f, h_scale = 5.0f, w_scale = 5.0f;
};

// TOCO's --inference_type=QUANTIZED_UINT8 with its --mean_values and --std_values for the
// input: the model's float inputs are uint8 meaning (q - mean) / std.
struct Uint8Inference {
  double mean = 128.0;
  double std = 128.0;
};

struct GraphSpec {
  std::string model_name;  // the subgraph's name; errors name it
  // The batch size the forward pass was captured at. Every computed tensor keeps the batch in its
  // first dimension, alone or with rows of each example after it (a multiple of the batch, as
  // MoeModel's [batch * classes, experts]), and is written with that dimension over the batch
  // and shape_signature -1 there (TFLite's dynamic dimension: Interpreter.resize_tensor_input
  // takes any batch); reshapes give it as -1. An op that reduces, slices, pads or concatenates
  // the first dimension is refused.
  int64_t batch = 1;
  // False: every tensor keeps the captured batch, with no dynamic dimension (SSD's graph, whose
  // post-processing takes one image).
  bool dynamic_batch = true;
  // The inputs (the batch's features the forward read) and outputs (what it returned), by name.
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::vector<std::pair<std::string, Tensor>> outputs;
  // The variables the forward read: their value tensors, by name.
  std::vector<std::pair<std::string, Tensor>> variables;
  // When set, TFLite_Detection_PostProcess reads the two outputs (the box encodings, then the
  // class scores; they keep their names as tensors) and its four outputs, named as TensorFlow's
  // converter names them ("TFLite_Detection_PostProcess", then ":1", ":2", ":3"), are the
  // subgraph's outputs instead.
  std::optional<DetectionPostProcess> detection_postprocess;
  // When set, the model is written quantized as TOCO writes a quantization-aware-trained graph
  // (tflite_quantize.h): each fake quantization of a computed value gives that value's range
  // instead of a FAKE_QUANT, the weights' their uint8 encoding.
  std::optional<Uint8Inference> uint8;
};

// The serialized model (finished with the "TFL3" identifier). Throws Unimplemented naming the op
// and the model for an op, or a use of one, that has no TFLite form here, and for a computed
// tensor that does not keep the batch as its first dimension.
std::string build_tflite_model(const GraphCapture& capture, const GraphSpec& spec);

}  // namespace trainyard::tflite_internal

#endif  // TRAINYARD_CORE_SRC_TFLITE_GRAPH_H_
