// with_config_line (config.h): the line of a config file that sets the field an error names.
//
// The file is parsed again with protobuf's ParseInfoTree, which records where each field was
// set, and every set field's path is listed with its line: "a.b" and, inside repeated fields,
// "a[2].b" as well as "a.b". Trainyard's plugin params add "SECTION.params.KEY"; a config
// dialect's file (config_dialect.h) is parsed as the dialect's message, from protobuf's
// generated pool, and adds each path below its model_param_prefixes (model.ssd in an Object
// Detection API config), which is how its model plugin names its options. Only names set on one
// line are used.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <map>
#include <set>
#include <string>
#include <string_view>

#include <memory>
#include <vector>

#include "trainyard/config_dialect.h"
#include "trainyard/core/config.h"
#include "trainyard/user_file.h"

namespace trainyard {
namespace {

namespace pb = google::protobuf;
using Lines = std::map<std::string, std::set<int>>;  // name -> the 1-based lines setting it

struct Quiet : pb::io::ErrorCollector {
  void AddError(int, pb::io::ColumnNumber, const std::string&) override {}
};

void add(Lines& lines, const std::string& name, int line) { lines[name].insert(line); }

// `model_prefixes`: a dialect's paths whose fields are the model's options.
using Prefixes = std::vector<std::string>;

void add_with_aliases(Lines& lines, const std::string& name, int line,
                      const Prefixes& model_prefixes) {
  add(lines, name, line);
  for (const std::string& prefix : model_prefixes) {
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) {
      add(lines, name.substr(prefix.size()), line);
    }
  }
}

// Walks the fields set in `message`, named below each of `prefixes` (several when a repeated
// field above gave both an indexed and a plain name).
void collect(const pb::Message& message, const pb::TextFormat::ParseInfoTree& tree,
             const std::vector<std::string>& prefixes, const Prefixes& model_prefixes,
             Lines& lines) {
  const pb::Reflection& reflection = *message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  reflection.ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    const int count = field->is_repeated() ? reflection.FieldSize(message, field) : 1;
    for (int i = 0; i < count; ++i) {
      const int index = field->is_repeated() ? i : -1;
      std::vector<std::string> names;
      for (const std::string& prefix : prefixes) {
        const std::string plain = prefix.empty() ? field->name() : prefix + "." + field->name();
        names.push_back(plain);
        if (field->is_repeated()) names.push_back(plain + "[" + std::to_string(i) + "]");
      }
      const pb::TextFormat::ParseLocation at = tree.GetLocation(field, index);
      if (at.line >= 0) {
        for (const std::string& name : names)
          add_with_aliases(lines, name, at.line + 1, model_prefixes);
      }
      if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
      const pb::Message& sub = field->is_repeated()
                                   ? reflection.GetRepeatedMessage(message, field, i)
                                   : reflection.GetMessage(message, field);
      const pb::TextFormat::ParseInfoTree* nested = tree.GetTreeForNested(field, index);
      if (nested == nullptr) continue;
      if (sub.GetDescriptor() == config::Param::descriptor() && at.line >= 0) {
        const auto& param = static_cast<const config::Param&>(sub);
        for (const std::string& prefix : prefixes) {
          add(lines, (prefix.empty() ? "" : prefix + ".") + "params." + param.key(), at.line + 1);
        }
      }
      collect(sub, *nested, names, model_prefixes, lines);
    }
  }
}

// Parses `text` as `message` and lists its lines; false when it does not parse.
bool lines_of(std::string_view text, pb::Message& message, const Prefixes& model_prefixes,
              Lines& lines) {
  pb::TextFormat::Parser parser;
  Quiet quiet;
  parser.RecordErrorsTo(&quiet);
  pb::TextFormat::ParseInfoTree tree;
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(std::string(text), &message)) return false;
  collect(message, tree, {""}, model_prefixes, lines);
  return true;
}

// Lines of `text` as the first config dialect whose message it parses as; false when none.
bool dialect_lines_of(std::string_view text, Lines& lines) {
  pb::DynamicMessageFactory factory;
  for (const auto& [name, dialect] : config_dialects::dialects()) {
    const pb::Descriptor* type =
        pb::DescriptorPool::generated_pool()->FindMessageTypeByName(dialect->message_type);
    if (type == nullptr) continue;
    std::unique_ptr<pb::Message> message(factory.GetPrototype(type)->New());
    if (lines_of(text, *message, dialect->model_param_prefixes, lines)) return true;
  }
  return false;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Whether `name` occurs in `message` as a whole name (not inside a longer one).
bool names(const std::string& message, const std::string& name) {
  for (std::size_t at = message.find(name); at != std::string::npos;
       at = message.find(name, at + 1)) {
    const std::size_t end = at + name.size();
    const bool starts = at == 0 || (!is_name_char(message[at - 1]) && message[at - 1] != '.');
    const bool ends =
        end == message.size() ||
        (!is_name_char(message[end]) &&
         !(message[end] == '.' && end + 1 < message.size() && is_name_char(message[end + 1])));
    if (starts && ends) return true;
  }
  return false;
}

}  // namespace

std::string with_config_line(const std::string& message, const std::string& path) {
  Lines lines;
  try {
    const std::string text = read_user_file(path, "pipeline config", kMaxPipelineConfigBytes);
    config::Pipeline pipeline;
    if (!lines_of(text, pipeline, {}, lines) && !dialect_lines_of(text, lines)) return message;
  } catch (const Error&) {
    return message;
  }
  const std::string* best = nullptr;
  int line = 0;
  for (const auto& [name, at] : lines) {
    if (best != nullptr && name.size() <= best->size()) continue;
    if (!names(message, name)) continue;
    best = &name;
    line = at.size() == 1 ? *at.begin() : 0;
  }
  if (best == nullptr || line == 0) return message;
  return message + " (" + path + " line " + std::to_string(line) + ")";
}

}  // namespace trainyard
