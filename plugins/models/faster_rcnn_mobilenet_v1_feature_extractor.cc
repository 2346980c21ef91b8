// faster_rcnn_mobilenet_v1: the Object Detection API's FasterRCNNMobilenetV1FeatureExtractor
// (models/faster_rcnn_mobilenet_v1_feature_extractor.py, which its model builder never
// registered), for small CPU configurations. Variables:
//   FirstStageFeatureExtractor/MobilenetV1/Conv2d_0/weights ... Conv2d_11_pointwise (stride 16)
//   SecondStageFeatureExtractor/MobilenetV1/Conv2d_12_pointwise/{depthwise,pointwise}_weights
//   SecondStageFeatureExtractor/MobilenetV1/Conv2d_13_pointwise/...
#include <memory>
#include <optional>
#include <utility>

#include "detection_parts.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

class FasterRcnnMobilenetV1FeatureExtractor final : public detection::FasterRcnnFeatureExtractor {
 public:
  explicit FasterRcnnMobilenetV1FeatureExtractor(detection::FasterRcnnFeatureExtractorParams params)
      : c_(std::move(params)) {}

  // [0, 255] to [-1, 1].
  Tensor preprocess(const Tensor& resized_images) const override {
    return ops::add(ops::mul(resized_images, 2.0 / 255.0), -1.0);
  }

  Tensor extract_proposal_features(layers::VariableScope& scope, const Tensor& images) override;
  Tensor extract_box_classifier_features(layers::VariableScope& scope,
                                         const Tensor& crops) override;

 private:
  detection::FasterRcnnFeatureExtractorParams c_;
};

// extract_proposal_features: MobileNet v1 to Conv2d_11_pointwise; batch norm follows
// batch_norm_trainable.
Tensor FasterRcnnMobilenetV1FeatureExtractor::extract_proposal_features(
    layers::VariableScope& scope, const Tensor& images) {
  nets::MobilenetV1Options o;
  o.num_classes = 0;
  o.final_endpoint = "Conv2d_11_pointwise";
  o.min_depth = 16;
  o.weight_decay = 0.0;
  o.batch_norm_is_training = c_.batch_norm_trainable && scope.is_training();
  if (const std::optional<ConvHyperparams>& h = c_.conv_hyperparams) {
    o.weight_decay = h->l2_weight;
    if (h->batch_norm) {
      o.batch_norm_decay = h->batch_norm->decay;
      o.batch_norm_epsilon = h->batch_norm->epsilon;
    }
  }
  return nets::mobilenet_v1_base(scope, images, o).net;
}

// extract_box_classifier_features: two separable convolutions of 1024 (stride 2, then 1) in
// mobilenet_v1_arg_scope, named Conv2d_12_pointwise and Conv2d_13_pointwise (so their variables
// are depthwise_weights and pointwise_weights, unlike MobileNet's own).
Tensor FasterRcnnMobilenetV1FeatureExtractor::extract_box_classifier_features(
    layers::VariableScope& scope, const Tensor& crops) {
  const bool bn_training = c_.batch_norm_trainable && scope.is_training();
  layers::VariableScope net = scope.child("MobilenetV1");
  layers::BatchNormOptions bn;
  bn.decay = 0.9997;
  bn.epsilon = 0.001;
  bn.scale = true;
  if (!bn_training) bn.is_training = false;
  if (const std::optional<ConvHyperparams>& h = c_.conv_hyperparams) {
    if (h->batch_norm) {
      bn.decay = h->batch_norm->decay;
      bn.epsilon = h->batch_norm->epsilon;
    }
  }
  layers::SeparableConv2DOptions o;
  // mobilenet_v1_arg_scope gives separable convolutions no regularizer (regularize_depthwise
  // false), pointwise weights included.
  o.weights_l2 = 0.0;
  o.activation_fn = layers::ActivationFn::relu6();
  o.normalizer = bn;
  o.weights_initializer = layers::truncated_normal_initializer(0.0, 0.09);
  o.stride = {2, 2};
  o.scope = "Conv2d_12_pointwise";
  const Tensor x = layers::separable_conv2d(net, crops, 1024, {3, 3}, o);
  o.stride = {1, 1};
  o.scope = "Conv2d_13_pointwise";
  return layers::separable_conv2d(net, x, 1024, {3, 3}, o);
}

}  // namespace

std::unique_ptr<detection::FasterRcnnFeatureExtractor>
make_faster_rcnn_mobilenet_v1_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params, const DetectionOptionReader& r) {
  // faster_rcnn_mobilenet_v1_feature_extractor: "`first_stage_features_stride` must be 8 or 16."
  check_first_stage_features_stride(params, r);
  return std::make_unique<FasterRcnnMobilenetV1FeatureExtractor>(params);
}

}  // namespace trainyard::models
