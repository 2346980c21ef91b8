// MobileNet v3 as TF-Slim builds it (nets/mobilenet/mobilenet_v3.py's V3_LARGE and V3_SMALL
// through mobilenet.py's mobilenet_base and conv_blocks.py's expanded_conv and squeeze_excite),
// with slim's scope names:
//   MobilenetV3/Conv/{weights, BatchNorm/...}                               layer_1
//   MobilenetV3/expanded_conv/{depthwise, project}/...                      layer_2 (no expansion)
//   MobilenetV3/expanded_conv_<k>/{expand, depthwise, project}/...          layer_<k + 2>
//   MobilenetV3/expanded_conv_<k>/squeeze_excite/{Conv, Conv_1}/{weights, biases}
//   MobilenetV3/Conv_1/...          layer_17 (large) / layer_13 (small)
//   (AvgPool2D, no variables)       layer_18 / layer_14
//   MobilenetV3/Conv_2/{weights, biases}                                    layer_19 / layer_15
//   MobilenetV3/Logits/Conv2d_1c_1x1/{weights, biases}
// squeeze_excite (squeeze_factor 4): the mean over height and width, a 1x1 convolution to
// _make_divisible(channels / 4, 8) with relu, a 1x1 convolution back with the hard sigmoid
// relu6(x + 3) * 0.16667, and the product with its input.
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "expanded_conv.h"
#include "net_util.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::nets {
namespace {

using internal::checked_images;
using internal::fixed_padding;
using internal::global_average_pool;
using layers::ActivationFn;
using layers::BatchNormOptions;
using layers::Conv2DOptions;
using layers::VariableScope;

enum class OpKind {
  kConv,   // slim.conv2d with batch norm
  kBlock,  // mbv3_op / mbv3_op_se: expanded_conv
  kPool,   // reduce_to_1x1
  kLast,   // slim.conv2d with biases and no batch norm
};

// One op of a V3 spec: mbv3_op(ef, n, k, s, act, se) or op(slim.conv2d, ...).
struct MobilenetV3Op {
  OpKind kind;
  double expansion;  // ef; the expansion is _make_divisible(input depth * ef, 8)
  int64_t num_outputs;
  int64_t kernel;
  int64_t stride;
  bool hard_swish;  // the activation (inner activation for blocks); relu otherwise
  bool squeeze_excite;
};

constexpr OpKind kC = OpKind::kConv;
constexpr OpKind kB = OpKind::kBlock;

constexpr std::array<MobilenetV3Op, 19> kV3Large = {{
    {kC, 0, 16, 3, 2, true, false},
    {kB, 1, 16, 3, 1, false, false},
    {kB, 4, 24, 3, 2, false, false},
    {kB, 3, 24, 3, 1, false, false},
    {kB, 3, 40, 5, 2, false, true},
    {kB, 3, 40, 5, 1, false, true},
    {kB, 3, 40, 5, 1, false, true},
    {kB, 6, 80, 3, 2, true, false},
    {kB, 2.5, 80, 3, 1, true, false},
    {kB, 184 / 80., 80, 3, 1, true, false},
    {kB, 184 / 80., 80, 3, 1, true, false},
    {kB, 6, 112, 3, 1, true, true},
    {kB, 6, 112, 3, 1, true, true},
    {kB, 6, 160, 5, 2, true, true},
    {kB, 6, 160, 5, 1, true, true},
    {kB, 6, 160, 5, 1, true, true},
    {kC, 0, 960, 1, 1, true, false},
    {OpKind::kPool, 0, 0, 0, 1, false, false},
    {OpKind::kLast, 0, 1280, 1, 1, true, false},
}};

constexpr std::array<MobilenetV3Op, 15> kV3Small = {{
    {kC, 0, 16, 3, 2, true, false},
    {kB, 1, 16, 3, 2, false, true},
    {kB, 72. / 16, 24, 3, 2, false, false},
    {kB, 88. / 24, 24, 3, 1, false, false},
    {kB, 4, 40, 5, 2, true, true},
    {kB, 6, 40, 5, 1, true, true},
    {kB, 6, 40, 5, 1, true, true},
    {kB, 3, 48, 5, 1, true, true},
    {kB, 3, 48, 5, 1, true, true},
    {kB, 6, 96, 5, 2, true, true},
    {kB, 6, 96, 5, 1, true, true},
    {kB, 6, 96, 5, 1, true, true},
    {kC, 0, 576, 1, 1, true, false},
    {OpKind::kPool, 0, 0, 0, 1, false, false},
    {OpKind::kLast, 0, 1024, 1, 1, true, false},
}};

std::span<const MobilenetV3Op> spec(MobilenetV3Variant variant) {
  if (variant == MobilenetV3Variant::kSmall) return kV3Small;
  return kV3Large;
}

// The ops _reduce_consecutive_layers halves for V3_*_DETECTION (0-based, inclusive).
std::pair<std::size_t, std::size_t> detection_layers(MobilenetV3Variant variant) {
  if (variant == MobilenetV3Variant::kSmall) return {9, 12};
  return {13, 16};
}

ActivationFn activation(bool hard_swish) {
  return hard_swish ? ActivationFn::custom(nets::hard_swish) : ActivationFn::relu();
}

Tensor hard_sigmoid(const Tensor& x) { return ops::relu6(x + 3.0) * 0.16667; }

// conv_blocks.squeeze_excite as mobilenet_v3 fills it in, under `block`/squeeze_excite.
Tensor squeeze_excite(VariableScope& block, const Tensor& x, const Conv2DOptions& conv) {
  VariableScope se = block.child("squeeze_excite");
  const int64_t channels = x.shape()[3];
  const int64_t squeeze_channels = make_divisible(static_cast<double>(channels) / 4.0, 8, 8);
  Conv2DOptions c = conv;
  c.stride = {1, 1};
  c.normalizer.reset();
  c.activation_fn = ActivationFn::relu();
  c.scope = "Conv";
  Tensor pooled = global_average_pool(x);
  const Tensor squeeze = layers::conv2d(se, pooled, squeeze_channels, {1, 1}, c);
  c.activation_fn = ActivationFn::custom(hard_sigmoid);
  c.scope = "Conv_1";
  const Tensor excite = layers::conv2d(se, squeeze, channels, {1, 1}, c);
  return x * excite;
}

// reduce_to_1x1: an average pool over the whole map when it is square, else 7 x 7 (VALID), which
// a non-square map smaller than 7 x 7 cannot take (InvalidArgument naming the net and the layer).
Tensor reduce_to_1x1(const Tensor& x, const std::string& net, const std::string& layer) {
  const int64_t h = x.shape()[1];
  const int64_t w = x.shape()[2];
  const int64_t k = h == w ? h : 7;
  if (h < k || w < k) {
    throw InvalidArgument(net + ": " + layer + " (reduce_to_1x1) pools the non-square map " +
                          x.description() +
                          " 7 x 7, as slim does; give square images or larger ones");
  }
  layers::Pool2DOptions pool;
  pool.stride = {1, 1};
  pool.padding = Padding2D::valid();
  return layers::avg_pool2d(x, {k, k}, pool);
}

}  // namespace

