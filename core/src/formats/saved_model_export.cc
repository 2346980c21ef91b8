#include "trainyard/core/saved_model_export.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "engine/model_context.h"
#include "formats/example_serving_graph.h"
#include "formats/export_recording.h"
#include "formats/tf_graph.h"
#include "formats/tf_graph_detection.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/atomic_file.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/config.h"
#include "trainyard/core/graph_capture.h"
#include "trainyard/core/onnx_export.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/task.h"
#include "trainyard/user_file.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using namespace tf_internal;
using tf::NodeDef;

using export_internal::detection_capture_pipeline;
using export_internal::fixed_resizer_shape;
using export_internal::keep_aspect_ratio_resize;
using export_internal::RecordingContext;
using export_internal::RestoredVariables;
using export_internal::shape_text;

tf::TensorInfo tensor_info(const std::string& name, tf::DataType dtype,
                           const std::vector<int64_t>& dims) {
  tf::TensorInfo info;
  info.set_name(name);
  info.set_dtype(dtype);
  for (int64_t d : dims) info.mutable_tensor_shape()->add_dim()->set_size(d);
  return info;
}

// tf.compat.v1.train.Saver's graph (format V2, not sharded) for `variables`, which must be
// VariableV2 nodes of `graph` named by their names.
tf::SaverDef add_saver(tf::GraphDef& graph,
                       const std::vector<std::pair<std::string, Tensor>>& variables) {
  std::vector<std::string> names;
  std::vector<tf::DataType> dtypes;
  for (const auto& [name, value] : variables) {
    names.push_back(name);
    dtypes.push_back(tf_dtype(value.dtype()));
  }
  const std::vector<int64_t> count{static_cast<int64_t>(names.size())};
  const std::vector<std::string> whole(names.size(), "");  // no slices

  add_string_const(graph, "save/filename/input", {"model"}, {});
  NodeDef* filename =
      add_node(graph, "save/filename", "PlaceholderWithDefault", {"save/filename/input"});
  set_type(filename, "dtype", tf::DT_STRING);
  set_shape(filename, "shape", {});
  NodeDef* prefix = add_node(graph, "save/Const", "PlaceholderWithDefault", {"save/filename"});
  set_type(prefix, "dtype", tf::DT_STRING);
  set_shape(prefix, "shape", {});

  add_string_const(graph, "save/SaveV2/tensor_names", names, count);
  add_string_const(graph, "save/SaveV2/shape_and_slices", whole, count);
  std::vector<std::string> save_inputs{"save/Const", "save/SaveV2/tensor_names",
                                       "save/SaveV2/shape_and_slices"};
  for (const std::string& name : names) save_inputs.push_back(name);
  NodeDef* save = add_node(graph, "save/SaveV2", "SaveV2", save_inputs);
  set_types(save, "dtypes", dtypes);
  NodeDef* done =
      add_node(graph, "save/control_dependency", "Identity", {"save/Const", "^save/SaveV2"});
  set_type(done, "T", tf::DT_STRING);

  add_string_const(graph, "save/RestoreV2/tensor_names", names, count);
  add_string_const(graph, "save/RestoreV2/shape_and_slices", whole, count);
  NodeDef* restore =
      add_node(graph, "save/RestoreV2", "RestoreV2",
               {"save/Const", "save/RestoreV2/tensor_names", "save/RestoreV2/shape_and_slices"});
  set_types(restore, "dtypes", dtypes);
  std::vector<std::string> assigns;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string assign_name = i == 0 ? "save/Assign" : "save/Assign_" + std::to_string(i);
    const std::string restored = i == 0 ? "save/RestoreV2" : "save/RestoreV2:" + std::to_string(i);
    NodeDef* assign = add_node(graph, assign_name, "Assign", {names[i], restored});
    set_type(assign, "T", dtypes[i]);
    set_bool(assign, "use_locking", true);
    set_bool(assign, "validate_shape", true);
    assigns.push_back("^" + assign_name);
  }
  add_node(graph, "save/restore_all", "NoOp", assigns);

  tf::SaverDef saver;
  saver.set_filename_tensor_name("save/Const:0");
  saver.set_save_tensor_name("save/control_dependency:0");
  saver.set_restore_op_name("save/restore_all");
  saver.set_max_to_keep(5);
  saver.set_sharded(false);
  saver.set_keep_checkpoint_every_n_hours(10000.0f);
  saver.set_version(tf::SaverDef::V2);
  return saver;
}

// The SavedModel of `graph`: one MetaGraphDef, tag serve, the Saver of its variables and the
// signatures.
SavedModelContents saved_model_of(
    Graph graph, const SavedModelExportOptions& options,
    const std::vector<std::pair<std::string, tf::SignatureDef>>& signatures) {
  if (graph.variables.empty()) {
    throw InvalidArgument("SavedModel export of " + options.model_name +
                          ": the model reads no variables");
  }
  tf::SavedModel saved;
  saved.set_saved_model_schema_version(1);
  tf::MetaGraphDef* meta = saved.add_meta_graphs();
  tf::MetaGraphDef::MetaInfoDef* info = meta->mutable_meta_info_def();
  info->add_tags(kSavedModelServeTag);
  info->set_stripped_default_attrs(true);  // attributes at their defaults are left out
  *meta->mutable_saver_def() = add_saver(graph.graph, graph.variables);
  *meta->mutable_graph_def() = std::move(graph.graph);
  for (const auto& [key, signature] : signatures) {
    (*meta->mutable_signature_def())[key] = signature;
  }
  SavedModelContents contents;
  contents.saved_model_pb = saved.SerializeAsString();
  contents.variables = std::move(graph.variables);
  return contents;
}

}  // namespace

