// trainyard: the host. Wires plugins together from flags and pipeline configs.
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "commands.h"
#include "trainyard/abi.h"
#include "trainyard/core/compute_threads.h"
#include "trainyard/core/host_malloc.h"
#include "trainyard/core/stop_signals.h"
#include "trainyard/error.h"

namespace po = boost::program_options;

namespace trainyard::app {

po::options_description plugin_path_options() {
  po::options_description options("Plugin options");
  options.add_options()("plugin_path", po::value<std::string>()->default_value(""),
                        "colon-separated directories searched for plugin libraries before "
                        "TRAINYARD_PLUGIN_PATH, the build tree and the install location");
  return options;
}

PluginRegistry::Settings registry_settings(const po::variables_map& vm) {
  PluginRegistry::Settings settings;
  std::string list = vm.count("plugin_path") ? vm["plugin_path"].as<std::string>() : "";
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t colon = list.find(':', start);
    std::string part = list.substr(start, colon - start);
    if (!part.empty()) settings.plugin_path.emplace_back(part);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return settings;
}

namespace {

void print_help(std::ostream& out) {
  out << "Usage: trainyard COMMAND [options]\n\n"
         "Trainyard trains TensorFlow 1.x-style models natively from the originals' flags and\n"
         "pipeline configs, with tasks, models, readers, losses, optimizers and devices as\n"
         "plugins (trainyard plugins list).\n\n"
         "Commands:\n"
         "  train --train_data_pattern=P --train_dir=D [--model=CLASS ...]\n"
         "                               train as the originals' train.py (train --help)\n"
         "  train_and_evaluate --pipeline_config_path=F [--model_dir=D --num_train_steps=N]\n"
         "                               train, evaluating after checkpoints and exporting as\n"
         "                               tf.estimator.train_and_evaluate\n"
         "  eval --eval_data_pattern=P --train_dir=D\n"
         "                               the task's metrics of the latest checkpoint\n"
         "  predict --train_dir=D --input_data_pattern=P --output_file=F [--top_k=20]\n"
         "                               the task's predictions file (inference.py's CSV)\n"
         "  export --train_dir=D --export_dir=E\n"
         "                               weights, config and the run's record, for predict\n"
         "  export --train_dir=D --format=onnx --output=F [--opset=13]\n"
         "                               the model as ONNX (opsets 13-17; export --help)\n"
         "  export --train_dir=D --format=saved_model --export_dir=E\n"
         "                               the model as a TensorFlow SavedModel (export --help)\n"
         "  export --train_dir=D --format=tflite --output=F\n"
         "                               the model as a float32 TFLite model (export --help)\n"
         "  plugins list                 list plugin classes: kind, class, plugin, version, "
         "library\n"
         "  plugins describe NAME        a class's declared options (a backend's ops)\n"
         "  plugins check                create every class with its defaults and exercise it\n"
         "  config check FILE            parse a pipeline config and check its plugin classes\n"
         "  config print FILE            print a pipeline config with every default explicit\n"
      << data_tools_help()
      << "General options:\n"
         "  -h [ --help ]                this help; `trainyard COMMAND --help` for a command\n"
         "  --version                    the Trainyard and SDK ABI versions\n\n"
      << plugin_path_options() << "\nEnvironment:\n"
      << "  TRAINYARD_PLUGIN_PATH        colon-separated plugin directories\n";
}

// "PATH: cannot create directories: Not a directory" from libstdc++'s "filesystem error: cannot
// create directories: Not a directory [PATH]".
std::string describe_filesystem_error(const std::filesystem::filesystem_error& e) {
  std::string paths;
  for (const std::filesystem::path* p : {&e.path1(), &e.path2()}) {
    if (!p->empty()) paths += (paths.empty() ? "" : " -> ") + p->string();
  }
  std::string what = e.what();
  const std::string prefix = "filesystem error: ";
  if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
  if (const auto bracket = what.find(" ["); bracket != std::string::npos) what.erase(bracket);
  return paths.empty() ? what : paths + ": " + what;
}

}  // namespace
}  // namespace trainyard::app

int main(int argc, char** argv) {
  using namespace trainyard::app;
  std::vector<std::string> args(argv + 1, argv + argc);
  // compute_threads.h: before the cpu backend loads libgomp, and before other threads (setenv).
  trainyard::bound_compute_thread_spinning();
  try {
    // Before any other thread starts (stop_signals.h): only the signal thread receives them.
    trainyard::route_stop_signals_to_a_thread();
  } catch (const trainyard::Error& e) {
    std::cerr << "trainyard: error: " << e.what() << "\n";
    return 1;
  }
  trainyard::tune_malloc_for_training();  // host_malloc.h: the input pipeline's record buffers
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      print_help(std::cout);
      return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version") {
      std::cout << "trainyard " << TRAINYARD_VERSION_STRING << " (SDK ABI "
                << trainyard::kSdkAbiVersion << ")\n";
      return 0;
    }
    const std::string command = args[0];
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (command == "plugins") return run_plugins(rest);
    if (command == "config") return run_config(rest);
    if (command == "data") return run_data(rest);
    if (command == "train") return run_train(rest);
    if (command == "train_and_evaluate") return run_train_and_evaluate(rest);
    if (command == "eval") return run_eval(rest);
    if (command == "predict") return run_predict(rest);
    if (command == "export") return run_export(rest);
    if (command == "coco-eval") return run_coco_eval(rest);
    std::cerr << "trainyard: unknown command '" << command
              << "'. Commands: train, train_and_evaluate, eval, predict, export, plugins, config, "
                 "data, coco-eval. See trainyard "
                 "--help.\n";
    return 2;
  } catch (const po::error& e) {
    std::cerr << "trainyard: " << e.what() << ". See trainyard --help.\n";
    return 2;
  } catch (const trainyard::Stopped& e) {
    std::cerr << "trainyard: " << e.what() << "\n";
    return 128 + e.signal_number();
  } catch (const trainyard::Error& e) {
    std::cerr << "trainyard: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc& e) {
    // An allocation at a file or config boundary is bounded where it is read; what is left is
    // a run larger than the memory it is allowed (batch_size, shuffle buffers, ulimit -v).
    std::cerr << "trainyard: error: out of memory (" << e.what()
              << "): the run needs more memory than this process may use\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A symlink loop, a read-only train_dir, an output path that is a file: the user's to fix.
    std::cerr << "trainyard: error: " << describe_filesystem_error(e) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "trainyard: internal error: " << e.what() << "\n";
    return 1;
  }
}
