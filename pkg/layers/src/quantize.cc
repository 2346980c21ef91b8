#include "trainyard/pkg/layers/quantize.h"

#include <string>
#include <vector>

#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/variable_scope.h"

namespace trainyard::layers {
namespace {

constexpr const char* kQuantizationStep = "fake_quantization_step";

Variable& range_variable(const VariableScope& layer, const std::string& name, double initial,
                         DType dtype) {
  VariableSpec spec;
  spec.name = name;
  spec.shape = Shape{};
  spec.dtype = dtype;
  spec.initializer.kind = Initializer::Kind::kConstant;
  spec.initializer.value = initial;
  spec.trainable = false;
  return layer.variable(spec);
}

// moving_averages.assign_moving_average(var, value, decay) with zero_debias=True, as TensorFlow
// computes it in the variable's dtype: `one_minus_decay` is convert_to_tensor(1.0 - decay).
void assign_zero_debiased_average(const VariableScope& layer, const std::string& name,
                                  Variable& var, const Tensor& value, double decay) {
  const DType dtype = var.value().dtype();
  Backend& backend = value.backend();
  // _zero_debias opens variable_scope(<var's full name>) inside the scope it is called in, so
  // TensorFlow's names repeat the scope: <scope>/<scope>/min/biased.
  const std::string debias = layer.full_name(name);
  Tensor biased = range_variable(layer, debias + "/biased", 0.0, dtype).value();
  Tensor local_step = range_variable(layer, debias + "/local_step", 0.0, dtype).value();
  const Tensor one_minus_decay = ops::scalar(backend, 1.0 - decay, dtype);
  const Tensor one = ops::scalar(backend, 1.0, dtype);
  ops::assign(biased, ops::sub(biased, ops::mul(ops::sub(biased, value), one_minus_decay)));
  ops::assign(local_step, ops::add(local_step, one));
  const Tensor bias_factor = ops::sub(one, ops::pow(ops::sub(one, one_minus_decay), local_step));
  Tensor current = var.value();
  ops::assign(current, ops::sub(current, ops::sub(current, ops::div(biased, bias_factor))));
}

struct Range {
  Tensor min, max;
};

// The batch's range with 0 in it: min(min(x), 0) and max(max(x), 0).
Range batch_range(const Tensor& x) {
  const Tensor zero = ops::scalar(x.backend(), 0.0, x.dtype());
  return {ops::minimum(ops::reduce_min(x), zero), ops::maximum(ops::reduce_max(x), zero)};
}

}  // namespace

std::optional<int64_t> QuantizeState::step(const VariableScope& scope) {
  if (counted_) return step_;
  counted_ = true;
  if (!scope.is_training() || (options_.delay <= 0 && !options_.freeze_bn_delay)) return step_;
  VariableSpec spec;
  spec.name = kQuantizationStep;
  spec.shape = Shape{};
  spec.dtype = DType::kI64;
  spec.trainable = false;
  spec.collections = kGlobalVariables;
  Variable& variable = scope.context().variable(spec);
  const int64_t count = variable.value().to_vector<int64_t>().at(0) + (count_step_ ? 1 : 0);
  if (count_step_) {
    variable.assign(
        Tensor::from_vector(variable.value().backend(), Shape{}, std::vector<int64_t>{count}));
  }
  step_ = count;
  return step_;
}

bool QuantizeState::active(const VariableScope& scope) {
  const std::optional<int64_t> count = step(scope);
  return !scope.is_training() || options_.delay <= 0 || (count && *count >= options_.delay);
}

bool QuantizeState::batch_norm_frozen(const VariableScope& scope) {
  const std::optional<int64_t> count = step(scope);
  return options_.freeze_bn_delay && count && *count >= *options_.freeze_bn_delay;
}

bool counts_quantization_step(std::optional<uint64_t>& last_seed, uint64_t seed, bool training) {
  if (!training) return true;
  const bool counts = last_seed != seed;
  last_seed = seed;
  return counts;
}

Tensor quantize_weights(const VariableScope& layer, const Tensor& weights) {
  QuantizeState* state = layer.quantize();
  if (state == nullptr) return weights;
  const VariableScope quant = layer.child("weights_quant");
  Variable& min = range_variable(quant, "min", -6.0, weights.dtype());
  Variable& max = range_variable(quant, "max", 6.0, weights.dtype());
  if (quant.is_training()) {
    NoGradScope no_grad;
    const Range r = batch_range(weights);
    Tensor min_value = min.value();
    Tensor max_value = max.value();
    ops::assign(min_value, r.min);
    ops::assign(max_value, r.max);
  }
  if (!state->active(layer)) return weights;
  return ops::fake_quant_with_min_max_vars(weights, min.value(), max.value(),
                                           static_cast<int>(state->options().weight_bits), true);
}

namespace {

// quant_ops.MovingAvgQuantize in `scope`/`name` (wide range), as described for act_quant.
Tensor moving_average_quantize(const VariableScope& scope, const std::string& name, const Tensor& x,
                               double init_min) {
  QuantizeState* state = scope.quantize();
  if (state == nullptr) return x;
  const VariableScope quant = scope.child(name);
  Variable& min = range_variable(quant, "min", init_min, x.dtype());
  Variable& max = range_variable(quant, "max", 6.0, x.dtype());
  if (quant.is_training()) {
    NoGradScope no_grad;
    const Range r = batch_range(x);
    const double decay = state->options().ema_decay;
    assign_zero_debiased_average(quant, "min", min, r.min, decay);
    assign_zero_debiased_average(quant, "max", max, r.max, decay);
  }
  if (!state->active(scope)) return x;
  return ops::fake_quant_with_min_max_vars(
      x, min.value(), max.value(), static_cast<int>(state->options().activation_bits), false);
}

}  // namespace

Tensor quantize_activations(const VariableScope& layer, const Tensor& outputs) {
  return moving_average_quantize(layer, "act_quant", outputs, 0.0);
}

Tensor quantize_bypass(const VariableScope& scope, const Tensor& sum) {
  return moving_average_quantize(scope, "post_activation_bypass_quant", sum, -6.0);
}

Tensor quantize_bypass_input(const VariableScope& layer, const Tensor& outputs) {
  return moving_average_quantize(layer, "conv_quant", outputs, -6.0);
}

Tensor fold_batch_norm(const VariableScope& layer,
                       const std::function<Tensor(const Tensor&)>& product, const Tensor& weights,
                       bool depthwise, const FoldedBatchNorm& bn) {
  QuantizeState* state = layer.quantize();
  if (state == nullptr)
    throw InvalidArgument(layer.name() + ": fold_batch_norm outside a quantized scope");
  const Shape& w_shape = weights.shape();
  // The per-channel factors as the weights broadcast them: [C] for conv2d and fully_connected
  // ([..., C] weights), [C_in, M] for depthwise ([KH, KW, C_in, M]).
  auto per_weight = [&](const Tensor& t) {
    return depthwise ? ops::reshape(t, Shape{w_shape[2], w_shape[3]}) : t;
  };
  const Tensor moving_mean = bn.moving_mean->value();
  const Tensor moving_variance = bn.moving_variance->value();
  if (!bn.training) {
    const Tensor multiplier = ops::mul(bn.gamma, ops::rsqrt(ops::add(moving_variance, bn.epsilon)));
    const Tensor bias = ops::sub(bn.beta, ops::mul(moving_mean, multiplier));
    const Tensor folded = ops::mul(weights, per_weight(multiplier));
    return ops::add(product(quantize_weights(layer, folded)), bias);
  }
  // The batch's statistics of the float product (FusedBatchNorm's outputs 1 and 2, the variance
  // with its Bessel correction undone), over every axis but the channels.
  const Tensor y = product(weights);
  const int64_t channels = y.shape()[y.shape().rank() - 1];
  std::vector<int64_t> axes;
  for (std::size_t i = 0; i + 1 < y.shape().rank(); ++i) axes.push_back(static_cast<int64_t>(i));
  const Tensor mean = ops::reduce_mean(y, axes);
  const Tensor variance =
      ops::reduce_mean(ops::square(ops::sub(y, ops::reduce_mean(y, axes, true))), axes);
  const bool frozen = state->batch_norm_frozen(layer);

  const Tensor recip_sigma = ops::rsqrt(ops::add(variance, bn.epsilon));
  const Tensor multiplier = ops::mul(bn.gamma, recip_sigma);
  const Tensor bias = ops::sub(bn.beta, ops::mul(mean, multiplier));
  const Tensor recip_sigma_mv = ops::rsqrt(ops::add(moving_variance, bn.epsilon));
  const Tensor scale = ops::div(recip_sigma_mv, recip_sigma);  // correction_scale
  const Tensor folded =
      ops::mul(ops::mul(per_weight(scale), weights), per_weight(multiplier));  // mul_fold
  Tensor out = product(quantize_weights(layer, folded));
  if (frozen) {
    const Tensor offset = ops::mul(
        bn.gamma, ops::sub(ops::mul(mean, recip_sigma), ops::mul(moving_mean, recip_sigma_mv)));
    out = ops::add(out, offset);  // post_conv_mul by ones is exact
  } else {
    const Tensor recip = ops::div(ops::ones(y.backend(), Shape{channels}, y.dtype()), scale);
    out = ops::mul(recip, out);  // correction_add of zeros is exact
  }
  out = ops::add(out, bias);  // add_fold

  // The batch norm's update ops, as batch_norm runs them; the moving mean's stops once frozen.
  NoGradScope no_grad;
  const int64_t n = y.num_elements() / channels;
  const Tensor unbiased = n > 1 ? ops::mul(variance, static_cast<double>(n) / (n - 1)) : variance;
  Tensor mean_value = bn.moving_mean->value();
  Tensor variance_value = bn.moving_variance->value();
  if (!frozen) ops::assign_moving_average(mean_value, mean, bn.decay);
  ops::assign_moving_average(variance_value, unbiased, bn.decay);
  return out;
}

}  // namespace trainyard::layers
