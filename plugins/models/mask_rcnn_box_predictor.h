// mask_rcnn_box_predictor's options: the MaskRCNNBoxPredictor message
// (protos/box_predictor.proto) at second_stage_box_predictor.mask_rcnn_box_predictor, flattened
// as ssd_options.h describes (the fields this predictor supports: the box and class heads and the
// mask head; not the keypoint head). Faster R-CNN's options include them through
// detection_parts.h's table.
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
    TRAINYARD_OD_HYPERPARAMS(TRAINYARD_FRCNN_PREDICTOR ".conv_hyperparams"),
    {TRAINYARD_FRCNN_PREDICTOR ".predict_instance_masks", OptionType::kBool, "false",
     "add the mask head (Mask R-CNN)"},
    {TRAINYARD_FRCNN_PREDICTOR ".mask_prediction_conv_depth", OptionType::kInt, "256",
     "depth of the mask head's convolutions; 0: from the features' depth and the classes"},
    {TRAINYARD_FRCNN_PREDICTOR ".mask_height", OptionType::kInt, "15", ""},
    {TRAINYARD_FRCNN_PREDICTOR ".mask_width", OptionType::kInt, "15", ""},
    {TRAINYARD_FRCNN_PREDICTOR ".mask_prediction_num_conv_layers", OptionType::kInt, "2",
     "convolutions of the mask head, the last one's output the mask logits"},
    {TRAINYARD_FRCNN_PREDICTOR ".masks_are_class_agnostic", OptionType::kBool, "false",
     "one mask per box instead of one per class"},
    {TRAINYARD_FRCNN_PREDICTOR ".convolve_then_upsample_masks", OptionType::kBool, "false",
     "convolve at the features' size, then upsample by nearest neighbour (else resize first)"},
});

#undef TRAINYARD_FRCNN_PREDICTOR

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_MASK_RCNN_BOX_PREDICTOR_H_
