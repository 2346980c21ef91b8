// ssd_mobilenet_v1_ppn: the Object Detection API's SSDMobileNetV1PpnFeatureExtractor
// (models/ssd_mobilenet_v1_ppn_feature_extractor.py), the pooling pyramid network: MobilenetV1 as
// ssd_mobilenet_v1 builds it, then feature_map_generators.pooling_pyramid_feature_maps with
// base_feature_map_depth 0 and 6 layers: Conv2d_11_pointwise itself and five 2x2 stride-2 SAME
// max pools of it, one after the other. The maps keep one depth, as the weight-shared
// predictor of its sample config needs. Variables: FeatureExtractor/MobilenetV1/Conv2d_0 ...
// Conv2d_13_pointwise (the API builds the last two layers, which no map uses; so do we, so that
// its checkpoints restore whole).
#include <memory>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

std::vector<Tensor> pooling_pyramid_maps(layers::VariableScope& extractor, const Tensor& images,
                                         const detection::SsdFeatureExtractorParams& c) {
  const nets::NetOutput net =
      nets::mobilenet_v1_base(extractor, images, mobilenet_v1_base_options(c));
  std::vector<Tensor> maps = {net.end_points.at("Conv2d_11_pointwise")};
  for (int i = 0; i < 5; ++i) {
    maps.push_back(ops::max_pool2d(maps.back(), {2, 2}, {2, 2}, Padding2D::same()));
  }
  return maps;
}

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v1_ppn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, "ssd_mobilenet_v1_ppn");
  return std::make_unique<MobilenetSsdExtractor>("ssd_mobilenet_v1_ppn", params,
                                                 pooling_pyramid_maps);
}

}  // namespace trainyard::models
