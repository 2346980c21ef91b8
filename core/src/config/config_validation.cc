#include "trainyard/core/config_validation.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "engine/variable_regex.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/learning_rate_config.h"
#include "trainyard/error.h"
#include "trainyard/loss.h"
#include "trainyard/optimizer.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
namespace pb = google::protobuf;

// The shortest text that reads back as `value` ("0.1", "nan", "-inf").
std::string number_text(double value) {
  if (std::isnan(value)) return "nan";
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  return error == std::errc() ? std::string(text, end) : std::to_string(value);
}

// The invalid values found, each with the field's path (the key of FieldFlags) and how the
// message shows it.
// Each reader is a thread: 100,000 of them ran the process out of threads mid-start.
constexpr int kMaxNumReaders = 1024;
// Every layer and loss allocates per class; the largest label sets in use (ImageNet-21k, LVIS,
// YouTube-8M) are far below this.
constexpr int64_t kMaxNumClasses = 1000000;

class Problems {
 public:
  Problems(std::string_view source, const FieldFlags& flags) : source_(source), flags_(flags) {}

  void add(const std::string& field, const std::string& shown, const std::string& value,
           const std::string& rule) {
    std::string message;
    if (auto flag = flags_.find(field); flag != flags_.end()) {
      message = "--" + flag->second + " is " + value + " (" + shown + "); it must be " + rule;
    } else {
      message =
          (source_.empty() ? "" : source_ + ": ") + shown + " is " + value + "; it must be " + rule;
    }
    messages_.push_back(std::move(message));
  }
  // A message that is already whole (a schedule's or transform's own).
  void add_message(std::string message) { messages_.push_back(std::move(message)); }

  void at_least(const std::string& field, int64_t value, int64_t min, std::string_view note = {}) {
    if (value >= min) return;
    add(field, field, std::to_string(value),
        "at least " + std::to_string(min) + (note.empty() ? "" : " (" + std::string(note) + ")"));
  }
  // Non-finite values are reported by the walk over every float field, not here.
  void at_least(const std::string& field, double value, double min, std::string_view note = {}) {
    if (!std::isfinite(value) || value >= min) return;
    add(field, field, number_text(value),
        "at least " + number_text(min) + (note.empty() ? "" : " (" + std::string(note) + ")"));
  }
  void between(const std::string& field, double value, double low, double high) {
    if (!std::isfinite(value) || (value >= low && value <= high)) return;
    add(field, field, number_text(value),
        "between " + number_text(low) + " and " + number_text(high));
  }
  void finite(const std::string& field, const std::string& shown, double value) {
    if (std::isfinite(value)) return;
    add(field, shown, number_text(value), "a finite number");
  }

  std::size_t size() const { return messages_.size(); }

  void throw_if_any() const {
    if (messages_.empty()) return;
    if (messages_.size() == 1) throw ConfigError(messages_.front());
    std::string all = std::to_string(messages_.size()) + " invalid values: ";
    for (std::size_t i = 0; i < messages_.size(); ++i) {
      all += (i == 0 ? "" : "; ") + messages_[i];
    }
    throw ConfigError(all);
  }

 private:
  std::string source_;
  const FieldFlags& flags_;
  std::vector<std::string> messages_;
};

void check_finite_fields(const pb::Message& message, const std::string& path, Problems& problems);

// A plugin param: "model.params.l2_penalty", shown as "model param 'l2_penalty'".
void check_param(const config::Param& param, const std::string& section, Problems& problems) {
  const std::string field = section + ".params." + param.key();
  const std::string shown = section + " param '" + param.key() + "'";
  if (param.has_float_value()) problems.finite(field, shown, param.float_value());
  if (param.has_float_list()) {
    for (int i = 0; i < param.float_list().value_size(); ++i) {
      problems.finite(field, shown + "[" + std::to_string(i) + "]", param.float_list().value(i));
    }
  }
}

