// The feature extractor of a Faster R-CNN (meta_architectures/faster_rcnn_meta_arch.py's
// FasterRCNNFeatureExtractor): the first stage's features the RPN works on, and the second
// stage's features of the cropped proposals, with the registry FasterRCNNMetaArch finds one in
// by its `feature_extractor.type` (model_builder.py's FASTER_RCNN_FEATURE_EXTRACTOR_CLASS_MAP).
//
// Contract: FasterRCNNMetaArch calls preprocess() on the resized (and padded) images, then in
// each forward pass extract_proposal_features() under the scope "FirstStageFeatureExtractor"
// and extract_box_classifier_features() under "SecondStageFeatureExtractor" (the API's
// first_stage_feature_extractor_scope and second_stage_feature_extractor_scope), so the API's
// checkpoints restore by the same names. An extractor may keep state between calls (one model
// owns it and calls it from one thread at a time). Extractors throw InvalidArgument naming the
// config field or the input's shape.
#ifndef TRAINYARD_PKG_DETECTION_FASTER_RCNN_FEATURE_EXTRACTOR_H_
#define TRAINYARD_PKG_DETECTION_FASTER_RCNN_FEATURE_EXTRACTOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "trainyard/pkg/detection/model_options.h"
#include "trainyard/pkg/detection/part_registry.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/tensor.h"

namespace trainyard::detection {

inline constexpr const char* kFirstStageFeatureExtractorScope = "FirstStageFeatureExtractor";
inline constexpr const char* kSecondStageFeatureExtractorScope = "SecondStageFeatureExtractor";

// The FasterRcnnFeatureExtractor message (protos/faster_rcnn.proto) as every extractor takes it.
struct FasterRcnnFeatureExtractorParams {
  std::string type;
  int64_t first_stage_features_stride = 16;
  // Batch norm in training mode while training (otherwise in inference mode).
  bool batch_norm_trainable = false;
  // override_base_feature_extractor_hyperparams: the net's weight decay and batch norm decay
  // and epsilon from conv_hyperparams instead of its arg scope's; nullopt when not overridden.
  std::optional<ConvHyperparams> conv_hyperparams;
};

class FasterRcnnFeatureExtractor {
 public:
  virtual ~FasterRcnnFeatureExtractor() = default;

  // Resized images [batch, height, width, 3], f32 in [0, 255], to the network's input.
  virtual Tensor preprocess(const Tensor& resized_images) const = 0;

  // extract_proposal_features: the RPN's feature map [batch, h, w, depth] at
  // first_stage_features_stride, built under `scope` ("FirstStageFeatureExtractor").
  virtual Tensor extract_proposal_features(layers::VariableScope& scope,
                                           const Tensor& preprocessed_images) = 0;

  // extract_box_classifier_features: the features of the pooled crops [proposals, h, w, depth],
  // built under `scope` ("SecondStageFeatureExtractor").
  virtual Tensor extract_box_classifier_features(layers::VariableScope& scope,
                                                 const Tensor& proposal_crops) = 0;

  // restore_from_classification_checkpoint_fn: checkpoint prefix by model prefix, for a
  // classification checkpoint whose names lack the two scopes. The default maps "<first>/" and
  // "<second>/" to "".
  virtual std::map<std::string, std::string> restore_from_classification_checkpoint(
      const std::string& first_stage_scope, const std::string& second_stage_scope) const;
};

// Makes an extractor from the common message fields; `options` holds the whole model's options
// and names the model in errors (the factory checks the stride it supports, naming
// feature_extractor.first_stage_features_stride).
using FasterRcnnFeatureExtractorFactory = std::function<std::unique_ptr<FasterRcnnFeatureExtractor>(
    const FasterRcnnFeatureExtractorParams& params, const DetectionOptionReader& options)>;

// The process-wide table of these extractors (part_registry.h).
PartRegistry<FasterRcnnFeatureExtractorFactory>& faster_rcnn_feature_extractors();

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_FASTER_RCNN_FEATURE_EXTRACTOR_H_
