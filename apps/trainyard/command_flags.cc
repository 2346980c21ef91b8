// The flag plumbing that train, train_and_evaluate, eval, predict and export share
// (command_flags.h).
#include "command_flags.h"

#include <algorithm>
#include <charconv>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "flag_tables.h"
#include "trainyard/core/config.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/names.h"

namespace trainyard::app {

namespace po = boost::program_options;

namespace {

// Why `key` is no flag: a prefix of flags (not accepted, naming them) or the nearest name.
std::string unknown_flag_message(const std::string& key, const std::vector<std::string>& names) {
  std::vector<std::string> extended;
  for (const std::string& name : names) {
    if (name.size() > key.size() && name.rfind(key, 0) == 0) extended.push_back("--" + name);
  }
  std::string message = "unknown flag --" + key;
  if (!extended.empty()) {
    message += ": a prefix of a flag is not accepted; did you mean ";
    for (std::size_t i = 0; i < extended.size(); ++i) {
      message += (i == 0 ? "" : i + 1 == extended.size() ? " or " : ", ") + extended[i];
    }
    return message + "?";
  }
  const std::string nearest = nearest_name(key, names);
  if (!nearest.empty()) message += ": did you mean --" + nearest + "?";
  return message;
}

}  // namespace

void add_input_flags(po::options_description& d) {
  d.add_options()("feature_names", po::value<std::string>(),
                  "comma-separated feature names (default: the task's; rgb,audio for frame-level "
                  "data)")("feature_sizes", po::value<std::string>(),
                           "comma-separated feature sizes, one per name (default: the task's)")(
      "frame_features", po::value<bool>()->default_value(false)->implicit_value(true),
      "frame-level input (tf.SequenceExample, read by the task's frame-level reader)")(
      "reader", po::value<std::string>(), "reader class (default from --frame_features)");
  add_config_flags(d, kInputFlags, kInputGroup);
  d.add_options()("pipeline_config_path", po::value<std::string>(),
                  "a pipeline config; flags override it")("print_config", po::bool_switch(),
                                                          "print the effective config and exit")(
      "num_threads", po::value<int>(), "compute threads (default OMP_NUM_THREADS or all cores)")(
      "precision", po::value<std::string>(),
      "compute precision: f32 (default); bf16: matmuls and convolutions in bf16 with f32 "
      "weights, outputs and accumulation (an error without AVX-512 BF16 or AMX); bf16_or_f32: "
      "bf16 where the CPU has it, else f32 with a warning")("backend", po::value<std::string>(),
                                                            "backend class: cpu (default) or cuda")(
      "device_index", po::value<int>(), "which device of the backend (cuda:N)");
}

// --backend, --device_index, --num_threads and --precision into the pipeline's backend section.
// Another class drops the params given for the previous one: they are that class's options.
void apply_backend_flags(const po::variables_map& vm, config::Pipeline& p) {
  config::BackendConfig* backend = p.mutable_backend();
  if (vm.count("backend") && vm["backend"].as<std::string>() != backend->class_()) {
    backend->set_class_(vm["backend"].as<std::string>());
    backend->clear_params();
    backend->clear_num_threads();
    backend->clear_precision();
  }
  // A flag wins over a param of the same name in the config.
  auto drop_param = [backend](const std::string& key) {
    auto* params = backend->mutable_params();
    for (int i = params->size() - 1; i >= 0; --i) {
      if (params->Get(i).key() == key) params->DeleteSubrange(i, 1);
    }
  };
  if (vm.count("device_index")) {
    backend->set_device_index(vm["device_index"].as<int>());
    drop_param("device_index");
  }
  if (vm.count("num_threads")) {
    backend->set_num_threads(vm["num_threads"].as<int>());
    drop_param("num_threads");
  }
  if (vm.count("precision")) {
    backend->set_precision(vm["precision"].as<std::string>());
    drop_param("precision");
  }
}

// A double flag whose default --help prints as written ("0.95", not "0.94999999999999996"):
// the shortest text that reads back as the same double.
po::typed_value<double>* real(double value) {
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  return po::value<double>()->default_value(
      value, error == std::errc() ? std::string(text, end) : std::to_string(value));
}

bool given(const po::variables_map& vm, const char* name) {
  return vm.count(name) && !vm[name].defaulted();
}

// Applies the input flags to one input reader section. For a task whose flag dialect does not
// take the starter code's input-layout flags, the reader is the config's (or the task's default)
// and only flags given on the command line apply.
void apply_input_flags(const PluginRegistry& registry, const po::variables_map& vm,
                       config::InputReader* input, int64_t num_classes, const std::string& task,
                       const TaskDefaults& defaults, const TaskFlagDialect& dialect) {
  config::PluginSpec* reader = input->mutable_reader();
  if (!dialect.starter_flags) {
    if (vm.count("reader")) reader->set_class_(vm["reader"].as<std::string>());
    for (const char* flag : {"feature_names", "feature_sizes", "frame_features"}) {
      if (given(vm, flag)) {
        throw ConfigError(std::string("--") + flag +
                          " is an input-layout flag of the starter code's dialect, which the "
                          "task '" +
                          task + "' of this pipeline does not take");
      }
    }
    if (given(vm, "num_readers") || !input->has_num_readers()) {
      input->set_num_readers(vm["num_readers"].as<int>());
    }
    return;
  }
  if (vm.count("reader")) {
    reader->set_class_(vm["reader"].as<std::string>());
  } else if (given(vm, "frame_features") || !reader->has_class_()) {
    reader->set_class_(vm["frame_features"].as<bool>() ? dialect.frame_reader : defaults.reader);
  }
  const bool frame = reader->class_() == dialect.frame_reader;
  const std::string names = given(vm, "feature_names") ? vm["feature_names"].as<std::string>()
                            : frame                    ? dialect.frame_feature_names
                                                       : dialect.feature_names;
  bool has_names = false;
  for (const auto& p : reader->params()) has_names |= p.key() == "feature_names";
  if (given(vm, "feature_names") || !has_names) {
    set_typed_param(registry, ClassKind::kReader, reader, "feature_names", names);
  }
  bool has_sizes = false;
  for (const auto& p : reader->params()) has_sizes |= p.key() == "feature_sizes";
  if (given(vm, "feature_sizes") || !has_sizes) {
    set_typed_param(
        registry, ClassKind::kReader, reader, "feature_sizes",
        given(vm, "feature_sizes") ? vm["feature_sizes"].as<std::string>() : dialect.feature_sizes);
  }
  set_typed_param(registry, ClassKind::kReader, reader, "num_classes", std::to_string(num_classes));
  if (given(vm, "num_readers") || !input->has_num_readers()) {
    input->set_num_readers(vm["num_readers"].as<int>());
  }
}

ClassKind model_section_kind(const PluginRegistry& registry, const std::string& class_name) {
  bool detection = false;
  for (const ClassInfo& info : registry.classes()) {
    if (info.class_name != class_name) continue;
    if (info.kind == ClassKind::kModel) return ClassKind::kModel;
    detection = detection || info.kind == ClassKind::kDetectionModel;
  }
  return detection ? ClassKind::kDetectionModel : ClassKind::kModel;
}

namespace {

// Whether `key` (NAME or CLASS.NAME) is a boolean option of a class of `targets`.
bool bool_option_of(const PluginRegistry& registry, const std::vector<FlagTarget>& targets,
                    const std::string& key) {
  const std::size_t dot = key.find('.');
  const std::string qualifier = dot == std::string::npos ? "" : key.substr(0, dot);
  const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
  for (const FlagTarget& t : targets) {
    if (!qualifier.empty() && t.spec->class_() != qualifier) continue;
    for (const auto& option : registry.describe(registry.find(t.kind, t.spec->class_())).options) {
      if (option.name == name && option.type == OptionType::kBool) return true;
    }
  }
  return false;
}

// What a bare --key (no '=') is: the name of a boolean option, of an option that takes a value,
// or of no option.
enum class OptionKind { kNone, kBool, kValued };

// The kind of the option `name` among `options`: boolean if one of that name is boolean.
OptionKind kind_among(const std::vector<PluginRegistry::DeclaredOption>& options,
                      const std::string& name, OptionKind kind) {
  for (const auto& option : options) {
    if (option.name != name) continue;
    if (option.type == OptionType::kBool) return OptionKind::kBool;
    kind = OptionKind::kValued;
  }
  return kind;
}

// The classes of the run decide; only a key none of them declares is looked up among the other
// loaded classes (to be warned about as an option of a class not in the run). A loaded class's
// boolean option must not turn a run's valued option into a boolean, leaving its value stray.
OptionKind declared_option_kind(const PluginRegistry& registry,
                                const std::vector<FlagTarget>& targets, const std::string& key) {
  const std::size_t dot = key.find('.');
  const std::string qualifier = dot == std::string::npos ? "" : key.substr(0, dot);
  const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
  OptionKind kind = OptionKind::kNone;
  for (const FlagTarget& t : targets) {
    if (!qualifier.empty() && t.spec->class_() != qualifier) continue;
    kind =
        kind_among(registry.describe(registry.find(t.kind, t.spec->class_())).options, name, kind);
    if (kind == OptionKind::kBool) return kind;
  }
  if (kind != OptionKind::kNone) return kind;
  for (const ClassInfo& info : registry.classes()) {
    if (!qualifier.empty() && info.class_name != qualifier) continue;
    kind = kind_among(registry.describe(info).options, name, kind);
    if (kind == OptionKind::kBool) return kind;
  }
  return kind;
}

}  // namespace

config::Pipeline base_pipeline(const po::variables_map& vm) {
  config::Pipeline p;
  if (vm.count("pipeline_config_path")) {
    const std::string& path = vm["pipeline_config_path"].as<std::string>();
    check_input_file(path, "--pipeline_config_path",
                     "a pipeline config file (protobuf text format)");
    p = load_pipeline_config(path);
  }
  if (given(vm, "num_classes") || !p.has_num_classes())
    p.set_num_classes(vm["num_classes"].as<int64_t>());
  apply_backend_flags(vm, p);
  return p;
}

// The config fields that the flags given on the command line set, for validate_pipeline's
// messages: each {flag, field} of `table` whose flag was given, and each class option
// (--l2_penalty=0.1) as a param of every plugin section.
FieldFlags given_field_flags(const po::variables_map& vm,
                             std::span<const std::pair<const char*, const char*>> table,
                             const std::vector<std::string>& class_flags) {
  FieldFlags out;
  for (const auto& [flag, field] : table) {
    if (vm.count(flag) != 0 && !vm[flag].defaulted()) out[field] = flag;
  }
  for (const std::string& arg : class_flags) {
    if (arg.rfind("--", 0) != 0) continue;
    std::string key = arg.substr(2, arg.find('=') - 2);
    if (const std::size_t dot = key.find('.'); dot != std::string::npos) key = key.substr(dot + 1);
    for (const char* section : {"model", "train_config.label_loss", "train_config.optimizer",
                                "train_input_reader.reader", "eval_input_reader.reader"}) {
      out[std::string(section) + ".params." + key] = key;
    }
  }
  return out;
}

// validate_pipeline for a command: fields the flags set are named by their flag, the others
// by the config file (when one was given).
void validate_command_pipeline(const config::Pipeline& p, const po::variables_map& vm,
                               const FieldFlags& flags) {
  validate_pipeline(
      p, vm.count("pipeline_config_path") ? vm["pipeline_config_path"].as<std::string>() : "",
      flags);
}

void apply_absl_conventions(po::parsed_options& parsed, const po::options_description& flags) {
  auto description = [&](const std::string& name) { return flags.find_nothrow(name, false); };
  for (po::option& o : parsed.options) {
    if (!o.unregistered || !o.value.empty() || o.string_key.rfind("no", 0) != 0) continue;
    const std::string name = o.string_key.substr(2);
    const po::option_description* d = description(name);
    if (d == nullptr ||
        dynamic_cast<const po::typed_value<bool>*>(d->semantic().get()) == nullptr) {
      continue;
    }
    o.string_key = name;
    o.value = {"false"};
    o.original_tokens = {"--" + name + "=false"};
    o.unregistered = false;
  }
  std::set<std::string> seen;
  std::vector<po::option> kept;
  for (auto it = parsed.options.rbegin(); it != parsed.options.rend(); ++it) {
    const po::option_description* d =
        it->unregistered || it->string_key.empty() ? nullptr : description(it->string_key);
    const bool composing = d != nullptr && d->semantic()->is_composing();
    if (d != nullptr && !composing && !seen.insert(it->string_key).second) continue;
    kept.push_back(*it);
  }
  parsed.options.assign(kept.rbegin(), kept.rend());
}

void route_unrecognized(const PluginRegistry& registry, const std::vector<std::string>& rest,
                        const std::vector<FlagTarget>& targets,
                        const po::options_description& host_flags, std::ostream& warnings) {
  // "LogisticModel, CrossEntropyLoss or AdamOptimizer": the classes that take flags here.
  std::vector<std::string> classes;
  for (const FlagTarget& t : targets) {
    if (std::find(classes.begin(), classes.end(), t.spec->class_()) == classes.end()) {
      classes.push_back(t.spec->class_());
    }
  }
  std::string owners;
  for (std::size_t i = 0; i < classes.size(); ++i) {
    owners += (i == 0 ? "" : i + 1 == classes.size() ? " or " : ", ") + classes[i];
  }
  // Every flag name there is: the host's and every loaded class's options.
  std::vector<std::string> names;
  for (const auto& option : host_flags.options()) names.push_back(option->long_name());
  for (const ClassInfo& info : registry.classes()) {
    for (const auto& option : registry.describe(info).options) {
      if (std::find(names.begin(), names.end(), option.name) == names.end()) {
        names.push_back(option.name);
      }
    }
  }
  // "MoeModel's options: moe_num_mixtures, ...": what the run's classes accept, for errors.
  auto options_of_owners = [&] {
    std::string text;
    std::vector<std::string> listed;
    for (const FlagTarget& t : targets) {
      if (std::find(listed.begin(), listed.end(), t.spec->class_()) != listed.end()) continue;
      listed.push_back(t.spec->class_());
      std::string options;
      for (const auto& option :
           registry.describe(registry.find(t.kind, t.spec->class_())).options) {
        options += (options.empty() ? "" : ", ") + option.name;
      }
      text += (text.empty() ? "" : "; ") + t.spec->class_() +
              "'s options: " + (options.empty() ? std::string("none") : options);
    }
    return text;
  };
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const std::string& arg = rest[i];
    if (arg.rfind("--", 0) != 0) {
      throw InvalidArgument("unrecognised argument '" + arg + "' (class options are --name=value)");
    }
    const std::size_t equals = arg.find('=');
    std::string key = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    std::string value = equals == std::string::npos ? "" : arg.substr(equals + 1);
    if (equals == std::string::npos) {
      // absl: a bare boolean option is true, --noNAME false; gflags: any other option takes the
      // next argument as its value (--lstm_cells 8).
      const OptionKind kind = declared_option_kind(registry, targets, key);
      if (kind == OptionKind::kBool) {
        value = "true";
      } else if (key.rfind("no", 0) == 0 && bool_option_of(registry, targets, key.substr(2))) {
        key = key.substr(2);
        value = "false";
      } else if (kind == OptionKind::kValued) {
        if (i + 1 == rest.size()) {
          throw InvalidArgument("flag --" + key + " needs a value: --" + key + "=VALUE or --" +
                                key + " VALUE");
        }
        value = rest[++i];
      } else {
        throw InvalidArgument(unknown_flag_message(key, names) +
                              " (class options are given as --name=value, or as --name and "
                              "--noname when boolean)");
      }
    }
    // --Class.option names the class whose option it is; a plain --option goes to every class
    // of the run that declares it, and must be qualified when two different classes do.
    const std::size_t dot = key.find('.');
    const std::string qualifier = dot == std::string::npos ? "" : key.substr(0, dot);
    const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
    std::vector<std::pair<const FlagTarget*, PluginRegistry::DeclaredOption>> matches;
    std::vector<std::string> matching_classes;
    for (const FlagTarget& t : targets) {
      if (!qualifier.empty() && t.spec->class_() != qualifier) continue;
      for (const auto& option :
           registry.describe(registry.find(t.kind, t.spec->class_())).options) {
        if (option.name != name) continue;
        matches.emplace_back(&t, option);
        if (std::find(matching_classes.begin(), matching_classes.end(), t.spec->class_()) ==
            matching_classes.end()) {
          matching_classes.push_back(t.spec->class_());
        }
      }
    }
    if (matching_classes.size() > 1) {
      std::string choices;
      for (std::size_t i = 0; i < matching_classes.size(); ++i) {
        choices += std::string(i == 0                             ? ""
                               : i + 1 == matching_classes.size() ? " or "
                                                                  : ", ") +
                   "--" + matching_classes[i] + "." + name + "=" + value;
      }
      throw ConfigError("--" + key + " is an option of " + std::to_string(matching_classes.size()) +
                        " classes of this run (" + join_names(matching_classes) +
                        "); say which: " + choices);
    }
    for (const auto& [t, option] : matches) {
      if (!t->fixed) {
        set_typed_param(registry, t->kind, t->spec, name, value);
        continue;
      }
      // The value the model was trained with: recorded, or the declared default.
      OptionSpec spec{option.name.c_str(), option.type, "", ""};
      std::string trained = option_value_to_string(parse_option_value(spec, option.default_value));
      for (const config::Param& param : t->spec->params()) {
        if (param.key() == name) {
          config::PluginSpec one;
          *one.add_params() = param;
          trained = option_value_to_string(plugin_params(one, "model").at(name));
        }
      }
      const std::string asked = option_value_to_string(parse_option_value(spec, value));
      if (asked != trained) {
        throw ConfigError("--" + key + "=" + value + " disagrees with " + t->fixed_source +
                          ", where " + t->spec->class_() + " was trained with " + name + " " +
                          trained);
      }
    }
    if (!matches.empty()) continue;
    if (!qualifier.empty()) {
      if (std::find(classes.begin(), classes.end(), qualifier) != classes.end()) {
        std::vector<std::string> valid;
        for (const FlagTarget& t : targets) {
          if (t.spec->class_() != qualifier) continue;
          for (const auto& option : registry.describe(registry.find(t.kind, qualifier)).options) {
            valid.push_back(option.name);
          }
        }
        std::string message =
            "unknown flag --" + key + ": " + qualifier + " has no option '" + name + "'";
        const std::string nearest = nearest_name(name, valid);
        if (!nearest.empty()) message += "; did you mean --" + qualifier + "." + nearest + "?";
        throw InvalidArgument(message + " (" + qualifier + "'s options: " +
                              (valid.empty() ? std::string("none") : join_names(valid)) + ")");
      }
      bool declared = false;
      for (const ClassInfo& info : registry.classes()) {
        if (info.class_name != qualifier) continue;
        for (const auto& option : registry.describe(info).options) declared |= option.name == name;
      }
      if (declared) {
        warnings << "warning: ignoring --" << key << ": " << qualifier
                 << " is not a class of this run (" << owners << ")\n";
        continue;
      }
      throw InvalidArgument("unknown flag --" + key + ": " + qualifier +
                            " is not a class of this run (" + owners +
                            ") nor a loaded class declaring '" + name + "'");
    }
    std::string others;
    for (const ClassInfo& info : registry.classes()) {
      for (const auto& option : registry.describe(info).options) {
        if (option.name == key) others += (others.empty() ? "" : ", ") + info.class_name;
      }
    }
    if (!others.empty()) {
      warnings << "warning: ignoring --" << key << ": it is an option of " << others << ", not of "
               << owners << "\n";
      continue;
    }
    throw InvalidArgument(unknown_flag_message(key, names) + " (neither the host nor " + owners +
                          " declares it; " + options_of_owners() +
                          "; see trainyard plugins describe NAME)");
  }
}

