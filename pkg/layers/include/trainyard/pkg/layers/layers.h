// TF-Slim's layers (tf_slim/layers/layers.py) with slim's variable names, shapes, defaults and
// initializers, composed of the SDK's public ops so every backend runs them and autodiff
// differentiates them:
//
//   fully_connected  <scope>/weights [in, out], <scope>/biases [out]; default scope
//                    "fully_connected"; activation relu; inputs of rank > 2 are applied on the
//                    last axis.
//   conv2d           <scope>/weights [kh, kw, in, out] (HWIO), <scope>/biases [out], NHWC;
//                    default scope "Conv"; stride 1, padding SAME, rate 1; activation relu.
//   batch_norm       <scope>/beta (center, zeros), <scope>/gamma (scale only, ones),
//                    <scope>/moving_mean (zeros) and <scope>/moving_variance (ones), both
//                    non-trainable; default scope "BatchNorm"; decay 0.999, epsilon 0.001,
//                    center true, scale false; over the last axis.
//   dropout          keep_prob 0.5; no variables; default scope "Dropout".
//   separable_conv2d <scope>/depthwise_weights [kh, kw, in, depth_multiplier], then with
//                    num_outputs <scope>/pointwise_weights [1, 1, in * depth_multiplier, out];
//                    <scope>/biases [out, or in * depth_multiplier without num_outputs];
//                    default scope "SeparableConv2d"; stride 1, padding SAME, rate 1,
//                    depth_multiplier 1; activation relu.
//   max_pool2d,      no variables; stride 2, padding VALID, as slim's defaults.
//   avg_pool2d
//   flatten          [B, ...] -> [B, prod(...)] in row-major (NHWC) order.
//
// Weights default to slim's xavier_initializer() (glorot uniform; for conv2d the receptive
// field multiplies both fans), biases to zeros. A `normalizer` (slim's normalizer_fn=batch_norm
// with normalizer_params) drops the biases and puts batch norm between the product and the
// activation, in the layer's scope: "<scope>/BatchNorm/beta".
//
// Training and inference: batch_norm and dropout take is_training from their options when set,
// else from the scope (VariableScope::is_training(), true in Mode::kTrain only), as slim models
// pass it through arg_scope. In training batch_norm normalizes with the batch's mean and biased
// variance and runs its update op at once: under a NoGradScope,
//   moving_mean     = moving_mean * decay + mean * (1 - decay)
//   moving_variance = moving_variance * decay + variance * n / (n - 1) * (1 - decay)
// where n is the number of values per channel: the variance fed to the moving average is the
// unbiased one that slim's default (fused) batch norm gets from tf.nn.fused_batch_norm. Out of
// training it normalizes with the moving statistics and updates nothing.
//
// batch_norm with activation none, relu or relu6 (also as a layer's normalizer) runs the
// batch_norm_activation.h composites: one pass forward and one fused backward where the backend
// has their kernels, the same values as batch norm followed by the activation.
//
// Errors: an input of the wrong rank, a non-positive size, keep_prob outside (0, 1], or a rate
// and a stride both above 1 throw InvalidArgument naming the layer's scope and the input. A
// variable that exists with another shape throws from ModelContext::variable().
#ifndef TRAINYARD_PKG_LAYERS_LAYERS_H_
#define TRAINYARD_PKG_LAYERS_LAYERS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "trainyard/ops.h"
#include "trainyard/pkg/layers/batch_norm_activation.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/tensor.h"
#include "trainyard/variable.h"

namespace trainyard::layers {

// slim's activation_fn: none (activation_fn=None), one the fused matmul can apply (relu,
// sigmoid, tanh), relu6, or any function of one tensor.
class ActivationFn {
 public:
  static ActivationFn none() { return ActivationFn(Activation::kNone, {}); }
  static ActivationFn relu() { return ActivationFn(Activation::kRelu, {}); }
  static ActivationFn sigmoid() { return ActivationFn(Activation::kSigmoid, {}); }
  static ActivationFn tanh() { return ActivationFn(Activation::kTanh, {}); }
  // ops::relu6 (tf.nn.relu6), which batch norm fuses but ops::matmul_bias_act does not.
  static ActivationFn relu6();
  static ActivationFn custom(std::function<Tensor(const Tensor&)> fn) {
    return ActivationFn(Activation::kNone, std::move(fn));
  }

  Tensor operator()(const Tensor& x) const;
  bool is_none() const { return fused_ == Activation::kNone && !custom_; }
  // The activation ops::matmul_bias_act applies, or nullopt for relu6 or a custom one.
  std::optional<Activation> fusable() const {
    return custom_ ? std::nullopt : std::optional<Activation>(fused_);
  }
  // The activation the batch norm composites apply (none, relu, relu6), or nullopt.
  std::optional<NormActivation> batch_norm_fusable() const;

