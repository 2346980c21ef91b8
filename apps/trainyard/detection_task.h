// The object detection task (the Object Detection API's model_main and legacy train.py):
// images with padded groundtruth boxes moved to the device as they are, the run's
// pipeline.config recorded in train_dir, the total loss on logged training steps, the API's
// evaluation metrics (eval_config.metrics_set: coco_detection_metrics,
// pascal_voc_detection_metrics) with its tag names, and detections written as a COCO results
// JSON by predict.
//
// The task lives in the host, not the core: it uses pkg/detection, and pkg/ builds on the core.
// The host calls register_detection_task() before any pipeline names the task "detection".
#ifndef TRAINYARD_APPS_TRAINYARD_DETECTION_TASK_H_
#define TRAINYARD_APPS_TRAINYARD_DETECTION_TASK_H_

#include "trainyard/core/task.h"

namespace trainyard {

const Task& detection_task();

// register_task("detection", &detection_task).
void register_detection_task();

// The reader class of the API's tf.Example layout.
inline constexpr const char* kDetectionReader = "DetectionReader";

}  // namespace trainyard

#endif  // TRAINYARD_APPS_TRAINYARD_DETECTION_TASK_H_
