// faster_rcnn_resnet50, faster_rcnn_resnet101 and faster_rcnn_resnet152: the Object Detection API's
// FasterRCNNResnetV1FeatureExtractor (models/faster_rcnn_resnet_v1_feature_extractor.py).
// Variables:
//   FirstStageFeatureExtractor/resnet_v1_50/conv1/weights ... /block3/unit_6/...
//   SecondStageFeatureExtractor/resnet_v1_50/block4/unit_{1,2,3}/bottleneck_v1/...
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detection_parts.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

class FasterRcnnResnetV1FeatureExtractor final : public detection::FasterRcnnFeatureExtractor {
 public:
  FasterRcnnResnetV1FeatureExtractor(int depth, detection::FasterRcnnFeatureExtractorParams params)
      : depth_(depth), c_(std::move(params)) {}

  // faster_rcnn_resnet_v1_feature_extractor.preprocess: [[123.68, 116.779, 103.939]].
  Tensor preprocess(const Tensor& resized_images) const override {
    const Tensor means = Tensor::from_vector(resized_images.backend(), Shape{3},
                                             std::vector<float>{123.68f, 116.779f, 103.939f});
    return ops::sub(resized_images, means);
  }

  Tensor extract_proposal_features(layers::VariableScope& scope, const Tensor& images) override;
  Tensor extract_box_classifier_features(layers::VariableScope& scope,
                                         const Tensor& crops) override;

 private:
  std::string net_scope() const { return "resnet_v1_" + std::to_string(depth_); }
  // override_base_feature_extractor_hyperparams for resnet_arg_scope.
  void override_arg_scope(nets::ResnetV1Options& o) const {
    if (const std::optional<ConvHyperparams>& h = c_.conv_hyperparams) {
      o.weight_decay = h->l2_weight;
      if (h->batch_norm) {
        o.batch_norm_decay = h->batch_norm->decay;
        o.batch_norm_epsilon = h->batch_norm->epsilon;
      }
    }
  }

  int depth_;
  detection::FasterRcnnFeatureExtractorParams c_;
};

// extract_proposal_features: ResNet v1 to block3 at first_stage_features_stride (the API
// builds the whole net and takes block3's end point; block4's first-stage copy feeds nothing);
// batch norm follows batch_norm_trainable.
Tensor FasterRcnnResnetV1FeatureExtractor::extract_proposal_features(layers::VariableScope& scope,
                                                                     const Tensor& images) {
  // faster_rcnn_resnet_v1_feature_extractor: "Image size must at least be 33 in both height and
  // width."
  if (images.shape()[1] < 33 || images.shape()[2] < 33) {
    throw InvalidArgument("FasterRCNNMetaArch: images are " + images.description() +
                          "; the ResNet extractors need at least 33 x 33");
  }
  std::vector<nets::ResnetBlock> blocks = nets::resnet_v1_blocks(depth_);
  blocks.resize(3);  // block1 .. block3
  nets::ResnetV1Options o;
  o.num_classes = 0;
  o.global_pool = false;
  o.output_stride = c_.first_stage_features_stride;
  o.spatial_squeeze = false;
  o.weight_decay = 0.0;  // the API's Faster R-CNN ResNet extractors default to no weight decay
  o.batch_norm_is_training = c_.batch_norm_trainable && scope.is_training();
  o.scope = net_scope();
  override_arg_scope(o);
  return nets::resnet_v1(scope, images, blocks, o).net;
}

// extract_box_classifier_features: ResNet's block4 (three bottleneck units of depth 2048 at
// stride 1).
Tensor FasterRcnnResnetV1FeatureExtractor::extract_box_classifier_features(
    layers::VariableScope& scope, const Tensor& crops) {
  nets::ResnetBlock block4{"block4", nets::ResnetUnitKind::kBottleneck,
                           std::vector<nets::ResnetUnit>(3, nets::ResnetUnit{2048, 512, 1})};
  nets::ResnetV1Options o;
  o.num_classes = 0;
  o.global_pool = false;
  o.root = nets::ResnetRoot::kNone;
  o.spatial_squeeze = false;
  o.weight_decay = 0.0;
  o.batch_norm_is_training = c_.batch_norm_trainable && scope.is_training();
  o.scope = net_scope();
  override_arg_scope(o);
  return nets::resnet_v1(scope, crops, {block4}, o).net;
}

std::unique_ptr<detection::FasterRcnnFeatureExtractor> make_resnet_v1(
    int depth, const detection::FasterRcnnFeatureExtractorParams& params,
    const DetectionOptionReader& r) {
  check_first_stage_features_stride(params, r);
  return std::make_unique<FasterRcnnResnetV1FeatureExtractor>(depth, params);
}

}  // namespace

std::unique_ptr<detection::FasterRcnnFeatureExtractor> make_faster_rcnn_resnet50_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params, const DetectionOptionReader& r) {
  return make_resnet_v1(50, params, r);
}

std::unique_ptr<detection::FasterRcnnFeatureExtractor> make_faster_rcnn_resnet101_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params, const DetectionOptionReader& r) {
  return make_resnet_v1(101, params, r);
}

std::unique_ptr<detection::FasterRcnnFeatureExtractor> make_faster_rcnn_resnet152_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params, const DetectionOptionReader& r) {
  return make_resnet_v1(152, params, r);
}

}  // namespace trainyard::models
