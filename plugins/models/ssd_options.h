// The options of SSDMetaArch: the fields of the Object Detection API's `ssd` message
// (protos/ssd.proto and the messages below it) flattened to dotted paths, as the converter of an
// API pipeline.config writes them (plugins/tasks/detection/od_config.h states the rule):
//   - a set scalar field is its path ("feature_extractor.depth_multiplier"), an enum its value's
//     name ("RELU_6"), a repeated scalar a list;
//   - a choice of a oneof is a string at the path of the message holding the oneof
//     ("box_coder" = "faster_rcnn_box_coder"), its fields below the choice
//     ("box_coder.faster_rcnn_box_coder.y_scale");
//   - a set message outside a oneof is `true` at its path ("loss.hard_example_miner").
// Defaults are the protos' defaults, and for a oneof the sample ssd_mobilenet_v1_coco.config's
// choice; a conv_hyperparams message the API requires and the options leave out is the sample's
// (so SSDMetaArch without options is the sample's model). A field of the API that is not here is
// refused when the model is created, naming it.
#ifndef TRAINYARD_PLUGINS_MODELS_SSD_OPTIONS_H_
#define TRAINYARD_PLUGINS_MODELS_SSD_OPTIONS_H_

#include <array>
#include "detection_options.h"
#include "detection_parts.h"
#include "image_resizer.h"

#include "trainyard/options.h"

