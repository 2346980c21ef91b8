#include "registry/pipeline_plugins.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "registry/detection_model_adapter.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/detection_model.h"
#include "trainyard/ops.h"

namespace trainyard {

std::string class_or(const config::PluginSpec& spec, bool present, const std::string& fallback) {
  return present && spec.has_class_() && !spec.class_().empty() ? spec.class_() : fallback;
}

std::string param_text(const config::PluginSpec& spec, const std::string& key,
                       const std::string& fallback) {
  for (const config::Param& p : spec.params()) {
    if (p.key() != key) continue;
    OptionValue v = plugin_params(spec, "reader").at(key);
    return option_value_to_string(v);
  }
  return fallback;
}

namespace {

// The class `spec` names, or the task's default (`member` of its TaskDefaults) when it names none.
std::string class_or_default(const PluginRegistry& registry, const config::Pipeline& pipeline,
                             const config::PluginSpec& spec, bool present,
                             std::string TaskDefaults::*member) {
  if (present && spec.has_class_() && !spec.class_().empty()) return spec.class_();
  return task_of(registry, pipeline)->defaults().*member;
}

}  // namespace

std::string model_class(const PluginRegistry& registry, const config::Pipeline& pipeline) {
  return class_or_default(registry, pipeline, pipeline.model(), pipeline.has_model(),
                          &TaskDefaults::model);
}

ClassKind model_kind(const PluginRegistry& registry, const std::string& class_name) {
  bool detection = false;
  for (const ClassInfo& info : registry.classes()) {
    if (info.class_name != class_name) continue;
    if (info.kind == ClassKind::kModel) return ClassKind::kModel;
    detection = detection || info.kind == ClassKind::kDetectionModel;
  }
  return detection ? ClassKind::kDetectionModel : ClassKind::kModel;
}

std::shared_ptr<BaseModel> make_model(const PluginRegistry& registry,
                                      const config::Pipeline& pipeline) {
  const std::string name = model_class(registry, pipeline);
  const config::PluginSpec* spec = pipeline.has_model() ? &pipeline.model() : nullptr;
  if (model_kind(registry, name) == ClassKind::kDetectionModel) {
    return std::make_shared<DetectionModelAdapter>(
        create_plugin<DetectionModel>(registry, ClassKind::kDetectionModel, name, spec, "model"));
  }
  return create_plugin<BaseModel>(registry, ClassKind::kModel, name, spec, "model");
}

void add_model_outputs(const BaseModel& model, Batch& batch) {
  const auto* detection = dynamic_cast<const DetectionModelAdapter*>(&model);
  if (detection == nullptr) return;
  for (const auto& [name, value] : detection->last_outputs()) batch.features[name] = value;
}

std::string loss_class(const PluginRegistry& registry, const config::Pipeline& pipeline) {
  const config::TrainConfig& tc = pipeline.train_config();
  return class_or_default(registry, pipeline, tc.label_loss(), tc.has_label_loss(),
                          &TaskDefaults::loss);
}

std::string optimizer_class(const PluginRegistry& registry, const config::Pipeline& pipeline) {
  const config::TrainConfig& tc = pipeline.train_config();
  return class_or_default(registry, pipeline, tc.optimizer(), tc.has_optimizer(),
                          &TaskDefaults::optimizer);
}

std::string reader_class(const PluginRegistry& registry, const config::Pipeline& pipeline,
                         const config::InputReader& reader) {
  return class_or_default(registry, pipeline, reader.reader(), reader.has_reader(),
                          &TaskDefaults::reader);
}

std::shared_ptr<Reader> make_reader(const PluginRegistry& registry,
                                    const config::Pipeline& pipeline,
                                    const config::InputReader& input, const char* where) {
  const std::string name = reader_class(registry, pipeline, input);
  config::PluginSpec spec = input.reader();
  bool sets_classes = false;
  for (const config::Param& p : spec.params()) sets_classes |= p.key() == "num_classes";
  const ClassInfo* info = nullptr;
  if (!sets_classes) {
    try {
      info = &registry.find(ClassKind::kReader, name);
    } catch (const Error&) {
      // create_plugin below reports the unknown class, with the config field.
    }
  }
  if (info != nullptr) {
    for (const auto& option : registry.describe(*info).options) {
      if (option.name != "num_classes") continue;
      config::Param* p = spec.add_params();
      p->set_key("num_classes");
      p->set_int_value(pipeline.num_classes());
    }
  }
  return create_plugin<Reader>(registry, ClassKind::kReader, name, &spec, where);
}

std::shared_ptr<Backend> make_inference_backend(const PluginRegistry& registry,
                                                const config::Pipeline& pipeline) {
  for (const config::Param& p : pipeline.backend().params()) {
    if (p.key() == "prepack_filters") return make_backend(registry, pipeline);
  }
  bool declared = false;
  try {
    for (const auto& option :
         registry.describe(registry.find(ClassKind::kBackend, pipeline.backend().class_()))
             .options) {
      declared = declared || option.name == "prepack_filters";
    }
  } catch (const NotFound&) {
    // make_backend names the missing class.
  }
  if (!declared) return make_backend(registry, pipeline);
  config::Pipeline packing = pipeline;
  config::Param* param = packing.mutable_backend()->add_params();
  param->set_key("prepack_filters");
  param->set_bool_value(true);
  return make_backend(registry, packing);
}

std::shared_ptr<Backend> make_backend(const PluginRegistry& registry,
                                      const config::Pipeline& pipeline) {
  config::PluginSpec spec;
  const config::BackendConfig& backend = pipeline.backend();
  spec.set_class_(backend.class_());
  *spec.mutable_params() = backend.params();
  // The section's own fields are the class's options of the same names; a param of the same
  // name wins. A class without such an option takes the field only at its default (a config
  // printed with its defaults names device_index 0 for the cpu backend too); another value is
  // passed on, so that creating the class fails naming the option.
  PluginRegistry::ClassDeclaration declaration;
  try {
    declaration = registry.describe(registry.find(ClassKind::kBackend, spec.class_()));
  } catch (const NotFound&) {
    // create_plugin below says which classes there are.
  }
  auto add_field = [&](const char* key, int64_t value, int64_t default_value) {
    for (const config::Param& p : spec.params()) {
      if (p.key() == key) return;
    }
    const bool declared = std::any_of(declaration.options.begin(), declaration.options.end(),
                                      [key](const auto& option) { return option.name == key; });
    if (!declared && value == default_value) return;
    config::Param* param = spec.add_params();
    param->set_key(key);
    param->set_int_value(value);
  };
  if (backend.has_num_threads()) add_field("num_threads", backend.num_threads(), -1);
  if (backend.has_device_index()) add_field("device_index", backend.device_index(), 0);
  if (backend.has_precision() &&
      std::none_of(spec.params().begin(), spec.params().end(),
                   [](const config::Param& p) { return p.key() == "precision"; })) {
    const bool declared =
        std::any_of(declaration.options.begin(), declaration.options.end(),
                    [](const auto& option) { return option.name == "precision"; });
    if (declared || backend.precision() != "f32") {
      config::Param* param = spec.add_params();
      param->set_key("precision");
      param->set_string_value(backend.precision());
    }
  }
  return create_plugin<Backend>(registry, ClassKind::kBackend, spec.class_(), &spec, "backend");
}

std::string checkpoint_or_latest(const config::Pipeline& pipeline, const std::string& prefix) {
  if (!prefix.empty()) return prefix;
  const std::string& dir = pipeline.train_config().train_dir();
  std::optional<std::string> latest = latest_checkpoint(dir);
  if (!latest) throw NotFound("no checkpoint in train_dir " + dir);
  return *latest;
}

double to_double(const Tensor& scalar) {
  Tensor f = ops::cast(scalar, DType::kF64);
  return f.to_vector<double>().at(0);
}

std::string event_file_suffix() {
  static std::atomic<int> counter{0};
  return "." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

}  // namespace trainyard
