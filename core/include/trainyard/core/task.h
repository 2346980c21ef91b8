// The core's side of tasks (trainyard/task.h): the task a pipeline names, created from the
// plugins by name; what the task reads of the pipeline; a batch from the input pipeline to the
// device; the pipeline.config record of a run. Nothing here names a task.
#ifndef TRAINYARD_CORE_TASK_H_
#define TRAINYARD_CORE_TASK_H_

#include <memory>
#include <string>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/registry.h"
#include "trainyard/export.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"
#include "trainyard/task.h"

namespace trainyard {

// The task class `name`; empty: default_task_name(). Throws ConfigError naming the task and
// listing the known ones.
TRAINYARD_API std::shared_ptr<const Task> make_task(const PluginRegistry& registry,
                                                    const std::string& name);
// The task of a pipeline that names none: the one task class whose defaults say it runs
// unnamed pipelines. Throws ConfigError when none or several do, naming them.
TRAINYARD_API std::string default_task_name(const PluginRegistry& registry);
// The task of `pipeline`, after filling in what the pipeline leaves to it: the task's name
// where the pipeline names none, and train_config.train_dir where unset (the task's default;
// ConfigError when it has none).
TRAINYARD_API std::shared_ptr<const Task> resolve_task(const PluginRegistry& registry,
                                                       config::Pipeline& pipeline);
// The task `pipeline.task` names (default_task_name() where it names none).
TRAINYARD_API std::shared_ptr<const Task> task_of(const PluginRegistry& registry,
                                                  const config::Pipeline& pipeline);
// The names of the task classes the plugins provide, sorted.
TRAINYARD_API std::vector<std::string> task_names(const PluginRegistry& registry);

// What `task` reads of `pipeline`, its defaults filled in where the config names no class.
TRAINYARD_API TaskPipeline task_pipeline_of(const Task& task, const config::Pipeline& pipeline);

// A batch from the input pipeline on `backend`: "labels" and "num_frames" as Batch's own
// members, the other features by name, then Task::prepare_batch(). Moves the ids out of `host`;
// its buffers stay for InputPipeline::recycle().
TRAINYARD_API Batch to_device(const Task& task, Backend& backend, HostBatch& host);

// Before training: Task::check_or_record_run() for the run of `pipeline` in `train_dir`.
TRAINYARD_API void check_or_record_run(const Task& task, const config::Pipeline& pipeline,
                                       const std::string& train_dir);

// train_dir/pipeline.config: the config of the run that created train_dir, written by the first
// run; a later run must keep its model, the model's options, num_classes and task, or gets a
// ConfigError naming the file and both. `task` gives the default model class.
TRAINYARD_API void check_or_record_pipeline_config(const Task& task,
                                                   const config::Pipeline& pipeline,
                                                   const std::string& train_dir);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TASK_H_
