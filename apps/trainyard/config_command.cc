// trainyard config check FILE | print FILE
#include <iostream>

#include "commands.h"
#include "trainyard/core/config.h"
#include "trainyard/core/config_validation.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"

namespace po = boost::program_options;

namespace trainyard::app {

int run_config(const std::vector<std::string>& args) {
  po::options_description options("trainyard config check FILE | print FILE");
  options.add_options()("help,h", "this help")("action", po::value<std::string>(),
                                               "check or print")(
      "pipeline_config_path", po::value<std::string>(), "a pipeline config (text format)");
  options.add(plugin_path_options());
  po::positional_options_description positional;
  positional.add("action", 1).add("pipeline_config_path", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help") || !vm.count("action")) {
    std::cout << options << "\n";
    return vm.count("help") ? 0 : 2;
  }
  if (!vm.count("pipeline_config_path")) {
    throw InvalidArgument("config needs a pipeline config file (--pipeline_config_path)");
  }
  const std::string action = vm["action"].as<std::string>();
  const std::string path = vm["pipeline_config_path"].as<std::string>();
  PluginRegistry registry(registry_settings(vm));
  load_config_dialects(registry);
  config::Pipeline pipeline;
  try {
    pipeline = load_pipeline_config(path);
  } catch (const ConfigError& e) {
    throw ConfigError(with_config_line(e.what(), path));  // a config dialect's field's
  }
  if (action == "print") {
    add_plugin_option_defaults(registry, pipeline);
    // The task's too: its name where the config names none, its train_dir where it sets none.
    const std::shared_ptr<const Task> task = make_task(registry, pipeline.task());
    pipeline.set_task(task->plugin_origin().class_name);
    if (!pipeline.train_config().has_train_dir() && !task->defaults().train_dir.empty()) {
      pipeline.mutable_train_config()->set_train_dir(task->defaults().train_dir);
    }
    std::cout << pipeline_config_to_text(pipeline, /*with_defaults=*/true);
    return 0;
  }
  if (action == "check") {
    try {
      check_pipeline_plugins(pipeline, registry);
      // The checks train runs before it starts, each naming the field.
      validate_pipeline(pipeline, path);
      // What train builds before its first step, built and not run (the model's parts, readers
      // with their label maps): a config that passes here does not fail at once in train.
      check_pipeline_builds(registry, pipeline);
    } catch (const Error& e) {
      // With the line that sets the field or option the error names.
      throw ConfigError(with_config_line(e.what(), path));
    }
    std::cout << path << ": OK\n";
    return 0;
  }
  throw InvalidArgument("unknown config action '" + action + "'; use check or print");
}

}  // namespace trainyard::app