 private:
  ActivationFn(Activation fused, std::function<Tensor(const Tensor&)> custom, bool relu6 = false)
      : fused_(fused), custom_(std::move(custom)), relu6_(relu6) {}
  Activation fused_;
  std::function<Tensor(const Tensor&)> custom_;
  bool relu6_;  // custom_ is ops::relu6
};

// slim's initializers.
Initializer xavier_initializer(bool uniform = true);  // glorot uniform (or normal)
Initializer zeros_initializer();
Initializer constant_initializer(double value);
Initializer truncated_normal_initializer(double mean = 0.0, double stddev = 1.0);
// tf.random_normal_initializer: untruncated N(mean, stddev^2).
Initializer random_normal_initializer(double mean = 0.0, double stddev = 1.0);

struct BatchNormOptions {
  double decay = 0.999;
  bool center = true;  // beta
  bool scale = false;  // gamma
  double epsilon = 0.001;
  ActivationFn activation_fn = ActivationFn::none();
  std::optional<bool> is_training;  // unset: the scope's
  bool trainable = true;            // beta and gamma
  std::string scope;                // empty: "BatchNorm", uniquified
};

struct FullyConnectedOptions {
  ActivationFn activation_fn = ActivationFn::relu();
  std::optional<BatchNormOptions> normalizer;  // slim's normalizer_fn=batch_norm; no biases then
  Initializer weights_initializer = xavier_initializer();
  double weights_l2 = 0.0;  // weights_regularizer=l2_regularizer(weights_l2) when > 0
  std::optional<Initializer> biases_initializer = zeros_initializer();  // nullopt: no biases
  double biases_l2 = 0.0;
  bool trainable = true;
  std::string scope;  // empty: "fully_connected", uniquified
};

struct Conv2DOptions {
  std::pair<int64_t, int64_t> stride{1, 1};
  Padding2D padding = Padding2D::same();
  std::pair<int64_t, int64_t> rate{1, 1};  // dilation; not with a stride > 1
  ActivationFn activation_fn = ActivationFn::relu();
  std::optional<BatchNormOptions> normalizer;
  Initializer weights_initializer = xavier_initializer();
  double weights_l2 = 0.0;
  std::optional<Initializer> biases_initializer = zeros_initializer();
  double biases_l2 = 0.0;
  bool trainable = true;
  std::string scope;  // empty: "Conv", uniquified
  // The output (activation none) is added to a residual branch and the sum activated: where the
  // scope quantizes, it is fake-quantized as contrib.quantize's bypass input (conv_quant,
  // quantize.h) instead of act_quant; the caller quantizes the activated sum.
  bool bypass_input = false;
};

struct SeparableConv2DOptions {
  std::pair<int64_t, int64_t> stride{1, 1};
  Padding2D padding = Padding2D::same();
  std::pair<int64_t, int64_t> rate{1, 1};
  int64_t depth_multiplier = 1;
  ActivationFn activation_fn = ActivationFn::relu();
  std::optional<BatchNormOptions> normalizer;
  Initializer weights_initializer = xavier_initializer();  // both depthwise and pointwise
  double weights_l2 = 0.0;                                 // both, as slim's weights_regularizer
  std::optional<Initializer> biases_initializer = zeros_initializer();
  double biases_l2 = 0.0;
  bool trainable = true;
  std::string scope;  // empty: "SeparableConv2d", uniquified
};

struct Pool2DOptions {
  std::pair<int64_t, int64_t> stride{2, 2};
  Padding2D padding = Padding2D::valid();
};

struct DropoutOptions {
  double keep_prob = 0.5;
  std::optional<bool> is_training;  // unset: the scope's
  std::string scope;                // empty: "Dropout", uniquified; names the op's seed
};

// inputs [..., in] -> [..., num_outputs].
Tensor fully_connected(VariableScope& scope, const Tensor& inputs, int64_t num_outputs,
                       const FullyConnectedOptions& options = {});

// inputs NHWC [B, H, W, in] -> [B, H', W', num_outputs].
Tensor conv2d(VariableScope& scope, const Tensor& inputs, int64_t num_outputs,
              std::pair<int64_t, int64_t> kernel_size, const Conv2DOptions& options = {});

// slim.separable_conv2d: a depthwise convolution, then (with num_outputs) a pointwise 1x1
// convolution to num_outputs channels; without num_outputs the depthwise result is the output.
Tensor separable_conv2d(VariableScope& scope, const Tensor& inputs,
                        std::optional<int64_t> num_outputs, std::pair<int64_t, int64_t> kernel_size,
                        const SeparableConv2DOptions& options = {});

// slim.max_pool2d / slim.avg_pool2d on NHWC input (the average leaves padding out, as
// TensorFlow's SAME average pooling does).
Tensor max_pool2d(const Tensor& inputs, std::pair<int64_t, int64_t> kernel_size,
                  const Pool2DOptions& options = {});
Tensor avg_pool2d(const Tensor& inputs, std::pair<int64_t, int64_t> kernel_size,
                  const Pool2DOptions& options = {});

// slim.flatten: [B, d1, d2, ...] -> [B, d1 * d2 * ...].
Tensor flatten(const Tensor& inputs);

// Normalizes over every axis but the last, per channel of the last axis.
Tensor batch_norm(VariableScope& scope, const Tensor& inputs, const BatchNormOptions& options = {});

// Keeps each element with probability keep_prob, scaled by 1 / keep_prob, drawn from a
// generator seeded with scope.op_seed(<its scope>); the identity when not training.
Tensor dropout(VariableScope& scope, const Tensor& inputs, const DropoutOptions& options = {});

}  // namespace trainyard::layers

#endif  // TRAINYARD_PKG_LAYERS_LAYERS_H_
