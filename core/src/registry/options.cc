#include "trainyard/options.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <sstream>

#include "trainyard/error.h"
#include "trainyard/names.h"

namespace trainyard {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_list(std::string_view text) {
  std::vector<std::string_view> parts;
  if (trim(text).empty()) return parts;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    parts.push_back(trim(text.substr(start, comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return parts;
}

[[noreturn]] void bad_text(const OptionSpec& spec, std::string_view text, const char* expected) {
  throw InvalidArgument("option '" + std::string(spec.name) + "': cannot read \"" +
                        std::string(text) + "\" as " + expected);
}

int64_t parse_int(const OptionSpec& spec, std::string_view text) {
  text = trim(text);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    bad_text(spec, text, "an integer");
  }
  return value;
}

double parse_float(const OptionSpec& spec, std::string_view text) {
  text = trim(text);
  std::string copy(text);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || errno == ERANGE) {
    bad_text(spec, text, "a number");
  }
  return value;
}

bool parse_bool(const OptionSpec& spec, std::string_view text) {
  text = trim(text);
  if (text == "true" || text == "True" || text == "1") return true;
  if (text == "false" || text == "False" || text == "0") return false;
  bad_text(spec, text, "a boolean (true or false)");
}

const char* value_type_name(const OptionValue& value) {
  static constexpr OptionType kTypes[] = {
      OptionType::kBool,    OptionType::kInt,       OptionType::kFloat,     OptionType::kString,
      OptionType::kIntList, OptionType::kFloatList, OptionType::kStringList};
  return option_type_name(kTypes[value.index()]);
}

std::string format_double(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

[[noreturn]] void unknown_option(std::string_view owner, std::span<const OptionSpec> specs,
                                 const std::string& name) {
  std::vector<std::string> valid;
  for (const OptionSpec& spec : specs) valid.emplace_back(spec.name);
  std::string message = std::string(owner) + " has no option '" + name + "'.";
  if (valid.empty()) {
    message += " It takes no options.";
  } else {
    message += " Valid options: " + join_names(valid) + ".";
    std::string nearest = nearest_name(name, valid);
    if (!nearest.empty()) message += " Did you mean '" + nearest + "'?";
  }
  throw InvalidArgument(message);
}

const OptionSpec* find_spec(std::span<const OptionSpec> specs, std::string_view name) {
  for (const OptionSpec& spec : specs) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

void check_unique(std::string_view owner, std::span<const OptionSpec> specs) {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    for (std::size_t j = i + 1; j < specs.size(); ++j) {
      if (std::string_view(specs[i].name) == specs[j].name) {
        throw InvalidArgument(std::string(owner) + " declares option '" + specs[i].name +
                              "' twice");
      }
    }
  }
}

Options defaults(std::string_view owner, std::span<const OptionSpec> specs) {
  check_unique(owner, specs);
  Options options;
  for (const OptionSpec& spec : specs) {
    try {
      options.set(spec.name,
                  parse_option_value(spec, spec.default_value ? spec.default_value : ""));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string(owner) + " declares an unreadable default: " + e.what());
    }
  }
  return options;
}

}  // namespace

const char* option_type_name(OptionType type) {
  switch (type) {
    case OptionType::kBool:
      return "bool";
    case OptionType::kInt:
      return "int";
    case OptionType::kFloat:
      return "float";
    case OptionType::kString:
      return "string";
    case OptionType::kIntList:
      return "int list";
    case OptionType::kFloatList:
      return "float list";
    case OptionType::kStringList:
      return "string list";
  }
  return "unknown";
}

std::string option_value_to_string(const OptionValue& value) {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return format_double(v); }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::vector<std::string> parts;
      for (int64_t x : v) parts.push_back(std::to_string(x));
      return join_names(parts, ",");
    }
    std::string operator()(const std::vector<double>& v) const {
      std::vector<std::string> parts;
      for (double x : v) parts.push_back(format_double(x));
      return join_names(parts, ",");
    }
    std::string operator()(const std::vector<std::string>& v) const { return join_names(v, ","); }
  };
  return std::visit(Visitor{}, value);
}

OptionValue parse_option_value(const OptionSpec& spec, std::string_view text) {
  switch (spec.type) {
    case OptionType::kBool:
      return parse_bool(spec, text);
    case OptionType::kInt:
      return parse_int(spec, text);
    case OptionType::kFloat:
      return parse_float(spec, text);
    case OptionType::kString:
      return std::string(text);
    case OptionType::kIntList: {
      std::vector<int64_t> out;
      for (std::string_view part : split_list(text)) out.push_back(parse_int(spec, part));
      return out;
    }
    case OptionType::kFloatList: {
      std::vector<double> out;
      for (std::string_view part : split_list(text)) out.push_back(parse_float(spec, part));
      return out;
    }
    case OptionType::kStringList: {
      std::vector<std::string> out;
      for (std::string_view part : split_list(text)) out.emplace_back(part);
      return out;
    }
  }
  throw InvalidArgument("option '" + std::string(spec.name) + "' has an unknown type");
}

