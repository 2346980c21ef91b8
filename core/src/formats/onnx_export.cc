#include "trainyard/core/onnx_export.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "engine/model_context.h"
#include "formats/export_recording.h"
#include "formats/onnx_graph.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/atomic_file.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/graph_capture.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/task.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/proto/onnx.pb.h"
#include "trainyard/reader.h"
#include "trainyard/task.h"
#include "trainyard/transform.h"

namespace trainyard {
namespace {

using export_internal::detection_capture_pipeline;
using export_internal::keep_aspect_ratio_resize;
using export_internal::RecordingContext;
using export_internal::RestoredVariables;
using export_internal::shape_text;

// The captured detection graph's input when the graph resizes its images (add_image_resize),
// and with resize_to_range each image's NMS clip window.
constexpr const char* kResizedImages = "Preprocessor/resized";
constexpr const char* kClipWindows = "Preprocessor/clip_windows";

// Nodes and initializers for the resize that add_image_resize puts in front of a graph.
class ResizeEmitter {
 public:
  explicit ResizeEmitter(onnx::GraphProto& graph) : graph_(graph) {}

  google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes() { return nodes_; }
  onnx::NodeProto* node(const std::string& op_type, const std::vector<std::string>& inputs,
                        const std::string& output = "") {
    onnx::NodeProto* n = nodes_.Add();
    n->set_op_type(op_type);
    n->set_name("Preprocessor/ResizeImage/" + op_type + "_" + std::to_string(nodes_.size()));
    for (const std::string& input : inputs) n->add_input(input);
    n->add_output(output.empty() ? n->name() + ":0" : output);
    return n;
  }
  std::string op(const std::string& op_type, const std::vector<std::string>& inputs) {
    return node(op_type, inputs)->output(0);
  }
  static void attr(onnx::NodeProto* n, const char* name, int64_t value) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  static void attr(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& values) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void attr(onnx::NodeProto* n, const char* name, const char* value) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
  }
  std::string int64s(const std::vector<int64_t>& values) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name("Preprocessor/ResizeImage/const_" + std::to_string(graph_.initializer_size()));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return t->name();
  }
  // f32 [size], or a scalar with `scalar`.
  std::string floats(const std::vector<float>& values, bool scalar = false) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name("Preprocessor/ResizeImage/const_" + std::to_string(graph_.initializer_size()));
    t->set_data_type(onnx::TensorProto::FLOAT);
    if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
    for (float v : values) t->add_float_data(v);
    return t->name();
  }
  std::string float_scalar(float value) { return floats({value}, true); }
  std::string cast(const std::string& x, int32_t to, const std::string& output = "") {
    onnx::NodeProto* n = node("Cast", {x}, output);
    attr(n, "to", int64_t{to});
    return n->output(0);
  }
  std::string concat(const std::vector<std::string>& parts) {
    onnx::NodeProto* n = node("Concat", parts);
    attr(n, "axis", int64_t{0});
    return n->output(0);
  }

 private:
  onnx::GraphProto& graph_;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes_;
};

// preprocessor._compute_new_dynamic_size of the images' [H, W] (`shape`: the input's i64 shape):
// the sides and factors in f32, Round (half to even, as tf.round), the smaller size when the
// larger one's longer side exceeds max_dimension. Returns the i64 [2] size.
std::string resize_to_range_size(ResizeEmitter& e, const std::string& shape,
                                 const DetectionResizeToRange& r) {
  auto side = [&](int64_t k) {
    return e.cast(e.op("Slice", {shape, e.int64s({k}), e.int64s({k + 1}), e.int64s({0})}),
                  onnx::TensorProto::FLOAT);  // [1]
  };
  const std::string height = side(1), width = side(2);
  auto size_for = [&](const std::string& factor) {
    return e.cast(e.op("Round", {e.op("Mul", {e.concat({height, width}), factor})}),
                  onnx::TensorProto::INT64);  // [2]
  };
  const std::string max_dimension = e.float_scalar(static_cast<float>(r.max_dimension));
  const std::string large = size_for(e.op(
      "Div", {e.float_scalar(static_cast<float>(r.min_dimension)), e.op("Min", {height, width})}));
  const std::string small = size_for(e.op("Div", {max_dimension, e.op("Max", {height, width})}));
  onnx::NodeProto* longest = e.node("ReduceMax", {large});
  ResizeEmitter::attr(longest, "keepdims", int64_t{0});
  const std::string too_large =
      e.op("Greater", {e.cast(longest->output(0), onnx::TensorProto::FLOAT), max_dimension});
  return e.op("Where", {too_large, small, large});
}

