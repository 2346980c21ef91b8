// What the trainer, evaluator and exporter share to turn a pipeline config into plugin objects:
// class names with the task's defaults, creation with the config's params (errors name the
// config field), the backend, the checkpoint to read. Internal to the core.
#ifndef TRAINYARD_CORE_SRC_PIPELINE_PLUGINS_H_
#define TRAINYARD_CORE_SRC_PIPELINE_PLUGINS_H_

#include <map>
#include <memory>
#include <string>

#include "trainyard/backend.h"
#include "trainyard/core/config.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"
#include "trainyard/reader.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The class `spec` names, or `fallback` when it names none.
std::string class_or(const config::PluginSpec& spec, bool present, const std::string& fallback);

// Creates `class_name` of `kind` with the params of `spec` (may be null); any error becomes a
// ConfigError prefixed with `where` ("train_config.optimizer").
template <class T>
std::shared_ptr<T> create_plugin(const PluginRegistry& registry, ClassKind kind,
                                 const std::string& class_name, const config::PluginSpec* spec,
                                 const char* where) {
  std::map<std::string, OptionValue> params;
  if (spec != nullptr) params = plugin_params(*spec, where);
  try {
    return registry.create<T>(kind, class_name, params);
  } catch (const Error& e) {
    throw ConfigError(std::string(where) + ": " + e.what());
  }
}

// kDetectionModel when `class_name` is a detection model class (and no BaseModel class has the
// name), else kModel: the model section names either kind.
ClassKind model_kind(const PluginRegistry& registry, const std::string& class_name);

// The pipeline's model as the trainer, evaluator and exporter drive it: a BaseModel, or a
// DetectionModel wrapped in a DetectionModelAdapter (detection_model_adapter.h). Errors are
// ConfigErrors prefixed with "model".
std::shared_ptr<BaseModel> make_model(const PluginRegistry& registry,
                                      const config::Pipeline& pipeline);

// Adds to `batch`'s features what the last forward() of `model` gave beside its predictions,
// for the task's evaluation and prediction writer: a detection model's "detection_masks"
// (DetectionModelAdapter::last_outputs()). Nothing for other models.
void add_model_outputs(const BaseModel& model, Batch& batch);

// The value of the param `key` of `spec` as text, or `fallback`.
std::string param_text(const config::PluginSpec& spec, const std::string& key,
                       const std::string& fallback);

// The model, label loss, optimizer and reader classes of the pipeline (the task's defaults
// where it names none).
std::string model_class(const PluginRegistry& registry, const config::Pipeline& pipeline);
std::string loss_class(const PluginRegistry& registry, const config::Pipeline& pipeline);
std::string optimizer_class(const PluginRegistry& registry, const config::Pipeline& pipeline);
std::string reader_class(const PluginRegistry& registry, const config::Pipeline& pipeline,
                         const config::InputReader& reader);

// The reader of `input` (the task's default class when it names none), with its params; a
// reader that declares a num_classes option the config leaves unset gets the pipeline's, so
// num_classes is written once. Errors are ConfigErrors prefixed with `where`.
std::shared_ptr<Reader> make_reader(const PluginRegistry& registry,
                                    const config::Pipeline& pipeline,
                                    const config::InputReader& input, const char* where);

// The backend of a run whose variables are restored once and then only read (eval, predict, the
// inference library): make_backend's, told to keep its filters packed (the cpu backend's
// prepack_filters) when its class declares that option and the config does not set it.
std::shared_ptr<Backend> make_inference_backend(const PluginRegistry& registry,
                                                const config::Pipeline& pipeline);

// The backend the pipeline names, with its params.
std::shared_ptr<Backend> make_backend(const PluginRegistry& registry,
                                      const config::Pipeline& pipeline);

// `prefix`, or the latest checkpoint in train_dir (NotFound when there is none).
std::string checkpoint_or_latest(const config::Pipeline& pipeline, const std::string& prefix);

// A scalar tensor's value.
double to_double(const Tensor& scalar);

// A suffix that keeps event files of runs started in the same second apart (a resumed run, an
// eval next to training), as TensorFlow 2 adds the process id and a counter.
std::string event_file_suffix();

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_PIPELINE_PLUGINS_H_
