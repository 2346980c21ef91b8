#include "ssd_extractor_common.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"

namespace trainyard::models {
namespace {

// ops.fixed_padding: pads so that a VALID convolution of `kernel` gives SAME's output size.
Tensor fixed_padding(const Tensor& x, int64_t kernel) {
  const int64_t total = kernel - 1;
  const int64_t begin = total / 2;
  return ops::pad(x, {{0, 0}, {begin, total - begin}, {begin, total - begin}, {0, 0}});
}

}  // namespace

BaseNetHyperparams base_net_hyperparams(const detection::SsdFeatureExtractorParams& c) {
  BaseNetHyperparams b;
  if (c.freeze_batchnorm) b.batch_norm_is_training = false;
  if (!c.override_base_feature_extractor_hyperparams) return b;
  const ConvHyperparams& h = c.conv_hyperparams;
  b.overridden = true;
  b.batch_norm_is_training.reset();
  b.weight_decay = h.l2_weight;
  if (h.batch_norm) {
    b.batch_norm_is_training = h.batch_norm->is_training;
    b.batch_norm_decay = h.batch_norm->decay;
    b.batch_norm_epsilon = h.batch_norm->epsilon;
  }
  if (h.initializer.kind == Initializer::Kind::kTruncatedNormal) b.stddev = h.initializer.stddev;
  return b;
}

void check_min_image_dim(const std::string& extractor, int64_t min_dim, const Tensor& images) {
  if (images.shape()[1] < min_dim || images.shape()[2] < min_dim) {
    throw InvalidArgument("SSDMetaArch: images are " + images.description() + "; " + extractor +
                          " needs at least " + std::to_string(min_dim) + " x " +
                          std::to_string(min_dim) + " (check_min_image_dim)");
  }
}

Tensor pad_to_multiple(const Tensor& x, int64_t multiple) {
  if (multiple <= 1) return x;
  const int64_t h = x.shape()[1];
  const int64_t w = x.shape()[2];
  const int64_t ph = (h + multiple - 1) / multiple * multiple - h;
  const int64_t pw = (w + multiple - 1) / multiple * multiple - w;
  if (ph == 0 && pw == 0) return x;
  return ops::pad(x, {{0, 0}, {0, ph}, {0, pw}, {0, 0}});
}

std::vector<Tensor> multi_resolution_feature_maps(layers::VariableScope& scope,
                                                  const FeatureMapLayout& layout,
                                                  double depth_multiplier, int64_t min_depth,
                                                  const ConvHyperparams& hyperparams,
                                                  const std::map<std::string, Tensor>& end_points) {
  auto depth = [&](double d) {
    return std::max(static_cast<int64_t>(d * depth_multiplier), min_depth);
  };
  std::vector<Tensor> maps;
  std::string base_from_layer;
  int64_t index = 0;
  for (const FeatureMapLayer& layer : layout.layers) {
    if (layer.from_layer[0] != '\0') {
      const auto found = end_points.find(layer.from_layer);
      if (found == end_points.end()) {
        throw InvalidArgument(std::string("multi_resolution_feature_maps: the base net has no end "
                                          "point '") +
                              layer.from_layer + "'");
      }
      maps.push_back(found->second);
      base_from_layer = layer.from_layer;
      ++index;
      continue;
    }
    if (maps.empty()) {
      throw InvalidArgument("multi_resolution_feature_maps: a new layer needs a map before it");
    }
    layers::Conv2DOptions one = conv_options(hyperparams, true);
    const int64_t half = depth(static_cast<double>(layer.layer_depth) / 2.0);
    one.scope =
        base_from_layer + "_1_Conv2d_" + std::to_string(index) + "_1x1_" + std::to_string(half);
    Tensor intermediate = layers::conv2d(scope, maps.back(), half, {1, 1}, one);
    const std::string name = base_from_layer + "_2_Conv2d_" + std::to_string(index) + "_3x3_s2_" +
                             std::to_string(depth(static_cast<double>(layer.layer_depth)));
    layers::Conv2DOptions three = conv_options(hyperparams, true);
    three.stride = {2, 2};
    if (layout.use_explicit_padding) {
      intermediate = fixed_padding(intermediate, 3);
      three.padding = Padding2D::valid();
    }
    if (layout.use_depthwise) {
      layers::SeparableConv2DOptions d;
      d.stride = {2, 2};
      d.padding = three.padding;
      d.activation_fn = three.activation_fn;
      d.normalizer = three.normalizer;
      d.weights_initializer = three.weights_initializer;
      d.weights_l2 = three.weights_l2;
      d.scope = name + "_depthwise";
      Tensor dw = layers::separable_conv2d(scope, intermediate, std::nullopt, {3, 3}, d);
      layers::Conv2DOptions p = conv_options(hyperparams, true);
      p.scope = name;
      maps.push_back(
          layers::conv2d(scope, dw, depth(static_cast<double>(layer.layer_depth)), {1, 1}, p));
    } else {
      three.scope = name;
      maps.push_back(layers::conv2d(scope, intermediate,
                                    depth(static_cast<double>(layer.layer_depth)), {3, 3}, three));
    }
    ++index;
  }
  return maps;
}

}  // namespace trainyard::models
