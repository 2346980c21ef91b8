#include "trainyard/pkg/layers/layers.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/pkg/layers/quantize.h"

namespace trainyard::layers {
namespace {

[[noreturn]] void invalid(const VariableScope& layer, const std::string& what) {
  throw InvalidArgument("layer '" + layer.name() + "': " + what);
}

Variable& make_variable(const VariableScope& layer, const char* name, Shape shape, DType dtype,
                        const Initializer& initializer, bool trainable, double l2) {
  VariableSpec spec;
  spec.name = name;
  spec.shape = std::move(shape);
  spec.dtype = dtype;
  spec.initializer = initializer;
  spec.trainable = trainable;
  spec.l2_regularization = l2;
  return layer.variable(spec);
}

bool training(const VariableScope& scope, const std::optional<bool>& is_training) {
  return is_training.value_or(scope.is_training());
}

// Batch norm inside `layer`'s scope ("<layer>/BatchNorm/..." by default), then the activation:
// slim's normalizer_fn path, shared by fully_connected and conv2d.
Tensor normalize_and_activate(VariableScope& layer, const Tensor& y,
                              const std::optional<BatchNormOptions>& normalizer,
                              const ActivationFn& activation) {
  if (!normalizer) return activation(y);
  BatchNormOptions bn = *normalizer;
  if (activation.batch_norm_fusable()) {
    bn.activation_fn = activation;  // batch_norm applies it in its composite
    return batch_norm(layer, y, bn);
  }
  bn.activation_fn = ActivationFn::none();
  return activation(batch_norm(layer, y, bn));
}

// The layer's output fake-quantized where contrib.quantize quantizes it (quantize.h): after an
// activation of none, relu or relu6 of a layer with biases or batch norm.
Tensor quantize_output(const VariableScope& layer, const Tensor& y, const ActivationFn& activation,
                       bool biased) {
  if (layer.quantize() == nullptr || !biased || !activation.batch_norm_fusable()) return y;
  return quantize_activations(layer, y);
}

// batch_norm's variables in `layer`'s scope ("<layer>/BatchNorm/..." by default).
struct BatchNormVariables {
  Tensor gamma, beta;
  Variable* moving_mean;
  Variable* moving_variance;
};

BatchNormVariables batch_norm_variables(VariableScope& scope, int64_t channels, DType dtype,
                                        const BatchNormOptions& options);

// Whether `layer` folds its batch norm into its weights (quantize.h): contrib.quantize's
// fold_batch_norms runs wherever the rewrite does.
bool folds(const VariableScope& layer, const std::optional<BatchNormOptions>& normalizer) {
  return layer.quantize() != nullptr && normalizer.has_value();
}

// The product `product(weights)` with the batch norm folded in, then the activation.
Tensor fold_and_activate(VariableScope& layer, const std::function<Tensor(const Tensor&)>& product,
                         const Tensor& weights, bool depthwise, int64_t channels,
                         const BatchNormOptions& options, const ActivationFn& activation) {
  VariableScope bn_scope = layer.child_or_default(options.scope, "BatchNorm");
  const BatchNormVariables v = batch_norm_variables(bn_scope, channels, weights.dtype(), options);
  FoldedBatchNorm bn;
  bn.gamma = v.gamma;
  bn.beta = v.beta;
  bn.moving_mean = v.moving_mean;
  bn.moving_variance = v.moving_variance;
  bn.epsilon = options.epsilon;
  bn.decay = options.decay;
  bn.training = training(layer, options.is_training);
  return activation(fold_batch_norm(layer, product, weights, depthwise, bn));
}

}  // namespace

Tensor ActivationFn::operator()(const Tensor& x) const {
  if (custom_) return custom_(x);
  switch (fused_) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return ops::relu(x);
    case Activation::kSigmoid:
      return ops::sigmoid(x);
    case Activation::kTanh:
      return ops::tanh(x);
  }
  return x;
}

ActivationFn ActivationFn::relu6() {
  return ActivationFn(
      Activation::kNone, [](const Tensor& x) { return ops::relu6(x); }, true);
}

std::optional<NormActivation> ActivationFn::batch_norm_fusable() const {
  if (custom_) return relu6_ ? std::optional(NormActivation::kRelu6) : std::nullopt;
  switch (fused_) {
    case Activation::kNone:
      return NormActivation::kNone;
    case Activation::kRelu:
      return NormActivation::kRelu;
    default:
      return std::nullopt;
  }
}

Initializer xavier_initializer(bool uniform) {
  Initializer init;
  init.kind = uniform ? Initializer::Kind::kGlorotUniform : Initializer::Kind::kGlorotNormal;
  return init;
}

