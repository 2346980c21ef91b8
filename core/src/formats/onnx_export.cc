#include "trainyard/core/onnx_export.h"

#include <algorithm>
#include <memory>
#include <set>
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

using export_internal::fixed_resizer_shape;
using export_internal::RecordingContext;
using export_internal::RestoredVariables;
using export_internal::shape_text;

// The captured detection graph's input when the graph resizes its images (add_image_resize).
constexpr const char* kResizedImages = "Preprocessor/resized";

// Puts in front of `model`'s nodes the fixed_shape_resizer's resize: the input `image_tensor` u8
// [N, H, W, 3] of any size, cast to f32 ("ToFloat", as the API's graph) and resized to
// image_shape by Resize (linear, coordinate_transformation_mode asymmetric: sample y of the
// output reads the input at y * in / out, TensorFlow's ResizeBilinear with align_corners and
// half_pixel_centers false) on its NCHW form, giving kResizedImages, which replaces the captured
// graph's input.
void add_image_resize(onnx::ModelProto& model, const std::vector<int64_t>& image_shape) {
  onnx::GraphProto& graph = *model.mutable_graph();
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  auto node = [&](const std::string& op_type, const std::vector<std::string>& inputs,
                  const std::string& output) {
    onnx::NodeProto* n = nodes.Add();
    n->set_op_type(op_type);
    n->set_name("Preprocessor/ResizeImage/" + op_type + "_" + std::to_string(nodes.size()));
    for (const std::string& input : inputs) n->add_input(input);
    n->add_output(output.empty() ? n->name() + ":0" : output);
    return n;
  };
  auto attr = [](onnx::NodeProto* n, const char* name) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    return a;
  };
  auto ints = [](onnx::AttributeProto* a, const std::vector<int64_t>& values) {
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  };
  onnx::TensorProto* sizes_hw = graph.add_initializer();
  sizes_hw->set_name("Preprocessor/ResizeImage/size");
  sizes_hw->set_data_type(onnx::TensorProto::INT64);
  sizes_hw->add_dims(3);
  for (int64_t v : {int64_t{3}, image_shape[0], image_shape[1]}) sizes_hw->add_int64_data(v);
  onnx::TensorProto* first = graph.add_initializer();
  first->set_name("Preprocessor/ResizeImage/batch_axis");
  first->set_data_type(onnx::TensorProto::INT64);
  first->add_dims(1);
  first->add_int64_data(0);
  onnx::TensorProto* second = graph.add_initializer();
  second->set_name("Preprocessor/ResizeImage/after_batch_axis");
  second->set_data_type(onnx::TensorProto::INT64);
  second->add_dims(1);
  second->add_int64_data(1);

  onnx::NodeProto* to_float = node("Cast", {"image_tensor"}, "ToFloat");
  onnx::AttributeProto* to = attr(to_float, "to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  onnx::NodeProto* nchw = node("Transpose", {to_float->output(0)}, "");
  ints(attr(nchw, "perm"), {0, 3, 1, 2});
  onnx::NodeProto* shape = node("Shape", {"image_tensor"}, "");
  onnx::NodeProto* batch =
      node("Slice", {shape->output(0), first->name(), second->name(), first->name()}, "");
  onnx::NodeProto* sizes = node("Concat", {batch->output(0), sizes_hw->name()}, "");
  onnx::AttributeProto* axis = attr(sizes, "axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  onnx::NodeProto* resize = node("Resize", {nchw->output(0), "", "", sizes->output(0)}, "");
  for (const auto& [name, value] : {std::pair<const char*, const char*>{"mode", "linear"},
                                    {"coordinate_transformation_mode", "asymmetric"}}) {
    onnx::AttributeProto* a = attr(resize, name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
  }
  onnx::NodeProto* nhwc = node("Transpose", {resize->output(0)}, kResizedImages);
  ints(attr(nhwc, "perm"), {0, 2, 3, 1});

  for (onnx::NodeProto& n : *graph.mutable_node()) *nodes.Add() = std::move(n);
  graph.mutable_node()->Swap(&nodes);
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
  onnx::ModelProto built = onnx_internal::build_onnx_model(capture, spec);
  if (options.resize_images) add_image_resize(built, image_shape);
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
  for (const config::Param& p : pipeline.model().params()) {
    if (p.key() == "image_resizer" && p.string_value() == "keep_aspect_ratio_resizer") {
      throw Unimplemented("ONNX export of " + model_name +
                          ": model.image_resizer is keep_aspect_ratio_resizer, which resizes "
                          "each image in the model's preprocess; the ONNX graph does not hold "
                          "that resize yet: export with --format saved_model, whose graph "
                          "resizes as resize_to_range does");
    }
  }
  // With the fixed_shape_resizer's size the graph takes images of any size and resizes them, as
  // the API's graph does; with --image_shape it takes images of that size.
  const bool resized = image_shape.empty();
  if (resized) {
    image_shape =
        fixed_resizer_shape(pipeline, "ONNX export", model_name,
                            "give the image size of the graph's input with --image_shape H,W,3");
  }
  std::shared_ptr<Backend> backend = make_backend(registry, pipeline);
  std::shared_ptr<DetectionModel> model =
      create_plugin<DetectionModel>(registry, ClassKind::kDetectionModel, model_name,
                                    pipeline.has_model() ? &pipeline.model() : nullptr, "model");
  RestoredVariables variables(*backend, pipeline, prefix);
  OnnxExportOptions options;
  options.opset = opset;
  options.model_name = model_name;
  options.resize_images = resized;
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
      << (resized ? "[N, H, W, 3], resized to " + std::to_string(image_shape[0]) + " x " +
                        std::to_string(image_shape[1])
                  : "[N, " + shape_text(image_shape).substr(1))
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
