// The detection_models plugin: the Object Detection API's meta-architectures by class name.
#include "faster_rcnn_meta_arch.h"
#include "ssd_meta_arch.h"
#include "trainyard/plugin.h"

#define TRAINYARD_DETECTION_MODEL_CLASSES(X)                                                 \
  X(detection_model, SSDMetaArch, trainyard::models::SsdMetaArch,                            \
    "the Object Detection API's SSD, built from registered parts (the options of each part " \
    "list the registered names)")                                                            \
  X(detection_model, FasterRCNNMetaArch, trainyard::models::FasterRcnnMetaArch,              \
    "the Object Detection API's Faster R-CNN: a registered feature extractor "               \
    "and second-stage box predictor (their options list them), RPN, crop_and_resize")
TRAINYARD_PLUGIN(detection_models, 0, 1, 0, TRAINYARD_DETECTION_MODEL_CLASSES)
