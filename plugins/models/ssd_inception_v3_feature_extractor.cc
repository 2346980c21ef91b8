// ssd_inception_v3: the Object Detection API's SSDInceptionV3FeatureExtractor
// (models/ssd_inception_v3_feature_extractor.py): InceptionV3 to Mixed_7c under the
// conv_hyperparams arg scope (the API raises unless override_base_feature_extractor_hyperparams
// is true; we refuse the config the same way), then
// feature_map_generators.multi_resolution_feature_maps on Mixed_5d, Mixed_6e and Mixed_7c, then
// three new layers of 512, 256 and 128. Preprocess (2 / 255) x - 1, images of at least 75 x 75
// (the API checks 33, then fails building its graph below 75), padded to pad_to_multiple.
// Variables:
//   FeatureExtractor/InceptionV3/Conv2d_1a_... .. Mixed_7c/Branch_3/Conv2d_0b_1x1/...
//   FeatureExtractor/InceptionV3/Mixed_7c_2_Conv2d_3_3x3_s2_512/weights (extra layers)
#include <memory>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

const std::vector<FeatureMapLayer> kInceptionV3Layout = {
    {"Mixed_5d", -1}, {"Mixed_6e", -1}, {"Mixed_7c", -1}, {"", 512}, {"", 256}, {"", 128},
};

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_inception_v3_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, "ssd_inception_v3");
  nets::InceptionV3Options base;
  base.num_classes = 0;
  base.depth_multiplier = params.depth_multiplier;
  base.min_depth = params.min_depth;
  base.final_endpoint = "Mixed_7c";
  base.arg_scope = inception_base_arg_scope(params, options, "ssd_inception_v3");
  auto maps = [base](layers::VariableScope& extractor, const Tensor& images,
                     const detection::SsdFeatureExtractorParams& c) {
    const nets::NetOutput net = nets::inception_v3_base(extractor, images, base);
    return extractor_feature_maps(extractor, "InceptionV3", kInceptionV3Layout, c, net.end_points);
  };
  // The API checks for 33 pixels, but below 75 its VALID stem and reductions leave Mixed_7a's
  // input smaller than its 3x3 kernel and TensorFlow refuses the graph; here the config is.
  return std::make_unique<MobilenetSsdExtractor>("ssd_inception_v3", params, maps,
                                                 /*min_dimension=*/75);
}

}  // namespace trainyard::models
