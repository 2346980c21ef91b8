// Subcommands of the `trainyard` host. Each takes the arguments after its name and returns
// the process exit status; errors a user can act on are thrown as trainyard::Error.
#ifndef TRAINYARD_APPS_TRAINYARD_COMMANDS_H_
#define TRAINYARD_APPS_TRAINYARD_COMMANDS_H_

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "trainyard/core/registry.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard::app {

// --plugin_path, shared by every subcommand that loads plugins.
boost::program_options::options_description plugin_path_options();
PluginRegistry::Settings registry_settings(const boost::program_options::variables_map& vm);

// Sets the param `key` of `spec` (a class of `kind`) from `text`, typed as the class declares
// the option. Throws ConfigError when the class declares no such option.
void set_typed_param(const PluginRegistry& registry, ClassKind kind, config::PluginSpec* spec,
                     const std::string& key, const std::string& text);
// Adds every option the pipeline's plugin classes declare and the config does not set, with
// its declared default (what `config print` shows).
void add_plugin_option_defaults(const PluginRegistry& registry, config::Pipeline& pipeline);

int run_plugins(const std::vector<std::string>& args);
int run_config(const std::vector<std::string>& args);
int run_data(const std::vector<std::string>& args);
// The dataset tools' lines of `trainyard --help` (data and coco-eval), ending in a blank line.
const char* data_tools_help();
int run_train(const std::vector<std::string>& args);
int run_train_and_evaluate(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_predict(const std::vector<std::string>& args);
int run_export(const std::vector<std::string>& args);
// coco_eval_command.cc
int run_coco_eval(const std::vector<std::string>& args);

// `export --format onnx` (onnx_command.cc): the flags --format, --output, --opset and
// --image_shape; whether they ask for ONNX (ConfigError for an unknown format); the export of
// the pipeline's model, restored from --checkpoint (default: the latest), to --output.
boost::program_options::options_description onnx_export_options();
bool onnx_format_requested(const boost::program_options::variables_map& vm);
int run_export_onnx(const PluginRegistry& registry, const config::Pipeline& pipeline,
                    const boost::program_options::variables_map& vm);
// --image_shape's "H,W,C" -> {H, W, C}; empty -> {} (ConfigError otherwise).
std::vector<int64_t> parse_image_shape(const std::string& text);

// `export --format saved_model` (saved_model_command.cc): the pipeline's image classifier,
// restored from --checkpoint (default: the latest), as a TensorFlow SavedModel in --export_dir.
bool saved_model_format_requested(const boost::program_options::variables_map& vm);
int run_export_saved_model(const PluginRegistry& registry, const config::Pipeline& pipeline,
                           const boost::program_options::variables_map& vm);

// `export --format tflite` (tflite_command.cc): the pipeline's image classifier, restored from
// --checkpoint (default: the latest), as a float32 TensorFlow Lite file at --output.
bool tflite_format_requested(const boost::program_options::variables_map& vm);
int run_export_tflite(const PluginRegistry& registry, const config::Pipeline& pipeline,
                      const boost::program_options::variables_map& vm);

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_COMMANDS_H_
