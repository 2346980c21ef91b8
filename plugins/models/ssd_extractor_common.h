// What the SSD feature extractors share (models/feature_map_generators.py and utils/ops.py of
// the Object Detection API): the extra feature maps an SSD builds on its base net's end points,
// the padding of the input to a multiple, and what the base net takes from the SSD's config.
#ifndef TRAINYARD_PLUGINS_MODELS_SSD_EXTRACTOR_COMMON_H_
#define TRAINYARD_PLUGINS_MODELS_SSD_EXTRACTOR_COMMON_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detection_options.h"
#include "trainyard/pkg/detection/ssd_feature_extractor.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/pkg/nets/nets.h"
#include "trainyard/tensor.h"

namespace trainyard::models {

// A feature_map_layout: per map, the base net's end point it is, or "" for a new layer of
// layer_depth channels (before the depth multiplier) made from the previous map by a stride 2
// convolution of conv_kernel_size.
struct FeatureMapLayer {
  const char* from_layer;        // "" for a new layer
  int64_t layer_depth;           // -1 for a base layer
  int64_t conv_kernel_size = 3;  // a new layer's; the layout's conv_kernel_size
};

struct FeatureMapLayout {
  std::vector<FeatureMapLayer> layers;
  bool use_explicit_padding = false;  // fixed padding and VALID for the strided convolutions
  bool use_depthwise = false;         // a 3x3 depthwise and a 1x1 convolution for each new map
};

// feature_map_generators.multi_resolution_feature_maps with insert_1x1_conv: each new map is a
// 1x1 convolution to half its depth, named <base>_1_Conv2d_<i>_1x1_<half>, then a k x k stride 2
// convolution <base>_2_Conv2d_<i>_<k>x<k>_s2_<depth> (with use_depthwise, <that>_depthwise and a
// 1x1 <that>), where <base> is the last from_layer and k the layer's conv_kernel_size; depth(d) =
// max(int(d * depth_multiplier), min_depth). Every new layer takes `hyperparams`. Returns the maps
// in the layout's order. Throws InvalidArgument when an end point the layout names is missing.
std::vector<Tensor> multi_resolution_feature_maps(layers::VariableScope& scope,
                                                  const FeatureMapLayout& layout,
                                                  double depth_multiplier, int64_t min_depth,
                                                  const ConvHyperparams& hyperparams,
                                                  const std::map<std::string, Tensor>& end_points);

// multi_resolution_feature_maps as the API's non-FPN extractors call it: `layers` on the base
// net's end points, under <extractor>/<net_scope> ("MobilenetV1"), with the extractor's
// padding, use_depthwise, depth multiplier, min_depth and conv_hyperparams.
std::vector<Tensor> extractor_feature_maps(layers::VariableScope& extractor,
                                           const std::string& net_scope,
                                           std::vector<FeatureMapLayer> layers,
                                           const detection::SsdFeatureExtractorParams& c,
                                           const std::map<std::string, Tensor>& end_points);

// The MobileNet extractors' preprocess: pixels in [0, 255] (any dtype) to f32 in [-1, 1],
// (2 / 255) x - 1.
Tensor scale_to_unit_range(const Tensor& resized_images);

// ops.nearest_neighbor_upsampling by 2: [B, H, W, C] to [B, 2H, 2W, C], each value repeated
// 2 x 2.
Tensor nearest_neighbor_upsampling(const Tensor& x);

// The FeaturePyramidNetworks message (protos/ssd.proto) as the FPN extractors take it.
struct FpnLevels {
  int64_t min_level = 3;
  int64_t max_level = 7;
  int64_t additional_layer_depth = 256;
};

// The `fpn` options of an FPN extractor, checked: min_level in [lowest, 5] (the levels a base
// net gives: 2 is stride 4), max_level in [min_level, 10]; InvalidArgument naming the option.
FpnLevels fpn_levels(const DetectionOptionReader& options, int64_t lowest);

// InvalidArgument naming feature_extractor.fpn when the config sets it for `type`, an extractor
// without a pyramid (the API's builder passes the message's fields to the extractor's
// constructor, which has no such arguments).
void refuse_fpn(const DetectionOptionReader& options, const std::string& type);

// feature_map_generators.fpn_top_down_feature_maps: the last of `maps` (finest first) projected
// to `depth` by 1x1 projection_<n>, then for each finer map, the coarser result upsampled
// (cropped to the map's size with explicit padding), plus the map's 1x1 projection_<i>, smoothed
// by a 3x3 smoothing_<i> (separable with use_depthwise). The projections have biases and no
// activation or batch norm; the smoothings take `hyperparams`. Returns the maps finest first.
std::vector<Tensor> fpn_top_down_feature_maps(layers::VariableScope& scope,
                                              const std::vector<Tensor>& maps, int64_t depth,
                                              const ConvHyperparams& hyperparams,
                                              bool use_depthwise, bool use_explicit_padding);

// The FPN extractors' coarser levels: from `last`, a 3x3 stride 2 convolution (separable with
// use_depthwise) per level named bottom_up_Conv2d_<first_index + k>, each on the previous.
std::vector<Tensor> fpn_bottom_up_feature_maps(layers::VariableScope& scope, const Tensor& last,
                                               int64_t count, int64_t first_index, int64_t depth,
                                               const ConvHyperparams& hyperparams,
                                               bool use_depthwise, bool use_explicit_padding);

// The API's MobileNet SSD extractors (v1, v1 FPN, v1 PPN, embedded v1, v2, v2 FPN) and its
// Inception ones (v2, v3) differ only in the maps they build: each preprocesses to [-1, 1], takes
// images of at least `min_dimension` a side (the API's check_min_image_dim(33); Inception v3's
// VALID layers need 75, below which the API fails building its graph), or with `exact` of exactly
// that size (the embedded extractor: 256), and pads them to pad_to_multiple. `maps` builds the
// feature maps from the padded images under the extractor's scope ("FeatureExtractor").
class MobilenetSsdExtractor final : public detection::SsdFeatureExtractor {
 public:
  using Maps = std::function<std::vector<Tensor>(layers::VariableScope& extractor,
                                                 const Tensor& padded_images,
                                                 const detection::SsdFeatureExtractorParams& c)>;
  MobilenetSsdExtractor(std::string type, detection::SsdFeatureExtractorParams params, Maps maps,
                        int64_t min_dimension = 33, bool exact = false)
      : type_(std::move(type)),
        c_(std::move(params)),
        maps_(std::move(maps)),
        min_dimension_(min_dimension),
        exact_(exact) {}

