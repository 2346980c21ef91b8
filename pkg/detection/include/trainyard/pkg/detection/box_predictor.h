// The box predictors of a detector (core/box_predictor.py's BoxPredictor): SSD's, per feature
// map box encodings and class predictions for each anchor, and Faster R-CNN's second stage's,
// per proposal; each with the registry a meta-architecture finds one in by the choice of its
// box predictor oneof (builders/box_predictor_builder.py).
//
// Contract: predict() runs in each forward pass under the model's root scope and names its
// variables as the API's predictor does (ConvolutionalBoxPredictor: BoxPredictor_<i>/... for
// feature map i), so the API's checkpoints restore by those names. A predictor may keep state
// between calls (one model owns it and calls it from one thread at a time). It throws
// InvalidArgument naming the config field or the shapes that disagree.
#ifndef TRAINYARD_PKG_DETECTION_BOX_PREDICTOR_H_
#define TRAINYARD_PKG_DETECTION_BOX_PREDICTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/pkg/detection/model_options.h"
#include "trainyard/pkg/detection/part_registry.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/tensor.h"

namespace trainyard::detection {

// BoxPredictor.predict's dict: one tensor per feature map.
struct BoxPredictions {
  std::vector<Tensor> box_encodings;                      // [batch, anchors_i, box_code_size]
  std::vector<Tensor> class_predictions_with_background;  // [batch, anchors_i, num_classes + 1]
};

class BoxPredictor {
 public:
  virtual ~BoxPredictor() = default;

  // The length of one box encoding (the box coder's code size must equal it).
  virtual int64_t box_code_size() const = 0;

  // Whether the predictor takes these numbers of anchors per location (one per feature map);
  // SSDMetaArch refuses the anchor generator otherwise when the model is built, so that `config
  // check` says what predict() would. Every combination by default.
  virtual bool accepts_anchors_per_location(const std::vector<int64_t>& per_location) const {
    (void)per_location;
    return true;
  }

  // `feature_maps[i]` [batch, h_i, w_i, depth_i] with `num_predictions_per_location[i]` anchors
  // at each cell, for `num_classes` classes without background.
  virtual BoxPredictions predict(layers::VariableScope& root,
                                 const std::vector<Tensor>& feature_maps,
                                 const std::vector<int64_t>& num_predictions_per_location,
                                 int64_t num_classes) = 0;
};

// Makes a predictor from the model's options; `prefix` is the path of the chosen message
// ("box_predictor.convolutional_box_predictor"), whose fields it reads.
using BoxPredictorFactory = std::function<std::unique_ptr<BoxPredictor>(
    const DetectionOptionReader& options, const std::string& prefix)>;

// The process-wide table of SSD box predictors (part_registry.h).
PartRegistry<BoxPredictorFactory>& ssd_box_predictors();

// The box predictor of a Faster R-CNN's second stage (the API's MaskRCNNBoxPredictor as
// FasterRCNNMetaArch._predict_second_stage calls it, scope "SecondStageBoxPredictor"): for each
// proposal, refined box encodings per class (or one set the classes share) and class
// predictions, from the box classifier's features.
struct SecondStageBoxPredictions {
  Tensor refined_box_encodings;              // [proposals, num_box_sets, 4]
  Tensor class_predictions_with_background;  // [proposals, num_classes + 1]
};

class SecondStageBoxPredictor {
 public:
  virtual ~SecondStageBoxPredictor() = default;

  // 1 when the classes share one box, else num_classes (the refined encodings' second axis,
  // also for a batch without proposals, where predict() is not called).
  virtual int64_t num_box_sets(int64_t num_classes) const = 0;

  // `box_classifier_features` [proposals, h, w, depth], built under `scope`
  // ("SecondStageBoxPredictor"), for `num_classes` classes without background.
  virtual SecondStageBoxPredictions predict(layers::VariableScope& scope,
                                            const Tensor& box_classifier_features,
                                            int64_t num_classes) = 0;

  // True for a predictor that crops the proposals itself, as R-FCN's (rfcn_meta_arch.py): the
  // meta-architecture then runs the second-stage feature extractor on the whole feature maps
  // instead of on crops, and calls predict_from_proposals instead of predict.
  virtual bool crops_proposals() const { return false; }

  // `box_classifier_features` [batch, h, w, depth] of whole images, `proposal_boxes` [batch,
  // max_proposals, 4] normalized (y1, x1, y2, x2), zero-padded, without gradient: predictions
  // for the batch * max_proposals boxes, image by image. The default throws InvalidArgument (a
  // predictor whose crops_proposals() is false).
  virtual SecondStageBoxPredictions predict_from_proposals(layers::VariableScope& scope,
                                                           const Tensor& box_classifier_features,
                                                           const Tensor& proposal_boxes,
                                                           int64_t num_classes);

  // True for a predictor with Mask R-CNN's mask head (the API's third-stage heads,
  // MaskRCNNBoxPredictor with predict_instance_masks): the meta-architecture then calls
  // predict_instance_masks on the box classifier's features.
  virtual bool predicts_instance_masks() const { return false; }

  // The mask head on `box_classifier_features` [proposals, h, w, depth], built under `scope`
  // ("SecondStageBoxPredictor"): mask logits [proposals, num_masks, mask_height, mask_width],
  // num_masks 1 for class-agnostic masks, else num_classes. The default throws InvalidArgument
  // (a predictor whose predicts_instance_masks() is false).
  virtual Tensor predict_instance_masks(layers::VariableScope& scope,
                                        const Tensor& box_classifier_features, int64_t num_classes);
};

using SecondStageBoxPredictorFactory = std::function<std::unique_ptr<SecondStageBoxPredictor>(
    const DetectionOptionReader& options, const std::string& prefix)>;

// The process-wide table of Faster R-CNN second-stage box predictors (part_registry.h).
PartRegistry<SecondStageBoxPredictorFactory>& faster_rcnn_second_stage_box_predictors();

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_BOX_PREDICTOR_H_
