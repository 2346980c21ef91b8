// ssd_mobilenet_v2 (and SSDLite with use_depthwise): the Object Detection API's
// SSDMobileNetV2FeatureExtractor (models/ssd_mobilenet_v2_feature_extractor.py): MobilenetV2 to
// layer_19 under mobilenet_v2.training_scope(is_training=None, bn_decay=0.9997), then
// feature_map_generators.multi_resolution_feature_maps with four new layers on
// layer_15/expansion_output and layer_19. Variables:
//   FeatureExtractor/MobilenetV2/Conv/weights ... expanded_conv_16/project/BatchNorm/beta,
//   FeatureExtractor/MobilenetV2/Conv_1/...
//   FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_2_1x1_256/weights (extra layers)
#include <memory>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

const std::vector<FeatureMapLayer> kMobilenetV2Layout = {
    {"layer_15/expansion_output", -1}, {"layer_19", -1}, {"", 512}, {"", 256}, {"", 256}, {"", 128},
};

std::vector<Tensor> mobilenet_v2_maps(layers::VariableScope& extractor, const Tensor& images,
                                      const detection::SsdFeatureExtractorParams& c) {
  return ssd_mobilenet_v2_feature_maps(extractor, images, c, /*keras_application=*/false);
}

}  // namespace

std::vector<Tensor> ssd_mobilenet_v2_feature_maps(layers::VariableScope& extractor,
                                                  const Tensor& images,
                                                  const detection::SsdFeatureExtractorParams& c,
                                                  bool keras_application) {
  nets::MobilenetV2Options base = mobilenet_v2_base_options(c);
  base.keras_residuals = keras_application;
  if (keras_application && c.override_base_feature_extractor_hyperparams) {
    base.regularize_depthwise = false;
    base.depthwise_initializer = Initializer::glorot_uniform();
  }
  const nets::NetOutput net = nets::mobilenet_v2_base(extractor, images, base);
  return extractor_feature_maps(extractor, "MobilenetV2", kMobilenetV2Layout, c, net.end_points);
}

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v2_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, "ssd_mobilenet_v2");
  return std::make_unique<MobilenetSsdExtractor>("ssd_mobilenet_v2", params, mobilenet_v2_maps);
}

}  // namespace trainyard::models
