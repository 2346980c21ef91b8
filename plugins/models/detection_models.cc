// The detection_models plugin: the Object Detection API's meta-architectures by class name.
#include "faster_rcnn_meta_arch.h"
#include "ssd_meta_arch.h"
#include "trainyard/plugin.h"

#define TRAINYARD_DETECTION_MODEL_CLASSES(X)                                              \
  X(detection_model, SSDMetaArch, trainyard::models::SsdMetaArch,                         \
    "the Object Detection API's SSD: MobileNet v1 features, convolutional box predictor") \
  X(detection_model, FasterRCNNMetaArch, trainyard::models::FasterRcnnMetaArch,           \
    "the Object Detection API's Faster R-CNN: ResNet v1 or MobileNet v1 features, RPN, "  \
    "crop_and_resize, Mask R-CNN box predictor")
TRAINYARD_PLUGIN(detection_models, 0, 1, 0, TRAINYARD_DETECTION_MODEL_CLASSES)
