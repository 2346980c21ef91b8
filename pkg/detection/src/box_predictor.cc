#include "trainyard/pkg/detection/box_predictor.h"

#include "trainyard/error.h"

namespace trainyard::detection {

PartRegistry<BoxPredictorFactory>& ssd_box_predictors() {
  static PartRegistry<BoxPredictorFactory> registry("detection.ssd_box_predictor",
                                                    "SSD box predictor");
  return registry;
}

PartRegistry<SecondStageBoxPredictorFactory>& faster_rcnn_second_stage_box_predictors() {
  static PartRegistry<SecondStageBoxPredictorFactory> registry(
      "detection.faster_rcnn_second_stage_box_predictor",
      "Faster R-CNN second stage box predictor");
  return registry;
}

SecondStageBoxPredictions SecondStageBoxPredictor::predict_from_proposals(layers::VariableScope&,
                                                                          const Tensor&,
                                                                          const Tensor&, int64_t) {
  throw InvalidArgument(
      "this second stage box predictor predicts from cropped features (crops_proposals() is "
      "false): call predict");
}

Tensor SecondStageBoxPredictor::predict_instance_masks(layers::VariableScope&, const Tensor&,
                                                       int64_t) {
  throw InvalidArgument(
      "this second stage box predictor has no mask head (predicts_instance_masks() is false)");
}

}  // namespace trainyard::detection
