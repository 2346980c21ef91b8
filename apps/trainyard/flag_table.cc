// Flags declared by table rows and applied through the config's reflection (flag_table.h).
#include "flag_table.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "command_flags.h"

namespace trainyard::app {

namespace po = boost::program_options;
namespace pb = google::protobuf;

namespace {

// The fields from config::Pipeline down to the row's scalar field, last.
std::vector<const pb::FieldDescriptor*> field_path(const ConfigFlag& row) {
  std::vector<const pb::FieldDescriptor*> path;
  const pb::Descriptor* message = config::Pipeline::descriptor();
  const std::string_view text = row.field;
  std::size_t begin = 0;
  while (true) {
    const std::size_t dot = text.find('.', begin);
    const std::string name(text.substr(begin, dot == std::string_view::npos ? dot : dot - begin));
    const pb::FieldDescriptor* field = message ? message->FindFieldByName(name) : nullptr;
    if (field == nullptr || field->is_repeated()) {
      throw std::logic_error(std::string("flag table: --") + row.flag + " names " + row.field +
                             ", which is no singular field of the pipeline config");
    }
    path.push_back(field);
    if (dot == std::string_view::npos) break;
    message = field->message_type();
    begin = dot + 1;
  }
  if (path.back()->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
    throw std::logic_error(std::string("flag table: --") + row.flag + " names " + row.field +
                           ", a message, not a scalar field");
  }
  return path;
}

// A program_options value of the field's type, with the field's default when `with_default`.
po::value_semantic* value_of(const pb::FieldDescriptor& field, bool with_default) {
  switch (field.cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT64: {
      auto* v = po::value<int64_t>();
      return with_default ? v->default_value(field.default_value_int64()) : v;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT64: {
      auto* v = po::value<uint64_t>();
      return with_default ? v->default_value(field.default_value_uint64()) : v;
    }
    case pb::FieldDescriptor::CPPTYPE_INT32: {
      auto* v = po::value<int>();
      return with_default ? v->default_value(field.default_value_int32()) : v;
    }
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      return with_default ? real(field.default_value_double()) : po::value<double>();
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      auto* v = po::value<bool>()->implicit_value(true);
      return with_default ? v->default_value(field.default_value_bool()) : v;
    }
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      auto* v = po::value<std::string>();
      return with_default ? v->default_value(field.default_value_string()) : v;
    }
    default:
      throw std::logic_error("flag table: field " + field.full_name() +
                             " has a type flags do not set");
  }
}

void set_field(pb::Message& message, const pb::FieldDescriptor& field,
               const po::variable_value& value) {
  const pb::Reflection& r = *message.GetReflection();
  switch (field.cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT64:
      r.SetInt64(&message, &field, value.as<int64_t>());
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      r.SetUInt64(&message, &field, value.as<uint64_t>());
      break;
    case pb::FieldDescriptor::CPPTYPE_INT32:
      r.SetInt32(&message, &field, value.as<int>());
      break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      r.SetDouble(&message, &field, value.as<double>());
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      r.SetBool(&message, &field, value.as<bool>());
      break;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      r.SetString(&message, &field, value.as<std::string>());
      break;
    default:
      throw std::logic_error("flag table: field " + field.full_name() +
                             " has a type flags do not set");
  }
}

}  // namespace

void add_config_flags(po::options_description& d, std::span<const ConfigFlag> table,
                      std::string_view group) {
  for (const ConfigFlag& row : table) {
    if (row.group != group) continue;
    const pb::FieldDescriptor& field = *field_path(row).back();
    const bool with_default = field.has_default_value() || row.apply == ConfigFlag::Apply::kFill;
    d.add_options()(row.flag, value_of(field, with_default), row.help);
  }
}

void apply_config_flags(const po::variables_map& vm, std::span<const ConfigFlag> table,
                        config::Pipeline& p) {
  for (const ConfigFlag& row : table) {
    if (row.apply == ConfigFlag::Apply::kCommand || vm.count(row.flag) == 0) continue;
    const std::vector<const pb::FieldDescriptor*> path = field_path(row);
    const pb::FieldDescriptor& field = *path.back();
    if (!given(vm, row.flag)) {
      if (row.apply != ConfigFlag::Apply::kFill) continue;
      // Unset where the config leaves any section on the way unset.
      const pb::Message* section = &p;
      for (std::size_t i = 0; i + 1 < path.size() && section != nullptr; ++i) {
        const pb::Reflection& r = *section->GetReflection();
        section = r.HasField(*section, path[i]) ? &r.GetMessage(*section, path[i]) : nullptr;
      }
      if (section != nullptr && section->GetReflection()->HasField(*section, &field)) continue;
    }
    pb::Message* message = &p;
    for (std::size_t i = 0; i + 1 < path.size(); ++i) {
      message = message->GetReflection()->MutableMessage(message, path[i]);
    }
    set_field(*message, field, vm[row.flag]);
  }
}

std::vector<std::pair<const char*, const char*>> flag_fields(
    std::span<const ConfigFlag> table, std::span<const std::pair<const char*, const char*>> extra) {
  std::vector<std::pair<const char*, const char*>> out;
  for (const ConfigFlag& row : table) out.emplace_back(row.flag, row.field);
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

}  // namespace trainyard::app
