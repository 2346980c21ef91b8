// mask_rcnn_box_predictor: the Object Detection API's MaskRCNNBoxPredictor
// (predictors/mask_rcnn_box_predictor.py with its box and class heads) as Faster R-CNN's second
// stage uses it: the box classifier's features averaged over space, dropout, then two fully
// connected layers; and with predict_instance_masks the mask head (predictors/heads/
// mask_head.py MaskRCNNMaskHead, the API's third stage): the features resized to mask_height x
// mask_width (bilinear, align_corners) then mask_prediction_num_conv_layers - 1 3x3 convolutions
// of conv_hyperparams; or with convolve_then_upsample_masks those convolutions first, a nearest
// neighbour upsampling by the integer factors to the mask size and one more 3x3 convolution;
// then a 3x3 convolution to one mask per class (or one) without activation or normalizer.
// Variables (the head's slim.conv2d calls have no scope, so slim names them Conv, Conv_1, ...):
//   SecondStageBoxPredictor/BoxEncodingPredictor/{weights,biases}
//   SecondStageBoxPredictor/ClassPredictor/{weights,biases}
//   SecondStageBoxPredictor/Conv/{weights,biases} ... /Conv_<layers - 1>/{weights,biases}
#include "mask_rcnn_box_predictor.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "detection_parts.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"

namespace trainyard::models {
namespace {

// The MaskRCNNBoxPredictor message's fields this predictor reads.
struct MaskRcnnBoxPredictorConfig {
  ConvHyperparams fc_hyperparams;
  bool use_dropout = false;
  double dropout_keep_probability = 0.5;
  bool share_box_across_classes = false;

  // The mask head (predict_instance_masks).
  bool predict_instance_masks = false;
  ConvHyperparams conv_hyperparams;
  int64_t mask_prediction_conv_depth = 256;  // 0: mask_predictor_conv_depth()
  int64_t mask_height = 15;
  int64_t mask_width = 15;
  int64_t mask_prediction_num_conv_layers = 2;
  bool masks_are_class_agnostic = false;
  bool convolve_then_upsample_masks = false;
};

// MaskRCNNMaskHead._get_mask_predictor_conv_depth: the weighted mean of log2(feature channels)
// (weight 2) and log2(classes) (weight 3), rounded (Python's round: half to even), as a power of
// two.
int64_t mask_predictor_conv_depth(int64_t num_feature_channels, int64_t num_classes) {
  const double channels_log = std::log2(static_cast<double>(num_feature_channels));
  const double classes_log = std::log2(static_cast<double>(num_classes));
  const double mean = (channels_log * 2.0 + classes_log * 3.0) / 5.0;
  return static_cast<int64_t>(std::pow(2.0, std::nearbyint(mean)));
}

// ops.nearest_neighbor_upsampling by integer factors: each row repeated `sy` times, each column
// `sx` times (the API's reshape times ones; a gather here, with the same values and gradient).
Tensor nearest_neighbor_upsampling(const Tensor& x, int64_t sy, int64_t sx) {
  const Shape& s = x.shape();
  std::vector<int32_t> rows;
  for (int64_t i = 0; i < s[1] * sy; ++i) rows.push_back(static_cast<int32_t>(i / sy));
  std::vector<int32_t> cols;
  for (int64_t j = 0; j < s[2] * sx; ++j) cols.push_back(static_cast<int32_t>(j / sx));
  Backend& backend = x.backend();
  const Tensor up = ops::gather(
      x, Tensor::from_vector(backend, Shape{static_cast<int64_t>(rows.size())}, rows), 1);
  return ops::gather(
      up, Tensor::from_vector(backend, Shape{static_cast<int64_t>(cols.size())}, cols), 2);
}

layers::FullyConnectedOptions fc_options(const ConvHyperparams& h, const char* scope) {
  layers::FullyConnectedOptions o;
  o.activation_fn = layers::ActivationFn::none();  // activation_fn=None over the arg scope's
  o.weights_initializer = h.initializer;
  o.weights_l2 = h.l2_weight;
  if (h.batch_norm) o.normalizer = *h.batch_norm;
  o.scope = scope;
  return o;
}

class MaskRcnnBoxPredictor final : public detection::SecondStageBoxPredictor {
 public:
  explicit MaskRcnnBoxPredictor(MaskRcnnBoxPredictorConfig config) : c_(std::move(config)) {}

