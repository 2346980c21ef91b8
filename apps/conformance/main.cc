// trainyard-conformance PLUGIN.so [--plugin_path=DIRS] [--seed=N] [--option=CLASS.NAME=VALUE]...
//                       [gtest flags]
//
// Loads PLUGIN.so through the plugin registry (its directory first on the plugin path, then
// --plugin_path, TRAINYARD_PLUGIN_PATH and the build or install directories, where the CPU
// reference backend is found) and runs the standard checks on every class it provides, one
// GoogleTest suite per class: "Backend/cpu", "Model/LogisticModel", "Loss/HingeLoss", ...
// Exit status: 0 when every check passed or was skipped, 1 when one failed, 2 on bad usage or
// a library that cannot be used.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "conformance.h"
#include "stream_checks.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"

namespace trainyard::conformance {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: trainyard-conformance PLUGIN.so [--plugin_path=DIR[:DIR...]] [--seed=N] "
    "[--option=CLASS.NAME=VALUE]... [--gtest_filter=...] [other GoogleTest flags]\n"
    "Runs the Trainyard conformance checks on every class that PLUGIN.so provides.\n"
    "  --plugin_path  more directories to search for plugins (the CPU reference backend is\n"
    "                 found on the ordinary search path: TRAINYARD_PLUGIN_PATH, then the build\n"
    "                 or install directory of libtrainyard_core)\n"
    "  --seed         base seed of every random input (default 1701); failures print it\n"
    "  --option       create CLASS with option NAME=VALUE instead of its default (repeatable;\n"
    "                 e.g. a model's sizes, to check it at a small size)\n"
    "  --gtest_list_tests lists the checks, --gtest_filter selects some.\n";

std::vector<fs::path> split_path(const std::string& text) {
  std::vector<fs::path> dirs;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ':')) {
    if (!item.empty()) dirs.emplace_back(item);
  }
  return dirs;
}

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c;
}

int run(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Suite& s = mutable_suite();
  s.program = argc > 0 ? argv[0] : "trainyard-conformance";
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value_of = [&](std::string_view flag, std::string* out) {
      if (arg.substr(0, flag.size()) != flag) return false;
      std::string_view rest = arg.substr(flag.size());
      if (rest.empty() && i + 1 < argc) {
        *out = argv[++i];
        return true;
      }
      if (!rest.empty() && rest[0] == '=') {
        *out = std::string(rest.substr(1));
        return true;
      }
      return false;
    };
    std::string value;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (value_of("--plugin_path", &value)) {
      s.plugin_path_arg = value;
    } else if (value_of("--seed", &value)) {
      char* end = nullptr;
      s.seed = std::strtoull(value.c_str(), &end, 0);
      if (end == value.c_str() || *end != '\0') {
        std::cerr << "trainyard-conformance: --seed '" << value << "' is not a number\n" << kUsage;
        return 2;
      }
    } else if (value_of("--option", &value)) {
      // CLASS.NAME=VALUE
      const std::size_t dot = value.find('.'), eq = value.find('=');
      if (dot == std::string::npos || eq == std::string::npos || dot == 0 || eq < dot + 2) {
        std::cerr << "trainyard-conformance: --option '" << value << "' is not CLASS.NAME=VALUE\n"
                  << kUsage;
        return 2;
      }
      s.class_options[value.substr(0, dot)][value.substr(dot + 1, eq - dot - 1)] =
          value.substr(eq + 1);
      s.option_args.push_back(value);
    } else if (arg.size() > 1 && arg[0] == '-') {
      std::cerr << "trainyard-conformance: unknown flag '" << arg << "'\n" << kUsage;
      return 2;
    } else {
      positional.emplace_back(arg);
    }
  }
  if (positional.size() != 1) {
    std::cerr << "trainyard-conformance: expected one plugin library, got " << positional.size()
              << "\n"
              << kUsage;
    return 2;
  }
  s.library_arg = positional[0];
  if (!fs::is_regular_file(s.library_arg)) {
    std::cerr << "trainyard-conformance: " << s.library_arg << " is not a file\n";
    return 2;
  }
  s.library = canonical_or_self(s.library_arg);

  PluginRegistry::Settings settings;
  settings.plugin_path.push_back(s.library.parent_path());
  for (const fs::path& dir : split_path(s.plugin_path_arg)) settings.plugin_path.push_back(dir);
  s.registry = std::make_shared<PluginRegistry>(settings);

  for (const LibraryProblem& problem : s.registry->problems()) {
    if (canonical_or_self(problem.library) == s.library) {
      std::cerr << "trainyard-conformance: " << problem.message << "\n";
      return 2;
    }
  }
  std::vector<ClassInfo> classes;
  for (const ClassInfo& info : s.registry->classes()) {
    if (canonical_or_self(info.library) == s.library) classes.push_back(info);
  }
  if (classes.empty()) {
    std::cerr << "trainyard-conformance: " << s.library_arg
              << " provides no usable class (not a Trainyard plugin, or shadowed by a library "
                 "of the same file name earlier on the plugin path)\n";
    return 2;
  }

  for (const auto& [class_name, unused] : s.class_options) {
    const bool known = std::any_of(classes.begin(), classes.end(), [&](const ClassInfo& info) {
      return info.class_name == class_name;
    });
    if (!known) {
      std::cerr << "trainyard-conformance: --option names class '" << class_name << "', which "
                << s.library_arg << " does not provide\n";
      return 2;
    }
  }
  std::cout << "trainyard-conformance: " << s.library.string() << " (plugin "
            << classes[0].plugin_name << " " << classes[0].plugin_version << "), " << classes.size()
            << (classes.size() == 1 ? " class" : " classes") << ", seed " << s.seed << "\n";
  for (const ClassInfo& info : classes) {
    std::cout << "  " << class_kind_name(info.kind) << " " << info.class_name << "\n";
    switch (info.kind) {
      case ClassKind::kBackend:
        register_backend_checks(info);
        register_stream_checks(info);
        break;
      case ClassKind::kModel:
        register_model_checks(info);
        break;
      case ClassKind::kReader:
        register_reader_checks(info);
        break;
      case ClassKind::kLoss:
        register_loss_checks(info);
        break;
      case ClassKind::kOptimizer:
        register_optimizer_checks(info);
        break;
      case ClassKind::kCollective:
        register_collective_checks(info);
        break;
      case ClassKind::kDetectionModel:
      case ClassKind::kTask: {
        std::string kind = class_kind_name(info.kind);
        std::cout << "    no checks for kind " << kind << " yet: only creation is checked\n";
        register_check(
            (info.kind == ClassKind::kTask ? "Task/" : "DetectionModel/") + info.class_name,
            "CreatesWithDefaults", [info] { create_default<PluginObject>(info); });
        break;
      }
    }
  }
  return RUN_ALL_TESTS();
}

}  // namespace
}  // namespace trainyard::conformance

int main(int argc, char** argv) {
  try {
    return trainyard::conformance::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "trainyard-conformance: " << e.what() << "\n";
    return 2;
  }
}
