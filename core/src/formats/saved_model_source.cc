#include "formats/saved_model_source.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "trainyard/core/config.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/error.h"
#include "trainyard/proto/saved_model.pb.h"
#include "trainyard/user_file.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

bool exists_here(const fs::path& path) {
  std::error_code error;
  return fs::exists(fs::symlink_status(path, error));
}

// Whether the canonical path `path` is `root` or lies under it.
bool inside(const fs::path& root, const fs::path& path) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

// Refuses `path` (which exists) when it resolves outside the canonical SavedModel directory
// `root`: a symlink escaping the directory named `dir`.
void check_within(const fs::path& root, const fs::path& path, const std::string& dir) {
  std::error_code error;
  const fs::path resolved = fs::canonical(path, error);
  if (error) {
    throw InvalidArgument("the SavedModel " + dir + " has " + path.string() +
                          ", which does not resolve (" + error.message() +
                          "); a dangling symlink?");
  }
  if (!inside(root, resolved)) {
    throw InvalidArgument("the SavedModel " + dir + " has " + path.string() +
                          ", which resolves to " + resolved.string() +
                          ", outside the SavedModel directory; its files must lie inside it (a "
                          "symlink out of it is refused)");
  }
}

}  // namespace

std::optional<std::string> saved_model_dir_of(const std::string& export_dir) {
  const fs::path dir(export_dir);
  if (exists_here(dir / "saved_model" / "saved_model.pb")) return (dir / "saved_model").string();
  if (exists_here(dir / "pipeline.config")) return std::nullopt;
  if (exists_here(dir / "saved_model.pb")) return dir.string();
  return std::nullopt;
}

SavedModelSource read_saved_model_source(const std::string& dir) {
  std::error_code error;
  const fs::path root = fs::canonical(dir, error);
  if (error || !fs::is_directory(root, error)) {
    throw NotFound("the SavedModel directory " + dir + " does not exist or is not a directory");
  }
  const fs::path graph_file = fs::path(dir) / "saved_model.pb";
  if (!exists_here(graph_file)) {
    throw NotFound(dir + " is not a SavedModel: it has no saved_model.pb");
  }
  check_within(root, graph_file, dir);
  tf::SavedModel saved;
  const std::string bytes =
      read_user_file(graph_file.string(), "SavedModel graph", kMaxSavedModelBytes);
  if (!saved.ParseFromString(bytes)) {
    throw DataLoss(graph_file.string() + " does not parse as a SavedModel (truncated or corrupt)");
  }
  const bool serve = std::any_of(
      saved.meta_graphs().begin(), saved.meta_graphs().end(), [](const tf::MetaGraphDef& meta) {
        const auto& tags = meta.meta_info_def().tags();
        return std::find(tags.begin(), tags.end(), kSavedModelServeTag) != tags.end();
      });
  if (!serve) {
    throw DataLoss(graph_file.string() + " holds " + std::to_string(saved.meta_graphs_size()) +
                   " MetaGraphDefs and none is tagged \"" + kSavedModelServeTag +
                   "\"; Trainyard's SavedModels have one, tagged so");
  }

  // The mark of a Trainyard SavedModel, and what rebuilds its model.
  const fs::path extra = fs::path(dir) / kSavedModelExtraDir;
  const fs::path config = extra / kSavedModelPipelineAsset;
  for (const fs::path& part : {extra, config.parent_path(), config}) {
    if (!exists_here(part)) {
      throw NotFound("the SavedModel " + dir + " was not written by Trainyard: it has no " +
                     kSavedModelExtraDir + "/" + kSavedModelPipelineAsset +
                     ", the pipeline Trainyard rebuilds the model from (`trainyard export "
                     "--format saved_model` writes it); the inference library loads only "
                     "Trainyard's exports");
    }
    check_within(root, part, dir);
  }
  SavedModelSource source;
  source.dir = dir;
  source.pipeline = load_pipeline_config(config);
  // No file outside the directory is read: the readers' data (never read by a session) is
  // dropped, and each file a reader's option names is the copy the export put beside the
  // pipeline, or, where there is none, the option is left out.
  auto local_files = [&](config::InputReader* input, const std::string& field) {
    input->clear_data_pattern();
    auto* params = input->mutable_reader()->mutable_params();
    for (int i = params->size() - 1; i >= 0; --i) {
      config::Param& param = params->at(i);
      const std::string& key = param.key();
      if (!param.has_string_value() || !names_saved_model_asset(key)) continue;
      const fs::path copy = extra / saved_model_asset_path(field, key);
      if (!param.string_value().empty() && exists_here(copy)) {
        check_within(root, copy, dir);
        param.set_string_value(copy.string());
      } else {
        params->DeleteSubrange(i, 1);
      }
    }
  };
  if (source.pipeline.has_train_input_reader()) {
    local_files(source.pipeline.mutable_train_input_reader(), "train_input_reader");
  }
  if (source.pipeline.has_eval_input_reader()) {
    local_files(source.pipeline.mutable_eval_input_reader(), "eval_input_reader");
  }

  const fs::path variables = fs::path(dir) / "variables";
  if (!exists_here(variables / "variables.index")) {
    throw NotFound("the SavedModel " + dir + " has no variables/variables.index, its variables' " +
                   "checkpoint");
  }
  check_within(root, variables, dir);
  // The files CheckpointReader opens: variables.index and variables.data-*.
  for (const fs::directory_entry& entry : fs::directory_iterator(variables)) {
    if (entry.path().filename().string().rfind("variables", 0) == 0) {
      check_within(root, entry.path(), dir);
    }
  }
  source.prefix = (variables / "variables").string();
  return source;
}

}  // namespace trainyard
