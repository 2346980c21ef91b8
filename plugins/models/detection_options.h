// The meta-architectures' names for pkg/detection's model options (model_options.h): the
// Hyperparams message, its convolution options, the option reader and the size bounds.
#ifndef TRAINYARD_PLUGINS_MODELS_DETECTION_OPTIONS_H_
#define TRAINYARD_PLUGINS_MODELS_DETECTION_OPTIONS_H_

#include "trainyard/pkg/detection/model_options.h"

namespace trainyard::models {

using detection::conv_options;
using detection::ConvHyperparams;
using detection::DetectionOptionReader;
using detection::host_f32;
using detection::kMaxDepthMultiplier;
using detection::kMaxDetections;
using detection::kMaxImageDimension;
using detection::prediction_entry;

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_DETECTION_OPTIONS_H_
