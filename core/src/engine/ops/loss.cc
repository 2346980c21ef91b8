// The loss ops. Losses: sigmoid cross-entropy with logits, and the composites binary_cross_entropy
// (the YouTube-8M CrossEntropyLoss, with its gradient alone and through a sigmoid) and l2_loss,
// which backends may fuse.
#include <algorithm>
#include <array>
#include <numeric>

#include "engine/ops/common.h"
#include "trainyard/composite.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_LOSS_OPS(X) \
  X(kSigmoidCrossEntropyWithLogits, "sigmoid_cross_entropy_with_logits", 2, 1, NoAttrs, "(logits x, labels z) -> max(x, 0) - x * z + log(1 + exp(-|x|))") \
  X(kSigmoidCrossEntropyWithLogitsGrad, "sigmoid_cross_entropy_with_logits_grad", 3, 1, NoAttrs, "(logits x, labels z, dloss) -> dloss * (sigmoid(x) - z)")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(loss, TRAINYARD_LOSS_OPS)

namespace {
using namespace ops_internal;
using namespace ops;

void check_binary_cross_entropy(const char* name, std::span<const Tensor> in) {
  require_float(name, in[0]);
  require_same_dtype(name, in[0], in[1]);
  require_same_shape(name, in[0], in[1]);
  if (in[0].shape().rank() == 0) invalid(name, "expects [..., classes], got a scalar");
}

// (p, y, dloss [...]) -> dp: dloss * ((1 - y) / ((1 - p) + eps) - y / (p + eps)).
const Composite& binary_cross_entropy_grad_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = "binary_cross_entropy_grad",
      .num_inputs = 3,
      .num_outputs = 1,
      .attrs_size = sizeof(ScalarAttrs),
      .summary = "(p, y, dloss [...]), a = eps -> dp = dloss * ((1 - y) / ((1 - p) + eps) - "
                 "y / (p + eps))",
      .compose =
          [](const CompositeCall& c) {
            const Tensor &p = c.inputs[0], &y = c.inputs[1], &dloss = c.inputs[2];
            double eps = c.get_attrs<ScalarAttrs>().a;
            std::vector<int64_t> kept = dloss.shape().to_vector();
            kept.push_back(1);
            Tensor upstream = reshape(dloss, Shape(kept));
            Tensor negative = div(add(neg(y), 1.0), add(add(neg(p), 1.0), eps));
            Tensor positive = div(y, add(p, eps));
            return std::vector<Tensor>{mul(upstream, sub(negative, positive))};
          },
      .infer =
          [](const CompositeCall& c) {
            return std::vector<TensorType>{{c.inputs[0].shape(), c.inputs[0].dtype()}};
          },
      .gradient = {},
  });
  return *composite;
}

// (p, y, dloss [...]) -> dz, the gradient through a sigmoid that made p = sigmoid(z): the
// binary_cross_entropy_grad composite's dp times p (1 - p), as sigmoid_grad computes it (so the
// fused kernel gives the two ops' bits). autodiff uses it when the loss is p's only use.
const Composite& binary_cross_entropy_sigmoid_grad_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = "binary_cross_entropy_sigmoid_grad",
      .num_inputs = 3,
      .num_outputs = 1,
      .attrs_size = sizeof(ScalarAttrs),
      .summary = "(p = sigmoid(z), y, dloss [...]), a = eps -> dz = dp p (1 - p), dp as "
                 "binary_cross_entropy_grad's",
      .compose =
          [](const CompositeCall& c) {
            const Tensor& p = c.inputs[0];
            Tensor dp = binary_cross_entropy_grad_composite()(c.inputs, c.attrs)[0];
            return std::vector<Tensor>{activation_grad(Activation::kSigmoid, p, dp)};
          },
      .infer =
          [](const CompositeCall& c) {
            return std::vector<TensorType>{{c.inputs[0].shape(), c.inputs[0].dtype()}};
          },
      .gradient = {},
  });
  return *composite;
}