SavedModelContents saved_model_contents(BaseModel& model, ModelContext& ctx,
                                        const std::vector<int64_t>& example_shape,
                                        const SavedModelExportOptions& options) {
  std::vector<int64_t> dims{1};
  for (int64_t d : example_shape) {
    if (d <= 0) {
      throw InvalidArgument("SavedModel export of " + options.model_name + ": the example shape " +
                            shape_text(example_shape) + " has a non-positive dimension");
    }
    dims.push_back(d);
  }
  NoGradScope no_grad;
  Batch batch;
  const Tensor input = ops::zeros(ctx.backend(), Shape(dims), DType::kF32);
  batch.features[options.input_feature] = input;
  RecordingContext recording(ctx);
  Graph graph;
  Tensor predictions;
  {
    GraphCapture capture;
    ModelOutput out = guard_plugin_call(
        model, "forward", [&] { return model.forward(recording, batch, Mode::kPredict); });
    predictions = out.predictions;
    if (!predictions.defined() || predictions.shape().rank() != 2 ||
        predictions.dtype() != DType::kF32) {
      throw InvalidArgument("SavedModel export of " + options.model_name +
                            ": the classifier signature needs f32 predictions [N, classes]; the "
                            "model returned " +
                            (predictions.defined() ? predictions.description() : "none"));
    }
    GraphSpec spec;
    spec.model_name = options.model_name;
    spec.inputs = {{options.input_feature, input}};
    spec.outputs = {{"probabilities", predictions}};
    spec.variables = recording.variables();
    graph = build_tf_graph(capture, spec);
  }
  // classes: the estimator walkthrough's postprocess, argmax of the probabilities (int64).
  add_int32_const(graph.graph, "classes/dimension", {1}, {});
  NodeDef* classes =
      add_node(graph.graph, "classes", "ArgMax", {"probabilities", "classes/dimension"});
  set_type(classes, "T", tf::DT_FLOAT);
  set_type(classes, "Tidx", tf::DT_INT32);
  set_type(classes, "output_type", tf::DT_INT64);
  std::vector<int64_t> image_dims = dims;
  image_dims[0] = -1;
  tf::SignatureDef signature;
  signature.set_method_name(kPredictMethodName);
  (*signature.mutable_inputs())[options.input_feature] =
      tensor_info(options.input_feature + ":0", tf::DT_FLOAT, image_dims);
  (*signature.mutable_outputs())["probabilities"] =
      tensor_info("probabilities:0", tf::DT_FLOAT, {-1, predictions.shape()[1]});
  (*signature.mutable_outputs())["classes"] = tensor_info("classes:0", tf::DT_INT64, {-1});
  // The estimator exports its PredictOutput under both keys.
  return saved_model_of(std::move(graph), options,
                        {{kServingDefaultSignature, signature}, {kPredictMethodName, signature}});
}

SavedModelContents example_saved_model_contents(BaseModel& model, ModelContext& ctx,
                                                const ExampleServingInput& input,
                                                const std::function<void(Batch&)>& prepare,
                                                const SavedModelExportOptions& options) {
  if (input.top_k <= 0) {
    throw InvalidArgument("SavedModel export of " + options.model_name + ": top_k is " +
                          std::to_string(input.top_k) + "; expected > 0");
  }
  Graph graph;
  NodeDef* examples = add_node(graph.graph, "example_bytes", "Placeholder", {});
  set_type(examples, "dtype", tf::DT_STRING);
  set_shape(examples, "shape", {-1});
  const ParsedExamples parsed = add_example_parsing(graph.graph, input, "example_bytes");

  // The capture's batch: a few zero examples, so that a reshape merging the batch with another
  // dimension is told from one that keeps it (GraphSpec::capture_batch).
  constexpr int64_t kCaptureBatch = 2;
  int64_t feature_size = 0;
  for (int64_t size : input.feature_sizes) feature_size += size;
  const Shape shape = input.frame_level ? Shape{kCaptureBatch, input.max_frames, feature_size}
                                        : Shape{kCaptureBatch, feature_size};
  NoGradScope no_grad;
  const Tensor raw = ops::zeros(ctx.backend(), shape, DType::kF32);
  Batch batch;
  batch.features["features"] = raw;
  Tensor num_frames;
  if (input.frame_level) {
    // Every frame valid: a model may refuse videos without frames.
    num_frames = Tensor::from_vector(
        ctx.backend(), Shape{kCaptureBatch},
        std::vector<int32_t>(kCaptureBatch, static_cast<int32_t>(input.max_frames)));
    batch.num_frames = num_frames;
  }
  RecordingContext recording(ctx);
  Tensor predictions;
  {
    GraphCapture capture;
    if (prepare) prepare(batch);
    ModelOutput out = guard_plugin_call(
        model, "forward", [&] { return model.forward(recording, batch, Mode::kPredict); });
    predictions = out.predictions;
    if (!predictions.defined() || predictions.shape().rank() != 2 ||
        predictions.shape()[0] != kCaptureBatch || predictions.dtype() != DType::kF32) {
      throw InvalidArgument("SavedModel export of " + options.model_name +
                            ": the starter's signature needs f32 predictions [N, classes]; the "
                            "model returned " +
                            (predictions.defined() ? predictions.description() : "none"));
    }
    GraphSpec spec;
    spec.model_name = options.model_name;
    spec.inputs = {{"model_input_raw", raw}};
    spec.input_sources["model_input_raw"] = parsed.features;
    if (input.frame_level) {
      spec.inputs.emplace_back("num_frames", num_frames);
      spec.input_sources["num_frames"] = parsed.num_frames;
    }
    spec.outputs = {{"tower/predictions", predictions}};
    spec.variables = recording.variables();
    spec.capture_batch = kCaptureBatch;
    Graph forward = build_tf_graph(capture, spec);
    for (NodeDef& node : *forward.graph.mutable_node()) *graph.graph.add_node() = std::move(node);
    *graph.graph.mutable_versions() = forward.graph.versions();
    graph.variables = std::move(forward.variables);
  }
  // export_model.py: tf.nn.top_k(predictions, _TOP_PREDICTIONS_IN_OUTPUT).
  const int64_t classes = predictions.shape()[1];
  const int64_t k = std::min<int64_t>(input.top_k, classes);
  add_int32_const(graph.graph, "tower/TopKV2/k", {k}, {});
  NodeDef* top_k =
      add_node(graph.graph, "tower/TopKV2", "TopKV2", {"tower/predictions", "tower/TopKV2/k"});
  set_type(top_k, "T", tf::DT_FLOAT);
  set_bool(top_k, "sorted", true);
  NodeDef* video_id = add_node(graph.graph, "video_id", "Identity", {parsed.video_id});
  set_type(video_id, "T", tf::DT_STRING);
  NodeDef* indexes = add_node(graph.graph, "class_indexes", "Identity", {"tower/TopKV2:1"});
  set_type(indexes, "T", tf::DT_INT32);
  NodeDef* top = add_node(graph.graph, "predictions", "Identity", {"tower/TopKV2"});
  set_type(top, "T", tf::DT_FLOAT);

  tf::SignatureDef signature;
  signature.set_method_name(kPredictMethodName);
  (*signature.mutable_inputs())["example_bytes"] =
      tensor_info("example_bytes:0", tf::DT_STRING, {-1});
  (*signature.mutable_outputs())["video_id"] = tensor_info("video_id:0", tf::DT_STRING, {-1});
  (*signature.mutable_outputs())["class_indexes"] =
      tensor_info("class_indexes:0", tf::DT_INT32, {-1, k});
  (*signature.mutable_outputs())["predictions"] =
      tensor_info("predictions:0", tf::DT_FLOAT, {-1, k});
  return saved_model_of(std::move(graph), options, {{kServingDefaultSignature, signature}});
}