Initializer zeros_initializer() { return Initializer{}; }

Initializer constant_initializer(double value) {
  Initializer init;
  init.kind = Initializer::Kind::kConstant;
  init.value = value;
  return init;
}

Initializer truncated_normal_initializer(double mean, double stddev) {
  Initializer init;
  init.kind = Initializer::Kind::kTruncatedNormal;
  init.mean = mean;
  init.stddev = stddev;
  return init;
}

Initializer random_normal_initializer(double mean, double stddev) {
  Initializer init;
  init.kind = Initializer::Kind::kNormal;
  init.mean = mean;
  init.stddev = stddev;
  return init;
}

Tensor fully_connected(VariableScope& scope, const Tensor& inputs, int64_t num_outputs,
                       const FullyConnectedOptions& options) {
  VariableScope layer = scope.child_or_default(options.scope, "fully_connected");
  const Shape& shape = inputs.shape();
  if (shape.rank() < 2) {
    invalid(layer, "the input is " + inputs.description() + "; expected rank >= 2 [..., in]");
  }
  if (num_outputs <= 0) {
    invalid(layer, "num_outputs is " + std::to_string(num_outputs) + "; expected > 0");
  }
  const int64_t in = shape[shape.rank() - 1];
  Variable& weights =
      make_variable(layer, "weights", Shape{in, num_outputs}, inputs.dtype(),
                    options.weights_initializer, options.trainable, options.weights_l2);
  Tensor x = shape.rank() == 2 ? inputs : ops::reshape(inputs, Shape{-1, in});

  Tensor y;
  if (folds(layer, options.normalizer)) {
    y = fold_and_activate(
        layer, [&](const Tensor& w) { return ops::matmul(x, w); }, weights.value(), false,
        num_outputs, *options.normalizer, options.activation_fn);
  } else if (!options.normalizer && options.biases_initializer) {
    const Tensor w = quantize_weights(layer, weights.value());
    Variable& biases =
        make_variable(layer, "biases", Shape{num_outputs}, inputs.dtype(),
                      *options.biases_initializer, options.trainable, options.biases_l2);
    if (std::optional<Activation> fused = options.activation_fn.fusable()) {
      y = ops::matmul_bias_act(x, w, biases.value(), *fused);
    } else {
      y = options.activation_fn(ops::matmul_bias_act(x, w, biases.value(), Activation::kNone));
    }
  } else {
    const Tensor w = quantize_weights(layer, weights.value());
    y = normalize_and_activate(layer, ops::matmul(x, w), options.normalizer, options.activation_fn);
  }
  y = quantize_output(layer, y, options.activation_fn,
                      options.normalizer || options.biases_initializer);
  if (shape.rank() == 2) return y;
  std::vector<int64_t> out_dims;
  for (std::size_t i = 0; i + 1 < shape.rank(); ++i) out_dims.push_back(shape[i]);
  out_dims.push_back(num_outputs);
  return ops::reshape(y, Shape(out_dims));
}

Tensor conv2d(VariableScope& scope, const Tensor& inputs, int64_t num_outputs,
              std::pair<int64_t, int64_t> kernel_size, const Conv2DOptions& options) {
  VariableScope layer = scope.child_or_default(options.scope, "Conv");
  if (inputs.shape().rank() != 4) {
    invalid(layer, "the input is " + inputs.description() + "; expected NHWC [B, H, W, C]");
  }
  if (num_outputs <= 0 || kernel_size.first <= 0 || kernel_size.second <= 0) {
    invalid(layer, "num_outputs " + std::to_string(num_outputs) + " and kernel_size [" +
                       std::to_string(kernel_size.first) + ", " +
                       std::to_string(kernel_size.second) + "] must be positive");
  }
  const bool strided = options.stride.first > 1 || options.stride.second > 1;
  const bool dilated = options.rate.first > 1 || options.rate.second > 1;
  if (strided && dilated) {
    invalid(layer, "only one of rate or stride can be > 1 (as slim.conv2d requires)");
  }
  const int64_t in = inputs.shape()[3];
  Variable& weights = make_variable(
      layer, "weights", Shape{kernel_size.first, kernel_size.second, in, num_outputs},
      inputs.dtype(), options.weights_initializer, options.trainable, options.weights_l2);
  auto product = [&](const Tensor& w) {
    return ops::conv2d(inputs, w, options.stride, options.padding, options.rate, 1);
  };
  const bool biased = options.normalizer || options.biases_initializer;
  auto quantized = [&](const Tensor& y) {
    if (options.bypass_input && layer.quantize() != nullptr && biased) {
      if (options.activation_fn.fusable() != Activation::kNone) {
        invalid(layer, "a bypass input has no activation (the sum is activated)");
      }
      return quantize_bypass_input(layer, y);
    }
    return quantize_output(layer, y, options.activation_fn, biased);
  };
  if (folds(layer, options.normalizer)) {
    return quantized(fold_and_activate(layer, product, weights.value(), false, num_outputs,
                                       *options.normalizer, options.activation_fn));
  }
  Tensor y = product(quantize_weights(layer, weights.value()));
  if (!options.normalizer && options.biases_initializer) {
    Variable& biases =
        make_variable(layer, "biases", Shape{num_outputs}, inputs.dtype(),
                      *options.biases_initializer, options.trainable, options.biases_l2);
    y = ops::add(y, biases.value());
  }
  return quantized(normalize_and_activate(layer, y, options.normalizer, options.activation_fn));
}

