// ssd_mobilenet_v1: the Object Detection API's SSDMobileNetV1FeatureExtractor
// (models/ssd_mobilenet_v1_feature_extractor.py): MobilenetV1 to Conv2d_13_pointwise, then
// feature_map_generators.multi_resolution_feature_maps with four new layers. Variables:
//   FeatureExtractor/MobilenetV1/Conv2d_0/weights ... Conv2d_13_pointwise/BatchNorm/beta
//   FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_256/weights (extra layers)
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"
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

class SsdMobilenetV1FeatureExtractor final : public detection::SsdFeatureExtractor {
 public:
  explicit SsdMobilenetV1FeatureExtractor(detection::SsdFeatureExtractorParams params)
      : c_(std::move(params)) {}

  // SSDMobileNetV1FeatureExtractor.preprocess: [0, 255] to [-1, 1].
  Tensor preprocess(const Tensor& resized_images) const override {
    return scale_to_unit_range(resized_images);
  }

  int64_t min_image_dimension() const override { return 33; }

  std::vector<Tensor> extract_features(layers::VariableScope& extractor,
                                       const Tensor& images) override;

 private:
  detection::SsdFeatureExtractorParams c_;
};

// SSDMobileNetV1FeatureExtractor._extract_features: MobilenetV1 to Conv2d_13_pointwise under
// its own arg scope, then multi_resolution_feature_maps with insert_1x1_conv under the
// config's conv_hyperparams, all in the MobilenetV1 scope.
std::vector<Tensor> SsdMobilenetV1FeatureExtractor::extract_features(
    layers::VariableScope& extractor, const Tensor& images) {
  const detection::SsdFeatureExtractorParams& c = c_;
  check_min_image_dim("ssd_mobilenet_v1", min_image_dimension(), images);
  const nets::NetOutput net = nets::mobilenet_v1_base(
      extractor, pad_to_multiple(images, c.pad_to_multiple), mobilenet_v1_base_options(c));

  FeatureMapLayout layout;
  layout.layers = kMobilenetV1Layout;
  layout.use_explicit_padding = c.use_explicit_padding;
  layout.use_depthwise = c.use_depthwise;
  layers::VariableScope scope = extractor.child("MobilenetV1");
  return multi_resolution_feature_maps(scope, layout, c.depth_multiplier, c.min_depth,
                                       c.conv_hyperparams, net.end_points);
}

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v1_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, "ssd_mobilenet_v1");
  return std::make_unique<SsdMobilenetV1FeatureExtractor>(params);
}

}  // namespace trainyard::models
