#include "trainyard/core/tflite_export.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "engine/model_context.h"
#include "formats/export_recording.h"
#include "formats/tflite_graph.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/atomic_file.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/config.h"
#include "trainyard/core/graph_capture.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/ops/math.h"
#include "trainyard/ops/reduce.h"
#include "trainyard/task.h"

namespace trainyard {

using export_internal::RecordingContext;
using export_internal::shape_text;

namespace {
// The batch the forward pass is captured at (the file's batch is dynamic): a first dimension that
// is a multiple of it holds the batch, alone or with rows of each example (tflite_graph.h); 5,
// so that it is told apart from a dimension of 1 and unlikely to be a model's own constant.
constexpr int64_t kCaptureBatch = 5;

std::optional<tflite_internal::Uint8Inference> uint8_inference(const TfliteQuantization& q,
                                                               const std::string& model_name) {
  if (!q.uint8) return std::nullopt;
  if (!(q.std_value > 0.0) || !(q.mean_value >= 0.0 && q.mean_value <= 255.0)) {
    throw InvalidArgument("TFLite export of " + model_name + ": --std_values is " +
                          std::to_string(q.std_value) + " and --mean_values " +
                          std::to_string(q.mean_value) +
                          "; expected a positive std and a mean in [0, 255]");
  }
  return tflite_internal::Uint8Inference{q.mean_value, q.std_value};
}
}  // namespace

std::string tflite_model_bytes(BaseModel& model, ModelContext& ctx,
                               const TfliteExportOptions& options) {
  if (options.inputs.empty()) {
    throw InvalidArgument("TFLite export of " + options.model_name + ": no inputs given");
  }
  NoGradScope no_grad;
  Batch batch;
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const OnnxInput& input : options.inputs) {
    std::vector<int64_t> dims{kCaptureBatch};
    for (int64_t d : input.example_shape) {
      if (d <= 0) {
        throw InvalidArgument("TFLite export of " + options.model_name + ": the example shape " +
                              shape_text(input.example_shape) + " of '" + input.name +
                              "' has a non-positive dimension");
      }
      dims.push_back(d);
    }
    Tensor t = ops::full(ctx.backend(), Shape(dims), input.capture_value, input.dtype);
    const bool taken = input.name == "num_frames" ? batch.num_frames.defined()
                                                  : batch.features.count(input.name) > 0;
    if (taken) {
      throw InvalidArgument("TFLite export of " + options.model_name + ": the input '" +
                            input.name + "' is given twice");
    }
    (input.name == "num_frames" ? batch.num_frames : batch.features[input.name]) = t;
    inputs.emplace_back(input.name, t);
  }
  RecordingContext recording(ctx);
  GraphCapture capture;
  if (options.prepare_batch) options.prepare_batch(batch);
  ModelOutput out = guard_plugin_call(
      model, "forward", [&] { return model.forward(recording, batch, Mode::kPredict); });
  if (!out.predictions.defined()) {
    throw InvalidArgument("TFLite export of " + options.model_name +
                          ": the model returned no predictions");
  }
  tflite_internal::GraphSpec spec;
  spec.model_name = options.model_name;
  spec.batch = kCaptureBatch;
  spec.inputs = inputs;
  spec.outputs = {{options.output_name, out.predictions}};
  spec.variables = recording.variables();
  spec.uint8 = uint8_inference(options.quantization, options.model_name);
  return tflite_internal::build_tflite_model(capture, spec);
}

