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

// A convolution under `hyperparams` with its batch norm and activation, or with use_depthwise a
// separable one (depthwise then pointwise, slim.separable_conv2d with num_outputs).
Tensor conv_or_separable(layers::VariableScope& scope, const Tensor& x, int64_t outputs,
                         int64_t kernel, int64_t stride, Padding2D padding,
                         const ConvHyperparams& hyperparams, bool use_depthwise,
                         const std::string& name) {
  layers::Conv2DOptions c = conv_options(hyperparams, true);
  c.stride = {stride, stride};
  c.padding = padding;
  c.scope = name;
  if (!use_depthwise) return layers::conv2d(scope, x, outputs, {kernel, kernel}, c);
  layers::SeparableConv2DOptions d;
  d.stride = c.stride;
  d.padding = padding;
  d.activation_fn = c.activation_fn;
  d.normalizer = c.normalizer;
  d.weights_initializer = c.weights_initializer;
  d.weights_l2 = c.weights_l2;
  d.scope = name;
  return layers::separable_conv2d(scope, x, outputs, {kernel, kernel}, d);
}

}  // namespace

Tensor MobilenetSsdExtractor::preprocess(const Tensor& resized_images) const {
  return scale_to_unit_range(resized_images);
}

std::vector<Tensor> MobilenetSsdExtractor::extract_features(layers::VariableScope& extractor,
                                                            const Tensor& images) {
  check_min_image_dim(type_, min_image_dimension(), images);
  if (exact_ && (images.shape()[1] != min_dimension_ || images.shape()[2] != min_dimension_)) {
    const std::string side = std::to_string(min_dimension_);
    throw InvalidArgument("SSDMetaArch: images are " + images.description() + "; " + type_ +
                          " takes only " + side + " x " + side);
  }
  return maps_(extractor, pad_to_multiple(images, c_.pad_to_multiple), c_);
}

Tensor scale_to_unit_range(const Tensor& resized_images) {
  return ops::add(ops::mul(ops::cast(resized_images, DType::kF32), 2.0 / 255.0), -1.0);
}

Tensor nearest_neighbor_upsampling(const Tensor& x) {
  const Shape& s = x.shape();
  const Tensor columns = ops::reshape(x, Shape{s[0], s[1], s[2], 1, s[3]});
  const Tensor wide = ops::reshape(ops::concat(std::vector<Tensor>{columns, columns}, 3),
                                   Shape{s[0], s[1], 1, 2 * s[2], s[3]});
  return ops::reshape(ops::concat(std::vector<Tensor>{wide, wide}, 2),
                      Shape{s[0], 2 * s[1], 2 * s[2], s[3]});
}

FpnLevels fpn_levels(const DetectionOptionReader& r, int64_t lowest) {
  FpnLevels f;
  f.min_level = r.in_range("feature_extractor.fpn.min_level", lowest, 5);
  f.max_level = r.in_range("feature_extractor.fpn.max_level", f.min_level, 10);
  f.additional_layer_depth = r.in_range("feature_extractor.fpn.additional_layer_depth", 1, 4096);
  return f;
}

void refuse_fpn(const DetectionOptionReader& r, const std::string& type) {
  if (r.options().get_bool("feature_extractor.fpn")) {
    r.refuse("feature_extractor.fpn", "set", type + " builds no feature pyramid");
  }
}

std::vector<Tensor> fpn_top_down_feature_maps(layers::VariableScope& scope,
                                              const std::vector<Tensor>& maps, int64_t depth,
                                              const ConvHyperparams& hyperparams,
                                              bool use_depthwise, bool use_explicit_padding) {
  if (maps.empty()) throw InvalidArgument("fpn_top_down_feature_maps: no feature maps");
  const Padding2D padding = use_explicit_padding ? Padding2D::valid() : Padding2D::same();
  layers::Conv2DOptions projection = conv_options(hyperparams, true);
  projection.activation_fn = layers::ActivationFn::none();
  projection.normalizer.reset();
  projection.padding = padding;
  const std::size_t levels = maps.size();
  std::vector<Tensor> out(levels);
  projection.scope = "projection_" + std::to_string(levels);
  Tensor top_down = layers::conv2d(scope, maps.back(), depth, {1, 1}, projection);
  out[levels - 1] = top_down;
  for (std::size_t level = levels - 1; level-- > 0;) {
    top_down = nearest_neighbor_upsampling(top_down);
    projection.scope = "projection_" + std::to_string(level + 1);
    const Tensor residual = layers::conv2d(scope, maps[level], depth, {1, 1}, projection);
    if (use_explicit_padding) {
      top_down = ops::slice(
          top_down, {0, 0, 0, 0},
          {top_down.shape()[0], residual.shape()[1], residual.shape()[2], top_down.shape()[3]});
    }
    top_down = ops::add(top_down, residual);
    Tensor smoothed = use_explicit_padding ? fixed_padding(top_down, 3) : top_down;
    out[level] = conv_or_separable(scope, smoothed, depth, 3, 1, padding, hyperparams,
                                   use_depthwise, "smoothing_" + std::to_string(level + 1));
  }
  return out;
}

