// ssd_mobilenet_v1: the Object Detection API's SSDMobileNetV1FeatureExtractor
// (models/ssd_mobilenet_v1_feature_extractor.py): MobilenetV1 to Conv2d_13_pointwise, then
// feature_map_generators.multi_resolution_feature_maps with four new layers. Variables:
//   FeatureExtractor/MobilenetV1/Conv2d_0/weights ... Conv2d_13_pointwise/BatchNorm/beta
//   FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_256/weights (extra layers)
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detection_parts.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

// ssd_mobilenet_v1's feature_map_layout: two maps of the base net, then four new ones.
struct FeatureMapLayer {
  const char* from_layer;  // "" for a new layer
  int64_t layer_depth;     // -1 for a base layer
};
constexpr FeatureMapLayer kMobilenetV1Layout[] = {
    {"Conv2d_11_pointwise", -1},
    {"Conv2d_13_pointwise", -1},
    {"", 512},
    {"", 256},
    {"", 256},
    {"", 128},
};

// `x` zero-padded at the bottom and right to multiples of `multiple` (ops.pad_to_multiple).
Tensor pad_to_multiple(const Tensor& x, int64_t multiple) {
  if (multiple <= 1) return x;
  const int64_t h = x.shape()[1];
  const int64_t w = x.shape()[2];
  const int64_t ph = (h + multiple - 1) / multiple * multiple - h;
  const int64_t pw = (w + multiple - 1) / multiple * multiple - w;
  if (ph == 0 && pw == 0) return x;
  return ops::pad(x, {{0, 0}, {0, ph}, {0, pw}, {0, 0}});
}

// ops.fixed_padding: pads so that a VALID convolution of `kernel` gives SAME's output size.
Tensor fixed_padding(const Tensor& x, int64_t kernel) {
  const int64_t total = kernel - 1;
  const int64_t begin = total / 2;
  return ops::pad(x, {{0, 0}, {begin, total - begin}, {begin, total - begin}, {0, 0}});
}

class SsdMobilenetV1FeatureExtractor final : public detection::SsdFeatureExtractor {
 public:
  explicit SsdMobilenetV1FeatureExtractor(detection::SsdFeatureExtractorParams params)
      : c_(std::move(params)) {}

  // SSDMobileNetV1FeatureExtractor.preprocess: [0, 255] to [-1, 1].
  Tensor preprocess(const Tensor& resized_images) const override {
    return ops::add(ops::mul(ops::cast(resized_images, DType::kF32), 2.0 / 255.0), -1.0);
  }

  std::vector<Tensor> extract_features(layers::VariableScope& extractor,
                                       const Tensor& images) override;

 private:
  detection::SsdFeatureExtractorParams c_;
};

