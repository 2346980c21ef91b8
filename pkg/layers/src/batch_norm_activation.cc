#include "trainyard/pkg/layers/batch_norm_activation.h"

#include <numeric>
#include <string>

#include "trainyard/error.h"

namespace trainyard::layers {
namespace {

constexpr const char kTraining[] = "layers.batch_norm_activation_training";
constexpr const char kInference[] = "layers.batch_norm_activation_inference";
constexpr const char kGrad[] = "layers.batch_norm_activation_grad";

[[noreturn]] void invalid(const char* op, const std::string& what) {
  throw InvalidArgument(std::string(op) + ": " + what);
}

const BatchNormActivationAttrs& attrs_of(const char* op, const CompositeCall& c) {
  if (c.attrs == nullptr) invalid(op, "called without BatchNormActivationAttrs");
  const auto& attrs = c.get_attrs<BatchNormActivationAttrs>();
  if (attrs.activation != NormActivation::kNone && attrs.activation != NormActivation::kRelu &&
      attrs.activation != NormActivation::kRelu6) {
    invalid(op, "unknown activation code " +
                    std::to_string(static_cast<uint32_t>(attrs.activation)) +
                    " (known: 0 none, 1 relu, 2 relu6)");
  }
  return attrs;
}

// x float of rank >= 2; inputs[1..] the per-channel [C] tensors of x's dtype except
// inputs[last] when `last_like_x` (dy). Returns C.
int64_t check_inputs(const char* op, std::span<const Tensor> inputs, bool last_like_x) {
  const Tensor& x = inputs[0];
  if (x.dtype() != DType::kF32 && x.dtype() != DType::kF64) {
    invalid(op, "expects a float input, got " + x.description());
  }
  if (x.shape().rank() < 2) invalid(op, "expects rank >= 2, got " + x.description());
  const int64_t c = x.shape()[x.shape().rank() - 1];
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const Tensor& p = inputs[i];
    const bool like_x = last_like_x && i + 1 == inputs.size();
    if (p.dtype() != x.dtype() || (like_x ? p.shape() != x.shape() : p.shape() != Shape{c})) {
      invalid(op, "input " + std::to_string(i) + " must be " +
                      (like_x ? x.shape().to_string() : "[" + std::to_string(c) + "]") + " " +
                      dtype_name(x.dtype()) + " for " + x.description() + ", got " +
                      p.description());
    }
  }
  return c;
}

Tensor activate(const Tensor& z, NormActivation activation) {
  switch (activation) {
    case NormActivation::kRelu:
      return ops::relu(z);
    case NormActivation::kRelu6:
      return ops::relu6(z);
    case NormActivation::kNone:
      break;
  }
  return z;
}

std::vector<int64_t> all_but_last(const Tensor& x) {
  std::vector<int64_t> axes(x.shape().rank() - 1);
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

std::vector<Tensor> training_compose(const CompositeCall& c) {
  const BatchNormActivationAttrs& attrs = attrs_of(kTraining, c);
  const Tensor &x = c.inputs[0], &gamma = c.inputs[1], &beta = c.inputs[2];
  ops::BatchNormResult r = ops::batch_norm_training(x, gamma, beta, attrs.epsilon);
  Tensor scale = ops::mul(gamma, ops::rsqrt(ops::add(r.batch_variance, attrs.epsilon)));
  return {activate(r.y, attrs.activation), r.batch_mean, r.batch_variance, scale};
}

std::vector<TensorType> training_infer(const CompositeCall& c) {
  attrs_of(kTraining, c);
  const int64_t channels = check_inputs(kTraining, c.inputs, false);
  const DType dtype = c.inputs[0].dtype();
  return {{c.inputs[0].shape(), dtype},
          {Shape{channels}, dtype},
          {Shape{channels}, dtype},
          {Shape{channels}, dtype}};
}

}  // namespace

std::vector<Tensor> batch_norm_activation_grad_composed(std::span<const Tensor> inputs,
                                                        const BatchNormActivationAttrs& attrs) {
  const Tensor &x = inputs[0], &gamma = inputs[1], &beta = inputs[2], &mean = inputs[3];
  const Tensor &variance = inputs[4], &scale = inputs[5], &dy = inputs[6];
  check_inputs(kGrad, inputs, true);
  Tensor centered = ops::sub(x, mean);
  Tensor dz = dy;
  if (attrs.activation != NormActivation::kNone) {
    Tensor z = ops::add(ops::mul(centered, scale), beta);
    Tensor zero = ops::zeros_like(dy);
    dz = ops::where(ops::greater(z, ops::scalar(x.backend(), 0.0, x.dtype())), dz, zero);
    if (attrs.activation == NormActivation::kRelu6) {
      dz = ops::where(ops::less(z, ops::scalar(x.backend(), 6.0, x.dtype())), dz, zero);
    }
  }
  // TensorFlow's FusedBatchNormGrad: dbeta = sum dz, dgamma = sum dz * xhat,
  // dx = gamma inv_std (dz - (dbeta + xhat dgamma) / n).
  const std::vector<int64_t> axes = all_but_last(x);
  const double n = static_cast<double>(x.num_elements() / gamma.shape()[0]);
  Tensor inv_std = ops::rsqrt(ops::add(variance, attrs.epsilon));
  Tensor xhat = ops::mul(centered, inv_std);
  Tensor dbeta = ops::reduce_sum(dz, axes);
  Tensor dgamma = ops::reduce_sum(ops::mul(dz, xhat), axes);
  Tensor inner = ops::sub(dz, ops::mul(ops::add(dbeta, ops::mul(xhat, dgamma)), 1.0 / n));
  Tensor dx = ops::mul(inner, ops::mul(gamma, inv_std));
  return {dx, dgamma, dbeta};
}

namespace {

CompositeSpec grad_spec() {
  return {
      .name = kGrad,
      .num_inputs = 7,
      .num_outputs = 3,
      .attrs_size = sizeof(BatchNormActivationAttrs),
      .summary =
          "(x, gamma, beta, batch_mean, batch_variance, scale, dy) -> (dx, dgamma, "
          "dbeta): batch_norm_grad of dy masked by the activation's derivative at "
          "(x - batch_mean) * scale + beta",
      .compose =
          [](const CompositeCall& c) {
            return batch_norm_activation_grad_composed(c.inputs, attrs_of(kGrad, c));
          },
      .infer =
          [](const CompositeCall& c) {
            attrs_of(kGrad, c);
            check_inputs(kGrad, c.inputs, true);
            const Tensor &x = c.inputs[0], &gamma = c.inputs[1];
            return std::vector<TensorType>{
                {x.shape(), x.dtype()}, {gamma.shape(), x.dtype()}, {gamma.shape(), x.dtype()}};
          },
      .gradient = {},
  };
}

CompositeSpec training_spec() {
  return {
      .name = kTraining,
      .num_inputs = 3,
      .num_outputs = 4,
      .attrs_size = sizeof(BatchNormActivationAttrs),
      .summary =
          "(x, gamma [C], beta [C]) -> (y, batch_mean [C], batch_variance [C] biased, "
          "scale [C]): y = activation((x - batch_mean) * scale + beta), scale = gamma / "
          "sqrt(batch_variance + epsilon), over the last axis",
      .compose = training_compose,
      .infer = training_infer,
      .gradient =
          [](const CompositeGrad& g) {
            const auto& attrs = g.call.get_attrs<BatchNormActivationAttrs>();
            const std::span<const Tensor> in = g.call.inputs;
            std::vector<Tensor> d = (*batch_norm_activation_grad_composite())(
                {in[0], in[1], in[2], g.outputs[1], g.outputs[2], g.outputs[3], g.grad_outputs[0]},
                &attrs);
            for (std::size_t i = 0; i < d.size(); ++i) {
              if (!g.needs_grad(i)) d[i] = Tensor();
            }
            return d;
          },
  };
}

CompositeSpec inference_spec() {
  return {
      .name = kInference,
      .num_inputs = 5,
      .num_outputs = 1,
      .attrs_size = sizeof(BatchNormActivationAttrs),
      .summary =
          "(x, gamma, beta, mean, variance [C]) -> activation((x - mean) * gamma / "
          "sqrt(variance + epsilon) + beta), over the last axis",
      .compose =
          [](const CompositeCall& c) {
            const BatchNormActivationAttrs& attrs = attrs_of(kInference, c);
            const std::span<const Tensor> in = c.inputs;
            return std::vector<Tensor>{activate(
                ops::batch_norm_inference(in[0], in[1], in[2], in[3], in[4], attrs.epsilon),
                attrs.activation)};
          },
      .infer =
          [](const CompositeCall& c) {
            attrs_of(kInference, c);
            check_inputs(kInference, c.inputs, false);
            return std::vector<TensorType>{{c.inputs[0].shape(), c.inputs[0].dtype()}};
          },
      .gradient = {},
  };
}

// pkg/layers is a static library: each plugin or program that links it has its own copy, and
// each copy declares the composites and holds its declarations in its own static storage. The
// declarations agree, so the copies share the names (composite.h): every copy gets the fused
// kernels, and a copy's declarations are withdrawn when its library is closed.
struct Declared {
  CompositeDeclaration grad = Composite::declare(grad_spec());
  CompositeDeclaration training = Composite::declare(training_spec());
  CompositeDeclaration inference = Composite::declare(inference_spec());
};

const Declared& declared() {
  static const Declared d;
  return d;
}

}  // namespace

const Composite* batch_norm_activation_training_composite() { return declared().training.get(); }
const Composite* batch_norm_activation_inference_composite() { return declared().inference.get(); }
const Composite* batch_norm_activation_grad_composite() { return declared().grad.get(); }

ops::BatchNormResult batch_norm_activation_training(const Tensor& x, const Tensor& gamma,
                                                    const Tensor& beta, double epsilon,
                                                    NormActivation activation) {
  const Composite* training = batch_norm_activation_training_composite();
  Backend& backend = x.backend();
  if (!training->has_fused_kernel(backend) ||
      !batch_norm_activation_grad_composite()->has_fused_kernel(backend)) {
    ops::BatchNormResult r = ops::batch_norm_training(x, gamma, beta, epsilon);
    r.y = activate(r.y, activation);
    return r;
  }
  BatchNormActivationAttrs attrs{epsilon, activation};
  std::vector<Tensor> out = (*training)({x, gamma, beta}, &attrs);
  return {out[0], out[1], out[2]};
}

Tensor batch_norm_activation_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       NormActivation activation) {
  const Composite* inference = batch_norm_activation_inference_composite();
  BatchNormActivationAttrs attrs{epsilon, activation};
  return (*inference)({x, gamma, beta, mean, variance}, &attrs)[0];
}

}  // namespace trainyard::layers
