#include "engine/model_context.h"

#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {

std::string StoreContext::key_in(const CheckpointReader& checkpoint, const std::string& name) {
  if (checkpoint.contains(name)) return name;
  std::string scoped = kTowerScope + name;
  if (checkpoint.contains(scoped)) {
    if (&checkpoint == restore_) tower_scope_ = true;
    return scoped;
  }
  return name;
}

Variable& StoreContext::extra(const VariableSpec& spec, std::ostream& log, const Tensor* initial) {
  bool existed = store_.find(spec.name) != nullptr;
  Variable& v = store_.get_or_create(spec);
  if (existed) return v;
  if (restore_ != nullptr && restore_->contains(key_in(*restore_, spec.name))) {
    restore(v);
    return v;
  }
  if (restore_ != nullptr) {
    log << "'" << spec.name << "' is not in " << restore_->prefix()
        << "; starting it from its initializer\n";
  }
  if (initial != nullptr) v.assign(ops::copy(*initial));
  return v;
}

void StoreContext::restore(Variable& v) {
  std::string name = key_in(*restore_, v.name());
  const std::string average = key_in(*restore_, v.name() + "/ExponentialMovingAverage");
  if (averages_ && v.trainable() && restore_->contains(average)) name = average;
  Tensor value = restore_->read(name, backend_);
  if (value.shape() != v.spec().shape || value.dtype() != v.spec().dtype) {
    throw ConfigError("checkpoint " + restore_->prefix() + " holds '" + name + "' as " +
                      value.description() + " but the model needs " + dtype_name(v.spec().dtype) +
                      v.spec().shape.to_string() + " (a checkpoint from another model?)");
  }
  if (v.value().requires_grad()) value.set_requires_grad(true);
  v.assign(value);
}

void StoreContext::fine_tune(Variable& v) {
  if (!(v.spec().collections & kModelVariables)) return;
  for (const std::string& scope : exclude_scopes_) {
    if (!scope.empty() && v.name().rfind(scope, 0) == 0) {
      report_.excluded.push_back(v.name());
      return;
    }
  }
  std::string name = v.name();
  if (!restore_scopes_.empty()) {
    const std::pair<const std::string, std::string>* scope = nullptr;
    for (const auto& entry : restore_scopes_) {
      if (name.rfind(entry.first, 0) == 0 &&
          (scope == nullptr || entry.first.size() > scope->first.size())) {
        scope = &entry;
      }
    }
    if (scope == nullptr) {
      report_.outside_restore_map.push_back(name);
      return;
    }
    name = scope->second + name.substr(scope->first.size());
  }
  const std::string key = key_in(*fine_tune_, name);
  // The variable as the report names it: with its checkpoint name when the two differ.
  const std::string named = key == v.name() ? v.name() : v.name() + " (as " + key + ")";
  if (!fine_tune_->contains(key)) {
    report_.missing.push_back(named);
    return;
  }
  const CheckpointTensorInfo& info = fine_tune_->info(key);
  if (!info.unsupported.empty()) {
    report_.mismatched.push_back(named + ": " + info.unsupported);
    return;
  }
  if (info.shape != v.spec().shape || info.dtype != v.spec().dtype) {
    report_.mismatched.push_back(named + ": checkpoint " + dtype_name(info.dtype) +
                                 info.shape.to_string() + ", model " + dtype_name(v.spec().dtype) +
                                 v.spec().shape.to_string());
    return;
  }
  Tensor value = fine_tune_->read(key, backend_);
  if (v.value().requires_grad()) value.set_requires_grad(true);
  v.assign(value);
  report_.restored.push_back(named);
}

}  // namespace trainyard
