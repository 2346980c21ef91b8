// Synchronous data parallelism: the collective of a run, and the gradient reducer that averages
// each step's gradients over the replicas as PyTorch DDP and Horovod do it. Internal.
//
// Every replica runs the same steps on its own shard of the input; after each backward pass the
// gradients are averaged over the replicas, so every replica applies the same update and the
// variables stay equal (bitwise: the reduction gives each replica the same bytes). With a loss
// that is a mean over the batch, N replicas of batch B take the step one process takes on the
// N x B examples.
#ifndef TRAINYARD_CORE_SRC_DATA_PARALLEL_H_
#define TRAINYARD_CORE_SRC_DATA_PARALLEL_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <set>
#include <utility>
#include <vector>

#include "trainyard/collective.h"
#include "trainyard/core/config.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/training_loop.h"
#include "trainyard/variable.h"

namespace trainyard {

// The collective `pipeline` asks for (distributed.collective), else MpiCollective when the
// process was started by mpirun with more than one rank, else nullptr (one process). Throws
// ConfigError when mpirun started several ranks and no MPI collective is installed.
std::shared_ptr<Collective> make_run_collective(const PluginRegistry& registry,
                                                const config::Pipeline& pipeline,
                                                std::ostream& log);

// Averages a step's gradients over the replicas, in buckets of about `bucket_bytes` taken in
// reverse order of the variables' creation (the order the backward pass finishes them), each
// reduced as soon as every gradient in it is final while the backward pass goes on. Buckets
// are reduced in the same order on every replica. The bucket plan is made at the first step
// (whose gradients are reduced after its backward pass).
class GradientReducer {
 public:
  GradientReducer(Collective& collective, int64_t bucket_bytes);

  // Before a step's backward pass: the variables whose gradients it computes, in creation
  // order.
  void begin(const std::vector<Variable*>& variables);
  // The gradient of variables[index] is final (undefined: none reaches it).
  void ready(std::size_t index, const Tensor& gradient);
  // After the backward pass: `grads` (one per variable) become their means over the replicas;
  // an undefined gradient is reduced as zeros, so that every replica reduces the same bytes.
  void finish(std::vector<Tensor>& grads);

  // The plan, for logs and tests: the variable indices of each bucket, in reduction order.
  const std::vector<std::vector<std::size_t>>& buckets() const { return plan_; }

 private:
  struct Bucket {
    std::vector<std::size_t> members;
    std::size_t waiting = 0;  // members not yet final this step
    std::shared_ptr<CollectiveWork> work;
    std::vector<Tensor> tensors;  // the copies being reduced
  };
  void make_plan(const std::vector<Tensor>* grads);
  void launch_ready();
  void launch(Bucket& bucket);
  Tensor gradient_or_zeros(std::size_t index) const;

  Collective& collective_;
  int64_t bucket_bytes_;
  const std::vector<Variable*>* variables_ = nullptr;
  std::vector<std::vector<std::size_t>> plan_;
  std::vector<std::size_t> bucket_of_;  // variable index -> bucket
  std::vector<Bucket> buckets_;
  std::vector<Tensor> final_;  // this step's final gradients, by variable index
  std::set<std::pair<const Storage*, std::size_t>> launched_;  // storages reduced this step
  std::size_t next_launch_ = 0;
};

// Rank `root`'s values of every variable, on every replica (in place).
void broadcast_variables(Collective& collective, const std::vector<Variable*>& variables,
                         int root = 0);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_DATA_PARALLEL_H_