void set_typed_param(const PluginRegistry& registry, ClassKind kind, config::PluginSpec* spec,
                     const std::string& key, const std::string& text) {
  const ClassInfo& info = registry.find(kind, spec->class_());
  for (const auto& option : registry.describe(info).options) {
    if (option.name != key) continue;
    OptionSpec os{option.name.c_str(), option.type, "", ""};
    OptionValue v = parse_option_value(os, text);
    config::Param* p = nullptr;
    for (config::Param& existing : *spec->mutable_params()) {
      if (existing.key() == key) p = &existing;
    }
    if (p == nullptr) {
      p = spec->add_params();
      p->set_key(key);
    }
    struct Set {
      config::Param* p;
      void operator()(bool b) { p->set_bool_value(b); }
      void operator()(int64_t i) { p->set_int_value(i); }
      void operator()(double d) { p->set_float_value(d); }
      void operator()(const std::string& s) { p->set_string_value(s); }
      void operator()(const std::vector<int64_t>& l) {
        p->mutable_int_list()->clear_value();
        for (int64_t x : l) p->mutable_int_list()->add_value(x);
      }
      void operator()(const std::vector<double>& l) {
        p->mutable_float_list()->clear_value();
        for (double x : l) p->mutable_float_list()->add_value(x);
      }
      void operator()(const std::vector<std::string>& l) {
        p->mutable_string_list()->clear_value();
        for (const auto& x : l) p->mutable_string_list()->add_value(x);
      }
    };
    std::visit(Set{p}, v);
    return;
  }
  throw ConfigError("--" + key + " is not an option of " + std::string(class_kind_name(kind)) +
                    " " + spec->class_());
}

void add_plugin_option_defaults(const PluginRegistry& registry, config::Pipeline& pipeline) {
  config::TrainConfig* tc = pipeline.mutable_train_config();
  const std::pair<ClassKind, config::PluginSpec*> specs[] = {
      {model_section_kind(registry, pipeline.model().class_()), pipeline.mutable_model()},
      {ClassKind::kLoss, tc->mutable_label_loss()},
      {ClassKind::kOptimizer, tc->mutable_optimizer()},
      {ClassKind::kReader, pipeline.mutable_train_input_reader()->mutable_reader()},
      {ClassKind::kReader, pipeline.mutable_eval_input_reader()->mutable_reader()},
      {ClassKind::kCollective, pipeline.mutable_distributed()->mutable_collective()},
  };
  for (const auto& [kind, spec] : specs) {
    if (!spec->has_class_()) continue;
    const ClassInfo& info = registry.find(kind, spec->class_());
    for (const auto& option : registry.describe(info).options) {
      bool given = false;
      for (const config::Param& p : spec->params()) given |= p.key() == option.name;
      if (!given) set_typed_param(registry, kind, spec, option.name, option.default_value);
    }
  }
}

}  // namespace trainyard::app