// Every float and double that `message` sets, recursively.
void check_finite_fields(const pb::Message& message, const std::string& path, Problems& problems) {
  const pb::Descriptor* descriptor = message.GetDescriptor();
  const pb::Reflection* reflection = message.GetReflection();
  auto child_path = [&](const pb::FieldDescriptor* field) {
    return path.empty() ? field->name() : path + "." + field->name();
  };
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const pb::FieldDescriptor* field = descriptor->field(i);
    const pb::FieldDescriptor::CppType type = field->cpp_type();
    if (field->message_type() == config::Param::descriptor()) {
      for (int j = 0; j < reflection->FieldSize(message, field); ++j) {
        check_param(
            static_cast<const config::Param&>(reflection->GetRepeatedMessage(message, field, j)),
            path, problems);
      }
      continue;
    }
    if (field->is_repeated()) {
      for (int j = 0; j < reflection->FieldSize(message, field); ++j) {
        const std::string element = child_path(field) + "[" + std::to_string(j) + "]";
        if (type == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
          check_finite_fields(reflection->GetRepeatedMessage(message, field, j), element, problems);
        } else if (type == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
          problems.finite(element, element, reflection->GetRepeatedDouble(message, field, j));
        } else if (type == pb::FieldDescriptor::CPPTYPE_FLOAT) {
          problems.finite(element, element, reflection->GetRepeatedFloat(message, field, j));
        }
      }
      continue;
    }
    if (!reflection->HasField(message, field)) continue;
    if (type == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      check_finite_fields(reflection->GetMessage(message, field), child_path(field), problems);
    } else if (type == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
      problems.finite(child_path(field), child_path(field), reflection->GetDouble(message, field));
    } else if (type == pb::FieldDescriptor::CPPTYPE_FLOAT) {
      problems.finite(child_path(field), child_path(field), reflection->GetFloat(message, field));
    }
  }
}

void check_learning_rate(const config::TrainConfig& tc, Problems& problems) {
  const config::LearningRate& lr = tc.learning_rate();
  const std::string at = "train_config.learning_rate.";
  switch (lr.schedule_case()) {
    case config::LearningRate::kConstant:
      problems.at_least(at + "constant.learning_rate", lr.constant().learning_rate(), 0.0);
      break;
    case config::LearningRate::kExponentialDecayLearningRate: {
      const auto& d = lr.exponential_decay_learning_rate();
      const std::string s = at + "exponential_decay_learning_rate.";
      problems.at_least(s + "initial_learning_rate", d.initial_learning_rate(), 0.0);
      problems.at_least(s + "decay_steps", int64_t{d.decay_steps()}, 1);
      problems.at_least(s + "decay_factor", d.decay_factor(), 0.0);
      problems.at_least(s + "burnin_learning_rate", d.burnin_learning_rate(), 0.0);
      problems.at_least(s + "min_learning_rate", d.min_learning_rate(), 0.0);
      break;
    }
    case config::LearningRate::kManualStepLearningRate: {
      const auto& m = lr.manual_step_learning_rate();
      const std::string s = at + "manual_step_learning_rate.";
      problems.at_least(s + "initial_learning_rate", m.initial_learning_rate(), 0.0);
      for (int i = 0; i < m.schedule_size(); ++i) {
        problems.at_least(s + "schedule[" + std::to_string(i) + "].learning_rate",
                          m.schedule(i).learning_rate(), 0.0);
      }
      break;
    }
    case config::LearningRate::kCosineDecayLearningRate: {
      const auto& c = lr.cosine_decay_learning_rate();
      const std::string s = at + "cosine_decay_learning_rate.";
      problems.at_least(s + "learning_rate_base", c.learning_rate_base(), 0.0);
      problems.at_least(s + "warmup_learning_rate", c.warmup_learning_rate(), 0.0);
      break;
    }
    case config::LearningRate::kExponentialDecayExamples:
    case config::LearningRate::SCHEDULE_NOT_SET: {
      const auto& d = lr.exponential_decay_examples();
      const std::string s = at + "exponential_decay_examples.";
      problems.at_least(s + "base_learning_rate", d.base_learning_rate(), 0.0);
      problems.at_least(s + "learning_rate_decay", d.learning_rate_decay(), 0.0);
      problems.at_least(s + "learning_rate_decay_examples", d.learning_rate_decay_examples(),
                        int64_t{1});
      break;
    }
  }
}

