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

// The task's class name, which a pipeline that names none runs under; `pipeline`'s name for a
// task object the registry did not create.
const std::string& task_name(const Task& task, const config::Pipeline& pipeline) {
  const std::string& created_as = task.plugin_origin().class_name;
  return created_as.empty() ? pipeline.task() : created_as;
}

// What a run of train_dir must keep: the model and its options, the number of classes, the
// task (`task_name`).
std::string recorded_part(const Task& task, const config::Pipeline& pipeline,
                          const std::string& task_name) {
  config::Pipeline p;
  *p.mutable_model() = pipeline.model();
  if (!p.model().has_class_() || p.model().class_().empty()) {
    p.mutable_model()->set_class_(task.defaults().model);
  }
  p.set_num_classes(pipeline.num_classes());
  p.set_task(task_name);
  return pipeline_config_to_text(p, /*with_defaults=*/false);
}

// "a, b, c", or a sentence saying no plugin provides a task.
std::string known_tasks(const PluginRegistry& registry) {
  std::string names;
  for (const std::string& t : task_names(registry)) names += (names.empty() ? "" : ", ") + t;
  return names.empty() ? "none (no plugin provides a task)" : names;
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
  if (name.empty()) return make_task(registry, default_task_name(registry));
  bool known = false;
  for (const ClassInfo& info : registry.classes()) {
    known |= info.kind == ClassKind::kTask && info.class_name == name;
  }
  if (!known)
    throw ConfigError("unknown task '" + name + "'. Known tasks: " + known_tasks(registry));
  return registry.create<Task>(ClassKind::kTask, name);
}

std::string default_task_name(const PluginRegistry& registry) {
  std::vector<std::string> claimants;
  for (const std::string& name : task_names(registry)) {
    if (registry.create<Task>(ClassKind::kTask, name)->defaults().runs_unnamed_pipelines) {
      claimants.push_back(name);
    }
  }
  if (claimants.size() == 1) return claimants.front();
  if (claimants.empty()) {
    throw ConfigError(
        "the pipeline names no task (its task field), and no task plugin runs "
        "unnamed pipelines. Known tasks: " +
        known_tasks(registry));
  }
  std::string names;
  for (const std::string& t : claimants) names += (names.empty() ? "" : ", ") + t;
  throw ConfigError(
      "the pipeline names no task (its task field), and several task plugins "
      "claim unnamed pipelines: " +
      names + "; name one in the config's task field");
}

std::shared_ptr<const Task> resolve_task(const PluginRegistry& registry,
                                         config::Pipeline& pipeline) {
  std::shared_ptr<const Task> task = make_task(registry, pipeline.task());
  const std::string name = task_name(*task, pipeline);
  pipeline.set_task(name);
  config::TrainConfig* tc = pipeline.mutable_train_config();
  if (!tc->has_train_dir() || tc->train_dir().empty()) {
    const std::string dir = task->defaults().train_dir;
    if (dir.empty()) {
      throw ConfigError(
          "the pipeline names no train_dir (train_config.train_dir, --train_dir or --model_dir) "
          "and the " +
          pipeline.task() + " task has no default one");
    }
    tc->set_train_dir(dir);
  }
  return task;
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
  t.task = task_name(task, pipeline);
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
  t.include_metrics_per_category = ec.include_metrics_per_category();
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
  const std::string running = task_name(task, pipeline);
  if (fs::exists(path)) {
    const config::Pipeline recorded = load_pipeline_config(path);
    // Records name their task (written below, and by earlier versions with "yt8m" explicit);
    // one edited to name none is taken as this run's.
    const std::string was =
        recorded_part(task, recorded, recorded.task().empty() ? running : recorded.task());
    const std::string now = recorded_part(task, pipeline, running);
    if (was != now) {
      throw ConfigError(path.string() + ": this train_dir was created with\n" + was +
                        "but this run has\n" + now +
                        "use --start_new_model (or another train_dir) to start over");
    }
    return;
  }
  config::Pipeline record = pipeline;
  record.set_task(running);
  write_file_atomically(path.string(), pipeline_config_to_text(record, /*with_defaults=*/true));
}

}  // namespace trainyard
