// conv_blocks.expanded_conv, the inverted residual block of MobileNet v2 and v3: an optional 1x1
// expansion, a depthwise convolution, an optional expansion_transform (v3's squeeze_excite), a
// linear 1x1 projection and the residual sum where the stride is 1 and the depth unchanged.
#ifndef TRAINYARD_PKG_NETS_SRC_EXPANDED_CONV_H_
#define TRAINYARD_PKG_NETS_SRC_EXPANDED_CONV_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/pkg/nets/nets.h"
#include "trainyard/tensor.h"

namespace trainyard::nets::internal {

struct ExpandedConv {
  int64_t num_outputs = 0;
  int64_t inner_size = 0;  // the expansion's depth; no expansion unless above the input's
  int64_t kernel = 3;      // the depthwise kernel
  int64_t stride = 1;
  // The residual sum also needs the input's depth to equal this (the Keras application's rule,
  // MobilenetV2Options::keras_residuals); unset: the output's depth only.
  std::optional<int64_t> residual_depth;
  bool use_explicit_padding = false;  // fixed padding before the depthwise (VALID) convolution
  // Applied to the depthwise output under the block's scope; empty for none.
  std::function<Tensor(layers::VariableScope& block, const Tensor& x)> expansion_transform;
};

// The block under `block` (expand, depthwise, project). `conv` is the expansion's options (its
// activation is the block's inner activation; the projection takes it with no activation) and
// `depthwise` the depthwise convolution's. Adds the end points <layer>/expansion_output (when
// expanded), <layer>/depthwise_output and <layer>/output to `out`.
Tensor expanded_conv(layers::VariableScope& block, const Tensor& input, const ExpandedConv& spec,
                     const layers::Conv2DOptions& conv,
                     const layers::SeparableConv2DOptions& depthwise, const std::string& layer,
                     NetOutput& out);

}  // namespace trainyard::nets::internal

#endif  // TRAINYARD_PKG_NETS_SRC_EXPANDED_CONV_H_
