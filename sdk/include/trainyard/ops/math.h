// The math ops of ops.h (core/src/engine/ops/math.cc declares and implements them). Elementwise
// ops: creation, unary functions, binary arithmetic and comparisons with NumPy broadcasting, where.
// Errors as ops.h says.
#ifndef TRAINYARD_OPS_MATH_H_
#define TRAINYARD_OPS_MATH_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The attribute structs of the math family's ops (what their kernels receive as
// KernelArgs::attrs; op.h has the family-neutral ones).
struct FillAttrs {
  double value = 0.0;
};

namespace ops {

// Creation.
TRAINYARD_API Tensor full(Backend& backend, const Shape& shape, double value,
                          DType dtype = DType::kF32);
TRAINYARD_API Tensor zeros(Backend& backend, const Shape& shape, DType dtype = DType::kF32);
TRAINYARD_API Tensor ones(Backend& backend, const Shape& shape, DType dtype = DType::kF32);
TRAINYARD_API Tensor scalar(Backend& backend, double value, DType dtype = DType::kF32);
TRAINYARD_API Tensor zeros_like(const Tensor& x);
TRAINYARD_API Tensor ones_like(const Tensor& x);

// Elementwise unary.
TRAINYARD_API Tensor neg(const Tensor& x);
TRAINYARD_API Tensor abs(const Tensor& x);
TRAINYARD_API Tensor sign(const Tensor& x);
TRAINYARD_API Tensor exp(const Tensor& x);
TRAINYARD_API Tensor log(const Tensor& x);
TRAINYARD_API Tensor log1p(const Tensor& x);
TRAINYARD_API Tensor sqrt(const Tensor& x);
TRAINYARD_API Tensor rsqrt(const Tensor& x);
TRAINYARD_API Tensor square(const Tensor& x);
TRAINYARD_API Tensor sigmoid(const Tensor& x);
TRAINYARD_API Tensor tanh(const Tensor& x);
TRAINYARD_API Tensor relu(const Tensor& x);
TRAINYARD_API Tensor relu6(const Tensor& x);
TRAINYARD_API Tensor elu(const Tensor& x, double alpha = 1.0);
TRAINYARD_API Tensor softplus(const Tensor& x);
TRAINYARD_API Tensor pow(const Tensor& x, double exponent);
TRAINYARD_API Tensor clip_by_value(const Tensor& x, double min_value, double max_value);

// Elementwise binary, NumPy broadcasting.
TRAINYARD_API Tensor add(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor sub(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor mul(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor div(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor maximum(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor minimum(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor pow(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor equal(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor not_equal(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor less(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor less_equal(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor greater(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor greater_equal(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
// Scalar second operand, of a's dtype.
TRAINYARD_API Tensor add(const Tensor& a, double b);
TRAINYARD_API Tensor mul(const Tensor& a, double b);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_MATH_H_