Tensor separable_conv2d(VariableScope& scope, const Tensor& inputs,
                        std::optional<int64_t> num_outputs, std::pair<int64_t, int64_t> kernel_size,
                        const SeparableConv2DOptions& options) {
  VariableScope layer = scope.child_or_default(options.scope, "SeparableConv2d");
  if (inputs.shape().rank() != 4) {
    invalid(layer, "the input is " + inputs.description() + "; expected NHWC [B, H, W, C]");
  }
  if ((num_outputs && *num_outputs <= 0) || kernel_size.first <= 0 || kernel_size.second <= 0 ||
      options.depth_multiplier <= 0) {
    invalid(layer, "num_outputs " + (num_outputs ? std::to_string(*num_outputs) : "none") +
                       ", kernel_size [" + std::to_string(kernel_size.first) + ", " +
                       std::to_string(kernel_size.second) + "] and depth_multiplier " +
                       std::to_string(options.depth_multiplier) + " must be positive");
  }
  const bool strided = options.stride.first > 1 || options.stride.second > 1;
  const bool dilated = options.rate.first > 1 || options.rate.second > 1;
  if (strided && dilated) {
    invalid(layer, "only one of rate or stride can be > 1 (as slim.separable_conv2d requires)");
  }
  const int64_t in = inputs.shape()[3];
  Variable& depthwise = make_variable(
      layer, "depthwise_weights",
      Shape{kernel_size.first, kernel_size.second, in, options.depth_multiplier}, inputs.dtype(),
      options.weights_initializer, options.trainable, options.weights_l2);
  // contrib.quantize matches the product that feeds the activation: the pointwise one when
  // there is one.
  auto depthwise_product = [&](const Tensor& w) {
    return ops::depthwise_conv2d(inputs, w, options.stride, options.padding, options.rate);
  };
  int64_t channels = in * options.depth_multiplier;
  if (!num_outputs && folds(layer, options.normalizer)) {
    return quantize_output(layer,
                           fold_and_activate(layer, depthwise_product, depthwise.value(), true,
                                             channels, *options.normalizer, options.activation_fn),
                           options.activation_fn, true);
  }
  Tensor y = depthwise_product(num_outputs ? depthwise.value()
                                           : quantize_weights(layer, depthwise.value()));
  if (num_outputs) {
    Variable& pointwise = make_variable(
        layer, "pointwise_weights", Shape{1, 1, channels, *num_outputs}, inputs.dtype(),
        options.weights_initializer, options.trainable, options.weights_l2);
    if (folds(layer, options.normalizer)) {
      const Tensor depthwise_out = y;
      return quantize_output(
          layer,
          fold_and_activate(
              layer, [&](const Tensor& w) { return ops::conv2d(depthwise_out, w); },
              pointwise.value(), false, *num_outputs, *options.normalizer, options.activation_fn),
          options.activation_fn, true);
    }
    y = ops::conv2d(y, quantize_weights(layer, pointwise.value()));
    channels = *num_outputs;
  }
  if (!options.normalizer && options.biases_initializer) {
    Variable& biases =
        make_variable(layer, "biases", Shape{channels}, inputs.dtype(), *options.biases_initializer,
                      options.trainable, options.biases_l2);
    y = ops::add(y, biases.value());
  }
  return quantize_output(
      layer, normalize_and_activate(layer, y, options.normalizer, options.activation_fn),
      options.activation_fn, options.normalizer || options.biases_initializer);
}

Tensor max_pool2d(const Tensor& inputs, std::pair<int64_t, int64_t> kernel_size,
                  const Pool2DOptions& options) {
  return ops::max_pool2d(inputs, kernel_size, options.stride, options.padding);
}