OptionValue coerce_option_value(const OptionSpec& spec, const OptionValue& value) {
  const bool is_int = std::holds_alternative<int64_t>(value);
  switch (spec.type) {
    case OptionType::kBool:
      if (std::holds_alternative<bool>(value)) return value;
      break;
    case OptionType::kInt:
      if (is_int) return value;
      break;
    case OptionType::kFloat:
      if (std::holds_alternative<double>(value)) return value;
      if (is_int) return static_cast<double>(std::get<int64_t>(value));
      break;
    case OptionType::kString:
      if (std::holds_alternative<std::string>(value)) return value;
      break;
    case OptionType::kIntList:
      if (std::holds_alternative<std::vector<int64_t>>(value)) return value;
      if (is_int) return std::vector<int64_t>{std::get<int64_t>(value)};
      break;
    case OptionType::kFloatList:
      if (std::holds_alternative<std::vector<double>>(value)) return value;
      if (std::holds_alternative<double>(value))
        return std::vector<double>{std::get<double>(value)};
      if (is_int) return std::vector<double>{static_cast<double>(std::get<int64_t>(value))};
      if (auto* ints = std::get_if<std::vector<int64_t>>(&value)) {
        return std::vector<double>(ints->begin(), ints->end());
      }
      break;
    case OptionType::kStringList:
      if (std::holds_alternative<std::vector<std::string>>(value)) return value;
      if (auto* s = std::get_if<std::string>(&value)) return std::vector<std::string>{*s};
      break;
  }
  throw InvalidArgument("option '" + std::string(spec.name) + "' expects " +
                        option_type_name(spec.type) + ", but was given " + value_type_name(value) +
                        " \"" + option_value_to_string(value) + "\"");
}

Options Options::resolve(std::string_view owner, std::span<const OptionSpec> specs,
                         const std::map<std::string, OptionValue>& given) {
  Options options = defaults(owner, specs);
  for (const auto& [name, value] : given) {
    const OptionSpec* spec = find_spec(specs, name);
    if (spec == nullptr) unknown_option(owner, specs, name);
    try {
      options.set(name, coerce_option_value(*spec, value));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string(owner) + ": " + e.what());
    }
  }
  return options;
}

Options Options::resolve_text(std::string_view owner, std::span<const OptionSpec> specs,
                              const std::map<std::string, std::string>& given) {
  Options options = defaults(owner, specs);
  for (const auto& [name, text] : given) {
    const OptionSpec* spec = find_spec(specs, name);
    if (spec == nullptr) unknown_option(owner, specs, name);
    try {
      options.set(name, parse_option_value(*spec, text));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string(owner) + ": " + e.what());
    }
  }
  return options;
}

bool Options::contains(std::string_view name) const { return values_.find(name) != values_.end(); }

const OptionValue& Options::get(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    std::vector<std::string> names;
    for (const auto& [key, value] : values_) names.push_back(key);
    throw NotFound(
        "no option '" + std::string(name) + "': the class reads it but does not " + "declare it (" +
        (names.empty() ? std::string("it declares none") : "it declares " + join_names(names)) +
        "); declare each option a class reads in its `static constexpr "
        "trainyard::OptionSpec kOptions[]`, with its type, default and help");
  }
  return it->second;
}

namespace {
template <class T>
const T& get_as(const Options& options, std::string_view name, OptionType type) {
  const OptionValue& value = options.get(name);
  if (const T* typed = std::get_if<T>(&value)) return *typed;
  throw InvalidArgument("option '" + std::string(name) + "' holds " + value_type_name(value) +
                        ", not " + option_type_name(type));
}
}  // namespace

bool Options::get_bool(std::string_view name) const {
  return get_as<bool>(*this, name, OptionType::kBool);
}
int64_t Options::get_int(std::string_view name) const {
  return get_as<int64_t>(*this, name, OptionType::kInt);
}
double Options::get_float(std::string_view name) const {
  return get_as<double>(*this, name, OptionType::kFloat);
}
const std::string& Options::get_string(std::string_view name) const {
  return get_as<std::string>(*this, name, OptionType::kString);
}
const std::vector<int64_t>& Options::get_int_list(std::string_view name) const {
  return get_as<std::vector<int64_t>>(*this, name, OptionType::kIntList);
}
const std::vector<double>& Options::get_float_list(std::string_view name) const {
  return get_as<std::vector<double>>(*this, name, OptionType::kFloatList);
}
const std::vector<std::string>& Options::get_string_list(std::string_view name) const {
  return get_as<std::vector<std::string>>(*this, name, OptionType::kStringList);
}

void Options::set(std::string name, OptionValue value) {
  values_.insert_or_assign(std::move(name), std::move(value));
}

}  // namespace trainyard