namespace {

// The graph with its VariableV2 nodes replaced by Const nodes of their values (the API's
// freeze_graph), without a saver.
tf::GraphDef frozen(const Graph& graph) {
  std::map<std::string, const Tensor*> values;
  for (const auto& [name, value] : graph.variables) values[name] = &value;
  tf::GraphDef out = graph.graph;
  for (NodeDef& node : *out.mutable_node()) {
    if (node.op() != "VariableV2") continue;
    const Tensor& value = *values.at(node.name());
    node.set_op("Const");
    node.clear_attr();
    const tf::DataType dtype = tf_dtype(value.dtype());
    set_type(&node, "dtype", dtype);
    tf::TensorProto* proto = (*node.mutable_attr())["value"].mutable_tensor();
    proto->set_dtype(dtype);
    for (int64_t d : value.shape().dims()) proto->mutable_tensor_shape()->add_dim()->set_size(d);
    std::string bytes(value.size_bytes(), '\0');
    value.to_host(bytes.data(), bytes.size());
    proto->set_tensor_content(std::move(bytes));
  }
  return out;
}

// A Const node of DT_FLOAT values of shape `dims`.
std::string add_float_const(tf::GraphDef& graph, const std::string& name,
                            const std::vector<float>& values, const std::vector<int64_t>& dims) {
  NodeDef* n = add_node(graph, name, "Const", {});
  set_type(n, "dtype", tf::DT_FLOAT);
  tf::TensorProto* t = (*n->mutable_attr())["value"].mutable_tensor();
  t->set_dtype(tf::DT_FLOAT);
  for (int64_t d : dims) t->mutable_tensor_shape()->add_dim()->set_size(d);
  for (float v : values) t->add_float_val(v);
  return n->name();
}

// What the resize_to_range part of a detection graph gives (DetectionResizeToRange's comment).
struct ResizedToRange {
  std::string images;        // f32 [N, max, max, 3]: resized, zero-padded
  std::string clip_windows;  // f32 [N, 4]
  std::string size;          // i32 [2]: the resized images' height and width
};

// preprocessor.resize_to_range with pad_to_max_dimension on `images` (f32 [N, H, W, 3], all of
// one size, as the API's map_fn then sees the same size for each), and each image's clip window
// as the SSD's _compute_clip_window makes it of the true_image_shapes.
ResizedToRange add_resize_to_range(tf::GraphDef& graph, const std::string& images,
                                   const DetectionResizeToRange& r) {
  const std::string at = "Preprocessor/ResizeToRange/";
  int count = 0;
  auto node = [&](const std::string& op, std::vector<std::string> inputs, tf::DataType t) {
    NodeDef* n = add_node(graph, at + op + "_" + std::to_string(count++), op, std::move(inputs));
    if (t != tf::DT_INVALID) set_type(n, "T", t);
    return n;
  };
  auto cast = [&](const std::string& x, tf::DataType from, tf::DataType to) {
    NodeDef* n = node("Cast", {x}, tf::DT_INVALID);
    set_type(n, "SrcT", from);
    set_type(n, "DstT", to);
    set_bool(n, "Truncate", false);
    return n->name();
  };
  auto ints = [&](const std::vector<int64_t>& values, const std::vector<int64_t>& dims) {
    return add_int32_const(graph, at + "Const_" + std::to_string(count++), values, dims)->name();
  };
  auto floats = [&](const std::vector<float>& values, const std::vector<int64_t>& dims) {
    return add_float_const(graph, at + "Const_" + std::to_string(count++), values, dims);
  };
  auto binary = [&](const std::string& op, const std::string& a, const std::string& b,
                    tf::DataType t) {
    return node(op, {a, b}, t)->name();
  };
  auto element = [&](const std::string& vector, int64_t k) {  // vector[k], a scalar
    NodeDef* n = node("StridedSlice", {vector, ints({k}, {1}), ints({k + 1}, {1}), ints({1}, {1})},
                      tf::DT_INT32);
    set_type(n, "Index", tf::DT_INT32);
    set_int(n, "shrink_axis_mask", 1);
    return n->name();
  };
  auto pack = [&](const std::vector<std::string>& values, tf::DataType t) {
    NodeDef* n = node("Pack", values, t);
    set_int(n, "N", static_cast<int64_t>(values.size()));
    set_int(n, "axis", 0);
    return n->name();
  };
  NodeDef* shape = node("Shape", {images}, tf::DT_FLOAT);
  set_type(shape, "out_type", tf::DT_INT32);
  const std::string batch = element(shape->name(), 0);
  // _compute_new_dynamic_size: tf.to_float of the sides, the factors and products in f32,
  // tf.to_int32(tf.round(...)), tf.cond(tf.to_float(tf.reduce_max(large_size)) > max_dimension).
  const std::string height = cast(element(shape->name(), 1), tf::DT_INT32, tf::DT_FLOAT);
  const std::string width = cast(element(shape->name(), 2), tf::DT_INT32, tf::DT_FLOAT);
  auto size_for = [&](const std::string& factor) {
    std::vector<std::string> sides;
    for (const std::string& side : {height, width}) {
      sides.push_back(
          cast(node("Round", {binary("Mul", side, factor, tf::DT_FLOAT)}, tf::DT_FLOAT)->name(),
               tf::DT_FLOAT, tf::DT_INT32));
    }
    return pack(sides, tf::DT_INT32);
  };
  const std::string max_dimension = floats({static_cast<float>(r.max_dimension)}, {});
  const std::string large =
      size_for(binary("RealDiv", floats({static_cast<float>(r.min_dimension)}, {}),
                      binary("Minimum", height, width, tf::DT_FLOAT), tf::DT_FLOAT));
  const std::string small = size_for(binary(
      "RealDiv", max_dimension, binary("Maximum", height, width, tf::DT_FLOAT), tf::DT_FLOAT));
  NodeDef* longest = node("Max", {large, ints({0}, {1})}, tf::DT_INT32);
  set_type(longest, "Tidx", tf::DT_INT32);
  set_bool(longest, "keep_dims", false);
  const std::string too_large = binary("Greater", cast(longest->name(), tf::DT_INT32, tf::DT_FLOAT),
                                       max_dimension, tf::DT_FLOAT);
  ResizedToRange out;
  out.size = node("SelectV2", {too_large, small, large}, tf::DT_INT32)->name();
  NodeDef* resize = node("ResizeBilinear", {images, out.size}, tf::DT_FLOAT);
  set_bool(resize, "align_corners", false);
  set_bool(resize, "half_pixel_centers", false);
  // pad_to_bounding_box(image, 0, 0, max_dimension, max_dimension): zeros below and right.
  const std::string new_height = element(out.size, 0);
  const std::string new_width = element(out.size, 1);
  const std::string max_int = ints({r.max_dimension}, {});
  const std::string zero = ints({0}, {});
  NodeDef* paddings =
      node("Reshape",
           {pack({zero, zero, zero, binary("Sub", max_int, new_height, tf::DT_INT32), zero,
                  binary("Sub", max_int, new_width, tf::DT_INT32), zero, zero},
                 tf::DT_INT32),
            ints({4, 2}, {2})},
           tf::DT_INT32);
  set_type(paddings, "Tshape", tf::DT_INT32);
  NodeDef* pad = node("Pad", {resize->name(), paddings->name()}, tf::DT_FLOAT);
  set_type(pad, "Tpaddings", tf::DT_INT32);
  out.images = pad->name();
  // _compute_clip_window: [0, 0, true height / padded height, true width / padded width] in f32,
  // the same for every image of the batch.
  const std::string f_zero = floats({0.0f}, {});
  const std::string window = pack(
      {f_zero, f_zero,
       binary("RealDiv", cast(new_height, tf::DT_INT32, tf::DT_FLOAT), max_dimension, tf::DT_FLOAT),
       binary("RealDiv", cast(new_width, tf::DT_INT32, tf::DT_FLOAT), max_dimension, tf::DT_FLOAT)},
      tf::DT_FLOAT);
  NodeDef* row = node("ExpandDims", {window, ints({0}, {})}, tf::DT_FLOAT);
  set_type(row, "Tdim", tf::DT_INT32);
  NodeDef* tile =
      node("Tile", {row->name(), pack({batch, ints({1}, {})}, tf::DT_INT32)}, tf::DT_FLOAT);
  set_type(tile, "Tmultiples", tf::DT_INT32);
  out.clip_windows = tile->name();
  return out;
}

// exporter.py's input placeholder: image_tensor (uint8 [N, H, W, 3]), or serialized tf.Example
// protos or encoded images decoded to it. Returns the decoded images' node and the DT_STRING
// input's name ("" for image_tensor).
std::pair<std::string, std::string> add_detection_input(tf::GraphDef& graph,
                                                        DetectionInputType input_type) {
  if (input_type == DetectionInputType::kImageTensor) {
    NodeDef* input = add_node(graph, "image_tensor", "Placeholder", {});
    set_type(input, "dtype", tf::DT_UINT8);
    set_shape(input, "shape", {-1, -1, -1, 3});
    return {"image_tensor", ""};
  }
  const bool example = input_type == DetectionInputType::kTfExample;
  const std::string input_name = example ? "tf_example" : "encoded_image_string_tensor";
  NodeDef* input = add_node(graph, input_name, "Placeholder", {});
  set_type(input, "dtype", tf::DT_STRING);
  set_shape(input, "shape", {-1});
  return {add_image_decoding(
              graph, example ? add_tf_example_parsing(graph, input->name()) : input->name()),
          input_name};
}

// The model's image resize of the "ToFloat" images: resize_to_range's (with the NMS clip
// windows) or the fixed_shape_resizer's (tf.image.resize_images, bilinear, align_corners false).
// Returns {the resized images' node (f32 [N, image_shape[0], image_shape[1], 3]), the clip
// windows' node or ""}.
std::pair<std::string, std::string> add_detection_resize(
    tf::GraphDef& graph, const std::vector<int64_t>& image_shape,
    const std::optional<DetectionResizeToRange>& resize_to_range, const std::string& model_name) {
  if (resize_to_range) {
    const DetectionResizeToRange& r = *resize_to_range;
    if (r.min_dimension < 1 || r.max_dimension < r.min_dimension ||
        image_shape[0] != r.max_dimension || image_shape[1] != r.max_dimension) {
      throw InvalidArgument("SavedModel export of " + model_name +
                            ": resize_to_range min_dimension " + std::to_string(r.min_dimension) +
                            ", max_dimension " + std::to_string(r.max_dimension) +
                            " with the image shape " + shape_text(image_shape) +
                            "; expected 1 <= min_dimension <= max_dimension and [max_dimension, "
                            "max_dimension, 3]");
    }
    const ResizedToRange out = add_resize_to_range(graph, "ToFloat", r);
    return {out.images, out.clip_windows};
  }
  add_int32_const(graph, "Preprocessor/ResizeImage/size", {image_shape[0], image_shape[1]}, {2});
  NodeDef* resize = add_node(graph, "Preprocessor/ResizeImage/ResizeBilinear", "ResizeBilinear",
                             {"ToFloat", "Preprocessor/ResizeImage/size"});
  set_type(resize, "T", tf::DT_FLOAT);
  set_bool(resize, "align_corners", false);
  set_bool(resize, "half_pixel_centers", false);
  return {resize->name(), ""};
}

// What the detection graph's outputs hold: max_detections, and the masks' [height, width] of a
// model that predicts instance masks (empty otherwise).
struct DetectionOutputShapes {
  int64_t max_detections = 0;
  std::vector<int64_t> mask_size;
};

// The model's preprocess, predict and postprocess (exporter.py's _build_detection_graph),
// captured on zero images and appended to `graph`, reading the `resized` images and clipping NMS
// to `clip_windows` (none when "").
DetectionOutputShapes add_detection_forward(Graph& graph, DetectionModel& model, ModelContext& ctx,
                                            const std::vector<int64_t>& image_shape,
                                            const std::string& resized,
                                            const std::string& clip_windows,
                                            const std::string& model_name) {
  // The capture's batch: 2 zero images, so that a reshape merging the batch with the anchors is
  // told from one that keeps it (GraphSpec::capture_batch).
  constexpr int64_t kCaptureBatch = 2;
  NoGradScope no_grad;
  const Tensor images = ops::zeros(
      ctx.backend(), Shape{kCaptureBatch, image_shape[0], image_shape[1], 3}, DType::kF32);
  RecordingContext recording(ctx);
  GraphCapture capture;
  const export_internal::DetectorRun run =
      export_internal::run_detector(model, recording, images, "SavedModel export of " + model_name);
  auto entry = [&](const char* name) -> const Tensor& { return run.entry(name); };
  const Tensor& boxes = entry("detection_boxes");
  if (boxes.shape().rank() != 3 || boxes.shape()[0] != kCaptureBatch) {
    throw InvalidArgument("SavedModel export of " + model_name + ": detection_boxes is " +
                          boxes.description() + "; expected [batch, max_detections, 4]");
  }
  GraphSpec spec;
  spec.model_name = model_name;
  spec.inputs = {{"Preprocessor/resized", images}};
  spec.input_sources["Preprocessor/resized"] = resized;
  spec.nms_clip_windows = clip_windows;
  // exporter.py's add_output_tensor_nodes: classes + label_id_offset (1), num_detections f32.
  spec.outputs = {{"detection_boxes", boxes},
                  {"detection_scores", entry("detection_scores")},
                  {"detection_classes", ops::add(entry("detection_classes"), 1.0)},
                  {"num_detections", ops::cast(entry("num_detections"), DType::kF32)}};
  DetectionOutputShapes shapes{boxes.shape()[1], {}};
  if (run.detections.count("detection_masks") != 0) {
    // exporter.py's detection_masks: [N, M, mask_height, mask_width] in each box's frame.
    const Tensor& masks = entry("detection_masks");
    if (masks.shape().rank() != 4 || masks.shape()[1] != shapes.max_detections) {
      throw InvalidArgument("SavedModel export of " + model_name + ": detection_masks is " +
                            masks.description() + "; expected [batch, " +
                            std::to_string(shapes.max_detections) + ", height, width]");
    }
    spec.outputs.push_back({"detection_masks", masks});
    shapes.mask_size = {masks.shape()[2], masks.shape()[3]};
  }
  spec.variables = recording.variables();
  spec.capture_batch = kCaptureBatch;
  refuse_host_reads(capture, spec.inputs, model_name);
  Graph forward = build_tf_graph(capture, spec);
  for (NodeDef& node : *forward.graph.mutable_node()) *graph.graph.add_node() = std::move(node);
  for (tf::FunctionDef& f : *forward.graph.mutable_library()->mutable_function()) {
    *graph.graph.mutable_library()->add_function() = std::move(f);
  }
  *graph.graph.mutable_versions() = forward.graph.versions();
  graph.variables = std::move(forward.variables);
  return shapes;
}

// serving_default: the input as exporter.py names it "inputs", the four detection outputs (and
// detection_masks).
tf::SignatureDef detection_signature(const std::string& input_name,
                                     const DetectionOutputShapes& shapes) {
  const int64_t max_detections = shapes.max_detections;
  tf::SignatureDef signature;
  signature.set_method_name(kPredictMethodName);
  (*signature.mutable_inputs())["inputs"] =
      !input_name.empty() ? tensor_info(input_name + ":0", tf::DT_STRING, {-1})
                          : tensor_info("image_tensor:0", tf::DT_UINT8, {-1, -1, -1, 3});
  auto& outputs = *signature.mutable_outputs();
  outputs["detection_boxes"] =
      tensor_info("detection_boxes:0", tf::DT_FLOAT, {-1, max_detections, 4});
  outputs["detection_scores"] =
      tensor_info("detection_scores:0", tf::DT_FLOAT, {-1, max_detections});
  outputs["detection_classes"] =
      tensor_info("detection_classes:0", tf::DT_FLOAT, {-1, max_detections});
  outputs["num_detections"] = tensor_info("num_detections:0", tf::DT_FLOAT, {-1});
  if (!shapes.mask_size.empty()) {
    outputs["detection_masks"] =
        tensor_info("detection_masks:0", tf::DT_FLOAT,
                    {-1, max_detections, shapes.mask_size[0], shapes.mask_size[1]});
  }
  return signature;
}

}  // namespace

