// faster_rcnn_inception_resnet_v2: the Object Detection API's
// FasterRCNNInceptionResnetV2FeatureExtractor
// (models/faster_rcnn_inception_resnet_v2_feature_extractor.py). Variables:
//   FirstStageFeatureExtractor/InceptionResnetV2/Conv2d_1a_3x3/... Repeat_1/block17_20/...
//   SecondStageFeatureExtractor/InceptionResnetV2/Mixed_7a/..., Repeat/block8_<1..9>/...,
//   Block8/..., Conv2d_7b_1x1/...
// The first stage is inception_resnet_v2_base to PreAuxLogits with align_feature_maps (every
// VALID padding SAME) at first_stage_features_stride: 16, or 8 with Mixed_6a at stride 1 and
// the block17s atrous (rate 2). The second stage rebuilds Mixed_7a .. Conv2d_7b_1x1 on the crops.
// Both under inception_resnet_v2_arg_scope with the extractor's weight decay (0) and batch norm in
// training mode only with batch_norm_trainable.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "detection_parts.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

class FasterRcnnInceptionResnetV2FeatureExtractor final
    : public detection::FasterRcnnFeatureExtractor {
 public:
  explicit FasterRcnnInceptionResnetV2FeatureExtractor(
      detection::FasterRcnnFeatureExtractorParams params)
      : c_(std::move(params)) {}

  // (2 / 255) * resized_inputs - 1.
  Tensor preprocess(const Tensor& resized_images) const override {
    return ops::add(ops::mul(resized_images, 2.0 / 255.0), -1.0);
  }

  Tensor extract_proposal_features(layers::VariableScope& scope, const Tensor& images) override {
    nets::InceptionResnetV2Options o = options(scope);
    o.final_endpoint = "PreAuxLogits";
    o.output_stride = c_.first_stage_features_stride;
    o.align_feature_maps = true;
    return nets::inception_resnet_v2_base(scope, images, o).net;
  }

  Tensor extract_box_classifier_features(layers::VariableScope& scope,
                                         const Tensor& crops) override {
    return nets::inception_resnet_v2_top(scope, crops, "Repeat", options(scope)).net;
  }

  // restore_from_classification_checkpoint_fn: the second stage's block8s are Repeat here and
  // Repeat_2 in the classifier's checkpoint.
  std::map<std::string, std::string> restore_from_classification_checkpoint(
      const std::string& first_stage_scope, const std::string& second_stage_scope) const override {
    return {{first_stage_scope + "/", ""},
            {second_stage_scope + "/", ""},
            {second_stage_scope + "/InceptionResnetV2/Repeat/", "InceptionResnetV2/Repeat_2/"}};
  }

 private:
  nets::InceptionResnetV2Options options(const layers::VariableScope& scope) const {
    nets::InceptionResnetV2Options o;
    o.num_classes = 0;
    o.weight_decay = 0.0;
    o.batch_norm_is_training = c_.batch_norm_trainable && scope.is_training();
    if (const std::optional<ConvHyperparams>& h = c_.conv_hyperparams) {
      o.weight_decay = h->l2_weight;
      if (h->batch_norm) {
        o.batch_norm_decay = h->batch_norm->decay;
        o.batch_norm_epsilon = h->batch_norm->epsilon;
      }
    }
    return o;
  }

  detection::FasterRcnnFeatureExtractorParams c_;
};

}  // namespace

std::unique_ptr<detection::FasterRcnnFeatureExtractor>
make_faster_rcnn_inception_resnet_v2_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params, const DetectionOptionReader& r) {
  // "`first_stage_features_stride` must be 8 or 16."
  check_first_stage_features_stride(params, r);
  return std::make_unique<FasterRcnnInceptionResnetV2FeatureExtractor>(params);
}

}  // namespace trainyard::models