// Puts in front of `model`'s nodes the image resize of the model's resizer: the input
// `image_tensor` u8 [N, H, W, 3] of any size, cast to f32 ("ToFloat", as the API's graph) and
// resized by Resize (linear, coordinate_transformation_mode asymmetric: sample y of the output
// reads the input at y * in / out, TensorFlow's ResizeBilinear with align_corners and
// half_pixel_centers false) on its NCHW form: to image_shape (fixed_shape_resizer), or with
// `resize_to_range` to its size for the batch's images, zero-padded at the bottom and right to
// max_dimension, with each image's clip window [0, 0, h / max, w / max] (f32) as kClipWindows.
// The result, kResizedImages, replaces the captured graph's input.
void add_image_resize(onnx::ModelProto& model, const std::vector<int64_t>& image_shape,
                      const std::optional<DetectionResizeToRange>& resize_to_range) {
  onnx::GraphProto& graph = *model.mutable_graph();
  ResizeEmitter e(graph);
  onnx::NodeProto* nchw =
      e.node("Transpose", {e.cast("image_tensor", onnx::TensorProto::FLOAT, "ToFloat")});
  ResizeEmitter::attr(nchw, "perm", std::vector<int64_t>{0, 3, 1, 2});
  const std::string shape = e.op("Shape", {"image_tensor"});
  const std::string batch = e.op("Slice", {shape, e.int64s({0}), e.int64s({1}), e.int64s({0})});
  const std::string size = resize_to_range ? resize_to_range_size(e, shape, *resize_to_range)
                                           : e.int64s({image_shape[0], image_shape[1]});
  onnx::NodeProto* resize =
      e.node("Resize", {nchw->output(0), "", "", e.concat({batch, e.int64s({3}), size})});
  ResizeEmitter::attr(resize, "mode", "linear");
  ResizeEmitter::attr(resize, "coordinate_transformation_mode", "asymmetric");
  std::string resized = resize->output(0);
  if (resize_to_range) {
    const int64_t max = resize_to_range->max_dimension;
    // pad_to_bounding_box(image, 0, 0, max, max): zeros below and right.
    const std::string rest = e.op("Sub", {e.int64s({max, max}), size});
    resized = e.op("Pad", {resized, e.concat({e.int64s({0, 0, 0, 0, 0, 0}), rest})});
    // _compute_clip_window: [0, 0, true height / padded height, true width / padded width].
    const std::string corner = e.op(
        "Div", {e.cast(size, onnx::TensorProto::FLOAT), e.float_scalar(static_cast<float>(max))});
    const std::string window = e.concat({e.floats({0.0f, 0.0f}), corner});
    e.node("Expand", {e.op("Unsqueeze", {window, e.int64s({0})}), e.concat({batch, e.int64s({4})})},
           kClipWindows);
  }
  onnx::NodeProto* nhwc = e.node("Transpose", {resized}, kResizedImages);
  ResizeEmitter::attr(nhwc, "perm", std::vector<int64_t>{0, 2, 3, 1});

  for (onnx::NodeProto& n : *graph.mutable_node()) *e.nodes().Add() = std::move(n);
  graph.mutable_node()->Swap(&e.nodes());
  // The input: image_tensor u8 [N, H, W, 3] in place of the resized images.
  for (onnx::ValueInfoProto& input : *graph.mutable_input()) {
    if (input.name() != kResizedImages) continue;
    input.set_name("image_tensor");
    onnx::TypeProto::Tensor* type = input.mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::UINT8);
    type->mutable_shape()->mutable_dim(1)->set_dim_param("H");
    type->mutable_shape()->mutable_dim(2)->set_dim_param("W");
  }
}

void check_opset(int opset) {
  if (opset < kOnnxMinOpset || opset > kOnnxMaxOpset) {
    throw InvalidArgument("ONNX export: opset " + std::to_string(opset) +
                          " is not supported; choose " + std::to_string(kOnnxMinOpset) + " to " +
                          std::to_string(kOnnxMaxOpset));
  }
}

}  // namespace

std::string onnx_model_bytes(BaseModel& model, ModelContext& ctx,
                             const std::vector<int64_t>& example_shape,
                             const OnnxExportOptions& options) {
  OnnxExportOptions fed = options;
  fed.inputs = {{options.input_feature, DType::kF32, example_shape, 0.0}};
  return onnx_model_bytes(model, ctx, fed);
}