  int64_t num_box_sets(int64_t num_classes) const override {
    return c_.share_box_across_classes ? 1 : num_classes;
  }

  detection::SecondStageBoxPredictions predict(layers::VariableScope& scope,
                                               const Tensor& box_features,
                                               int64_t num_classes) override {
    Tensor flat = ops::reduce_mean(box_features, {1, 2});  // AvgPool, then flatten
    if (c_.use_dropout) {
      layers::DropoutOptions d;
      d.keep_prob = c_.dropout_keep_probability;
      flat = layers::dropout(scope, flat, d);
    }
    const int64_t box_sets = num_box_sets(num_classes);
    const Tensor refined = layers::fully_connected(
        scope, flat, box_sets * 4, fc_options(c_.fc_hyperparams, "BoxEncodingPredictor"));
    const Tensor logits = layers::fully_connected(scope, flat, num_classes + 1,
                                                  fc_options(c_.fc_hyperparams, "ClassPredictor"));
    return {ops::reshape(refined, Shape{box_features.shape()[0], box_sets, 4}), logits};
  }

  bool predicts_instance_masks() const override { return c_.predict_instance_masks; }

  // MaskRCNNMaskHead.predict, the [N, 1, masks, h, w] result squeezed as the meta-architecture
  // squeezes it.
  Tensor predict_instance_masks(layers::VariableScope& scope, const Tensor& box_features,
                                int64_t num_classes) override {
    if (!c_.predict_instance_masks) {
      return SecondStageBoxPredictor::predict_instance_masks(scope, box_features, num_classes);
    }
    const Shape& s = box_features.shape();
    if (s.rank() != 4 || s[1] < 1 || s[2] < 1) {
      throw InvalidArgument("mask_rcnn_box_predictor: box classifier features are " +
                            box_features.description() + "; expected [proposals, h, w, depth]");
    }
    const int64_t depth = c_.mask_prediction_conv_depth != 0
                              ? c_.mask_prediction_conv_depth
                              : mask_predictor_conv_depth(s[3], num_classes);
    layers::Conv2DOptions conv = conv_options(c_.conv_hyperparams);
    Tensor features = box_features;
    if (!c_.convolve_then_upsample_masks) {
      // tf.image.resize_bilinear(align_corners=True) is crop_and_resize of the whole image.
      const int64_t n = s[0];
      std::vector<float> whole;
      std::vector<int32_t> index;
      for (int64_t i = 0; i < n; ++i) {
        whole.insert(whole.end(), {0.0f, 0.0f, 1.0f, 1.0f});
        index.push_back(static_cast<int32_t>(i));
      }
      Backend& backend = box_features.backend();
      features = ops::crop_and_resize(
          box_features, Tensor::from_vector(backend, Shape{n, 4}, whole),
          Tensor::from_vector(backend, Shape{n}, index), {c_.mask_height, c_.mask_width});
    }
    for (int64_t i = 0; i + 1 < c_.mask_prediction_num_conv_layers; ++i) {
      features = layers::conv2d(scope, features, depth, {3, 3}, conv);
    }
    if (c_.convolve_then_upsample_masks) {
      const Shape& f = features.shape();
      if (c_.mask_height % f[1] != 0 || c_.mask_width % f[2] != 0) {
        throw InvalidArgument(
            "mask_rcnn_box_predictor: convolve_then_upsample_masks upsamples the " +
            std::to_string(f[1]) + " x " + std::to_string(f[2]) +
            " box classifier features by integer factors, which mask_height x mask_width " +
            std::to_string(c_.mask_height) + " x " + std::to_string(c_.mask_width) + " are not");
      }
      features = nearest_neighbor_upsampling(features, c_.mask_height / f[1], c_.mask_width / f[2]);
      features = layers::conv2d(scope, features, depth, {3, 3}, conv);
    }
    layers::Conv2DOptions last = conv;
    last.activation_fn = layers::ActivationFn::none();
    last.normalizer.reset();
    const int64_t masks = c_.masks_are_class_agnostic ? 1 : num_classes;
    const Tensor logits = layers::conv2d(scope, features, masks, {3, 3}, last);
    return ops::transpose(logits, {0, 3, 1, 2});
  }

