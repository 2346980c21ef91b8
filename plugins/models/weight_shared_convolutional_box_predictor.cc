// weight_shared_convolutional_box_predictor: the Object Detection API's
// WeightSharedConvolutionalBoxPredictor (predictors/convolutional_box_predictor.py with
// heads/box_head.py's and class_head.py's WeightShared heads), RetinaNet's predictor. Every
// feature map goes through the same variables:
//   WeightSharedConvolutionalBoxPredictor/BoxPredictionTower/conv2d_<k>/weights
//   WeightSharedConvolutionalBoxPredictor/BoxPredictionTower/conv2d_<k>/BatchNorm/feature_<i>/...
//   WeightSharedConvolutionalBoxPredictor/ClassPredictionTower/conv2d_<k>/...   (unless shared)
//   WeightSharedConvolutionalBoxPredictor/BoxPredictor/{weights,biases}
//   WeightSharedConvolutionalBoxPredictor/ClassPredictor/{weights,biases}
// Only batch norm is per feature map (feature_<i>). Maps of different depths are first brought
// to the most common depth by ProjectionLayer/conv2d_<n>.
#include "weight_shared_convolutional_box_predictor.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detection_parts.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"

namespace trainyard::models {
namespace {

struct WeightSharedConfig {
  ConvHyperparams conv_hyperparams;
  bool apply_batch_norm = true;  // conv_hyperparams has batch_norm
  int64_t num_layers_before_predictor = 0;
  int64_t depth = 0;
  int64_t kernel_size = 3;
  int64_t box_code_size = 4;
  double class_prediction_bias_init = 0.0;
  bool use_dropout = false;
  double dropout_keep_probability = 0.8;
  bool share_prediction_tower = false;
  bool use_depthwise = false;
  bool sigmoid_scores = false;  // score_converter SIGMOID
  std::optional<std::pair<double, double>> box_encodings_clip_range;
};

class WeightSharedConvolutionalBoxPredictor final : public detection::BoxPredictor {
 public:
  explicit WeightSharedConvolutionalBoxPredictor(WeightSharedConfig config)
      : c_(std::move(config)) {}

  int64_t box_code_size() const override { return c_.box_code_size; }

  // The heads are shared: every map must have as many anchors per location.
  bool accepts_anchors_per_location(const std::vector<int64_t>& per_location) const override {
    return std::adjacent_find(per_location.begin(), per_location.end(), std::not_equal_to<>()) ==
           per_location.end();
  }

  detection::BoxPredictions predict(layers::VariableScope& root, const std::vector<Tensor>& maps,
                                    const std::vector<int64_t>& per_location,
                                    int64_t num_classes) override;

 private:
  // A convolution of the predictor under conv_hyperparams, without its activation and batch
  // norm (the towers apply their own); a separable one with use_depthwise.
  Tensor conv(layers::VariableScope& scope, const Tensor& x, int64_t outputs, int64_t kernel,
              const std::string& name, bool biases,
              const std::optional<Initializer>& bias_init) const;
  // _compute_base_tower: num_layers_before_predictor convolutions of `depth`, each with batch
  // norm of this feature map's own and relu6.
  Tensor tower(layers::VariableScope& scope, const Tensor& x, const std::string& name,
               std::size_t feature_index) const;

