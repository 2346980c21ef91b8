// MobileNet v2 as TF-Slim builds it (nets/mobilenet/mobilenet_v2.py's V2_DEF through
// mobilenet.py's mobilenet_base and conv_blocks.py's expanded_conv), with slim's scope names:
//   MobilenetV2/Conv/{weights, BatchNorm/...}                          layer_1
//   MobilenetV2/expanded_conv/{depthwise, project}/...                 layer_2 (no expansion)
//   MobilenetV2/expanded_conv_<k>/{expand, depthwise, project}/...     layer_<k + 2>
//   MobilenetV2/Conv_1/...                                             layer_19
//   MobilenetV2/Logits/Conv2d_1c_1x1/{weights, biases}
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "expanded_conv.h"
#include "net_util.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::nets {
namespace {

using internal::checked_images;
using internal::fixed_padding;
using layers::ActivationFn;
using layers::BatchNormOptions;
using layers::Conv2DOptions;
using layers::VariableScope;

// One op of V2_DEF's spec: a plain convolution or an expanded_conv block.
struct MobilenetV2Op {
  bool expanded;   // conv_blocks.expanded_conv; else slim.conv2d
  int64_t kernel;  // the conv2d's kernel (the blocks' depthwise kernel is 3)
  int64_t stride;
  int64_t num_outputs;  // before the depth multiplier
  int64_t expansion;    // expand_input_by_factor(6), or 1 (divisible_by 1) for the first block
};

constexpr std::array<MobilenetV2Op, 19> kMobilenetV2Def = {{
    {false, 3, 2, 32, 0}, {true, 3, 1, 16, 1},  {true, 3, 2, 24, 6},    {true, 3, 1, 24, 6},
    {true, 3, 2, 32, 6},  {true, 3, 1, 32, 6},  {true, 3, 1, 32, 6},    {true, 3, 2, 64, 6},
    {true, 3, 1, 64, 6},  {true, 3, 1, 64, 6},  {true, 3, 1, 64, 6},    {true, 3, 1, 96, 6},
    {true, 3, 1, 96, 6},  {true, 3, 1, 96, 6},  {true, 3, 2, 160, 6},   {true, 3, 1, 160, 6},
    {true, 3, 1, 160, 6}, {true, 3, 1, 320, 6}, {false, 1, 1, 1280, 0},
}};

BatchNormOptions mobilenet_v2_batch_norm(const MobilenetV2Options& o) {
  BatchNormOptions bn;
  bn.decay = o.batch_norm_decay;
  bn.epsilon = o.batch_norm_epsilon;
  bn.center = true;
  bn.scale = true;
  bn.is_training = o.batch_norm_is_training;
  return bn;
}

// The conv2d and separable_conv2d defaults inside mobilenet_base: training_scope's initializer
// and regularizer under V2_DEF's defaults (batch norm, relu6, SAME; VALID with explicit padding).
struct BaseScope {
  Conv2DOptions conv;
  layers::SeparableConv2DOptions depthwise;
};

BaseScope base_scope(const MobilenetV2Options& o) {
  BaseScope s;
  const Padding2D padding = o.use_explicit_padding ? Padding2D::valid() : Padding2D::same();
  s.conv.weights_initializer =
      o.weights_initializer.value_or(layers::truncated_normal_initializer(0.0, o.stddev));
  s.conv.weights_l2 = o.weight_decay;
  s.conv.activation_fn = ActivationFn::relu6();
  s.conv.normalizer = mobilenet_v2_batch_norm(o);
  s.conv.padding = padding;
  s.depthwise.weights_initializer = o.depthwise_initializer.value_or(s.conv.weights_initializer);
  s.depthwise.weights_l2 = o.regularize_depthwise ? o.weight_decay : 0.0;
  s.depthwise.activation_fn = s.conv.activation_fn;
  s.depthwise.normalizer = s.conv.normalizer;
  s.depthwise.padding = padding;
  return s;
}

}  // namespace

