#include "net_util.h"

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

}  // namespace trainyard::nets::internal