Tensor hard_swish(const Tensor& x) { return x * ops::relu6(x + 3.0) * (1.0 / 6.0); }

NetOutput mobilenet_v3_base(VariableScope& root, const Tensor& images,
                            const MobilenetV3Options& options) {
  checked_images(options.scope, images);
  if (!(options.depth_multiplier > 0.0)) {
    throw InvalidArgument(options.scope + ": depth_multiplier is " +
                          std::to_string(options.depth_multiplier) + "; expected > 0");
  }
  if (options.divisible_by < 1) {
    throw InvalidArgument(options.scope + ": divisible_by is " +
                          std::to_string(options.divisible_by) + "; expected >= 1");
  }
  const std::span<const MobilenetV3Op> ops_def = spec(options.variant);
  const std::string last_name = "layer_" + std::to_string(ops_def.size());
  std::size_t last = ops_def.size();
  for (std::size_t i = 0; i < ops_def.size(); ++i) {
    const std::string name = "layer_" + std::to_string(i + 1);
    if (options.final_endpoint == name || (options.final_endpoint.empty() && name == last_name)) {
      last = i;
    }
  }
  if (last == ops_def.size()) {
    throw InvalidArgument(options.scope + ": unknown final_endpoint '" + options.final_endpoint +
                          "'; expected layer_1 .. " + last_name);
  }
  BatchNormOptions bn;
  bn.decay = options.batch_norm_decay;
  bn.epsilon = options.batch_norm_epsilon;
  bn.center = true;
  bn.scale = true;
  bn.is_training = options.batch_norm_is_training;
  Conv2DOptions conv;
  conv.weights_initializer = options.weights_initializer.value_or(
      layers::truncated_normal_initializer(0.0, options.stddev));
  conv.weights_l2 = options.weight_decay;
  conv.normalizer = bn;
  layers::SeparableConv2DOptions depthwise;
  depthwise.weights_initializer = conv.weights_initializer;
  depthwise.weights_l2 = options.regularize_depthwise ? options.weight_decay : 0.0;
  depthwise.normalizer = bn;

  const auto [halved_first, halved_last] = detection_layers(options.variant);
  VariableScope sc = root.child(options.scope);
  NetOutput out;
  Tensor net = images;
  int64_t convs = 0;
  int64_t blocks = 0;
  for (std::size_t i = 0; i <= last; ++i) {
    const MobilenetV3Op& op = ops_def[i];
    const std::string layer = "layer_" + std::to_string(i + 1);
    double num_outputs = static_cast<double>(op.num_outputs);
    if (options.detection && i >= halved_first && i <= halved_last) {
      num_outputs = std::round(num_outputs * 0.5);
    }
    int64_t depth = make_divisible(num_outputs * options.depth_multiplier, options.divisible_by,
                                   options.min_depth);
    if (op.kind == OpKind::kLast && options.finegrain_classification_mode) {
      depth = op.num_outputs;
    }
    if (op.kind == OpKind::kBlock) {
      const std::string name =
          blocks == 0 ? "expanded_conv" : "expanded_conv_" + std::to_string(blocks);
      ++blocks;
      internal::ExpandedConv block_spec;
      block_spec.num_outputs = depth;
      block_spec.inner_size =
          make_divisible(static_cast<double>(net.shape()[3]) * op.expansion, 8, 8);
      block_spec.kernel = op.kernel;
      block_spec.stride = op.stride;
      Conv2DOptions inner = conv;
      inner.activation_fn = activation(op.hard_swish);
      layers::SeparableConv2DOptions dw = depthwise;
      dw.activation_fn = inner.activation_fn;
      if (op.squeeze_excite) {
        block_spec.expansion_transform = [&conv](VariableScope& block, const Tensor& x) {
          return squeeze_excite(block, x, conv);
        };
      }
      // mobilenet_base pads the input of an op with a kernel_size (every block) and leaves the
      // block's own padding SAME.
      if (options.use_explicit_padding) net = fixed_padding(net, op.kernel, 1);
      VariableScope block = sc.child(name);
      net = internal::expanded_conv(block, net, block_spec, inner, dw, layer, out);
    } else if (op.kind == OpKind::kPool) {
      if (options.use_explicit_padding) {
        throw InvalidArgument(options.scope + ": use_explicit_padding reaches " + layer +
                              " (reduce_to_1x1), which slim cannot pad; stop at an earlier "
                              "final_endpoint");
      }
      net = reduce_to_1x1(net, options.scope, layer);
    } else {
      Conv2DOptions c = conv;
      if (options.use_explicit_padding) {
        net = fixed_padding(net, op.kernel, 1);
        c.padding = Padding2D::valid();
      }
      c.stride = {op.stride, op.stride};
      c.activation_fn = activation(op.hard_swish);
      if (op.kind == OpKind::kLast) c.normalizer.reset();
      c.scope = convs == 0 ? "Conv" : "Conv_" + std::to_string(convs);
      ++convs;
      net = layers::conv2d(sc, net, depth, {op.kernel, op.kernel}, c);
    }
    out.end_points[layer] = net;
  }
  out.net = net;
  return out;
}

NetOutput mobilenet_v3(VariableScope& root, const Tensor& images,
                       const MobilenetV3Options& options) {
  MobilenetV3Options base_options = options;
  base_options.final_endpoint.clear();
  return internal::mobilenet_classifier(
      root, mobilenet_v3_base(root, images, base_options), options.scope, options.num_classes,
      options.dropout_keep_prob, options.stddev, options.weight_decay);
}

}  // namespace trainyard::nets