  Tensor preprocess(const Tensor& resized_images) const override;
  int64_t min_image_dimension() const override { return min_dimension_; }
  std::optional<int64_t> exact_image_dimension() const override {
    return exact_ ? std::optional<int64_t>(min_dimension_) : std::nullopt;
  }
  std::vector<Tensor> extract_features(layers::VariableScope& extractor,
                                       const Tensor& images) override;

 private:
  std::string type_;
  detection::SsdFeatureExtractorParams c_;
  Maps maps_;
  int64_t min_dimension_;
  bool exact_;
};

// What a slim base net built by an SSD extractor takes from the SSD's config; unset fields keep
// the net's own arg scope's values.
struct BaseNetHyperparams {
  // freeze_batchnorm is SSDMetaArch.predict's arg_scope([batch_norm], is_training=is_training and
  // not freeze_batchnorm). It reaches the base net (the nets' arg scopes with is_training=None
  // keep it) but nothing built under a conv_hyperparams scope, which replaces the whole arg scope
  // and sets is_training = is_training and batch_norm.train (hyperparams_builder): the extra
  // feature maps, the predictor's layers and, with override_base_feature_extractor_hyperparams,
  // the base.
  std::optional<bool> batch_norm_is_training;
  // With override_base_feature_extractor_hyperparams, conv_hyperparams' weight decay (on the
  // depthwise weights too), batch norm decay and epsilon, initializer and activation.
  bool overridden = false;
  double weight_decay = 0.0;
  std::optional<double> batch_norm_decay;
  std::optional<double> batch_norm_epsilon;
  std::optional<Initializer> initializer;
  std::optional<layers::ActivationFn> activation;
};

BaseNetHyperparams base_net_hyperparams(const detection::SsdFeatureExtractorParams& params);

// MobilenetV1's options as the API's MobileNet v1 SSD extractors build it, to Conv2d_13_pointwise:
// mobilenet_v1_arg_scope(is_training=None, regularize_depthwise=True), the extractor's depth
// multiplier, min_depth and padding, and base_net_hyperparams().
nets::MobilenetV1Options mobilenet_v1_base_options(const detection::SsdFeatureExtractorParams& c);

// What the API's MobileNet v2 and v3 SSD extractors set on their base (MobilenetV2Options,
// MobilenetV3Options): no logits, the extractor's depth multiplier, min_depth (through
// arg_scope([mobilenet.depth_multiplier])) and padding, training_scope(is_training=None,
// bn_decay=0.9997), and base_net_hyperparams() (not the activation, which the conv_defs' own
// defaults keep).
template <typename MobilenetOptions>
void set_mobilenet_base_hyperparams(MobilenetOptions& base,
                                    const detection::SsdFeatureExtractorParams& c) {
  base.num_classes = 0;
  base.depth_multiplier = c.depth_multiplier;
  base.min_depth = c.min_depth;
  base.use_explicit_padding = c.use_explicit_padding;
  base.batch_norm_decay = 0.9997;
  const BaseNetHyperparams h = base_net_hyperparams(c);
  base.batch_norm_is_training = h.batch_norm_is_training;
  if (h.overridden) {
    base.weight_decay = h.weight_decay;
    base.regularize_depthwise = true;
    base.batch_norm_decay = h.batch_norm_decay.value_or(base.batch_norm_decay);
    base.batch_norm_epsilon = h.batch_norm_epsilon.value_or(base.batch_norm_epsilon);
    base.weights_initializer = h.initializer;
  }
}

// MobilenetV2's options as the API's MobileNet v2 SSD extractors build it, to layer_19:
// training_scope(is_training=None, bn_decay=0.9997), min_depth through
// arg_scope([mobilenet.depth_multiplier]), and base_net_hyperparams() (not the activation, which
// V2_DEF's own defaults keep).
nets::MobilenetV2Options mobilenet_v2_base_options(const detection::SsdFeatureExtractorParams& c);

// ssd_mobilenet_v2's feature maps (the extra layers on layer_15/expansion_output and layer_19).
// With keras_application, the base is the API's Keras MobileNetV2 (ssd_mobilenet_v2_keras): the
// Keras residual rule (MobilenetV2Options::keras_residuals) and, under
// override_base_feature_extractor_hyperparams, depthwise weights that take neither
// conv_hyperparams' initializer nor its regularizer (keras_applications/mobilenet_v2.py hands
// DepthwiseConv2D kernel_*, which it does not read: glorot_uniform, no L2).
std::vector<Tensor> ssd_mobilenet_v2_feature_maps(layers::VariableScope& extractor,
                                                  const Tensor& images,
                                                  const detection::SsdFeatureExtractorParams& c,
                                                  bool keras_application);

// The Inception extractors' base net options (ssd_inception_v2/v3_feature_extractor.py): the
// extractor's depth multiplier and min_depth under conv_hyperparams' arg scope, which the API
// requires them to take (override_base_feature_extractor_hyperparams; `type` refuses otherwise,
// naming the option, as their constructors raise).
nets::InceptionArgScope inception_base_arg_scope(const detection::SsdFeatureExtractorParams& c,
                                                 const DetectionOptionReader& options,
                                                 const std::string& type);

// The MobileNet FPN extractors' maps under `fpn_scope` (<net>/fpn): the top-down pyramid on the
// base's end points blocks[level - 2] for levels fpn.min_level .. min(fpn.max_level, 5), then
// bottom-up convolutions bottom_up_Conv2d_<first_bottom_up + k> up to fpn.max_level, all
// max(int(additional_layer_depth * depth_multiplier), min_depth) deep, separable with
// use_depthwise.
std::vector<Tensor> mobilenet_fpn_feature_maps(layers::VariableScope& fpn_scope,
                                               const std::map<std::string, Tensor>& end_points,
                                               const std::array<const char*, 4>& blocks,
                                               const FpnLevels& fpn,
                                               const detection::SsdFeatureExtractorParams& c,
                                               int64_t first_bottom_up);

// The images' height and width when both are at least `min_dim` (shape_utils.check_min_image_dim);
// InvalidArgument naming the extractor otherwise.
void check_min_image_dim(const std::string& extractor, int64_t min_dim, const Tensor& images);

// ops.pad_to_multiple: `x` zero-padded at the bottom and right to multiples of `multiple`.
Tensor pad_to_multiple(const Tensor& x, int64_t multiple);

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_SSD_EXTRACTOR_COMMON_H_
