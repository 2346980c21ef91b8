// mask_rcnn_box_predictor: the Object Detection API's MaskRCNNBoxPredictor
// (predictors/mask_rcnn_box_predictor.py with its box and class heads) as Faster R-CNN's second
// stage uses it, without the mask head: the box classifier's features averaged over space,
// dropout, then two fully connected layers. Variables:
//   SecondStageBoxPredictor/BoxEncodingPredictor/{weights,biases}
//   SecondStageBoxPredictor/ClassPredictor/{weights,biases}
#include "mask_rcnn_box_predictor.h"

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
};

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
  return std::make_unique<MaskRcnnBoxPredictor>(std::move(c));
}

}  // namespace trainyard::models
