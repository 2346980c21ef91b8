// The feature extractor of an SSD (meta_architectures/ssd_meta_arch.py's SSDFeatureExtractor):
// the backbone and its extra layers, giving the feature maps the box predictor works on, and
// the registry SSDMetaArch finds one in by its `feature_extractor.type` (model_builder.py's
// SSD_FEATURE_EXTRACTOR_CLASS_MAP).
//
// Contract: SSDMetaArch calls preprocess() on the resized images, then, in each forward pass,
// extract_features() under the variable scope "FeatureExtractor" (kSsdFeatureExtractorScope,
// the API's _extract_features_scope), so the extractor's variables are
// FeatureExtractor/<its net's scope>/... and the API's checkpoints restore by those names. An
// extractor may keep state between calls (one SSDMetaArch owns it and calls it from one thread
// at a time). Extractors throw InvalidArgument naming the config field or the input's shape.
#ifndef TRAINYARD_PKG_DETECTION_SSD_FEATURE_EXTRACTOR_H_
#define TRAINYARD_PKG_DETECTION_SSD_FEATURE_EXTRACTOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/pkg/detection/model_options.h"
#include "trainyard/pkg/detection/part_registry.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/tensor.h"

namespace trainyard::detection {

inline constexpr const char* kSsdFeatureExtractorScope = "FeatureExtractor";

// The SsdFeatureExtractor message (protos/ssd.proto) as every extractor takes it, and the
// model's freeze_batchnorm.
struct SsdFeatureExtractorParams {
  std::string type;
  double depth_multiplier = 1.0;
  int64_t min_depth = 16;
  int64_t pad_to_multiple = 1;
  bool use_explicit_padding = false;
  bool use_depthwise = false;
  ConvHyperparams conv_hyperparams;
  bool override_base_feature_extractor_hyperparams = false;
  // SSDMetaArch.predict's arg_scope([batch_norm], is_training=is_training and not
  // freeze_batchnorm), which reaches what is built outside a conv_hyperparams scope.
  bool freeze_batchnorm = false;
};

class SsdFeatureExtractor {
 public:
  virtual ~SsdFeatureExtractor() = default;

  // Resized images [batch, height, width, 3] with values in [0, 255] (any dtype) to the
  // network's input, f32.
  virtual Tensor preprocess(const Tensor& resized_images) const = 0;

  // The feature maps [batch, h_i, w_i, depth_i], highest resolution first, built under `scope`
  // (the "FeatureExtractor" child of the model's root scope).
  virtual std::vector<Tensor> extract_features(layers::VariableScope& scope,
                                               const Tensor& preprocessed_images) = 0;

  // The smallest image height and width the extractor takes (shape_utils.check_min_image_dim
  // in its extract_features); SSDMetaArch refuses a fixed_shape_resizer below it when the model
  // is built, so that `config check` says what training would.
  virtual int64_t min_image_dimension() const { return 1; }

  // The only image height and width the extractor takes, if it takes one size only (the API's
  // embedded_ssd_mobilenet_v1: 256); SSDMetaArch refuses another fixed_shape_resizer, as above.
  virtual std::optional<int64_t> exact_image_dimension() const { return std::nullopt; }

  // Whether the API builds it as a Keras model (SSD_KERAS_FEATURE_EXTRACTOR_CLASS_MAP): its
  // box predictor is then box_predictor_builder.build_keras's, with Keras variable names.
  virtual bool is_keras_model() const { return false; }

  // restore_from_classification_checkpoint_fn: checkpoint prefix by model prefix, for a
  // classification checkpoint whose names lack the `feature_extractor_scope` ("FeatureExtractor")
  // prefix. The default maps "<scope>/" to "".
  virtual std::map<std::string, std::string> restore_from_classification_checkpoint(
      const std::string& feature_extractor_scope) const;
};

// Makes an extractor from the common message fields; `options` holds the whole model's options
// (for fields only one extractor reads, under "feature_extractor.").
using SsdFeatureExtractorFactory = std::function<std::unique_ptr<SsdFeatureExtractor>(
    const SsdFeatureExtractorParams& params, const DetectionOptionReader& options)>;

// The process-wide table of these extractors (part_registry.h).
PartRegistry<SsdFeatureExtractorFactory>& ssd_feature_extractors();

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_SSD_FEATURE_EXTRACTOR_H_
