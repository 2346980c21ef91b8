// ssd_mobilenet_v3_large and ssd_mobilenet_v3_small (SSDLite with use_depthwise): the Object
// Detection API's SSDMobileNetV3LargeFeatureExtractor / SSDMobileNetV3SmallFeatureExtractor
// (models/ssd_mobilenet_v3_feature_extractor.py): MobilenetV3 with V3_LARGE_DETECTION /
// V3_SMALL_DETECTION (the last three blocks and Conv_1 at half depth) under
// mobilenet_v3.training_scope(is_training=None, bn_decay=0.9997), to layer_17 (large) or layer_13
// (small), then feature_map_generators.multi_resolution_feature_maps with four new layers (512,
// 256, 256, 128) on layer_14/expansion_output and layer_17 (large) or layer_10/expansion_output
// and layer_13 (small). Variables:
//   FeatureExtractor/MobilenetV3/Conv/weights ... expanded_conv_<k>/squeeze_excite/Conv_1/biases,
//   FeatureExtractor/MobilenetV3/Conv_1/...
//   FeatureExtractor/MobilenetV3/layer_17_1_Conv2d_2_1x1_256/weights (extra layers)
#include <memory>
#include <string>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

// MobilenetV3's options as the API's extractor builds it: training_scope(is_training=None,
// bn_decay=0.9997), min_depth through arg_scope([mobilenet.depth_multiplier]), and
// base_net_hyperparams() (not the activation, which the conv_defs' own defaults keep).
nets::MobilenetV3Options mobilenet_v3_base_options(const detection::SsdFeatureExtractorParams& c,
                                                   nets::MobilenetV3Variant variant,
                                                   const char* final_endpoint) {
  nets::MobilenetV3Options base;
  base.variant = variant;
  base.detection = true;
  base.num_classes = 0;
  base.depth_multiplier = c.depth_multiplier;
  base.min_depth = c.min_depth;
  base.final_endpoint = final_endpoint;
  base.use_explicit_padding = c.use_explicit_padding;
  base.batch_norm_decay = 0.9997;
  base.scope = "MobilenetV3";
  const BaseNetHyperparams h = base_net_hyperparams(c);
  base.batch_norm_is_training = h.batch_norm_is_training;
  if (h.overridden) {
    base.weight_decay = h.weight_decay;
    base.regularize_depthwise = true;
    base.batch_norm_decay = h.batch_norm_decay.value_or(base.batch_norm_decay);
    base.batch_norm_epsilon = h.batch_norm_epsilon.value_or(base.batch_norm_epsilon);
    base.weights_initializer = h.initializer;
  }
  return base;
}

template <nets::MobilenetV3Variant kVariant>
std::vector<Tensor> mobilenet_v3_maps(layers::VariableScope& extractor, const Tensor& images,
                                      const detection::SsdFeatureExtractorParams& c) {
  constexpr bool kLarge = kVariant == nets::MobilenetV3Variant::kLarge;
  const char* expansion = kLarge ? "layer_14/expansion_output" : "layer_10/expansion_output";
  const char* last = kLarge ? "layer_17" : "layer_13";
  const nets::NetOutput net =
      nets::mobilenet_v3_base(extractor, images, mobilenet_v3_base_options(c, kVariant, last));
  FeatureMapLayout layout;
  layout.layers = {{expansion, -1}, {last, -1}, {"", 512}, {"", 256}, {"", 256}, {"", 128}};
  layout.use_explicit_padding = c.use_explicit_padding;
  layout.use_depthwise = c.use_depthwise;
  layers::VariableScope scope = extractor.child("MobilenetV3");
  return multi_resolution_feature_maps(scope, layout, c.depth_multiplier, c.min_depth,
                                       c.conv_hyperparams, net.end_points);
}

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v3_large_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, "ssd_mobilenet_v3_large");
  return std::make_unique<MobilenetSsdExtractor>(
      "ssd_mobilenet_v3_large", params, mobilenet_v3_maps<nets::MobilenetV3Variant::kLarge>);
}

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v3_small_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, "ssd_mobilenet_v3_small");
  return std::make_unique<MobilenetSsdExtractor>(
      "ssd_mobilenet_v3_small", params, mobilenet_v3_maps<nets::MobilenetV3Variant::kSmall>);
}

}  // namespace trainyard::models
