// A SavedModel directory written by Trainyard (`trainyard export --format saved_model`,
// saved_model_export.h), read back for ExportedModel (exported_model.h): the pipeline its
// assets.extra carries and its variables' V2 checkpoint. The directory is untrusted input: every
// file is read with a bound on its size, and a file or directory that resolves outside the
// SavedModel directory (a symlink escaping it) is refused.
#ifndef TRAINYARD_CORE_FORMATS_SAVED_MODEL_SOURCE_H_
#define TRAINYARD_CORE_FORMATS_SAVED_MODEL_SOURCE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

// The most saved_model.pb bytes read (the graph: its variables' values are under variables/).
inline constexpr uint64_t kMaxSavedModelBytes = uint64_t{1} << 30;

struct SavedModelSource {
  std::string dir;  // the SavedModel directory (holding saved_model.pb)
  // assets.extra/trainyard/pipeline.config, its readers' data_pattern cleared and their "*_path"
  // options naming the copies beside it (left out where there is none).
  config::Pipeline pipeline;
  std::string prefix;  // dir/variables/variables, the variables' checkpoint
};

// The SavedModel directory an export directory names, or nullopt for Trainyard's own export:
//  - D/saved_model/saved_model.pb exists: the Object Detection API's layout, whose
//    pipeline.config and model.ckpt beside saved_model/ are loaded through the SavedModel;
//  - else D/pipeline.config exists: Trainyard's own export (nullopt), also where a SavedModel
//    was written beside it (the periodic export_model_steps export, the exporters');
//  - else D/saved_model.pb exists: D.
std::optional<std::string> saved_model_dir_of(const std::string& export_dir);

// Reads the SavedModel `dir`. Throws DataLoss naming saved_model.pb when it does not parse as a
// SavedModel or has no MetaGraphDef tagged "serve"; NotFound naming the directory and the file
// for a SavedModel that Trainyard did not write (no assets.extra/trainyard/pipeline.config) or
// without variables/variables.index; InvalidArgument naming the path for a file or directory
// that resolves outside `dir`, or a file over its size bound; what load_pipeline_config throws
// for the pipeline.
SavedModelSource read_saved_model_source(const std::string& dir);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_FORMATS_SAVED_MODEL_SOURCE_H_
