// Exports: a directory that `predict` (and `eval`) load without the training run.
#ifndef TRAINYARD_CORE_EXPORTER_H_
#define TRAINYARD_CORE_EXPORTER_H_

#include <functional>
#include <string>

#include "trainyard/core/registry.h"
#include "trainyard/export.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

// Writes the checkpoint's files, the effective pipeline config (pipeline.config), a
// `checkpoint` state file, model.safetensors with the model's weights (the moving averages in
// place of the weights with use_moving_average; no optimizer slots, no step) and the task's
// own files (the YouTube-8M task: model_flags.json) into a hidden sibling directory, fsyncs it
// and renames it to `export_dir` (publish_directory, atomic_file.h): whatever moment the
// process is killed at, `export_dir` is absent or a whole export, and an earlier export there
// is replaced whole. `also_write`, when given, writes more files into the staging directory it
// is passed before the rename (the periodic export's SavedModel). Returns the checkpoint prefix
// inside the export.
TRAINYARD_API std::string export_model(
    const PluginRegistry& registry, const config::Pipeline& pipeline,
    const std::string& checkpoint_prefix, const std::string& export_dir,
    const std::function<void(const std::string& staging_dir)>& also_write = {});

}  // namespace trainyard

#endif  // TRAINYARD_CORE_EXPORTER_H_
