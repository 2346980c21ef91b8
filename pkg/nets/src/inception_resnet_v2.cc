// Inception-ResNet v2 as TF-Slim builds it (nets/inception_resnet_v2.py), with slim's scope
// names:
//   InceptionResnetV2/Conv2d_1a_3x3 .. Conv2d_4a_3x3, Mixed_5b/Branch_<k>/...
//   InceptionResnetV2/Repeat/block35_<1..10>/{Branch_<k>/..., Conv2d_1x1/{weights, biases}}
//   InceptionResnetV2/Mixed_6a/..., Repeat_1/block17_<1..20>/...        (PreAuxLogits)
//   InceptionResnetV2/Mixed_7a/..., Repeat_2/block8_<1..9>/..., Block8/..., Conv2d_7b_1x1
//   InceptionResnetV2/AuxLogits/{Conv2d_1b_1x1, Conv2d_2a_5x5, Logits}, Logits/Logits
// inception_resnet_v2_arg_scope: conv2d with relu and batch norm without gamma, L2 on the
// weights and biases of conv2d and fully_connected. Each block adds scale * a 1x1 convolution
// (biases, neither batch norm nor activation) of its branches to its input, then the activation.
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
using layers::Conv2DOptions;
using layers::VariableScope;

class IrV2Builder {
 public:
  explicit IrV2Builder(const InceptionResnetV2Options& o) : o_(o) {
    layers::BatchNormOptions bn;
    bn.decay = o.batch_norm_decay;
    bn.epsilon = o.batch_norm_epsilon;
    bn.center = true;
    bn.scale = false;
    bn.is_training = o.batch_norm_is_training;
    conv_.normalizer = bn;
    conv_.activation_fn = layers::ActivationFn::relu();
    conv_.weights_l2 = o.weight_decay;
    conv_.biases_l2 = o.weight_decay;
    conv_.padding = Padding2D::same();
  }

  // slim.conv2d under the arg scope: stride, padding (SAME unless `valid`) and rate.
  Tensor conv(VariableScope& scope, const Tensor& x, int64_t depth,
              std::pair<int64_t, int64_t> kernel, const std::string& name, int64_t stride = 1,
              bool valid = false, int64_t rate = 1) const {
    Conv2DOptions c = conv_;
    c.stride = {stride, stride};
    c.rate = {rate, rate};
    if (valid) c.padding = Padding2D::valid();
    c.scope = name;
    return layers::conv2d(scope, x, depth, kernel, c);
  }
  Tensor conv(VariableScope& scope, const Tensor& x, int64_t depth, int64_t kernel,
              const std::string& name, int64_t stride = 1, bool valid = false,
              int64_t rate = 1) const {
    return conv(scope, x, depth, {kernel, kernel}, name, stride, valid, rate);
  }

  // The residual end of block35, block17 and block8: net + scale * Conv2d_1x1(mixed), then the
  // activation (relu, or none for the last block8).
  Tensor residual(VariableScope& block, const Tensor& net, const Tensor& mixed, double scale,
                  bool activation) const {
    Conv2DOptions up = conv_;
    up.normalizer.reset();
    up.activation_fn = layers::ActivationFn::none();
    up.scope = "Conv2d_1x1";
    const Tensor u = layers::conv2d(block, mixed, net.shape()[3], {1, 1}, up);
    const Tensor sum = ops::add(net, ops::mul(u, scale));
    return activation ? ops::relu(sum) : sum;
  }

  Tensor block35(VariableScope& block, const Tensor& net, double scale) const {
    VariableScope b0 = block.child("Branch_0");
    VariableScope b1 = block.child("Branch_1");
    VariableScope b2 = block.child("Branch_2");
    const Tensor t0 = conv(b0, net, 32, 1, "Conv2d_1x1");
    Tensor t1 = conv(b1, net, 32, 1, "Conv2d_0a_1x1");
    t1 = conv(b1, t1, 32, 3, "Conv2d_0b_3x3");
    Tensor t2 = conv(b2, net, 32, 1, "Conv2d_0a_1x1");
    t2 = conv(b2, t2, 48, 3, "Conv2d_0b_3x3");
    t2 = conv(b2, t2, 64, 3, "Conv2d_0c_3x3");
    return residual(block, net, concat_channels({t0, t1, t2}), scale, true);
  }

