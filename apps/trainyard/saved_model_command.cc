// `trainyard export --format saved_model`: the model of a train_dir as a TensorFlow SavedModel
// directory (saved_model_export.h).
#include <iostream>
#include <string>

#include "commands.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/error.h"

namespace po = boost::program_options;

namespace trainyard::app {

bool saved_model_format_requested(const po::variables_map& vm) {
  return vm["format"].as<std::string>() == "saved_model";
}

int run_export_saved_model(const PluginRegistry& registry, const config::Pipeline& pipeline,
                           const po::variables_map& vm) {
  const std::string& export_dir = vm["export_dir"].as<std::string>();
  if (export_dir.empty()) {
    throw ConfigError("--format saved_model needs --export_dir, the SavedModel directory to write");
  }
  export_saved_model(registry, pipeline, vm["checkpoint"].as<std::string>(), export_dir, std::cout,
                     parse_image_shape(vm["image_shape"].as<std::string>()),
                     vm["input_type"].as<std::string>());
  return 0;
}

}  // namespace trainyard::app
