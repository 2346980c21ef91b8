// Reading, checking and printing pipeline configs (core/proto/pipeline.proto).
#ifndef TRAINYARD_CORE_CONFIG_H_
#define TRAINYARD_CORE_CONFIG_H_

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "trainyard/core/registry.h"
#include "trainyard/export.h"
#include "trainyard/options.h"
#include "trainyard/plugin.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

// Parses protobuf text format: Trainyard's Pipeline, or a config of a task's originals read by
// the config dialect the task registers (trainyard/config_dialect.h; the detection task's reads
// the Object Detection API's pipeline.config), converted. The dialects are those of the task
// plugins loaded (load_config_dialects). Throws ConfigError "SOURCE:LINE:COLUMN: message"
// (1-based) for syntax errors and unknown fields, of the format that read furthest.
TRAINYARD_API config::Pipeline parse_pipeline_config(std::string_view text,
                                                     std::string_view source_name);
// The largest pipeline config read (the Object Detection API's are a few KiB).
inline constexpr uint64_t kMaxPipelineConfigBytes = uint64_t{64} << 20;
// Reads and parses a file; throws ConfigError naming the file when it is missing, is not a
// regular file (a directory, FIFO or device) or cannot be read; InvalidArgument when it holds
// more than kMaxPipelineConfigBytes.
TRAINYARD_API config::Pipeline load_pipeline_config(const std::filesystem::path& path);
// Loads every task plugin's library, so that the config dialects and input transform types the
// tasks register are there for parse_pipeline_config and the input pipeline. A library that
// registers them stays loaded until the process ends. A task whose library cannot be loaded is
// passed over here (the command that uses it fails with the registry's message), and a text
// that no format reads gets an error that names it and every library the registry could not
// use.
TRAINYARD_API void load_config_dialects(const PluginRegistry& registry);
// `message` with " (PATH line N)" appended when it names a field or plugin option that the
// config file at `path` sets on exactly one line: a field path as errors write it
// ("model.ssd.image_resizer.fixed_shape_resizer.height", "train_config.optimizer.params.l2"),
// or, in a config dialect's file, an option of the model as its plugin names it
// ("feature_extractor.depth_multiplier", the path below the dialect's model_param_prefixes:
// model.ssd or model.faster_rcnn in an Object Detection API pipeline.config).
// The longest such name in the message counts. The message comes back unchanged when it names
// none, when the name is set on several lines, or when the file cannot be read or parsed.
TRAINYARD_API std::string with_config_line(const std::string& message, const std::string& path);

// The text format of `pipeline`, with every default made explicit when `with_defaults`.
TRAINYARD_API std::string pipeline_config_to_text(const config::Pipeline& pipeline,
                                                  bool with_defaults);

// The params of a plugin spec as typed values. `where` names the field in errors
// ("train_config.optimizer"). Throws ConfigError for a param without key or value, or a key
// given twice.
TRAINYARD_API std::map<std::string, OptionValue> plugin_params(const config::PluginSpec& spec,
                                                               std::string_view where);

// Checks every plugin section that the config sets: the class exists and is of the right kind,
// and its params match the declared options. Throws ConfigError naming the section, with the
// registry's message (known names, nearest match, valid options).
TRAINYARD_API void check_pipeline_plugins(const config::Pipeline& pipeline,
                                          const PluginRegistry& registry);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_CONFIG_H_
