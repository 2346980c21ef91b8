// ssd_mobilenet_v1: the Object Detection API's SSDMobileNetV1FeatureExtractor
// (models/ssd_mobilenet_v1_feature_extractor.py): MobilenetV1 to Conv2d_13_pointwise, then
// feature_map_generators.multi_resolution_feature_maps with four new layers. Variables:
//   FeatureExtractor/MobilenetV1/Conv2d_0/weights ... Conv2d_13_pointwise/BatchNorm/beta
//   FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_256/weights (extra layers)
#include <memory>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

// ssd_mobilenet_v1's feature_map_layout: two maps of the base net, then four new ones.
const std::vector<FeatureMapLayer> kMobilenetV1Layout = {
    {"Conv2d_11_pointwise", -1},
    {"Conv2d_13_pointwise", -1},
    {"", 512},
    {"", 256},
    {"", 256},
    {"", 128},
};

// SSDMobileNetV1FeatureExtractor._extract_features: MobilenetV1 to Conv2d_13_pointwise under
// its own arg scope, then multi_resolution_feature_maps with insert_1x1_conv under the
// config's conv_hyperparams, all in the MobilenetV1 scope.
std::vector<Tensor> mobilenet_v1_maps(layers::VariableScope& extractor, const Tensor& images,
                                      const detection::SsdFeatureExtractorParams& c) {
  const nets::NetOutput net =
      nets::mobilenet_v1_base(extractor, images, mobilenet_v1_base_options(c));
  return extractor_feature_maps(extractor, "MobilenetV1", kMobilenetV1Layout, c, net.end_points);
}

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v1_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, "ssd_mobilenet_v1");
  return std::make_unique<MobilenetSsdExtractor>("ssd_mobilenet_v1", params, mobilenet_v1_maps);
}

}  // namespace trainyard::models
