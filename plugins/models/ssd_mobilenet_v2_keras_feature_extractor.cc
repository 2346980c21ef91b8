// ssd_mobilenet_v2_keras: the Object Detection API's SSDMobileNetV2KerasFeatureExtractor
// (models/ssd_mobilenet_v2_keras_feature_extractor.py, on models/keras_applications/
// mobilenet_v2.py). The network is ssd_mobilenet_v2's: the Keras MobileNetV2 with the API's
// layer overrides (SAME padding or fixed padding and VALID with use_explicit_padding, min_depth
// on every convolution but the expansions, Conv_1 at 1280 x alpha for alpha < 1) to
// block_13_expand_relu (layer_15/expansion_output) and out_relu (layer_19), then
// KerasMultiResolutionFeatureMaps with the same layout. What differs:
//   - the variables' names (keras_variable_names.h), under the Keras model's own name,
//     ssd_mobile_net_v2_keras_feature_extractor/, as the API's graph names them (model_builder
//     gives the extractor no name); SSDMetaArch's box predictor takes its Keras names too
//     (is_keras_model(), box_predictor_builder.build_keras);
//   - batch norm: every layer, base and new, normalizes with the batch's statistics exactly when
//     training without freeze_batchnorm (FreezableBatchNorm's training = is_training and not
//     freeze_batchnorm); batch_norm.train is ignored and beta and gamma stay trainable
//     (KerasLayerHyperparams reads decay, center, scale and epsilon only);
//   - residual sums: the Keras application's rule (MobilenetV2Options::keras_residuals), which
//     drops some where min_depth raises a block's depth;
//   - with override_base_feature_extractor_hyperparams, the depthwise weights keep Keras'
//     glorot_uniform and no regularizer (the application hands DepthwiseConv2D kernel_* arguments
//     it does not read), where slim's arg scope gives them conv_hyperparams' initializer and L2.
// With override_base_feature_extractor_hyperparams the base takes conv_hyperparams' batch norm,
// initializer and activation; only RELU_6 and a batch norm are taken here (the slim base keeps
// relu6 and batch norm whatever the config says, the Keras one would not).
#include <memory>
#include <string>
#include <vector>

#include "detection_parts.h"
#include "keras_variable_names.h"
#include "ssd_extractor_common.h"
#include "trainyard/pkg/layers/batch_norm_activation.h"

namespace trainyard::models {
namespace {

constexpr const char* kType = "ssd_mobilenet_v2_keras";
// The name tf.keras gives SSDMobileNetV2KerasFeatureExtractor (its class name in snake case).
constexpr const char* kKerasScope = "ssd_mobile_net_v2_keras_feature_extractor";

class SsdMobilenetV2KerasExtractor final : public detection::SsdFeatureExtractor {
 public:
  explicit SsdMobilenetV2KerasExtractor(std::unique_ptr<detection::SsdFeatureExtractor> slim)
      : slim_(std::move(slim)) {}

  Tensor preprocess(const Tensor& resized_images) const override {
    return slim_->preprocess(resized_images);
  }
  int64_t min_image_dimension() const override { return slim_->min_image_dimension(); }
  bool is_keras_model() const override { return true; }

  // The slim network's variables, each created under its Keras name.
  std::vector<Tensor> extract_features(layers::VariableScope& scope,
                                       const Tensor& images) override {
    const std::string slim_scope = scope.full_name("MobilenetV2");
    RenamedModelContext keras(scope.context(), [slim_scope](const std::string& name) {
      return keras_mobilenet_v2_name(name, slim_scope, kKerasScope);
    });
    layers::VariableScope root(keras, scope.mode());
    layers::VariableScope extractor = root.child(scope.name());
    return slim_->extract_features(extractor, images);
  }

  // SSDKerasFeatureExtractor's: the variables under "<feature_extractor_scope>/", which the
  // Keras names never are, so a classification checkpoint restores nothing (as in the API).
  std::map<std::string, std::string> restore_from_classification_checkpoint(
      const std::string& feature_extractor_scope) const override {
    (void)feature_extractor_scope;
    return {};
  }

 private:
  std::unique_ptr<detection::SsdFeatureExtractor> slim_;
};

}  // namespace

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v2_keras_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options) {
  refuse_fpn(options, kType);
  detection::SsdFeatureExtractorParams keras = params;
  std::optional<layers::BatchNormOptions>& bn = keras.conv_hyperparams.batch_norm;
  if (bn) {
    bn->trainable = true;
    bn->is_training = params.freeze_batchnorm ? std::optional<bool>(false) : std::nullopt;
  }
  if (params.override_base_feature_extractor_hyperparams) {
    const std::string h = "feature_extractor.conv_hyperparams";
    if (!bn) {
      options.refuse(h + ".batch_norm", "unset",
                     std::string("a batch_norm message: ") + kType +
                         " with override_base_feature_extractor_hyperparams takes its base's "
                         "batch norms from it (the Keras MobileNetV2 without one has none)");
    }
    if (keras.conv_hyperparams.activation.batch_norm_fusable() !=
        std::optional<layers::NormActivation>(layers::NormActivation::kRelu6)) {
      options.refuse(h + ".activation", "other than RELU_6",
                     std::string("RELU_6: ") + kType +
                         " with override_base_feature_extractor_hyperparams takes its base's "
                         "activations from it, and only MobileNetV2's own relu6 is built");
    }
  }
  if (params.use_depthwise) {
    options.refuse("feature_extractor.use_depthwise", "true",
                   std::string("false: ") + kType +
                       "'s depthwise feature maps are not compared with the API's");
  }
  keras.type = kType;
  return std::make_unique<SsdMobilenetV2KerasExtractor>(std::make_unique<MobilenetSsdExtractor>(
      kType, keras,
      [](layers::VariableScope& extractor, const Tensor& images,
         const detection::SsdFeatureExtractorParams& c) {
        return ssd_mobilenet_v2_feature_maps(extractor, images, c, /*keras_application=*/true);
      }));
}

}  // namespace trainyard::models