DetectionSavedModel detection_saved_model_contents(
    DetectionModel& model, ModelContext& ctx, const std::vector<int64_t>& image_shape,
    const SavedModelExportOptions& options, DetectionInputType input_type,
    const std::optional<DetectionResizeToRange>& resize_to_range) {
  if (image_shape.size() != 3 || image_shape[2] != 3 || image_shape[0] <= 0 ||
      image_shape[1] <= 0) {
    throw InvalidArgument("SavedModel export of " + options.model_name + ": the image shape " +
                          shape_text(image_shape) + " is not [H, W, 3] of positive sizes");
  }
  // exporter.py's input, cast to f32 (ToFloat), resized as the model's image resizer does.
  Graph graph;
  const auto [image_tensor, input_name] = add_detection_input(graph.graph, input_type);
  NodeDef* to_float = add_node(graph.graph, "ToFloat", "Cast", {image_tensor});
  set_type(to_float, "SrcT", tf::DT_UINT8);
  set_type(to_float, "DstT", tf::DT_FLOAT);
  set_bool(to_float, "Truncate", false);
  const auto [resized, clip_windows] =
      add_detection_resize(graph.graph, image_shape, resize_to_range, options.model_name);
  const DetectionOutputShapes shapes = add_detection_forward(
      graph, model, ctx, image_shape, resized, clip_windows, options.model_name);
  const tf::SignatureDef signature = detection_signature(input_name, shapes);
  DetectionSavedModel result;
  result.mask_size = shapes.mask_size;
  result.frozen_graph_pb = frozen(graph).SerializeAsString();
  result.saved_model =
      saved_model_of(std::move(graph), options, {{kServingDefaultSignature, signature}});
  return result;
}

