// The training ops of ops.h (core/src/engine/ops/training.cc declares and implements them).
// Optimizer updates and moving averages, in place and never recorded; clip_by_norm (a composite).
// Errors as ops.h says.
#ifndef TRAINYARD_OPS_TRAINING_H_
#define TRAINYARD_OPS_TRAINING_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The attribute structs of the training family's ops (what their kernels receive as
// KernelArgs::attrs; op.h has the family-neutral ones).
struct OptimizerAttrs {
  double learning_rate = 0.0;
  double momentum = 0.0;  // kApplyMomentum
  bool use_nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;  // kApplyAdam
  double beta1_power = 1.0, beta2_power = 1.0;        // b1^t, b2^t for this step t (1-based)
  double rho = 0.9;  // kApplyRmsProp, kApplyCenteredRmsProp (with momentum and epsilon)
};

namespace ops {

// Optimizer updates, in place on `var` and the slots; never recorded.
TRAINYARD_API void apply_gradient_descent(Tensor& var, const Tensor& grad, double learning_rate);
TRAINYARD_API void apply_momentum(Tensor& var, Tensor& accum, const Tensor& grad,
                                  double learning_rate, double momentum, bool use_nesterov);
TRAINYARD_API void apply_adam(Tensor& var, Tensor& m, Tensor& v, const Tensor& grad,
                              double learning_rate, double beta1, double beta2, double epsilon,
                              int64_t step);  // step t >= 1
// TensorFlow's ApplyRMSProp and ApplyCenteredRMSProp, their expressions evaluated in var's dtype
// in TF's order, the scalars rounded to it first (1 - rho is computed there, as TF does):
//   ms += (g^2 - ms)(1 - rho); [mg += (g - mg)(1 - rho);]
//   mom = mom momentum + g lr / sqrt(ms [- mg^2] + epsilon); var -= mom.
TRAINYARD_API void apply_rms_prop(Tensor& var, Tensor& ms, Tensor& mom, const Tensor& grad,
                                  double learning_rate, double rho, double momentum,
                                  double epsilon);
TRAINYARD_API void apply_centered_rms_prop(Tensor& var, Tensor& mg, Tensor& ms, Tensor& mom,
                                           const Tensor& grad, double learning_rate, double rho,
                                           double momentum, double epsilon);

// The moving-average update op: moving = moving * decay + value * (1 - decay), in place,
// never recorded.
TRAINYARD_API void assign_moving_average(Tensor& moving, const Tensor& value, double decay);

// tf.clip_by_norm over the whole tensor: x * clip / max(||x||, clip).
TRAINYARD_API Tensor clip_by_norm(const Tensor& x, double clip);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_TRAINING_H_
