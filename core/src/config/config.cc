#include "trainyard/core/config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "registry/pipeline_plugins.h"
#include "trainyard/config_dialect.h"
#include "trainyard/core/config_validation.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/user_file.h"

namespace trainyard {
namespace {

class CollectFirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (message_.empty()) {
      line_ = line;
      column_ = column;
      message_ = message;
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return !message_.empty(); }
  int line() const { return line_; }
  int column() const { return column_; }
  std::string describe(std::string_view source) const {
    // The parser counts from 0.
    return std::string(source) + ":" + std::to_string(line_ + 1) + ":" +
           std::to_string(column_ + 1) + ": " + message_;
  }

 private:
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

OptionValue param_value(const config::Param& param, std::string_view where) {
  switch (param.value_case()) {
    case config::Param::kBoolValue:
      return param.bool_value();
    case config::Param::kIntValue:
      return param.int_value();
    case config::Param::kFloatValue:
      return param.float_value();
    case config::Param::kStringValue:
      return param.string_value();
    case config::Param::kIntList:
      return std::vector<int64_t>(param.int_list().value().begin(), param.int_list().value().end());
    case config::Param::kFloatList:
      return std::vector<double>(param.float_list().value().begin(),
                                 param.float_list().value().end());
    case config::Param::kStringList:
      return std::vector<std::string>(param.string_list().value().begin(),
                                      param.string_list().value().end());
    case config::Param::VALUE_NOT_SET:
      break;
  }
  throw ConfigError(std::string(where) + ": param '" + param.key() +
                    "' has no value (use bool_value, int_value, float_value, string_value, "
                    "int_list, float_list or string_list)");
}

void check_spec(const config::PluginSpec& spec, ClassKind kind, std::string_view where,
                const PluginRegistry& registry) {
  if (!spec.has_class_() || spec.class_().empty()) {
    throw ConfigError(std::string(where) + ": 'class' is missing");
  }
  try {
    const ClassInfo& info = registry.find(kind, spec.class_());
    registry.resolve_options(info, plugin_params(spec, where));
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(std::string(where) + ": " + e.what());
  }
}

}  // namespace

namespace {

// Trainyard's text format, or ConfigError with `error` when it does not parse.
config::Pipeline parse_trainyard_text(const std::string& text, std::string_view source_name,
                                      CollectFirstError& errors) {
  config::Pipeline pipeline;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &pipeline)) {
    throw ConfigError(errors.has_error() ? errors.describe(source_name)
                                         : std::string(source_name) + ": cannot parse");
  }
  return pipeline;
}

// What load_config_dialects could not load, for the errors of a text no dialect read.
struct DialectLoadProblems {
  std::mutex mutex;
  std::vector<std::string> problems;
};
DialectLoadProblems& dialect_load_problems() {
  static auto* problems = new DialectLoadProblems();
  return *problems;
}

std::string with_load_problems(std::string error) {
  DialectLoadProblems& p = dialect_load_problems();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.problems.empty()) return error;
  error += " (not tried: the config dialects, if any, of plugins that could not be loaded: ";
  for (std::size_t i = 0; i < p.problems.size(); ++i) {
    error += (i == 0 ? "" : "; ") + p.problems[i];
  }
  return error + ")";
}

}  // namespace

config::Pipeline parse_pipeline_config(std::string_view text, std::string_view source_name) {
  const std::string copy(text);
  CollectFirstError errors;
  try {
    return parse_trainyard_text(copy, source_name, errors);
  } catch (const ConfigError& trainyard_error) {
    // A task's config dialect (config_dialect.h) may read it; otherwise the error shown is the
    // one of the format that read furthest into the text.
    std::pair<int, int> best_at(errors.line(), errors.column());
    std::string best_error = trainyard_error.what();
    for (const auto& [name, dialect] : config_dialects::dialects()) {
      const ConfigDialectParse parsed = dialect->parse(text, source_name);
      if (parsed.converted) {
        CollectFirstError converted_errors;
        try {
          return parse_trainyard_text(parsed.pipeline_text, source_name, converted_errors);
        } catch (const ConfigError& e) {
          throw ConfigError(std::string(source_name) + " reads as " + dialect->description +
                            ", but its conversion (config dialect '" + name +
                            "') is no Trainyard pipeline: " + e.what());
        }
      }
      const std::pair<int, int> at(parsed.error_line, parsed.error_column);
      if (at > best_at || (at == best_at && parsed.names_own_field)) {
        best_at = at;
        best_error = parsed.error;
      }
    }
    throw ConfigError(with_load_problems(best_error));
  }
}