void check_train_config(const config::TrainConfig& tc, Problems& problems) {
  const std::string at = "train_config.";
  problems.at_least(at + "batch_size", tc.batch_size(), int64_t{1});
  problems.at_least(at + "regularization_penalty", tc.regularization_penalty(), 0.0);
  problems.at_least(at + "clip_gradient_norm", tc.clip_gradient_norm(), 0.0, "0 disables clipping");
  if (tc.has_max_steps()) problems.at_least(at + "max_steps", tc.max_steps(), int64_t{0});
  problems.at_least(at + "export_model_steps", tc.export_model_steps(), int64_t{0}, "0: never");
  problems.at_least(at + "log_every_n_steps", tc.log_every_n_steps(), int64_t{0});
  problems.at_least(at + "save_interval_secs", tc.save_interval_secs(), 0.0);
  problems.at_least(at + "save_summaries_secs", tc.save_summaries_secs(), 0.0);
  problems.at_least(at + "max_to_keep", int64_t{tc.max_to_keep()}, 0, "0 keeps all");
  problems.at_least(at + "keep_checkpoint_every_n_hours", tc.keep_checkpoint_every_n_hours(), 0.0);
  problems.between(at + "moving_average_decay", tc.moving_average_decay(), 0.0, 1.0);
  problems.at_least(at + "trace_every_n_steps", tc.trace_every_n_steps(), int64_t{0}, "0: never");
  problems.at_least(at + "max_nan_rollbacks", tc.max_nan_rollbacks(), int64_t{0},
                    "0 stops at the first inf or nan");
  check_learning_rate(tc, problems);
  // The variable regexes compile on RE2 (variable_regex.h), as train compiles them.
  auto check_regex = [&](const std::string& pattern, const std::string& field) {
    try {
      (void)VariableRegex(pattern, field);
    } catch (const ConfigError& e) {
      problems.add_message(e.what());
    }
  };
  for (int i = 0; i < tc.freeze_variables_size(); ++i) {
    check_regex(tc.freeze_variables(i), at + "freeze_variables[" + std::to_string(i) + "]");
  }
  for (int i = 0; i < tc.update_trainable_variables_size(); ++i) {
    check_regex(tc.update_trainable_variables(i),
                at + "update_trainable_variables[" + std::to_string(i) + "]");
  }
  for (int i = 0; i < tc.gradient_multipliers_size(); ++i) {
    check_regex(tc.gradient_multipliers(i).variable_regex(),
                at + "gradient_multipliers[" + std::to_string(i) + "].variable_regex");
  }
}

void check_input_reader(const config::InputReader& input, const std::string& at,
                        Problems& problems) {
  problems.at_least(at + ".num_readers", int64_t{input.num_readers()}, 1);
  if (input.num_readers() > kMaxNumReaders) {
    problems.add(at + ".num_readers", at + ".num_readers", std::to_string(input.num_readers()),
                 "at most " + std::to_string(kMaxNumReaders) + " (one thread each)");
  }
  problems.at_least(at + ".num_epochs", input.num_epochs(), int64_t{0}, "0: forever");
  if (input.has_shuffle_buffer_size()) {
    problems.at_least(at + ".shuffle_buffer_size", input.shuffle_buffer_size(), int64_t{0},
                      "0: 5 x batch_size");
  }
  problems.at_least(at + ".prefetch_batches", input.prefetch_batches(), int64_t{1});
  for (int i = 0; i < input.padding_size(); ++i) {
    if (input.padding(i).has_pad_to()) {
      problems.at_least(at + ".padding[" + std::to_string(i) + "].pad_to",
                        input.padding(i).pad_to(), int64_t{0});
    }
  }
  for (int i = 0; i < input.preprocessing_step_size(); ++i) {
    const config::PreprocessingStep& step = input.preprocessing_step(i);
    const std::string s = at + ".preprocessing_step[" + std::to_string(i) + "].";
    if (step.has_random_horizontal_flip()) {
      problems.between(s + "random_horizontal_flip.probability",
                       step.random_horizontal_flip().probability(), 0.0, 1.0);
    }
    if (step.has_image_classification_preprocessing()) {
      const auto& c = step.image_classification_preprocessing();
      problems.at_least(s + "image_classification_preprocessing.fixed_resize_side",
                        c.fixed_resize_side(), int64_t{0}, "0: no resize");
      problems.at_least(s + "image_classification_preprocessing.default_image_size",
                        c.default_image_size(), int64_t{1});
    }
  }
}