namespace {

const Tensor& predicted(const TensorDict& prediction, const char* key, const std::string& what) {
  auto it = prediction.find(key);
  if (it == prediction.end() || !it->second.defined()) {
    throw InvalidArgument(what + ": predict() gave no '" + key + "'");
  }
  return it->second;
}

void check_ssd_options(const TfliteSsdOptions& ssd, int64_t num_classes, const std::string& what) {
  auto check = [&](const char* flag, int64_t value, int64_t low, int64_t high) {
    if (value < low || value > high) {
      throw InvalidArgument(what + ": --" + flag + " is " + std::to_string(value) + "; expected " +
                            std::to_string(low) + " to " + std::to_string(high));
    }
  };
  constexpr int64_t kMost = 100000;  // TFLite's sizes are int32; far more than any image holds
  check("max_detections", ssd.max_detections, 1, kMost);
  check("max_classes_per_detection", ssd.max_classes_per_detection, 1, num_classes);
  check("detections_per_class", ssd.detections_per_class, 1, kMost);
}

// Corner boxes [ymin, xmin, ymax, xmax] as TFLite_Detection_PostProcess's anchors, [ycenter,
// xcenter, height, width], in f32 as the API's get_center_coordinates_and_sizes computes them.
std::vector<float> center_size_anchors(const Tensor& corners) {
  std::vector<float> boxes = corners.to_vector<float>();
  std::vector<float> out(boxes.size());
  for (std::size_t i = 0; i + 3 < boxes.size(); i += 4) {
    const float height = boxes[i + 2] - boxes[i], width = boxes[i + 3] - boxes[i + 1];
    out[i] = boxes[i] + height / 2.0f;
    out[i + 1] = boxes[i + 1] + width / 2.0f;
    out[i + 2] = height;
    out[i + 3] = width;
  }
  return out;
}

}  // namespace

std::string ssd_tflite_model_bytes(DetectionModel& model, ModelContext& ctx,
                                   const std::string& model_name,
                                   const std::vector<int64_t>& image_shape,
                                   const TfliteSsdPipelineOptions& pipeline_options,
                                   const TfliteSsdOptions& ssd,
                                   const TfliteQuantization& quantization) {
  const std::string what = "TFLite export of " + model_name;
  check_ssd_options(ssd, ctx.num_classes(), what);
  if (image_shape.size() != 3 ||
      std::any_of(image_shape.begin(), image_shape.end(), [](int64_t d) { return d <= 0; })) {
    throw InvalidArgument(what + ": the image shape " + shape_text(image_shape) +
                          " is not [H, W, C] of positive sizes");
  }
  if (pipeline_options.logit_scale == 0.0) {
    throw InvalidArgument(what + ": post_processing.logit_scale is 0");
  }
  if (ssd.add_postprocessing_op &&
      !(pipeline_options.nms_iou_threshold > 0.0f && pipeline_options.nms_iou_threshold <= 1.0f)) {
    throw InvalidArgument(what + ": post_processing.batch_non_max_suppression.iou_threshold is " +
                          std::to_string(pipeline_options.nms_iou_threshold) +
                          "; TFLite_Detection_PostProcess takes (0, 1]");
  }
  NoGradScope no_grad;
  const Tensor images = ops::full(
      ctx.backend(), Shape({1, image_shape[0], image_shape[1], image_shape[2]}), 0.0, DType::kF32);
  PreprocessedImages pre;
  pre.images = images;
  pre.true_image_shapes = Tensor::from_vector(
      ctx.backend(), Shape{1, 3}, std::vector<int32_t>(image_shape.begin(), image_shape.end()));
  RecordingContext recording(ctx);
  GraphCapture capture;
  const TensorDict prediction = guard_plugin_call(
      model, "predict", [&] { return model.predict(recording, pre, Mode::kPredict); });
  const Tensor& encodings = predicted(prediction, "box_encodings", what);
  // post_processing_builder's score conversion: the logits times 1 / logit_scale, converted.
  Tensor scores = predicted(prediction, "class_predictions_with_background", what);
  if (pipeline_options.logit_scale != 1.0) scores = scores * (1.0 / pipeline_options.logit_scale);
  const std::string& converter = pipeline_options.score_converter;
  if (converter == "SIGMOID") {
    scores = ops::sigmoid(scores);
  } else if (converter == "SOFTMAX") {
    scores = ops::softmax(scores, -1);
  } else if (converter != "IDENTITY") {
    throw InvalidArgument(what + ": post_processing.score_converter is '" + converter +
                          "' (known: IDENTITY, SIGMOID, SOFTMAX)");
  }
  tflite_internal::GraphSpec spec;
  spec.model_name = model_name;
  spec.batch = 1;
  spec.dynamic_batch = false;
  spec.inputs = {{"normalized_input_image_tensor", images}};
  spec.outputs = {{"raw_outputs/box_encodings", encodings},
                  {"raw_outputs/class_predictions", scores}};
  spec.variables = recording.variables();
  if (ssd.add_postprocessing_op) {
    tflite_internal::DetectionPostProcess& post = spec.detection_postprocess.emplace();
    post.anchors = center_size_anchors(predicted(prediction, "anchors", what));
    post.max_detections = static_cast<int32_t>(ssd.max_detections);
    post.max_classes_per_detection = static_cast<int32_t>(ssd.max_classes_per_detection);
    post.detections_per_class = static_cast<int32_t>(ssd.detections_per_class);
    post.use_regular_nms = ssd.use_regular_nms;
    post.nms_score_threshold = pipeline_options.nms_score_threshold;
    post.nms_iou_threshold = pipeline_options.nms_iou_threshold;
    post.num_classes = static_cast<int32_t>(ctx.num_classes());
    post.y_scale = pipeline_options.y_scale;
    post.x_scale = pipeline_options.x_scale;
    post.h_scale = pipeline_options.h_scale;
    post.w_scale = pipeline_options.w_scale;
  }
  spec.uint8 = uint8_inference(quantization, model_name);
  return tflite_internal::build_tflite_model(capture, spec);
}

