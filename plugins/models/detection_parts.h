// The parts this plugin registers for its meta-architectures in pkg/detection's part tables:
// one file per part with its factory, declared here and listed once in the tables below, from
// which register_detection_parts() fills the registries and the models' option help lists the
// names (`trainyard plugins describe SSDMetaArch`). A new part is a new file and a table entry;
// no meta-architecture changes. The smaller parts (anchor generators, box coders, matchers,
// similarity calculators, losses, score converters) are pkg/detection's own (part_builders.h).
#ifndef TRAINYARD_PLUGINS_MODELS_DETECTION_PARTS_H_
#define TRAINYARD_PLUGINS_MODELS_DETECTION_PARTS_H_

#include <memory>
#include <string>

#include "convolutional_box_predictor.h"
#include "detection_options.h"
#include "mask_rcnn_box_predictor.h"
#include "rfcn_box_predictor.h"
#include "trainyard/pkg/detection/box_predictor.h"
#include "trainyard/pkg/detection/faster_rcnn_feature_extractor.h"
#include "trainyard/pkg/detection/part_builders.h"
#include "trainyard/pkg/detection/ssd_feature_extractor.h"
#include "weight_shared_convolutional_box_predictor.h"

// X(name in the config, factory); a box predictor adds the std::array of the options of its
// message, which the meta-architecture's options include (ssd_options.h,
// faster_rcnn_options.h).
#define TRAINYARD_SSD_FEATURE_EXTRACTORS(X)                                      \
  X(embedded_ssd_mobilenet_v1, make_embedded_ssd_mobilenet_v1_feature_extractor) \
  X(ssd_inception_v2, make_ssd_inception_v2_feature_extractor)                   \
  X(ssd_inception_v3, make_ssd_inception_v3_feature_extractor)                   \
  X(ssd_mobilenet_v1, make_ssd_mobilenet_v1_feature_extractor)                   \
  X(ssd_mobilenet_v1_fpn, make_ssd_mobilenet_v1_fpn_feature_extractor)           \
  X(ssd_mobilenet_v1_ppn, make_ssd_mobilenet_v1_ppn_feature_extractor)           \
  X(ssd_mobilenet_v2, make_ssd_mobilenet_v2_feature_extractor)                   \
  X(ssd_mobilenet_v2_fpn, make_ssd_mobilenet_v2_fpn_feature_extractor)           \
  X(ssd_mobilenet_v2_keras, make_ssd_mobilenet_v2_keras_feature_extractor)       \
  X(ssd_mobilenet_v3_large, make_ssd_mobilenet_v3_large_feature_extractor)       \
  X(ssd_mobilenet_v3_small, make_ssd_mobilenet_v3_small_feature_extractor)       \
  X(ssd_resnet50_v1_fpn, make_ssd_resnet50_v1_fpn_feature_extractor)             \
  X(ssd_resnet101_v1_fpn, make_ssd_resnet101_v1_fpn_feature_extractor)           \
  X(ssd_resnet152_v1_fpn, make_ssd_resnet152_v1_fpn_feature_extractor)
#define TRAINYARD_SSD_BOX_PREDICTORS(X)                                                        \
  X(convolutional_box_predictor, make_convolutional_box_predictor,                             \
    kConvolutionalBoxPredictorOptions)                                                         \
  X(weight_shared_convolutional_box_predictor, make_weight_shared_convolutional_box_predictor, \
    kWeightSharedConvolutionalBoxPredictorOptions)
#define TRAINYARD_FASTER_RCNN_FEATURE_EXTRACTORS(X)                                          \
  X(faster_rcnn_inception_resnet_v2, make_faster_rcnn_inception_resnet_v2_feature_extractor) \
  X(faster_rcnn_inception_v2, make_faster_rcnn_inception_v2_feature_extractor)               \
  X(faster_rcnn_resnet50, make_faster_rcnn_resnet50_feature_extractor)                       \
  X(faster_rcnn_resnet101, make_faster_rcnn_resnet101_feature_extractor)                     \
  X(faster_rcnn_resnet152, make_faster_rcnn_resnet152_feature_extractor)                     \
  X(faster_rcnn_mobilenet_v1, make_faster_rcnn_mobilenet_v1_feature_extractor)
#define TRAINYARD_FASTER_RCNN_SECOND_STAGE_BOX_PREDICTORS(X)                             \
  X(mask_rcnn_box_predictor, make_mask_rcnn_box_predictor, kMaskRcnnBoxPredictorOptions) \
  X(rfcn_box_predictor, make_rfcn_box_predictor, kRfcnBoxPredictorOptions)

namespace trainyard::models {

// Registers the tables' parts in the process-wide part tables, once per copy of this library,
// held until the library is closed; every meta-architecture calls it before it looks a part up.
// Thread-safe; throws InvalidArgument when another library holds one of the names.
void register_detection_parts();

// The Hyperparams message at `prefix` of an SSD (builders/hyperparams_builder.py), or, when the
// options leave it unset, the sample ssd_mobilenet_v1_coco.config's.
ConvHyperparams ssd_conv_hyperparams(const DetectionOptionReader& r, const std::string& prefix);

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_inception_v2_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);
std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_inception_v3_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v1_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);
std::unique_ptr<detection::SsdFeatureExtractor> make_embedded_ssd_mobilenet_v1_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v1_fpn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);
std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v1_ppn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);
std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v2_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);

std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v2_fpn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);
// ssd_mobilenet_v2 with the variable names and batch norm of the API's Keras model.
std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v2_keras_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);
std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v3_large_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);
std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_mobilenet_v3_small_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);
std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_resnet50_v1_fpn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);
std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_resnet101_v1_fpn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);
std::unique_ptr<detection::SsdFeatureExtractor> make_ssd_resnet152_v1_fpn_feature_extractor(
    const detection::SsdFeatureExtractorParams& params, const DetectionOptionReader& options);

std::unique_ptr<detection::BoxPredictor> make_convolutional_box_predictor(
    const DetectionOptionReader& options, const std::string& prefix);
std::unique_ptr<detection::BoxPredictor> make_weight_shared_convolutional_box_predictor(
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
std::unique_ptr<detection::FasterRcnnFeatureExtractor> make_faster_rcnn_resnet152_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params,
    const DetectionOptionReader& options);
std::unique_ptr<detection::FasterRcnnFeatureExtractor>
make_faster_rcnn_inception_v2_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params,
    const DetectionOptionReader& options);
std::unique_ptr<detection::FasterRcnnFeatureExtractor>
make_faster_rcnn_inception_resnet_v2_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params,
    const DetectionOptionReader& options);
std::unique_ptr<detection::SecondStageBoxPredictor> make_mask_rcnn_box_predictor(
    const DetectionOptionReader& options, const std::string& prefix);
std::unique_ptr<detection::SecondStageBoxPredictor> make_rfcn_box_predictor(
    const DetectionOptionReader& options, const std::string& prefix);

std::unique_ptr<detection::FasterRcnnFeatureExtractor>
make_faster_rcnn_mobilenet_v1_feature_extractor(
    const detection::FasterRcnnFeatureExtractorParams& params,
    const DetectionOptionReader& options);

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_DETECTION_PARTS_H_
