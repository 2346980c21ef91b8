#include "net_util.h"

#include <algorithm>

#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"

namespace trainyard::nets::internal {

const Tensor& checked_images(const std::string& net, const Tensor& images) {
  if (images.shape().rank() != 4) {
    throw InvalidArgument(net + ": the images are " + images.description() +
                          "; expected NHWC [batch, height, width, channels]");
  }
  return images;
}

// [B, 1, 1, C] -> [B, C], as tf.squeeze(net, [1, 2]).
Tensor spatial_squeeze(const std::string& net, const Tensor& x) {
  const Shape& s = x.shape();
  if (s[1] != 1 || s[2] != 1) {
    throw InvalidArgument(net + ": the logits are " + x.description() +
                          "; spatial_squeeze needs a 1x1 map (use global pooling, or larger "
                          "images)");
  }
  return ops::reshape(x, Shape{s[0], s[3]});
}

Tensor global_average_pool(const Tensor& x) { return ops::reduce_mean(x, {1, 2}, true); }

Tensor mobilenet_logits(layers::VariableScope& logits_scope, const Tensor& pooled,
                        int64_t num_classes, double keep_prob, const std::string& dropout_scope,
                        double stddev, double weight_decay) {
  layers::DropoutOptions dropout;
  dropout.keep_prob = keep_prob;
  dropout.scope = dropout_scope;
  const Tensor net = layers::dropout(logits_scope, pooled, dropout);
  layers::Conv2DOptions logits;
  logits.weights_initializer = layers::truncated_normal_initializer(0.0, stddev);
  logits.weights_l2 = weight_decay;
  logits.activation_fn = layers::ActivationFn::none();
  logits.scope = "Conv2d_1c_1x1";
  return layers::conv2d(logits_scope, net, num_classes, {1, 1}, logits);
}

// Explicit symmetric padding of an effective kernel (pad_total // 2 before), for a VALID
// convolution after it: mobilenet_v1._fixed_padding.
Tensor fixed_padding(const Tensor& inputs, int64_t kernel, int64_t rate) {
  const int64_t effective = kernel + (kernel - 1) * (rate - 1);
  const int64_t total = effective - 1;
  const int64_t begin = total / 2;
  return ops::pad(inputs, {{0, 0}, {begin, total - begin}, {begin, total - begin}, {0, 0}});
}

Initializer he_initializer() {
  Initializer init;
  init.kind = Initializer::Kind::kVarianceScaling;
  init.scale = 2.0;
  init.mode = Initializer::FanMode::kFanIn;
  init.distribution = Initializer::Distribution::kTruncatedNormal;
  return init;
}

Tensor concat_channels(std::vector<Tensor> maps) { return ops::concat(maps, 3); }

InceptionLayers inception_layers(const InceptionArgScope& a, Padding2D padding) {
  InceptionLayers l;
  if (a.replacement) {
    l.conv = *a.replacement;
    l.separable.activation_fn = l.conv.activation_fn;
    l.separable.normalizer = l.conv.normalizer;
    l.separable.weights_initializer = l.conv.weights_initializer;
    l.separable.weights_l2 = l.conv.weights_l2;
    l.separable.biases_initializer = l.conv.biases_initializer;
  } else {
    l.conv.weights_initializer = he_initializer();
    l.conv.weights_l2 = a.weight_decay;
    l.conv.activation_fn = layers::ActivationFn::relu();
    if (a.use_batch_norm) {
      layers::BatchNormOptions bn;
      bn.decay = a.batch_norm_decay;
      bn.epsilon = a.batch_norm_epsilon;
      bn.center = true;
      bn.scale = false;
      bn.is_training = a.batch_norm_is_training;
      l.conv.normalizer = bn;
    }
    // The arg scope leaves separable_conv2d at slim's defaults (relu, biases, no regularizer).
  }
  l.conv.stride = {1, 1};
  l.conv.rate = {1, 1};
  l.conv.padding = padding;
  l.separable.padding = padding;
  return l;
}

int64_t inception_depth(int64_t d, double depth_multiplier, int64_t min_depth) {
  return std::max(static_cast<int64_t>(static_cast<double>(d) * depth_multiplier), min_depth);
}

void check_inception_inputs(const std::string& net, const Tensor& images, double depth_multiplier) {
  checked_images(net, images);
  if (!(depth_multiplier > 0.0)) {
    throw InvalidArgument(net + ": depth_multiplier is " + std::to_string(depth_multiplier) +
                          "; expected > 0");
  }
}

std::pair<int64_t, int64_t> reduced_kernel_size(const Tensor& map, int64_t kernel) {
  return {std::min<int64_t>(map.shape()[1], kernel), std::min<int64_t>(map.shape()[2], kernel)};
}

NetOutput mobilenet_classifier(layers::VariableScope& root, NetOutput base,
                               const std::string& net_scope, int64_t num_classes, double keep_prob,
                               double stddev, double weight_decay) {
  layers::VariableScope logits_scope = root.child(net_scope).child("Logits");
  Tensor net = global_average_pool(base.net);
  base.end_points["global_pool"] = net;
  if (num_classes > 0) {
    net = spatial_squeeze(net_scope, mobilenet_logits(logits_scope, net, num_classes, keep_prob,
                                                      "Dropout", stddev, weight_decay));
    base.end_points["Logits"] = net;
  }
  base.net = net;
  return base;
}

NetOutput inception_classifier(layers::VariableScope& net_scope, const std::string& net,
                               NetOutput out, const InceptionHead& head,
                               layers::Conv2DOptions conv) {
  layers::VariableScope logits_scope = net_scope.child("Logits");
  Tensor x = out.net;
  if (head.global_pool) {
    x = global_average_pool(x);
    out.end_points["global_pool"] = x;
  } else {
    x = ops::avg_pool2d(x, reduced_kernel_size(x, head.pool_kernel), {2, 2}, Padding2D::valid());
    out.end_points["AvgPool_1a"] = x;
  }
  out.net = x;
  if (head.num_classes <= 0) return out;
  layers::DropoutOptions dropout;
  dropout.keep_prob = head.dropout_keep_prob;
  dropout.scope = "Dropout_1b";
  x = layers::dropout(logits_scope, x, dropout);
  if (head.pre_logits) out.end_points["PreLogits"] = x;
  conv.activation_fn = layers::ActivationFn::none();
  conv.normalizer.reset();
  conv.biases_initializer = layers::zeros_initializer();
  conv.scope = "Conv2d_1c_1x1";
  x = layers::conv2d(logits_scope, x, head.num_classes, {1, 1}, conv);
  if (head.spatial_squeeze) x = spatial_squeeze(net, x);
  out.end_points["Logits"] = x;
  out.net = x;
  return out;
}

}  // namespace trainyard::nets::internal
