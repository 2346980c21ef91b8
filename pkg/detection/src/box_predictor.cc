#include "trainyard/pkg/detection/box_predictor.h"

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

}  // namespace trainyard::detection
