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

bool QuantizeState::active(const VariableScope& scope) {
  if (active_) return *active_;
  if (!scope.is_training() || options_.delay <= 0) {
    active_ = true;
    return true;
  }
  VariableSpec spec;
  spec.name = kQuantizationStep;
  spec.shape = Shape{};
  spec.dtype = DType::kI64;
  spec.trainable = false;
  spec.collections = kGlobalVariables;
  Variable& step = scope.context().variable(spec);
  const int64_t count = step.value().to_vector<int64_t>().at(0) + 1;
  step.assign(Tensor::from_vector(step.value().backend(), Shape{}, std::vector<int64_t>{count}));
  active_ = count >= options_.delay;
  return *active_;
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

Tensor quantize_activations(const VariableScope& layer, const Tensor& outputs) {
  QuantizeState* state = layer.quantize();
  if (state == nullptr) return outputs;
  const VariableScope quant = layer.child("act_quant");
  Variable& min = range_variable(quant, "min", 0.0, outputs.dtype());
  Variable& max = range_variable(quant, "max", 6.0, outputs.dtype());
  if (quant.is_training()) {
    NoGradScope no_grad;
    const Range r = batch_range(outputs);
    const double decay = state->options().ema_decay;
    assign_zero_debiased_average(quant, "min", min, r.min, decay);
    assign_zero_debiased_average(quant, "max", max, r.max, decay);
  }
  if (!state->active(layer)) return outputs;
  return ops::fake_quant_with_min_max_vars(
      outputs, min.value(), max.value(), static_cast<int>(state->options().activation_bits), false);
}

}  // namespace trainyard::layers