// SSDMobileNetV1FeatureExtractor._extract_features: MobilenetV1 to Conv2d_13_pointwise under
// its own arg scope, then multi_resolution_feature_maps with insert_1x1_conv under the
// config's conv_hyperparams, all in the MobilenetV1 scope.
std::vector<Tensor> SsdMobilenetV1FeatureExtractor::extract_features(
    layers::VariableScope& extractor, const Tensor& images) {
  const detection::SsdFeatureExtractorParams& c = c_;
  if (images.shape()[1] < 33 || images.shape()[2] < 33) {
    throw InvalidArgument("SSDMetaArch: images are " + images.description() +
                          "; ssd_mobilenet_v1 needs at least 33 x 33 (check_min_image_dim)");
  }
  nets::MobilenetV1Options base;
  base.num_classes = 0;
  base.depth_multiplier = c.depth_multiplier;
  base.min_depth = c.min_depth;
  base.final_endpoint = "Conv2d_13_pointwise";
  base.use_explicit_padding = c.use_explicit_padding;
  base.scope = "MobilenetV1";
  // freeze_batchnorm is SSDMetaArch.predict's arg_scope([batch_norm], is_training=is_training and
  // not freeze_batchnorm). It reaches the base net (mobilenet_v1_arg_scope(is_training=None) keeps
  // it) but nothing built under a conv_hyperparams scope, which replaces the whole arg scope and
  // sets is_training = is_training and batch_norm.train (hyperparams_builder): the extra feature
  // maps, the predictor's layers and, with override_base_feature_extractor_hyperparams, the base.
  if (c.freeze_batchnorm) base.batch_norm_is_training = false;
  if (c.override_base_feature_extractor_hyperparams) {
    base.batch_norm_is_training.reset();
    if (c.conv_hyperparams.batch_norm) {
      base.batch_norm_is_training = c.conv_hyperparams.batch_norm->is_training;
    }
    // The base net takes conv_hyperparams instead of mobilenet_v1_arg_scope's defaults: its
    // weight decay, its batch norm's decay and epsilon, its truncated normal's stddev.
    const ConvHyperparams& h = c.conv_hyperparams;
    base.weight_decay = h.l2_weight;
    if (h.batch_norm) {
      base.batch_norm_decay = h.batch_norm->decay;
      base.batch_norm_epsilon = h.batch_norm->epsilon;
    }
    if (h.initializer.kind == Initializer::Kind::kTruncatedNormal) {
      base.stddev = h.initializer.stddev;
    }
  }
  nets::NetOutput net =
      nets::mobilenet_v1_base(extractor, pad_to_multiple(images, c.pad_to_multiple), base);

  auto depth = [&](double d) {
    return std::max(static_cast<int64_t>(d * c.depth_multiplier), c.min_depth);
  };
  layers::VariableScope scope = extractor.child("MobilenetV1");
  std::vector<Tensor> maps;
  std::string base_from_layer;
  int64_t index = 0;
  for (const FeatureMapLayer& layer : kMobilenetV1Layout) {
    if (layer.from_layer[0] != '\0') {
      maps.push_back(net.end_points.at(layer.from_layer));
      base_from_layer = layer.from_layer;
      ++index;
      continue;
    }
    layers::Conv2DOptions one = conv_options(c.conv_hyperparams, true);
    const int64_t half = depth(static_cast<double>(layer.layer_depth) / 2.0);
    one.scope =
        base_from_layer + "_1_Conv2d_" + std::to_string(index) + "_1x1_" + std::to_string(half);
    Tensor intermediate = layers::conv2d(scope, maps.back(), half, {1, 1}, one);
    const std::string name = base_from_layer + "_2_Conv2d_" + std::to_string(index) + "_3x3_s2_" +
                             std::to_string(depth(layer.layer_depth));
    layers::Conv2DOptions three = conv_options(c.conv_hyperparams, true);
    three.stride = {2, 2};
    if (c.use_explicit_padding) {
      intermediate = fixed_padding(intermediate, 3);
      three.padding = Padding2D::valid();
    }
    if (c.use_depthwise) {
      layers::SeparableConv2DOptions d;
      d.stride = {2, 2};
      d.padding = three.padding;
      d.activation_fn = three.activation_fn;
      d.normalizer = three.normalizer;
      d.weights_initializer = three.weights_initializer;
      d.weights_l2 = three.weights_l2;
      d.scope = name + "_depthwise";
      Tensor dw = layers::separable_conv2d(scope, intermediate, std::nullopt, {3, 3}, d);
      layers::Conv2DOptions p = conv_options(c.conv_hyperparams, true);
      p.scope = name;
      maps.push_back(layers::conv2d(scope, dw, depth(layer.layer_depth), {1, 1}, p));
    } else {
      three.scope = name;
      maps.push_back(layers::conv2d(scope, intermediate, depth(layer.layer_depth), {3, 3}, three));
    }
    ++index;
  }
  return maps;
}

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v1_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader&) {
  return std::make_unique<SsdMobilenetV1FeatureExtractor>(params);
}

}  // namespace trainyard::models
