// The quantization ops: TensorFlow's FakeQuantWithMinMaxVars and
// FakeQuantWithMinMaxVarsPerChannel (tensorflow/core/kernels/fake_quant_ops_functor.h) and their
// gradients, FakeQuantWithMinMaxVarsGradient and FakeQuantWithMinMaxVarsPerChannelGradient.
#include <array>
#include <span>
#include <string>

#include "engine/ops/common.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_QUANTIZATION_OPS(X) \
  X(kFakeQuantWithMinMaxVars, "fake_quant_with_min_max_vars", 3, 1, FakeQuantAttrs, "(inputs, min [], max []) -> outputs of the inputs' shape: tf.quantization.fake_quant_with_min_max_vars, TensorFlow's nudged range and f32 arithmetic to the bit (x - nudged_min divided by scale). Differentiable in all three (the straight-through estimator)") \
  X(kFakeQuantWithMinMaxVarsGradient, "fake_quant_with_min_max_vars_gradient", 4, 3, FakeQuantAttrs, "(gradients, inputs, min [], max []) -> (d inputs, d min [], d max []): FakeQuantWithMinMaxVarsGradient, the gradient inside the nudged range (ends included) to the inputs, the sums below and above it to min and max") \
  X(kFakeQuantWithMinMaxVarsPerChannel, "fake_quant_with_min_max_vars_per_channel", 3, 1, FakeQuantAttrs, "(inputs [..., D], min [D], max [D]) -> outputs of the inputs' shape: tf.quantization.fake_quant_with_min_max_vars_per_channel, each channel of the last dimension in its own nudged range (x - nudged_min multiplied by inv_scale). Differentiable in all three") \
  X(kFakeQuantWithMinMaxVarsPerChannelGradient, "fake_quant_with_min_max_vars_per_channel_gradient", 4, 3, FakeQuantAttrs, "(gradients, inputs [..., D], min [D], max [D]) -> (d inputs, d min [D], d max [D]): FakeQuantWithMinMaxVarsPerChannelGradient, per channel")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(quantization, TRAINYARD_QUANTIZATION_OPS)

namespace ops {
using namespace ops_internal;

namespace {

// The checks both ops share, TensorFlow's: the inputs float, num_bits in [2, 16], min and max
// of `range` shape and the inputs' dtype.
FakeQuantAttrs checked_attrs(const char* name, const Tensor& inputs, const Tensor& min,
                             const Tensor& max, const Shape& range, int num_bits,
                             bool narrow_range) {
  require_float(name, inputs);
  if (num_bits < 2 || num_bits > 16) {
    invalid(name, "num_bits must be between 2 and 16, inclusive, got " + std::to_string(num_bits));
  }
  for (const auto& [t, role] : {std::pair{&min, "min"}, std::pair{&max, "max"}}) {
    if (t->dtype() != inputs.dtype() || t->shape() != range) {
      invalid(name, std::string(role) + " must be " + range.to_string() +
                        " of the inputs' dtype (" + inputs.description() + "), got " +
                        t->description());
    }
  }
  FakeQuantAttrs attrs;
  attrs.num_bits = num_bits;
  attrs.narrow_range = narrow_range;
  return attrs;
}

// Runs the forward op and records its gradient op, which gives all three gradients at once.
Tensor fake_quant(Backend& backend, const OpDef& forward, const OpDef& gradient,
                  const Tensor& inputs, const Tensor& min, const Tensor& max,
                  const FakeQuantAttrs& attrs) {
  Tensor y = run<3>(backend, forward, {inputs, min, max}, &attrs, inputs.shape(), inputs.dtype());
  if (should_record({&inputs, &min, &max})) {
    Tensor xs = detached(inputs), mins = detached(min), maxs = detached(max);
    record(forward.name(), {&inputs, &min, &max}, std::span<Tensor>(&y, 1),
           [xs, mins, maxs, attrs, &gradient](GradOutputs g) -> Grads {
             Backend& b = xs.backend();
             std::array<Tensor, 3> grads = {Tensor::empty(b, xs.shape(), xs.dtype()),
                                            Tensor::empty(b, mins.shape(), xs.dtype()),
                                            Tensor::empty(b, maxs.shape(), xs.dtype())};
             std::array<Tensor, 4> in = {g[0], xs, mins, maxs};
             launch(b, gradient, in, grads, &attrs);
             return {grads[0], grads[1], grads[2]};
           });
  }
  return y;
}

}  // namespace

Tensor fake_quant_with_min_max_vars(const Tensor& inputs, const Tensor& min, const Tensor& max,
                                    int num_bits, bool narrow_range) {
  const char* name = kFakeQuantWithMinMaxVars.name();
  Backend& backend = common_backend(name, {&inputs, &min, &max});
  const FakeQuantAttrs attrs =
      checked_attrs(name, inputs, min, max, Shape{}, num_bits, narrow_range);
  return fake_quant(backend, kFakeQuantWithMinMaxVars, kFakeQuantWithMinMaxVarsGradient, inputs,
                    min, max, attrs);
}

Tensor fake_quant_with_min_max_vars_per_channel(const Tensor& inputs, const Tensor& min,
                                                const Tensor& max, int num_bits,
                                                bool narrow_range) {
  const char* name = kFakeQuantWithMinMaxVarsPerChannel.name();
  Backend& backend = common_backend(name, {&inputs, &min, &max});
  if (inputs.shape().rank() < 1) {
    invalid(name, "expects inputs of rank 1 or more (channels last), got " + inputs.description());
  }
  const Shape range{inputs.shape()[inputs.shape().rank() - 1]};
  const FakeQuantAttrs attrs = checked_attrs(name, inputs, min, max, range, num_bits, narrow_range);
  return fake_quant(backend, kFakeQuantWithMinMaxVarsPerChannel,
                    kFakeQuantWithMinMaxVarsPerChannelGradient, inputs, min, max, attrs);
}

}  // namespace ops
}  // namespace trainyard
