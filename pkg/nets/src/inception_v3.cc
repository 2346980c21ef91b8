// Inception v3 as TF-Slim builds it (nets/inception_v3.py), with slim's scope names:
//   InceptionV3/Conv2d_1a_3x3/{weights, BatchNorm/...} .. Conv2d_4a_3x3     (VALID)
//   InceptionV3/Mixed_<m>/Branch_<k>/Conv2d_<...>/...                      Mixed_5b .. 7c
//   InceptionV3/AuxLogits/{Conv2d_1b_1x1, Conv2d_2a_<k>x<k>, Conv2d_2b_1x1}/...
//   InceptionV3/Logits/Conv2d_1c_1x1/{weights, biases}
// slim's own names are kept where they do not say what the layer is (Mixed_5c's
// Branch_1/Conv_1_0c_5x5, Mixed_6a's 3x3 Conv2d_1a_1x1), so that checkpoints restore by name.
#include <algorithm>
#include <cstdint>
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

const std::vector<std::string> kV3Endpoints = {
    "Conv2d_1a_3x3", "Conv2d_2a_3x3",  "Conv2d_2b_3x3", "MaxPool_3a_3x3", "Conv2d_3b_1x1",
    "Conv2d_4a_3x3", "MaxPool_5a_3x3", "Mixed_5b",      "Mixed_5c",       "Mixed_5d",
    "Mixed_6a",      "Mixed_6b",       "Mixed_6c",      "Mixed_6d",       "Mixed_6e",
    "Mixed_7a",      "Mixed_7b",       "Mixed_7c"};

class V3Builder {
 public:
  explicit V3Builder(const InceptionV3Options& o)
      : o_(o), l_(internal::inception_layers(o.arg_scope, Padding2D::same())) {}

  int64_t depth(int64_t d) const { return inception_depth(d, o_.depth_multiplier, o_.min_depth); }

  Tensor conv(VariableScope& scope, const Tensor& x, int64_t d, std::pair<int64_t, int64_t> kernel,
              const std::string& name, int64_t stride = 1, bool valid = false) const {
    Conv2DOptions c = l_.conv;
    c.stride = {stride, stride};
    c.padding = valid ? Padding2D::valid() : Padding2D::same();
    c.scope = name;
    return layers::conv2d(scope, x, depth(d), kernel, c);
  }
  Tensor conv(VariableScope& scope, const Tensor& x, int64_t d, int64_t kernel,
              const std::string& name, int64_t stride = 1, bool valid = false) const {
    return conv(scope, x, d, {kernel, kernel}, name, stride, valid);
  }

  static Tensor avg_pool(const Tensor& x) {
    return ops::avg_pool2d(x, {3, 3}, {1, 1}, Padding2D::same());
  }
  static Tensor max_pool_valid(const Tensor& x) {
    return ops::max_pool2d(x, {3, 3}, {2, 2}, Padding2D::valid());
  }

  // Mixed_5b, 5c, 5d: 1x1; 1x1 then 5x5; 1x1 then two 3x3; average pool then 1x1 of `pool_depth`.
  Tensor mixed_5(VariableScope& net_scope, const Tensor& x, const std::string& name,
                 int64_t pool_depth) const {
    VariableScope sc = net_scope.child(name);
    VariableScope b0 = sc.child("Branch_0");
    VariableScope b1 = sc.child("Branch_1");
    VariableScope b2 = sc.child("Branch_2");
    VariableScope b3 = sc.child("Branch_3");
    const bool c = name == "Mixed_5c";
    const Tensor branch_0 = conv(b0, x, 64, 1, "Conv2d_0a_1x1");
    Tensor branch_1 = conv(b1, x, 48, 1, c ? "Conv2d_0b_1x1" : "Conv2d_0a_1x1");
    branch_1 = conv(b1, branch_1, 64, 5, c ? "Conv_1_0c_5x5" : "Conv2d_0b_5x5");
    Tensor branch_2 = conv(b2, x, 64, 1, "Conv2d_0a_1x1");
    branch_2 = conv(b2, branch_2, 96, 3, "Conv2d_0b_3x3");
    branch_2 = conv(b2, branch_2, 96, 3, "Conv2d_0c_3x3");
    const Tensor branch_3 = conv(b3, avg_pool(x), pool_depth, 1, "Conv2d_0b_1x1");
    return concat_channels({branch_0, branch_1, branch_2, branch_3});
  }

  Tensor mixed_6a(VariableScope& net_scope, const Tensor& x) const {
    VariableScope sc = net_scope.child("Mixed_6a");
    VariableScope b0 = sc.child("Branch_0");
    VariableScope b1 = sc.child("Branch_1");
    const Tensor branch_0 = conv(b0, x, 384, 3, "Conv2d_1a_1x1", 2, true);
    Tensor branch_1 = conv(b1, x, 64, 1, "Conv2d_0a_1x1");
    branch_1 = conv(b1, branch_1, 96, 3, "Conv2d_0b_3x3");
    branch_1 = conv(b1, branch_1, 96, 3, "Conv2d_1a_1x1", 2, true);
    return concat_channels({branch_0, branch_1, max_pool_valid(x)});
  }

