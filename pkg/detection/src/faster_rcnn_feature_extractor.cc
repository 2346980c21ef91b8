#include "trainyard/pkg/detection/faster_rcnn_feature_extractor.h"

namespace trainyard::detection {

std::map<std::string, std::string>
FasterRcnnFeatureExtractor::restore_from_classification_checkpoint(
    const std::string& first_stage_scope, const std::string& second_stage_scope) const {
  return {{first_stage_scope + "/", ""}, {second_stage_scope + "/", ""}};
}

PartRegistry<FasterRcnnFeatureExtractorFactory>& faster_rcnn_feature_extractors() {
  static PartRegistry<FasterRcnnFeatureExtractorFactory> registry(
      "detection.faster_rcnn_feature_extractor", "Faster R-CNN feature extractor");
  return registry;
}

}  // namespace trainyard::detection
