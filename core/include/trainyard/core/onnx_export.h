// ONNX export of a model's inference graph (opset 13 to 17): the image classifiers (issue 13),
// the YouTube-8M video- and frame-level models and the SSD, Faster R-CNN and Mask R-CNN
// detectors (issue 39; see detection_onnx_model_bytes).
//
// The model runs forward once in Mode::kPredict on a batch of one example while a GraphCapture
// (graph_capture.h) records the ops it launches; the capture becomes an ONNX graph: IR version 8,
// the default operator set at the chosen opset, the inputs (the batch features the pipeline
// feeds, [N, example shape...], of which those the predictions depend on stay in the graph) and
// one output (the predictions, [N, ...]), where N is the dynamic batch dimension "N". The task's
// batch preparation runs inside the capture, so the graph takes the reader's features as they
// are (YouTube-8M: the L2 normalization is in the graph). A frame-level model's input is
// `features` f32 [N, max_frames, F] and `num_frames` i32 [N]: the capture runs with every frame
// valid, and the frame mask (steps past num_frames leave a recurrent state as it was, the
// logistic model's mean counts only valid frames) is computed in the graph from num_frames; a
// recurrent layer is unrolled over the max_frames steps, each a product and its gates' ops. Every
// variable the forward reads is an initializer named by its variable name (TF-Slim's, so
// `resnet_v1_50/conv1/weights`), holding the value the model would use, in ONNX's layout:
// convolutions run NCHW with OIHW filters, and the NHWC input is transposed once where the first
// convolution reads it (onnx_graph.h in the core's sources has the mapping). Nothing is
// approximated: an op, or a use of an op, that the exporter cannot express exactly is an
// Unimplemented error naming the op and the model, never a different graph.
#ifndef TRAINYARD_CORE_ONNX_EXPORT_H_
#define TRAINYARD_CORE_ONNX_EXPORT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "trainyard/core/registry.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/detection_model.h"
#include "trainyard/export.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

inline constexpr int kOnnxMinOpset = 13;
inline constexpr int kOnnxMaxOpset = 17;

// One graph input: a batch feature, or "num_frames" (Batch::num_frames).
struct OnnxInput {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> example_shape;  // the graph's input is [N, example_shape...]
  double capture_value = 0.0;          // every element's value in the captured forward
};

struct OnnxExportOptions {
  int opset = kOnnxMinOpset;
  std::string model_name = "model";           // the graph's name; errors name it
  std::string input_feature = "image";        // the batch feature fed, and the graph input's name
  std::string output_name = "probabilities";  // the graph output: ModelOutput::predictions
  // The inputs, for the overload without an example shape (which feeds input_feature alone).
  std::vector<OnnxInput> inputs;
  // Runs on the batch inside the capture, before the forward (the task's prepare_batch), so
  // that what it computes is in the graph.
  std::function<void(Batch&)> prepare_batch;
  // detection_onnx_model_bytes: the input takes images of any size, [N, H, W, 3], and the graph
  // resizes them to the image shape as the fixed_shape_resizer does (bilinear, align_corners
  // false); otherwise the input is of the image shape.
  bool resize_images = false;
  // With resize_images: a keep_aspect_ratio_resizer's resize_to_range instead (the image shape is
  // then [max_dimension, max_dimension, 3]), as DetectionResizeToRange says for the SavedModel
  // export: each batch resized to the API's _compute_new_dynamic_size of its images' size, padded
  // to max_dimension, and the last NMS given each image's clip window.
  std::optional<DetectionResizeToRange> resize_to_range;
};

// The serialized ONNX ModelProto of `model`, captured on one zero example of `example_shape`
// ([H, W, C] for an image) with the variables `ctx` gives (created there on first use, as the
// trainer's contexts do). Records no autodiff tape and updates no variable. Throws
// InvalidArgument for an opset outside kOnnxMinOpset..kOnnxMaxOpset and Unimplemented naming the
// op and options.model_name for an op the exporter cannot express.
TRAINYARD_API std::string onnx_model_bytes(BaseModel& model, ModelContext& ctx,
                                           const std::vector<int64_t>& example_shape,
                                           const OnnxExportOptions& options);
// The same with options.inputs as the graph's inputs (InvalidArgument when there are none, for
// a non-positive dimension or a name given twice). Inputs that the predictions do not depend on
// are left out of the graph.
TRAINYARD_API std::string onnx_model_bytes(BaseModel& model, ModelContext& ctx,
                                           const OnnxExportOptions& options);

