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
  set_mobilenet_base_hyperparams(base, c);
  base.variant = variant;
  base.detection = true;
  base.final_endpoint = final_endpoint;
  base.scope = "MobilenetV3";
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
  return extractor_feature_maps(
      extractor, "MobilenetV3",
      std::vector<FeatureMapLayer>{
          {expansion, -1}, {last, -1}, {"", 512}, {"", 256}, {"", 256}, {"", 128}},
      c, net.end_points);
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