namespace {

// export_tflite_ssd_graph.py's reading of the pipeline: the model's post_processing and
// faster_rcnn_box_coder options (the SSD class's declared defaults where the config sets none).
TfliteSsdPipelineOptions ssd_pipeline_options(const PluginRegistry& registry,
                                              const config::Pipeline& pipeline,
                                              const std::string& model_name) {
  const Options o =
      registry.resolve_options(registry.find(ClassKind::kDetectionModel, model_name),
                               pipeline.has_model() ? plugin_params(pipeline.model(), "model")
                                                    : std::map<std::string, OptionValue>{});
  const std::string what = "TFLite export of " + model_name;
  const char* kCoder = "box_coder";
  if (!o.contains(kCoder) || !o.contains("post_processing.score_converter")) {
    throw ConfigError(what +
                      ": export_tflite_ssd_graph.py exports SSD models only "
                      "(model.ssd with a box_coder and post_processing)");
  }
  if (o.get_string(kCoder) != "faster_rcnn_box_coder") {
    throw ConfigError(what + ": model.ssd.box_coder is " + o.get_string(kCoder) +
                      "; TFLite_Detection_PostProcess decodes faster_rcnn_box_coder's encodings");
  }
  TfliteSsdPipelineOptions p;
  p.score_converter = o.get_string("post_processing.score_converter");
  p.logit_scale = o.get_float("post_processing.logit_scale");
  const std::string nms = "post_processing.batch_non_max_suppression.";
  p.nms_score_threshold = static_cast<float>(o.get_float(nms + "score_threshold"));
  p.nms_iou_threshold = static_cast<float>(o.get_float(nms + "iou_threshold"));
  const std::string coder = "box_coder.faster_rcnn_box_coder.";
  p.y_scale = static_cast<float>(o.get_float(coder + "y_scale"));
  p.x_scale = static_cast<float>(o.get_float(coder + "x_scale"));
  p.h_scale = static_cast<float>(o.get_float(coder + "height_scale"));
  p.w_scale = static_cast<float>(o.get_float(coder + "width_scale"));
  return p;
}

std::string type_text(const TfliteQuantization& q) {
  if (!q.uint8) return "float32";
  std::ostringstream out;
  out << "uint8, inputs (q - " << q.mean_value << ") / " << q.std_value;
  return out.str();
}

void export_ssd_tflite(const PluginRegistry& registry, const config::Pipeline& pipeline,
                       const std::string& prefix, const std::string& model_name,
                       const std::string& output_path, std::ostream& log,
                       const std::vector<int64_t>& image_shape, const TfliteSsdOptions& ssd,
                       const TfliteQuantization& quantization) {
  if (!image_shape.empty()) {
    throw ConfigError("TFLite export of " + model_name +
                      ": --image_shape is not taken for a detector; the graph takes images of "
                      "its fixed_shape_resizer's size, as export_tflite_ssd_graph.py writes it");
  }
  const TfliteSsdPipelineOptions pipeline_options =
      ssd_pipeline_options(registry, pipeline, model_name);
  const std::vector<int64_t> shape = export_internal::fixed_resizer_shape(
      pipeline, "TFLite export", model_name,
      "export_tflite_ssd_graph.py exports fixed_shape_resizer models only");
  std::shared_ptr<Backend> backend = make_backend(registry, pipeline);
  std::shared_ptr<DetectionModel> model =
      create_plugin<DetectionModel>(registry, ClassKind::kDetectionModel, model_name,
                                    pipeline.has_model() ? &pipeline.model() : nullptr, "model");
  export_internal::RestoredVariables variables(*backend, pipeline, prefix);
  const std::string bytes = ssd_tflite_model_bytes(*model, variables.ctx, model_name, shape,
                                                   pipeline_options, ssd, quantization);
  write_file_atomically(output_path, bytes);
  log << "exported " << model_name << " from " << prefix << " to " << output_path << " (TFLite "
      << type_text(quantization) << ", input normalized_input_image_tensor [1, " << shape[0] << ", "
      << shape[1] << ", 3], preprocessed as the model's preprocessing does "
      << "(not in the graph), ";
  if (ssd.add_postprocessing_op) {
    log << "TFLite_Detection_PostProcess with " << (ssd.use_regular_nms ? "regular" : "fast")
        << " NMS, max_detections " << ssd.max_detections << ", outputs boxes, classes, scores "
        << "and num_detections";
  } else {
    log << "outputs raw_outputs/box_encodings and raw_outputs/class_predictions";
  }
  log << "; " << bytes.size() << " bytes)\n";
}

}  // namespace

