// The detections a detection model's forward pass hands a task (the core's DetectionModelAdapter
// packs the Object Detection API's postprocess dict): f32 [B, max_detections, 6], one row per
// detection, sorted by score: ymin, xmin, ymax, xmax (normalized to the image), score, class
// (0-based, as the API's detection_classes); rows past num_detections have class -1 and score 0.
#ifndef TRAINYARD_CORE_PACKED_DETECTIONS_H_
#define TRAINYARD_CORE_PACKED_DETECTIONS_H_

#include <cstdint>

namespace trainyard {

inline constexpr int64_t kPackedDetectionWidth = 6;

}  // namespace trainyard

#endif  // TRAINYARD_CORE_PACKED_DETECTIONS_H_
