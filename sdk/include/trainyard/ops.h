// The ops models, losses and optimizers compose. Each call checks its inputs, runs the kernel
// of the inputs' backend and, when an input requires a gradient and gradient recording is on,
// records the op for autodiff (autodiff.h).
//
// Errors: a shape or dtype mismatch throws InvalidArgument naming the op and both shapes and
// dtypes; inputs on different backends or an out-of-range axis or index throw InvalidArgument
// naming them; an op the backend has no kernel for throws Unimplemented naming the op and the
// device. Nothing aborts.
//
// Axes may be negative (counted from the end). Every op returns new tensors except the views:
// reshape() and slice_outer() share their input's storage.
//
// The declarations are split by op family, mirroring core/src/engine/ops/<family>.cc; this header
// includes them all, and logit_losses.h, the label losses on logits composed of them.
#ifndef TRAINYARD_OPS_H_
#define TRAINYARD_OPS_H_

#include "trainyard/logit_losses.h"
#include "trainyard/ops/array.h"
#include "trainyard/ops/detection.h"
#include "trainyard/ops/image.h"
#include "trainyard/ops/linalg.h"
#include "trainyard/ops/loss.h"
#include "trainyard/ops/math.h"
#include "trainyard/ops/nn.h"
#include "trainyard/ops/quantization.h"
#include "trainyard/ops/random.h"
#include "trainyard/ops/reduce.h"
#include "trainyard/ops/rnn.h"
#include "trainyard/ops/training.h"

namespace trainyard {

// Operators for the common cases, with NumPy broadcasting and errors as the ops they call.
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator-(const Tensor& x) { return ops::neg(x); }

// A number on either side (`1.0 - p`, `2.0f * x`, `1 / x`) is a scalar of the
// tensor's dtype, as a Python number is in TensorFlow: the result keeps the tensor's dtype and
// shape, and differentiates with respect to the tensor.
inline Tensor operator+(const Tensor& a, double b) { return ops::add(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return ops::add(b, a); }
inline Tensor operator-(const Tensor& a, double b) { return ops::add(a, -b); }
inline Tensor operator-(double a, const Tensor& b) { return ops::add(ops::neg(b), a); }
inline Tensor operator*(const Tensor& a, double b) { return ops::mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return ops::mul(b, a); }
inline Tensor operator/(const Tensor& a, double b) {
  return ops::div(a, ops::scalar(a.backend(), b, a.dtype()));
}
inline Tensor operator/(double a, const Tensor& b) {
  return ops::div(ops::scalar(b.backend(), a, b.dtype()), b);
}

}  // namespace trainyard

#endif  // TRAINYARD_OPS_H_
