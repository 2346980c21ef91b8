// What the ONNX, SavedModel and TFLite exporters share while they record a forward pass: the
// checkpoint's variables as the model asks for them, the context that remembers the variables a
// model reads, the text of a shape in their messages, a detection model's fixed input size and
// its forward as the exported graph runs it, and a base model restored for its ONNX or TFLite
// export.
// Internal to the core.
#ifndef TRAINYARD_CORE_SRC_FORMATS_EXPORT_RECORDING_H_
#define TRAINYARD_CORE_SRC_FORMATS_EXPORT_RECORDING_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/model_context.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/onnx_export.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/core/task.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"
#include "trainyard/tensor.h"

namespace trainyard::export_internal {

// The exported model's variables: each restored from the checkpoint at `prefix` when the model
// first asks `ctx` for it, its moving average where the pipeline evaluates with them (as eval
// does: eval_config.use_moving_averages or train_config.use_moving_average).
struct RestoredVariables {
  RestoredVariables(Backend& backend, const config::Pipeline& pipeline, const std::string& prefix)
      : checkpoint(prefix),
        store(backend, 0),
        ctx(backend, store, pipeline.num_classes(), 0, &checkpoint) {
    ctx.set_use_averages(pipeline.eval_config().use_moving_averages() ||
                         pipeline.train_config().use_moving_average());
  }
  RestoredVariables(const RestoredVariables&) = delete;
  RestoredVariables& operator=(const RestoredVariables&) = delete;

  CheckpointReader checkpoint;
  VariableStore store;
  StoreContext ctx;  // reads checkpoint into store
};

// A base model (not a detector) of the pipeline with its variables restored from `prefix`, and
// what the ONNX and TFLite exports feed its capture: pipeline_onnx_inputs (`image_shape` for an
// image), the output's name ("probabilities" for a model that reads an image, else
// "predictions") and the task's prepare_batch.
struct RestoredBaseModel {
  RestoredBaseModel(const PluginRegistry& registry, const config::Pipeline& pipeline,
                    const std::string& prefix, const std::string& model_name,
                    const std::vector<int64_t>& image_shape)
      : inputs(pipeline_onnx_inputs(registry, pipeline, image_shape)),
        backend(make_backend(registry, pipeline)),
        model(create_plugin<BaseModel>(registry, ClassKind::kModel, model_name,
                                       pipeline.has_model() ? &pipeline.model() : nullptr,
                                       "model")),
        task(task_of(registry, pipeline)),
        variables(std::make_unique<RestoredVariables>(*backend, pipeline, prefix)) {
    const bool image = std::any_of(inputs.begin(), inputs.end(),
                                   [](const OnnxInput& input) { return input.name == "image"; });
    output_name = image ? "probabilities" : "predictions";
  }

  std::function<void(Batch&)> prepare_batch() const {
    return [task = task](Batch& batch) {
      guard_plugin_call(*task, "prepare_batch", [&] { task->prepare_batch(batch); });
    };
  }

  std::vector<OnnxInput> inputs;
  std::shared_ptr<Backend> backend;
  std::shared_ptr<BaseModel> model;
  std::shared_ptr<const Task> task;
  std::unique_ptr<RestoredVariables> variables;  // reads into backend
  std::string output_name;
};

// Passes every call on to `inner` and remembers the variables the model read, by name, in the
// order it first read them.
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

// "[2, 3, 4]".
inline std::string shape_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(dims[i]);
  }
  return text + "]";
}

// The detection model's input size, [H, W, 3]: its fixed_shape_resizer's height and width (the
// model options the pipeline config sets; the input pipeline resizes every image to them). Else a
// ConfigError naming the export ("ONNX export", "SavedModel export") of `model_name` and ending
// with `remedy`, what the user can do instead.
inline std::vector<int64_t> fixed_resizer_shape(const config::Pipeline& pipeline,
                                                const std::string& export_name,
                                                const std::string& model_name,
                                                const std::string& remedy) {
  std::string resizer;
  int64_t height = 0, width = 0;
  for (const config::Param& p : pipeline.model().params()) {
    if (p.key() == "image_resizer") resizer = p.string_value();
    if (p.key() == "image_resizer.fixed_shape_resizer.height") height = p.int_value();
    if (p.key() == "image_resizer.fixed_shape_resizer.width") width = p.int_value();
  }
  if (resizer != "fixed_shape_resizer" || height <= 0 || width <= 0) {
    throw ConfigError(export_name + " of " + model_name + ": the model's image_resizer is " +
                      (resizer.empty() ? std::string("not set") : "'" + resizer + "'") +
                      ", not a fixed_shape_resizer with a height and width; " + remedy);
  }
  return {height, width, 3};
}

