// The parts this plugin registers for its meta-architectures (pkg/detection's registries), one
// factory per file, listed once in detection_parts.cc's table:
//   SSD feature extractors    ssd_mobilenet_v1 (ssd_mobilenet_v1_feature_extractor.cc)
//   SSD box predictors        convolutional_box_predictor (convolutional_box_predictor.cc)
//   Faster R-CNN extractors   faster_rcnn_resnet50, faster_rcnn_resnet101
//                             (faster_rcnn_resnet_v1_feature_extractor.cc),
//                             faster_rcnn_mobilenet_v1
//                             (faster_rcnn_mobilenet_v1_feature_extractor.cc)
// A new part is a new file with its factory, declared here and added to the table; no
// meta-architecture changes.
#ifndef TRAINYARD_PLUGINS_MODELS_DETECTION_PARTS_H_
#define TRAINYARD_PLUGINS_MODELS_DETECTION_PARTS_H_

#include <memory>
#include <string>

#include "detection_options.h"
#include "trainyard/pkg/detection/box_predictor.h"
#include "trainyard/pkg/detection/faster_rcnn_feature_extractor.h"
#include "trainyard/pkg/detection/ssd_feature_extractor.h"

namespace trainyard::models {

// Registers the table's parts in this library's registries, once; every meta-architecture
// calls it before it looks a part up. Thread-safe.
void register_detection_parts();

// The Hyperparams message at `prefix` of an SSD (builders/hyperparams_builder.py), or, when the
// options leave it unset, the sample ssd_mobilenet_v1_coco.config's.
ConvHyperparams ssd_conv_hyperparams(const DetectionOptionReader& r, const std::string& prefix);

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v1_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);

std::unique_ptr<detection::BoxPredictor> make_convolutional_box_predictor(
    const DetectionOptionReader& options, const std::string& prefix);

// The API's slim Faster R-CNN extractors accept a first_stage_features_stride of 8 or 16 only;
// InvalidArgument naming feature_extractor.first_stage_features_stride otherwise.
void check_first_stage_features_stride(const detection::FasterRcnnFeatureExtractorParams& params,
                                       const DetectionOptionReader& options);

std::unique_ptr<detection::FasterRcnnFeatureExtractor> make_faster_rcnn_resnet50_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params,
    const DetectionOptionReader& options);
std::unique_ptr<detection::FasterRcnnFeatureExtractor> make_faster_rcnn_resnet101_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params,
    const DetectionOptionReader& options);
std::unique_ptr<detection::FasterRcnnFeatureExtractor>
make_faster_rcnn_mobilenet_v1_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params,
    const DetectionOptionReader& options);

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_DETECTION_PARTS_H_
