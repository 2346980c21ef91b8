// What a task adds to the pipeline config: the config format of its originals, read as a
// Trainyard pipeline (the Object Detection API's pipeline.config), and the input transforms its
// steps name. The core knows neither; the task's plugin registers both when it loads, and the
// core finds them by name (named_registry.h: each entry is owned by the library that added it).
//
// Config dialects. parse_pipeline_config (the core's config.h) reads a text as Trainyard's
// Pipeline; when that fails it asks every registered dialect. A dialect that reads the text
// returns the converted pipeline as Trainyard's text format; one that does not returns where
// its own parse stopped, and the error shown is the one of the format that read furthest into
// the text (at a tie: a dialect's when the text names one of its own fields, else Trainyard's).
// A text that parses as the dialect's but cannot be run as its originals would is a
// ConfigError the dialect throws, naming the source and the field.
//
// Input transform types. A step a dialect cannot express in Trainyard's own preprocessing_step
// goes into an input reader's data_augmentation_options as a google.protobuf.Any: the message
// of the task's own .proto, packed, and printed by its type
// (`[type.googleapis.com/trainyard.od.PreprocessingStep] { ssd_random_crop { } }`). The type's
// descriptor is in protobuf's generated pool while the task's library is loaded, so a plugin
// that registers a type is never unloaded (kPluginNeverUnload). The core builds each step with
// the InputTransformType registered under the Any's full type name.
#ifndef TRAINYARD_CONFIG_DIALECT_H_
#define TRAINYARD_CONFIG_DIALECT_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "trainyard/named_registry.h"
#include "trainyard/transform.h"

namespace trainyard {

// What a dialect's parse returns.
struct ConfigDialectParse {
  // True: the text is this dialect's and `pipeline_text` is the converted pipeline, in
  // Trainyard's text format.
  bool converted = false;
  std::string pipeline_text;
  // When not converted: where this dialect's parse stopped (0-based line and column; -1 when the
  // text parsed but is not a config of the dialect's originals), the error as shown to the user
  // ("SOURCE:LINE:COLUMN: message"), and whether the text names one of the dialect's own fields.
  int error_line = -1;
  int error_column = -1;
  std::string error;
  bool names_own_field = false;
};

struct ConfigDialect {
  // For messages: "the Object Detection API's pipeline.config".
  std::string description;
  // The full protobuf name of the dialect's top message ("trainyard.od.TrainEvalPipelineConfig"),
  // for the line numbers of errors (config.h's with_config_line).
  std::string message_type;
  // Field paths of that message below which every field is a param of the model
  // ("model.ssd."): an error naming the model param "feature_extractor.depth_multiplier" points
  // at the line of "model.ssd.feature_extractor.depth_multiplier".
  std::vector<std::string> model_param_prefixes;
  // Reads `text` (named `source` in errors). Throws ConfigError as described above.
  std::function<ConfigDialectParse(std::string_view text, std::string_view source)> parse;
};

// One type of data_augmentation_options step.
struct InputTransformType {
  // The transform of one step, given the serialized message. Throws ConfigError naming the step
  // when the step cannot be built.
  std::function<std::shared_ptr<const ExampleTransform>(const std::string& serialized)> build;
  // Whether the step is kept when an evaluation reads with a training input reader's settings
  // (model_main's --eval_training_data): a step that is not augmentation (a resize) is.
  std::function<bool(const std::string& serialized)> kept_in_evaluation;
};

namespace config_dialects {

inline constexpr std::string_view kDialectTable = "config.dialect";
inline constexpr std::string_view kTransformTable = "config.input_transform_type";

// Adds the dialect `name` ("object_detection_api"); kept while the returned registration lives.
[[nodiscard]] inline NamedRegistration add_dialect(std::string name, ConfigDialect dialect) {
  return named_registry::add(
      kDialectTable, "config dialect", typeid(ConfigDialect).name(), std::move(name),
      std::make_shared<const ConfigDialect>(std::move(dialect)), NameSharing::kExclusive);
}

// Adds the step type with the protobuf full name `type_name` ("trainyard.od.PreprocessingStep").
[[nodiscard]] inline NamedRegistration add_input_transform_type(std::string type_name,
                                                                InputTransformType type) {
  return named_registry::add(kTransformTable, "input transform type",
                             typeid(InputTransformType).name(), std::move(type_name),
                             std::make_shared<const InputTransformType>(std::move(type)),
                             NameSharing::kExclusive);
}

// The dialects registered now, by name.
inline std::vector<std::pair<std::string, std::shared_ptr<const ConfigDialect>>> dialects() {
  std::vector<std::pair<std::string, std::shared_ptr<const ConfigDialect>>> out;
  for (std::string& name : named_registry::names(kDialectTable)) {
    auto value = named_registry::find(kDialectTable, typeid(ConfigDialect).name(), name);
    if (value)
      out.emplace_back(std::move(name), std::static_pointer_cast<const ConfigDialect>(value));
  }
  return out;
}

// The step type registered as `type_name`, or null.
inline std::shared_ptr<const InputTransformType> input_transform_type(std::string_view type_name) {
  return std::static_pointer_cast<const InputTransformType>(
      named_registry::find(kTransformTable, typeid(InputTransformType).name(), type_name));
}

// The step types registered now.
inline std::vector<std::string> input_transform_type_names() {
  return named_registry::names(kTransformTable);
}

}  // namespace config_dialects
}  // namespace trainyard

#endif  // TRAINYARD_CONFIG_DIALECT_H_