void export_tflite(const PluginRegistry& registry, const config::Pipeline& pipeline,
                   const std::string& checkpoint_prefix, const std::string& output_path,
                   std::ostream& log, const std::vector<int64_t>& image_shape,
                   const TfliteSsdOptions& ssd, const TfliteQuantization& quantization) {
  if (output_path.empty()) throw ConfigError("TFLite export: no output file given");
  const std::string prefix = checkpoint_or_latest(pipeline, checkpoint_prefix);
  const std::string model_name = model_class(registry, pipeline);
  if (model_kind(registry, model_name) == ClassKind::kDetectionModel) {
    return export_ssd_tflite(registry, pipeline, prefix, model_name, output_path, log, image_shape,
                             ssd, quantization);
  }
  const export_internal::RestoredBaseModel restored(registry, pipeline, prefix, model_name,
                                                    image_shape);
  TfliteExportOptions options;
  options.model_name = model_name;
  options.inputs = restored.inputs;
  options.output_name = restored.output_name;
  options.prepare_batch = restored.prepare_batch();
  options.quantization = quantization;
  const std::string bytes = tflite_model_bytes(*restored.model, restored.variables->ctx, options);
  write_file_atomically(output_path, bytes);
  log << "exported " << model_name << " from " << prefix << " to " << output_path << " (TFLite "
      << type_text(quantization) << ", dynamic batch, output " << options.output_name << " [-1, "
      << pipeline.num_classes() << "], " << bytes.size() << " bytes)\n";
}

}  // namespace trainyard
