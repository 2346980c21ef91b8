// The reference kernels of the training family: optimizer updates in place, in double
// precision (reference_backend.h).
#include <cmath>
#include <cstddef>

#include "reference_kernels.h"
#include "trainyard/op.h"

namespace trainyard::conformance::reference {
namespace {

void k_apply_gradient_descent(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const double lr = a.get_attrs<OptimizerAttrs>().learning_rate;
  Values var = read(a.inputs[0]);
  const Values grad = read(a.inputs[1]);
  for (std::size_t i = 0; i < var.size(); ++i) var[i] -= lr * grad[i];
  write(a.inputs[0], var);
}

void k_apply_momentum(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const OptimizerAttrs& o = a.get_attrs<OptimizerAttrs>();
  Values var = read(a.inputs[0]), accum = read(a.inputs[1]);
  const Values grad = read(a.inputs[2]);
  for (std::size_t i = 0; i < var.size(); ++i) {
    accum[i] = o.momentum * accum[i] + grad[i];
    var[i] -= o.learning_rate * (o.use_nesterov ? grad[i] + o.momentum * accum[i] : accum[i]);
  }
  write(a.inputs[0], var);
  write(a.inputs[1], accum);
}

void k_apply_adam(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const OptimizerAttrs& o = a.get_attrs<OptimizerAttrs>();
  Values var = read(a.inputs[0]), m = read(a.inputs[1]), v = read(a.inputs[2]);
  const Values g = read(a.inputs[3]);
  const double lr = o.learning_rate * std::sqrt(1.0 - o.beta2_power) / (1.0 - o.beta1_power);
  for (std::size_t i = 0; i < var.size(); ++i) {
    m[i] += (g[i] - m[i]) * (1.0 - o.beta1);
    v[i] += (g[i] * g[i] - v[i]) * (1.0 - o.beta2);
    var[i] -= lr * m[i] / (std::sqrt(v[i]) + o.epsilon);
  }
  write(a.inputs[0], var);
  write(a.inputs[1], m);
  write(a.inputs[2], v);
}

// Inputs (var, ms, mom, grad), or (var, mg, ms, mom, grad) when centered.
template <bool kCentered>
void k_apply_rms_prop(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const OptimizerAttrs& o = a.get_attrs<OptimizerAttrs>();
  constexpr std::size_t kFirstSlot = kCentered ? 2 : 1;
  Values var = read(a.inputs[0]), ms = read(a.inputs[kFirstSlot]),
         mom = read(a.inputs[kFirstSlot + 1]);
  Values mg = kCentered ? read(a.inputs[1]) : Values(var.size(), 0.0);
  const Values g = read(a.inputs[kFirstSlot + 2]);
  for (std::size_t i = 0; i < var.size(); ++i) {
    ms[i] += (g[i] * g[i] - ms[i]) * (1.0 - o.rho);
    if (kCentered) mg[i] += (g[i] - mg[i]) * (1.0 - o.rho);
    mom[i] =
        mom[i] * o.momentum + g[i] * o.learning_rate / std::sqrt(ms[i] - mg[i] * mg[i] + o.epsilon);
    var[i] -= mom[i];
  }
  write(a.inputs[0], var);
  if (kCentered) write(a.inputs[1], mg);
  write(a.inputs[kFirstSlot], ms);
  write(a.inputs[kFirstSlot + 1], mom);
}

constexpr KernelRegistration kTrainingKernels[] = {
    {"apply_gradient_descent", &k_apply_gradient_descent},
    {"apply_momentum", &k_apply_momentum},
    {"apply_adam", &k_apply_adam},
    {"apply_rms_prop", &k_apply_rms_prop<false>},
    {"apply_centered_rms_prop", &k_apply_rms_prop<true>},
};

}  // namespace

std::span<const KernelRegistration> training_kernels() { return kTrainingKernels; }

}  // namespace trainyard::conformance::reference
