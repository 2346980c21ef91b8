// FasterRCNNMetaArch: the Object Detection API's two-stage detector (meta_architectures/
// faster_rcnn_meta_arch.py) as a DetectionModel: the feature extractor registered under the
// config's feature_extractor.type (pkg/detection's faster_rcnn_feature_extractor.h; this
// plugin's, the API's ResNet v1 extractors and a MobileNet v1 one for small CPU
// configurations, are listed in detection_parts.h), the RPN, proposal NMS, the balanced
// minibatch samplers, crop_and_resize with max pooling and the second-stage box predictor
// registered under the config's second_stage_box_predictor choice (pkg/detection's
// box_predictor.h; this plugin's are mask_rcnn_box_predictor and R-FCN's rfcn_box_predictor,
// which crops the proposals itself from the second-stage features of whole images: the API's
// RFCNMetaArch), built from pkg/layers, pkg/detection and the engine's crop_and_resize,
// position_sensitive_crop_regions and batch_multiclass_non_max_suppression ops.
//
// Variable names are the API's, so its checkpoints restore by name (the extractor's under
// FirstStageFeatureExtractor/ and SecondStageFeatureExtractor/, faster_rcnn_resnet50's shown):
//   FirstStageFeatureExtractor/resnet_v1_50/conv1/weights ... /block3/unit_6/...
//   Conv/{weights,biases}                                      the RPN's 3x3 convolution
//   FirstStageBoxPredictor/{BoxEncodingPredictor,ClassPredictor}/{weights,biases}
//   SecondStageFeatureExtractor/resnet_v1_50/block4/unit_{1,2,3}/bottleneck_v1/...
//   SecondStageBoxPredictor/{BoxEncodingPredictor,ClassPredictor}/{weights,biases}
//   SecondStageBoxPredictor/Conv, Conv_1, ...    Mask R-CNN's mask head (number_of_stages 3)
//
// Coordinates: the API computes anchors and proposals in pixels of the preprocessed (padded)
// image; this model divides them by that image's size once and works in normalized
// coordinates from there, which gives the same matches, codes and NMS (IoU and the box coder's
// codes do not change when both axes are scaled).
#ifndef TRAINYARD_PLUGINS_MODELS_FASTER_RCNN_META_ARCH_H_
#define TRAINYARD_PLUGINS_MODELS_FASTER_RCNN_META_ARCH_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "detection_options.h"
#include "faster_rcnn_options.h"
#include "image_resizer.h"
#include "trainyard/detection_model.h"
#include "trainyard/op.h"
#include "trainyard/ops/detection.h"
#include "trainyard/options.h"
#include "trainyard/pkg/detection/anchor_generator.h"
#include "trainyard/pkg/detection/box_predictor.h"
#include "trainyard/pkg/detection/faster_rcnn_feature_extractor.h"
#include "trainyard/pkg/detection/hard_example_miner.h"
#include "trainyard/pkg/detection/losses.h"
#include "trainyard/pkg/detection/part_builders.h"
#include "trainyard/pkg/detection/target_assigner.h"
#include "trainyard/pkg/layers/variable_scope.h"

namespace trainyard::models {

struct FasterRcnnConfig {
  int64_t number_of_stages = 2;

  // image_resizer: keep_aspect_ratio_resizer resizes in preprocess(); fixed_shape_resizer is
  // done by the input pipeline (the converter adds the step).
  bool keep_aspect_ratio = true;
  KeepAspectRatioResizer resizer;

  // feature_extractor, and the extractor its type names
  // (detection::faster_rcnn_feature_extractors()).
  detection::FasterRcnnFeatureExtractorParams feature_extractor;
  std::shared_ptr<detection::FasterRcnnFeatureExtractor> extractor;

  detection::GridAnchorGeneratorOptions anchors;
  int64_t atrous_rate = 1;
  ConvHyperparams rpn_hyperparams;
  int64_t rpn_kernel_size = 3;
  int64_t rpn_depth = 512;
  int64_t first_stage_minibatch_size = 256;
  double first_stage_positive_fraction = 0.5;
  float first_stage_nms_score_threshold = 0.0f;
  float first_stage_nms_iou_threshold = 0.7f;
  int64_t first_stage_max_proposals = 300;
  double first_stage_localization_weight = 1.0;
  double first_stage_objectness_weight = 1.0;
  bool clip_anchors_to_image = false;

