// The Collective interface's defaults (collective.h): asynchronous all-reduce as a synchronous
// one, and all_gather for a world of one.
#include "trainyard/collective.h"

#include <memory>
#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {

Collective::~Collective() = default;  // the key function: the vtable lives here
CollectiveWork::~CollectiveWork() = default;

namespace {
class CompletedWork final : public CollectiveWork {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};
}  // namespace

std::shared_ptr<CollectiveWork> Collective::all_reduce_async(std::span<Tensor> tensors,
                                                             ReduceOp op) {
  for (Tensor& t : tensors) all_reduce(t, op);
  return std::make_shared<CompletedWork>();
}

void Collective::all_gather(const Tensor& tensor, Tensor& out) {
  if (!tensor.defined() || !out.defined()) {
    throw InvalidArgument("all_gather: undefined tensor");
  }
  std::vector<int64_t> dims = {world_size()};
  for (int64_t d : tensor.shape().dims()) dims.push_back(d);
  if (out.shape() != Shape(dims) || out.dtype() != tensor.dtype()) {
    throw InvalidArgument("all_gather: out must be " + Shape(dims).to_string() + " of " +
                          dtype_name(tensor.dtype()) + ", got " + out.description());
  }
  if (world_size() != 1) {
    throw Unimplemented("all_gather is not implemented by this collective for a world of " +
                        std::to_string(world_size()));
  }
  ops::assign(out, ops::reshape(tensor, out.shape()));
}

}  // namespace trainyard
