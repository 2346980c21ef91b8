#include "trainyard/pkg/detection/ssd_feature_extractor.h"

namespace trainyard::detection {

std::map<std::string, std::string> SsdFeatureExtractor::restore_from_classification_checkpoint(
    const std::string& feature_extractor_scope) const {
  return {{feature_extractor_scope + "/", ""}};
}

PartRegistry<SsdFeatureExtractorFactory>& ssd_feature_extractors() {
  static PartRegistry<SsdFeatureExtractorFactory> registry("detection.ssd_feature_extractor",
                                                           "SSD feature extractor");
  return registry;
}

}  // namespace trainyard::detection
