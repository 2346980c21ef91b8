// The training ops. Optimizer updates in place (apply_*), assign, moving averages, and the
// composite clip_by_norm.
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "engine/ops/common.h"
#include "trainyard/composite.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_TRAINING_OPS(X) \
  X(kApplyGradientDescent, "apply_gradient_descent", 2, 0, OptimizerAttrs, "(var, grad), in place: var -= lr * grad") \
  X(kApplyMomentum, "apply_momentum", 3, 0, OptimizerAttrs, "(var, accum, grad), in place: accum = momentum * accum + grad; var -= lr * (nesterov ? grad + momentum * accum : accum)") \
  X(kApplyAdam, "apply_adam", 4, 0, OptimizerAttrs, "(var, m, v, grad), in place, TensorFlow's form and rounding: m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); var -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + epsilon)") \
  X(kApplyRmsProp, "apply_rms_prop", 4, 0, OptimizerAttrs, "(var, ms, mom, grad), in place, TensorFlow's ApplyRMSProp in var's dtype: ms += (g^2 - ms)(1 - rho); mom = mom momentum + g lr / sqrt(ms + epsilon); var -= mom") \
  X(kApplyCenteredRmsProp, "apply_centered_rms_prop", 5, 0, OptimizerAttrs, "(var, mg, ms, mom, grad), in place, TensorFlow's ApplyCenteredRMSProp in var's dtype: ms += (g^2 - ms)(1 - rho); mg += (g - mg)(1 - rho); mom = mom momentum + g lr / sqrt(ms - mg^2 + epsilon); var -= mom")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(training, TRAINYARD_TRAINING_OPS)

namespace {
using namespace ops_internal;

void require_update_shapes(const char* op, const Tensor& var, const Tensor& other) {
  require_same_dtype(op, var, other);
  require_same_shape(op, var, other);
}

// tf.clip_by_norm over the whole tensor: x * clip / max(||x||_2, clip). No gradient of its
// own: autodiff goes through the composition, and a fused kernel serves calls that need no
// gradient (the clipping of gradients in the train step).
const Composite& clip_by_norm_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = "clip_by_norm",
      .num_inputs = 1,
      .num_outputs = 1,
      .attrs_size = sizeof(ScalarAttrs),
      .summary = "x, a = clip -> x * clip / max(||x||_2, clip), the norm over the whole tensor",
      .compose =
          [](const CompositeCall& c) {
            const Tensor& x = c.inputs[0];
            require_float("clip_by_norm", x);
            Tensor norm = ops::sqrt(ops::reduce_sum(ops::square(x)));
            Tensor clip = scalar_like(x, c.get_attrs<ScalarAttrs>().a);
            return std::vector<Tensor>{ops::mul(x, ops::div(clip, ops::maximum(norm, clip)))};
          },
      .infer =
          [](const CompositeCall& c) {
            require_float("clip_by_norm", c.inputs[0]);
            return std::vector<TensorType>{{c.inputs[0].shape(), c.inputs[0].dtype()}};
          },
      .gradient = {},
  });
  return *composite;
}

}  // namespace

void declare_training_composites() { clip_by_norm_composite(); }