void write_saved_model_files(const SavedModelContents& contents, const std::string& dir) {
  const fs::path root(dir);
  std::error_code error;
  fs::create_directories(root / "variables", error);
  if (error) {
    throw Error("SavedModel export: cannot create " + (root / "variables").string() + ": " +
                error.message());
  }
  write_file_atomically((root / "saved_model.pb").string(), contents.saved_model_pb);
  write_checkpoint((root / "variables" / "variables").string(), contents.variables);
  for (const auto& [name, text] : contents.extra_assets) {
    const fs::path file = root / kSavedModelExtraDir / name;
    fs::create_directories(file.parent_path(), error);
    if (error) {
      throw Error("SavedModel export: cannot create " + file.parent_path().string() + ": " +
                  error.message());
    }
    write_file_atomically(file.string(), text);
  }
}

namespace {

// Writes what `fill` puts into a staging sibling of export_dir, then renames it into place.
void publish_export(const std::string& export_dir,
                    const std::function<void(const fs::path&)>& fill) {
  fs::path target(export_dir);
  if (target.filename().empty()) target = target.parent_path();  // "dir/" names "dir"
  if (target.empty()) throw ConfigError("SavedModel export: no export directory given");
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  remove_dead_staging(target.string());
  const fs::path staging = staging_sibling(target.string());
  struct RemoveUnlessPublished {
    const fs::path& dir;
    bool published = false;
    ~RemoveUnlessPublished() {
      std::error_code ignored;
      if (!published) fs::remove_all(dir, ignored);
    }
  } cleanup{staging};
  fs::create_directories(staging);
  fill(staging);
  publish_directory(staging.string(), target.string());
  cleanup.published = true;
}

}  // namespace

