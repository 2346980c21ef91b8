// Tasks found among the plugins, what they read of a pipeline, and the pipeline.config record
// of a run that the core keeps for them.
#include "trainyard/core/task.h"

#include <filesystem>

#include "registry/pipeline_plugins.h"
#include "trainyard/core/config.h"
#include "trainyard/error.h"
#include "trainyard/user_file.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRunConfig = "pipeline.config";

ConfiguredClass configured(const config::PluginSpec& spec, bool present,
                           const std::string& fallback, const char* where) {
  ConfiguredClass c;
  c.class_name = class_or(spec, present, fallback);
  if (!present) return c;
  for (const auto& [key, value] : plugin_params(spec, where)) {
    c.params.emplace_back(key, option_value_to_string(value));
  }
  return c;
}

// What a run of train_dir must keep: the model and its options, the number of classes, the
// task.
std::string recorded_part(const Task& task, const config::Pipeline& pipeline) {
  config::Pipeline p;
  *p.mutable_model() = pipeline.model();
  if (!p.model().has_class_() || p.model().class_().empty()) {
    p.mutable_model()->set_class_(task.defaults().model);
  }
  p.set_num_classes(pipeline.num_classes());
  p.set_task(pipeline.task());
  return pipeline_config_to_text(p, /*with_defaults=*/false);
}

class PipelineConfigRecorder final : public RunRecorder {
 public:
  PipelineConfigRecorder(const Task& task, const config::Pipeline& pipeline,
                         const std::string& train_dir)
      : task_(task), pipeline_(pipeline), train_dir_(train_dir) {}
  void check_or_record_pipeline_config() override {
    trainyard::check_or_record_pipeline_config(task_, pipeline_, train_dir_);
  }

 private:
  const Task& task_;
  const config::Pipeline& pipeline_;
  const std::string& train_dir_;
};

}  // namespace

std::shared_ptr<const Task> make_task(const PluginRegistry& registry, const std::string& name) {
  bool known = false;
  for (const ClassInfo& info : registry.classes()) {
    known |= info.kind == ClassKind::kTask && info.class_name == name;
  }
  if (!known) {
    std::string names;
    for (const std::string& t : task_names(registry)) names += (names.empty() ? "" : ", ") + t;
    throw ConfigError("unknown task '" + name + "'. Known tasks: " +
                      (names.empty() ? "none (no plugin provides a task)" : names));
  }
  return registry.create<Task>(ClassKind::kTask, name);
}

std::shared_ptr<const Task> task_of(const PluginRegistry& registry,
                                    const config::Pipeline& pipeline) {
  return make_task(registry, pipeline.task());
}

std::vector<std::string> task_names(const PluginRegistry& registry) {
  std::vector<std::string> names;
  for (const ClassInfo& info : registry.classes()) {
    if (info.kind == ClassKind::kTask) names.push_back(info.class_name);
  }
  return names;
}

TaskPipeline task_pipeline_of(const Task& task, const config::Pipeline& pipeline) {
  const TaskDefaults defaults = task.defaults();
  const config::TrainConfig& tc = pipeline.train_config();
  const config::EvalConfig& ec = pipeline.eval_config();
  TaskPipeline t;
  t.task = pipeline.task();
  t.num_classes = pipeline.num_classes();
  t.train_dir = tc.train_dir();
  t.model = configured(pipeline.model(), pipeline.has_model(), defaults.model, "model");
  t.label_loss =
      configured(tc.label_loss(), tc.has_label_loss(), defaults.loss, "train_config.label_loss");
  t.train_reader =
      configured(pipeline.train_input_reader().reader(), pipeline.train_input_reader().has_reader(),
                 defaults.reader, "train_input_reader.reader");
  t.eval_reader =
      configured(pipeline.eval_input_reader().reader(), pipeline.eval_input_reader().has_reader(),
                 defaults.reader, "eval_input_reader.reader");
  t.eval_top_k = ec.top_k();
  t.num_visualizations = ec.num_visualizations();
  t.min_score_threshold = ec.min_score_threshold();
  t.max_num_boxes_to_visualize = ec.max_num_boxes_to_visualize();
  t.metrics_set.assign(ec.metrics_set().begin(), ec.metrics_set().end());
  return t;
}

Batch to_device(const Task& task, Backend& backend, HostBatch& host) {
  Batch batch;
  for (auto& [name, feature] : host.features) {
    Tensor t = Tensor::from_host(backend, Shape(feature.shape), feature.dtype, feature.bytes.data(),
                                 feature.bytes.size());
    if (name == "labels") {
      batch.labels = t;
    } else if (name == "num_frames") {
      batch.num_frames = t;
    } else {
      batch.features.emplace(name, t);
    }
  }
  batch.ids = std::move(host.ids);
  task.prepare_batch(batch);
  return batch;
}

void check_or_record_run(const Task& task, const config::Pipeline& pipeline,
                         const std::string& train_dir) {
  PipelineConfigRecorder recorder(task, pipeline, train_dir);
  TaskPipeline view = task_pipeline_of(task, pipeline);
  view.train_dir = train_dir;
  task.check_or_record_run(view, recorder);
}

void check_or_record_pipeline_config(const Task& task, const config::Pipeline& pipeline,
                                     const std::string& train_dir) {
  const fs::path path = fs::path(train_dir) / kRunConfig;
  if (fs::exists(path)) {
    const config::Pipeline recorded = load_pipeline_config(path);
    const std::string was = recorded_part(task, recorded);
    const std::string now = recorded_part(task, pipeline);
    if (was != now) {
      throw ConfigError(path.string() + ": this train_dir was created with\n" + was +
                        "but this run has\n" + now +
                        "use --start_new_model (or another train_dir) to start over");
    }
    return;
  }
  write_file_atomically(path.string(), pipeline_config_to_text(pipeline, /*with_defaults=*/true));
}

}  // namespace trainyard