Tensor avg_pool2d(const Tensor& inputs, std::pair<int64_t, int64_t> kernel_size,
                  const Pool2DOptions& options) {
  return ops::avg_pool2d(inputs, kernel_size, options.stride, options.padding);
}

Tensor flatten(const Tensor& inputs) {
  const Shape& shape = inputs.shape();
  if (shape.rank() < 2) {
    throw InvalidArgument("flatten: the input is " + inputs.description() +
                          "; expected rank >= 2 [batch, ...]");
  }
  int64_t inner = 1;
  for (std::size_t i = 1; i < shape.rank(); ++i) inner *= shape[i];
  return ops::reshape(inputs, Shape{shape[0], inner});
}

namespace {

BatchNormVariables batch_norm_variables(VariableScope& layer, int64_t channels, DType dtype,
                                        const BatchNormOptions& options) {
  if (!(options.decay >= 0.0 && options.decay <= 1.0) || !(options.epsilon > 0.0)) {
    invalid(layer, "decay " + std::to_string(options.decay) + " must be in [0, 1] and epsilon " +
                       std::to_string(options.epsilon) + " > 0");
  }
  Backend& backend = layer.backend();
  BatchNormVariables v;
  v.beta = options.center ? make_variable(layer, "beta", Shape{channels}, dtype,
                                          zeros_initializer(), options.trainable, 0.0)
                                .value()
                          : ops::zeros(backend, Shape{channels}, dtype);
  v.gamma = options.scale ? make_variable(layer, "gamma", Shape{channels}, dtype,
                                          constant_initializer(1.0), options.trainable, 0.0)
                                .value()
                          : ops::ones(backend, Shape{channels}, dtype);
  v.moving_mean =
      &make_variable(layer, "moving_mean", Shape{channels}, dtype, zeros_initializer(), false, 0.0);
  v.moving_variance = &make_variable(layer, "moving_variance", Shape{channels}, dtype,
                                     constant_initializer(1.0), false, 0.0);
  return v;
}

}  // namespace

Tensor batch_norm(VariableScope& scope, const Tensor& inputs, const BatchNormOptions& options) {
  VariableScope layer = scope.child_or_default(options.scope, "BatchNorm");
  const Shape& shape = inputs.shape();
  if (shape.rank() < 2) {
    invalid(layer, "the input is " + inputs.description() + "; expected rank >= 2 [..., C]");
  }
  const int64_t channels = shape[shape.rank() - 1];
  const BatchNormVariables v = batch_norm_variables(layer, channels, inputs.dtype(), options);
  const Tensor& gamma = v.gamma;
  const Tensor& beta = v.beta;
  Variable& moving_mean = *v.moving_mean;
  Variable& moving_variance = *v.moving_variance;

  // The activation inside the batch norm composite where it is one of its own, else after it.
  const std::optional<NormActivation> fused = options.activation_fn.batch_norm_fusable();
  const NormActivation inner = fused.value_or(NormActivation::kNone);
  Tensor y;
  if (training(scope, options.is_training)) {
    ops::BatchNormResult result =
        batch_norm_activation_training(inputs, gamma, beta, options.epsilon, inner);
    // The update op: runs now, records nothing.
    NoGradScope no_grad;
    const int64_t n = inputs.num_elements() / channels;
    Tensor unbiased = n > 1 ? ops::mul(result.batch_variance, static_cast<double>(n) / (n - 1))
                            : result.batch_variance;
    Tensor mean_value = moving_mean.value();
    Tensor variance_value = moving_variance.value();
    ops::assign_moving_average(mean_value, result.batch_mean, options.decay);
    ops::assign_moving_average(variance_value, unbiased, options.decay);
    y = result.y;
  } else {
    y = batch_norm_activation_inference(inputs, gamma, beta, moving_mean.value(),
                                        moving_variance.value(), options.epsilon, inner);
  }
  return fused ? y : options.activation_fn(y);
}

Tensor dropout(VariableScope& scope, const Tensor& inputs, const DropoutOptions& options) {
  VariableScope layer = scope.child_or_default(options.scope, "Dropout");
  if (!(options.keep_prob > 0.0 && options.keep_prob <= 1.0)) {
    invalid(layer, "keep_prob is " + std::to_string(options.keep_prob) + "; expected (0, 1]");
  }
  if (!training(scope, options.is_training) || options.keep_prob == 1.0) return inputs;
  Generator generator(layer.op_seed("random_uniform"));
  return ops::dropout(inputs, 1.0 - options.keep_prob, generator, true);
}

}  // namespace trainyard::layers