void write_saved_model(const SavedModelContents& contents, const std::string& export_dir) {
  publish_export(export_dir, [&](const fs::path& staging) {
    write_saved_model_files(contents, staging.string());
  });
}

namespace {

// What assets.extra carries for Trainyard (kSavedModelPipelineAsset's comment): the pipeline and
// the files its readers' "*_path" options name.
std::vector<std::pair<std::string, std::string>> trainyard_assets(
    const config::Pipeline& pipeline) {
  std::vector<std::pair<std::string, std::string>> assets{
      {kSavedModelPipelineAsset, pipeline_config_to_text(pipeline, /*with_defaults=*/true)}};
  auto copy_files = [&](const config::InputReader& input, const std::string& field) {
    for (const config::Param& param : input.reader().params()) {
      const std::string& key = param.key();
      if (!param.has_string_value() || param.string_value().empty() ||
          !names_saved_model_asset(key)) {
        continue;
      }
      assets.emplace_back(
          saved_model_asset_path(field, key),
          read_user_file(param.string_value(), field + ".reader." + key, kMaxSavedModelAssetBytes));
    }
  };
  if (pipeline.has_train_input_reader()) {
    copy_files(pipeline.train_input_reader(), "train_input_reader");
  }
  if (pipeline.has_eval_input_reader())
    copy_files(pipeline.eval_input_reader(), "eval_input_reader");
  return assets;
}

// The serving input of a reader that parses serialized examples by a layout (the options
// export_saved_model's header names), or nothing.
std::optional<ExampleServingInput> example_serving_input(const PluginRegistry& registry,
                                                         const config::Pipeline& pipeline) {
  const bool eval = pipeline.has_eval_input_reader();
  const config::InputReader& input =
      eval ? pipeline.eval_input_reader() : pipeline.train_input_reader();
  const char* where = eval ? "eval_input_reader" : "train_input_reader";
  const std::string name = reader_class(registry, pipeline, input);
  const ClassInfo& info = registry.find(ClassKind::kReader, name);
  std::set<std::string> declared;
  for (const auto& option : registry.describe(info).options) declared.insert(option.name);
  for (const char* key : {"feature_names", "feature_sizes", "id_key"}) {
    if (!declared.count(key)) return std::nullopt;
  }
  Options options = registry.resolve_options(info, plugin_params(input.reader(), where));
  ExampleServingInput serving;
  serving.feature_names = options.get_string_list("feature_names");
  serving.feature_sizes = options.get_int_list("feature_sizes");
  serving.id_key = options.get_string("id_key");
  serving.frame_level = declared.count("max_frames") > 0;
  if (serving.frame_level) {
    for (const char* key : {"max_quantized_value", "min_quantized_value"}) {
      if (!declared.count(key)) {
        throw Unimplemented("SavedModel export: the reader " + name +
                            " reads frames (max_frames) but declares no " + key +
                            "; the serving graph dequantizes the frames with the reader's range");
      }
    }
    serving.max_frames = options.get_int("max_frames");
    serving.max_quantized_value = options.get_float("max_quantized_value");
    serving.min_quantized_value = options.get_float("min_quantized_value");
  }
  return serving;
}

}  // namespace

