#include "trainyard/pkg/layers/variable_scope.h"

#include <string>
#include <utility>

#include "trainyard/error.h"

namespace trainyard::layers {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

VariableScope::VariableScope(ModelContext& ctx, Mode mode) : VariableScope(&ctx, mode, "") {}

VariableScope::VariableScope(ModelContext* ctx, Mode mode, std::string prefix)
    : ctx_(ctx), mode_(mode), prefix_(std::move(prefix)) {}

std::string VariableScope::full_name(std::string_view name) const {
  if (prefix_.empty()) return std::string(name);
  return prefix_ + "/" + std::string(name);
}

VariableScope VariableScope::child(std::string_view name) const {
  if (name.empty() || name.front() == '/' || name.back() == '/' ||
      name.find("//") != std::string_view::npos) {
    throw InvalidArgument("variable scope '" + std::string(name) + "' under '" + prefix_ +
                          "': a scope name must be non-empty, without leading, trailing or "
                          "doubled '/'");
  }
  VariableScope out(ctx_, mode_, full_name(name));
  out.quantize_ = quantize_;
  return out;
}

void VariableScope::set_quantize(const std::optional<QuantizeOptions>& options, bool count_step) {
  quantize_ = options ? std::make_shared<QuantizeState>(*options, count_step) : nullptr;
}

VariableScope VariableScope::child_or_default(std::string_view name,
                                              std::string_view default_name) {
  if (!name.empty()) return child(name);
  auto it = default_name_counts_.find(default_name);
  if (it == default_name_counts_.end()) {
    default_name_counts_.emplace(std::string(default_name), 1);
    return child(default_name);
  }
  const int n = it->second++;
  return child(std::string(default_name) + "_" + std::to_string(n));
}

Variable& VariableScope::variable(VariableSpec spec) const {
  spec.name = full_name(spec.name);
  return ctx_->variable(spec);
}

uint64_t VariableScope::op_seed(std::string_view name) const {
  return splitmix64(ctx_->seed() ^ splitmix64(fnv1a(full_name(name))));
}

}  // namespace trainyard::layers
