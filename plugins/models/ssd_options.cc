// SsdConfig from SSDMetaArch's options (ssd_options.h), with the API's builders' checks.
#include <memory>
#include <string>
#include <vector>

#include "detection_parts.h"
#include "ssd_meta_arch.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/part_builders.h"

namespace trainyard::models {
namespace {

std::vector<std::array<double, 2>> stride_pairs(const Options& o, const std::string& h,
                                                const std::string& w) {
  const std::vector<int64_t>& hs = o.get_int_list(h);
  const std::vector<int64_t>& ws = o.get_int_list(w);
  if (hs.size() != ws.size()) {
    throw InvalidArgument("SSDMetaArch: " + h + " and " + w + " have " + std::to_string(hs.size()) +
                          " and " + std::to_string(ws.size()) + " values; expected as many");
  }
  std::vector<std::array<double, 2>> out;
  for (std::size_t i = 0; i < hs.size(); ++i) {
    out.push_back({static_cast<double>(hs[i]), static_cast<double>(ws[i])});
  }
  return out;
}

}  // namespace

SsdConfig ssd_config_from_options(const Options& o) {
  const DetectionOptionReader r(o, "SSDMetaArch");
  SsdConfig c;
  r.choice("image_resizer", {"fixed_shape_resizer"});

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

  c.box_coder = detection::build_part(detection::box_coders(), r, "box_coder");
  c.matcher = detection::build_part(detection::matchers(), r, "matcher");
  c.similarity =
      detection::build_part(detection::region_similarity_calculators(), r, "similarity_calculator");
  c.encode_background_as_zeros = o.get_bool("encode_background_as_zeros");
  c.negative_class_weight = r.unit_interval("negative_class_weight");

  c.box_predictor_type = o.get_string("box_predictor");
  c.box_predictor =
      detection::ssd_box_predictors().find("SSDMetaArch", "box_predictor", c.box_predictor_type)(
          r, "box_predictor." + c.box_predictor_type);

  r.choice("anchor_generator", {"ssd_anchor_generator"});
  const std::string a = "anchor_generator.ssd_anchor_generator.";
  c.anchors.num_layers = o.get_int(a + "num_layers");
  c.anchors.min_scale = o.get_float(a + "min_scale");
  c.anchors.max_scale = o.get_float(a + "max_scale");
  c.anchors.scales = r.positive_list(a + "scales");
  c.anchors.aspect_ratios = r.positive_list(a + "aspect_ratios");
  c.anchors.interpolated_scale_aspect_ratio = o.get_float(a + "interpolated_scale_aspect_ratio");
  c.anchors.reduce_boxes_in_lowest_layer = o.get_bool(a + "reduce_boxes_in_lowest_layer");
  c.anchors.base_anchor_size = {r.positive(a + "base_anchor_height"),
                                r.positive(a + "base_anchor_width")};
  c.anchors.anchor_strides = stride_pairs(o, a + "height_stride", a + "width_stride");
  c.anchors.anchor_offsets = stride_pairs(o, a + "height_offset", a + "width_offset");

  const std::string n = "post_processing.batch_non_max_suppression.";
  c.nms.score_threshold = static_cast<float>(o.get_float(n + "score_threshold"));
  c.nms.iou_threshold = static_cast<float>(r.unit_interval(n + "iou_threshold"));
  c.nms.max_detections_per_class = r.in_range(n + "max_detections_per_class", 1, kMaxDetections);
  c.nms.max_total_detections = r.in_range(n + "max_total_detections", 1, kMaxDetections);
  c.nms.has_clip_window = true;
  c.nms.clip_window = {0.0f, 0.0f, 1.0f, 1.0f};
  c.score_converter = detection::score_converter_from_name(
      r.choice("post_processing.score_converter", {"IDENTITY", "SIGMOID", "SOFTMAX"}));
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
  return c;
}

}  // namespace trainyard::models