namespace {

// The SavedModel of the pipeline's model (export_saved_model's header has the choice of
// signature); `description` gets the log line's tail.
SavedModelContents pipeline_saved_model(const PluginRegistry& registry,
                                        const config::Pipeline& pipeline, const std::string& prefix,
                                        const std::vector<int64_t>& image_shape,
                                        std::string& description) {
  const std::optional<ExampleServingInput> examples = example_serving_input(registry, pipeline);
  const std::vector<int64_t> shape = examples || !image_shape.empty()
                                         ? image_shape
                                         : pipeline_feature_shape(registry, pipeline, "image");
  const std::string model_name = model_class(registry, pipeline);
  std::shared_ptr<Backend> backend = make_backend(registry, pipeline);
  if (model_kind(registry, model_name) == ClassKind::kDetectionModel) {
    throw Unimplemented("the SavedModel of " + model_name +
                        ", a detection model, is written by export_saved_model (the Object "
                        "Detection API's export directory), not as another export's second form");
  }
  std::shared_ptr<BaseModel> model =
      create_plugin<BaseModel>(registry, ClassKind::kModel, model_name,
                               pipeline.has_model() ? &pipeline.model() : nullptr, "model");
  RestoredVariables variables(*backend, pipeline, prefix);
  SavedModelExportOptions options;
  options.model_name = model_name;
  SavedModelContents contents;
  if (examples) {
    const std::shared_ptr<const Task> task = task_of(registry, pipeline);
    contents = example_saved_model_contents(
        *model, variables.ctx, *examples, [&](Batch& batch) { task->prepare_batch(batch); },
        options);
    description = std::string("example_bytes (") +
                  (examples->frame_level ? "tf.SequenceExample" : "tf.Example") +
                  ") -> video_id, class_indexes, predictions";
  } else {
    contents = saved_model_contents(*model, variables.ctx, shape, options);
    description = "image [-1, " + shape_text(shape).substr(1) + " -> probabilities, classes";
  }
  contents.extra_assets = trainyard_assets(pipeline);
  description = model_name + " from " + prefix + " (SavedModel, tag serve, signature " +
                "serving_default: " + description + "; " +
                std::to_string(contents.variables.size()) + " variables)";
  return contents;
}

// The Object Detection API's export directory, published whole: saved_model/,
// frozen_inference_graph.pb, model.ckpt with its checkpoint file, pipeline.config.
void write_detection_export(const std::string& export_dir, const DetectionSavedModel& contents,
                            const config::Pipeline& pipeline) {
  publish_export(export_dir, [&](const fs::path& staging) {
    write_saved_model_files(contents.saved_model, (staging / "saved_model").string());
    write_file_atomically((staging / "frozen_inference_graph.pb").string(),
                          contents.frozen_graph_pb);
    write_checkpoint((staging / "model.ckpt").string(), contents.saved_model.variables);
    write_file_atomically((staging / "checkpoint").string(),
                          "model_checkpoint_path: \"model.ckpt\"\n"
                          "all_model_checkpoint_paths: \"model.ckpt\"\n");
    write_file_atomically((staging / "pipeline.config").string(),
                          pipeline_config_to_text(pipeline, /*with_defaults=*/true));
  });
}

// export_saved_model for a detection model: the Object Detection API's export directory.
void export_detection_saved_model(const PluginRegistry& registry, const config::Pipeline& pipeline,
                                  const std::string& prefix, const std::string& export_dir,
                                  std::ostream& log, const std::vector<int64_t>& image_shape,
                                  DetectionInputType input_type) {
  const std::string model_name = model_class(registry, pipeline);
  if (!image_shape.empty()) {
    throw ConfigError(
        "--image_shape is not taken by the SavedModel export of the detection model " + model_name +
        ": its graph takes images of any size and resizes them to the "
        "fixed_shape_resizer's (or resize_to_range's)");
  }
  const std::optional<DetectionResizeToRange> resize_to_range =
      keep_aspect_ratio_resize(pipeline, "SavedModel export", model_name);
  const auto [capture_pipeline, shape] =
      detection_capture_pipeline(pipeline, resize_to_range, "SavedModel export", model_name);
  std::shared_ptr<Backend> backend = make_backend(registry, pipeline);
  std::shared_ptr<DetectionModel> model = create_plugin<DetectionModel>(
      registry, ClassKind::kDetectionModel, model_name,
      capture_pipeline.has_model() ? &capture_pipeline.model() : nullptr, "model");
  RestoredVariables variables(*backend, pipeline, prefix);
  SavedModelExportOptions options;
  options.model_name = model_name;
  DetectionSavedModel contents = detection_saved_model_contents(
      *model, variables.ctx, shape, options, input_type, resize_to_range);
  contents.saved_model.extra_assets = trainyard_assets(pipeline);
  write_detection_export(export_dir, contents, pipeline);
  log << "exported " << model_name << " from " << prefix << " to " << export_dir
      << " (the Object Detection API's export: saved_model/ with tag serve, signature "
         "serving_default: inputs ("
      << (input_type == DetectionInputType::kImageTensor ? "image_tensor u8 [-1, -1, -1, 3]"
          : input_type == DetectionInputType::kTfExample
              ? "tf_example string [-1], image/encoded parsed and decoded"
              : "encoded_image_string_tensor string [-1], decoded")
      << (resize_to_range
              ? ", resized to range " + std::to_string(resize_to_range->min_dimension) + " .. " +
                    std::to_string(resize_to_range->max_dimension) + " and padded to "
              : ", resized to ")
      << shape[0] << " x " << shape[1]
      << ") -> detection_boxes, detection_scores, detection_classes, num_detections"
      << (contents.mask_size.empty()
              ? std::string()
              : ", detection_masks [-1, M, " + std::to_string(contents.mask_size[0]) + ", " +
                    std::to_string(contents.mask_size[1]) + "]")
      << "; "
         "frozen_inference_graph.pb, model.ckpt, pipeline.config; "
      << contents.saved_model.variables.size() << " variables)\n";
}

}  // namespace

