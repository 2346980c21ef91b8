// The regexes a config applies to variable names (train_config's freeze_variables,
// update_trainable_variables and gradient_multipliers), matched as Python's re.match matches
// them in the Object Detection API and TF-Slim: at the start of the name, not necessarily to
// its end.
//
// Patterns come from configs, which are untrusted, so they run on RE2: time linear in the
// name's length for every pattern (a nested quantifier such as `(a+)+$` cannot backtrack
// exponentially), and a bounded compiled size. RE2 has no lookaround and no backreferences; a
// pattern that uses them is a ConfigError naming the field.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace trainyard {

class VariableRegex {
 public:
  // Compiles `pattern`; `field` names where it came from in errors
  // ("train_config.freeze_variables[0]"). Throws ConfigError when RE2 refuses it.
  VariableRegex(const std::string& pattern, std::string field);
  ~VariableRegex();
  VariableRegex(VariableRegex&&) noexcept;
  VariableRegex& operator=(VariableRegex&&) noexcept;

  // True when the pattern matches a prefix of `name` (re.match).
  bool matches_prefix(std::string_view name) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  std::unique_ptr<re2::RE2> re_;
};

}  // namespace trainyard