std::vector<Tensor> fpn_bottom_up_feature_maps(layers::VariableScope& scope, const Tensor& last,
                                               int64_t count, int64_t first_index, int64_t depth,
                                               const ConvHyperparams& hyperparams,
                                               bool use_depthwise, bool use_explicit_padding) {
  const Padding2D padding = use_explicit_padding ? Padding2D::valid() : Padding2D::same();
  std::vector<Tensor> out;
  Tensor net = last;
  for (int64_t k = 0; k < count; ++k) {
    if (use_explicit_padding) net = fixed_padding(net, 3);
    net = conv_or_separable(scope, net, depth, 3, 2, padding, hyperparams, use_depthwise,
                            "bottom_up_Conv2d_" + std::to_string(first_index + k));
    out.push_back(net);
  }
  return out;
}

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
  b.initializer = h.initializer;
  b.activation = h.activation;
  return b;
}

nets::MobilenetV1Options mobilenet_v1_base_options(const detection::SsdFeatureExtractorParams& c) {
  nets::MobilenetV1Options base;
  base.num_classes = 0;
  base.depth_multiplier = c.depth_multiplier;
  base.min_depth = c.min_depth;
  base.final_endpoint = "Conv2d_13_pointwise";
  base.use_explicit_padding = c.use_explicit_padding;
  base.scope = "MobilenetV1";
  base.regularize_depthwise = true;
  const BaseNetHyperparams h = base_net_hyperparams(c);
  base.batch_norm_is_training = h.batch_norm_is_training;
  if (h.overridden) {
    base.weight_decay = h.weight_decay;
    base.batch_norm_decay = h.batch_norm_decay.value_or(base.batch_norm_decay);
    base.batch_norm_epsilon = h.batch_norm_epsilon.value_or(base.batch_norm_epsilon);
    base.weights_initializer = h.initializer;
    base.activation_fn = h.activation;
  }
  return base;
}

nets::MobilenetV2Options mobilenet_v2_base_options(const detection::SsdFeatureExtractorParams& c) {
  nets::MobilenetV2Options base;
  set_mobilenet_base_hyperparams(base, c);
  base.final_endpoint = "layer_19";
  base.scope = "MobilenetV2";
  return base;
}

nets::InceptionArgScope inception_base_arg_scope(const detection::SsdFeatureExtractorParams& c,
                                                 const DetectionOptionReader& options,
                                                 const std::string& type) {
  if (!c.override_base_feature_extractor_hyperparams) {
    options.refuse("feature_extractor.override_base_feature_extractor_hyperparams", "false",
                   type +
                       " takes conv_hyperparams for its base net too (the base has no arg scope "
                       "of its own in the API): set it to true");
  }
  nets::InceptionArgScope scope;
  scope.replacement = conv_options(c.conv_hyperparams, true);
  return scope;
}

std::vector<Tensor> mobilenet_fpn_feature_maps(layers::VariableScope& fpn_scope,
                                               const std::map<std::string, Tensor>& end_points,
                                               const std::array<const char*, 4>& blocks,
                                               const FpnLevels& fpn,
                                               const detection::SsdFeatureExtractorParams& c,
                                               int64_t first_bottom_up) {
  const int64_t depth = std::max(
      static_cast<int64_t>(static_cast<double>(fpn.additional_layer_depth) * c.depth_multiplier),
      c.min_depth);
  const int64_t base_max_level = std::min<int64_t>(fpn.max_level, 5);
  std::vector<Tensor> maps;
  for (int64_t level = fpn.min_level; level <= base_max_level; ++level) {
    maps.push_back(end_points.at(blocks[static_cast<std::size_t>(level - 2)]));
  }
  maps = fpn_top_down_feature_maps(fpn_scope, maps, depth, c.conv_hyperparams, c.use_depthwise,
                                   c.use_explicit_padding);
  const std::vector<Tensor> coarser = fpn_bottom_up_feature_maps(
      fpn_scope, maps.back(), fpn.max_level - base_max_level, first_bottom_up, depth,
      c.conv_hyperparams, c.use_depthwise, c.use_explicit_padding);
  maps.insert(maps.end(), coarser.begin(), coarser.end());
  return maps;
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
    const int64_t k = layer.conv_kernel_size;
    const std::string kernel = std::to_string(k);
    const std::string name = base_from_layer + "_2_Conv2d_" + std::to_string(index) + "_" + kernel +
                             "x" + kernel + "_s2_" +
                             std::to_string(depth(static_cast<double>(layer.layer_depth)));
    layers::Conv2DOptions three = conv_options(hyperparams, true);
    three.stride = {2, 2};
    if (layout.use_explicit_padding) {
      intermediate = fixed_padding(intermediate, k);
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
      Tensor dw = layers::separable_conv2d(scope, intermediate, std::nullopt, {k, k}, d);
      layers::Conv2DOptions p = conv_options(hyperparams, true);
      p.scope = name;
      maps.push_back(
          layers::conv2d(scope, dw, depth(static_cast<double>(layer.layer_depth)), {1, 1}, p));
    } else {
      three.scope = name;
      maps.push_back(layers::conv2d(scope, intermediate,
                                    depth(static_cast<double>(layer.layer_depth)), {k, k}, three));
    }
    ++index;
  }
  return maps;
}

std::vector<Tensor> extractor_feature_maps(layers::VariableScope& extractor,
                                           const std::string& net_scope,
                                           std::vector<FeatureMapLayer> layers,
                                           const detection::SsdFeatureExtractorParams& c,
                                           const std::map<std::string, Tensor>& end_points) {
  FeatureMapLayout layout;
  layout.layers = std::move(layers);
  layout.use_explicit_padding = c.use_explicit_padding;
  layout.use_depthwise = c.use_depthwise;
  layers::VariableScope scope = extractor.child(net_scope);
  return multi_resolution_feature_maps(scope, layout, c.depth_multiplier, c.min_depth,
                                       c.conv_hyperparams, end_points);
}

}  // namespace trainyard::models
