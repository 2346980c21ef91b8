// Quantization-aware training as TensorFlow's contrib.quantize rewrite places it
// (tensorflow/contrib/quantize/python/quantize.py, quant_ops.py, common.py; the Object Detection
// API's graph_rewriter { quantization { ... } } through graph_rewriter_builder), applied by the
// slim layers of layers.h as they are built instead of by rewriting a finished graph.
//
// A model turns it on for one forward pass on its root scope (VariableScope::set_quantize); every
// layer built under that scope then quantizes:
//
//   weights   (conv2d, fully_connected, separable_conv2d's matched product: the depthwise weights
//             without num_outputs, the pointwise weights with it) before the product, in the
//             layer's scope: <layer>/weights_quant/{min,max}, per tensor, narrow range
//             [1, 2^bits - 1], set in training to the last values min(min(w), 0) and
//             max(max(w), 0) (LastValueQuantize), initialized to -6 and 6.
//   outputs   of a layer whose activation is none, relu or relu6 and that has biases or batch
//             norm (contrib.quantize's activation and final-layer matches), after the activation:
//             <layer>/act_quant/{min,max}, per tensor, wide range [0, 2^bits - 1], initialized to
//             0 and 6, kept in training as exponential moving averages (decay 0.999) of
//             min(min(y), 0) and max(max(y), 0) with TensorFlow's zero debiasing
//             (moving_averages.assign_moving_average's default), in f32 as TensorFlow computes it:
//               biased     -= (biased - value) * (1 - decay)     <S>/<S>/min/biased, zeros
//               local_step += 1                                   <S>/<S>/min/local_step
//             (S = <layer>/act_quant; TensorFlow's _zero_debias repeats the scope; max alike)
//               var        -= var - biased / (1 - (1 - (1 - decay))^local_step)
//             The batch's values are quantized with the updated range, as contrib.quantize's
//             fake quant reads the assign ops' results.
//
// Delay (quant_delay): with delay > 0 a non-trainable int64 variable fake_quantization_step
// (common.CreateOrGetQuantizationStep) counts the training forward passes, incremented once per
// training step before any layer reads it (the clones of a step share one count); the fake
// quantization applies once it is >= delay (so from the delay-th pass on) and the layers' outputs
// are their float values before. The ranges are updated from the first pass on, as TensorFlow's
// cond leaves the update ops outside its branches. Out of training (create_eval_graph) every layer
// quantizes with its stored ranges and nothing is updated.
//
// Gradients are the straight-through estimator of ops::fake_quant_with_min_max_vars: the inputs
// get the output gradient inside the nudged range; the ranges are variables that are not trained
// and get none.
//
// Batch norm (fold_batch_norms.py's _FoldFusedBatchNorms, which runs before the quantization):
// a conv2d, fully_connected or separable_conv2d with a batch norm normalizer multiplies folded
// weights, and those are what weights_quant quantizes (fold_batch_norm below). In training, with
// the batch's mean mu_b and biased variance var_b of the float product x * w, and sigma =
// rsqrt(var + eps):
//   multiplier = gamma * rsqrt(var_b + eps)          bias = beta - mu_b * multiplier
//   scale      = rsqrt(mv + eps) / rsqrt(var_b + eps)  (correction_scale; mv: moving variance)
//   y          = x * quant((scale * w) * multiplier)   i.e. the weights scaled by gamma / sigma_mv
//   y          = y * (1 / scale) + 0 + bias           before freeze_bn_delay
//   y          = y * 1 + gamma * (mu_b * rsqrt(var_b + eps) - mm * rsqrt(mv + eps)) + bias  after
// so before the freeze the output is batch norm's with batch statistics, after it the moving
// ones'. Gradients reach x and w through the batch statistics too (FoldFusedBatchNormGrad's).
// The moving averages are updated as batch_norm updates them (mean, Bessel-corrected variance),
// except the moving mean once frozen: TensorFlow 1.15's fused path reroutes only the mean's
// decay to 0. Out of training (or with the batch norm's is_training false): multiplier = gamma *
// rsqrt(mv + eps), bias = beta - mm * multiplier, y = x * quant(w * multiplier) + bias.
// freeze_bn_delay is unset for the Object Detection API (graph_rewriter_builder passes
// quant_delay only and create_training_graph's freeze_bn_delay defaults to None): never frozen.
//
// The pre-activation bypass, relu(shortcut + residual) (ResNet v1's units): the graph matcher
// takes the sum's first input that is a layer's output as the layer, so a projection shortcut's
// conv (shortcut + residual) is the bypass input and the residual's last conv is a final layer
// (act_quant), while with an identity or pooled shortcut the residual's last conv is the bypass
// input; the sum is followed by the relu, so add_quant is skipped, and act_quant follows the relu
// in the unit's scope. Not done (docs/object_detection.md): concatenations and sums that
// follow no activation pattern (FPN's top-down sums) stay float as contrib.quantize leaves them;
// per-channel weights, symmetric ranges, activations
// other than none, relu and relu6, layers built outside layers.h, the unfused batch norm
// pattern (_FoldUnfusedBatchNorms; slim's batch norm is fused on NHWC).
#ifndef TRAINYARD_PKG_LAYERS_QUANTIZE_H_
#define TRAINYARD_PKG_LAYERS_QUANTIZE_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "trainyard/tensor.h"
#include "trainyard/variable.h"