  // Mixed_6b .. 6e: factorized 7x7 convolutions `inner` deep.
  Tensor mixed_6(VariableScope& net_scope, const Tensor& x, const std::string& name,
                 int64_t inner) const {
    VariableScope sc = net_scope.child(name);
    VariableScope b0 = sc.child("Branch_0");
    VariableScope b1 = sc.child("Branch_1");
    VariableScope b2 = sc.child("Branch_2");
    VariableScope b3 = sc.child("Branch_3");
    const Tensor branch_0 = conv(b0, x, 192, 1, "Conv2d_0a_1x1");
    Tensor branch_1 = conv(b1, x, inner, 1, "Conv2d_0a_1x1");
    branch_1 = conv(b1, branch_1, inner, {1, 7}, "Conv2d_0b_1x7");
    branch_1 = conv(b1, branch_1, 192, {7, 1}, "Conv2d_0c_7x1");
    Tensor branch_2 = conv(b2, x, inner, 1, "Conv2d_0a_1x1");
    branch_2 = conv(b2, branch_2, inner, {7, 1}, "Conv2d_0b_7x1");
    branch_2 = conv(b2, branch_2, inner, {1, 7}, "Conv2d_0c_1x7");
    branch_2 = conv(b2, branch_2, inner, {7, 1}, "Conv2d_0d_7x1");
    branch_2 = conv(b2, branch_2, 192, {1, 7}, "Conv2d_0e_1x7");
    const Tensor branch_3 = conv(b3, avg_pool(x), 192, 1, "Conv2d_0b_1x1");
    return concat_channels({branch_0, branch_1, branch_2, branch_3});
  }

  Tensor mixed_7a(VariableScope& net_scope, const Tensor& x) const {
    VariableScope sc = net_scope.child("Mixed_7a");
    VariableScope b0 = sc.child("Branch_0");
    VariableScope b1 = sc.child("Branch_1");
    Tensor branch_0 = conv(b0, x, 192, 1, "Conv2d_0a_1x1");
    branch_0 = conv(b0, branch_0, 320, 3, "Conv2d_1a_3x3", 2, true);
    Tensor branch_1 = conv(b1, x, 192, 1, "Conv2d_0a_1x1");
    branch_1 = conv(b1, branch_1, 192, {1, 7}, "Conv2d_0b_1x7");
    branch_1 = conv(b1, branch_1, 192, {7, 1}, "Conv2d_0c_7x1");
    branch_1 = conv(b1, branch_1, 192, 3, "Conv2d_1a_3x3", 2, true);
    return concat_channels({branch_0, branch_1, max_pool_valid(x)});
  }

  // Mixed_7b, 7c: expanded filter banks (1x3 and 3x1 side by side).
  Tensor mixed_7(VariableScope& net_scope, const Tensor& x, const std::string& name) const {
    VariableScope sc = net_scope.child(name);
    VariableScope b0 = sc.child("Branch_0");
    VariableScope b1 = sc.child("Branch_1");
    VariableScope b2 = sc.child("Branch_2");
    VariableScope b3 = sc.child("Branch_3");
    const Tensor branch_0 = conv(b0, x, 320, 1, "Conv2d_0a_1x1");
    const Tensor b1_in = conv(b1, x, 384, 1, "Conv2d_0a_1x1");
    const Tensor branch_1 = concat_channels(
        {conv(b1, b1_in, 384, {1, 3}, "Conv2d_0b_1x3"),
         conv(b1, b1_in, 384, {3, 1}, name == "Mixed_7b" ? "Conv2d_0b_3x1" : "Conv2d_0c_3x1")});
    Tensor b2_in = conv(b2, x, 448, 1, "Conv2d_0a_1x1");
    b2_in = conv(b2, b2_in, 384, 3, "Conv2d_0b_3x3");
    const Tensor branch_2 = concat_channels({conv(b2, b2_in, 384, {1, 3}, "Conv2d_0c_1x3"),
                                             conv(b2, b2_in, 384, {3, 1}, "Conv2d_0d_3x1")});
    const Tensor branch_3 = conv(b3, avg_pool(x), 192, 1, "Conv2d_0b_1x1");
    return concat_channels({branch_0, branch_1, branch_2, branch_3});
  }

  const InceptionLayers& layers() const { return l_; }

 private:
  const InceptionV3Options& o_;
  InceptionLayers l_;
};

}  // namespace

