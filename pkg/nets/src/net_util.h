// What the nets of nets.h share: the checks and small ops slim's nets repeat (the input's rank,
// spatial_squeeze, global average pooling, _fixed_padding).
#ifndef TRAINYARD_PKG_NETS_SRC_NET_UTIL_H_
#define TRAINYARD_PKG_NETS_SRC_NET_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/pkg/nets/nets.h"
#include "trainyard/tensor.h"

namespace trainyard::nets::internal {

// `images` when it is NHWC; InvalidArgument naming the net otherwise.
const Tensor& checked_images(const std::string& net, const Tensor& images);

// [B, 1, 1, C] -> [B, C], as tf.squeeze(net, [1, 2]); InvalidArgument naming the net when the
// map is larger than 1 x 1.
Tensor spatial_squeeze(const std::string& net, const Tensor& x);

// The mean over height and width, keeping them as 1 x 1.
Tensor global_average_pool(const Tensor& x);

// The MobileNets' classification head under `logits_scope` ("<net>/Logits"): dropout at
// keep_prob (scope `dropout_scope`), then the 1x1 Conv2d_1c_1x1 to num_classes with biases, no
// activation, a truncated normal of `stddev` and L2 of `weight_decay`.
Tensor mobilenet_logits(layers::VariableScope& logits_scope, const Tensor& pooled,
                        int64_t num_classes, double keep_prob, const std::string& dropout_scope,
                        double stddev, double weight_decay);

// The classification end of MobileNet v2 and v3 (mobilenet.py's mobilenet()): the global pool
// of `base` (end point "global_pool"), then, with num_classes > 0, mobilenet_logits under
// <net_scope>/Logits ("Dropout") squeezed to [B, num_classes] (end point "Logits"). `base` is the
// base net's output; its net becomes the pool or the logits.
NetOutput mobilenet_classifier(layers::VariableScope& root, NetOutput base,
                               const std::string& net_scope, int64_t num_classes, double keep_prob,
                               double stddev, double weight_decay);

// Explicit symmetric padding of an effective kernel (pad_total // 2 before), for a VALID
// convolution after it: mobilenet_v1._fixed_padding and mobilenet's.
Tensor fixed_padding(const Tensor& inputs, int64_t kernel, int64_t rate);

// slim's variance_scaling_initializer(): factor 2, fan in, truncated normal.
Initializer he_initializer();

// tf.concat of NHWC maps along their channels.
Tensor concat_channels(std::vector<Tensor> maps);

// The conv2d and separable_conv2d defaults of an Inception net under `arg_scope`, as the base's
// own arg_scope adds them (stride 1 and `padding`).
struct InceptionLayers {
  layers::Conv2DOptions conv;
  layers::SeparableConv2DOptions separable;
};
InceptionLayers inception_layers(const InceptionArgScope& arg_scope, Padding2D padding);

// depth(d) of the Inception nets: max(int(d * depth_multiplier), min_depth).
int64_t inception_depth(int64_t d, double depth_multiplier, int64_t min_depth);

// The Inception classifiers' check of depth_multiplier and the images; InvalidArgument naming
// the net.
void check_inception_inputs(const std::string& net, const Tensor& images, double depth_multiplier);

// _reduced_kernel_size_for_small_input: `kernel` a side, or the map's side when smaller.
std::pair<int64_t, int64_t> reduced_kernel_size(const Tensor& map, int64_t kernel);

// The Inception classifiers' end (inception_v2.py, inception_v3.py) under <net_scope>/Logits:
// the global pool (end point global_pool) or a VALID average pool AvgPool_1a of pool_kernel,
// reduced to the map, at slim.avg_pool2d's default stride 2; then, with num_classes > 0,
// Dropout_1b (end point PreLogits with `pre_logits`) and Conv2d_1c_1x1 with biases and neither
// activation nor batch norm (else `conv`'s options), spatially squeezed (end point Logits).
struct InceptionHead {
  int64_t pool_kernel = 7;
  int64_t num_classes = 0;
  bool global_pool = false;
  double dropout_keep_prob = 0.8;
  bool spatial_squeeze = true;
  bool pre_logits = false;
};
NetOutput inception_classifier(layers::VariableScope& net_scope, const std::string& net,
                               NetOutput out, const InceptionHead& head,
                               layers::Conv2DOptions conv);

}  // namespace trainyard::nets::internal

#endif  // TRAINYARD_PKG_NETS_SRC_NET_UTIL_H_
