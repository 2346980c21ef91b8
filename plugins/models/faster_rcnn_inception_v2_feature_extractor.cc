// faster_rcnn_inception_v2: the Object Detection API's FasterRCNNInceptionV2FeatureExtractor
// (models/faster_rcnn_inception_v2_feature_extractor.py). Variables:
//   FirstStageFeatureExtractor/InceptionV2/Conv2d_1a_7x7/{depthwise,pointwise}_weights ...
//   FirstStageFeatureExtractor/InceptionV2/Mixed_4e/Branch_<k>/...       (stride 16)
//   SecondStageFeatureExtractor/InceptionV2/Mixed_5{a,b,c}/Branch_<k>/...
// Both stages run under the extractor's _batch_norm_arg_scope on conv2d and separable_conv2d
// (batch norm with gamma, decay 0.9997, epsilon 0.001, in training mode only with
// batch_norm_trainable), not inception_arg_scope: no weight decay, slim's xavier initializer
// where the net names none, and the separable Conv2d_1a_7x7 batch-normalized too.
// depth_multiplier 1 and min_depth 16, as model_builder leaves them.
#include <memory>
#include <optional>
#include <utility>

#include "detection_parts.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

class FasterRcnnInceptionV2FeatureExtractor final : public detection::FasterRcnnFeatureExtractor {
 public:
  explicit FasterRcnnInceptionV2FeatureExtractor(detection::FasterRcnnFeatureExtractorParams params)
      : c_(std::move(params)) {}

  // (2 / 255) * resized_inputs - 1.
  Tensor preprocess(const Tensor& resized_images) const override {
    return ops::add(ops::mul(resized_images, 2.0 / 255.0), -1.0);
  }

  Tensor extract_proposal_features(layers::VariableScope& scope, const Tensor& images) override {
    // "image size must at least be 33 in both height and width."
    if (images.shape()[1] < 33 || images.shape()[2] < 33) {
      throw InvalidArgument("FasterRCNNMetaArch: images are " + images.description() +
                            "; faster_rcnn_inception_v2 needs at least 33 x 33");
    }
    nets::InceptionV2Options o = options(scope);
    o.final_endpoint = "Mixed_4e";
    return nets::inception_v2_base(scope, images, o).net;
  }

  // Mixed_5a .. Mixed_5c of Inception v2 on the crops.
  Tensor extract_box_classifier_features(layers::VariableScope& scope,
                                         const Tensor& crops) override {
    nets::InceptionV2Options o = options(scope);
    o.final_endpoint = "Mixed_5c";
    return nets::inception_v2_modules(scope, crops, "Mixed_5a", o).net;
  }

 private:
  nets::InceptionV2Options options(const layers::VariableScope& scope) const {
    layers::BatchNormOptions bn;
    bn.decay = 0.9997;
    bn.epsilon = 0.001;
    bn.center = true;
    bn.scale = true;
    bn.is_training = c_.batch_norm_trainable && scope.is_training();
    layers::Conv2DOptions conv;
    conv.activation_fn = layers::ActivationFn::relu();
    conv.weights_l2 = 0.0;
    // override_base_feature_extractor_hyperparams, as the other Faster R-CNN extractors read it.
    if (const std::optional<ConvHyperparams>& h = c_.conv_hyperparams) {
      conv.weights_l2 = h->l2_weight;
      if (h->batch_norm) {
        bn.decay = h->batch_norm->decay;
        bn.epsilon = h->batch_norm->epsilon;
      }
    }
    conv.normalizer = bn;
    nets::InceptionV2Options o;
    o.num_classes = 0;
    o.depth_multiplier = 1.0;
    o.min_depth = 16;
    o.arg_scope.replacement = conv;
    return o;
  }

  detection::FasterRcnnFeatureExtractorParams c_;
};

}  // namespace

std::unique_ptr<detection::FasterRcnnFeatureExtractor>
make_faster_rcnn_inception_v2_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params, const DetectionOptionReader& r) {
  // "`first_stage_features_stride` must be 8 or 16." (Mixed_4e is at 16 either way.)
  check_first_stage_features_stride(params, r);
  return std::make_unique<FasterRcnnInceptionV2FeatureExtractor>(params);
}

}  // namespace trainyard::models
