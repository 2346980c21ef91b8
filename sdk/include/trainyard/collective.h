// Collective communication between replicas of one synchronous data-parallel job.
//
// Every replica calls the same collectives in the same order with tensors of the same shape
// and dtype. Rank 0 is the chief: it writes checkpoints and summaries.
#ifndef TRAINYARD_COLLECTIVE_H_
#define TRAINYARD_COLLECTIVE_H_

#include "trainyard/export.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"

namespace trainyard {

enum class ReduceOp { kSum, kMean, kMax, kMin };

class TRAINYARD_API Collective : public PluginObject {
 public:
  ~Collective() override;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place: afterwards every replica's `tensor` holds the reduction over all replicas.
  virtual void all_reduce(Tensor& tensor, ReduceOp op) = 0;
  // In place: afterwards every replica's `tensor` holds rank `root`'s values.
  virtual void broadcast(Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;
};

}  // namespace trainyard

#endif  // TRAINYARD_COLLECTIVE_H_