  Tensor block17(VariableScope& block, const Tensor& net, double scale, int64_t rate) const {
    VariableScope b0 = block.child("Branch_0");
    VariableScope b1 = block.child("Branch_1");
    const Tensor t0 = conv(b0, net, 192, 1, "Conv2d_1x1", 1, false, rate);
    Tensor t1 = conv(b1, net, 128, 1, "Conv2d_0a_1x1", 1, false, rate);
    t1 = conv(b1, t1, 160, {1, 7}, "Conv2d_0b_1x7", 1, false, rate);
    t1 = conv(b1, t1, 192, {7, 1}, "Conv2d_0c_7x1", 1, false, rate);
    return residual(block, net, concat_channels({t0, t1}), scale, true);
  }

  Tensor block8(VariableScope& block, const Tensor& net, double scale, bool activation) const {
    VariableScope b0 = block.child("Branch_0");
    VariableScope b1 = block.child("Branch_1");
    const Tensor t0 = conv(b0, net, 192, 1, "Conv2d_1x1");
    Tensor t1 = conv(b1, net, 192, 1, "Conv2d_0a_1x1");
    t1 = conv(b1, t1, 224, {1, 3}, "Conv2d_0b_1x3");
    t1 = conv(b1, t1, 256, {3, 1}, "Conv2d_0c_3x1");
    return residual(block, net, concat_channels({t0, t1}), scale, activation);
  }

  const Conv2DOptions& conv_options() const { return conv_; }

 private:
  const InceptionResnetV2Options& o_;
  Conv2DOptions conv_;
};

Tensor max_pool_3x3(const Tensor& x, int64_t stride, bool valid) {
  return ops::max_pool2d(x, {3, 3}, {stride, stride},
                         valid ? Padding2D::valid() : Padding2D::same());
}

// slim.repeat(net, n, block, ...) under `repeat_scope`: block<kind>_1 .. _n.
template <class Block>
Tensor repeat(VariableScope& net_scope, const std::string& repeat_scope, const std::string& kind,
              int n, Tensor net, Block&& block) {
  VariableScope r = net_scope.child(repeat_scope);
  for (int i = 1; i <= n; ++i) {
    VariableScope b = r.child(kind + "_" + std::to_string(i));
    net = block(b, net);
  }
  return net;
}

constexpr const char* kEndpoints[] = {"Conv2d_1a_3x3",  "Conv2d_2a_3x3", "Conv2d_2b_3x3",
                                      "MaxPool_3a_3x3", "Conv2d_3b_1x1", "Conv2d_4a_3x3",
                                      "MaxPool_5a_3x3", "Mixed_5b",      "Mixed_6a",
                                      "PreAuxLogits",   "Mixed_7a",      "Conv2d_7b_1x1"};

// Mixed_7a .. Conv2d_7b_1x1 under `sc`, the Repeat scope of the block8s named `repeat_scope`.
NetOutput top(const IrV2Builder& b, VariableScope& sc, const std::string& repeat_scope,
              const Tensor& input, const std::string& final_endpoint, NetOutput out) {
  VariableScope m = sc.child("Mixed_7a");
  VariableScope b0 = m.child("Branch_0");
  VariableScope b1 = m.child("Branch_1");
  VariableScope b2 = m.child("Branch_2");
  Tensor t0 = b.conv(b0, input, 256, 1, "Conv2d_0a_1x1");
  t0 = b.conv(b0, t0, 384, 3, "Conv2d_1a_3x3", 2, true);
  Tensor t1 = b.conv(b1, input, 256, 1, "Conv2d_0a_1x1");
  t1 = b.conv(b1, t1, 288, 3, "Conv2d_1a_3x3", 2, true);
  Tensor t2 = b.conv(b2, input, 256, 1, "Conv2d_0a_1x1");
  t2 = b.conv(b2, t2, 288, 3, "Conv2d_0b_3x3");
  t2 = b.conv(b2, t2, 320, 3, "Conv2d_1a_3x3", 2, true);
  Tensor net = concat_channels({t0, t1, t2, max_pool_3x3(input, 2, true)});
  out.end_points["Mixed_7a"] = net;
  out.net = net;
  if (final_endpoint == "Mixed_7a") return out;
  net = repeat(sc, repeat_scope, "block8", 9, net,
               [&](VariableScope& s, const Tensor& x) { return b.block8(s, x, 0.20, true); });
  VariableScope last = sc.child("Block8");
  net = b.block8(last, net, 1.0, false);
  net = b.conv(sc, net, 1536, 1, "Conv2d_7b_1x1");
  out.end_points["Conv2d_7b_1x1"] = net;
  out.net = net;
  return out;
}

}  // namespace

