#include "trainyard/core/exporter.h"

#include <filesystem>
#include <iostream>
#include <map>

#include "registry/pipeline_plugins.h"
#include "trainyard/core/atomic_file.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/config.h"
#include "trainyard/core/progress.h"
#include "trainyard/core/safetensors.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

// The weights of a checkpoint as an export shows them: no step, no trainer state, no optimizer
// slots or averages (an entry "X/suffix" beside a variable X of the same shape), and with
// `averages` each variable's "X/ExponentialMovingAverage" in its place, as TensorFlow's
// swapping saver exports it.
std::vector<std::pair<std::string, Tensor>> exported_weights(const CheckpointReader& checkpoint,
                                                             bool averages, Backend& host) {
  std::map<std::string, const CheckpointTensorInfo*> by_name;
  for (const CheckpointTensorInfo& info : checkpoint.tensors()) by_name[info.name] = &info;
  auto is_extra = [&](const CheckpointTensorInfo& info) {
    for (std::size_t slash = info.name.rfind('/'); slash != std::string::npos && slash > 0;
         slash = info.name.rfind('/', slash - 1)) {
      auto owner = by_name.find(info.name.substr(0, slash));
      if (owner != by_name.end() && owner->second->shape == info.shape) return true;
    }
    return false;
  };
  std::vector<std::pair<std::string, Tensor>> out;
  for (const CheckpointTensorInfo& info : checkpoint.tensors()) {
    if (info.name == "global_step" || info.name.rfind("trainyard/", 0) == 0 ||
        info.name == "beta1_power" || info.name == "beta2_power" || !info.unsupported.empty() ||
        is_extra(info)) {
      continue;
    }
    std::string source = info.name;
    if (averages && by_name.count(info.name + "/ExponentialMovingAverage"))
      source += "/ExponentialMovingAverage";
    out.emplace_back(info.name, checkpoint.read(source, host));
  }
  return out;
}

}  // namespace

std::string export_model(const PluginRegistry& registry, const config::Pipeline& pipeline,
                         const std::string& checkpoint_prefix, const std::string& export_dir,
                         const std::function<void(const std::string&)>& also_write) {
  const config::TrainConfig& tc = pipeline.train_config();
  std::string prefix = checkpoint_or_latest(pipeline, checkpoint_prefix);
  CheckpointReader check(prefix);  // refuses an incomplete checkpoint before anything is written
  // Everything is written into a hidden sibling and renamed into place once fsynced: the
  // export directory is whole or absent whatever moment the process is killed at.
  fs::path target(export_dir);
  if (target.filename().empty()) target = target.parent_path();  // "dir/" names "dir"
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  // What a killed export left (its process gone) goes first, as evaluate() does for its own
  // staging; a live export's stays.
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
  fs::create_directory(staging);
  // The checkpoint's copy, the configs, the weights and the rename into place.
  Progress progress("export", "steps", 4, std::cerr);
  std::string name = fs::path(prefix).filename().string();
  check.copy_to((staging / name).string());
  progress.advance();
  write_file_atomically(
      (staging / "checkpoint").string(),
      "model_checkpoint_path: \"" + name + "\"\nall_model_checkpoint_paths: \"" + name + "\"\n");
  write_file_atomically((staging / "pipeline.config").string(),
                        pipeline_config_to_text(pipeline, /*with_defaults=*/true));
  const std::shared_ptr<const Task> task = task_of(registry, pipeline);
  task->write_export_files(task_pipeline_of(*task, pipeline), staging.string());
  progress.advance();
  std::shared_ptr<Backend> backend = make_backend(registry, pipeline);
  write_safetensors((staging / "model.safetensors").string(),
                    exported_weights(check, tc.use_moving_average(), *backend),
                    {{"format", "trainyard"}, {"source", name}});
  if (also_write) also_write(staging.string());
  progress.advance();
  publish_directory(staging.string(), target.string());
  cleanup.published = true;
  progress.advance();
  progress.finish();
  return (target / name).string();
}

}  // namespace trainyard
