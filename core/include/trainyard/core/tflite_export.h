// TensorFlow Lite export of an image classifier's or a YouTube-8M video-level model's inference
// graph, and of an SSD detector's as the Object Detection API's export_tflite_ssd_graph.py writes
// it (issues 39, 40): a float32 TFLite flatbuffer (file identifier "TFL3", schema version 3)
// that tf.lite.Interpreter runs.
//
// As the ONNX export (onnx_export.h), the model runs forward once in Mode::kPredict on a batch
// of constant examples while a GraphCapture (graph_capture.h) records the ops it launches; the
// capture becomes one TFLite subgraph in Trainyard's own NHWC layout: the inputs (the batch
// features the predictions depend on, [1, example shape...] with shape_signature [-1, ...],
// named by the feature) and one output (the predictions, named options.output_name). The batch
// is dynamic, as TensorFlow's converter writes it (Interpreter.resize_tensor_input; the
// conditions are tflite_graph.h's). Convolutions become CONV_2D (filters OHWI) or
// DEPTHWISE_CONV_2D (filters [1, KH, KW, C * multiplier]) with the bias add and a following
// relu or relu6 fused; an inference batch norm after a convolution without a bias folds into
// its filter and bias, any other is a MUL and an ADD of per-channel constants computed in double
// from the moving statistics; matmuls FULLY_CONNECTED (weights [units, inputs]); explicit
// paddings that TensorFlow's SAME would not give a PAD; the L2 normalization, softmax, slices,
// reductions and frame masks (int32 num_frames, bool comparisons) of the YouTube-8M models their
// TFLite ops. Every variable the forward reads is a
// constant tensor named by the variable name (TF-Slim's), its data in a buffer. Nothing is
// approximated: an op, or a use of one, without a TFLite form here is an Unimplemented error naming
// the op and the model.
#ifndef TRAINYARD_CORE_TFLITE_EXPORT_H_
#define TRAINYARD_CORE_TFLITE_EXPORT_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "trainyard/core/onnx_export.h"
#include "trainyard/core/registry.h"
#include "trainyard/detection_model.h"
#include "trainyard/export.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

// TOCO's --inference_type: FLOAT (uint8 false) or QUANTIZED_UINT8, a quantization-aware-trained
// model written with uint8 tensors as TensorFlow's converter writes one (per-tensor scales and
// zero points from the learned ranges, int32 biases; the rules are
// core/src/formats/tflite_quantize.h's), its float
// inputs uint8 meaning (q - mean_value) / std_value (TOCO's --mean_values, --std_values; 128 and
// 128, as the Object Detection API's TFLite instructions give them, put [0, 255] on [-1, 1)).
struct TfliteQuantization {
  bool uint8 = false;
  double mean_value = 128.0;
  double std_value = 128.0;
};

struct TfliteExportOptions {
  std::string model_name = "model";           // the subgraph's name; errors name it
  std::string output_name = "probabilities";  // the output tensor: ModelOutput::predictions
  // The inputs (as the ONNX export's: name, dtype, example shape, the value captured); f32 or i32.
  std::vector<OnnxInput> inputs;
  // Runs on the batch inside the capture, before the forward (the task's prepare_batch).
  std::function<void(Batch&)> prepare_batch;
  TfliteQuantization quantization;
};

// export_tflite_ssd_graph.py's flags, with its defaults: whether the graph ends with the custom
// op TFLite_Detection_PostProcess, and the op's options. The op's thresholds, class count and box
// scales come from the pipeline config, as the script takes them.
struct TfliteSsdOptions {
  bool add_postprocessing_op = true;
  int64_t max_detections = 10;
  int64_t max_classes_per_detection = 1;  // with fast NMS (use_regular_nms false)
  int64_t detections_per_class = 100;     // with regular NMS
  bool use_regular_nms = false;
};

// The TFLite flatbuffer of `model`, captured on a few examples of options.inputs with the variables
// `ctx` gives. Records no autodiff tape and updates no variable. Throws InvalidArgument for no
// inputs, a non-positive dimension or a name given twice, and Unimplemented naming the op and
// options.model_name for an op the exporter cannot express.
TRAINYARD_API std::string tflite_model_bytes(BaseModel& model, ModelContext& ctx,
                                             const TfliteExportOptions& options);

// SSD's graph as export_tflite_ssd_graph.py builds it, from `model`'s predict() on one
// preprocessed image of `image_shape` [H, W, C] (no preprocessing in the graph): the input
// "normalized_input_image_tensor" f32 [1, H, W, C]; "raw_outputs/box_encodings" [1, anchors, 4]
// and "raw_outputs/class_predictions" [1, anchors, num_classes + 1] (the class predictions
// divided by post_processing.logit_scale, through its score_converter: `score_converter`
// "IDENTITY", "SIGMOID" or "SOFTMAX"); with ssd.add_postprocessing_op, TFLite_Detection_PostProcess
// on them and the anchors (the predict dict's, as ycenter, xcenter, height, width) gives the
// outputs "TFLite_Detection_PostProcess" (boxes [1, D, 4], unclipped), ":1" (classes [1, D],
// 0-based), ":2" (scores [1, D]) and ":3" (their number [1]), D = max_detections *
// max_classes_per_detection; else the two raw outputs are the outputs. Throws InvalidArgument
// for `ssd` options out of range (naming the flag) and a model whose predict() gives no box
// encodings, class predictions or anchors, Unimplemented as tflite_model_bytes.
struct TfliteSsdPipelineOptions {
  std::string score_converter = "IDENTITY";
  double logit_scale = 1.0;
  float nms_score_threshold = 0.0f;
  float nms_iou_threshold = 0.6f;
  float y_scale = 10.0f, x_scale = 10.0f, h_scale = 5.0f, w_scale = 5.0f;
};
TRAINYARD_API std::string ssd_tflite_model_bytes(DetectionModel& model, ModelContext& ctx,
                                                 const std::string& model_name,
                                                 const std::vector<int64_t>& image_shape,
                                                 const TfliteSsdPipelineOptions& pipeline_options,
                                                 const TfliteSsdOptions& ssd,
                                                 const TfliteQuantization& quantization = {});

// Exports the pipeline's model with its variables restored from `checkpoint_prefix` (the latest
// checkpoint in train_dir when empty; the moving averages where the configs ask for them) to
// `output_path`, written under a temporary name and renamed, so the file is whole or absent. The
// inputs are pipeline_onnx_inputs() (the image f32 of `image_shape`, default the preprocessed
// image's); the output is "probabilities" for a model that reads an image, else "predictions".
// An SSD detector (SSDMetaArch) is exported as ssd_tflite_model_bytes says, at its
// fixed_shape_resizer's size, with `ssd`'s options and the pipeline's post_processing and
// faster_rcnn_box_coder. With quantization.uint8 the model is written quantized (a model without
// fake quantization fails, naming its first value without a range). Logs one line to `log`. Throws
// ConfigError for another detection model, resizer or box coder, or an `ssd` option out of range
// (naming the flag); as tflite_model_bytes does; NotFound for a missing checkpoint or variable, and
// Error naming the file when it cannot be written.
TRAINYARD_API void export_tflite(const PluginRegistry& registry, const config::Pipeline& pipeline,
                                 const std::string& checkpoint_prefix,
                                 const std::string& output_path, std::ostream& log,
                                 const std::vector<int64_t>& image_shape = {},
                                 const TfliteSsdOptions& ssd = {},
                                 const TfliteQuantization& quantization = {});

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TFLITE_EXPORT_H_
