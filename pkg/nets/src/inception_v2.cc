// Inception v2 as TF-Slim builds it (nets/inception_v2.py), with slim's scope names:
//   InceptionV2/Conv2d_1a_7x7/{depthwise_weights, pointwise_weights, biases}   (separable)
//   InceptionV2/Conv2d_2b_1x1/{weights, BatchNorm/...}, Conv2d_2c_3x3/...
//   InceptionV2/Mixed_<m>/Branch_<k>/Conv2d_<...>/...                          Mixed_3b .. 5c
//   InceptionV2/Logits/Conv2d_1c_1x1/{weights, biases}
// Every convolution and pooling of the base is SAME at stride 1 unless it says otherwise.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "net_util.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::nets {
namespace {

using internal::concat_channels;
using internal::inception_depth;
using internal::InceptionLayers;
using layers::Conv2DOptions;
using layers::VariableScope;

// An inception module of four branches: Branch_0 a 1x1; Branch_1 a 1x1 then a 3x3; Branch_2 a
// 1x1 then two 3x3; Branch_3 a 3x3 pool (average, or max for Mixed_5c) then a 1x1. Depths before
// the multiplier.
struct V2Module {
  const char* name;
  int64_t b0;
  int64_t b1_1x1, b1_3x3;
  int64_t b2_1x1, b2_3x3;
  int64_t b3;
  bool max_pool;
};

// A reduction module: Branch_0 a 1x1 then a 3x3 stride 2; Branch_1 a 1x1, a 3x3 and a 3x3 stride
// 2; Branch_2 a 3x3 stride 2 max pool.
struct V2Reduction {
  const char* name;
  int64_t b0_1x1, b0_3x3;
  int64_t b1_1x1, b1_3x3;
};

// One entry of the base after MaxPool_3a_3x3, in order.
struct V2Block {
  std::optional<V2Module> module;
  std::optional<V2Reduction> reduction;
};

const std::array<V2Block, 10> kV2Blocks = {{
    {V2Module{"Mixed_3b", 64, 64, 64, 64, 96, 32, false}, std::nullopt},
    {V2Module{"Mixed_3c", 64, 64, 96, 64, 96, 64, false}, std::nullopt},
    {std::nullopt, V2Reduction{"Mixed_4a", 128, 160, 64, 96}},
    {V2Module{"Mixed_4b", 224, 64, 96, 96, 128, 128, false}, std::nullopt},
    {V2Module{"Mixed_4c", 192, 96, 128, 96, 128, 128, false}, std::nullopt},
    {V2Module{"Mixed_4d", 160, 128, 160, 128, 160, 96, false}, std::nullopt},
    {V2Module{"Mixed_4e", 96, 128, 192, 160, 192, 96, false}, std::nullopt},
    {std::nullopt, V2Reduction{"Mixed_5a", 128, 192, 192, 256}},
    {V2Module{"Mixed_5b", 352, 192, 320, 160, 224, 128, false}, std::nullopt},
    {V2Module{"Mixed_5c", 352, 192, 320, 192, 224, 128, true}, std::nullopt},
}};

constexpr std::array<const char*, 5> kV2Stem = {"Conv2d_1a_7x7", "MaxPool_2a_3x3", "Conv2d_2b_1x1",
                                                "Conv2d_2c_3x3", "MaxPool_3a_3x3"};

// The base's layers with their depth function and defaults.
class V2Builder {
 public:
  explicit V2Builder(const InceptionV2Options& o)
      : o_(o), l_(internal::inception_layers(o.arg_scope, Padding2D::same())) {}

  int64_t depth(int64_t d) const { return inception_depth(d, o_.depth_multiplier, o_.min_depth); }

  // slim.conv2d of depth(d) with the arg scope's options; `stddev` > 0 names trunc_normal(stddev)
  // as the net does.
  Tensor conv(VariableScope& scope, const Tensor& x, int64_t d, int64_t kernel,
              const std::string& name, int64_t stride = 1, double stddev = 0.0) const {
    Conv2DOptions c = l_.conv;
    c.stride = {stride, stride};
    if (stddev > 0.0) c.weights_initializer = layers::truncated_normal_initializer(0.0, stddev);
    c.scope = name;
    return layers::conv2d(scope, x, depth(d), {kernel, kernel}, c);
  }

