// SsdConfig from SSDMetaArch's options (ssd_options.h), with the API's builders' checks.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "detection_parts.h"
#include "keras_variable_names.h"
#include "nms_options.h"
#include "ssd_meta_arch.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/part_builders.h"

namespace trainyard::models {

SsdConfig ssd_config_from_options(const Options& o) {
  const DetectionOptionReader r(o, "SSDMetaArch");
  SsdConfig c;
  const bool keep_aspect_ratio =
      r.choice("image_resizer", {"fixed_shape_resizer", "keep_aspect_ratio_resizer"}) ==
      "keep_aspect_ratio_resizer";

  register_detection_parts();
  detection::SsdFeatureExtractorParams& f = c.feature_extractor;
  f.type = o.get_string("feature_extractor.type");
  const detection::SsdFeatureExtractorFactory make_extractor =
      detection::ssd_feature_extractors().find("SSDMetaArch", "feature_extractor.type", f.type);
  f.depth_multiplier =
      r.positive_at_most("feature_extractor.depth_multiplier", kMaxDepthMultiplier);
  f.min_depth = o.get_int("feature_extractor.min_depth");
  f.pad_to_multiple = o.get_int("feature_extractor.pad_to_multiple");
  if (f.pad_to_multiple < 1) {
    r.refuse("feature_extractor.pad_to_multiple", std::to_string(f.pad_to_multiple),
             "expected >= 1");
  }
  f.use_explicit_padding = o.get_bool("feature_extractor.use_explicit_padding");
  f.use_depthwise = o.get_bool("feature_extractor.use_depthwise");
  f.override_base_feature_extractor_hyperparams =
      o.get_bool("feature_extractor.override_base_feature_extractor_hyperparams");
  f.conv_hyperparams = ssd_conv_hyperparams(r, "feature_extractor.conv_hyperparams");
  f.freeze_batchnorm = o.get_bool("freeze_batchnorm");
  c.extractor = make_extractor(f, r);
  const int64_t min_dimension = c.extractor->min_image_dimension();
  const std::optional<int64_t> exact = c.extractor->exact_image_dimension();
  if (keep_aspect_ratio) {
    // Every image's shorter side resizes to at most min_dimension (max_dimension padded).
    const KeepAspectRatioResizer k = keep_aspect_ratio_resizer_from_options(r);
    const std::string at = "image_resizer.keep_aspect_ratio_resizer.";
    const std::string key = at + (k.pad_to_max_dimension ? "max_dimension" : "min_dimension");
    const int64_t side = k.pad_to_max_dimension ? k.max_dimension : k.min_dimension;
    if (side < min_dimension) {
      r.refuse(key, std::to_string(side),
               f.type + " needs images of at least " + std::to_string(min_dimension) + " x " +
                   std::to_string(min_dimension) + " (check_min_image_dim)");
    }
    if (exact && !(k.pad_to_max_dimension && k.max_dimension == *exact)) {
      r.refuse(at + "pad_to_max_dimension", k.pad_to_max_dimension ? "true" : "false",
               f.type + " takes only " + std::to_string(*exact) + " x " + std::to_string(*exact) +
                   " images: pad_to_max_dimension true with max_dimension " +
                   std::to_string(*exact) + ", or fixed_shape_resizer");
    }
    c.keep_aspect_ratio_resizer = k;
  } else {
    for (const std::string side : {"height", "width"}) {
      const std::string key = "image_resizer.fixed_shape_resizer." + side;
      const int64_t size = o.get_int(key);
      if (size < min_dimension) {
        r.refuse(key, std::to_string(size),
                 f.type + " needs images of at least " + std::to_string(min_dimension) + " x " +
                     std::to_string(min_dimension) + " (check_min_image_dim)");
      }
      if (exact && size != *exact) {
        r.refuse(key, std::to_string(size),
                 f.type + " takes only " + std::to_string(*exact) + " x " + std::to_string(*exact) +
                     " images");
      }
    }
  }

  c.box_coder = detection::build_part(detection::box_coders(), r, "box_coder");
  c.matcher = detection::build_part(detection::matchers(), r, "matcher");
  c.similarity =
      detection::build_part(detection::region_similarity_calculators(), r, "similarity_calculator");
  c.encode_background_as_zeros = o.get_bool("encode_background_as_zeros");
  c.add_background_class = o.get_bool("add_background_class");
  if (o.get_bool("explicit_background_class")) {
    // The data's own background class at index 0: no reader gives one.
    r.refuse("explicit_background_class", "true", "false (the input has no background class)");
  }
  c.negative_class_weight = r.unit_interval("negative_class_weight");

  c.box_predictor_type = o.get_string("box_predictor");
  c.box_predictor =
      detection::ssd_box_predictors().find("SSDMetaArch", "box_predictor", c.box_predictor_type)(
          r, "box_predictor." + c.box_predictor_type);
  if (c.extractor->is_keras_model()) {
    // box_predictor_builder.build_keras: the Keras ConvolutionalBoxPredictor only.
    const std::string p = "box_predictor." + c.box_predictor_type;
    if (c.box_predictor_type != "convolutional_box_predictor") {
      r.refuse("box_predictor", c.box_predictor_type,
               "convolutional_box_predictor: feature_extractor.type " + f.type +
                   " is a Keras model, whose predictor the API builds for no other");
    }
    if (o.get_int(p + ".num_layers_before_predictor") != 0 || o.get_bool(p + ".use_depthwise")) {
      r.refuse(p + ".num_layers_before_predictor or .use_depthwise", "set",
               "0 and false: the Keras predictor's shared and depthwise layers (with " + f.type +
                   ") are not compared with the API's");
    }
    c.box_predictor = keras_named_box_predictor(std::move(c.box_predictor));
  }

  c.anchor_generator_type = o.get_string("anchor_generator");
  c.anchor_generator = detection::build_part(detection::anchor_generators(), r, "anchor_generator");
  if (!c.box_predictor->accepts_anchors_per_location(
          c.anchor_generator->num_anchors_per_location())) {
    std::string counts;
    for (int64_t n : c.anchor_generator->num_anchors_per_location()) {
      counts += (counts.empty() ? "" : ", ") + std::to_string(n);
    }
    throw InvalidArgument("SSDMetaArch: anchor_generator." + c.anchor_generator_type +
                          " gives the feature maps " + counts +
                          " anchors per location, which box_predictor." + c.box_predictor_type +
                          " does not take (a weight-shared predictor needs the same number for "
                          "every map: reduce_boxes_in_lowest_layer false)");
  }

  const std::string n = "post_processing.batch_non_max_suppression.";
  c.nms.score_threshold = static_cast<float>(o.get_float(n + "score_threshold"));
  c.nms.iou_threshold = static_cast<float>(r.unit_interval(n + "iou_threshold"));
  c.nms.max_detections_per_class = r.in_range(n + "max_detections_per_class", 1, kMaxDetections);
  c.nms.max_total_detections = r.in_range(n + "max_total_detections", 1, kMaxDetections);
  c.nms.has_clip_window = true;
  c.nms.clip_window = {0.0f, 0.0f, 1.0f, 1.0f};
  read_nms_variant(r, n, c.nms);
  c.score_converter =
      detection::score_converters().find("SSDMetaArch", "post_processing.score_converter",
                                         o.get_string("post_processing.score_converter"));
  c.logit_scale = o.get_float("post_processing.logit_scale");
  if (c.logit_scale == 0.0) {
    throw InvalidArgument(
        "SSDMetaArch: post_processing.logit_scale is 0 (the scores are the logits "
        "times 1 / logit_scale)");
  }

  c.localization_loss =
      detection::build_part(detection::localization_losses(), r, "loss.localization_loss");
  c.classification_loss =
      detection::build_part(detection::classification_losses(), r, "loss.classification_loss");
  if (o.get_bool("loss.hard_example_miner")) {
    const std::string h = "loss.hard_example_miner.";
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
    // losses_builder: the miner weighs the losses with the loss config's weights.
    m.cls_loss_weight = o.get_float("loss.classification_weight");
    m.loc_loss_weight = o.get_float("loss.localization_weight");
    c.hard_example_miner = m;
  }
  c.classification_weight = o.get_float("loss.classification_weight");
  c.localization_weight = o.get_float("loss.localization_weight");
  c.normalize_loss_by_num_matches = o.get_bool("normalize_loss_by_num_matches");
  c.normalize_loc_loss_by_codesize = o.get_bool("normalize_loc_loss_by_codesize");
  if (o.get_bool("graph_rewriter.quantization")) {
    layers::QuantizeOptions q;
    q.delay = o.get_int("graph_rewriter.quantization.delay");
    q.weight_bits = o.get_int("graph_rewriter.quantization.weight_bits");
    q.activation_bits = o.get_int("graph_rewriter.quantization.activation_bits");
    if (q.weight_bits != 8 || q.activation_bits != 8) {
      r.refuse("graph_rewriter.quantization.weight_bits",
               std::to_string(q.weight_bits) + " (activation_bits " +
                   std::to_string(q.activation_bits) + ")",
               "only 8bit quantization is supported");
    }
    c.quantize = q;
  }
  return c;
}

}  // namespace trainyard::models