int64_t make_divisible(double value, int64_t divisor, int64_t min_value) {
  const auto rounded = static_cast<int64_t>(value + static_cast<double>(divisor) / 2.0);
  int64_t v = std::max(min_value, rounded / divisor * divisor);
  if (static_cast<double>(v) < 0.9 * value) v += divisor;
  return v;
}

NetOutput mobilenet_v2_base(VariableScope& root, const Tensor& images,
                            const MobilenetV2Options& options) {
  checked_images(options.scope, images);
  if (!(options.depth_multiplier > 0.0)) {
    throw InvalidArgument(options.scope + ": depth_multiplier is " +
                          std::to_string(options.depth_multiplier) + "; expected > 0");
  }
  if (options.divisible_by < 1) {
    throw InvalidArgument(options.scope + ": divisible_by is " +
                          std::to_string(options.divisible_by) + "; expected >= 1");
  }
  std::size_t last = kMobilenetV2Def.size();
  for (std::size_t i = 0; i < kMobilenetV2Def.size(); ++i) {
    if (options.final_endpoint == "layer_" + std::to_string(i + 1)) last = i;
  }
  if (last == kMobilenetV2Def.size()) {
    throw InvalidArgument(options.scope + ": unknown final_endpoint '" + options.final_endpoint +
                          "'; expected layer_1 .. layer_19");
  }
  const BaseScope s = base_scope(options);
  VariableScope sc = root.child(options.scope);
  NetOutput out;
  Tensor net = images;
  int64_t convs = 0;
  int64_t blocks = 0;
  for (std::size_t i = 0; i <= last; ++i) {
    const MobilenetV2Op& op = kMobilenetV2Def[i];
    double num_outputs = static_cast<double>(op.num_outputs);
    if (i + 1 == kMobilenetV2Def.size() && options.last_layer_depth) {
      num_outputs = static_cast<double>(*options.last_layer_depth);
    }
    if (i + 1 == kMobilenetV2Def.size() && options.finegrain_classification_mode &&
        options.depth_multiplier < 1.0) {
      num_outputs /= options.depth_multiplier;
    }
    const int64_t depth = make_divisible(num_outputs * options.depth_multiplier,
                                         options.divisible_by, options.min_depth);
    const std::string layer = "layer_" + std::to_string(i + 1);
    if (op.expanded) {
      const std::string name =
          blocks == 0 ? "expanded_conv" : "expanded_conv_" + std::to_string(blocks);
      ++blocks;
      const int64_t inputs = net.shape()[3];
      // expand_input_by_factor(6) rounds to multiples of 8; the first block's (1, divisible_by=1)
      // keeps the input's depth.
      const int64_t inner =
          op.expansion == 1 ? inputs : make_divisible(inputs * op.expansion, 8, 8);
      VariableScope block = sc.child(name);
      internal::ExpandedConv spec;
      spec.num_outputs = depth;
      spec.inner_size = inner;
      spec.stride = op.stride;
      spec.use_explicit_padding = options.use_explicit_padding;
      if (options.keras_residuals) {
        spec.residual_depth = make_divisible(
            std::floor(static_cast<double>(op.num_outputs) * options.depth_multiplier), 8, 8);
      }
      net = internal::expanded_conv(block, net, spec, s.conv, s.depthwise, layer, out);
    } else {
      if (options.use_explicit_padding) net = fixed_padding(net, op.kernel, 1);
      Conv2DOptions c = s.conv;
      c.stride = {op.stride, op.stride};
      c.scope = convs == 0 ? "Conv" : "Conv_" + std::to_string(convs);
      ++convs;
      net = layers::conv2d(sc, net, depth, {op.kernel, op.kernel}, c);
    }
    out.end_points[layer] = net;
  }
  out.net = net;
  return out;
}

NetOutput mobilenet_v2(VariableScope& root, const Tensor& images,
                       const MobilenetV2Options& options) {
  MobilenetV2Options base_options = options;
  base_options.final_endpoint = "layer_19";
  return internal::mobilenet_classifier(
      root, mobilenet_v2_base(root, images, base_options), options.scope, options.num_classes,
      options.dropout_keep_prob, options.stddev, options.weight_decay);
}

}  // namespace trainyard::nets
