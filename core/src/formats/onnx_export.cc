#include "trainyard/core/onnx_export.h"

#include <memory>
#include <set>
#include <utility>

#include "engine/model_context.h"
#include "formats/onnx_graph.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/atomic_file.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/graph_capture.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/reader.h"
#include "trainyard/transform.h"

namespace trainyard {
namespace {

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
  check_opset(options.opset);
  std::vector<int64_t> dims{1};
  for (int64_t d : example_shape) {
    if (d <= 0) {
      throw InvalidArgument("ONNX export of " + options.model_name + ": the example shape " +
                            shape_text(example_shape) + " has a non-positive dimension");
    }
    dims.push_back(d);
  }
  NoGradScope no_grad;
  Batch batch;
  const Tensor input = ops::zeros(ctx.backend(), Shape(dims), DType::kF32);
  batch.features[options.input_feature] = input;
  RecordingContext recording(ctx);
  GraphCapture capture;
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
  spec.inputs = {{options.input_feature, input}};
  spec.outputs = {{options.output_name, out.predictions}};
  spec.variables = recording.variables();
  return onnx_internal::build_onnx_model(capture, spec).SerializeAsString();
}

std::vector<int64_t> pipeline_feature_shape(const PluginRegistry& registry,
                                            const config::Pipeline& pipeline,
                                            const std::string& feature) {
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
  std::string known;
  for (const FeatureSpec& spec : specs) {
    if (spec.name != feature) {
      known += (known.empty() ? "" : ", ") + spec.name;
      continue;
    }
    for (int64_t d : spec.shape) {
      if (d < 0) {
        throw ConfigError(field + ": '" + feature + "' is " + shape_text(spec.shape) +
                          " after the reader and its preprocessing steps, with a size left "
                          "open; crop it to a fixed size (image_classification_preprocessing) "
                          "or give the shape (--image_shape H,W,C)");
      }
    }
    return spec.shape;
  }
  throw ConfigError(field + ": the reader and its preprocessing give no '" + feature +
                    "' (they give: " + known + "); the ONNX export feeds the model that feature");
}

void export_onnx(const PluginRegistry& registry, const config::Pipeline& pipeline,
                 const std::string& checkpoint_prefix, const std::string& output_path, int opset,
                 std::ostream& log, const std::vector<int64_t>& image_shape) {
  check_opset(opset);
  if (output_path.empty()) throw ConfigError("ONNX export: no output file given");
  const std::vector<int64_t> shape =
      image_shape.empty() ? pipeline_feature_shape(registry, pipeline, "image") : image_shape;
  const std::string prefix = checkpoint_or_latest(pipeline, checkpoint_prefix);
  const std::string model_name = model_class(registry, pipeline);
  std::shared_ptr<Backend> backend = make_backend(registry, pipeline);
  if (model_kind(registry, model_name) == ClassKind::kDetectionModel) {
    throw Unimplemented(
        "ONNX export of detection models (" + model_name +
        ") is not supported: the ONNX export takes models of kind model (BaseModel)");
  }
  std::shared_ptr<BaseModel> model =
      create_plugin<BaseModel>(registry, ClassKind::kModel, model_name,
                               pipeline.has_model() ? &pipeline.model() : nullptr, "model");
  CheckpointReader restore(prefix);
  VariableStore store(*backend, 0);
  StoreContext ctx(*backend, store, pipeline.num_classes(), 0, &restore);
  ctx.set_use_averages(pipeline.eval_config().use_moving_averages() ||
                       pipeline.train_config().use_moving_average());
  OnnxExportOptions options;
  options.opset = opset;
  options.model_name = model_name;
  const std::string bytes = onnx_model_bytes(*model, ctx, shape, options);

  write_file_atomically(output_path, bytes);
  log << "exported " << model_name << " from " << prefix << " to " << output_path << " (ONNX opset "
      << opset << ", input image [N, " << shape_text(shape).substr(1) << ", " << bytes.size()
      << " bytes)\n";
}

}  // namespace trainyard