  WeightSharedConfig c_;
};

Tensor WeightSharedConvolutionalBoxPredictor::conv(
    layers::VariableScope& scope, const Tensor& x, int64_t outputs, int64_t kernel,
    const std::string& name, bool biases, const std::optional<Initializer>& bias_init) const {
  const layers::Conv2DOptions h = conv_options(c_.conv_hyperparams, true);
  std::optional<Initializer> bias;
  if (biases) bias = bias_init.value_or(layers::zeros_initializer());
  if (c_.use_depthwise) {
    layers::SeparableConv2DOptions d;
    d.activation_fn = layers::ActivationFn::none();
    d.weights_initializer = h.weights_initializer;
    d.weights_l2 = h.weights_l2;
    d.biases_initializer = bias;
    d.scope = name;
    return layers::separable_conv2d(scope, x, outputs, {kernel, kernel}, d);
  }
  layers::Conv2DOptions o;
  o.activation_fn = layers::ActivationFn::none();
  o.weights_initializer = h.weights_initializer;
  o.weights_l2 = h.weights_l2;
  o.biases_initializer = bias;
  o.scope = name;
  return layers::conv2d(scope, x, outputs, {kernel, kernel}, o);
}

Tensor WeightSharedConvolutionalBoxPredictor::tower(layers::VariableScope& scope, const Tensor& x,
                                                    const std::string& name,
                                                    std::size_t feature_index) const {
  Tensor net = x;
  for (int64_t k = 0; k < c_.num_layers_before_predictor; ++k) {
    const std::string layer = name + "/conv2d_" + std::to_string(k);
    // normalizer_fn=tf.identity with batch norm: slim then makes no biases.
    net = conv(scope, net, c_.depth, c_.kernel_size, layer, !c_.apply_batch_norm, std::nullopt);
    if (c_.apply_batch_norm) {
      layers::BatchNormOptions bn = *c_.conv_hyperparams.batch_norm;
      bn.activation_fn = layers::ActivationFn::none();
      bn.scope = layer + "/BatchNorm/feature_" + std::to_string(feature_index);
      net = layers::batch_norm(scope, net, bn);
    }
    net = ops::relu6(net);
  }
  return net;
}

detection::BoxPredictions WeightSharedConvolutionalBoxPredictor::predict(
    layers::VariableScope& root, const std::vector<Tensor>& maps,
    const std::vector<int64_t>& per_location, int64_t num_classes) {
  constexpr const char* kName = "weight_shared_convolutional_box_predictor";
  if (per_location.size() != maps.size()) {
    throw InvalidArgument(std::string(kName) + ": " + std::to_string(maps.size()) +
                          " feature maps but numbers of anchors per location for " +
                          std::to_string(per_location.size()));
  }
  if (!accepts_anchors_per_location(per_location)) {
    throw InvalidArgument(std::string(kName) +
                          ": the anchor generator gives the feature maps different numbers of "
                          "anchors per location; the shared heads need the same for every map");
  }
  // The most common depth; among equally common ones the smallest (the API takes the first in
  // its Python set's order).
  std::map<int64_t, int64_t> counts;
  for (const Tensor& m : maps) ++counts[m.shape()[3]];
  const bool different_depths = counts.size() > 1;
  int64_t target = 0;
  int64_t most = 0;
  for (const auto& [depth, count] : counts) {
    if (count > most) {
      most = count;
      target = depth;
    }
  }
  int64_t projections = 0;
  const int64_t classes = num_classes + 1;
  layers::VariableScope sc = root.child("WeightSharedConvolutionalBoxPredictor");
  detection::BoxPredictions out;
  for (std::size_t i = 0; i < maps.size(); ++i) {
    Tensor feature = maps[i];
    const int64_t batch = feature.shape()[0];
    const int64_t na = per_location[i];
    if (different_depths) {
      const std::string layer = "ProjectionLayer/conv2d_" + std::to_string(projections++);
      feature = conv(sc, feature, target, 1, layer, !c_.apply_batch_norm, std::nullopt);
      if (c_.apply_batch_norm) {
        layers::BatchNormOptions bn = *c_.conv_hyperparams.batch_norm;
        bn.activation_fn = layers::ActivationFn::none();
        bn.scope = layer + "/BatchNorm";
        feature = layers::batch_norm(sc, feature, bn);
      }
    }
    const Tensor box_tower =
        tower(sc, feature, c_.share_prediction_tower ? "PredictionTower" : "BoxPredictionTower", i);
    Tensor codes =
        conv(sc, box_tower, na * c_.box_code_size, c_.kernel_size, "BoxPredictor", true, {});
    if (c_.box_encodings_clip_range) {
      codes = ops::clip_by_value(codes, c_.box_encodings_clip_range->first,
                                 c_.box_encodings_clip_range->second);
    }
    Tensor class_tower =
        c_.share_prediction_tower ? box_tower : tower(sc, feature, "ClassPredictionTower", i);
    if (c_.use_dropout) {
      layers::DropoutOptions d;
      d.keep_prob = c_.dropout_keep_probability;
      class_tower = layers::dropout(sc, class_tower, d);
    }
    Tensor logits = conv(sc, class_tower, na * classes, c_.kernel_size, "ClassPredictor", true,
                         layers::constant_initializer(c_.class_prediction_bias_init));
    if (c_.sigmoid_scores) logits = ops::sigmoid(logits);
    const int64_t cells = maps[i].shape()[1] * maps[i].shape()[2];
    out.box_encodings.push_back(ops::reshape(codes, Shape{batch, cells * na, c_.box_code_size}));
    out.class_predictions_with_background.push_back(
        ops::reshape(logits, Shape{batch, cells * na, classes}));
  }
  return out;
}

}  // namespace

// box_predictor_builder.build for weight_shared_convolutional_box_predictor.
std::unique_ptr<detection::BoxPredictor> make_weight_shared_convolutional_box_predictor(
    const DetectionOptionReader& r, const std::string& p) {
  const Options& o = r.options();
  WeightSharedConfig c;
  c.conv_hyperparams = ssd_conv_hyperparams(r, p + ".conv_hyperparams");
  c.apply_batch_norm = c.conv_hyperparams.batch_norm.has_value();
  c.num_layers_before_predictor = r.in_range(p + ".num_layers_before_predictor", 0, 16);
  c.depth = r.in_range(p + ".depth", 0, 4096);
  if (c.num_layers_before_predictor > 0 && c.depth == 0) {
    r.refuse(p + ".depth", "0", "expected > 0 with num_layers_before_predictor > 0");
  }
  c.kernel_size = r.in_range(p + ".kernel_size", 1, 15);
  c.box_code_size = r.in_range(p + ".box_code_size", 1, 64);
  c.class_prediction_bias_init = o.get_float(p + ".class_prediction_bias_init");
  c.use_dropout = o.get_bool(p + ".use_dropout");
  c.dropout_keep_probability = o.get_float(p + ".dropout_keep_probability");
  if (c.use_dropout && !(c.dropout_keep_probability > 0.0 && c.dropout_keep_probability <= 1.0)) {
    r.refuse(p + ".dropout_keep_probability", option_value_to_string(c.dropout_keep_probability),
             "expected (0, 1]");
  }
  c.share_prediction_tower = o.get_bool(p + ".share_prediction_tower");
  c.use_depthwise = o.get_bool(p + ".use_depthwise");
  c.sigmoid_scores = r.choice(p + ".score_converter", {"IDENTITY", "SIGMOID"}) == "SIGMOID";
  if (o.get_bool(p + ".box_encodings_clip_range")) {
    const double lo = o.get_float(p + ".box_encodings_clip_range.min");
    const double hi = o.get_float(p + ".box_encodings_clip_range.max");
    if (!(lo <= hi)) {
      r.refuse(p + ".box_encodings_clip_range",
               option_value_to_string(lo) + ".." + option_value_to_string(hi),
               "expected min <= max");
    }
    c.box_encodings_clip_range = std::make_pair(lo, hi);
  }
  return std::make_unique<WeightSharedConvolutionalBoxPredictor>(std::move(c));
}

}  // namespace trainyard::models
