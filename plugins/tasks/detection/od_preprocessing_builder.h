// The detection task's builder of data_augmentation_options: the transform
// (trainyard/pkg/detection/transforms.h) of one of the Object Detection API's PreprocessingSteps
// (proto/od_preprocessor.proto), with the API's defaults for unset fields
// (preprocessor_builder.py).
#ifndef TRAINYARD_PLUGINS_TASKS_DETECTION_OD_PREPROCESSING_BUILDER_H_
#define TRAINYARD_PLUGINS_TASKS_DETECTION_OD_PREPROCESSING_BUILDER_H_

#include <memory>

#include "od_preprocessor.pb.h"
#include "trainyard/pkg/detection/transforms.h"
#include "trainyard/transform.h"

namespace trainyard::detection {

// Throws ConfigError naming the step when Trainyard does not implement it, or an option it does
// not support (keypoint permutations, resize methods AREA and BICUBIC).
std::unique_ptr<ExampleTransform> build_od_preprocessing_step(
    const od::PreprocessingStep& step, const DetectionFeatureNames& names = {});

}  // namespace trainyard::detection

#endif  // TRAINYARD_PLUGINS_TASKS_DETECTION_OD_PREPROCESSING_BUILDER_H_
