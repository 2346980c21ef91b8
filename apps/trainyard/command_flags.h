// The flag plumbing the host's training and evaluation commands share: the input and backend
// flags, numbers with their defaults as typed, class options routed to the class that declares
// them, and the config fields each flag sets (for validate_pipeline's messages). Internal to
// apps/trainyard.
#ifndef TRAINYARD_APPS_TRAINYARD_COMMAND_FLAGS_H_
#define TRAINYARD_APPS_TRAINYARD_COMMAND_FLAGS_H_

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "commands.h"
#include "trainyard/core/config_validation.h"
#include "trainyard/core/registry.h"
#include "trainyard/proto/pipeline.pb.h"
#include "trainyard/task.h"

namespace trainyard::app {

void add_input_flags(boost::program_options::options_description& d);

// --backend, --device_index, --num_threads and --precision into the pipeline's backend section.
// Another class drops the params given for the previous one: they are that class's options.
void apply_backend_flags(const boost::program_options::variables_map& vm, config::Pipeline& p);

// A double flag whose default --help prints as written ("0.95", not "0.94999999999999996"):
// the shortest text that reads back as the same double.
boost::program_options::typed_value<double>* real(double value);

bool given(const boost::program_options::variables_map& vm, const char* name);

// Applies the input flags to one input reader section. For a task whose flag dialect does not
// take the starter code's input-layout flags, the reader is the config's (or the task's default)
// and only flags given on the command line apply.
void apply_input_flags(const PluginRegistry& registry,
                       const boost::program_options::variables_map& vm, config::InputReader* input,
                       int64_t num_classes, const std::string& task, const TaskDefaults& defaults,
                       const TaskFlagDialect& dialect);

// The kind of the class a model section names: kDetectionModel for a detection model class
// (SSDMetaArch) that no BaseModel class shares the name of, else kModel (as the core decides).
ClassKind model_section_kind(const PluginRegistry& registry, const std::string& class_name);

// The pipeline a command starts from: --pipeline_config_path's (checked to be a regular file)
// or the defaults, with --num_classes and the backend flags applied.
config::Pipeline base_pipeline(const boost::program_options::variables_map& vm);

// The config fields that the flags given on the command line set, for validate_pipeline's
// messages: each {flag, field} of `table` whose flag was given, and each class option
// (--l2_penalty=0.1) as a param of every plugin section.
FieldFlags given_field_flags(const boost::program_options::variables_map& vm,
                             std::span<const std::pair<const char*, const char*>> table,
                             const std::vector<std::string>& class_flags);

// validate_pipeline for a command: fields the flags set are named by their flag, the others
// by the config file (when one was given).
void validate_command_pipeline(const config::Pipeline& p,
                               const boost::program_options::variables_map& vm,
                               const FieldFlags& flags);

// Flags that are not the host's own go to the class that declares an option of that name
// (e.g. --moe_num_mixtures=4 to the model), as the original's model flags did. A flag that only
// another loaded class declares (WILLOW's command lines pass the flags of every model) is
// accepted with a warning naming that class; any other is an error with the nearest name.
struct FlagTarget {
  FlagTarget(ClassKind k, config::PluginSpec* s, bool f = false, std::string source = {})
      : kind(k), spec(s), fixed(f), fixed_source(std::move(source)) {}
  ClassKind kind;
  config::PluginSpec* spec;
  // eval, predict and export: the model was trained with these options (model_flags.json), so
  // a flag may repeat a value but not change it.
  bool fixed;
  std::string fixed_source;
};

// absl's conventions, which the originals' flags followed, on a parsed command line: a flag
// given twice takes its last value (a composing flag keeps them all), and --noNAME sets the
// boolean flag NAME to false. Class options follow them too (route_unrecognized): a bare
// --gating is true and --nogating false; as gflags, an option that is not boolean takes the next
// argument as its value when no '=' gives one (--lstm_cells 8).
void apply_absl_conventions(boost::program_options::parsed_options& parsed,
                            const boost::program_options::options_description& flags);

void route_unrecognized(const PluginRegistry& registry, const std::vector<std::string>& rest,
                        const std::vector<FlagTarget>& targets,
                        const boost::program_options::options_description& host_flags,
                        std::ostream& warnings);

// Boost's default style, less its guessing: a unique prefix of a flag is not taken for it.
inline constexpr int kNoGuessing = boost::program_options::command_line_style::default_style &
                                   ~boost::program_options::command_line_style::allow_guessing;

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_COMMAND_FLAGS_H_
