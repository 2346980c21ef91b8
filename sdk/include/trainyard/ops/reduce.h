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