NetOutput inception_resnet_v2_base(VariableScope& root, const Tensor& images,
                                   const InceptionResnetV2Options& o) {
  internal::checked_images(o.scope, images);
  bool known = false;
  for (const char* e : kEndpoints) known = known || o.final_endpoint == e;
  if (!known) {
    throw InvalidArgument(o.scope + ": unknown final_endpoint '" + o.final_endpoint +
                          "'; expected Conv2d_1a_3x3 .. Conv2d_7b_1x1");
  }
  if (o.output_stride != 8 && o.output_stride != 16) {
    throw InvalidArgument(o.scope + ": output_stride is " + std::to_string(o.output_stride) +
                          "; expected 8 or 16");
  }
  const bool atrous = o.output_stride == 8;
  // "output_stride==8 is only supported up to the PreAuxlogits end_point for now."
  if (atrous && (o.final_endpoint == "Mixed_7a" || o.final_endpoint == "Conv2d_7b_1x1")) {
    throw InvalidArgument(o.scope + ": output_stride 8 goes up to PreAuxLogits only; " +
                          "final_endpoint is '" + o.final_endpoint + "'");
  }
  const bool valid = !o.align_feature_maps;
  const IrV2Builder b(o);
  VariableScope sc = root.child(o.scope);
  NetOutput out;
  auto add = [&](const std::string& name, const Tensor& net) {
    out.end_points[name] = net;
    out.net = net;
    return name == o.final_endpoint;
  };
  Tensor net = b.conv(sc, images, 32, 3, "Conv2d_1a_3x3", 2, valid);
  if (add("Conv2d_1a_3x3", net)) return out;
  net = b.conv(sc, net, 32, 3, "Conv2d_2a_3x3", 1, valid);
  if (add("Conv2d_2a_3x3", net)) return out;
  net = b.conv(sc, net, 64, 3, "Conv2d_2b_3x3");
  if (add("Conv2d_2b_3x3", net)) return out;
  net = max_pool_3x3(net, 2, valid);
  if (add("MaxPool_3a_3x3", net)) return out;
  net = b.conv(sc, net, 80, 1, "Conv2d_3b_1x1", 1, valid);
  if (add("Conv2d_3b_1x1", net)) return out;
  net = b.conv(sc, net, 192, 3, "Conv2d_4a_3x3", 1, valid);
  if (add("Conv2d_4a_3x3", net)) return out;
  net = max_pool_3x3(net, 2, valid);
  if (add("MaxPool_5a_3x3", net)) return out;
  {
    VariableScope m = sc.child("Mixed_5b");
    VariableScope b0 = m.child("Branch_0");
    VariableScope b1 = m.child("Branch_1");
    VariableScope b2 = m.child("Branch_2");
    VariableScope b3 = m.child("Branch_3");
    const Tensor t0 = b.conv(b0, net, 96, 1, "Conv2d_1x1");
    Tensor t1 = b.conv(b1, net, 48, 1, "Conv2d_0a_1x1");
    t1 = b.conv(b1, t1, 64, 5, "Conv2d_0b_5x5");
    Tensor t2 = b.conv(b2, net, 64, 1, "Conv2d_0a_1x1");
    t2 = b.conv(b2, t2, 96, 3, "Conv2d_0b_3x3");
    t2 = b.conv(b2, t2, 96, 3, "Conv2d_0c_3x3");
    Tensor t3 = ops::avg_pool2d(net, {3, 3}, {1, 1}, Padding2D::same());
    t3 = b.conv(b3, t3, 64, 1, "Conv2d_0b_1x1");
    net = concat_channels({t0, t1, t2, t3});
  }
  if (add("Mixed_5b", net)) return out;
  net = repeat(sc, "Repeat", "block35", 10, net,
               [&](VariableScope& s, const Tensor& x) { return b.block35(s, x, 0.17); });
  {
    const int64_t stride = atrous ? 1 : 2;
    VariableScope m = sc.child("Mixed_6a");
    VariableScope b0 = m.child("Branch_0");
    VariableScope b1 = m.child("Branch_1");
    const Tensor t0 = b.conv(b0, net, 384, 3, "Conv2d_1a_3x3", stride, valid);
    Tensor t1 = b.conv(b1, net, 256, 1, "Conv2d_0a_1x1");
    t1 = b.conv(b1, t1, 256, 3, "Conv2d_0b_3x3");
    t1 = b.conv(b1, t1, 384, 3, "Conv2d_1a_3x3", stride, valid);
    net = concat_channels({t0, t1, max_pool_3x3(net, stride, valid)});
  }
  if (add("Mixed_6a", net)) return out;
  const int64_t rate = atrous ? 2 : 1;
  net = repeat(sc, "Repeat_1", "block17", 20, net,
               [&](VariableScope& s, const Tensor& x) { return b.block17(s, x, 0.10, rate); });
  if (add("PreAuxLogits", net)) return out;
  return top(b, sc, "Repeat_2", net, o.final_endpoint, std::move(out));
}

