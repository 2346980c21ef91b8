#include "train/data_parallel.h"

#include <cstdlib>
#include <string>

#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {

int launcher_world_size() {
  // Open MPI's mpirun, then PMIx and PMI launchers (MPICH's mpiexec, Slurm's srun).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long size = std::strtol(value, &end, 10);
    if (*end != '\0' || size < 1 || size > (1 << 20)) {
      throw ConfigError(std::string("the MPI launcher's ") + name + " is '" + value +
                        "', not a number of ranks");
    }
    return static_cast<int>(size);
  }
  return 0;
}

std::shared_ptr<Collective> make_run_collective(const PluginRegistry& registry,
                                                const config::Pipeline& pipeline,
                                                std::ostream& log) {
  const config::DistributedConfig& d = pipeline.distributed();
  std::string name;
  if (d.has_collective()) {
    name = class_or(d.collective(), true, "LocalCollective");
  } else if (const int launched = launcher_world_size(); launched > 1) {
    bool installed = false;
    for (const ClassInfo& info : registry.classes()) {
      installed |= info.kind == ClassKind::kCollective && info.class_name == "MpiCollective";
    }
    if (!installed) {
      throw ConfigError("an MPI launcher started " + std::to_string(launched) +
                        " ranks of this run, but no MpiCollective plugin is installed (the "
                        "trainyard package built with libopenmpi-dev provides it); set "
                        "--collective to the collective that connects the ranks");
    }
    name = "MpiCollective";
    log << "launched by MPI with " << launched << " ranks: using MpiCollective\n";
  } else {
    return nullptr;
  }
  return create_plugin<Collective>(registry, ClassKind::kCollective, name,
                                   d.has_collective() ? &d.collective() : nullptr,
                                   "distributed.collective");
}

// ---- GradientReducer ----

GradientReducer::GradientReducer(Collective& collective, int64_t bucket_bytes)
    : collective_(collective), bucket_bytes_(bucket_bytes) {
  if (bucket_bytes_ < 1) {
    throw ConfigError("train_config.gradient_bucket_mb must be positive");
  }
}

void GradientReducer::begin(const std::vector<Variable*>& variables) {
  if (!plan_.empty() && variables.size() != bucket_of_.size()) {
    throw InvalidArgument("GradientReducer: the step trains " + std::to_string(variables.size()) +
                          " variables, the bucket plan " + std::to_string(bucket_of_.size()));
  }
  variables_ = &variables;
  final_.assign(variables.size(), Tensor());
  launched_.clear();
  for (Bucket& b : buckets_) {
    b.waiting = b.members.size();
    b.work.reset();
    b.tensors.clear();
  }
  next_launch_ = 0;
}

void GradientReducer::make_plan(const std::vector<Tensor>* grads) {
  const std::vector<Variable*>& vars = *variables_;
  bucket_of_.assign(vars.size(), 0);
  plan_.clear();
  std::vector<std::size_t> current;
  int64_t bytes = 0;
  DType dtype = DType::kF32;
  auto close = [&] {
    if (current.empty()) return;
    plan_.push_back(std::move(current));
    current.clear();
    bytes = 0;
  };
  for (std::size_t k = vars.size(); k-- > 0;) {
    const VariableSpec& spec = vars[k]->spec();
    const DType type = grads != nullptr && (*grads)[k].defined() ? (*grads)[k].dtype() : spec.dtype;
    // One reduction moves one dtype.
    if (!current.empty() && type != dtype) close();
    dtype = type;
    current.push_back(k);
    bytes += spec.shape.num_elements() * static_cast<int64_t>(dtype_size(type));
    if (bytes >= bucket_bytes_) close();
  }
  close();
  buckets_.assign(plan_.size(), Bucket());
  for (std::size_t b = 0; b < plan_.size(); ++b) {
    buckets_[b].members = plan_[b];
    buckets_[b].waiting = plan_[b].size();
    for (std::size_t k : plan_[b]) bucket_of_[k] = b;
  }
}

Tensor GradientReducer::gradient_or_zeros(std::size_t index) const {
  if (final_[index].defined()) return final_[index];
  const VariableSpec& spec = (*variables_)[index]->spec();
  return ops::zeros((*variables_)[index]->value().backend(), spec.shape, spec.dtype);
}

void GradientReducer::launch(Bucket& bucket) {
  NoGradScope no_grad;
  // Reduced in place, without a copy, except where a gradient shares its storage with one
  // already launched this step (the two inputs of an add get the same tensor): that one is
  // copied, so that no memory is reduced twice or by two reductions at once.
  for (std::size_t k : bucket.members) {
    Tensor g = gradient_or_zeros(k);
    if (!launched_.insert({g.storage().get(), g.byte_offset()}).second) g = ops::copy(g);
    bucket.tensors.push_back(g);
  }
  bucket.work = collective_.all_reduce_async(bucket.tensors, ReduceOp::kMean);
}

void GradientReducer::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].waiting == 0) {
    launch(buckets_[next_launch_++]);
  }
}

void GradientReducer::ready(std::size_t index, const Tensor& gradient) {
  if (variables_ == nullptr || index >= final_.size()) return;
  final_[index] = gradient;
  if (plan_.empty()) return;  // the first step reduces after its backward pass
  Bucket& b = buckets_[bucket_of_[index]];
  if (b.waiting > 0) --b.waiting;
  launch_ready();
}

void GradientReducer::finish(std::vector<Tensor>& grads) {
  if (variables_ == nullptr || grads.size() != final_.size()) {
    throw InvalidArgument("GradientReducer::finish: begin() was not called for these gradients");
  }
  for (std::size_t k = 0; k < grads.size(); ++k) final_[k] = grads[k];
  if (plan_.empty()) make_plan(&grads);
  // Those the backward pass never reported (not reached) complete their buckets now.
  for (Bucket& b : buckets_) b.waiting = 0;
  launch_ready();
  for (Bucket& b : buckets_) {
    b.work->wait();
    for (std::size_t i = 0; i < b.members.size(); ++i) grads[b.members[i]] = b.tensors[i];
    b.work.reset();
    b.tensors.clear();
  }
  launched_.clear();
  variables_ = nullptr;
}

void broadcast_variables(Collective& collective, const std::vector<Variable*>& variables,
                         int root) {
  for (Variable* v : variables) {
    Tensor value = v->value();
    collective.broadcast(value, root);
  }
}

}  // namespace trainyard