 private:
  MaskRcnnBoxPredictorConfig c_;
};

}  // namespace

// box_predictor_builder.build for mask_rcnn_box_predictor, with the builder's checks.
std::unique_ptr<detection::SecondStageBoxPredictor> make_mask_rcnn_box_predictor(
    const DetectionOptionReader& r, const std::string& prefix) {
  const Options& o = r.options();
  const std::string p = prefix + ".";
  MaskRcnnBoxPredictorConfig c;
  // The sample's fc_hyperparams when the config has none: variance scaling (factor 1, uniform,
  // FAN_AVG), no regularization.
  if (std::optional<ConvHyperparams> h = r.hyperparams(p + "fc_hyperparams", "FC")) {
    c.fc_hyperparams = *h;
  } else {
    c.fc_hyperparams.initializer = Initializer::variance_scaling(
        1.0, Initializer::FanMode::kFanAvg, Initializer::Distribution::kUniform);
  }
  c.use_dropout = o.get_bool(p + "use_dropout");
  c.dropout_keep_probability = o.get_float(p + "dropout_keep_probability");
  if (c.use_dropout && !(c.dropout_keep_probability > 0.0 && c.dropout_keep_probability <= 1.0)) {
    r.refuse(p + "dropout_keep_probability", option_value_to_string(c.dropout_keep_probability),
             "expected (0, 1]");
  }
  if (o.get_int(p + "box_code_size") != 4) {
    r.refuse(p + "box_code_size", std::to_string(o.get_int(p + "box_code_size")),
             "the faster_rcnn box coder's code size is 4");
  }
  c.share_box_across_classes = o.get_bool(p + "share_box_across_classes");
  c.predict_instance_masks = o.get_bool(p + "predict_instance_masks");
  if (c.predict_instance_masks) {
    // MaskRCNNMaskHead raises 'conv_hyperparams_fn is None.' without them.
    std::optional<ConvHyperparams> h = r.hyperparams(p + "conv_hyperparams");
    if (!h) {
      r.refuse(p + "conv_hyperparams", "unset",
               "predict_instance_masks needs the mask head's conv_hyperparams");
    }
    c.conv_hyperparams = *h;
    auto positive = [&](const char* field, int64_t low, int64_t high) {
      const int64_t v = o.get_int(p + field);
      if (v < low || v > high) {
        r.refuse(p + field, std::to_string(v),
                 "expected " + std::to_string(low) + " to " + std::to_string(high));
      }
      return v;
    };
    c.mask_prediction_conv_depth = positive("mask_prediction_conv_depth", 0, 65536);
    c.mask_height = positive("mask_height", 2, 1024);
    c.mask_width = positive("mask_width", 2, 1024);
    c.mask_prediction_num_conv_layers = positive("mask_prediction_num_conv_layers", 1, 64);
    c.masks_are_class_agnostic = o.get_bool(p + "masks_are_class_agnostic");
    c.convolve_then_upsample_masks = o.get_bool(p + "convolve_then_upsample_masks");
  }
  return std::make_unique<MaskRcnnBoxPredictor>(std::move(c));
}

}  // namespace trainyard::models