std::string onnx_model_bytes(BaseModel& model, ModelContext& ctx,
                             const OnnxExportOptions& options) {
  check_opset(options.opset);
  if (options.inputs.empty()) {
    throw InvalidArgument("ONNX export of " + options.model_name + ": no inputs given");
  }
  NoGradScope no_grad;
  Batch batch;
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const OnnxInput& input : options.inputs) {
    std::vector<int64_t> dims{1};
    for (int64_t d : input.example_shape) {
      if (d <= 0) {
        throw InvalidArgument("ONNX export of " + options.model_name + ": the example shape " +
                              shape_text(input.example_shape) + " of '" + input.name +
                              "' has a non-positive dimension");
      }
      dims.push_back(d);
    }
    Tensor t = ops::full(ctx.backend(), Shape(dims), input.capture_value, input.dtype);
    const bool taken = input.name == "num_frames" ? batch.num_frames.defined()
                                                  : batch.features.count(input.name) > 0;
    if (taken) {
      throw InvalidArgument("ONNX export of " + options.model_name + ": the input '" + input.name +
                            "' is given twice");
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
    throw InvalidArgument("ONNX export of " + options.model_name +
                          ": the model returned no "
                          "predictions");
  }
  onnx_internal::GraphSpec spec;
  spec.model_name = options.model_name;
  spec.opset = options.opset;
  spec.inputs = inputs;
  spec.outputs = {{options.output_name, out.predictions}};
  spec.variables = recording.variables();
  return onnx_internal::build_onnx_model(capture, spec).SerializeAsString();
}

std::string detection_onnx_model_bytes(DetectionModel& model, ModelContext& ctx,
                                       const std::vector<int64_t>& image_shape,
                                       const OnnxExportOptions& options) {
  check_opset(options.opset);
  if (image_shape.size() != 3 || image_shape[2] != 3 || image_shape[0] <= 0 ||
      image_shape[1] <= 0) {
    throw InvalidArgument("ONNX export of " + options.model_name + ": the image shape " +
                          shape_text(image_shape) + " is not [H, W, 3] of positive sizes");
  }
  NoGradScope no_grad;
  const Tensor image_tensor = ops::full(
      ctx.backend(), Shape{1, image_shape[0], image_shape[1], image_shape[2]}, 0.0, DType::kU8);
  RecordingContext recording(ctx);
  GraphCapture capture;
  // As the API's exported graph: the uint8 images to f32, then preprocess, predict, postprocess
  // (inference.py's and exporter.py's _build_detection_graph).
  const Tensor images = ops::cast(image_tensor, DType::kF32);
  const export_internal::DetectorRun run = export_internal::run_detector(
      model, recording, images, "ONNX export of " + options.model_name);
  auto entry = [&](const char* name) -> const Tensor& { return run.entry(name); };
  onnx_internal::GraphSpec spec;
  spec.model_name = options.model_name;
  spec.opset = options.opset;
  // Resizing, the captured graph reads the resized f32 images, which the nodes put in front of it
  // compute from the input (add_image_resize).
  spec.inputs = {options.resize_images ? std::make_pair(std::string(kResizedImages), images)
                                       : std::make_pair(std::string("image_tensor"), image_tensor)};
  // exporter.py's add_output_tensor_nodes: classes + label_id_offset (1), num_detections f32.
  spec.outputs = {{"detection_boxes", entry("detection_boxes")},
                  {"detection_scores", entry("detection_scores")},
                  {"detection_classes", ops::add(entry("detection_classes"), 1.0)},
                  {"num_detections", ops::cast(entry("num_detections"), DType::kF32)}};
  if (run.detections.count("detection_masks") != 0) {
    // exporter.py's detection_masks: [N, M, mask_height, mask_width] in each box's frame.
    const Tensor& masks = entry("detection_masks");
    if (masks.shape().rank() != 4 || masks.shape()[1] != entry("detection_boxes").shape()[1]) {
      throw InvalidArgument("ONNX export of " + options.model_name + ": detection_masks is " +
                            masks.description() +
                            "; expected [batch, max detections, height, "
                            "width]");
    }
    spec.outputs.push_back({"detection_masks", masks});
  }
  spec.variables = recording.variables();
  spec.refuse_host_reads = true;
  if (options.resize_images && options.resize_to_range) spec.nms_clip_windows = kClipWindows;
  onnx::ModelProto built = onnx_internal::build_onnx_model(capture, spec);
  if (options.resize_images) add_image_resize(built, image_shape, options.resize_to_range);
  return built.SerializeAsString();
}

