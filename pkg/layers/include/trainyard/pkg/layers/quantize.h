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
// pass before any layer reads it; the fake quantization applies once it is >= delay (so from
// the delay-th pass on) and the layers' outputs are their float values before. The ranges are
// updated from the first pass on, as TensorFlow's cond leaves the update ops outside its
// branches. Out of training (create_eval_graph) every layer quantizes with its stored ranges and
// nothing is updated.
//
// Gradients are the straight-through estimator of ops::fake_quant_with_min_max_vars: the inputs
// get the output gradient inside the nudged range; the ranges are variables that are not trained
// and get none.
//
// Not done (docs/object_detection.md): batch-norm folding (weights are quantized as they are,
// before batch norm, not folded with it; freeze_bn_delay), the bypass quantization of residual
// adds and concatenations (conv_quant, add_quant), per-channel weights, symmetric ranges,
// activations other than none, relu and relu6, layers built outside layers.h.
#ifndef TRAINYARD_PKG_LAYERS_QUANTIZE_H_
#define TRAINYARD_PKG_LAYERS_QUANTIZE_H_

#include <cstdint>
#include <optional>

#include "trainyard/tensor.h"

namespace trainyard::layers {

class VariableScope;

// graph_rewriter.quantization's fields and contrib.quantize's fixed ema_decay.
struct QuantizeOptions {
  int64_t delay = 0;  // quant_delay; <= 0: quantized from the first step
  int64_t weight_bits = 8;
  int64_t activation_bits = 8;
  double ema_decay = 0.999;
};

// The per-forward state a root scope shares with its children (VariableScope::set_quantize).
class QuantizeState {
 public:
  explicit QuantizeState(const QuantizeOptions& options) : options_(options) {}
  const QuantizeOptions& options() const { return options_; }
  // Whether the fake quantization applies in this forward pass: on first call in training with
  // a delay it increments fake_quantization_step (created under `scope`'s context, no prefix).
  bool active(const VariableScope& scope);

 private:
  QuantizeOptions options_;
  std::optional<bool> active_;
};

// `weights` as the layer `layer` (its own scope) multiplies them: fake-quantized as above when
// the scope quantizes, else as they are.
Tensor quantize_weights(const VariableScope& layer, const Tensor& weights);
// The layer's output after its activation, fake-quantized as above when the scope quantizes.
Tensor quantize_activations(const VariableScope& layer, const Tensor& outputs);

}  // namespace trainyard::layers

#endif  // TRAINYARD_PKG_LAYERS_QUANTIZE_H_