// The detection model's preprocess, predict (Mode::kPredict) and postprocess of `images` through
// `ctx`, as the Object Detection API's exported graph runs them (exporter.py's
// _build_detection_graph), and an entry of the detections: `entry(name)` throws InvalidArgument
// naming `export_name` ("ONNX export of SSDMetaArch") when postprocess() gave none.
struct DetectorRun {
  TensorDict detections;
  std::string export_name;
  const Tensor& entry(const char* name) const {
    auto it = detections.find(name);
    if (it == detections.end() || !it->second.defined()) {
      throw InvalidArgument(export_name + ": postprocess() gave no '" + name + "'");
    }
    return it->second;
  }
};

inline DetectorRun run_detector(DetectionModel& model, ModelContext& ctx, const Tensor& images,
                                const std::string& export_name) {
  const PreprocessedImages pre =
      guard_plugin_call(model, "preprocess", [&] { return model.preprocess(ctx, images); });
  const TensorDict prediction =
      guard_plugin_call(model, "predict", [&] { return model.predict(ctx, pre, Mode::kPredict); });
  return {
      guard_plugin_call(model, "postprocess",
                        [&] { return model.postprocess(ctx, prediction, pre.true_image_shapes); }),
      export_name};
}

// The model's keep_aspect_ratio_resizer as DetectionResizeToRange (its options' defaults as the
// proto's: 600, 1024, pad_to_max_dimension false), or nothing for another resizer; a ConfigError
// without pad_to_max_dimension, whose images' size differs from image to image.
inline std::optional<DetectionResizeToRange> keep_aspect_ratio_resize(
    const config::Pipeline& pipeline, const std::string& export_name,
    const std::string& model_name) {
  std::string resizer;
  DetectionResizeToRange r{600, 1024};
  bool pad = false;
  const std::string at = "image_resizer.keep_aspect_ratio_resizer.";
  for (const config::Param& p : pipeline.model().params()) {
    if (p.key() == "image_resizer") resizer = p.string_value();
    if (p.key() == at + "min_dimension") r.min_dimension = p.int_value();
    if (p.key() == at + "max_dimension") r.max_dimension = p.int_value();
    if (p.key() == at + "pad_to_max_dimension") pad = p.bool_value();
  }
  if (resizer != "keep_aspect_ratio_resizer") return std::nullopt;
  if (!pad) {
    throw ConfigError(export_name + " of " + model_name + ": model." + at +
                      "pad_to_max_dimension is false; the exported graph runs images of every "
                      "size through one graph of max_dimension x max_dimension, which needs it "
                      "true (padding changes the model's input, so train with it)");
  }
  if (r.min_dimension < 1 || r.max_dimension < r.min_dimension) {
    throw ConfigError(export_name + " of " + model_name + ": model." + at + "min_dimension " +
                      std::to_string(r.min_dimension) + " and max_dimension " +
                      std::to_string(r.max_dimension) +
                      "; expected 1 <= min_dimension <= max_dimension");
  }
  return r;
}

// The pipeline the forward is captured with, and the graph's image size. With
// keep_aspect_ratio_resizer the graph resizes and pads (DetectionResizeToRange), and the capture
// runs the same model with a fixed_shape_resizer of the padded size, whose preprocess leaves the
// resizing to the input pipeline (the resizer has no variables).
inline std::pair<config::Pipeline, std::vector<int64_t>> detection_capture_pipeline(
    const config::Pipeline& pipeline, const std::optional<DetectionResizeToRange>& resize_to_range,
    const std::string& export_name, const std::string& model_name) {
  config::Pipeline capture_pipeline = pipeline;
  if (!resize_to_range) {
    return {capture_pipeline,
            fixed_resizer_shape(pipeline, export_name, model_name,
                                "the exported graph resizes its images to the "
                                "fixed_shape_resizer's size, or keep_aspect_ratio_resizer's "
                                "with pad_to_max_dimension")};
  }
  auto& m = *capture_pipeline.mutable_model();
  auto* params = m.mutable_params();
  params->erase(
      std::remove_if(params->begin(), params->end(),
                     [](const config::Param& p) { return p.key().rfind("image_resizer", 0) == 0; }),
      params->end());
  auto add = [&](const std::string& key) {
    config::Param* p = m.add_params();
    p->set_key(key);
    return p;
  };
  add("image_resizer")->set_string_value("fixed_shape_resizer");
  add("image_resizer.fixed_shape_resizer.height")->set_int_value(resize_to_range->max_dimension);
  add("image_resizer.fixed_shape_resizer.width")->set_int_value(resize_to_range->max_dimension);
  return {capture_pipeline, {resize_to_range->max_dimension, resize_to_range->max_dimension, 3}};
}

}  // namespace trainyard::export_internal

#endif  // TRAINYARD_CORE_SRC_FORMATS_EXPORT_RECORDING_H_
