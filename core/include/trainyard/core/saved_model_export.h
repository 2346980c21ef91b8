// TensorFlow SavedModel export of an image classifier (issue 39), loadable by TensorFlow 2
// (tf.saved_model.load), its TF1 loader (tf.compat.v1.saved_model.loader.load with the `serve`
// tag), TensorFlow Serving and the TFLite converter.
//
// The model runs forward once in Mode::kPredict on a batch of one zero example while a
// GraphCapture (graph_capture.h) records the ops it launches; the capture becomes a GraphDef of
// TensorFlow's own ops in TensorFlow's NHWC / HWIO layout (tf_graph.h in the core's sources has
// the mapping), with the variables as TF1 VariableV2 nodes restored by a SaverDef (save/Const,
// save/RestoreV2, save/Assign*, save/restore_all; save/SaveV2, save/control_dependency). The
// export directory holds
//   saved_model.pb                         a SavedModel with one MetaGraphDef, tag "serve";
//   variables/variables.{index,data-00000-of-00001}   the variables' values (V2 checkpoint).
// Its signatures are the estimator walkthrough's: model_fn's PredictOutput under
// "tensorflow/serving/predict" (PREDICT_METHOD_NAME), which the estimator also exports as
// "serving_default"; method name tensorflow/serving/predict. Input `image` (what model_fn reads,
// features['image']): DT_FLOAT [-1, H, W, C], the preprocessed image the model reads. Outputs
// `probabilities` (the model's predictions, DT_FLOAT [-1, classes]) and `classes` (their argmax,
// DT_INT64 [-1]). Nothing is approximated: an op, or a use of one, without an exact TensorFlow
// form is an Unimplemented error naming the op and the model.
#ifndef TRAINYARD_CORE_SAVED_MODEL_EXPORT_H_
#define TRAINYARD_CORE_SAVED_MODEL_EXPORT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/core/registry.h"
#include "trainyard/detection_model.h"
#include "trainyard/export.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"
#include "trainyard/tensor.h"

