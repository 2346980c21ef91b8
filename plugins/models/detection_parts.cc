#include "detection_parts.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/named_registry.h"

namespace trainyard::models {

void register_detection_parts() {
  // Held in this library's static storage: the parts are removed from the process-wide tables
  // when the library is closed (part_registry.h).
  static const std::vector<NamedRegistration> registrations = [] {
    std::vector<NamedRegistration> held;
#define TRAINYARD_ADD_PART(name, factory, ...) held.push_back(registry.add(#name, &factory));
    {
      auto& registry = detection::ssd_feature_extractors();
      TRAINYARD_SSD_FEATURE_EXTRACTORS(TRAINYARD_ADD_PART)
    }
    {
      auto& registry = detection::ssd_box_predictors();
      TRAINYARD_SSD_BOX_PREDICTORS(TRAINYARD_ADD_PART)
    }
    {
      auto& registry = detection::faster_rcnn_feature_extractors();
      TRAINYARD_FASTER_RCNN_FEATURE_EXTRACTORS(TRAINYARD_ADD_PART)
    }
    {
      auto& registry = detection::faster_rcnn_second_stage_box_predictors();
      TRAINYARD_FASTER_RCNN_SECOND_STAGE_BOX_PREDICTORS(TRAINYARD_ADD_PART)
    }
#undef TRAINYARD_ADD_PART
    return held;
  }();
  (void)registrations;
}

ConvHyperparams ssd_conv_hyperparams(const DetectionOptionReader& r, const std::string& prefix) {
  if (std::optional<ConvHyperparams> h = r.hyperparams(prefix)) return *h;
  // The API requires the message; without it the model takes the sample
  // ssd_mobilenet_v1_coco.config's: RELU_6, L2 4e-5, truncated normal 0.03, batch norm with
  // scale, decay 0.9997, epsilon 0.001.
  ConvHyperparams h;
  h.activation = layers::ActivationFn::relu6();
  h.l2_weight = 0.00004;
  h.initializer = layers::truncated_normal_initializer(0.0, 0.03);
  layers::BatchNormOptions bn;
  bn.decay = 0.9997;
  bn.scale = true;
  bn.epsilon = 0.001;
  h.batch_norm = bn;
  return h;
}

void check_first_stage_features_stride(const detection::FasterRcnnFeatureExtractorParams& params,
                                       const DetectionOptionReader& r) {
  const int64_t stride = params.first_stage_features_stride;
  if (stride != 8 && stride != 16) {
    r.refuse("feature_extractor.first_stage_features_stride", std::to_string(stride),
             "expected 8 or 16");
  }
}

}  // namespace trainyard::models