void export_saved_model(const PluginRegistry& registry, const config::Pipeline& pipeline,
                        const std::string& checkpoint_prefix, const std::string& export_dir,
                        std::ostream& log, const std::vector<int64_t>& image_shape) {
  export_saved_model(registry, pipeline, checkpoint_prefix, export_dir, log, image_shape,
                     "image_tensor");
}

void export_saved_model(const PluginRegistry& registry, const config::Pipeline& pipeline,
                        const std::string& checkpoint_prefix, const std::string& export_dir,
                        std::ostream& log, const std::vector<int64_t>& image_shape,
                        const std::string& input_type) {
  if (export_dir.empty()) throw ConfigError("SavedModel export: no export directory given");
  const bool detector =
      model_kind(registry, model_class(registry, pipeline)) == ClassKind::kDetectionModel;
  DetectionInputType type = DetectionInputType::kImageTensor;
  if (input_type == "encoded_image_string_tensor" && detector) {
    type = DetectionInputType::kEncodedImageStringTensor;
  } else if (input_type == "tf_example" && detector) {
    type = DetectionInputType::kTfExample;
  } else if (input_type != "image_tensor") {
    throw ConfigError("--input_type is '" + input_type + "'; expected image_tensor" +
                      (detector ? ", encoded_image_string_tensor or tf_example"
                                : " (the other input types are the detectors' SavedModel's)"));
  }
  const std::string prefix = checkpoint_or_latest(pipeline, checkpoint_prefix);
  if (detector) {
    return export_detection_saved_model(registry, pipeline, prefix, export_dir, log, image_shape,
                                        type);
  }
  std::string description;
  const SavedModelContents contents =
      pipeline_saved_model(registry, pipeline, prefix, image_shape, description);
  write_saved_model(contents, export_dir);
  log << "exported " << description << " to " << export_dir << "\n";
}

SavedModelContents pipeline_saved_model_contents(const PluginRegistry& registry,
                                                 const config::Pipeline& pipeline,
                                                 const std::string& checkpoint_prefix,
                                                 std::ostream& log) {
  std::string description;
  SavedModelContents contents =
      pipeline_saved_model(registry, pipeline, checkpoint_prefix, {}, description);
  log << "SavedModel of " << description << "\n";
  return contents;
}

std::optional<SavedModelContents> starter_saved_model(const PluginRegistry& registry,
                                                      const config::Pipeline& pipeline,
                                                      const std::string& checkpoint_prefix,
                                                      std::ostream& log) {
  if (!example_serving_input(registry, pipeline)) return std::nullopt;
  std::string description;
  try {
    SavedModelContents contents =
        pipeline_saved_model(registry, pipeline, checkpoint_prefix, {}, description);
    log << "SavedModel of " << description << "\n";
    return contents;
  } catch (const Error& e) {
    // The SavedModel is the export's second form: a model it cannot express (an op without a
    // TensorFlow form, a sampling model) keeps its run and Trainyard's export.
    log << "no SavedModel in this export: " << e.what() << "\n";
    return std::nullopt;
  }
}

}  // namespace trainyard
