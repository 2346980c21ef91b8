// trainyard plugins list | describe NAME | check | ops
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <numeric>
#include <set>

#include "commands.h"
#include "trainyard/backend.h"
#include "trainyard/collective.h"
#include "trainyard/core/progress.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/tensor.h"

namespace po = boost::program_options;

namespace trainyard::app {
namespace {

void print_search_dirs(const PluginRegistry& registry, std::ostream& out) {
  out << "Searched:\n";
  for (const PluginSearchDir& dir : registry.dirs()) {
    out << "  " << dir.dir.string() << "  (" << dir.origin << ")\n";
  }
}

void print_problems(const PluginRegistry& registry) {
  for (const LibraryProblem& problem : registry.problems()) {
    std::cerr << "trainyard: warning: " << problem.message << "\n";
  }
}

int list(const PluginRegistry& registry) {
  std::size_t kind_w = 4, class_w = 5, plugin_w = 6, version_w = 7;
  for (const ClassInfo& c : registry.classes()) {
    kind_w = std::max(kind_w, std::string(class_kind_name(c.kind)).size());
    class_w = std::max(class_w, c.class_name.size());
    plugin_w = std::max(plugin_w, c.plugin_name.size());
    version_w = std::max(version_w, c.plugin_version.size());
  }
  auto row = [&](const std::string& kind, const std::string& cls, const std::string& plugin,
                 const std::string& version, const std::string& library) {
    std::cout << std::left << std::setw(static_cast<int>(kind_w) + 2) << kind
              << std::setw(static_cast<int>(class_w) + 2) << cls
              << std::setw(static_cast<int>(plugin_w) + 2) << plugin
              << std::setw(static_cast<int>(version_w) + 2) << version << library << "\n";
  };
  row("KIND", "CLASS", "PLUGIN", "VERSION", "LIBRARY");
  for (const ClassInfo& c : registry.classes()) {
    row(class_kind_name(c.kind), c.class_name, c.plugin_name, c.plugin_version, c.library.string());
  }
  std::cout << "\n" << registry.classes().size() << " classes\n";
  print_search_dirs(registry, std::cout);
  print_problems(registry);
  return 0;
}

// Every op and composite the core declares, for backend authors: name, family, arity,
// attribute struct (op.h) and what it computes.
int list_ops() {
  for (const OpInfo& op : declared_ops()) {
    std::cout << op.name << "  [" << op.family << "] " << op.num_inputs << " -> " << op.num_outputs
              << (op.attrs_size > 0 ? std::string(", ") + op.attrs : "") << "\n      " << op.summary
              << "\n";
  }
  return 0;
}

int describe(const PluginRegistry& registry, const std::string& name) {
  const ClassInfo& info = registry.find_any(name);
  PluginRegistry::ClassDeclaration declaration = registry.describe(info);
  std::cout << name << " (" << class_kind_name(info.kind) << ")\n"
            << "  " << declaration.summary << "\n"
            << "  plugin:  " << info.plugin_name << " " << info.plugin_version << "\n"
            << "  library: " << info.library.string() << "\n\n";
  if (declaration.options.empty()) {
    std::cout << "Options: none\n";
  } else {
    std::cout << "Options:\n";
    for (const auto& option : declaration.options) {
      std::cout << "  " << option.name << " (" << option_type_name(option.type) << ", default \""
                << option.default_value << "\")\n      " << option.help << "\n";
    }
  }
  if (info.kind == ClassKind::kBackend) {
    auto backend = std::dynamic_pointer_cast<Backend>(registry.create(info, {}));
    if (!backend) throw PluginError(name + " is registered as a backend but is not a Backend");
    std::set<std::string> registered;
    for (const KernelRegistration& k : backend->kernels()) registered.insert(k.op);
    // By family, in the core's declaration order; then what the backend leaves out.
    std::map<std::string, std::vector<std::string>> by_family;
    std::vector<std::string> missing, fused;
    std::size_t num_ops = 0;
    for (const OpInfo& op : declared_ops()) {
      if (op.composite) {
        if (registered.count(op.name)) fused.emplace_back(op.name);
        continue;
      }
      ++num_ops;
      (registered.count(op.name) ? by_family[op.family] : missing).emplace_back(op.name);
    }
    std::cout << "\nOps on " << backend->device_name() << " (" << num_ops - missing.size()
              << " of the core's " << num_ops << "):\n";
    for (const auto& [family, names] : by_family) {
      std::cout << "  " << family << ":";
      for (const std::string& n : names) std::cout << " " << n;
      std::cout << "\n";
    }
    if (!fused.empty()) {
      std::cout << "  fused composites:";
      for (const std::string& n : fused) std::cout << " " << n;
      std::cout << "\n";
    }
    if (!missing.empty()) {
      std::cout << "  not implemented:";
      for (const std::string& n : missing) std::cout << " " << n;
      std::cout << "\n";
    }
  }
  return 0;
}

// Round-trips a tensor through the backend's memory.
std::string check_backend(Backend& backend) {
  std::vector<float> values(4099);
  std::iota(values.begin(), values.end(), -7.5f);
  Tensor t = Tensor::from_vector(backend, Shape{static_cast<int64_t>(values.size())}, values);
  if (t.to_vector<float>() != values) throw Error("a host -> device -> host copy changed values");
  Tensor empty = Tensor::empty(backend, Shape{0, 3}, DType::kF32);
  if (!empty.to_vector<float>().empty()) throw Error("an empty tensor read back elements");
  std::string ops_checked;
  if (!backend.kernels().empty()) {
    // A small computation through the backend's kernels: sum((t + t) * 0.5) == sum(t).
    Tensor twice = ops::add(t, t);
    double sum = ops::reduce_sum(ops::mul(twice, 0.5)).to_vector<float>()[0];
    double expected = 0.0;
    for (float v : values) expected += v;
    if (std::abs(sum - expected) > 1e-3 * std::abs(expected) + 1e-3) {
      throw Error("sum((t + t) * 0.5) gave " + std::to_string(sum) + ", expected " +
                  std::to_string(expected));
    }
    ops_checked = ", add/mul/reduce_sum agree";
  }
  backend.synchronize();
  return "device " + backend.device_name() + ", round trip of " + t.description() + " exact" +
         ops_checked + ", " + std::to_string(backend.kernels().size()) + " ops";
}

// The all_reduce runs on the cpu backend's tensors; a device collective (NCCL) refuses those
// with InvalidArgument, and then runs it on the tensors of the first other usable backend on
// the plugin path whose tensors it takes.
std::string check_collective(Collective& collective, const PluginRegistry& registry) {
  if (collective.world_size() < 1 || collective.rank() < 0 ||
      collective.rank() >= collective.world_size()) {
    throw Error("rank " + std::to_string(collective.rank()) + " of world size " +
                std::to_string(collective.world_size()) + " is inconsistent");
  }
  std::vector<float> values = {1.0f, -2.0f, 3.5f};
  std::vector<float> reduced;
  std::string device;
  auto all_reduce_on = [&](const std::string& backend_class) {
    auto backend = registry.create<Backend>(ClassKind::kBackend, backend_class);
    Tensor t = Tensor::from_vector(*backend, Shape{3}, values);
    collective.all_reduce(t, ReduceOp::kSum);
    reduced = t.to_vector<float>();
    device = backend->device_name();
  };
  try {
    all_reduce_on("cpu");
  } catch (const InvalidArgument&) {
    bool taken = false;
    for (const ClassInfo& info : registry.classes()) {
      if (taken || info.kind != ClassKind::kBackend || info.class_name == "cpu") continue;
      try {
        all_reduce_on(info.class_name);
        taken = true;
      } catch (const Error&) {
        // not usable here, or not taken: the next one
      }
    }
    if (!taken) throw;
  }
  if (collective.world_size() == 1 && reduced != values) {
    throw Error("all_reduce over one replica changed the values");
  }
  collective.barrier();
  return "rank " + std::to_string(collective.rank()) + " of " +
         std::to_string(collective.world_size()) + ", all_reduce on " + device +
         " and barrier done";
}

int check(const PluginRegistry& registry) {
  int failures = 0;
  Progress progress("plugins check", "classes", std::ssize(registry.classes()), std::cout);
  for (const ClassInfo& info : registry.classes()) {
    std::string detail;
    try {
      std::shared_ptr<PluginObject> object = registry.create(info, {});
      guard_plugin_call(*object, [&] {
        if (auto* backend = dynamic_cast<Backend*>(object.get())) {
          detail = check_backend(*backend);
        } else if (auto* collective = dynamic_cast<Collective*>(object.get())) {
          detail = check_collective(*collective, registry);
        } else {
          detail = "created with default options";
        }
      });
      progress.above() << "ok    " << std::left << std::setw(17) << class_kind_name(info.kind)
                       << std::setw(28) << info.class_name << detail << "\n";
    } catch (const Unimplemented& e) {
      progress.above() << "skip  " << std::left << std::setw(17) << class_kind_name(info.kind)
                       << std::setw(28) << info.class_name << e.what() << "\n";
    } catch (const Error& e) {
      ++failures;
      progress.above() << "FAIL  " << std::left << std::setw(17) << class_kind_name(info.kind)
                       << std::setw(28) << info.class_name << e.what() << "\n";
    }
    progress.advance();
  }
  progress.finish();
  for (const LibraryProblem& problem : registry.problems()) {
    ++failures;
    std::cout << "FAIL  " << problem.message << "\n";
  }
  std::cout << registry.classes().size() << " classes checked, " << failures << " failures\n";
  return failures == 0 ? 0 : 1;
}

}  // namespace

int run_plugins(const std::vector<std::string>& args) {
  po::options_description options("trainyard plugins list | describe NAME | check | ops");
  options.add_options()("help,h", "this help")(
      "action", po::value<std::string>()->default_value("list"), "list, describe, check or ops")(
      "name", po::value<std::string>(), "class name for describe");
  options.add(plugin_path_options());
  po::positional_options_description positional;
  positional.add("action", 1).add("name", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  PluginRegistry registry(registry_settings(vm));
  const std::string action = vm["action"].as<std::string>();
  if (action == "list") return list(registry);
  if (action == "check") return check(registry);
  if (action == "ops") return list_ops();
  if (action == "describe") {
    if (!vm.count("name")) throw InvalidArgument("plugins describe needs a class name");
    print_problems(registry);
    return describe(registry, vm["name"].as<std::string>());
  }
  throw InvalidArgument("unknown plugins action '" + action + "'; use list, describe or check");
}

}  // namespace trainyard::app