// The serialized ONNX ModelProto of a detection model's inference path, as the Object Detection
// API's exported inference graph (exporter.py) has it: the input `image_tensor` u8
// [N, H, W, 3] (`image_shape` is [H, W, 3], the model's input size; with
// options.resize_images H and W are dynamic and the graph resizes the images to it, a Resize
// (linear, asymmetric: TensorFlow's ResizeBilinear without align_corners and half-pixel centres)
// of the f32 images, else they are fixed and the graph only casts to f32; N is dynamic), the
// model's preprocess, predict and
// postprocess (box decoding, score conversion, batch_multiclass_non_max_suppression as the exact
// composition of onnx_nms.h in the core's sources), and the outputs `detection_boxes` f32
// [N, M, 4] (normalized ymin, xmin, ymax, xmax), `detection_scores` f32 [N, M],
// `detection_classes` f32 [N, M] (1-based: exporter.py's add_output_tensor_nodes adds
// label_id_offset 1) and `num_detections` f32 [N], M the NMS's max_total_detections; padding rows
// are zeros but their classes 1 (the offset is added to every row, as exporter.py does); and
// where the postprocess gives `detection_masks` (Mask R-CNN), that fifth output f32
// [N, M, mask_height, mask_width]. Faster R-CNN's crops are CropAndResize composed of ONNX ops
// (onnx_ops.cc), its second stage rows [N * M, ...]. A
// model that copies a tensor the graph computes to the host during the capture
// (graph_capture.h) is Unimplemented, naming the op that computed it: what the host computes
// from it would be a constant of the captured image. Captured
// on one zero image; throws as onnx_model_bytes does (an NMS option without an exact ONNX form is
// Unimplemented naming it), and InvalidArgument for an image_shape that is not [H, W, 3] of
// positive sizes or a postprocess without the four outputs.
TRAINYARD_API std::string detection_onnx_model_bytes(DetectionModel& model, ModelContext& ctx,
                                                     const std::vector<int64_t>& image_shape,
                                                     const OnnxExportOptions& options);

// The shape of one example of `feature` as the pipeline feeds its model: what the reader of
// eval_input_reader declares after its preprocessing steps (train_input_reader's, when the
// eval input has no steps and the train input has some) (image_classification_preprocessing crops
// to default_image_size; the reader's `channels` option sets C). Throws ConfigError when the
// feature is missing or a dimension is left open (an image without a fixed-size crop).
TRAINYARD_API std::vector<int64_t> pipeline_feature_shape(const PluginRegistry& registry,
                                                          const config::Pipeline& pipeline,
                                                          const std::string& feature);

// The features of one example as the pipeline feeds its model (the reader of the input that
// pipeline_feature_shape picks, after its preprocessing steps), "labels" left out: each with its
// dtype and shape, num_frames a scalar. `image_shape`, when given, is the f32 "image"'s shape.
// Throws ConfigError naming the feature when a dimension is left open.
TRAINYARD_API std::vector<OnnxInput> pipeline_onnx_inputs(
    const PluginRegistry& registry, const config::Pipeline& pipeline,
    const std::vector<int64_t>& image_shape = {});

// Exports the pipeline's model with its variables restored from `checkpoint_prefix` (the latest
// checkpoint in train_dir when empty; the moving averages where eval_config or train_config asks
// for them) to `output_path` (a detection model as detection_onnx_model_bytes exports it, with
// `image_shape` or else the pipeline's preprocessed image shape), written under a temporary name
// and renamed, so the file is whole or absent. The inputs are pipeline_onnx_inputs(), the image f32
// of `image_shape` ([H, W, C]; default: the preprocessed image's); a frame-level num_frames is
// captured at max_frames (the first dimension of "features"). The task's prepare_batch runs in the
// graph. The output is "probabilities" for a model that reads an image (the classifiers), else
// "predictions". Logs one line to `log` naming the graph's inputs with their dtypes and shapes, and
// its output. Throws as onnx_model_bytes does, NotFound for a missing checkpoint or variable, and
// Error naming the file when it cannot be written.
TRAINYARD_API void export_onnx(const PluginRegistry& registry, const config::Pipeline& pipeline,
                               const std::string& checkpoint_prefix, const std::string& output_path,
                               int opset, std::ostream& log,
                               const std::vector<int64_t>& image_shape = {});

}  // namespace trainyard

#endif  // TRAINYARD_CORE_ONNX_EXPORT_H_
