// The Object Detection API's `model { faster_rcnn { ... } }` as the model section of Trainyard's
// Pipeline: class FasterRCNNMetaArch and the flattened params (od_config.h states the rule).
#include <string>

#include "od_config.h"
#include "od_config_internal.h"
#include "trainyard/error.h"

namespace trainyard::detection {

config::PluginSpec faster_rcnn_model_spec(const od::FasterRcnn& frcnn) {
  const std::string where = "model.faster_rcnn";
  // The API's FasterRCNNMetaArch: 1 is the RPN alone, 2 adds the box classifier, 3 also runs
  // the box classifier again on the final detections.
  if (frcnn.number_of_stages() < 1 || frcnn.number_of_stages() > 3) {
    throw ConfigError(where + ".number_of_stages is " + std::to_string(frcnn.number_of_stages()) +
                      "; it must be 1, 2 or 3");
  }
  // The API's meta-architecture takes a GridAnchorGenerator for its RPN.
  const od::AnchorGenerator& anchors = frcnn.first_stage_anchor_generator();
  if (anchors.anchor_generator_oneof_case() == od::AnchorGenerator::kSsdAnchorGenerator ||
      anchors.anchor_generator_oneof_case() == od::AnchorGenerator::kMultiscaleAnchorGenerator) {
    throw ConfigError(where + ".first_stage_anchor_generator: " +
                      (anchors.has_ssd_anchor_generator() ? "ssd_anchor_generator"
                                                          : "multiscale_anchor_generator") +
                      " is an SSD anchor generator; Faster R-CNN's first stage takes "
                      "grid_anchor_generator");
  }
  // The other box predictors are SSD's (rfcn_box_predictor makes the model R-FCN: the API's
  // RFCNMetaArch is FasterRCNNMetaArch with that predictor, which crops the proposals itself).
  const od::BoxPredictor& predictor = frcnn.second_stage_box_predictor();
  if (predictor.has_convolutional_box_predictor() ||
      predictor.has_weight_shared_convolutional_box_predictor()) {
    throw ConfigError(where + ".second_stage_box_predictor: " +
                      (predictor.has_convolutional_box_predictor()
                           ? "convolutional_box_predictor"
                           : "weight_shared_convolutional_box_predictor") +
                      " is an SSD box predictor; Faster R-CNN's second stage takes "
                      "mask_rcnn_box_predictor or rfcn_box_predictor");
  }
  config::PluginSpec spec;
  spec.set_class_("FasterRCNNMetaArch");
  od_internal::flatten_model_params(frcnn, where, &spec);
  return spec;
}

}  // namespace trainyard::detection