  int64_t initial_crop_size = 14;
  int64_t maxpool_kernel_size = 2;
  int64_t maxpool_stride = 2;
  // second_stage_box_predictor: the predictor its oneof's choice names
  // (detection::faster_rcnn_second_stage_box_predictors()).
  std::shared_ptr<detection::SecondStageBoxPredictor> second_stage_box_predictor;
  int64_t second_stage_batch_size = 64;
  double second_stage_balance_fraction = 0.25;
  MultiClassNmsAttrs second_stage_nms;  // max_detections_per_class, max_total_detections, IoU
  // second_stage_post_processing.score_converter (detection::score_converters()).
  detection::ScoreConverterFn score_converter;
  double logit_scale = 1.0;
  double second_stage_localization_weight = 1.0;
  double second_stage_classification_weight = 1.0;
  // Mask R-CNN: the mask loss's weight, when the box predictor predicts instance masks.
  double second_stage_mask_prediction_loss_weight = 1.0;

  // The API's third stage (number_of_stages 3 with a predictor that predicts instance masks):
  // mask predictions on the proposals in training, detection_masks in inference.
  bool predicts_instance_masks() const {
    return number_of_stages == 3 && second_stage_box_predictor &&
           second_stage_box_predictor->predicts_instance_masks();
  }
  std::shared_ptr<const detection::ClassificationLoss> second_stage_classification_loss;
  // hard_example_miner: every proposal goes to the box classifier in training (no sampling) and
  // the loss sums the mined ones'.
  std::optional<detection::HardExampleMinerOptions> hard_example_miner;
};

// The config the options of kFasterRcnnOptions describe (faster_rcnn_options.cc). Throws
// InvalidArgument (or Unimplemented) naming the option for a value the model does not support.
FasterRcnnConfig faster_rcnn_config_from_options(const Options& options);

// The first `num` of each image's `m` slots (num i32 [B]) as a bool [B, m, 1] mask, as ops.
Tensor leading_slots(const Tensor& num, int64_t m);

class FasterRcnnMetaArch final : public DetectionModel {
 public:
  static constexpr const auto& kOptions = kFasterRcnnOptions;

  explicit FasterRcnnMetaArch(const Options& options);
  explicit FasterRcnnMetaArch(FasterRcnnConfig config);

  int64_t num_classes() const override { return num_classes_; }
  PreprocessedImages preprocess(ModelContext& ctx, const Tensor& images) override;
  TensorDict predict(ModelContext& ctx, const PreprocessedImages& inputs, Mode mode) override;
  TensorDict postprocess(ModelContext& ctx, const TensorDict& prediction_dict,
                         const Tensor& true_image_shapes) override;
  TensorDict loss(ModelContext& ctx, const TensorDict& prediction_dict,
                  const Tensor& true_image_shapes) override;
  void provide_groundtruth(Groundtruth groundtruth) override;
  std::map<std::string, std::string> restore_map(const std::string& fine_tune_checkpoint_type,
                                                 bool load_all_detection_checkpoint_vars) override;

  const FasterRcnnConfig& config() const { return config_; }
  // The RPN's anchors [A, 4] of the last predict() (normalized to the preprocessed image): in
  // training those inside the image, otherwise all of them clipped to it.
  const std::vector<float>& anchors() const { return anchors_; }
  // The proposals of image b of the last predict() [n_b, 4] (normalized), best first: in
  // training the sampled ones, otherwise all that survived NMS (read from the device when first
  // asked for).
  const std::vector<std::vector<float>>& proposals() const {
    ensure_host_proposals();
    return proposals_;
  }
  const std::vector<std::vector<float>>& proposal_scores() const {
    ensure_host_proposals();
    return proposal_scores_;
  }