  Tensor conv2d_1a_7x7(VariableScope& scope, const Tensor& images) const {
    if (!o_.use_separable_conv) return conv(scope, images, 64, 7, "Conv2d_1a_7x7", 2, 1.0);
    layers::SeparableConv2DOptions s = l_.separable;
    s.stride = {2, 2};
    // depthwise_multiplier = min(int(depth(64) / 3), 8): the depthwise stage stays no wider
    // than the pointwise one.
    s.depth_multiplier = std::min<int64_t>(depth(64) / 3, 8);
    s.weights_initializer = layers::truncated_normal_initializer(0.0, 1.0);
    s.scope = "Conv2d_1a_7x7";
    return layers::separable_conv2d(scope, images, depth(64), {7, 7}, s);
  }

  Tensor module(VariableScope& net_scope, const Tensor& x, const V2Module& m) const {
    VariableScope sc = net_scope.child(m.name);
    VariableScope b0 = sc.child("Branch_0");
    VariableScope b1 = sc.child("Branch_1");
    VariableScope b2 = sc.child("Branch_2");
    VariableScope b3 = sc.child("Branch_3");
    const Tensor branch_0 = conv(b0, x, m.b0, 1, "Conv2d_0a_1x1");
    Tensor branch_1 = conv(b1, x, m.b1_1x1, 1, "Conv2d_0a_1x1", 1, 0.09);
    branch_1 = conv(b1, branch_1, m.b1_3x3, 3, "Conv2d_0b_3x3");
    Tensor branch_2 = conv(b2, x, m.b2_1x1, 1, "Conv2d_0a_1x1", 1, 0.09);
    branch_2 = conv(b2, branch_2, m.b2_3x3, 3, "Conv2d_0b_3x3");
    branch_2 = conv(b2, branch_2, m.b2_3x3, 3, "Conv2d_0c_3x3");
    Tensor branch_3 = m.max_pool ? ops::max_pool2d(x, {3, 3}, {1, 1}, Padding2D::same())
                                 : ops::avg_pool2d(x, {3, 3}, {1, 1}, Padding2D::same());
    branch_3 = conv(b3, branch_3, m.b3, 1, "Conv2d_0b_1x1", 1, 0.1);
    return concat_channels({branch_0, branch_1, branch_2, branch_3});
  }

  Tensor reduction(VariableScope& net_scope, const Tensor& x, const V2Reduction& r) const {
    VariableScope sc = net_scope.child(r.name);
    VariableScope b0 = sc.child("Branch_0");
    VariableScope b1 = sc.child("Branch_1");
    Tensor branch_0 = conv(b0, x, r.b0_1x1, 1, "Conv2d_0a_1x1", 1, 0.09);
    branch_0 = conv(b0, branch_0, r.b0_3x3, 3, "Conv2d_1a_3x3", 2);
    Tensor branch_1 = conv(b1, x, r.b1_1x1, 1, "Conv2d_0a_1x1", 1, 0.09);
    branch_1 = conv(b1, branch_1, r.b1_3x3, 3, "Conv2d_0b_3x3");
    branch_1 = conv(b1, branch_1, r.b1_3x3, 3, "Conv2d_1a_3x3", 2);
    const Tensor branch_2 = ops::max_pool2d(x, {3, 3}, {2, 2}, Padding2D::same());
    return concat_channels({branch_0, branch_1, branch_2});
  }

 private:
  const InceptionV2Options& o_;
  InceptionLayers l_;
};

}  // namespace