namespace ops {
using namespace ops_internal;

// ---- Optimizer updates ----

void apply_gradient_descent(Tensor& var, const Tensor& grad, double learning_rate) {
  Backend& backend = common_backend("apply_gradient_descent", {&var, &grad});
  require_float("apply_gradient_descent", var);
  require_update_shapes("apply_gradient_descent", var, grad);
  OptimizerAttrs attrs;
  attrs.learning_rate = learning_rate;
  std::array<Tensor, 2> in = {var, grad};
  launch(backend, kApplyGradientDescent, in, {}, &attrs);
}

void apply_momentum(Tensor& var, Tensor& accum, const Tensor& grad, double learning_rate,
                    double momentum, bool use_nesterov) {
  Backend& backend = common_backend("apply_momentum", {&var, &accum, &grad});
  require_float("apply_momentum", var);
  require_update_shapes("apply_momentum", var, accum);
  require_update_shapes("apply_momentum", var, grad);
  OptimizerAttrs attrs;
  attrs.learning_rate = learning_rate;
  attrs.momentum = momentum;
  attrs.use_nesterov = use_nesterov;
  std::array<Tensor, 3> in = {var, accum, grad};
  launch(backend, kApplyMomentum, in, {}, &attrs);
}

void apply_adam(Tensor& var, Tensor& m, Tensor& v, const Tensor& grad, double learning_rate,
                double beta1, double beta2, double epsilon, int64_t step) {
  Backend& backend = common_backend("apply_adam", {&var, &m, &v, &grad});
  require_float("apply_adam", var);
  require_update_shapes("apply_adam", var, m);
  require_update_shapes("apply_adam", var, v);
  require_update_shapes("apply_adam", var, grad);
  if (step < 1) invalid("apply_adam", "step must be >= 1, got " + std::to_string(step));
  OptimizerAttrs attrs;
  attrs.learning_rate = learning_rate;
  attrs.beta1 = beta1;
  attrs.beta2 = beta2;
  attrs.epsilon = epsilon;
  attrs.beta1_power = std::pow(beta1, static_cast<double>(step));
  attrs.beta2_power = std::pow(beta2, static_cast<double>(step));
  std::array<Tensor, 4> in = {var, m, v, grad};
  launch(backend, kApplyAdam, in, {}, &attrs);
}

void apply_rms_prop(Tensor& var, Tensor& ms, Tensor& mom, const Tensor& grad, double learning_rate,
                    double rho, double momentum, double epsilon) {
  Backend& backend = common_backend("apply_rms_prop", {&var, &ms, &mom, &grad});
  require_float("apply_rms_prop", var);
  require_update_shapes("apply_rms_prop", var, ms);
  require_update_shapes("apply_rms_prop", var, mom);
  require_update_shapes("apply_rms_prop", var, grad);
  OptimizerAttrs attrs;
  attrs.learning_rate = learning_rate;
  attrs.rho = rho;
  attrs.momentum = momentum;
  attrs.epsilon = epsilon;
  std::array<Tensor, 4> in = {var, ms, mom, grad};
  launch(backend, kApplyRmsProp, in, {}, &attrs);
}

void apply_centered_rms_prop(Tensor& var, Tensor& mg, Tensor& ms, Tensor& mom, const Tensor& grad,
                             double learning_rate, double rho, double momentum, double epsilon) {
  Backend& backend = common_backend("apply_centered_rms_prop", {&var, &mg, &ms, &mom, &grad});
  require_float("apply_centered_rms_prop", var);
  require_update_shapes("apply_centered_rms_prop", var, mg);
  require_update_shapes("apply_centered_rms_prop", var, ms);
  require_update_shapes("apply_centered_rms_prop", var, mom);
  require_update_shapes("apply_centered_rms_prop", var, grad);
  OptimizerAttrs attrs;
  attrs.learning_rate = learning_rate;
  attrs.rho = rho;
  attrs.momentum = momentum;
  attrs.epsilon = epsilon;
  std::array<Tensor, 5> in = {var, mg, ms, mom, grad};
  launch(backend, kApplyCenteredRmsProp, in, {}, &attrs);
}

void assign_moving_average(Tensor& moving, const Tensor& value, double decay) {
  common_backend("assign_moving_average", {&moving, &value});
  require_float("assign_moving_average", moving);
  require_update_shapes("assign_moving_average", moving, value);
  NoGradScope no_grad;
  Tensor updated = add(mul(moving, decay), mul(value, 1.0 - decay));
  assign(moving, updated);
}

Tensor clip_by_norm(const Tensor& x, double clip) {
  require_defined("clip_by_norm", x, "the input");
  if (!(clip > 0)) {
    invalid("clip_by_norm", "clip_norm must be positive, got " + std::to_string(clip));
  }
  ScalarAttrs attrs{clip, 0.0};
  return clip_by_norm_composite()({x}, &attrs)[0];
}

}  // namespace ops
}  // namespace trainyard
