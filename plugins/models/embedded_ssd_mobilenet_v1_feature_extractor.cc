// embedded_ssd_mobilenet_v1: the Object Detection API's EmbeddedSSDMobileNetV1FeatureExtractor
// (models/embedded_ssd_mobilenet_v1_feature_extractor.py), SSD MobileNet v1 for devices with
// only Conv, DepthwiseConv and Relu6: 256 x 256 images only, pad_to_multiple 1, and five maps,
// the last three new layers with kernels 3, 3 and 2 so that no kernel is larger than its input
// (Conv2d_13_pointwise is 8 x 8 at 256; the new maps 4, 2 and 1). Variables as ssd_mobilenet_v1's:
//   FeatureExtractor/MobilenetV1/Conv2d_0/weights ... Conv2d_13_pointwise/BatchNorm/beta
//   FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_Conv2d_4_2x2_s2_256/weights
#include <memory>
#include <string>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

constexpr int64_t kEmbeddedImageSize = 256;

const std::vector<FeatureMapLayer> kEmbeddedLayout = {
    {"Conv2d_11_pointwise", -1},
    {"Conv2d_13_pointwise", -1},
    {"", 512, 3},
    {"", 256, 3},
    {"", 256, 2},
};

std::vector<Tensor> embedded_maps(layers::VariableScope& extractor, const Tensor& images,
                                  const detection::SsdFeatureExtractorParams& c) {
  const nets::NetOutput net =
      nets::mobilenet_v1_base(extractor, images, mobilenet_v1_base_options(c));
  return extractor_feature_maps(extractor, "MobilenetV1", kEmbeddedLayout, c, net.end_points);
}

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_embedded_ssd_mobilenet_v1_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, "embedded_ssd_mobilenet_v1");
  if (params.pad_to_multiple != 1) {
    options.refuse("feature_extractor.pad_to_multiple", std::to_string(params.pad_to_multiple),
                   "embedded_ssd_mobilenet_v1 takes only 1");
  }
  return std::make_unique<MobilenetSsdExtractor>("embedded_ssd_mobilenet_v1", params, embedded_maps,
                                                 kEmbeddedImageSize, /*exact=*/true);
}

}  // namespace trainyard::models