void load_config_dialects(const PluginRegistry& registry) {
  std::vector<std::string> problems;
  // A library the registry could not use (built for another SDK, two claiming one class) may
  // have been a task's.
  for (const LibraryProblem& problem : registry.problems()) problems.push_back(problem.message);
  for (const std::string& name : task_names(registry)) {
    try {
      registry.describe(registry.find(ClassKind::kTask, name));
    } catch (const Error& e) {
      // The command that uses the task fails with this too; the other tasks' dialects stay.
      problems.push_back("task '" + name + "': " + e.what());
    }
  }
  DialectLoadProblems& p = dialect_load_problems();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.problems = std::move(problems);
}

config::Pipeline load_pipeline_config(const std::filesystem::path& path) {
  // A directory reads as empty (an empty config), a FIFO blocks and a device never ends.
  check_input_file(path, "pipeline config", "a pipeline config file (protobuf text format)");
  return parse_pipeline_config(
      read_user_file(path.string(), "pipeline config", kMaxPipelineConfigBytes), path.string());
}

namespace {
// Sets every unset optional scalar that has a default, recursively, so that printing shows the
// effective values. Message fields are filled only where already present.
void make_defaults_explicit(google::protobuf::Message* message) {
  const google::protobuf::Descriptor* descriptor = message->GetDescriptor();
  const google::protobuf::Reflection* reflection = message->GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->is_repeated()) continue;
    if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (reflection->HasField(*message, field)) {
        make_defaults_explicit(reflection->MutableMessage(message, field));
      }
      continue;
    }
    if (field->containing_oneof() != nullptr) continue;
    if (!field->has_default_value() || reflection->HasField(*message, field)) continue;
    switch (field->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_INT32:
        reflection->SetInt32(message, field, field->default_value_int32());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_INT64:
        reflection->SetInt64(message, field, field->default_value_int64());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT32:
        reflection->SetUInt32(message, field, field->default_value_uint32());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT64:
        reflection->SetUInt64(message, field, field->default_value_uint64());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE:
        reflection->SetDouble(message, field, field->default_value_double());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_FLOAT:
        reflection->SetFloat(message, field, field->default_value_float());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_BOOL:
        reflection->SetBool(message, field, field->default_value_bool());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_STRING:
        reflection->SetString(message, field, field->default_value_string());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_ENUM:
        reflection->SetEnum(message, field, field->default_value_enum());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE:
        break;
    }
  }
}
}  // namespace

std::string pipeline_config_to_text(const config::Pipeline& pipeline, bool with_defaults) {
  config::Pipeline copy = pipeline;
  if (with_defaults) make_defaults_explicit(&copy);
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  // A task's data_augmentation_options steps by their message (config_dialect.h).
  printer.SetExpandAny(true);
  printer.PrintToString(copy, &text);
  return text;
}

std::map<std::string, OptionValue> plugin_params(const config::PluginSpec& spec,
                                                 std::string_view where) {
  std::map<std::string, OptionValue> out;
  for (const config::Param& param : spec.params()) {
    if (!param.has_key() || param.key().empty()) {
      throw ConfigError(std::string(where) + ": a param has no key");
    }
    if (!out.emplace(param.key(), param_value(param, where)).second) {
      throw ConfigError(std::string(where) + ": param '" + param.key() + "' is given twice");
    }
  }
  return out;
}

void check_pipeline_plugins(const config::Pipeline& pipeline, const PluginRegistry& registry) {
  if (pipeline.has_model()) {
    check_spec(pipeline.model(), model_kind(registry, pipeline.model().class_()), "model",
               registry);
  }
  const config::TrainConfig& train = pipeline.train_config();
  if (train.has_label_loss()) {
    check_spec(train.label_loss(), ClassKind::kLoss, "train_config.label_loss", registry);
  }
  if (train.has_optimizer()) {
    check_spec(train.optimizer(), ClassKind::kOptimizer, "train_config.optimizer", registry);
  }
  if (pipeline.train_input_reader().has_reader()) {
    check_spec(pipeline.train_input_reader().reader(), ClassKind::kReader,
               "train_input_reader.reader", registry);
  }
  if (pipeline.eval_input_reader().has_reader()) {
    check_spec(pipeline.eval_input_reader().reader(), ClassKind::kReader,
               "eval_input_reader.reader", registry);
  }
  if (pipeline.has_backend()) {
    config::PluginSpec backend;
    backend.set_class_(pipeline.backend().class_());
    *backend.mutable_params() = pipeline.backend().params();
    check_spec(backend, ClassKind::kBackend, "backend", registry);
  }
  if (pipeline.distributed().has_collective()) {
    check_spec(pipeline.distributed().collective(), ClassKind::kCollective,
               "distributed.collective", registry);
  }
}

}  // namespace trainyard
