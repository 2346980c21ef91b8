#include "expanded_conv.h"

#include <optional>

#include "net_util.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/quantize.h"

namespace trainyard::nets::internal {

Tensor expanded_conv(layers::VariableScope& block, const Tensor& input, const ExpandedConv& spec,
                     const layers::Conv2DOptions& conv,
                     const layers::SeparableConv2DOptions& depthwise, const std::string& layer,
                     NetOutput& out) {
  Tensor net = input;
  if (spec.inner_size > input.shape()[3]) {
    layers::Conv2DOptions expand = conv;
    expand.stride = {1, 1};
    expand.scope = "expand";
    net = layers::conv2d(block, net, spec.inner_size, {1, 1}, expand);
    out.end_points[layer + "/expansion_output"] = net;
  }
  if (spec.use_explicit_padding) net = fixed_padding(net, spec.kernel, 1);
  layers::SeparableConv2DOptions dw = depthwise;
  dw.stride = {spec.stride, spec.stride};
  dw.scope = "depthwise";
  net = layers::separable_conv2d(block, net, std::nullopt, {spec.kernel, spec.kernel}, dw);
  out.end_points[layer + "/depthwise_output"] = net;
  if (spec.expansion_transform) net = spec.expansion_transform(block, net);
  layers::Conv2DOptions project = conv;
  project.stride = {1, 1};
  project.activation_fn = layers::ActivationFn::none();
  project.scope = "project";
  net = layers::conv2d(block, net, spec.num_outputs, {1, 1}, project);
  if (spec.stride == 1 && net.shape()[3] == input.shape()[3] &&
      (!spec.residual_depth || *spec.residual_depth == input.shape()[3])) {
    // contrib.quantize's post-activation bypass (project's identity activation, then the add).
    net = layers::quantize_bypass(block, ops::add(net, input));
  }
  out.end_points[layer + "/output"] = net;
  return net;
}

}  // namespace trainyard::nets::internal
