// What the nets of nets.h share: the checks and small ops slim's nets repeat (the input's rank,
// spatial_squeeze, global average pooling, _fixed_padding).
#ifndef TRAINYARD_PKG_NETS_SRC_NET_UTIL_H_
#define TRAINYARD_PKG_NETS_SRC_NET_UTIL_H_

#include <cstdint>
#include <string>

#include "trainyard/pkg/layers/variable_scope.h"
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

// Explicit symmetric padding of an effective kernel (pad_total // 2 before), for a VALID
// convolution after it: mobilenet_v1._fixed_padding and mobilenet's.
Tensor fixed_padding(const Tensor& inputs, int64_t kernel, int64_t rate);

}  // namespace trainyard::nets::internal

#endif  // TRAINYARD_PKG_NETS_SRC_NET_UTIL_H_
