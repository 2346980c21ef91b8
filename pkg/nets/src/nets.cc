#include "trainyard/pkg/nets/nets.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "net_util.h"
#include "trainyard/pkg/layers/quantize.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard::nets {
namespace {

using internal::checked_images;
using internal::fixed_padding;
using internal::global_average_pool;
using internal::he_initializer;
using internal::mobilenet_logits;
using internal::spatial_squeeze;

using layers::ActivationFn;
using layers::BatchNormOptions;
using layers::Conv2DOptions;
using layers::VariableScope;

// ---------------------------------------------------------------------------------------------
// ResNet v1

Conv2DOptions resnet_conv_options(const ResnetV1Options& o) {
  Conv2DOptions c;
  c.weights_initializer = o.weights_initializer.value_or(he_initializer());
  c.weights_l2 = o.weight_decay;
  c.activation_fn = o.activation_fn.value_or(ActivationFn::relu());
  BatchNormOptions bn;
  bn.decay = o.batch_norm_decay;
  bn.epsilon = o.batch_norm_epsilon;
  bn.scale = o.batch_norm_scale;
  bn.is_training = o.batch_norm_is_training;
  c.normalizer = bn;
  return c;
}

// The shortcut of a unit: the input itself (subsampled by max_pool 1x1 at a stride) when the
// depth is unchanged, else a 1x1 convolution without activation.
Tensor shortcut(VariableScope& unit, const Tensor& inputs, int64_t depth, int64_t stride,
                Conv2DOptions conv) {
  if (inputs.shape()[3] == depth) {
    if (stride == 1) return inputs;
    return ops::max_pool2d(inputs, {1, 1}, {stride, stride}, Padding2D::same());
  }
  conv.stride = {stride, stride};
  conv.activation_fn = ActivationFn::none();
  conv.scope = "shortcut";
  conv.bypass_input = true;  // the sum's first input (quantize.h's pre-activation bypass)
  return layers::conv2d(unit, inputs, depth, {1, 1}, conv);
}

// relu(shortcut + residual), fake-quantized in the unit's scope where the scope quantizes.
Tensor unit_output(VariableScope& unit, const Tensor& shortcut, const Tensor& residual) {
  return layers::quantize_activations(unit, ops::relu(ops::add(shortcut, residual)));
}

Tensor bottleneck_v1(VariableScope& unit_scope, const Tensor& inputs, const ResnetUnit& unit,
                     int64_t stride, int64_t rate, const Conv2DOptions& conv) {
  VariableScope unit_v1 = unit_scope.child("bottleneck_v1");
  Tensor sc = shortcut(unit_v1, inputs, unit.depth, stride, conv);
  Conv2DOptions c1 = conv;
  c1.scope = "conv1";
  Tensor residual = layers::conv2d(unit_v1, inputs, unit.depth_bottleneck, {1, 1}, c1);
  residual = conv2d_same(unit_v1, residual, unit.depth_bottleneck, 3, stride, rate, [&] {
    Conv2DOptions c2 = conv;
    c2.scope = "conv2";
    return c2;
  }());
  Conv2DOptions c3 = conv;
  c3.scope = "conv3";
  c3.activation_fn = ActivationFn::none();
  c3.bypass_input = inputs.shape()[3] == unit.depth;  // unless a shortcut conv is
  residual = layers::conv2d(unit_v1, residual, unit.depth, {1, 1}, c3);
  return unit_output(unit_v1, sc, residual);
}

Tensor basic_v1(VariableScope& unit_scope, const Tensor& inputs, const ResnetUnit& unit,
                int64_t stride, int64_t rate, const Conv2DOptions& conv) {
  VariableScope unit_v1 = unit_scope.child("basic_v1");
  Tensor sc = shortcut(unit_v1, inputs, unit.depth, stride, conv);
  Conv2DOptions c1 = conv;
  c1.scope = "conv1";
  Tensor residual = conv2d_same(unit_v1, inputs, unit.depth, 3, stride, rate, c1);
  Conv2DOptions c2 = conv;
  c2.scope = "conv2";
  c2.activation_fn = ActivationFn::none();
  c2.rate = {rate, rate};
  c2.bypass_input = inputs.shape()[3] == unit.depth;  // unless a shortcut conv is
  residual = layers::conv2d(unit_v1, residual, unit.depth, {3, 3}, c2);
  return unit_output(unit_v1, sc, residual);
}

// ---------------------------------------------------------------------------------------------
// MobileNet v1

struct MobilenetConvDef {
  bool depthwise_separable;
  int64_t stride;
  int64_t depth;
};

constexpr std::array<MobilenetConvDef, 14> kMobilenetV1ConvDefs{{
    {false, 2, 32},
    {true, 1, 64},
    {true, 2, 128},
    {true, 1, 128},
    {true, 2, 256},
    {true, 1, 256},
    {true, 2, 512},
    {true, 1, 512},
    {true, 1, 512},
    {true, 1, 512},
    {true, 1, 512},
    {true, 1, 512},
    {true, 2, 1024},
    {true, 1, 1024},
}};

BatchNormOptions mobilenet_batch_norm(const MobilenetV1Options& o) {
  BatchNormOptions bn;
  bn.decay = o.batch_norm_decay;
  bn.epsilon = o.batch_norm_epsilon;
  bn.center = true;
  bn.scale = true;
  bn.is_training = o.batch_norm_is_training;
  return bn;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

NetOutput lenet(VariableScope& root, const Tensor& images, const LenetOptions& options) {
  checked_images(options.scope, images);
  VariableScope net_scope = root.child(options.scope);
  NetOutput out;
  auto point = [&](const char* name, const Tensor& t) {
    out.end_points[name] = t;
    return t;
  };
  Conv2DOptions conv;
  conv.weights_initializer = layers::truncated_normal_initializer(0.0, 0.1);
  conv.weights_l2 = options.weight_decay;
  conv.scope = "conv1";
  Tensor net = point("conv1", layers::conv2d(net_scope, images, 32, {5, 5}, conv));
  net = point("pool1", layers::max_pool2d(net, {2, 2}));
  conv.scope = "conv2";
  net = point("conv2", layers::conv2d(net_scope, net, 64, {5, 5}, conv));
  net = point("pool2", layers::max_pool2d(net, {2, 2}));
  net = layers::flatten(net);
  point("Flatten", net);
  layers::FullyConnectedOptions fc;
  fc.weights_initializer = layers::truncated_normal_initializer(0.0, 0.1);
  fc.weights_l2 = options.weight_decay;
  fc.scope = "fc3";
  net = point("fc3", layers::fully_connected(net_scope, net, 1024, fc));
  if (options.num_classes <= 0) {
    out.net = net;
    return out;
  }
  layers::DropoutOptions dropout;
  dropout.keep_prob = options.dropout_keep_prob;
  dropout.scope = "dropout3";
  net = point("dropout3", layers::dropout(net_scope, net, dropout));
  fc.scope = "fc4";
  fc.activation_fn = ActivationFn::none();
  out.net = point("Logits", layers::fully_connected(net_scope, net, options.num_classes, fc));
  return out;
}

// ---------------------------------------------------------------------------------------------

ResnetBlock resnet_v1_block(std::string scope, int64_t base_depth, int64_t num_units,
                            int64_t stride) {
  ResnetBlock block;
  block.scope = std::move(scope);
  for (int64_t i = 0; i < num_units; ++i) {
    block.units.push_back({base_depth * 4, base_depth, i + 1 == num_units ? stride : 1});
  }
  return block;
}

std::vector<ResnetBlock> resnet_v1_blocks(int64_t depth) {
  std::array<int64_t, 4> units{};
  switch (depth) {
    case 50:
      units = {3, 4, 6, 3};
      break;
    case 101:
      units = {3, 4, 23, 3};
      break;
    case 152:
      units = {3, 8, 36, 3};
      break;
    case 200:
      units = {3, 24, 36, 3};
      break;
    default:
      throw InvalidArgument("resnet_v1: depth " + std::to_string(depth) +
                            " is not one of slim's (50, 101, 152, 200)");
  }
  return {resnet_v1_block("block1", 64, units[0], 2), resnet_v1_block("block2", 128, units[1], 2),
          resnet_v1_block("block3", 256, units[2], 2), resnet_v1_block("block4", 512, units[3], 1)};
}

std::vector<ResnetBlock> resnet_cifar_blocks(int64_t depth) {
  if (depth < 8 || (depth - 2) % 6 != 0) {
    throw InvalidArgument("resnet_cifar: depth " + std::to_string(depth) +
                          " is not 6n + 2 (20, 32, 44, 56, 110)");
  }
  const int64_t n = (depth - 2) / 6;
  std::vector<ResnetBlock> blocks;
  const std::array<int64_t, 3> depths{16, 32, 64};
  for (std::size_t b = 0; b < depths.size(); ++b) {
    ResnetBlock block;
    block.scope = "block" + std::to_string(b + 1);
    block.kind = ResnetUnitKind::kBasic;
    for (int64_t i = 0; i < n; ++i) {
      const bool last = i + 1 == n;
      block.units.push_back({depths[b], 0, last && b + 1 < depths.size() ? 2 : 1});
    }
    blocks.push_back(std::move(block));
  }
  return blocks;
}

Tensor conv2d_same(VariableScope& scope, const Tensor& inputs, int64_t num_outputs,
                   int64_t kernel_size, int64_t stride, int64_t rate, Conv2DOptions options) {
  options.rate = {rate, rate};
  if (stride == 1) {
    options.stride = {1, 1};
    options.padding = Padding2D::same();
    return layers::conv2d(scope, inputs, num_outputs, {kernel_size, kernel_size}, options);
  }
  // The explicit padding given to the convolution itself: the same result as padding the
  // input and running VALID, without the copy (and oneDNN keeps its direct kernels).
  const int64_t effective = kernel_size + (kernel_size - 1) * (rate - 1);
  const int64_t begin = (effective - 1) / 2;
  const int64_t end = effective - 1 - begin;
  options.stride = {stride, stride};
  options.padding = Padding2D::explicit_pads(begin, end, begin, end);
  return layers::conv2d(scope, inputs, num_outputs, {kernel_size, kernel_size}, options);
}

NetOutput resnet_v1(VariableScope& root, const Tensor& images,
                    const std::vector<ResnetBlock>& blocks, const ResnetV1Options& options) {
  checked_images(options.scope, images);
  VariableScope sc = root.child(options.scope);
  const Conv2DOptions conv = resnet_conv_options(options);
  NetOutput out;
  Tensor net = images;
  std::optional<int64_t> output_stride = options.output_stride;
  if (options.root != ResnetRoot::kNone) {
    Conv2DOptions c = conv;
    c.scope = "conv1";
    if (options.root == ResnetRoot::kImagenet) {
      if (output_stride) {
        if (*output_stride % 4 != 0) {
          throw InvalidArgument(options.scope + ": output_stride " +
                                std::to_string(*output_stride) + " is not a multiple of 4");
        }
        *output_stride /= 4;
      }
      net = conv2d_same(sc, net, 64, 7, 2, 1, c);
      out.end_points[sc.full_name("conv1")] = net;
      net = ops::max_pool2d(net, {3, 3}, {2, 2}, Padding2D::same());
      out.end_points[sc.full_name("pool1")] = net;
    } else {
      net = layers::conv2d(sc, net, 16, {3, 3}, c);
      out.end_points[sc.full_name("conv1")] = net;
    }
  }
  // resnet_utils.stack_blocks_dense: past output_stride, units run at stride 1 with their
  // stride folded into the atrous rate of the later units.
  int64_t current_stride = 1;
  int64_t rate = 1;
  for (const ResnetBlock& block : blocks) {
    VariableScope block_scope = sc.child(block.scope);
    int64_t block_stride = 1;
    for (std::size_t i = 0; i < block.units.size(); ++i) {
      ResnetUnit unit = block.units[i];
      if (options.store_non_strided_activations && i + 1 == block.units.size()) {
        // The last unit's stride moves to the end of the block, after its end point.
        block_stride = unit.stride;
        unit.stride = 1;
      }
      if (output_stride && current_stride > *output_stride) {
        throw InvalidArgument(options.scope + ": output_stride " +
                              std::to_string(*options.output_stride) + " cannot be reached");
      }
      VariableScope unit_scope = block_scope.child("unit_" + std::to_string(i + 1));
      int64_t stride = unit.stride;
      int64_t unit_rate = 1;
      if (output_stride && current_stride == *output_stride) {
        stride = 1;
        unit_rate = rate;
        rate *= unit.stride;
      } else {
        current_stride *= unit.stride;
      }
      net = block.kind == ResnetUnitKind::kBottleneck
                ? bottleneck_v1(unit_scope, net, unit, stride, unit_rate, conv)
                : basic_v1(unit_scope, net, unit, stride, unit_rate, conv);
      out.end_points[unit_scope.full_name(
          block.kind == ResnetUnitKind::kBottleneck ? "bottleneck_v1" : "basic_v1")] = net;
    }
    out.end_points[block_scope.name()] = net;
    if (output_stride && current_stride == *output_stride) {
      rate *= block_stride;
    } else if (block_stride > 1) {
      // resnet_utils.subsample: a 1x1 max pool at the stride.
      net = ops::max_pool2d(net, {1, 1}, {block_stride, block_stride}, Padding2D::valid());
      current_stride *= block_stride;
    }
  }
  if (output_stride && current_stride != *output_stride) {
    throw InvalidArgument(options.scope + ": output_stride " +
                          std::to_string(*options.output_stride) + " cannot be reached");
  }
  if (options.global_pool) {
    net = global_average_pool(net);
    out.end_points["global_pool"] = net;
  }
  if (options.num_classes > 0) {
    Conv2DOptions logits = conv;
    logits.normalizer.reset();
    logits.activation_fn = ActivationFn::none();
    logits.scope = "logits";
    net = layers::conv2d(sc, net, options.num_classes, {1, 1}, logits);
    if (options.spatial_squeeze) net = spatial_squeeze(options.scope, net);
    out.end_points[sc.full_name("logits")] = net;
  }
  out.net = net;
  return out;
}

// ---------------------------------------------------------------------------------------------

NetOutput mobilenet_v1_base(VariableScope& root, const Tensor& images,
                            const MobilenetV1Options& options) {
  checked_images(options.scope, images);
  if (!(options.depth_multiplier > 0.0)) {
    throw InvalidArgument(options.scope + ": depth_multiplier is " +
                          std::to_string(options.depth_multiplier) + "; expected > 0");
  }
  if (options.output_stride && *options.output_stride != 8 && *options.output_stride != 16 &&
      *options.output_stride != 32) {
    throw InvalidArgument(options.scope + ": output_stride " +
                          std::to_string(*options.output_stride) + " is not 8, 16 or 32");
  }
  std::vector<std::string> known;
  for (std::size_t i = 0; i < kMobilenetV1ConvDefs.size(); ++i) {
    const std::string base = "Conv2d_" + std::to_string(i);
    if (kMobilenetV1ConvDefs[i].depthwise_separable) {
      known.push_back(base + "_depthwise");
      known.push_back(base + "_pointwise");
    } else {
      known.push_back(base);
    }
  }
  if (std::find(known.begin(), known.end(), options.final_endpoint) == known.end()) {
    throw InvalidArgument(options.scope + ": unknown final_endpoint '" + options.final_endpoint +
                          "'; expected Conv2d_0 .. Conv2d_13_pointwise");
  }
  auto depth = [&](int64_t d) {
    return std::max(static_cast<int64_t>(static_cast<double>(d) * options.depth_multiplier),
                    options.min_depth);
  };
  const Padding2D padding = options.use_explicit_padding ? Padding2D::valid() : Padding2D::same();

  VariableScope sc = root.child(options.scope);
  Conv2DOptions conv;
  conv.weights_initializer = options.weights_initializer.value_or(
      layers::truncated_normal_initializer(0.0, options.stddev));
  conv.weights_l2 = options.weight_decay;
  conv.activation_fn = options.activation_fn.value_or(ActivationFn::relu6());
  conv.normalizer = mobilenet_batch_norm(options);
  conv.padding = padding;
  layers::SeparableConv2DOptions separable;
  separable.weights_initializer = conv.weights_initializer;
  separable.weights_l2 = options.regularize_depthwise ? options.weight_decay : 0.0;
  separable.activation_fn = conv.activation_fn;
  separable.normalizer = conv.normalizer;
  separable.padding = padding;

  NetOutput out;
  Tensor net = images;
  int64_t current_stride = 1;
  int64_t rate = 1;
  for (std::size_t i = 0; i < kMobilenetV1ConvDefs.size(); ++i) {
    MobilenetConvDef def = kMobilenetV1ConvDefs[i];
    const auto changed = options.depths.find(static_cast<int64_t>(i));
    if (changed != options.depths.end()) def.depth = changed->second;
    const std::string base = "Conv2d_" + std::to_string(i);
    int64_t layer_stride = def.stride;
    int64_t layer_rate = 1;
    if (options.output_stride && current_stride == *options.output_stride) {
      layer_stride = 1;
      layer_rate = rate;
      rate *= def.stride;
    } else {
      current_stride *= def.stride;
    }
    if (!def.depthwise_separable) {
      // The original strides this layer by its definition even past output_stride.
      if (options.use_explicit_padding) net = fixed_padding(net, 3, 1);
      Conv2DOptions c = conv;
      c.stride = {def.stride, def.stride};
      c.scope = base;
      net = layers::conv2d(sc, net, depth(def.depth), {3, 3}, c);
      out.end_points[base] = net;
      if (base == options.final_endpoint) break;
      continue;
    }
    if (options.use_explicit_padding) net = fixed_padding(net, 3, layer_rate);
    layers::SeparableConv2DOptions d = separable;
    d.stride = {layer_stride, layer_stride};
    d.rate = {layer_rate, layer_rate};
    d.scope = base + "_depthwise";
    net = layers::separable_conv2d(sc, net, std::nullopt, {3, 3}, d);
    out.end_points[d.scope] = net;
    if (d.scope == options.final_endpoint) break;
    Conv2DOptions p = conv;
    p.padding = Padding2D::same();
    p.scope = base + "_pointwise";
    net = layers::conv2d(sc, net, depth(def.depth), {1, 1}, p);
    out.end_points[p.scope] = net;
    if (p.scope == options.final_endpoint) break;
  }
  out.net = net;
  return out;
}

NetOutput mobilenet_v1(VariableScope& root, const Tensor& images,
                       const MobilenetV1Options& options) {
  MobilenetV1Options base_options = options;
  base_options.final_endpoint = "Conv2d_13_pointwise";
  NetOutput out = mobilenet_v1_base(root, images, base_options);
  VariableScope logits_scope = root.child(options.scope).child("Logits");
  Tensor net = out.net;
  if (options.global_pool) {
    net = global_average_pool(net);
    out.end_points["global_pool"] = net;
  } else {
    // _reduced_kernel_size_for_small_input: a 7x7 average, smaller for small inputs; slim's
    // avg_pool2d keeps its default stride 2.
    const std::pair<int64_t, int64_t> kernel{std::min<int64_t>(net.shape()[1], 7),
                                             std::min<int64_t>(net.shape()[2], 7)};
    net = ops::avg_pool2d(net, kernel, {2, 2}, Padding2D::valid());
    out.end_points["AvgPool_1a"] = net;
  }
  if (options.num_classes <= 0) {
    out.net = net;
    return out;
  }
  net = mobilenet_logits(logits_scope, net, options.num_classes, options.dropout_keep_prob,
                         "Dropout_1b", options.stddev, options.weight_decay);
  if (options.spatial_squeeze) net = spatial_squeeze(options.scope, net);
  out.end_points["Logits"] = net;
  out.net = net;
  return out;
}

}  // namespace trainyard::nets
