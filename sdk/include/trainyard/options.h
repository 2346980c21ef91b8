// Declared options of a plugin class, and the resolved values a class is constructed with.
//
// A plugin class declares its parameters as a static array of OptionSpec (name, type, default
// written as text, help). The host builds an Options object for every instance it creates:
// each declared option starts at its default, and values from a pipeline config or from flags
// replace it after being checked against the declaration. A class therefore finds every
// option it declared, with the declared type, and never one it did not declare.
#ifndef TRAINYARD_OPTIONS_H_
#define TRAINYARD_OPTIONS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "trainyard/export.h"

namespace trainyard {

enum class OptionType : uint32_t {
  kBool = 0,
  kInt = 1,
  kFloat = 2,
  kString = 3,
  kIntList = 4,
  kFloatList = 5,
  kStringList = 6,
};

TRAINYARD_API const char* option_type_name(OptionType type);

// One declared parameter. Plain data so that it can live in a plugin's static tables; the
// strings must outlive the plugin library's use (string literals do).
struct OptionSpec {
  const char* name;  // snake_case, as in the original flags: "moe_num_mixtures"
  OptionType type;
  const char* default_value;  // text parsed as `type`: "2", "1e-8", "true", "1024,128", ""
  const char* help;           // one line
};

// One table of several: a class that reads the options a shared building block declares (a
// model ending in pkg/yt8m's classifier) lists them after its own:
//   static constexpr auto kOptions = join_options(kMyOptions, yt8m::kClassifierOptions);
template <std::size_t... N>
constexpr std::array<OptionSpec, (N + ...)> join_options(
    const std::array<OptionSpec, N>&... parts) {
  std::array<OptionSpec, (N + ...)> all{};
  std::size_t at = 0;
  for (std::span<const OptionSpec> part : {std::span<const OptionSpec>(parts)...}) {
    for (const OptionSpec& spec : part) all[at++] = spec;
  }
  return all;
}

using OptionValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                                 std::vector<double>, std::vector<std::string>>;

// Renders a value the way parse_option_value reads it back ("1024,128", "true").
TRAINYARD_API std::string option_value_to_string(const OptionValue& value);

// Parses `text` as the declared type of `spec`. Lists are comma-separated; an empty text is an
// empty list. Throws InvalidArgument naming the option, the text and the expected type.
TRAINYARD_API OptionValue parse_option_value(const OptionSpec& spec, std::string_view text);

// Converts a typed value to the declared type where no information is lost (an int to a
// float, one element to a one-element list). Throws InvalidArgument naming the option, the
// declared type and the type given.
TRAINYARD_API OptionValue coerce_option_value(const OptionSpec& spec, const OptionValue& value);

// The resolved options of one plugin instance.
class TRAINYARD_API Options {
 public:
  Options() = default;

  // Starts from every default in `specs`, then applies `given` (name -> value). `owner` names
  // the class in errors. An unknown name is an InvalidArgument listing the valid names and the
  // nearest one; a value of the wrong type names the option and both types.
  static Options resolve(std::string_view owner, std::span<const OptionSpec> specs,
                         const std::map<std::string, OptionValue>& given);
  // Same, from text values as flags give them.
  static Options resolve_text(std::string_view owner, std::span<const OptionSpec> specs,
                              const std::map<std::string, std::string>& given);

  bool contains(std::string_view name) const;
  const OptionValue& get(std::string_view name) const;  // throws NotFound

  bool get_bool(std::string_view name) const;
  int64_t get_int(std::string_view name) const;
  double get_float(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;
  const std::vector<int64_t>& get_int_list(std::string_view name) const;
  const std::vector<double>& get_float_list(std::string_view name) const;
  const std::vector<std::string>& get_string_list(std::string_view name) const;

  // Sets a value without checking it against any declaration (tests, internal use).
  void set(std::string name, OptionValue value);

  const std::map<std::string, OptionValue, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, OptionValue, std::less<>> values_;
};

}  // namespace trainyard

#endif  // TRAINYARD_OPTIONS_H_
