#include "detection_parts.h"

#include <mutex>

namespace trainyard::models {

void register_detection_parts() {
  static std::once_flag once;
  std::call_once(once, [] {
    detection::ssd_feature_extractors().add("ssd_mobilenet_v1",
                                            &make_ssd_mobilenet_v1_feature_extractor);
    detection::ssd_box_predictors().add("convolutional_box_predictor",
                                        &make_convolutional_box_predictor);
  });
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

}  // namespace trainyard::models
