// convolutional_box_predictor: the Object Detection API's ConvolutionalBoxPredictor
// (predictors/convolutional_box_predictor.py, built by box_predictor_builder.py), one
// BoxPredictor_<i> scope per feature map:
//   BoxPredictor_<i>/Conv2d_<k>_1x1_<depth>/...   num_layers_before_predictor layers
//   BoxPredictor_<i>/BoxEncodingPredictor/{weights,biases}
//   BoxPredictor_<i>/ClassPredictor/{weights,biases}
// and with use_depthwise (SSDLite) before each of the last two
//   BoxPredictor_<i>/BoxEncodingPredictor_depthwise/{depthwise_weights,BatchNorm/...}
#include "convolutional_box_predictor.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
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

// The ConvolutionalBoxPredictor message (protos/box_predictor.proto).
struct ConvolutionalBoxPredictorConfig {
  ConvHyperparams conv_hyperparams;
  int64_t min_depth = 0;
  int64_t max_depth = 0;
  int64_t num_layers_before_predictor = 0;
  bool use_dropout = true;
  double dropout_keep_probability = 0.8;
  int64_t kernel_size = 1;
  int64_t box_code_size = 4;
  bool apply_sigmoid_to_scores = false;
  double class_prediction_bias_init = 0.0;
  bool use_depthwise = false;
};

// One head's prediction: a kernel_size convolution to `outputs` channels without activation
// or batch norm; with use_depthwise (SSDLite) a depthwise kernel_size convolution
// <scope>_depthwise under conv_hyperparams (its batch norm and activation), then a 1x1 one
// (box_head.ConvolutionalBoxHead, class_head.ConvolutionalClassHead).
Tensor head(layers::VariableScope& sc, const Tensor& net, int64_t outputs,
            const ConvolutionalBoxPredictorConfig& c, layers::Conv2DOptions last) {
  if (!c.use_depthwise) {
    return layers::conv2d(sc, net, outputs, {c.kernel_size, c.kernel_size}, last);
  }
  const layers::Conv2DOptions h = conv_options(c.conv_hyperparams, true);
  layers::SeparableConv2DOptions d;
  d.activation_fn = h.activation_fn;
  d.normalizer = h.normalizer;
  d.weights_initializer = h.weights_initializer;
  d.weights_l2 = h.weights_l2;
  d.scope = last.scope + "_depthwise";
  Tensor dw = layers::separable_conv2d(sc, net, std::nullopt, {c.kernel_size, c.kernel_size}, d);
  // The depthwise class head's 1x1 convolution keeps slim's zero bias initializer.
  last.biases_initializer = layers::zeros_initializer();
  return layers::conv2d(sc, dw, outputs, {1, 1}, last);
}

class ConvolutionalBoxPredictor final : public detection::BoxPredictor {
 public:
  explicit ConvolutionalBoxPredictor(ConvolutionalBoxPredictorConfig config)
      : c_(std::move(config)) {}

  int64_t box_code_size() const override { return c_.box_code_size; }

  detection::BoxPredictions predict(layers::VariableScope& root, const std::vector<Tensor>& maps,
                                    const std::vector<int64_t>& per_location,
                                    int64_t num_classes) override;

 private:
  ConvolutionalBoxPredictorConfig c_;
};

