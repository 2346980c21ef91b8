#include "trainyard/core/saved_model_export.h"

#include <filesystem>
#include <memory>
#include <set>
#include <utility>

#include "engine/model_context.h"
#include "formats/tf_graph.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/atomic_file.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/graph_capture.h"
#include "trainyard/core/onnx_export.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using namespace tf_internal;
using tf::NodeDef;

// Passes every call on to `inner` and remembers the variables the model read, by name.
class RecordingContext final : public ModelContext {
 public:
  explicit RecordingContext(ModelContext& inner) : inner_(inner) {}
  Backend& backend() override { return inner_.backend(); }
  int64_t num_classes() const override { return inner_.num_classes(); }
  uint64_t seed() const override { return inner_.seed(); }
  Variable& variable(const VariableSpec& spec) override {
    Variable& v = inner_.variable(spec);
    if (seen_.insert(v.name()).second) variables_.emplace_back(v.name(), v.value());
    return v;
  }
  const std::vector<std::pair<std::string, Tensor>>& variables() const { return variables_; }

 private:
  ModelContext& inner_;
  std::set<std::string> seen_;
  std::vector<std::pair<std::string, Tensor>> variables_;
};

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(dims[i]);
  }
  return text + "]";
}

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

  std::vector<int64_t> image_dims = dims;
  image_dims[0] = -1;
  tf::SignatureDef signature;
  signature.set_method_name(kPredictMethodName);
  (*signature.mutable_inputs())[options.input_feature] =
      tensor_info(options.input_feature + ":0", tf::DT_FLOAT, image_dims);
  (*signature.mutable_outputs())["probabilities"] =
      tensor_info("probabilities:0", tf::DT_FLOAT, {-1, predictions.shape()[1]});
  (*signature.mutable_outputs())["classes"] = tensor_info("classes:0", tf::DT_INT64, {-1});
  (*meta->mutable_signature_def())[kServingDefaultSignature] = signature;
  (*meta->mutable_signature_def())[kPredictMethodName] = signature;

  SavedModelContents contents;
  contents.saved_model_pb = saved.SerializeAsString();
  contents.variables = std::move(graph.variables);
  return contents;
}

void write_saved_model(const SavedModelContents& contents, const std::string& export_dir) {
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
  std::error_code error;
  fs::create_directories(staging / "variables", error);
  if (error) {
    throw Error("SavedModel export: cannot create " + (staging / "variables").string() + ": " +
                error.message());
  }
  write_file_atomically((staging / "saved_model.pb").string(), contents.saved_model_pb);
  write_checkpoint((staging / "variables" / "variables").string(), contents.variables);
  publish_directory(staging.string(), target.string());
  cleanup.published = true;
}

void export_saved_model(const PluginRegistry& registry, const config::Pipeline& pipeline,
                        const std::string& checkpoint_prefix, const std::string& export_dir,
                        std::ostream& log, const std::vector<int64_t>& image_shape) {
  if (export_dir.empty()) throw ConfigError("SavedModel export: no export directory given");
  const std::vector<int64_t> shape =
      image_shape.empty() ? pipeline_feature_shape(registry, pipeline, "image") : image_shape;
  const std::string prefix = checkpoint_or_latest(pipeline, checkpoint_prefix);
  const std::string model_name = model_class(registry, pipeline);
  std::shared_ptr<Backend> backend = make_backend(registry, pipeline);
  if (model_kind(registry, model_name) == ClassKind::kDetectionModel) {
    throw Unimplemented("SavedModel export of detection models (" + model_name +
                        ") is not supported yet: the SavedModel export takes image classifiers "
                        "(models of kind model)");
  }
  std::shared_ptr<BaseModel> model =
      create_plugin<BaseModel>(registry, ClassKind::kModel, model_name,
                               pipeline.has_model() ? &pipeline.model() : nullptr, "model");
  CheckpointReader restore(prefix);
  VariableStore store(*backend, 0);
  StoreContext ctx(*backend, store, pipeline.num_classes(), 0, &restore);
  ctx.set_use_averages(pipeline.eval_config().use_moving_averages() ||
                       pipeline.train_config().use_moving_average());
  SavedModelExportOptions options;
  options.model_name = model_name;
  const SavedModelContents contents = saved_model_contents(*model, ctx, shape, options);
  write_saved_model(contents, export_dir);
  log << "exported " << model_name << " from " << prefix << " to " << export_dir
      << " (SavedModel, tag serve, signature serving_default: image [-1, "
      << shape_text(shape).substr(1) << " -> probabilities, classes; " << contents.variables.size()
      << " variables)\n";
}

}  // namespace trainyard