namespace trainyard::layers {

class VariableScope;

// graph_rewriter.quantization's fields and contrib.quantize's fixed ema_decay.
struct QuantizeOptions {
  int64_t delay = 0;  // quant_delay; <= 0: quantized from the first step
  int64_t weight_bits = 8;
  int64_t activation_bits = 8;
  double ema_decay = 0.999;
  // create_training_graph's freeze_bn_delay: from this fake_quantization_step on, batch norm
  // folding uses the moving statistics. nullopt (the API's): never.
  std::optional<int64_t> freeze_bn_delay;
};

// The per-forward state a root scope shares with its children (VariableScope::set_quantize).
class QuantizeState {
 public:
  // count_step false: a later clone of a training step already counted (num_clones) reads
  // fake_quantization_step without incrementing it. TensorFlow builds the clones into one graph
  // whose counter advances once per session run.
  explicit QuantizeState(const QuantizeOptions& options, bool count_step = true)
      : options_(options), count_step_(count_step) {}
  const QuantizeOptions& options() const { return options_; }
  // Whether the fake quantization applies in this forward pass: on first call in training with
  // a delay it increments fake_quantization_step (created under `scope`'s context, no prefix).
  bool active(const VariableScope& scope);
  // Whether batch norm folding uses the moving statistics in this (training) pass.
  bool batch_norm_frozen(const VariableScope& scope);

 private:
  // fake_quantization_step after this pass's increment; nullopt when none is kept (not
  // training, or neither a delay nor freeze_bn_delay).
  std::optional<int64_t> step(const VariableScope& scope);

  QuantizeOptions options_;
  bool count_step_;
  bool counted_ = false;
  std::optional<int64_t> step_;
};

// Whether a model's pass counts fake_quantization_step (VariableScope::set_quantize's
// count_step): the trainer gives every clone of a training step (num_clones) the step's
// ModelContext::seed(), so a training pass counts when its seed differs from the last training
// pass's, which `last_seed` (the model's) keeps. Passes out of training count nothing anyway.
bool counts_quantization_step(std::optional<uint64_t>& last_seed, uint64_t seed, bool training);

// `weights` as the layer `layer` (its own scope) multiplies them: fake-quantized as above when
// the scope quantizes, else as they are.
Tensor quantize_weights(const VariableScope& layer, const Tensor& weights);
// The layer's output after its activation, fake-quantized as above when the scope quantizes.
Tensor quantize_activations(const VariableScope& layer, const Tensor& outputs);
// A residual sum of a quantized layer's output (after its activation) and another tensor, as
// contrib.quantize's post-activation bypass quantizes it when no relu or relu6 follows: in the
// add's scope, <scope>/post_activation_bypass_quant/{min,max}, initialized to -6 and 6, kept as
// act_quant's are (moving averages, wide range, the delay). MobileNet v2's and v3's expanded_conv
// blocks call it on their `input + project` sums.
Tensor quantize_bypass(const VariableScope& scope, const Tensor& sum);
// The output of a layer that feeds a pre-activation bypass, relu(shortcut + layer output) (ResNet
// v1's units): contrib.quantize's conv_quant, in the layer's scope (<layer>/conv_quant/{min,max},
// initialized to -6 and 6, kept as act_quant's are), instead of act_quant; the activated sum takes
// act_quant in the scope above the layer (quantize_activations on the unit's scope).
Tensor quantize_bypass_input(const VariableScope& layer, const Tensor& outputs);

// A batch norm's parameters as fold_batch_norm reads them (layers.cc's batch_norm variables).
struct FoldedBatchNorm {
  Tensor gamma, beta;  // [C]; ones / zeros when the batch norm has no scale / center
  Variable* moving_mean = nullptr;
  Variable* moving_variance = nullptr;
  double epsilon = 0.001;
  double decay = 0.999;
  bool training = false;  // the batch norm's is_training
};

// The layer's product with its batch norm folded in, as above, up to and including add_fold
// (before the activation): `product(w)` is the layer's op applied to weights w shaped as
// `weights`; `depthwise` says that `weights` is [KH, KW, C, M] with the batch norm over C * M
// channels. In training it updates the moving averages.
Tensor fold_batch_norm(const VariableScope& layer,
                       const std::function<Tensor(const Tensor&)>& product, const Tensor& weights,
                       bool depthwise, const FoldedBatchNorm& bn);

}  // namespace trainyard::layers

#endif  // TRAINYARD_PKG_LAYERS_QUANTIZE_H_
