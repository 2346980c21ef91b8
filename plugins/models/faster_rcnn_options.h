// The options of FasterRCNNMetaArch: the fields of the Object Detection API's `faster_rcnn`
// message (protos/faster_rcnn.proto and the messages below it) flattened to dotted paths, as
// the converter of an API pipeline.config writes them (ssd_options.h states the rule; the
// converter writes only the fields a config sets). Defaults are the protos'. num_classes comes
// from the pipeline (ModelContext::num_classes). A field of the API that is not here is refused
// when the model is created, naming it; fields that are here but not supported (the R-FCN and
// mask parts, static-shape switches that change results) are refused by value.
#ifndef TRAINYARD_PLUGINS_MODELS_FASTER_RCNN_OPTIONS_H_
#define TRAINYARD_PLUGINS_MODELS_FASTER_RCNN_OPTIONS_H_

#include <array>

#include "detection_options.h"
#include "detection_parts.h"
#include "image_resizer.h"
#include "trainyard/options.h"

namespace trainyard::models {

#define TRAINYARD_FRCNN_ANCHORS "first_stage_anchor_generator.grid_anchor_generator"
#define TRAINYARD_FRCNN_NMS "second_stage_post_processing.batch_non_max_suppression"

// The `faster_rcnn` message's own fields; kFasterRcnnOptions adds those of each registered
// second-stage box predictor.
inline constexpr OptionSpec kFasterRcnnMessageOptions[] = {
    {"number_of_stages", OptionType::kInt, "2",
     "1: the RPN alone; 2: with the box classifier; 3: also instance masks"},
    {"image_resizer", OptionType::kString, "keep_aspect_ratio_resizer",
     "keep_aspect_ratio_resizer or fixed_shape_resizer"},
    TRAINYARD_KEEP_ASPECT_RATIO_RESIZER_OPTIONS,
    {"image_resizer.fixed_shape_resizer.height", OptionType::kInt, "300", ""},
    {"image_resizer.fixed_shape_resizer.width", OptionType::kInt, "300", ""},
    {"image_resizer.fixed_shape_resizer.resize_method", OptionType::kString, "BILINEAR", ""},
    {"feature_extractor", OptionType::kBool, "false", "the FasterRcnnFeatureExtractor is set"},
    {"feature_extractor.type", OptionType::kString, "faster_rcnn_resnet50",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_FASTER_RCNN_FEATURE_EXTRACTORS)},
    {"feature_extractor.first_stage_features_stride", OptionType::kInt, "16", "8 or 16"},
    {"feature_extractor.batch_norm_trainable", OptionType::kBool, "false",
     "batch norm of the extractor in training mode"},
    TRAINYARD_OD_HYPERPARAMS("feature_extractor.conv_hyperparams"),
    {"feature_extractor.override_base_feature_extractor_hyperparams", OptionType::kBool, "false",
     "the extractor's weight decay and batch norm from feature_extractor.conv_hyperparams"},
    {"feature_extractor.pad_to_multiple", OptionType::kInt, "32",
     "used by the API's FPN extractors only"},
    {"first_stage_anchor_generator", OptionType::kString, "grid_anchor_generator",
     "grid_anchor_generator"},
    {TRAINYARD_FRCNN_ANCHORS ".height", OptionType::kInt, "256", "base anchor height, pixels"},
    {TRAINYARD_FRCNN_ANCHORS ".width", OptionType::kInt, "256", "base anchor width, pixels"},
    {TRAINYARD_FRCNN_ANCHORS ".height_stride", OptionType::kInt, "16", ""},
    {TRAINYARD_FRCNN_ANCHORS ".width_stride", OptionType::kInt, "16", ""},
    {TRAINYARD_FRCNN_ANCHORS ".height_offset", OptionType::kInt, "0", ""},
    {TRAINYARD_FRCNN_ANCHORS ".width_offset", OptionType::kInt, "0", ""},
    {TRAINYARD_FRCNN_ANCHORS ".scales", OptionType::kFloatList, "0.5,1.0,2.0",
     "GridAnchorGenerator's defaults when the config lists none"},
    {TRAINYARD_FRCNN_ANCHORS ".aspect_ratios", OptionType::kFloatList, "0.5,1.0,2.0", ""},
    {"first_stage_atrous_rate", OptionType::kInt, "1", ""},
    TRAINYARD_OD_HYPERPARAMS("first_stage_box_predictor_conv_hyperparams"),
    {"first_stage_box_predictor_kernel_size", OptionType::kInt, "3", ""},
    {"first_stage_box_predictor_depth", OptionType::kInt, "512", ""},
    {"first_stage_minibatch_size", OptionType::kInt, "256", ""},
    {"first_stage_positive_balance_fraction", OptionType::kFloat, "0.5", ""},
    {"first_stage_nms_score_threshold", OptionType::kFloat, "0.0", ""},
    {"first_stage_nms_iou_threshold", OptionType::kFloat, "0.7", ""},
    {"first_stage_max_proposals", OptionType::kInt, "300", ""},
    {"first_stage_localization_loss_weight", OptionType::kFloat, "1.0", ""},
    {"first_stage_objectness_loss_weight", OptionType::kFloat, "1.0", ""},
    {"initial_crop_size", OptionType::kInt, "14", "the API requires it; 14 in its samples"},
    {"maxpool_kernel_size", OptionType::kInt, "2", "the API requires it; 2 in its samples"},
    {"maxpool_stride", OptionType::kInt, "2", "the API requires it; 2 in its samples"},
    {"second_stage_box_predictor", OptionType::kString, "mask_rcnn_box_predictor",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_FASTER_RCNN_SECOND_STAGE_BOX_PREDICTORS)},
    {"second_stage_batch_size", OptionType::kInt, "64", ""},
    {"second_stage_balance_fraction", OptionType::kFloat, "0.25", ""},
    {"second_stage_post_processing", OptionType::kBool, "false", "the PostProcessing is set"},
    {TRAINYARD_FRCNN_NMS, OptionType::kBool, "false", ""},
    {TRAINYARD_FRCNN_NMS ".score_threshold", OptionType::kFloat, "0.0", ""},
    {TRAINYARD_FRCNN_NMS ".iou_threshold", OptionType::kFloat, "0.6", ""},
    {TRAINYARD_FRCNN_NMS ".max_detections_per_class", OptionType::kInt, "100", ""},
    {TRAINYARD_FRCNN_NMS ".max_total_detections", OptionType::kInt, "100", ""},
    {TRAINYARD_FRCNN_NMS ".use_static_shapes", OptionType::kBool, "false",
     "accepted: same results"},
    {TRAINYARD_FRCNN_NMS ".soft_nms_sigma", OptionType::kFloat, "0.0", "Soft-NMS when > 0"},
    {TRAINYARD_FRCNN_NMS ".use_combined_nms", OptionType::kBool, "false",
     "false only: the second stage changes the coordinate frame"},
    {TRAINYARD_FRCNN_NMS ".max_classes_per_detection", OptionType::kInt, "1", "1 only"},
    {TRAINYARD_FRCNN_NMS ".use_partitioned_nms", OptionType::kBool, "false",
     "accepted: same results"},
    {TRAINYARD_FRCNN_NMS ".change_coordinate_frame", OptionType::kBool, "true",
     "accepted: the second stage always changes it, as the API's does"},
    {TRAINYARD_FRCNN_NMS ".use_hard_nms", OptionType::kBool, "false",
     "accepted: same results without soft_nms_sigma"},
    {TRAINYARD_FRCNN_NMS ".use_cpu_nms", OptionType::kBool, "false",
     "accepted: NMS runs on the host"},
    {"second_stage_post_processing.score_converter", OptionType::kString, "IDENTITY",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_OD_SCORE_CONVERTERS)},
    {"second_stage_post_processing.logit_scale", OptionType::kFloat, "1.0", ""},
    {"second_stage_localization_loss_weight", OptionType::kFloat, "1.0", ""},
    {"second_stage_classification_loss_weight", OptionType::kFloat, "1.0", ""},
    {"second_stage_mask_prediction_loss_weight", OptionType::kFloat, "1.0",
     "the mask loss's weight (with a mask_rcnn_box_predictor that predicts instance masks)"},
    {"second_stage_classification_loss", OptionType::kString, "weighted_softmax",
     "weighted_softmax or weighted_sigmoid"},
    {"second_stage_classification_loss.weighted_softmax.logit_scale", OptionType::kFloat, "1.0",
     ""},
    {"second_stage_classification_loss.weighted_softmax.anchorwise_output", OptionType::kBool,
     "false", ""},
    {"second_stage_classification_loss.weighted_sigmoid.anchorwise_output", OptionType::kBool,
     "false", ""},
    {"hard_example_miner", OptionType::kBool, "false",
     "mine the second stage's proposals instead of sampling them"},
    {"hard_example_miner.num_hard_examples", OptionType::kInt, "64", "0: every proposal"},
    {"hard_example_miner.iou_threshold", OptionType::kFloat, "0.7", ""},
    {"hard_example_miner.loss_type", OptionType::kString, "BOTH",
     "BOTH, CLASSIFICATION or LOCALIZATION"},
    {"hard_example_miner.max_negatives_per_positive", OptionType::kInt, "0",
     "no effect: the API's Faster R-CNN gives the miner no matches"},
    {"hard_example_miner.min_negatives_per_image", OptionType::kInt, "0", "no effect either"},
    {"inplace_batchnorm_update", OptionType::kBool, "false", "accepted: updates are in place"},
    {"use_matmul_crop_and_resize", OptionType::kBool, "false", "accepted: same results"},
    {"clip_anchors_to_image", OptionType::kBool, "false", ""},
    {"use_matmul_gather_in_matcher", OptionType::kBool, "false", "accepted: same results"},
    {"use_static_balanced_label_sampler", OptionType::kBool, "false", "not supported"},
    {"use_static_shapes", OptionType::kBool, "false", "accepted: same results"},
    {"use_static_shapes_for_eval", OptionType::kBool, "false", "accepted: same results"},
    {"use_partitioned_nms_in_first_stage", OptionType::kBool, "true", "accepted: same results"},
    {"return_raw_detections_during_predict", OptionType::kBool, "false", "accepted"},
    {"use_combined_nms_in_first_stage", OptionType::kBool, "false", "not supported"},
    {"output_final_box_features", OptionType::kBool, "false", "not supported"},
    {"output_final_box_rpn_features", OptionType::kBool, "false", "not supported"},
};

#undef TRAINYARD_FRCNN_ANCHORS
#undef TRAINYARD_FRCNN_NMS

#define TRAINYARD_FRCNN_PART_OPTIONS(name, factory, options) , options
inline constexpr auto kFasterRcnnOptions = join_options(
    std::to_array(kFasterRcnnMessageOptions)
        TRAINYARD_FASTER_RCNN_SECOND_STAGE_BOX_PREDICTORS(TRAINYARD_FRCNN_PART_OPTIONS));
#undef TRAINYARD_FRCNN_PART_OPTIONS

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_FASTER_RCNN_OPTIONS_H_