void check_eval_config(const config::EvalConfig& ec, Problems& problems) {
  const std::string at = "eval_config.";
  problems.at_least(at + "batch_size", ec.batch_size(), int64_t{1});
  problems.at_least(at + "top_k", int64_t{ec.top_k()}, 1);
  if (ec.has_num_examples()) problems.at_least(at + "num_examples", ec.num_examples(), int64_t{0});
  problems.at_least(at + "eval_interval_secs", ec.eval_interval_secs(), 0.0);
  problems.at_least(at + "timeout_secs", ec.timeout_secs(), 0.0, "0 waits forever");
  problems.at_least(at + "throttle_secs", ec.throttle_secs(), 0.0);
  if (ec.has_steps()) problems.at_least(at + "steps", ec.steps(), int64_t{0});
  for (int i = 0; i < ec.exporters_size(); ++i) {
    problems.at_least(at + "exporters[" + std::to_string(i) + "].exports_to_keep",
                      int64_t{ec.exporters(i).exports_to_keep()}, 0, "0 keeps all");
  }
}

// What type of entry `path` is, in words, for a message; "" for a regular file or nothing.
std::string not_a_file(const fs::file_status& status) {
  switch (status.type()) {
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::block:
    case fs::file_type::character:
      return "a device";
    default:
      return "";
  }
}

}  // namespace

void validate_pipeline(const config::Pipeline& pipeline, std::string_view source,
                       const FieldFlags& flags) {
  Problems problems(source, flags);
  check_finite_fields(pipeline, "", problems);
  problems.at_least("num_classes", pipeline.num_classes(), int64_t{1});
  if (pipeline.num_classes() > kMaxNumClasses) {
    problems.add("num_classes", "num_classes", std::to_string(pipeline.num_classes()),
                 "at most " + std::to_string(kMaxNumClasses) +
                     " (every layer and loss allocates "
                     "per class)");
  }
  check_train_config(pipeline.train_config(), problems);
  check_input_reader(pipeline.train_input_reader(), "train_input_reader", problems);
  check_input_reader(pipeline.eval_input_reader(), "eval_input_reader", problems);
  check_eval_config(pipeline.eval_config(), problems);
  problems.at_least("backend.device_index", int64_t{pipeline.backend().device_index()}, 0);
  if (pipeline.backend().has_num_threads()) {
    problems.at_least("backend.num_threads", int64_t{pipeline.backend().num_threads()}, 0,
                      "0: OMP_NUM_THREADS, else every core");
  }
  // What the schedule and the transforms refuse beyond these ranges, with their own words; only
  // once the values they read are known to be in range.
  if (problems.size() == 0) {
    try {
      learning_rate_from_config(pipeline.train_config());
    } catch (const ConfigError& e) {
      problems.add_message(e.what());
    }
    const std::pair<const config::InputReader*, const char*> readers[] = {
        {&pipeline.train_input_reader(), "train_input_reader"},
        {&pipeline.eval_input_reader(), "eval_input_reader"}};
    for (const auto& [input, field] : readers) {
      try {
        input_options_from_config(*input, 1, 0, field);
      } catch (const ConfigError& e) {
        problems.add_message(e.what());
      }
    }
  }
  problems.throw_if_any();
}

void check_input_file(const fs::path& path, std::string_view name, std::string_view what) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) {
    throw ConfigError(std::string(name) + ": " + path.string() + " does not exist");
  }
  if (std::string kind = not_a_file(status); !kind.empty()) {
    throw ConfigError(std::string(name) + ": " + path.string() + " is " + kind + "; expected " +
                      std::string(what));
  }
}

void check_directory_argument(const fs::path& path, std::string_view name) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found || status.type() == fs::file_type::directory ||
      status.type() == fs::file_type::none) {
    return;
  }
  std::string kind = not_a_file(status);
  throw ConfigError(std::string(name) + ": " + path.string() + " is " +
                    (kind.empty() ? "a regular file" : kind) + "; expected a directory");
}

void check_pipeline_builds(const PluginRegistry& registry, const config::Pipeline& pipeline) {
  const config::TrainConfig& tc = pipeline.train_config();
  make_model(registry, pipeline);
  create_plugin<Loss>(registry, ClassKind::kLoss, loss_class(registry, pipeline),
                      tc.has_label_loss() ? &tc.label_loss() : nullptr, "train_config.label_loss");
  create_plugin<Optimizer>(registry, ClassKind::kOptimizer, optimizer_class(registry, pipeline),
                           tc.has_optimizer() ? &tc.optimizer() : nullptr,
                           "train_config.optimizer");
  if (pipeline.has_train_input_reader()) {
    make_reader(registry, pipeline, pipeline.train_input_reader(), "train_input_reader.reader");
  }
  if (pipeline.has_eval_input_reader()) {
    make_reader(registry, pipeline, pipeline.eval_input_reader(), "eval_input_reader.reader");
  }
}

}  // namespace trainyard
