// ssd_mobilenet_v2_fpn: the Object Detection API's SSDMobileNetV2FpnFeatureExtractor
// (models/ssd_mobilenet_v2_fpn_feature_extractor.py): MobilenetV2 to layer_19 as
// ssd_mobilenet_v2 builds it, then under MobilenetV2/fpn a top-down pyramid on layer_4 (level 2),
// layer_7 (3), layer_14 (4) and layer_19 (5) from fpn.min_level to min(fpn.max_level, 5), and
// stride-2 convolutions bottom_up_Conv2d_20, _21, ... above. With use_depthwise (FPN-lite)
// Conv_1 is 256 deep instead of 1280 and the smoothing and bottom-up convolutions separable.
#include <array>
#include <memory>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v2_fpn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  static constexpr std::array<const char*, 4> kFpnBlocks = {"layer_4", "layer_7", "layer_14",
                                                            "layer_19"};
  const FpnLevels fpn = fpn_levels(options, 2);
  return std::make_unique<MobilenetSsdExtractor>(
      "ssd_mobilenet_v2_fpn", params,
      [fpn](layers::VariableScope& extractor, const Tensor& images,
            const detection::SsdFeatureExtractorParams& c) {
        nets::MobilenetV2Options base = mobilenet_v2_base_options(c);
        if (c.use_depthwise) base.last_layer_depth = 256;  // the modified conv defs
        const nets::NetOutput net = nets::mobilenet_v2_base(extractor, images, base);
        layers::VariableScope scope = extractor.child("MobilenetV2").child("fpn");
        return mobilenet_fpn_feature_maps(scope, net.end_points, kFpnBlocks, fpn, c, 20);
      });
}

}  // namespace trainyard::models