namespace trainyard::models {

using O = OptionType;

#define TRAINYARD_SSD_FEATURE_EXTRACTOR "feature_extractor"

// The `ssd` message's own fields; kSsdOptions adds those of each registered box predictor.
inline constexpr OptionSpec kSsdMessageOptions[] = {
    // image_resizer: fixed_shape_resizer is the input pipeline's resize (the converter adds
    // resize_image; the model accepts the fields so that a config states them once);
    // keep_aspect_ratio_resizer resizes in the model's preprocess.
    {"image_resizer", O::kString, "fixed_shape_resizer",
     "fixed_shape_resizer or keep_aspect_ratio_resizer"},
    TRAINYARD_KEEP_ASPECT_RATIO_RESIZER_OPTIONS,
    {"image_resizer.fixed_shape_resizer.height", O::kInt, "300", ""},
    {"image_resizer.fixed_shape_resizer.width", O::kInt, "300", ""},
    {"image_resizer.fixed_shape_resizer.resize_method", O::kString, "BILINEAR", ""},
    {"feature_extractor", O::kBool, "false", "the SsdFeatureExtractor message is set"},
    {"feature_extractor.type", O::kString, "ssd_mobilenet_v1",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_SSD_FEATURE_EXTRACTORS)},
    {"feature_extractor.depth_multiplier", O::kFloat, "1.0", ""},
    {"feature_extractor.min_depth", O::kInt, "16", ""},
    {"feature_extractor.pad_to_multiple", O::kInt, "1", ""},
    {"feature_extractor.use_explicit_padding", O::kBool, "false", ""},
    {"feature_extractor.use_depthwise", O::kBool, "false", ""},
    {"feature_extractor.override_base_feature_extractor_hyperparams", O::kBool, "false", ""},
    {"feature_extractor.fpn", O::kBool, "false", "the FeaturePyramidNetworks message is set"},
    {"feature_extractor.fpn.min_level", O::kInt, "3", "the FPN extractors' finest level"},
    {"feature_extractor.fpn.max_level", O::kInt, "7", "the FPN extractors' coarsest level"},
    {"feature_extractor.fpn.additional_layer_depth", O::kInt, "256", ""},
    TRAINYARD_OD_HYPERPARAMS(TRAINYARD_SSD_FEATURE_EXTRACTOR ".conv_hyperparams"),
    {"box_coder", O::kString, "faster_rcnn_box_coder",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_OD_BOX_CODERS)},
    {"box_coder.faster_rcnn_box_coder.y_scale", O::kFloat, "10.0", ""},
    {"box_coder.faster_rcnn_box_coder.x_scale", O::kFloat, "10.0", ""},
    {"box_coder.faster_rcnn_box_coder.height_scale", O::kFloat, "5.0", ""},
    {"box_coder.faster_rcnn_box_coder.width_scale", O::kFloat, "5.0", ""},
    {"box_coder.mean_stddev_box_coder.stddev", O::kFloat, "0.01", ""},
    {"matcher", O::kString, "argmax_matcher", TRAINYARD_OD_PART_NAMES(TRAINYARD_OD_MATCHERS)},
    {"matcher.argmax_matcher.matched_threshold", O::kFloat, "0.5", ""},
    {"matcher.argmax_matcher.unmatched_threshold", O::kFloat, "0.5", ""},
    {"matcher.argmax_matcher.ignore_thresholds", O::kBool, "false", ""},
    {"matcher.argmax_matcher.negatives_lower_than_unmatched", O::kBool, "true", ""},
    {"matcher.argmax_matcher.force_match_for_each_row", O::kBool, "false", ""},
    {"matcher.argmax_matcher.use_matmul_gather", O::kBool, "false", "accepted: same results"},
    {"matcher.bipartite_matcher.use_matmul_gather", O::kBool, "false", "accepted"},
    {"similarity_calculator", O::kString, "iou_similarity",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_OD_SIMILARITY_CALCULATORS)},
    {"encode_background_as_zeros", O::kBool, "false", ""},
    {"add_background_class", O::kBool, "true",
     "false: no implicit background column (the classes are num_classes slots)"},
    {"explicit_background_class", O::kBool, "false", "false only"},
    {"negative_class_weight", O::kFloat, "1.0", ""},
    {"box_predictor", O::kString, "convolutional_box_predictor",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_SSD_BOX_PREDICTORS)},
    {"anchor_generator", O::kString, "ssd_anchor_generator",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_OD_ANCHOR_GENERATORS)},
    {"anchor_generator.ssd_anchor_generator.num_layers", O::kInt, "6", ""},
    {"anchor_generator.ssd_anchor_generator.min_scale", O::kFloat, "0.2", ""},
    {"anchor_generator.ssd_anchor_generator.max_scale", O::kFloat, "0.95", ""},
    {"anchor_generator.ssd_anchor_generator.scales", O::kFloatList, "", "explicit scales"},
    {"anchor_generator.ssd_anchor_generator.aspect_ratios", O::kFloatList, "1.0,2.0,0.5,3.0,0.3333",
     ""},
    {"anchor_generator.ssd_anchor_generator.interpolated_scale_aspect_ratio", O::kFloat, "1.0", ""},
    {"anchor_generator.ssd_anchor_generator.reduce_boxes_in_lowest_layer", O::kBool, "true", ""},
    {"anchor_generator.ssd_anchor_generator.base_anchor_height", O::kFloat, "1.0", ""},
    {"anchor_generator.ssd_anchor_generator.base_anchor_width", O::kFloat, "1.0", ""},
    {"anchor_generator.ssd_anchor_generator.height_stride", O::kIntList, "", ""},
    {"anchor_generator.ssd_anchor_generator.width_stride", O::kIntList, "", ""},
    {"anchor_generator.ssd_anchor_generator.height_offset", O::kIntList, "", ""},
    {"anchor_generator.ssd_anchor_generator.width_offset", O::kIntList, "", ""},
    {"anchor_generator.multiscale_anchor_generator.min_level", O::kInt, "3", ""},
    {"anchor_generator.multiscale_anchor_generator.max_level", O::kInt, "7", ""},
    {"anchor_generator.multiscale_anchor_generator.anchor_scale", O::kFloat, "4.0", ""},
    {"anchor_generator.multiscale_anchor_generator.aspect_ratios", O::kFloatList, "1.0,2.0,0.5",
     ""},
    {"anchor_generator.multiscale_anchor_generator.scales_per_octave", O::kInt, "2", ""},
    {"anchor_generator.multiscale_anchor_generator.normalize_coordinates", O::kBool, "true", ""},
    {"post_processing", O::kBool, "false", "the PostProcessing message is set"},
    {"post_processing.batch_non_max_suppression", O::kBool, "false", ""},
    {"post_processing.batch_non_max_suppression.score_threshold", O::kFloat, "0.0", ""},
    {"post_processing.batch_non_max_suppression.iou_threshold", O::kFloat, "0.6", ""},
    {"post_processing.batch_non_max_suppression.max_detections_per_class", O::kInt, "100", ""},
    {"post_processing.batch_non_max_suppression.max_total_detections", O::kInt, "100", ""},
    {"post_processing.batch_non_max_suppression.use_static_shapes", O::kBool, "false",
     "accepted: same results"},
    {"post_processing.batch_non_max_suppression.use_class_agnostic_nms", O::kBool, "false",
     "one NMS over each anchor's best class"},
    {"post_processing.batch_non_max_suppression.max_classes_per_detection", O::kInt, "1", "1 only"},
    {"post_processing.batch_non_max_suppression.soft_nms_sigma", O::kFloat, "0.0",
     "Soft-NMS when > 0"},
    {"post_processing.batch_non_max_suppression.use_combined_nms", O::kBool, "false",
     "tf.image.combined_non_max_suppression"},
    {"post_processing.batch_non_max_suppression.use_partitioned_nms", O::kBool, "false",
     "accepted: same results"},
    {"post_processing.batch_non_max_suppression.change_coordinate_frame", O::kBool, "true",
     "accepted: SSD's clip window is the whole image"},
    {"post_processing.batch_non_max_suppression.use_hard_nms", O::kBool, "false",
     "accepted: same results without soft_nms_sigma"},
    {"post_processing.batch_non_max_suppression.use_cpu_nms", O::kBool, "false",
     "accepted: NMS runs on the host"},
    {"post_processing.score_converter", O::kString, "IDENTITY",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_OD_SCORE_CONVERTERS)},
    {"post_processing.logit_scale", O::kFloat, "1.0", ""},
    {"loss", O::kBool, "false", "the Loss message is set"},
    {"loss.localization_loss", O::kString, "weighted_smooth_l1",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_OD_LOCALIZATION_LOSSES)},
    {"loss.localization_loss.weighted_smooth_l1.delta", O::kFloat, "1.0", ""},
    {"loss.localization_loss.weighted_smooth_l1.anchorwise_output", O::kBool, "false", ""},
    {"loss.localization_loss.weighted_l2.anchorwise_output", O::kBool, "false", ""},
    {"loss.classification_loss", O::kString, "weighted_sigmoid",
     TRAINYARD_OD_PART_NAMES(TRAINYARD_OD_CLASSIFICATION_LOSSES)},
    {"loss.classification_loss.weighted_sigmoid.anchorwise_output", O::kBool, "false", ""},
    {"loss.classification_loss.weighted_softmax.logit_scale", O::kFloat, "1.0", ""},
    {"loss.classification_loss.weighted_softmax.anchorwise_output", O::kBool, "false", ""},
    {"loss.classification_loss.weighted_sigmoid_focal.gamma", O::kFloat, "2.0", ""},
    {"loss.classification_loss.weighted_sigmoid_focal.alpha", O::kFloat, "-1",
     "unset (-1): no alpha weighting"},
    {"loss.classification_loss.weighted_sigmoid_focal.anchorwise_output", O::kBool, "false", ""},
    {"loss.classification_loss.bootstrapped_sigmoid.alpha", O::kFloat, "0.0", ""},
    {"loss.classification_loss.bootstrapped_sigmoid.hard_bootstrap", O::kBool, "false", ""},
    {"loss.classification_loss.bootstrapped_sigmoid.anchorwise_output", O::kBool, "false", ""},
    {"loss.hard_example_miner", O::kBool, "false", "hard example mining"},
    {"loss.hard_example_miner.num_hard_examples", O::kInt, "64", ""},
    {"loss.hard_example_miner.iou_threshold", O::kFloat, "0.7", ""},
    {"loss.hard_example_miner.loss_type", O::kString, "BOTH",
     "BOTH, CLASSIFICATION or LOCALIZATION"},
    {"loss.hard_example_miner.max_negatives_per_positive", O::kInt, "0", ""},
    {"loss.hard_example_miner.min_negatives_per_image", O::kInt, "0", ""},
    {"loss.classification_weight", O::kFloat, "1.0", ""},
    {"loss.localization_weight", O::kFloat, "1.0", ""},
    {"normalize_loss_by_num_matches", O::kBool, "true", ""},
    {"normalize_loc_loss_by_codesize", O::kBool, "false", ""},
    {"freeze_batchnorm", O::kBool, "false",
     "the base net's batch norm in inference mode while training (the API's: the other layers "
     "follow their conv_hyperparams' batch_norm.train)"},
    {"inplace_batchnorm_update", O::kBool, "false", "accepted: updates are always in place"},
    // The pipeline's graph_rewriter (not the ssd message's; the converter adds it here).
    {"graph_rewriter.quantization", O::kBool, "false",
     "quantization-aware training: contrib.quantize's fake quantization in every layer "
     "(trainyard/pkg/layers/quantize.h)"},
    {"graph_rewriter.quantization.delay", O::kInt, "500000",
     "training steps before the fake quantization takes effect"},
    {"graph_rewriter.quantization.weight_bits", O::kInt, "8", ""},
    {"graph_rewriter.quantization.activation_bits", O::kInt, "8", ""},
};

#undef TRAINYARD_SSD_FEATURE_EXTRACTOR

#define TRAINYARD_SSD_PART_OPTIONS(name, factory, options) , options
inline constexpr auto kSsdOptions = join_options(
    std::to_array(kSsdMessageOptions) TRAINYARD_SSD_BOX_PREDICTORS(TRAINYARD_SSD_PART_OPTIONS));
#undef TRAINYARD_SSD_PART_OPTIONS

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_SSD_OPTIONS_H_
