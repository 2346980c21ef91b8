// The BatchNonMaxSuppression message (protos/post_processing.proto) beyond the thresholds and
// sizes each meta-architecture reads itself: what builders/post_processing_builder.py checks and
// the variants it selects (soft NMS, combined NMS, class-agnostic NMS).
#ifndef TRAINYARD_PLUGINS_MODELS_NMS_OPTIONS_H_
#define TRAINYARD_PLUGINS_MODELS_NMS_OPTIONS_H_

#include <string>
#include <vector>

#include "trainyard/detection_model.h"
#include "trainyard/ops/detection.h"
#include "trainyard/pkg/detection/model_options.h"

namespace trainyard::models {

// Reads soft_nms_sigma, use_combined_nms and use_class_agnostic_nms (with
// max_classes_per_detection) under `prefix` ("post_processing.batch_non_max_suppression.")
// into `nms`, whose max_detections_per_class and max_total_detections are already read, with the
// API's checks: max_detections_per_class at most max_total_detections, soft_nms_sigma >= 0,
// combined NMS without class-agnostic or soft NMS, max_classes_per_detection 1 (the only value
// the op takes). `combined_allowed` false (Faster R-CNN's second stage, whose NMS changes the
// coordinate frame, which combined NMS refuses) refuses use_combined_nms; the variants a
// meta-architecture does not declare are read as their defaults. InvalidArgument naming the
// option otherwise.
void read_nms_variant(const detection::DetectionOptionReader& r, const std::string& prefix,
                      MultiClassNmsAttrs& nms, bool combined_allowed = true);

// A postprocess's detection dict from batch_multiclass_non_max_suppression's results (one for
// the whole batch, or one per image, in image order): detection_boxes, detection_scores,
// detection_classes and num_detections (float32, as the API's postprocess gives it),
// concatenated over the batch.
TensorDict nms_detection_dict(const std::vector<ops::NmsDetections>& results);

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_NMS_OPTIONS_H_
