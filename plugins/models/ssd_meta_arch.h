// SSDMetaArch: the Object Detection API's single-shot detector (meta_architectures/
// ssd_meta_arch.py) as a DetectionModel, with the MobileNet v1 feature extractor
// (models/ssd_mobilenet_v1_feature_extractor.py, feature_map_generators.
// multi_resolution_feature_maps) and the convolutional box predictor
// (predictors/convolutional_box_predictor.py), built from pkg/nets, pkg/layers and
// pkg/detection.
//
// Variable names are the API's, so its checkpoints restore by name:
//   FeatureExtractor/MobilenetV1/Conv2d_0/weights ... Conv2d_13_pointwise/BatchNorm/beta
//   FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_256/weights (extra layers)
//   BoxPredictor_<i>/BoxEncodingPredictor/{weights,biases}, BoxPredictor_<i>/ClassPredictor/...
//
// SsdConfig holds the `ssd` message of a pipeline.config as the model uses it; ssd_options.cc
// reads it from the plugin's options (the message's fields flattened to dotted paths).
#ifndef TRAINYARD_PLUGINS_MODELS_SSD_META_ARCH_H_
#define TRAINYARD_PLUGINS_MODELS_SSD_META_ARCH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "detection_options.h"
#include "ssd_options.h"
#include "trainyard/detection_model.h"
#include "trainyard/options.h"
#include "trainyard/pkg/detection/anchor_generator.h"
#include "trainyard/pkg/detection/box_coder.h"
#include "trainyard/pkg/detection/hard_example_miner.h"
#include "trainyard/pkg/detection/losses.h"
#include "trainyard/pkg/detection/matcher.h"
#include "trainyard/pkg/detection/non_max_suppression.h"
#include "trainyard/pkg/detection/score_converter.h"
#include "trainyard/pkg/detection/target_assigner.h"
#include "trainyard/pkg/layers/layers.h"

namespace trainyard::models {

struct SsdConfig {
  // feature_extractor
  std::string feature_extractor_type = "ssd_mobilenet_v1";
  double depth_multiplier = 1.0;
  int64_t min_depth = 16;
  int64_t pad_to_multiple = 1;
  bool use_explicit_padding = false;
  bool use_depthwise = false;
  ConvHyperparams extractor_hyperparams;
  bool override_base_feature_extractor_hyperparams = false;
  bool freeze_batchnorm = false;

  // box_predictor { convolutional_box_predictor }
  ConvHyperparams predictor_hyperparams;
  int64_t predictor_min_depth = 0;
  int64_t predictor_max_depth = 0;
  int64_t num_layers_before_predictor = 0;
  bool use_dropout = true;
  double dropout_keep_probability = 0.8;
  int64_t kernel_size = 1;
  int64_t box_code_size = 4;
  bool apply_sigmoid_to_scores = false;
  double class_prediction_bias_init = 0.0;
  bool predictor_use_depthwise = false;

  detection::SsdAnchorGeneratorOptions anchors;
  std::shared_ptr<const detection::BoxCoder> box_coder;
  std::shared_ptr<const detection::Matcher> matcher;
  std::shared_ptr<const detection::RegionSimilarityCalculator> similarity;
  double negative_class_weight = 1.0;
  bool encode_background_as_zeros = false;

  // loss
  std::shared_ptr<const detection::LocalizationLoss> localization_loss;
  std::shared_ptr<const detection::ClassificationLoss> classification_loss;
  std::optional<detection::HardExampleMinerOptions> hard_example_miner;
  double classification_weight = 1.0;
  double localization_weight = 1.0;
  bool normalize_loss_by_num_matches = true;
  bool normalize_loc_loss_by_codesize = false;

  // post_processing
  MultiClassNmsAttrs nms;  // the batch_multiclass_non_max_suppression op's
  detection::ScoreConverter score_converter = detection::ScoreConverter::kIdentity;
  double logit_scale = 1.0;
};

// The config the options of kSsdOptions describe (ssd_options.cc). Throws InvalidArgument naming
// the option for a value or combination the model does not support.
SsdConfig ssd_config_from_options(const Options& options);

class SsdMetaArch final : public DetectionModel {
 public:
  static constexpr const auto& kOptions = kSsdOptions;

  explicit SsdMetaArch(const Options& options);
  explicit SsdMetaArch(SsdConfig config);

  int64_t num_classes() const override { return num_classes_; }
  PreprocessedImages preprocess(ModelContext& ctx, const Tensor& images) override;
  TensorDict predict(ModelContext& ctx, const PreprocessedImages& inputs, Mode mode) override;
  TensorDict postprocess(ModelContext& ctx, const TensorDict& prediction_dict,
                         const Tensor& true_image_shapes) override;
  TensorDict loss(ModelContext& ctx, const TensorDict& prediction_dict,
                  const Tensor& true_image_shapes) override;
  void provide_groundtruth(Groundtruth groundtruth) override;
  std::map<std::string, std::string> restore_map(
      const std::string& fine_tune_checkpoint_type) override;

  const SsdConfig& config() const { return config_; }
  // The anchors [A, 4] of the last predict(), normalized [ymin, xmin, ymax, xmax].
  const std::vector<float>& anchors() const { return anchors_; }

 private:
  std::vector<Tensor> feature_maps(layers::VariableScope& root, const Tensor& images);

  SsdConfig config_;
  int64_t num_classes_ = 0;
  Groundtruth groundtruth_;
  std::vector<float> anchors_;
  std::vector<detection::FeatureMapShape> anchor_shapes_;
};

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_SSD_META_ARCH_H_