namespace trainyard {

inline constexpr const char* kSavedModelServeTag = "serve";
inline constexpr const char* kServingDefaultSignature = "serving_default";
inline constexpr const char* kPredictMethodName = "tensorflow/serving/predict";

struct SavedModelExportOptions {
  std::string model_name = "model";     // errors name it
  std::string input_feature = "image";  // the batch feature fed, and the signature input's name
};

// The YouTube-8M starter code's serving input (export_model.py's ModelExporter): serialized
// examples as the reader parses them (readers.py; formats/example_serving_graph.h in the core's
// sources has the ops), with the reader's layout.
struct ExampleServingInput {
  bool frame_level = false;  // tf.SequenceExample of uint8 frames, else tf.Example of floats
  std::vector<std::string> feature_names;
  std::vector<int64_t> feature_sizes;
  std::string id_key = "id";
  int64_t max_frames = 300;  // frame level
  double max_quantized_value = 2.0;
  double min_quantized_value = -2.0;
  int top_k = 20;  // export_model.py's _TOP_PREDICTIONS_IN_OUTPUT; min(top_k, classes) is used
};

// What a SavedModel directory written by Trainyard carries for Trainyard to rebuild its model
// (the C inference library loads such a directory as it loads Trainyard's own export): the
// effective pipeline, with its defaults, at assets.extra/trainyard/pipeline.config. assets.extra/
// is TensorFlow's directory for files beside the model that its loaders and TensorFlow Serving
// leave alone. The file is also the mark of a Trainyard SavedModel. The files the input readers'
// options name (a string option whose key ends in "_path": DetectionReader's label_map_path) go
// beside it as trainyard/FIELD.KEY (trainyard/eval_input_reader.label_map_path), so that the
// directory is whole where it is copied. The variables under variables/ are the values the
// graph reads: the moving averages already, where the pipeline asks for them.
inline constexpr const char* kSavedModelExtraDir = "assets.extra";
inline constexpr const char* kSavedModelPipelineAsset = "trainyard/pipeline.config";
inline constexpr const char* kSavedModelAssetDir = "trainyard";
// The most bytes of a file a reader's option names that the export copies (and a loader reads).
inline constexpr uint64_t kMaxSavedModelAssetBytes = uint64_t{64} << 20;

// Whether the reader option `key` names a file the SavedModel carries: its key ends in "_path".
inline bool names_saved_model_asset(const std::string& key) {
  return key.size() >= 5 && key.compare(key.size() - 5, 5, "_path") == 0;
}
// Where under assets.extra/ the file of `field`'s reader option `key` goes: trainyard/FIELD.KEY.
inline std::string saved_model_asset_path(const std::string& field, const std::string& key) {
  return std::string(kSavedModelAssetDir) + "/" + field + "." + key;
}

struct SavedModelContents {
  std::string saved_model_pb;  // the serialized SavedModel
  // The values of the graph's variables, by name: variables/variables' tensors.
  std::vector<std::pair<std::string, Tensor>> variables;
  // Files under assets.extra/, by their path there (kSavedModelPipelineAsset).
  std::vector<std::pair<std::string, std::string>> extra_assets;
};

// The SavedModel of `model`, captured on one zero example of `example_shape` ([H, W, C]) with the
// variables `ctx` gives (created there on first use). Records no autodiff tape and updates no
// variable. Throws InvalidArgument for a non-positive dimension or predictions that are not
// [N, classes], Unimplemented naming the op and options.model_name for an op without a
// TensorFlow form.
TRAINYARD_API SavedModelContents saved_model_contents(BaseModel& model, ModelContext& ctx,
                                                      const std::vector<int64_t>& example_shape,
                                                      const SavedModelExportOptions& options);

// The starter code's SavedModel of a YouTube-8M `model`: signature serving_default (method
// tensorflow/serving/predict) with input `example_bytes` (DT_STRING [-1]: serialized tf.Example,
// or tf.SequenceExample at frame level) and outputs `video_id` (DT_STRING [-1]), `class_indexes`
// (DT_INT32 [-1, k], TopKV2's indices) and `predictions` (DT_FLOAT [-1, k], their probabilities),
// k = min(input.top_k, classes). The graph parses the examples as the reader does, runs
// `prepare` (the task's prepare_batch: the starter's l2_normalize of the features) and the
// model's forward in Mode::kPredict, both captured on a zero batch of 2 examples, then TopKV2.
// Throws as saved_model_contents does, InvalidArgument for a layout that cannot be parsed or
// predictions that are not f32 [N, classes].
TRAINYARD_API SavedModelContents example_saved_model_contents(
    BaseModel& model, ModelContext& ctx, const ExampleServingInput& input,
    const std::function<void(Batch&)>& prepare, const SavedModelExportOptions& options);

// A detector's export as the Object Detection API's export_inference_graph.py writes it
// (input_type image_tensor): the SavedModel, with signature serving_default (method
// tensorflow/serving/predict), input `inputs` (the graph's image_tensor:0, DT_UINT8
// [-1, -1, -1, 3]) and outputs detection_boxes (DT_FLOAT [-1, M, 4], normalized [ymin, xmin,
// ymax, xmax]), detection_scores (DT_FLOAT [-1, M]), detection_classes (DT_FLOAT [-1, M], the
// class + label_id_offset 1, also in the padding) and num_detections (DT_FLOAT [-1]), M the
// post-processing's max_total_detections, and, for a model whose postprocess gives them (Mask
// R-CNN), detection_masks (DT_FLOAT [-1, M, mask_height, mask_width], each in its box's frame);
// and the same graph frozen (its variables Const nodes,
// no saver). The graph casts the images to f32 and resizes them to `image_shape`'s [H, W]
// (ResizeBilinear, align_corners and half_pixel_centers false: the fixed_shape_resizer's
// tf.image.resize_images), then runs the model's preprocess, predict and postprocess, captured on
// a zero batch of 2 images of that size; the post-processing's NMS is tf_graph_detection.h's
// composition of NonMaxSuppressionV5. Throws InvalidArgument for an image shape that is not
// [H, W, 3] of positive sizes, Unimplemented naming the op for one without a TensorFlow form
// (soft or combined NMS, ...); DetectionResizeToRange below has keep_aspect_ratio_resizer's.
// export_inference_graph.py's --input_type: image_tensor (the uint8 images), or
// encoded_image_string_tensor (signature input `inputs`: the graph's
// encoded_image_string_tensor:0, DT_STRING [-1], encoded images of one size that the graph
// decodes: DecodeImage in a While loop over the batch, as the API's map_fn).
// tf_example (input `inputs`: the graph's tf_example:0, DT_STRING [-1], serialized tf.Example
// protos whose image/encoded the graph parses with ParseExampleV2, then decodes so).
enum class DetectionInputType { kImageTensor, kEncodedImageStringTensor, kTfExample };

// A keep_aspect_ratio_resizer with pad_to_max_dimension (the API's preprocessor.resize_to_range),
// for detection_saved_model_contents: instead of one ResizeBilinear to image_shape, the graph
// computes each batch's size from its images' dynamic shape as the API's
// _compute_new_dynamic_size does (f32 sides and factors, Round, the smaller size when the larger
// one's longer side exceeds max_dimension), resizes to it (ResizeBilinear, align_corners and
// half_pixel_centers false), pads with zeros at the bottom and right to max_dimension x
// max_dimension (pad_to_bounding_box), and gives the post-processing's NMS each image's clip
// window [0, 0, h / max_dimension, w / max_dimension] (the API's _compute_clip_window of the
// true_image_shapes), its boxes in that window's frame. `model` must then be the detector with a
// fixed_shape_resizer of max_dimension x max_dimension (image_shape [max, max, 3]): its
// preprocess, predict and postprocess are captured on images already so padded.
struct DetectionResizeToRange {
  int64_t min_dimension = 0;
  int64_t max_dimension = 0;
};

struct DetectionSavedModel {
  SavedModelContents saved_model;
  std::string frozen_graph_pb;  // frozen_inference_graph.pb: a serialized GraphDef
  // [height, width] of the detection_masks output (Mask R-CNN), empty without one.
  std::vector<int64_t> mask_size;
};
TRAINYARD_API DetectionSavedModel detection_saved_model_contents(
    DetectionModel& model, ModelContext& ctx, const std::vector<int64_t>& image_shape,
    const SavedModelExportOptions& options,
    DetectionInputType input_type = DetectionInputType::kImageTensor,
    const std::optional<DetectionResizeToRange>& resize_to_range = std::nullopt);

// Writes `contents` as the SavedModel directory `export_dir`: everything goes into a hidden
// sibling that is renamed into place (publish_directory), replacing an earlier export whole.
// Throws Error naming the directory when it cannot be written.
TRAINYARD_API void write_saved_model(const SavedModelContents& contents,
                                     const std::string& export_dir);

// Writes saved_model.pb, variables/ and assets.extra/ of `contents` into the existing directory
// `dir` (an export's staging directory), beside what else it holds. Throws Error naming the
// path.
TRAINYARD_API void write_saved_model_files(const SavedModelContents& contents,
                                           const std::string& dir);

// Exports the pipeline's model with its variables restored from `checkpoint_prefix` (the latest
// checkpoint in train_dir when empty; the moving averages where eval_config or train_config asks
// for them) as a SavedModel in `export_dir`. A pipeline whose reader parses serialized examples
// by a layout (it declares the options feature_names, feature_sizes and id_key, and max_frames,
// max_quantized_value and min_quantized_value at frame level, as the YouTube-8M readers do) gets
// example_saved_model_contents' signature, with the reader's options and the task's
// prepare_batch; any other gets the classifier signature, whose `image_shape` ([H, W, C])
// defaults to pipeline_feature_shape(..., "image") (onnx_export.h). Logs one line to `log`.
// Every SavedModel it writes carries the pipeline in assets.extra (kSavedModelPipelineAsset).
// A detection model (SSD; its image_resizer a fixed_shape_resizer) gets
// detection_saved_model_contents' export in the Object Detection API's layout instead:
//   export_dir/saved_model/{saved_model.pb, variables/}   the SavedModel;
//   export_dir/frozen_inference_graph.pb                  the frozen graph;
//   export_dir/model.ckpt.{index,data-00000-of-00001}, export_dir/checkpoint   its variables;
//   export_dir/pipeline.config                            the pipeline, with its defaults.
// Throws as saved_model_contents does, ConfigError for an empty export_dir (or, for a detector,
// an image_resizer that is not a fixed_shape_resizer, or an image_shape given), NotFound for a
// missing checkpoint or variable.
TRAINYARD_API void export_saved_model(const PluginRegistry& registry,
                                      const config::Pipeline& pipeline,
                                      const std::string& checkpoint_prefix,
                                      const std::string& export_dir, std::ostream& log,
                                      const std::vector<int64_t>& image_shape = {});
// The same with export_inference_graph.py's --input_type for a detector: "image_tensor",
// "encoded_image_string_tensor" or "tf_example" (DetectionInputType); any other model takes only
// "image_tensor". Throws ConfigError naming --input_type for another value.
TRAINYARD_API void export_saved_model(const PluginRegistry& registry,
                                      const config::Pipeline& pipeline,
                                      const std::string& checkpoint_prefix,
                                      const std::string& export_dir, std::ostream& log,
                                      const std::vector<int64_t>& image_shape,
                                      const std::string& input_type);

// The SavedModel export_saved_model writes (the example signature or the classifier's, as its
// comment says), of the checkpoint `checkpoint_prefix`, for train_and_evaluate's exporters with
// eval_config.export_format "saved_model". Logs one line. Throws as export_saved_model does.
TRAINYARD_API SavedModelContents pipeline_saved_model_contents(const PluginRegistry& registry,
                                                               const config::Pipeline& pipeline,
                                                               const std::string& checkpoint_prefix,
                                                               std::ostream& log);

// The SavedModel that train.py's periodic export (export_model_steps) writes beside Trainyard's
// own export: export_saved_model's example signature, of the checkpoint `checkpoint_prefix`, for
// a pipeline whose reader parses examples by a layout; nothing for any other pipeline, and
// nothing, with a line in `log` saying why, where the export fails (a model with an op that has
// no TensorFlow form: the export then holds Trainyard's files alone, and training goes on).
// Logs one line.
TRAINYARD_API std::optional<SavedModelContents> starter_saved_model(
    const PluginRegistry& registry, const config::Pipeline& pipeline,
    const std::string& checkpoint_prefix, std::ostream& log);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SAVED_MODEL_EXPORT_H_
