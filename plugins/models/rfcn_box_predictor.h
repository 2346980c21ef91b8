// rfcn_box_predictor's options: the RfcnBoxPredictor message (protos/box_predictor.proto) at
// second_stage_box_predictor.rfcn_box_predictor, flattened as ssd_options.h describes, with the
// API's defaults. Faster R-CNN's options include them through detection_parts.h's table.
#ifndef TRAINYARD_PLUGINS_MODELS_RFCN_BOX_PREDICTOR_H_
#define TRAINYARD_PLUGINS_MODELS_RFCN_BOX_PREDICTOR_H_

#include <array>

#include "trainyard/options.h"
#include "trainyard/pkg/detection/model_options.h"

namespace trainyard::models {

#define TRAINYARD_RFCN_PREDICTOR "second_stage_box_predictor.rfcn_box_predictor"

inline constexpr auto kRfcnBoxPredictorOptions = std::to_array<OptionSpec>({
    TRAINYARD_OD_HYPERPARAMS(TRAINYARD_RFCN_PREDICTOR ".conv_hyperparams"),
    {TRAINYARD_RFCN_PREDICTOR ".num_spatial_bins_height", OptionType::kInt, "3", ""},
    {TRAINYARD_RFCN_PREDICTOR ".num_spatial_bins_width", OptionType::kInt, "3", ""},
    {TRAINYARD_RFCN_PREDICTOR ".depth", OptionType::kInt, "1024", ""},
    {TRAINYARD_RFCN_PREDICTOR ".box_code_size", OptionType::kInt, "4", "4"},
    {TRAINYARD_RFCN_PREDICTOR ".crop_height", OptionType::kInt, "12", ""},
    {TRAINYARD_RFCN_PREDICTOR ".crop_width", OptionType::kInt, "12", ""},
});

#undef TRAINYARD_RFCN_PREDICTOR

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_RFCN_BOX_PREDICTOR_H_
