// Batch norm followed by an activation (none, relu or relu6) as composites (composite.h), so a
// backend can run them in one pass forward and one fused pass backward: slim's conv2d or
// fully_connected with normalizer_fn=batch_norm and activation_fn relu / relu6.
//
//   layers.batch_norm_activation_training (x, gamma [C], beta [C])
//       -> (y, batch_mean [C], batch_variance [C] biased, scale [C])
//       y = activation((x - batch_mean) * scale + beta), scale = gamma / sqrt(variance + eps);
//       the first three are ops::batch_norm_training's outputs then the activation; scale is
//       the per-channel factor y was computed with, which the backward needs to recompute the
//       activation's input. Gradient: layers.batch_norm_activation_grad, for y only (the
//       batch statistics feed the moving averages, which are not differentiated).
//   layers.batch_norm_activation_inference (x, gamma, beta, mean [C], variance [C]) -> y
//       activation(ops::batch_norm_inference(...)); no gradient of its own: autodiff goes
//       through the composition, the fused kernel serves calls that need no gradient.
//   layers.batch_norm_activation_grad (x, gamma, beta, batch_mean, batch_variance, scale, dy)
//       -> (dx, dgamma, dbeta): batch_norm_grad of dy masked by the activation's derivative at
//       (x - batch_mean) * scale + beta.
//
// All take BatchNormActivationAttrs; a fused kernel reads them by agreement
// (backends/cpu/kernels_batch_norm.cc). The composition of each is the SDK's ops, so every
// backend runs them; the CPU backend fuses all three.
//
// x is float (f32 or f64), rank >= 2, normalized over its last axis; the per-channel tensors
// are [C] of x's dtype. Errors are ops::batch_norm_training's (InvalidArgument naming the op).
#ifndef TRAINYARD_PKG_LAYERS_BATCH_NORM_ACTIVATION_H_
#define TRAINYARD_PKG_LAYERS_BATCH_NORM_ACTIVATION_H_

#include <cstdint>
#include <span>
#include <vector>

#include "trainyard/composite.h"
#include "trainyard/ops.h"
#include "trainyard/tensor.h"

namespace trainyard::layers {

enum class NormActivation : uint32_t { kNone = 0, kRelu = 1, kRelu6 = 2 };

// The composites' attributes (plain data; kernels read them with this layout).
struct BatchNormActivationAttrs {
  double epsilon = 1e-3;
  NormActivation activation = NormActivation::kNone;
};

// The composites, declared on first use by this copy of pkg/layers (a static library: each
// plugin that links it has a copy; the copies' declarations agree and share the names, and each
// copy's are withdrawn when its library is closed). Never null.
const Composite* batch_norm_activation_training_composite();
const Composite* batch_norm_activation_inference_composite();
const Composite* batch_norm_activation_grad_composite();

// activation(ops::batch_norm_training(x, gamma, beta, epsilon)) with its batch statistics.
// Runs the composite where x's backend fuses both it and its gradient, and otherwise the ops
// themselves, so a backend without those kernels computes exactly what it computed before the
// composite existed.
ops::BatchNormResult batch_norm_activation_training(const Tensor& x, const Tensor& gamma,
                                                    const Tensor& beta, double epsilon,
                                                    NormActivation activation);
// activation(ops::batch_norm_inference(x, gamma, beta, mean, variance, epsilon)).
Tensor batch_norm_activation_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       NormActivation activation);

// The composition layers.batch_norm_activation_grad runs on a backend without its fused
// kernel (inputs as above), so tests can hold the two against each other on one backend.
std::vector<Tensor> batch_norm_activation_grad_composed(std::span<const Tensor> inputs,
                                                        const BatchNormActivationAttrs& attrs);

}  // namespace trainyard::layers

#endif  // TRAINYARD_PKG_LAYERS_BATCH_NORM_ACTIVATION_H_
