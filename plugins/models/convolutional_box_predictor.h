// convolutional_box_predictor's options: the ConvolutionalBoxPredictor message
// (protos/box_predictor.proto) at box_predictor.convolutional_box_predictor, flattened as
// ssd_options.h describes. SSDMetaArch's options include them through detection_parts.h's
// table, so the predictor declares its own fields.
#ifndef TRAINYARD_PLUGINS_MODELS_CONVOLUTIONAL_BOX_PREDICTOR_H_
#define TRAINYARD_PLUGINS_MODELS_CONVOLUTIONAL_BOX_PREDICTOR_H_

#include <array>

#include "trainyard/options.h"
#include "trainyard/pkg/detection/model_options.h"

namespace trainyard::models {

#define TRAINYARD_SSD_PREDICTOR "box_predictor.convolutional_box_predictor"

inline constexpr auto kConvolutionalBoxPredictorOptions = std::to_array<OptionSpec>({
    TRAINYARD_OD_HYPERPARAMS(TRAINYARD_SSD_PREDICTOR ".conv_hyperparams"),
    {TRAINYARD_SSD_PREDICTOR ".min_depth", OptionType::kInt, "0", ""},
    {TRAINYARD_SSD_PREDICTOR ".max_depth", OptionType::kInt, "0", ""},
    {TRAINYARD_SSD_PREDICTOR ".num_layers_before_predictor", OptionType::kInt, "0", ""},
    {TRAINYARD_SSD_PREDICTOR ".use_dropout", OptionType::kBool, "true", ""},
    {TRAINYARD_SSD_PREDICTOR ".dropout_keep_probability", OptionType::kFloat, "0.8", ""},
    {TRAINYARD_SSD_PREDICTOR ".kernel_size", OptionType::kInt, "1", ""},
    {TRAINYARD_SSD_PREDICTOR ".box_code_size", OptionType::kInt, "4", ""},
    {TRAINYARD_SSD_PREDICTOR ".apply_sigmoid_to_scores", OptionType::kBool, "false", ""},
    {TRAINYARD_SSD_PREDICTOR ".class_prediction_bias_init", OptionType::kFloat, "0.0", ""},
    {TRAINYARD_SSD_PREDICTOR ".use_depthwise", OptionType::kBool, "false",
     "SSDLite: depthwise heads"},
});

#undef TRAINYARD_SSD_PREDICTOR

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_CONVOLUTIONAL_BOX_PREDICTOR_H_