detection::BoxPredictions ConvolutionalBoxPredictor::predict(
    layers::VariableScope& root, const std::vector<Tensor>& maps,
    const std::vector<int64_t>& per_location, int64_t num_classes) {
  const ConvolutionalBoxPredictorConfig& c = c_;
  if (per_location.size() != maps.size()) {
    throw InvalidArgument("convolutional_box_predictor: " + std::to_string(maps.size()) +
                          " feature maps but numbers of anchors per location for " +
                          std::to_string(per_location.size()));
  }
  const int64_t classes = num_classes + 1;
  detection::BoxPredictions out;
  for (std::size_t i = 0; i < maps.size(); ++i) {
    layers::VariableScope sc = root.child("BoxPredictor_" + std::to_string(i));
    Tensor net = maps[i];
    const int64_t batch = net.shape()[0];
    const int64_t depth_in = net.shape()[3];
    const int64_t na = per_location[i];
    if (c.num_layers_before_predictor > 0) {
      const int64_t d = std::max(std::min(depth_in, c.max_depth), c.min_depth);
      for (int64_t k = 0; k < c.num_layers_before_predictor; ++k) {
        layers::Conv2DOptions o = conv_options(c.conv_hyperparams, true);
        o.scope = "Conv2d_" + std::to_string(k) + "_1x1_" + std::to_string(d);
        net = layers::conv2d(sc, net, d, {1, 1}, o);
      }
    }
    layers::Conv2DOptions box = conv_options(c.conv_hyperparams, true);
    box.activation_fn = layers::ActivationFn::none();
    box.normalizer.reset();
    box.scope = "BoxEncodingPredictor";
    Tensor codes = head(sc, net, na * c.box_code_size, c, box);
    Tensor cls_in = net;
    if (c.use_dropout) {
      layers::DropoutOptions d;
      d.keep_prob = c.dropout_keep_probability;
      cls_in = layers::dropout(sc, cls_in, d);
    }
    layers::Conv2DOptions cls = box;
    cls.scope = "ClassPredictor";
    cls.biases_initializer = layers::constant_initializer(c.class_prediction_bias_init);
    Tensor logits = head(sc, cls_in, na * classes, c, cls);
    if (c.apply_sigmoid_to_scores) logits = ops::sigmoid(logits);
    const int64_t cells = maps[i].shape()[1] * maps[i].shape()[2];
    out.box_encodings.push_back(ops::reshape(codes, Shape{batch, cells * na, c.box_code_size}));
    out.class_predictions_with_background.push_back(
        ops::reshape(logits, Shape{batch, cells * na, classes}));
  }
  return out;
}

}  // namespace

// box_predictor_builder.build for convolutional_box_predictor, with the builder's checks.
std::unique_ptr<detection::BoxPredictor> make_convolutional_box_predictor(
    const DetectionOptionReader& r, const std::string& p) {
  const Options& o = r.options();
  ConvolutionalBoxPredictorConfig c;
  c.conv_hyperparams = ssd_conv_hyperparams(r, p + ".conv_hyperparams");
  c.min_depth = o.get_int(p + ".min_depth");
  c.max_depth = o.get_int(p + ".max_depth");
  c.num_layers_before_predictor = o.get_int(p + ".num_layers_before_predictor");
  if (c.num_layers_before_predictor < 0) {
    r.refuse(p + ".num_layers_before_predictor", std::to_string(c.num_layers_before_predictor),
             "expected >= 0");
  }
  c.use_dropout = o.get_bool(p + ".use_dropout");
  c.dropout_keep_probability = o.get_float(p + ".dropout_keep_probability");
  if (c.use_dropout && !(c.dropout_keep_probability > 0.0 && c.dropout_keep_probability <= 1.0)) {
    r.refuse(p + ".dropout_keep_probability", option_value_to_string(c.dropout_keep_probability),
             "expected (0, 1]");
  }
  c.kernel_size = o.get_int(p + ".kernel_size");
  if (c.kernel_size < 1)
    r.refuse(p + ".kernel_size", std::to_string(c.kernel_size), "expected >= 1");
  c.box_code_size = o.get_int(p + ".box_code_size");
  c.apply_sigmoid_to_scores = o.get_bool(p + ".apply_sigmoid_to_scores");
  c.class_prediction_bias_init = o.get_float(p + ".class_prediction_bias_init");
  c.use_depthwise = o.get_bool(p + ".use_depthwise");
  return std::make_unique<ConvolutionalBoxPredictor>(std::move(c));
}

}  // namespace trainyard::models
