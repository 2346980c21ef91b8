// Collective communication between replicas of one synchronous data-parallel job.
//
// Every replica calls the same collectives in the same order with tensors of the same shape
// and dtype. Rank 0 is the chief: it writes checkpoints and summaries.
//
// Device tensors: a collective over tensors of an asynchronous backend (CUDA with NCCL) is
// queued on that backend's current stream (Backend::current_stream), ordered after the work
// that produced the tensors; the tensors hold the result for work queued after it on that
// stream. The *_async forms return at once with a CollectiveWork, so a gradient reducer can
// reduce buckets while the backward pass goes on (PyTorch DDP, Horovod).
#ifndef TRAINYARD_COLLECTIVE_H_
#define TRAINYARD_COLLECTIVE_H_

#include <memory>
#include <span>

#include "trainyard/export.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"

namespace trainyard {

enum class ReduceOp { kSum, kMean, kMax, kMin };

// A collective in flight (c10d's Work).
class TRAINYARD_API CollectiveWork {
 public:
  virtual ~CollectiveWork();
  // Blocks until the collective has finished on this replica; throws its error (naming the
  // collective and the peer or cause).
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};

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

  // The all-reduce of every tensor of `tensors`, started now and finished by the returned
  // work's wait(); the tensors must stay alive and unread until then. The default runs
  // all_reduce on each tensor before returning completed work.
  virtual std::shared_ptr<CollectiveWork> all_reduce_async(std::span<Tensor> tensors, ReduceOp op);
  // `out` [world_size, ...tensor's shape] receives every replica's `tensor`, in rank order.
  // The default serves a world of one (a copy) and is Unimplemented otherwise.
  virtual void all_gather(const Tensor& tensor, Tensor& out);
};

}  // namespace trainyard

#endif  // TRAINYARD_COLLECTIVE_H_