namespace {

// The input of the pipeline that the export feeds (see pipeline_feature_shape), its field name,
// and its features after the reader and the preprocessing steps.
std::pair<std::string, std::vector<FeatureSpec>> pipeline_features(
    const PluginRegistry& registry, const config::Pipeline& pipeline) {
  // The eval input when it has its own preprocessing (a recorded run's eval reader may hold only
  // the train reader's class), else the train input.
  const bool eval = pipeline.has_eval_input_reader() &&
                    (pipeline.eval_input_reader().preprocessing_step_size() > 0 ||
                     pipeline.train_input_reader().preprocessing_step_size() == 0);
  const std::string field = eval ? "eval_input_reader" : "train_input_reader";
  const config::InputReader& input =
      eval ? pipeline.eval_input_reader() : pipeline.train_input_reader();
  std::shared_ptr<Reader> reader = make_reader(registry, pipeline, input, field.c_str());
  std::vector<FeatureSpec> specs =
      guard_plugin_call(*reader, "features", [&] { return reader->features(); });
  for (const auto& transform : transforms_from_config(input.preprocessing_step(), field)) {
    specs = transform->features(std::move(specs));
  }
  return {field, std::move(specs)};
}

void check_closed(const std::string& field, const std::string& feature,
                  const std::vector<int64_t>& shape) {
  for (int64_t d : shape) {
    if (d < 0) {
      throw ConfigError(field + ": '" + feature + "' is " + shape_text(shape) +
                        " after the reader and its preprocessing steps, with a size left "
                        "open; crop it to a fixed size (image_classification_preprocessing) "
                        "or give the shape (--image_shape H,W,C)");
    }
  }
}

}  // namespace

std::vector<int64_t> pipeline_feature_shape(const PluginRegistry& registry,
                                            const config::Pipeline& pipeline,
                                            const std::string& feature) {
  const auto [field, specs] = pipeline_features(registry, pipeline);
  std::string known;
  for (const FeatureSpec& spec : specs) {
    if (spec.name != feature) {
      known += (known.empty() ? "" : ", ") + spec.name;
      continue;
    }
    check_closed(field, feature, spec.shape);
    return spec.shape;
  }
  throw ConfigError(field + ": the reader and its preprocessing give no '" + feature +
                    "' (they give: " + known + "); the ONNX export feeds the model that feature");
}

std::vector<OnnxInput> pipeline_onnx_inputs(const PluginRegistry& registry,
                                            const config::Pipeline& pipeline,
                                            const std::vector<int64_t>& image_shape) {
  const auto [field, specs] = pipeline_features(registry, pipeline);
  std::vector<OnnxInput> inputs;
  int64_t max_frames = 1;
  for (const FeatureSpec& spec : specs) {
    if (spec.name == "labels") continue;  // as to_device: the batch's labels, not a feature
    OnnxInput input{spec.name, spec.dtype, spec.shape, 0.0};
    if (spec.name == "image") {  // fed as the preprocessing gives it, f32
      input.dtype = DType::kF32;
      if (!image_shape.empty()) input.example_shape = image_shape;
    }
    check_closed(field, spec.name, input.example_shape);
    if (spec.name == "features" && spec.shape.size() == 2) max_frames = spec.shape[0];
    inputs.push_back(std::move(input));
  }
  // Every frame valid in the capture, so that every step of a recurrent layer is in the graph.
  for (OnnxInput& input : inputs) {
    if (input.name == "num_frames") input.capture_value = static_cast<double>(max_frames);
  }
  if (inputs.empty()) {
    throw ConfigError(field +
                      ": the reader and its preprocessing give no feature but labels; "
                      "the ONNX export feeds the model the batch's features");
  }
  return inputs;
}

