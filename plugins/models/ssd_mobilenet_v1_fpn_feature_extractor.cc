// ssd_mobilenet_v1_fpn (RetinaNet on MobileNet v1): the Object Detection API's
// SSDMobileNetV1FpnFeatureExtractor (models/ssd_mobilenet_v1_fpn_feature_extractor.py):
// MobilenetV1 to Conv2d_13_pointwise as ssd_mobilenet_v1 builds it, then under MobilenetV1/fpn a
// top-down pyramid on the end points of levels fpn.min_level .. min(fpn.max_level, 5) (level 2
// is Conv2d_3_pointwise, 3 Conv2d_5_pointwise, 4 Conv2d_11_pointwise, 5 Conv2d_13_pointwise) and
// stride 2 convolutions for the levels above 5. Variables:
//   FeatureExtractor/MobilenetV1/Conv2d_0/weights ... Conv2d_13_pointwise/BatchNorm/beta
//   FeatureExtractor/MobilenetV1/fpn/projection_<i>/{weights,biases}, smoothing_<i>/...
//   FeatureExtractor/MobilenetV1/fpn/bottom_up_Conv2d_14/... (level 6), _15 (level 7)
// With use_depthwise (FPN-lite) the base's last two layers are 512 and 256 deep and the
// smoothing and bottom-up convolutions separable.
#include <array>
#include <memory>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v1_fpn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  static constexpr std::array<const char*, 4> kFpnBlocks = {
      "Conv2d_3_pointwise", "Conv2d_5_pointwise", "Conv2d_11_pointwise", "Conv2d_13_pointwise"};
  const FpnLevels fpn = fpn_levels(options, 2);
  return std::make_unique<MobilenetSsdExtractor>(
      "ssd_mobilenet_v1_fpn", params,
      [fpn](layers::VariableScope& extractor, const Tensor& images,
            const detection::SsdFeatureExtractorParams& c) {
        nets::MobilenetV1Options base = mobilenet_v1_base_options(c);
        if (c.use_depthwise) base.depths = {{12, 512}, {13, 256}};  // the modified conv defs
        const nets::NetOutput net = nets::mobilenet_v1_base(extractor, images, base);
        layers::VariableScope scope = extractor.child("MobilenetV1").child("fpn");
        return mobilenet_fpn_feature_maps(scope, net.end_points, kFpnBlocks, fpn, c, 14);
      });
}

}  // namespace trainyard::models