// The YouTube-8M CrossEntropyLoss per example: (p [..., C], y same) -> [...]: the sum over C
// of -(y log(p + eps) + (1 - y) log((1 - p) + eps)). 1 - p is computed before eps is added,
// as the original's left-to-right float arithmetic does.
const Composite& binary_cross_entropy_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = "binary_cross_entropy",
      .num_inputs = 2,
      .num_outputs = 1,
      .attrs_size = sizeof(ScalarAttrs),
      .summary = "(p [..., C], y same), a = eps -> [...]: sum over C of -(y log(p + eps) + "
                 "(1 - y) log((1 - p) + eps))",
      .compose =
          [](const CompositeCall& c) {
            check_binary_cross_entropy("binary_cross_entropy", c.inputs);
            const Tensor &p = c.inputs[0], &y = c.inputs[1];
            double eps = c.get_attrs<ScalarAttrs>().a;
            Tensor positive = mul(y, log(add(p, eps)));
            Tensor negative = mul(add(neg(y), 1.0), log(add(add(neg(p), 1.0), eps)));
            return std::vector<Tensor>{reduce_sum(neg(add(positive, negative)), {-1})};
          },
      .infer =
          [](const CompositeCall& c) {
            check_binary_cross_entropy("binary_cross_entropy", c.inputs);
            std::vector<int64_t> dims = c.inputs[0].shape().to_vector();
            dims.pop_back();
            return std::vector<TensorType>{{Shape(dims), c.inputs[0].dtype()}};
          },
      .gradient =
          [](const CompositeGrad& g) {
            const Tensor &p = g.call.inputs[0], &y = g.call.inputs[1];
            const Tensor& dloss = g.grad_outputs[0];
            Tensor dp = binary_cross_entropy_grad_composite()({p, y, dloss}, g.call.attrs)[0];
            if (!g.needs_grad(1)) return Grads{dp, Tensor()};
            // d/dy: log((1 - p) + eps) - log(p + eps), per element, times the upstream.
            double eps = g.call.get_attrs<ScalarAttrs>().a;
            std::vector<int64_t> kept = dloss.shape().to_vector();
            kept.push_back(1);
            Tensor upstream = reshape(dloss, Shape(kept));
            Tensor dy = mul(upstream, sub(log(add(add(neg(p), 1.0), eps)), log(add(p, eps))));
            return Grads{dp, dy};
          },
  });
  return *composite;
}

// tf.nn.l2_loss: x -> sum(x^2) / 2.
const Composite& l2_loss_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = "l2_loss",
      .num_inputs = 1,
      .num_outputs = 1,
      .summary = "x -> sum(x^2) / 2 (tf.nn.l2_loss), a scalar of x's dtype",
      .compose =
          [](const CompositeCall& c) {
            require_float("l2_loss", c.inputs[0]);
            return std::vector<Tensor>{mul(reduce_sum(square(c.inputs[0])), 0.5)};
          },
      .infer =
          [](const CompositeCall& c) {
            require_float("l2_loss", c.inputs[0]);
            return std::vector<TensorType>{{Shape{}, c.inputs[0].dtype()}};
          },
      .gradient =
          [](const CompositeGrad& g) { return Grads{mul(g.call.inputs[0], g.grad_outputs[0])}; },
  });
  return *composite;
}

}  // namespace

void declare_loss_composites() {
  binary_cross_entropy_composite();
  binary_cross_entropy_grad_composite();
  binary_cross_entropy_sigmoid_grad_composite();
  l2_loss_composite();
}

namespace ops {
using namespace ops_internal;

Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const char* name = "sigmoid_cross_entropy_with_logits";
  Backend& backend = common_backend(name, {&labels, &logits});
  require_float(name, logits);
  require_same_dtype(name, logits, labels);
  require_same_shape(name, logits, labels);
  Tensor y = run<2>(backend, kSigmoidCrossEntropyWithLogits, {logits, labels}, nullptr,
                    logits.shape(), logits.dtype());
  if (should_record({&labels, &logits})) {
    Tensor ls = detached(labels), xs = detached(logits);
    record(kSigmoidCrossEntropyWithLogits.name(), {&labels, &logits}, std::span<Tensor>(&y, 1),
           [ls, xs](GradOutputs g) -> Grads {
             Tensor dlogits = run<3>(xs.backend(), kSigmoidCrossEntropyWithLogitsGrad,
                                     {xs, ls, g[0]}, nullptr, xs.shape(), xs.dtype());
             return {neg(mul(g[0], xs)), dlogits};
           });
  }
  return y;
}

Tensor binary_cross_entropy(const Tensor& predictions, const Tensor& labels, double epsilon) {
  ScalarAttrs attrs{epsilon, 0.0};
  Tensor loss = binary_cross_entropy_composite()({predictions, labels}, &attrs)[0];
  const std::shared_ptr<AutogradMeta>& meta = loss.autograd_meta();
  if (meta && meta->grad_fn) {
    // Predictions made by a sigmoid (LogisticModel's matmul_bias_act) take the gradient with
    // respect to the sigmoid's input in one pass (autodiff_internal.h).
    Tensor ps = detached(predictions), ys = detached(labels);
    meta->grad_fn->input0_activation = Activation::kSigmoid;
    meta->grad_fn->input0_preactivation_grad = [ps, ys, attrs](std::span<const Tensor> g) {
      return binary_cross_entropy_sigmoid_grad_composite()({ps, ys, g[0]}, &attrs)[0];
    };
  }
  return loss;
}

Tensor l2_loss(const Tensor& x) { return l2_loss_composite()({x})[0]; }

}  // namespace ops
}  // namespace trainyard
