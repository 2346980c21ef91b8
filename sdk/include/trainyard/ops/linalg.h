// The linalg ops of ops.h (core/src/engine/ops/linalg.cc declares and implements them). Matrix
// products. Errors as ops.h says.
#ifndef TRAINYARD_OPS_LINALG_H_
#define TRAINYARD_OPS_LINALG_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The attribute structs of the linalg family's ops (what their kernels receive as
// KernelArgs::attrs; op.h has the family-neutral ones).
enum class Activation : uint8_t { kNone, kRelu, kSigmoid, kTanh };

struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
  Activation activation = Activation::kNone;  // kMatMulBiasAct only
};

namespace ops {

// Linear algebra.
TRAINYARD_API Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false,
                            bool transpose_b = false);
TRAINYARD_API Tensor matmul_bias_act(const Tensor& x, const Tensor& w, const Tensor& bias,
                                     Activation activation = Activation::kNone);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_LINALG_H_
