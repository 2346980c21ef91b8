// ssd_resnet50_v1_fpn, ssd_resnet101_v1_fpn, ssd_resnet152_v1_fpn (RetinaNet): the Object
// Detection API's SSDResnet{50,101,152}V1FpnFeatureExtractor
// (models/ssd_resnet_v1_fpn_feature_extractor.py): slim's resnet_v1 under resnet_arg_scope with
// store_non_strided_activations (each block's end point before its stride), then under
// <resnet scope>/fpn a top-down pyramid on block<level - 1> for levels fpn.min_level ..
// min(fpn.max_level, 5) with additional_layer_depth channels, and a stride 2 convolution per
// level above 5. Variables:
//   FeatureExtractor/resnet_v1_50/conv1/weights ... block4/unit_3/bottleneck_v1/conv3/BatchNorm/*
//   FeatureExtractor/resnet_v1_50/fpn/projection_<i>/{weights,biases}, smoothing_<i>/...
//   FeatureExtractor/resnet_v1_50/fpn/bottom_up_block5/... (level 6), bottom_up_block6 (level 7)
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "detection_parts.h"
#include "ssd_extractor_common.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

class SsdResnetV1FpnFeatureExtractor final : public detection::SsdFeatureExtractor {
 public:
  SsdResnetV1FpnFeatureExtractor(detection::SsdFeatureExtractorParams params, FpnLevels fpn,
                                 int64_t depth)
      : c_(std::move(params)), fpn_(fpn), depth_(depth) {}

  // VGG's channel means subtracted (3 channels).
  Tensor preprocess(const Tensor& resized_images) const override {
    const Tensor means = Tensor::from_vector(resized_images.backend(), Shape{3},
                                             std::vector<float>{123.68f, 116.779f, 103.939f});
    return ops::sub(ops::cast(resized_images, DType::kF32), means);
  }

  int64_t min_image_dimension() const override { return 129; }

  std::vector<Tensor> extract_features(layers::VariableScope& extractor,
                                       const Tensor& images) override;

 private:
  std::string scope() const { return "resnet_v1_" + std::to_string(depth_); }

  detection::SsdFeatureExtractorParams c_;
  FpnLevels fpn_;
  int64_t depth_;
};

std::vector<Tensor> SsdResnetV1FpnFeatureExtractor::extract_features(
    layers::VariableScope& extractor, const Tensor& images) {
  const detection::SsdFeatureExtractorParams& c = c_;
  check_min_image_dim("ssd_resnet" + std::to_string(depth_) + "_v1_fpn", min_image_dimension(),
                      images);
  nets::ResnetV1Options base;
  base.num_classes = 0;
  base.global_pool = false;
  base.store_non_strided_activations = true;
  base.scope = scope();
  const BaseNetHyperparams h = base_net_hyperparams(c);
  base.batch_norm_is_training = h.batch_norm_is_training;
  if (h.overridden) {
    // resnet_arg_scope hands its batch norm's decay, epsilon and scale to conv2d as
    // normalizer_params, which conv_hyperparams' scope does not replace: only its is_training
    // (above), regularizer, initializer and activation reach the base.
    base.weight_decay = h.weight_decay;
    base.weights_initializer = h.initializer;
    base.activation_fn = h.activation;
  }
  const nets::NetOutput net = nets::resnet_v1(extractor, pad_to_multiple(images, c.pad_to_multiple),
                                              nets::resnet_v1_blocks(depth_), base);

  layers::VariableScope resnet = extractor.child(scope());
  const int64_t base_max_level = std::min<int64_t>(fpn_.max_level, 5);
  std::vector<Tensor> blocks;
  for (int64_t level = fpn_.min_level; level <= base_max_level; ++level) {
    blocks.push_back(net.end_points.at(resnet.full_name("block" + std::to_string(level - 1))));
  }
  layers::VariableScope scope = resnet.child("fpn");
  std::vector<Tensor> maps = fpn_top_down_feature_maps(scope, blocks, fpn_.additional_layer_depth,
                                                       c.conv_hyperparams, false, false);
  Tensor last = maps.back();
  for (int64_t i = base_max_level; i < fpn_.max_level; ++i) {
    layers::Conv2DOptions o = conv_options(c.conv_hyperparams, true);
    o.stride = {2, 2};
    o.scope = "bottom_up_block" + std::to_string(i);
    last = layers::conv2d(scope, last, fpn_.additional_layer_depth, {3, 3}, o);
    maps.push_back(last);
  }
  return maps;
}

// The API's ResNet FPN extractors refuse a depth multiplier other than 1 and explicit padding
// (ValueError), and take use_depthwise without using it.
std::unique_ptr<detection::SsdFeatureExtractor> make_resnet_fpn(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options,
    int64_t depth) {
  const std::string type = "ssd_resnet" + std::to_string(depth) + "_v1_fpn";
  if (params.depth_multiplier != 1.0) {
    options.refuse("feature_extractor.depth_multiplier",
                   option_value_to_string(params.depth_multiplier),
                   type + " supports only depth 1.0");
  }
  if (params.use_explicit_padding) {
    options.refuse("feature_extractor.use_explicit_padding", "true",
                   "explicit padding is not a valid option for " + type);
  }
  return std::make_unique<SsdResnetV1FpnFeatureExtractor>(params, fpn_levels(options, 2), depth);
}

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_resnet50_v1_fpn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  return make_resnet_fpn(params, options, 50);
}

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_resnet101_v1_fpn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  return make_resnet_fpn(params, options, 101);
}

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_resnet152_v1_fpn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  return make_resnet_fpn(params, options, 152);
}

}  // namespace trainyard::models
