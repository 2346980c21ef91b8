// ssd_mobilenet_v2 (and SSDLite with use_depthwise): the Object Detection API's
// SSDMobileNetV2FeatureExtractor (models/ssd_mobilenet_v2_feature_extractor.py): MobilenetV2 to
// layer_19 under mobilenet_v2.training_scope(is_training=None, bn_decay=0.9997), then
// feature_map_generators.multi_resolution_feature_maps with four new layers on
// layer_15/expansion_output and layer_19. Variables:
//   FeatureExtractor/MobilenetV2/Conv/weights ... expanded_conv_16/project/BatchNorm/beta,
//   FeatureExtractor/MobilenetV2/Conv_1/...
//   FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_2_1x1_256/weights (extra layers)
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

const std::vector<FeatureMapLayer> kMobilenetV2Layout = {
    {"layer_15/expansion_output", -1}, {"layer_19", -1}, {"", 512}, {"", 256}, {"", 256}, {"", 128},
};

class SsdMobilenetV2FeatureExtractor final : public detection::SsdFeatureExtractor {
 public:
  explicit SsdMobilenetV2FeatureExtractor(detection::SsdFeatureExtractorParams params)
      : c_(std::move(params)) {}

  // SSDMobileNetV2FeatureExtractor.preprocess: [0, 255] to [-1, 1].
  Tensor preprocess(const Tensor& resized_images) const override {
    return scale_to_unit_range(resized_images);
  }

  int64_t min_image_dimension() const override { return 33; }

  std::vector<Tensor> extract_features(layers::VariableScope& extractor,
                                       const Tensor& images) override;

 private:
  detection::SsdFeatureExtractorParams c_;
};

std::vector<Tensor> SsdMobilenetV2FeatureExtractor::extract_features(
    layers::VariableScope& extractor, const Tensor& images) {
  const detection::SsdFeatureExtractorParams& c = c_;
  check_min_image_dim("ssd_mobilenet_v2", min_image_dimension(), images);
  const nets::NetOutput net = nets::mobilenet_v2_base(
      extractor, pad_to_multiple(images, c.pad_to_multiple), mobilenet_v2_base_options(c));
  FeatureMapLayout layout;
  layout.layers = kMobilenetV2Layout;
  layout.use_explicit_padding = c.use_explicit_padding;
  layout.use_depthwise = c.use_depthwise;
  layers::VariableScope scope = extractor.child("MobilenetV2");
  return multi_resolution_feature_maps(scope, layout, c.depth_multiplier, c.min_depth,
                                       c.conv_hyperparams, net.end_points);
}

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v2_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, "ssd_mobilenet_v2");
  return std::make_unique<SsdMobilenetV2FeatureExtractor>(params);
}

}  // namespace trainyard::models