NetOutput inception_v2_base(VariableScope& root, const Tensor& images,
                            const InceptionV2Options& options) {
  internal::check_inception_inputs(options.scope, images, options.depth_multiplier);
  bool known = false;
  for (const char* name : kV2Stem) known = known || options.final_endpoint == name;
  for (const V2Block& b : kV2Blocks) {
    known = known || options.final_endpoint == (b.module ? b.module->name : b.reduction->name);
  }
  if (!known) {
    throw InvalidArgument(options.scope + ": unknown final_endpoint '" + options.final_endpoint +
                          "'; expected Conv2d_1a_7x7 .. Mixed_5c");
  }
  const V2Builder v2(options);
  VariableScope sc = root.child(options.scope);
  NetOutput out;
  auto add = [&](const std::string& name, const Tensor& net) {
    out.end_points[name] = net;
    out.net = net;
    return name == options.final_endpoint;
  };
  Tensor net = v2.conv2d_1a_7x7(sc, images);
  if (add("Conv2d_1a_7x7", net)) return out;
  net = ops::max_pool2d(net, {3, 3}, {2, 2}, Padding2D::same());
  if (add("MaxPool_2a_3x3", net)) return out;
  net = v2.conv(sc, net, 64, 1, "Conv2d_2b_1x1", 1, 0.1);
  if (add("Conv2d_2b_1x1", net)) return out;
  net = v2.conv(sc, net, 192, 3, "Conv2d_2c_3x3");
  if (add("Conv2d_2c_3x3", net)) return out;
  net = ops::max_pool2d(net, {3, 3}, {2, 2}, Padding2D::same());
  if (add("MaxPool_3a_3x3", net)) return out;
  for (const V2Block& b : kV2Blocks) {
    net = b.module ? v2.module(sc, net, *b.module) : v2.reduction(sc, net, *b.reduction);
    if (add(b.module ? b.module->name : b.reduction->name, net)) return out;
  }
  return out;
}

NetOutput inception_v2_modules(VariableScope& root, const Tensor& net,
                               const std::string& first_endpoint,
                               const InceptionV2Options& options) {
  auto index_of = [](const std::string& name) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < kV2Blocks.size(); ++i) {
      const V2Block& b = kV2Blocks[i];
      if (name == (b.module ? b.module->name : b.reduction->name)) return i;
    }
    return std::nullopt;
  };
  const std::optional<std::size_t> first = index_of(first_endpoint);
  const std::optional<std::size_t> last = index_of(options.final_endpoint);
  if (!first || !last || *last < *first) {
    throw InvalidArgument(options.scope + ": the modules from '" + first_endpoint + "' to '" +
                          options.final_endpoint +
                          "'; expected two of Mixed_3b .. Mixed_5c in order");
  }
  if (!(options.depth_multiplier > 0.0)) {
    throw InvalidArgument(options.scope + ": depth_multiplier is " +
                          std::to_string(options.depth_multiplier) + "; expected > 0");
  }
  const V2Builder v2(options);
  VariableScope sc = root.child(options.scope);
  NetOutput out;
  out.net = net;
  for (std::size_t i = *first; i <= *last; ++i) {
    const V2Block& b = kV2Blocks[i];
    out.net =
        b.module ? v2.module(sc, out.net, *b.module) : v2.reduction(sc, out.net, *b.reduction);
    out.end_points[b.module ? b.module->name : b.reduction->name] = out.net;
  }
  return out;
}

NetOutput inception_v2(VariableScope& root, const Tensor& images,
                       const InceptionV2Options& options) {
  InceptionV2Options base_options = options;
  base_options.final_endpoint = "Mixed_5c";
  NetOutput out = inception_v2_base(root, images, base_options);
  internal::InceptionHead head;
  head.pool_kernel = 7;
  head.num_classes = options.num_classes;
  head.global_pool = options.global_pool;
  head.dropout_keep_prob = options.dropout_keep_prob;
  head.spatial_squeeze = options.spatial_squeeze;
  VariableScope net_scope = root.child(options.scope);
  return internal::inception_classifier(
      net_scope, options.scope, std::move(out), head,
      internal::inception_layers(options.arg_scope, Padding2D::same()).conv);
}

}  // namespace trainyard::nets