NetOutput inception_v3_base(VariableScope& root, const Tensor& images,
                            const InceptionV3Options& options) {
  internal::check_inception_inputs(options.scope, images, options.depth_multiplier);
  if (std::find(kV3Endpoints.begin(), kV3Endpoints.end(), options.final_endpoint) ==
      kV3Endpoints.end()) {
    throw InvalidArgument(options.scope + ": unknown final_endpoint '" + options.final_endpoint +
                          "'; expected Conv2d_1a_3x3 .. Mixed_7c");
  }
  const V3Builder v3(options);
  VariableScope sc = root.child(options.scope);
  NetOutput out;
  auto add = [&](const std::string& name, const Tensor& net) {
    out.end_points[name] = net;
    out.net = net;
    return name == options.final_endpoint;
  };
  Tensor net = v3.conv(sc, images, 32, 3, "Conv2d_1a_3x3", 2, true);
  if (add("Conv2d_1a_3x3", net)) return out;
  net = v3.conv(sc, net, 32, 3, "Conv2d_2a_3x3", 1, true);
  if (add("Conv2d_2a_3x3", net)) return out;
  net = v3.conv(sc, net, 64, 3, "Conv2d_2b_3x3");
  if (add("Conv2d_2b_3x3", net)) return out;
  net = V3Builder::max_pool_valid(net);
  if (add("MaxPool_3a_3x3", net)) return out;
  net = v3.conv(sc, net, 80, 1, "Conv2d_3b_1x1", 1, true);
  if (add("Conv2d_3b_1x1", net)) return out;
  net = v3.conv(sc, net, 192, 3, "Conv2d_4a_3x3", 1, true);
  if (add("Conv2d_4a_3x3", net)) return out;
  net = V3Builder::max_pool_valid(net);
  if (add("MaxPool_5a_3x3", net)) return out;
  net = v3.mixed_5(sc, net, "Mixed_5b", 32);
  if (add("Mixed_5b", net)) return out;
  net = v3.mixed_5(sc, net, "Mixed_5c", 64);
  if (add("Mixed_5c", net)) return out;
  net = v3.mixed_5(sc, net, "Mixed_5d", 64);
  if (add("Mixed_5d", net)) return out;
  net = v3.mixed_6a(sc, net);
  if (add("Mixed_6a", net)) return out;
  const std::pair<const char*, int64_t> factorized[] = {
      {"Mixed_6b", 128}, {"Mixed_6c", 160}, {"Mixed_6d", 160}, {"Mixed_6e", 192}};
  for (const auto& [name, inner] : factorized) {
    net = v3.mixed_6(sc, net, name, inner);
    if (add(name, net)) return out;
  }
  net = v3.mixed_7a(sc, net);
  if (add("Mixed_7a", net)) return out;
  net = v3.mixed_7(sc, net, "Mixed_7b");
  if (add("Mixed_7b", net)) return out;
  net = v3.mixed_7(sc, net, "Mixed_7c");
  add("Mixed_7c", net);
  return out;
}

NetOutput inception_v3(VariableScope& root, const Tensor& images,
                       const InceptionV3Options& options) {
  InceptionV3Options base_options = options;
  base_options.final_endpoint = "Mixed_7c";
  NetOutput out = inception_v3_base(root, images, base_options);
  VariableScope net_scope = root.child(options.scope);
  const V3Builder v3(options);
  const Conv2DOptions& arg_conv = v3.layers().conv;
  if (options.create_aux_logits && options.num_classes > 0) {
    VariableScope aux = net_scope.child("AuxLogits");
    Tensor a = ops::avg_pool2d(out.end_points.at("Mixed_6e"), {5, 5}, {3, 3}, Padding2D::valid());
    a = v3.conv(aux, a, 128, 1, "Conv2d_1b_1x1");
    const std::pair<int64_t, int64_t> kernel = internal::reduced_kernel_size(a, 5);
    Conv2DOptions c = arg_conv;
    c.padding = Padding2D::valid();
    c.weights_initializer = layers::truncated_normal_initializer(0.0, 0.01);
    c.scope = "Conv2d_2a_" + std::to_string(kernel.first) + "x" + std::to_string(kernel.second);
    a = layers::conv2d(aux, a, v3.depth(768), kernel, c);
    Conv2DOptions head = arg_conv;
    head.activation_fn = layers::ActivationFn::none();
    head.normalizer.reset();
    head.biases_initializer = layers::zeros_initializer();
    head.weights_initializer = layers::truncated_normal_initializer(0.0, 0.001);
    head.scope = "Conv2d_2b_1x1";
    a = layers::conv2d(aux, a, options.num_classes, {1, 1}, head);
    if (options.spatial_squeeze) a = internal::spatial_squeeze(options.scope + "/AuxLogits", a);
    out.end_points["AuxLogits"] = a;
  }
  internal::InceptionHead head;
  head.pool_kernel = 8;
  head.num_classes = options.num_classes;
  head.global_pool = options.global_pool;
  head.dropout_keep_prob = options.dropout_keep_prob;
  head.spatial_squeeze = options.spatial_squeeze;
  head.pre_logits = true;
  return internal::inception_classifier(net_scope, options.scope, std::move(out), head, arg_conv);
}

}  // namespace trainyard::nets
