// ssd_inception_v2: the Object Detection API's SSDInceptionV2FeatureExtractor
// (models/ssd_inception_v2_feature_extractor.py): InceptionV2 to Mixed_5c under the
// conv_hyperparams arg scope (the API raises unless override_base_feature_extractor_hyperparams
// is true; we refuse the config the same way), then
// feature_map_generators.multi_resolution_feature_maps on Mixed_4c and Mixed_5c, then four new
// layers of 512, 256, 256 and 128. Preprocess (2 / 255) x - 1, images of at least 33 x 33, padded
// to pad_to_multiple. Variables:
//   FeatureExtractor/InceptionV2/Conv2d_1a_... .. Mixed_5c/Branch_3/Conv2d_0b_1x1/...
//   FeatureExtractor/InceptionV2/Mixed_5c_2_Conv2d_2_3x3_s2_512/weights (extra layers)
#include <memory>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

const std::vector<FeatureMapLayer> kInceptionV2Layout = {
    {"Mixed_4c", -1}, {"Mixed_5c", -1}, {"", 512}, {"", 256}, {"", 256}, {"", 128},
};

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_inception_v2_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, "ssd_inception_v2");
  nets::InceptionV2Options base;
  base.num_classes = 0;
  base.depth_multiplier = params.depth_multiplier;
  base.min_depth = params.min_depth;
  base.final_endpoint = "Mixed_5c";
  base.arg_scope = inception_base_arg_scope(params, options, "ssd_inception_v2");
  auto maps = [base](layers::VariableScope& extractor, const Tensor& images,
                     const detection::SsdFeatureExtractorParams& c) {
    const nets::NetOutput net = nets::inception_v2_base(extractor, images, base);
    return extractor_feature_maps(extractor, "InceptionV2", kInceptionV2Layout, c, net.end_points);
  };
  return std::make_unique<MobilenetSsdExtractor>("ssd_inception_v2", params, maps);
}

}  // namespace trainyard::models
