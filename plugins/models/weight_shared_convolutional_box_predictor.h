// weight_shared_convolutional_box_predictor's options: the WeightSharedConvolutionalBoxPredictor
// message (protos/box_predictor.proto) at box_predictor.weight_shared_convolutional_box_predictor,
// flattened as ssd_options.h describes (RetinaNet's predictor: one tower and head for every
// feature map).
#ifndef TRAINYARD_PLUGINS_MODELS_WEIGHT_SHARED_CONVOLUTIONAL_BOX_PREDICTOR_H_
#define TRAINYARD_PLUGINS_MODELS_WEIGHT_SHARED_CONVOLUTIONAL_BOX_PREDICTOR_H_

#include <array>

#include "trainyard/options.h"
#include "trainyard/pkg/detection/model_options.h"

namespace trainyard::models {

#define TRAINYARD_SSD_PREDICTOR "box_predictor.weight_shared_convolutional_box_predictor"

inline constexpr auto kWeightSharedConvolutionalBoxPredictorOptions = std::to_array<OptionSpec>({
    TRAINYARD_OD_HYPERPARAMS(TRAINYARD_SSD_PREDICTOR ".conv_hyperparams"),
    {TRAINYARD_SSD_PREDICTOR ".num_layers_before_predictor", OptionType::kInt, "0", ""},
    {TRAINYARD_SSD_PREDICTOR ".depth", OptionType::kInt, "0", "the towers' depth"},
    {TRAINYARD_SSD_PREDICTOR ".kernel_size", OptionType::kInt, "3", ""},
    {TRAINYARD_SSD_PREDICTOR ".box_code_size", OptionType::kInt, "4", ""},
    {TRAINYARD_SSD_PREDICTOR ".class_prediction_bias_init", OptionType::kFloat, "0.0", ""},
    {TRAINYARD_SSD_PREDICTOR ".use_dropout", OptionType::kBool, "false", ""},
    {TRAINYARD_SSD_PREDICTOR ".dropout_keep_probability", OptionType::kFloat, "0.8", ""},
    {TRAINYARD_SSD_PREDICTOR ".share_prediction_tower", OptionType::kBool, "false", ""},
    {TRAINYARD_SSD_PREDICTOR ".use_depthwise", OptionType::kBool, "false",
     "separable convolutions in the towers and heads"},
    {TRAINYARD_SSD_PREDICTOR ".score_converter", OptionType::kString, "IDENTITY",
     "IDENTITY or SIGMOID, on the class predictions"},
    {TRAINYARD_SSD_PREDICTOR ".box_encodings_clip_range", OptionType::kBool, "false",
     "the BoxEncodingsClipRange message is set"},
    {TRAINYARD_SSD_PREDICTOR ".box_encodings_clip_range.min", OptionType::kFloat, "0.0", ""},
    {TRAINYARD_SSD_PREDICTOR ".box_encodings_clip_range.max", OptionType::kFloat, "0.0", ""},
});

#undef TRAINYARD_SSD_PREDICTOR

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_WEIGHT_SHARED_CONVOLUTIONAL_BOX_PREDICTOR_H_