 private:
  void update_anchors(int64_t feature_height, int64_t feature_width, bool training);
  // clip_to_true: clip to each image's true extent (the RPN's own detections) rather than to the
  // padded image (the second stage's proposals).
  void compute_proposals(const Tensor& box_encodings, const Tensor& objectness_logits,
                         bool clip_to_true);
  // proposals_ and proposal_scores_ from the proposal tensors, where they are not read yet.
  void ensure_host_proposals() const;
  void sample_proposals(ModelContext& ctx);
  void add_proposals(ModelContext& ctx, TensorDict& out) const;
  // The second stage's box features and the box predictor's predictions of `boxes` (f32 [R, 4]
  // normalized, R > 0) of images `box_index` (i32 [R]) cropped from `features`.
  detection::SecondStageBoxPredictions predict_box_classifier(ModelContext& ctx, Mode mode,
                                                              const Tensor& features,
                                                              const Tensor& boxes,
                                                              const Tensor& box_index,
                                                              Tensor* box_features = nullptr);
  // The rows of the box classifier's predictions that are real proposals, in the order of
  // proposals(): all of them after a predict() in training, those of each image's first
  // num_proposals slots after one in inference.
  Tensor real_proposal_rows(const Tensor& predictions) const;
  TensorDict postprocess_first_stage(ModelContext& ctx) const;
  // Each image's true height and width over the padded image's, twice ([ymin, xmin, ymax,
  // xmax] order): f32 [B, 1, 4], or [1, 1, 4] when the images share them.
  Tensor true_extent(Backend& backend) const;
  // The second stage's predictions by proposal slot: proposals f32 [B, M, 4] (zero rows past an
  // image's num_proposals i32 [B]), refined [B * M, box_sets, 4], logits [B * M, classes + 1].
  struct SlotPredictions {
    Tensor proposals;
    Tensor num_proposals;
    Tensor refined;
    Tensor logits;
  };
  SlotPredictions slot_predictions(ModelContext& ctx, const Tensor& refined,
                                   const Tensor& logits) const;
  std::vector<float> labels_with_background(std::size_t image) const;
  std::vector<float> groundtruth_boxes(std::size_t image) const;
  std::vector<float> groundtruth_weights(std::size_t image) const;
  // Mask R-CNN (faster_rcnn_meta_arch_masks.cc): the mask loss of _loss_box_classifier on the
  // detector target assigner's assignments of loss() (one per image, empty where the image has
  // no proposals), and the third stage's detection_masks of the detections in `detections`
  // (postprocess()).
  Tensor mask_loss(ModelContext& ctx, const TensorDict& prediction_dict,
                   std::span<const detection::TargetAssignment> assignments) const;
  void add_detection_masks(ModelContext& ctx, const TensorDict& prediction_dict,
                           TensorDict& detections) const;

  FasterRcnnConfig config_;
  int64_t num_classes_ = 0;
  Groundtruth groundtruth_;

  // State of the last predict(), for loss() and postprocess().
  int64_t image_height_ = 0;  // the preprocessed (padded) image
  int64_t image_width_ = 0;
  std::vector<std::array<float, 2>> true_fraction_;  // per image: true height, width / padded
  int64_t feature_height_ = -1;
  int64_t feature_width_ = -1;
  bool anchors_training_ = false;
  std::vector<float> anchors_;           // [A, 4] normalized
  std::vector<int64_t> anchor_indices_;  // their index among the generator's anchors
  // The first stage's NMS of the last predict(), on the device: boxes f32 [B, M, 4] (normalized,
  // zero rows after an image's own), scores f32 [B, M], num_proposals i32 [B], M the most
  // proposals (first_stage_max_proposals).
  Tensor proposal_boxes_;
  Tensor proposal_score_values_;
  Tensor num_proposals_;
  // Whether the last predict() ran the second stage on every one of the B * M slots (inference,
  // as the API's predict does; postprocess and loss pick the real ones by num_proposals) rather
  // than on proposals_ (training's samples).
  bool padded_second_stage_ = false;
  // proposals_ / proposal_scores_: per image, read from the tensors above on demand (in training
  // at once, and then sampled).
  mutable bool host_proposals_read_ = true;
  mutable std::vector<std::vector<float>> proposals_;
  mutable std::vector<std::vector<float>> proposal_scores_;
};

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_FASTER_RCNN_META_ARCH_H_
