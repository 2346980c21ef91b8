// Subcommands of the `trainyard` host. Each takes the arguments after its name and returns
// the process exit status; errors a user can act on are thrown as trainyard::Error.
#ifndef TRAINYARD_APPS_TRAINYARD_COMMANDS_H_
#define TRAINYARD_APPS_TRAINYARD_COMMANDS_H_

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "trainyard/core/registry.h"

namespace trainyard::app {

// --plugin_path, shared by every subcommand that loads plugins.
boost::program_options::options_description plugin_path_options();
PluginRegistry::Settings registry_settings(const boost::program_options::variables_map& vm);

int run_plugins(const std::vector<std::string>& args);
int run_config(const std::vector<std::string>& args);
int run_data(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_predict(const std::vector<std::string>& args);
int run_export(const std::vector<std::string>& args);

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_COMMANDS_H_
