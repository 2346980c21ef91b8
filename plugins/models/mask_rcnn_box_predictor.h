// mask_rcnn_box_predictor's options: the MaskRCNNBoxPredictor message
// (protos/box_predictor.proto) at second_stage_box_predictor.mask_rcnn_box_predictor, flattened
// as ssd_options.h describes (the fields this predictor supports: no mask head). Faster R-CNN's
// options include them through detection_parts.h's table.
#ifndef TRAINYARD_PLUGINS_MODELS_MASK_RCNN_BOX_PREDICTOR_H_
#define TRAINYARD_PLUGINS_MODELS_MASK_RCNN_BOX_PREDICTOR_H_

#include <array>

#include "trainyard/options.h"
#include "trainyard/pkg/detection/model_options.h"

namespace trainyard::models {

#define TRAINYARD_FRCNN_PREDICTOR "second_stage_box_predictor.mask_rcnn_box_predictor"

inline constexpr auto kMaskRcnnBoxPredictorOptions = std::to_array<OptionSpec>({
    TRAINYARD_OD_HYPERPARAMS(TRAINYARD_FRCNN_PREDICTOR ".fc_hyperparams"),
    {TRAINYARD_FRCNN_PREDICTOR ".use_dropout", OptionType::kBool, "false", ""},
    {TRAINYARD_FRCNN_PREDICTOR ".dropout_keep_probability", OptionType::kFloat, "0.5", ""},
    {TRAINYARD_FRCNN_PREDICTOR ".box_code_size", OptionType::kInt, "4", "4"},
    {TRAINYARD_FRCNN_PREDICTOR ".share_box_across_classes", OptionType::kBool, "false", ""},
});

#undef TRAINYARD_FRCNN_PREDICTOR

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_MASK_RCNN_BOX_PREDICTOR_H_