NetOutput inception_resnet_v2_top(VariableScope& root, const Tensor& net,
                                  const std::string& repeat_scope,
                                  const InceptionResnetV2Options& o) {
  internal::checked_images(o.scope, net);
  const IrV2Builder b(o);
  VariableScope sc = root.child(o.scope);
  return top(b, sc, repeat_scope, net, "Conv2d_7b_1x1", NetOutput{});
}

NetOutput inception_resnet_v2(VariableScope& root, const Tensor& images,
                              const InceptionResnetV2Options& o) {
  InceptionResnetV2Options base_options = o;
  base_options.final_endpoint = "Conv2d_7b_1x1";
  NetOutput out = inception_resnet_v2_base(root, images, base_options);
  // Logits/AvgPool_1a_8x8 over the whole map (num_classes 0 stops there, as slim's).
  Tensor pooled = ops::avg_pool2d(out.net, {out.net.shape()[1], out.net.shape()[2]}, {1, 1},
                                  Padding2D::valid());
  out.end_points["global_pool"] = pooled;
  if (o.num_classes <= 0) {
    out.net = pooled;
    return out;
  }
  const IrV2Builder b(o);
  VariableScope sc = root.child(o.scope);
  layers::FullyConnectedOptions fc;
  fc.activation_fn = layers::ActivationFn::none();
  fc.weights_l2 = o.weight_decay;
  fc.biases_l2 = o.weight_decay;
  fc.scope = "Logits";
  if (o.create_aux_logits) {
    VariableScope aux_scope = sc.child("AuxLogits");
    Tensor aux =
        ops::avg_pool2d(out.end_points.at("PreAuxLogits"), {5, 5}, {3, 3}, Padding2D::valid());
    aux = b.conv(aux_scope, aux, 128, 1, "Conv2d_1b_1x1");
    aux = b.conv(aux_scope, aux, 768, {aux.shape()[1], aux.shape()[2]}, "Conv2d_2a_5x5", 1, true);
    aux = layers::fully_connected(aux_scope, layers::flatten(aux), o.num_classes, fc);
    out.end_points["AuxLogits"] = aux;
  }
  VariableScope logits_scope = sc.child("Logits");
  Tensor net = layers::flatten(pooled);
  layers::DropoutOptions d;
  d.keep_prob = o.dropout_keep_prob;
  d.scope = "Dropout";
  net = layers::dropout(logits_scope, net, d);
  out.end_points["PreLogitsFlatten"] = net;
  net = layers::fully_connected(logits_scope, net, o.num_classes, fc);
  out.end_points["Logits"] = net;
  out.net = net;
  return out;
}

}  // namespace trainyard::nets
