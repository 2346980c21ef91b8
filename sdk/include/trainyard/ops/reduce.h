// The reduce ops of ops.h (core/src/engine/ops/reduce.cc declares and implements them). Reductions,
// argmax, softmax. Errors as ops.h says.
#ifndef TRAINYARD_OPS_REDUCE_H_
#define TRAINYARD_OPS_REDUCE_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The attribute structs of the reduce family's ops (what their kernels receive as
// KernelArgs::attrs; op.h has the family-neutral ones).
struct ReduceAttrs {
  uint32_t axis_mask = 0;  // bit i set: reduce axis i (of the input)
  bool keepdims = false;
};

namespace ops {

// Reductions. An empty `axes` reduces every axis.
TRAINYARD_API Tensor reduce_sum(const Tensor& x, std::vector<int64_t> axes = {},
                                bool keepdims = false);
TRAINYARD_API Tensor reduce_mean(const Tensor& x, std::vector<int64_t> axes = {},
                                 bool keepdims = false);
TRAINYARD_API Tensor reduce_max(const Tensor& x, std::vector<int64_t> axes = {},
                                bool keepdims = false);
TRAINYARD_API Tensor reduce_min(const Tensor& x, std::vector<int64_t> axes = {},
                                bool keepdims = false);
TRAINYARD_API Tensor reduce_logsumexp(const Tensor& x, std::vector<int64_t> axes = {},
                                      bool keepdims = false);
TRAINYARD_API Tensor argmax(const Tensor& x, int64_t axis);
TRAINYARD_API Tensor softmax(const Tensor& x, int64_t axis = -1);
TRAINYARD_API Tensor log_softmax(const Tensor& x, int64_t axis = -1);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_REDUCE_H_
