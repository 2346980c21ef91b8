// FasterRcnnConfig from FasterRCNNMetaArch's options (faster_rcnn_options.h), with the checks
// of the API's model_builder._build_faster_rcnn_model and the builders it calls.
#include <memory>
#include <string>
#include <vector>

#include "detection_parts.h"
#include "faster_rcnn_meta_arch.h"
#include "nms_options.h"
#include "trainyard/error.h"

namespace trainyard::models {
namespace {

constexpr const char* kName = "FasterRCNNMetaArch";

// Options whose only supported value is the proto's default: a set value is refused by name.
void refuse_unless_default(const DetectionOptionReader& r, const std::string& key,
                           const std::string& why) {
  const Options& o = r.options();
  if (o.get_bool(key)) throw Unimplemented(std::string(kName) + ": " + key + " is " + why);
}

}  // namespace

FasterRcnnConfig faster_rcnn_config_from_options(const Options& o) {
  const DetectionOptionReader r(o, kName);
  FasterRcnnConfig c;
  c.number_of_stages = o.get_int("number_of_stages");
  if (c.number_of_stages < 1 || c.number_of_stages > 3) {
    r.refuse("number_of_stages", std::to_string(c.number_of_stages),
             "supported: 1 (the RPN), 2 (with the box classifier) or 3 (with Mask R-CNN's masks)");
  }

  const std::string resizer =
      r.choice("image_resizer", {"keep_aspect_ratio_resizer", "fixed_shape_resizer"});
  c.keep_aspect_ratio = resizer == "keep_aspect_ratio_resizer";
  if (c.keep_aspect_ratio) c.resizer = keep_aspect_ratio_resizer_from_options(r);

  // The API requires feature_extractor; without it the model takes the sample's
  // (faster_rcnn_resnet50 at stride 16), so that the class is created with its defaults.
  register_detection_parts();
  detection::FasterRcnnFeatureExtractorParams& f = c.feature_extractor;
  f.type = o.get_string("feature_extractor.type");
  const detection::FasterRcnnFeatureExtractorFactory make_extractor =
      detection::faster_rcnn_feature_extractors().find(kName, "feature_extractor.type", f.type);
  f.first_stage_features_stride = o.get_int("feature_extractor.first_stage_features_stride");
  f.batch_norm_trainable = o.get_bool("feature_extractor.batch_norm_trainable");
  // The API reads these two for its Keras and FPN extractors only; here they override the slim
  // extractors' arg scope as SSD's do: weight decay, batch norm decay and epsilon.
  if (o.get_bool("feature_extractor.override_base_feature_extractor_hyperparams")) {
    f.conv_hyperparams = r.hyperparams("feature_extractor.conv_hyperparams");
    if (!f.conv_hyperparams) {
      throw InvalidArgument(std::string(kName) +
                            ": feature_extractor.override_base_feature_extractor_hyperparams "
                            "needs feature_extractor.conv_hyperparams");
    }
  }
  c.extractor = make_extractor(f, r);
  if (o.get_int("feature_extractor.pad_to_multiple") != 32) {
    r.refuse("feature_extractor.pad_to_multiple",
             std::to_string(o.get_int("feature_extractor.pad_to_multiple")),
             "only the API's FPN extractors use it; leave it unset");
  }

  r.choice("first_stage_anchor_generator", {"grid_anchor_generator"});
  const std::string a = "first_stage_anchor_generator.grid_anchor_generator.";
  c.anchors.scales = r.positive_list(a + "scales");
  c.anchors.aspect_ratios = r.positive_list(a + "aspect_ratios");
  if (c.anchors.scales.empty() || c.anchors.aspect_ratios.empty()) {
    throw InvalidArgument(std::string(kName) + ": " + a + "scales and " + a +
                          "aspect_ratios must not be empty");
  }
  c.anchors.base_anchor_size = {static_cast<double>(r.at_least(a + "height", 1)),
                                static_cast<double>(r.at_least(a + "width", 1))};
  c.anchors.anchor_stride = {static_cast<double>(r.at_least(a + "height_stride", 1)),
                             static_cast<double>(r.at_least(a + "width_stride", 1))};
  c.anchors.anchor_offset = {static_cast<double>(o.get_int(a + "height_offset")),
                             static_cast<double>(o.get_int(a + "width_offset"))};

  c.atrous_rate = r.at_least("first_stage_atrous_rate", 1);
  // The API requires first_stage_box_predictor_conv_hyperparams; without it the model takes the
  // sample faster_rcnn_resnet50_coco.config's: no regularization, truncated normal 0.01.
  if (std::optional<ConvHyperparams> h =
          r.hyperparams("first_stage_box_predictor_conv_hyperparams")) {
    c.rpn_hyperparams = *h;
  } else {
    c.rpn_hyperparams.l2_weight = 0.0;
    c.rpn_hyperparams.initializer = layers::truncated_normal_initializer(0.0, 0.01);
  }
  c.rpn_kernel_size = r.at_least("first_stage_box_predictor_kernel_size", 1);
  c.rpn_depth = r.at_least("first_stage_box_predictor_depth", 1);
  c.first_stage_minibatch_size = r.at_least("first_stage_minibatch_size", 1);
  c.first_stage_positive_fraction = r.unit_interval("first_stage_positive_balance_fraction");
  c.first_stage_nms_score_threshold =
      static_cast<float>(o.get_float("first_stage_nms_score_threshold"));
  c.first_stage_nms_iou_threshold =
      static_cast<float>(r.unit_interval("first_stage_nms_iou_threshold"));
  c.first_stage_max_proposals = r.in_range("first_stage_max_proposals", 1, kMaxDetections);
  c.first_stage_localization_weight = o.get_float("first_stage_localization_loss_weight");
  c.first_stage_objectness_weight = o.get_float("first_stage_objectness_loss_weight");
  c.clip_anchors_to_image = o.get_bool("clip_anchors_to_image");

  c.initial_crop_size = r.at_least("initial_crop_size", 1);
  c.maxpool_kernel_size = r.at_least("maxpool_kernel_size", 1);
  c.maxpool_stride = r.at_least("maxpool_stride", 1);
  if (c.maxpool_kernel_size > c.initial_crop_size) {
    r.refuse("maxpool_kernel_size", std::to_string(c.maxpool_kernel_size),
             "expected at most initial_crop_size " + std::to_string(c.initial_crop_size));
  }

  const std::string predictor = o.get_string("second_stage_box_predictor");
  c.second_stage_box_predictor = detection::faster_rcnn_second_stage_box_predictors().find(
      kName, "second_stage_box_predictor", predictor)(r, "second_stage_box_predictor." + predictor);
  // The API's third stage calls the predictor's mask head, which only predict_instance_masks adds.
  if (c.number_of_stages == 3 && !c.second_stage_box_predictor->predicts_instance_masks()) {
    r.refuse("number_of_stages", "3",
             "the third stage predicts instance masks: set second_stage_box_predictor."
             "mask_rcnn_box_predictor.predict_instance_masks");
  }

  c.second_stage_batch_size = r.at_least("second_stage_batch_size", 1);
  c.second_stage_balance_fraction = r.unit_interval("second_stage_balance_fraction");
  // model_builder: "second_stage_batch_size should be no greater than first_stage_max_proposals."
  if (c.second_stage_batch_size > c.first_stage_max_proposals) {
    r.refuse("second_stage_batch_size", std::to_string(c.second_stage_batch_size),
             "expected at most first_stage_max_proposals " +
                 std::to_string(c.first_stage_max_proposals));
  }
  const std::string n = "second_stage_post_processing.batch_non_max_suppression.";
  c.second_stage_nms.score_threshold = static_cast<float>(o.get_float(n + "score_threshold"));
  c.second_stage_nms.iou_threshold = static_cast<float>(r.unit_interval(n + "iou_threshold"));
  c.second_stage_nms.max_detections_per_class =
      r.in_range(n + "max_detections_per_class", 1, kMaxDetections);
  c.second_stage_nms.max_total_detections =
      r.in_range(n + "max_total_detections", 1, kMaxDetections);
  read_nms_variant(r, n, c.second_stage_nms, /*combined_allowed=*/false);
  c.score_converter = detection::score_converters().find(
      kName, "second_stage_post_processing.score_converter",
      o.get_string("second_stage_post_processing.score_converter"));
  c.logit_scale = o.get_float("second_stage_post_processing.logit_scale");
  if (c.logit_scale == 0.0) {
    r.refuse("second_stage_post_processing.logit_scale", "0",
             "the scores are the logits times 1 / logit_scale");
  }
  c.second_stage_localization_weight = o.get_float("second_stage_localization_loss_weight");
  c.second_stage_classification_weight = o.get_float("second_stage_classification_loss_weight");
  c.second_stage_mask_prediction_loss_weight =
      o.get_float("second_stage_mask_prediction_loss_weight");
  const std::string loss =
      r.choice("second_stage_classification_loss", {"weighted_softmax", "weighted_sigmoid"});
  if (loss == "weighted_softmax") {
    c.second_stage_classification_loss =
        std::make_shared<detection::WeightedSoftmaxClassificationLoss>(
            o.get_float("second_stage_classification_loss.weighted_softmax.logit_scale"));
  } else {
    c.second_stage_classification_loss =
        std::make_shared<detection::WeightedSigmoidClassificationLoss>();
  }
  if (o.get_bool("hard_example_miner")) {
    // model_builder: build_hard_example_miner(config, second_stage_classification_loss_weight,
    // second_stage_localization_loss_weight).
    const std::string h = "hard_example_miner.";
    detection::HardExampleMinerOptions m;
    m.num_hard_examples = r.at_least(h + "num_hard_examples", 0);
    m.iou_threshold = static_cast<float>(r.unit_interval(h + "iou_threshold"));
    const std::string type = r.choice(h + "loss_type", {"BOTH", "CLASSIFICATION", "LOCALIZATION"});
    using T = detection::HardExampleMinerOptions::LossType;
    m.loss_type = type == "BOTH"             ? T::kBoth
                  : type == "CLASSIFICATION" ? T::kClassification
                                             : T::kLocalization;
    m.max_negatives_per_positive = r.at_least(h + "max_negatives_per_positive", 0);
    m.min_negatives_per_image = r.at_least(h + "min_negatives_per_image", 0);
    m.cls_loss_weight = c.second_stage_classification_weight;
    m.loc_loss_weight = c.second_stage_localization_weight;
    c.hard_example_miner = m;
  }
  refuse_unless_default(r, "use_static_balanced_label_sampler", "not supported");
  refuse_unless_default(r, "use_combined_nms_in_first_stage", "not supported");
  refuse_unless_default(r, "output_final_box_features", "not supported");
  refuse_unless_default(r, "output_final_box_rpn_features", "not supported");
  return c;
}

}  // namespace trainyard::models
