// SSDMetaArch: the Object Detection API's single-shot detector (meta_architectures/
// ssd_meta_arch.py) as a DetectionModel, built from pkg/layers and pkg/detection: the feature
// extractor and the box predictor are the parts registered under the config's
// feature_extractor.type and box_predictor choice (pkg/detection's ssd_feature_extractor.h and
// box_predictor.h; this plugin's are listed in detection_parts.h), as model_builder.py builds
// them, so a new backbone or predictor needs no change here.
//
// Variable names are the API's, so its checkpoints restore by name: the extractor's under
// FeatureExtractor/ (ssd_mobilenet_v1: FeatureExtractor/MobilenetV1/Conv2d_0/weights ...), the
// predictor's as it names them (convolutional_box_predictor:
// BoxPredictor_<i>/BoxEncodingPredictor/{weights,biases}, BoxPredictor_<i>/ClassPredictor/...).
//
// SsdConfig holds the `ssd` message of a pipeline.config as the model uses it; ssd_options.cc
// reads it from the plugin's options (the message's fields flattened to dotted paths).
//
// Images of several sizes (keep_aspect_ratio_resizer): the anchors are those of the preprocessed
// batch's feature maps, normalized to the batch's extent. An image smaller than that extent
// (pad_to_max_dimension, or a batch the host padded to its largest image because its images
// resized to different shapes) sits at the top left: loss() moves its groundtruth (normalized to
// the image) into the batch's frame, as the API's input pipeline realigns groundtruth to the
// padded image (inputs.py's change_coordinate_frame with im_box), and postprocess() clips the
// detections to the image's window (SSDMetaArch._compute_clip_window) and gives them normalized
// to the image again, as the API's evaluation does (eval_util's
// _scale_box_to_normalized_true_image). Where the API's trainer would fail to concatenate a
// batch whose images resize to different shapes, Trainyard trains on it padded; with one shape
// per batch (every fixed_shape_resizer batch, and keep_aspect_ratio_resizer after a fixed
// aspect-ratio crop) nothing is padded and every number is the API's.
#ifndef TRAINYARD_PLUGINS_MODELS_SSD_META_ARCH_H_
#define TRAINYARD_PLUGINS_MODELS_SSD_META_ARCH_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "detection_options.h"
#include "image_resizer.h"
#include "ssd_options.h"
#include "trainyard/detection_model.h"
#include "trainyard/options.h"
#include "trainyard/pkg/detection/anchor_generator.h"
#include "trainyard/pkg/detection/box_coder.h"
#include "trainyard/pkg/detection/box_predictor.h"
#include "trainyard/pkg/detection/hard_example_miner.h"
#include "trainyard/pkg/detection/losses.h"
#include "trainyard/pkg/detection/matcher.h"
#include "trainyard/pkg/detection/non_max_suppression.h"
#include "trainyard/pkg/detection/part_builders.h"
#include "trainyard/pkg/detection/ssd_feature_extractor.h"
#include "trainyard/pkg/detection/target_assigner.h"
#include "trainyard/pkg/layers/quantize.h"

namespace trainyard::models {

struct SsdConfig {
  // image_resizer: with keep_aspect_ratio_resizer, preprocess() resizes each image
  // (true_image_shapes are the resized sizes); without it (fixed_shape_resizer) the input pipeline
  // has resized them (the config converter adds the resize_image step).
  std::optional<KeepAspectRatioResizer> keep_aspect_ratio_resizer;
  // feature_extractor, and the extractor its type names (detection::ssd_feature_extractors()).
  detection::SsdFeatureExtractorParams feature_extractor;
  std::shared_ptr<detection::SsdFeatureExtractor> extractor;
  // box_predictor: the predictor its oneof's choice names (detection::ssd_box_predictors()).
  std::string box_predictor_type = "convolutional_box_predictor";
  std::shared_ptr<detection::BoxPredictor> box_predictor;

  // anchor_generator: the generator its oneof's choice names (detection::anchor_generators()).
  std::string anchor_generator_type = "ssd_anchor_generator";
  std::shared_ptr<const detection::AnchorGenerator> anchor_generator;
  std::shared_ptr<const detection::BoxCoder> box_coder;
  std::shared_ptr<const detection::Matcher> matcher;
  std::shared_ptr<const detection::RegionSimilarityCalculator> similarity;
  double negative_class_weight = 1.0;
  bool encode_background_as_zeros = false;
  // With add_background_class false the class predictions have num_classes slots and no
  // background column: the groundtruth's one-hot classes are the targets as they are, an
  // unmatched anchor's is the first slot (or zeros with encode_background_as_zeros), and every
  // slot is a detection class.
  bool add_background_class = true;

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
  // post_processing.score_converter (detection::score_converters()).
  detection::ScoreConverterFn score_converter;
  double logit_scale = 1.0;

  // The pipeline's graph_rewriter.quantization: every layer of the feature extractor and the box
  // predictor quantized as contrib.quantize places it (trainyard/pkg/layers/quantize.h).
  std::optional<layers::QuantizeOptions> quantize;
};

// The config the options of kSsdOptions describe (ssd_options.cc), with its extractor and box
// predictor made by the registered factories. Throws InvalidArgument naming the option for a
// value or combination the model does not support, and for a part name that is not registered
// (listing the registered ones).
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
  std::map<std::string, std::string> restore_map(const std::string& fine_tune_checkpoint_type,
                                                 bool load_all_detection_checkpoint_vars) override;

  const SsdConfig& config() const { return config_; }
  // The anchors [A, 4] of the last predict(), normalized [ymin, xmin, ymax, xmax] to the
  // preprocessed (padded) batch.
  const std::vector<float>& anchors() const { return anchors_; }

 private:
  // Each image's true {height, width} in the last predict()'s preprocessed batch: the batch's
  // extent unless preprocess() padded (pad_to_max_dimension) or the host padded the batch to its
  // largest image. Throws InvalidArgument for a shape outside the batch.
  std::vector<std::array<int64_t, 2>> true_sizes(const Tensor& true_image_shapes, int64_t batch,
                                                 const char* call) const;

  SsdConfig config_;
  int64_t num_classes_ = 0;
  Groundtruth groundtruth_;
  std::vector<float> anchors_;
  std::vector<detection::FeatureMapShape> anchor_shapes_;
  int64_t image_height_ = 0;  // the last predict()'s preprocessed images
  int64_t image_width_ = 0;
  // The ModelContext::seed() of the last training pass (layers::counts_quantization_step).
  std::optional<uint64_t> quantization_step_seed_;
};

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_SSD_META_ARCH_H_
