#include "engine/variable_regex.h"

#include <re2/re2.h>

#include "trainyard/error.h"

namespace trainyard {
namespace {

// The compiled program's memory, RE2's own default: a pattern past it is refused at compile
// time instead of growing without bound.
constexpr int64_t kMaxProgramBytes = int64_t{8} << 20;

}  // namespace

VariableRegex::VariableRegex(const std::string& pattern, std::string field) : pattern_(pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(kMaxProgramBytes);
  re_ = std::make_unique<re2::RE2>(pattern, options);
  if (!re_->ok()) {
    std::string why = re_->error();
    if (re_->error_code() == RE2::ErrorBadPerlOp || re_->error_code() == RE2::ErrorBadEscape) {
      why += " (variable regexes run on RE2, which has no lookaround or backreferences)";
    }
    throw ConfigError(field + ": bad variable regex '" + pattern + "': " + why);
  }
}

VariableRegex::~VariableRegex() = default;
VariableRegex::VariableRegex(VariableRegex&&) noexcept = default;
VariableRegex& VariableRegex::operator=(VariableRegex&&) noexcept = default;

bool VariableRegex::matches_prefix(std::string_view name) const {
  return re_->Match(re2::StringPiece(name.data(), name.size()), 0, name.size(), RE2::ANCHOR_START,
                    nullptr, 0);
}

}  // namespace trainyard
