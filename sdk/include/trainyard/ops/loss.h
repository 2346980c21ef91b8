// The loss ops of ops.h (core/src/engine/ops/loss.cc declares and implements them). Losses.
// binary_cross_entropy and l2_loss are composites (composite.h): one fused pass on backends with
// the kernel, the composed ops elsewhere. Errors as ops.h says.
#ifndef TRAINYARD_OPS_LOSS_H_
#define TRAINYARD_OPS_LOSS_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

namespace ops {

// Losses.
TRAINYARD_API Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// The YouTube-8M CrossEntropyLoss of probabilities per example: the sum over the last axis of
// -(y log(p + eps) + (1 - y) log((1 - p) + eps)); shape [...] for p [..., C]. One fused pass
// (and one for the gradient) on backends with the kernel, the composed ops elsewhere.
TRAINYARD_API Tensor binary_cross_entropy(const Tensor& predictions, const Tensor& labels,
                                          double epsilon);
// tf.nn.l2_loss: sum(x^2) / 2, a scalar.
TRAINYARD_API Tensor l2_loss(const Tensor& x);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_LOSS_H_
