// rfcn_box_predictor: the Object Detection API's RfcnBoxPredictor (predictors/
// rfcn_box_predictor.py) as R-FCN's second stage uses it (meta_architectures/rfcn_meta_arch.py):
// on the box classifier's features of whole images, a 1x1 convolution to `depth`, then two 1x1
// convolutions without activation to bins_h bins_w num_classes box_code_size location maps and
// bins_h bins_w (num_classes + 1) class maps, each pooled per proposal by
// batch_position_sensitive_crop_regions (crop_size, num_spatial_bins, global_pool) into the
// proposal's refined box encodings per class and its class logits. Variables:
//   SecondStageBoxPredictor/reduce_depth/{weights,biases}
//   SecondStageBoxPredictor/refined_locations/{weights,biases}
//   SecondStageBoxPredictor/class_predictions/{weights,biases}
// (BatchNorm/... instead of biases when conv_hyperparams has batch_norm, as slim's arg scope).
#include "rfcn_box_predictor.h"

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

// The RfcnBoxPredictor message's fields.
struct RfcnBoxPredictorConfig {
  ConvHyperparams conv_hyperparams;
  int64_t bins_height = 3, bins_width = 3;
  int64_t depth = 1024;
  int64_t crop_height = 12, crop_width = 12;
};

class RfcnBoxPredictor final : public detection::SecondStageBoxPredictor {
 public:
  explicit RfcnBoxPredictor(RfcnBoxPredictorConfig config) : c_(std::move(config)) {}

  int64_t num_box_sets(int64_t num_classes) const override { return num_classes; }
  bool crops_proposals() const override { return true; }

  detection::SecondStageBoxPredictions predict(layers::VariableScope&, const Tensor&,
                                               int64_t) override {
    throw InvalidArgument(
        "rfcn_box_predictor predicts from whole feature maps and the proposals "
        "(predict_from_proposals), not from cropped features");
  }

  detection::SecondStageBoxPredictions predict_from_proposals(layers::VariableScope& scope,
                                                              const Tensor& features,
                                                              const Tensor& proposal_boxes,
                                                              int64_t num_classes) override {
    const int64_t bins = c_.bins_height * c_.bins_width;
    const int64_t proposals = proposal_boxes.shape()[0] * proposal_boxes.shape()[1];
    layers::Conv2DOptions reduce = conv_options(c_.conv_hyperparams, true);
    reduce.scope = "reduce_depth";
    const Tensor net = layers::conv2d(scope, features, c_.depth, {1, 1}, reduce);
    // activation_fn=None over the arg scope's (its normalizer, if any, stays).
    layers::Conv2DOptions head = conv_options(c_.conv_hyperparams, true);
    head.activation_fn = layers::ActivationFn::none();
    head.scope = "refined_locations";
    const Tensor locations = layers::conv2d(scope, net, bins * num_classes * 4, {1, 1}, head);
    const Tensor box_encodings = pool(locations, proposal_boxes);
    head.scope = "class_predictions";
    const Tensor class_maps = layers::conv2d(scope, net, bins * (num_classes + 1), {1, 1}, head);
    const Tensor logits = pool(class_maps, proposal_boxes);
    return {ops::reshape(box_encodings, Shape{proposals, num_classes, 4}),
            ops::reshape(logits, Shape{proposals, num_classes + 1})};
  }

 private:
  Tensor pool(const Tensor& maps, const Tensor& boxes) const {
    return ops::position_sensitive_crop_regions(maps, boxes, {c_.crop_height, c_.crop_width},
                                                {c_.bins_height, c_.bins_width},
                                                /*global_pool=*/true);
  }

  RfcnBoxPredictorConfig c_;
};

}  // namespace

// box_predictor_builder.build for rfcn_box_predictor, with the checks of
// position_sensitive_crop_regions made when the model is built.
std::unique_ptr<detection::SecondStageBoxPredictor> make_rfcn_box_predictor(
    const DetectionOptionReader& r, const std::string& prefix) {
  const Options& o = r.options();
  const std::string p = prefix + ".";
  RfcnBoxPredictorConfig c;
  // The sample rfcn_resnet101_coco.config's conv_hyperparams when the config has none: RELU,
  // truncated normal (stddev 0.01), no regularization, no batch norm.
  if (std::optional<ConvHyperparams> h = r.hyperparams(p + "conv_hyperparams")) {
    c.conv_hyperparams = *h;
  } else {
    c.conv_hyperparams.initializer = layers::truncated_normal_initializer(0.0, 0.01);
  }
  c.bins_height = r.in_range(p + "num_spatial_bins_height", 1, 64);
  c.bins_width = r.in_range(p + "num_spatial_bins_width", 1, 64);
  c.depth = r.in_range(p + "depth", 1, 1 << 16);
  c.crop_height = r.in_range(p + "crop_height", 1, 1024);
  c.crop_width = r.in_range(p + "crop_width", 1, 1024);
  if (c.crop_height % c.bins_height != 0) {
    r.refuse(p + "crop_height", std::to_string(c.crop_height),
             "a multiple of num_spatial_bins_height (" + std::to_string(c.bins_height) + ")");
  }
  if (c.crop_width % c.bins_width != 0) {
    r.refuse(p + "crop_width", std::to_string(c.crop_width),
             "a multiple of num_spatial_bins_width (" + std::to_string(c.bins_width) + ")");
  }
  if (o.get_int(p + "box_code_size") != 4) {
    r.refuse(p + "box_code_size", std::to_string(o.get_int(p + "box_code_size")),
             "the faster_rcnn box coder's code size is 4");
  }
  return std::make_unique<RfcnBoxPredictor>(std::move(c));
}

}  // namespace trainyard::models