namespace {

void export_detection_onnx(const PluginRegistry& registry, const config::Pipeline& pipeline,
                           const std::string& prefix, const std::string& output_path, int opset,
                           std::ostream& log, std::vector<int64_t> image_shape) {
  const std::string model_name = model_class(registry, pipeline);
  // The graph takes images of any size and resizes them as the API's graph does: to the
  // fixed_shape_resizer's size, or as keep_aspect_ratio_resizer's resize_to_range (padded to
  // max_dimension, the model captured with a fixed_shape_resizer of that size); with
  // --image_shape it takes images of that size and does not resize.
  const std::optional<DetectionResizeToRange> resize_to_range =
      keep_aspect_ratio_resize(pipeline, "ONNX export", model_name);
  const bool resized = image_shape.empty();
  if (resize_to_range && !resized) {
    throw ConfigError("ONNX export of " + model_name +
                      ": --image_shape is not taken with keep_aspect_ratio_resizer; the graph "
                      "takes images of any size and resizes them as resize_to_range does");
  }
  config::Pipeline capture_pipeline = pipeline;
  if (resized) {
    std::tie(capture_pipeline, image_shape) =
        detection_capture_pipeline(pipeline, resize_to_range, "ONNX export", model_name);
  }
  std::shared_ptr<Backend> backend = make_backend(registry, pipeline);
  std::shared_ptr<DetectionModel> model = create_plugin<DetectionModel>(
      registry, ClassKind::kDetectionModel, model_name,
      capture_pipeline.has_model() ? &capture_pipeline.model() : nullptr, "model");
  RestoredVariables variables(*backend, pipeline, prefix);
  OnnxExportOptions options;
  options.opset = opset;
  options.model_name = model_name;
  options.resize_images = resized;
  options.resize_to_range = resize_to_range;
  const std::string bytes = detection_onnx_model_bytes(*model, variables.ctx, image_shape, options);
  write_file_atomically(output_path, bytes);
  onnx::ModelProto written;
  written.ParseFromString(bytes);
  std::string outputs;
  for (const onnx::ValueInfoProto& o : written.graph().output()) {
    outputs += (outputs.empty() ? "" : ", ") + o.name();
    if (o.name() == "detection_masks") {
      std::vector<int64_t> dims;
      for (const auto& d : o.type().tensor_type().shape().dim()) dims.push_back(d.dim_value());
      outputs += " [N, M, " + std::to_string(dims.at(2)) + ", " + std::to_string(dims.at(3)) + "]";
    }
  }
  log << "exported " << model_name << " from " << prefix << " to " << output_path << " (ONNX opset "
      << opset << ", input image_tensor u8 "
      << (!resized ? "[N, " + shape_text(image_shape).substr(1)
          : resize_to_range
              ? "[N, H, W, 3], resized to range " + std::to_string(resize_to_range->min_dimension) +
                    " .. " + std::to_string(resize_to_range->max_dimension) + " and padded to " +
                    std::to_string(image_shape[0]) + " x " + std::to_string(image_shape[1])
              : "[N, H, W, 3], resized to " + std::to_string(image_shape[0]) + " x " +
                    std::to_string(image_shape[1]))
      << ", outputs " << outputs << "; " << bytes.size() << " bytes)\n";
}

}  // namespace

void export_onnx(const PluginRegistry& registry, const config::Pipeline& pipeline,
                 const std::string& checkpoint_prefix, const std::string& output_path, int opset,
                 std::ostream& log, const std::vector<int64_t>& image_shape) {
  check_opset(opset);
  if (output_path.empty()) throw ConfigError("ONNX export: no output file given");
  const std::string prefix = checkpoint_or_latest(pipeline, checkpoint_prefix);
  const std::string model_name = model_class(registry, pipeline);
  if (model_kind(registry, model_name) == ClassKind::kDetectionModel) {
    return export_detection_onnx(registry, pipeline, prefix, output_path, opset, log, image_shape);
  }
  const export_internal::RestoredBaseModel restored(registry, pipeline, prefix, model_name,
                                                    image_shape);
  const std::vector<OnnxInput>& inputs = restored.inputs;
  OnnxExportOptions options;
  options.opset = opset;
  options.model_name = model_name;
  options.inputs = inputs;
  options.output_name = restored.output_name;
  options.prepare_batch = restored.prepare_batch();
  const std::string bytes = onnx_model_bytes(*restored.model, restored.variables->ctx, options);

  // The log names the inputs that stayed in the graph.
  onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes)) throw Error("ONNX export: cannot read back the model");
  std::string described;
  for (const onnx::ValueInfoProto& info : proto.graph().input()) {
    for (const OnnxInput& input : inputs) {
      if (input.name != info.name()) continue;
      described +=
          (described.empty() ? "" : ", ") + input.name + " " + dtype_name(input.dtype) + " [N" +
          (input.example_shape.empty() ? "]" : ", " + shape_text(input.example_shape).substr(1));
    }
  }
  write_file_atomically(output_path, bytes);
  log << "exported " << model_name << " from " << prefix << " to " << output_path << " (ONNX opset "
      << opset << ", inputs " << described << ", output " << options.output_name << " [N, "
      << pipeline.num_classes() << "], " << bytes.size() << " bytes)\n";
}

}  // namespace trainyard
