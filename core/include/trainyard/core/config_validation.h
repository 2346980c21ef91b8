// The checks of a pipeline's values that run before anything else does (train,
// train_and_evaluate, eval, predict, export and `config check` share them): no float field or
// plugin param is NaN or infinite, no size, step count, interval or rate is negative, batch
// sizes are at least 1, decay factors and probabilities lie in their ranges, and the
// learning-rate schedule and input transforms accept their parameters. Path arguments are
// checked to be the kind of file system entry they name.
#ifndef TRAINYARD_CORE_CONFIG_VALIDATION_H_
#define TRAINYARD_CORE_CONFIG_VALIDATION_H_

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "trainyard/export.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

class PluginRegistry;

// The command-line flag that set a field, by the field's path: "train_config.batch_size" ->
// "batch_size"; a plugin param by "<section>.params.<key>" ("model.params.l2_penalty" ->
// "l2_penalty"). A field absent here came from `source` (the config file) or its default.
using FieldFlags = std::map<std::string, std::string>;

// Throws ConfigError listing every invalid value. Each names the field and, when a flag set
// it, the flag: "--base_learning_rate is nan
// (train_config.learning_rate.exponential_decay_examples.base_learning_rate); it must be a
// finite number", or "SOURCE: train_config.batch_size is -5; it must be at least 1". Several
// problems are joined with "; " after "N invalid values: ".
TRAINYARD_API void validate_pipeline(const config::Pipeline& pipeline, std::string_view source = {},
                                     const FieldFlags& flags = {});

// Builds what a run of `pipeline` builds before its first step, and runs none of it: the model
// with its parts (feature extractor, box predictor, anchors, losses, post-processing), the label
// loss, the optimizer and the training and evaluation readers with the files they read at
// construction (label maps). Throws the first ConfigError a run would meet, naming the section
// ("model: SSDMetaArch: feature_extractor.type ..."). `config check` runs it after
// validate_pipeline.
TRAINYARD_API void check_pipeline_builds(const PluginRegistry& registry,
                                         const config::Pipeline& pipeline);

// A path that must name a regular file to read (a pipeline config), given as `name` (a flag,
// "--pipeline_config_path", or a config field): throws ConfigError "NAME: PATH is a directory;
// expected WHAT" for a directory, FIFO, socket or device (reading a FIFO would block, a device
// would never end), and "NAME: PATH does not exist" when nothing is there.
TRAINYARD_API void check_input_file(const std::filesystem::path& path, std::string_view name,
                                    std::string_view what);

// A path that must name a directory wherever something exists there (train_dir, created when
// missing), given as `name`: throws ConfigError "NAME: PATH is a regular file; expected a
// directory" (or a FIFO, socket or device).
TRAINYARD_API void check_directory_argument(const std::filesystem::path& path,
                                            std::string_view name);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_CONFIG_VALIDATION_H_
