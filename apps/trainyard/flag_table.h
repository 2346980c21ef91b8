// Declarative flag tables: each flag that sets one scalar field of the pipeline config is a
// row (flag, field, --help section, help), its type and default read from the field in
// pipeline.proto, so a default lives in one place. The commands declare their tables in
// flag_tables.h and apply them with one call; flags that do more than set a field (aliases,
// lists, the towers) stay code. Internal to apps/trainyard.
#ifndef TRAINYARD_APPS_TRAINYARD_FLAG_TABLE_H_
#define TRAINYARD_APPS_TRAINYARD_FLAG_TABLE_H_

#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "trainyard/proto/pipeline.pb.h"

namespace trainyard::app {

struct ConfigFlag {
  // How a command applies the flag.
  enum class Apply {
    kGiven,    // sets the field when the flag is given
    kFill,     // also sets the field to the flag's default when the config leaves it unset
    kCommand,  // declared (type, default, help) by the table, applied by the command's code
  };
  const char* flag;
  const char* field;  // a scalar field of config::Pipeline by its path: "train_config.batch_size"
  const char* group;  // the --help section it is listed under
  const char* help;
  Apply apply = Apply::kGiven;
};

// Adds the flags of `table` listed under `group`, typed as their field, with the field's default
// (when pipeline.proto gives one, or the flag fills an unset field) shown by --help and used by
// kFill. A bool flag takes a bare --flag as true (absl's convention). Throws std::logic_error
// when a row names no scalar field of the pipeline: a table error, caught by any --help.
void add_config_flags(boost::program_options::options_description& d,
                      std::span<const ConfigFlag> table, std::string_view group);

// Sets each field of `table` whose flag was given (kGiven, kFill), and each kFill field the
// config leaves unset to the flag's default. Rows whose flag this command did not declare are
// skipped.
void apply_config_flags(const boost::program_options::variables_map& vm,
                        std::span<const ConfigFlag> table, config::Pipeline& p);

// {flag, field} of each row of `table`, then `extra`'s (flags the commands apply in code): the
// fields flags set, for given_field_flags (validate_pipeline's messages name the flag).
std::vector<std::pair<const char*, const char*>> flag_fields(
    std::span<const ConfigFlag> table, std::span<const std::pair<const char*, const char*>> extra);

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_FLAG_TABLE_H_
