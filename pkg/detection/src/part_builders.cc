#include "trainyard/pkg/detection/part_builders.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard::detection {
namespace {

// anchor_generator_builder.py: multiple_grid_anchor_generator.create_ssd_anchors from the
// SsdAnchorGenerator message.
std::vector<std::array<double, 2>> pairs(const DetectionOptionReader& r, const std::string& h,
                                         const std::string& w) {
  const std::vector<int64_t>& hs = r.options().get_int_list(h);
  const std::vector<int64_t>& ws = r.options().get_int_list(w);
  if (hs.size() != ws.size()) {
    throw InvalidArgument(r.model() + ": " + h + " and " + w + " have " +
                          std::to_string(hs.size()) + " and " + std::to_string(ws.size()) +
                          " values; expected as many");
  }
  std::vector<std::array<double, 2>> out;
  for (std::size_t i = 0; i < hs.size(); ++i) {
    out.push_back({static_cast<double>(hs[i]), static_cast<double>(ws[i])});
  }
  return out;
}

std::shared_ptr<const AnchorGenerator> build_ssd_anchor_generator(const DetectionOptionReader& r,
                                                                  const std::string& prefix) {
  const Options& o = r.options();
  const std::string a = prefix + ".";
  SsdAnchorGeneratorOptions g;
  g.num_layers = o.get_int(a + "num_layers");
  g.min_scale = o.get_float(a + "min_scale");
  g.max_scale = o.get_float(a + "max_scale");
  g.scales = r.positive_list(a + "scales");
  g.aspect_ratios = r.positive_list(a + "aspect_ratios");
  g.interpolated_scale_aspect_ratio = o.get_float(a + "interpolated_scale_aspect_ratio");
  g.reduce_boxes_in_lowest_layer = o.get_bool(a + "reduce_boxes_in_lowest_layer");
  g.base_anchor_size = {r.positive(a + "base_anchor_height"), r.positive(a + "base_anchor_width")};
  g.anchor_strides = pairs(r, a + "height_stride", a + "width_stride");
  g.anchor_offsets = pairs(r, a + "height_offset", a + "width_offset");
  return std::make_shared<MultipleGridAnchorGenerator>(create_ssd_anchors(g));
}

// anchor_generator_builder.py: MultiscaleGridAnchorGenerator from the MultiscaleAnchorGenerator
// message (levels at most 10: a level's stride is 2^level pixels).
std::shared_ptr<const AnchorGenerator> build_multiscale_anchor_generator(
    const DetectionOptionReader& r, const std::string& prefix) {
  const Options& o = r.options();
  const std::string a = prefix + ".";
  MultiscaleAnchorGeneratorOptions g;
  g.min_level = r.in_range(a + "min_level", 0, 10);
  g.max_level = r.in_range(a + "max_level", g.min_level, 10);
  g.anchor_scale = r.positive(a + "anchor_scale");
  g.aspect_ratios = r.positive_list(a + "aspect_ratios");
  if (g.aspect_ratios.empty()) r.refuse(a + "aspect_ratios", "[]", "expected at least one");
  g.scales_per_octave = r.in_range(a + "scales_per_octave", 1, 16);
  g.normalize_coordinates = o.get_bool(a + "normalize_coordinates");
  return std::make_shared<MultiscaleGridAnchorGenerator>(g);
}

// box_coder_builder.py
std::shared_ptr<const BoxCoder> build_faster_rcnn_box_coder(const DetectionOptionReader& r,
                                                            const std::string& prefix) {
  const std::string at = prefix + ".";
  return std::make_shared<FasterRcnnBoxCoder>(
      std::vector<double>{r.positive(at + "y_scale"), r.positive(at + "x_scale"),
                          r.positive(at + "height_scale"), r.positive(at + "width_scale")});
}

std::shared_ptr<const BoxCoder> build_mean_stddev_box_coder(const DetectionOptionReader& r,
                                                            const std::string& prefix) {
  return std::make_shared<MeanStddevBoxCoder>(r.positive(prefix + ".stddev"));
}

// matcher_builder.py (use_matmul_gather gives the same results and is accepted as is)
std::shared_ptr<const Matcher> build_argmax_matcher(const DetectionOptionReader& r,
                                                    const std::string& prefix) {
  const Options& o = r.options();
  const std::string at = prefix + ".";
  ArgMaxMatcherOptions m;
  if (o.get_bool(at + "ignore_thresholds")) {
    m.matched_threshold.reset();
    m.unmatched_threshold.reset();
  } else {
    m.matched_threshold = o.get_float(at + "matched_threshold");
    m.unmatched_threshold = o.get_float(at + "unmatched_threshold");
  }
  m.negatives_lower_than_unmatched = o.get_bool(at + "negatives_lower_than_unmatched");
  m.force_match_for_each_row = o.get_bool(at + "force_match_for_each_row");
  return std::make_shared<ArgMaxMatcher>(m);
}

std::shared_ptr<const Matcher> build_bipartite_matcher(const DetectionOptionReader&,
                                                       const std::string&) {
  return std::make_shared<BipartiteMatcher>();
}

// region_similarity_calculator_builder.py
std::shared_ptr<const RegionSimilarityCalculator> build_iou_similarity(const DetectionOptionReader&,
                                                                       const std::string&) {
  return std::make_shared<IouSimilarity>();
}

std::shared_ptr<const RegionSimilarityCalculator> build_ioa_similarity(const DetectionOptionReader&,
                                                                       const std::string&) {
  return std::make_shared<IoaSimilarity>();
}

std::shared_ptr<const RegionSimilarityCalculator> build_neg_sq_dist_similarity(
    const DetectionOptionReader&, const std::string&) {
  return std::make_shared<NegSqDistSimilarity>();
}

// losses_builder.py's _build_localization_loss
std::shared_ptr<const LocalizationLoss> build_weighted_smooth_l1(const DetectionOptionReader& r,
                                                                 const std::string& prefix) {
  return std::make_shared<WeightedSmoothL1LocalizationLoss>(r.positive(prefix + ".delta"));
}

std::shared_ptr<const LocalizationLoss> build_weighted_l2(const DetectionOptionReader&,
                                                          const std::string&) {
  return std::make_shared<WeightedL2LocalizationLoss>();
}

std::shared_ptr<const LocalizationLoss> build_weighted_iou(const DetectionOptionReader&,
                                                           const std::string&) {
  return std::make_shared<WeightedIOULocalizationLoss>();
}

// losses_builder.py's _build_classification_loss
std::shared_ptr<const ClassificationLoss> build_weighted_sigmoid(const DetectionOptionReader&,
                                                                 const std::string&) {
  return std::make_shared<WeightedSigmoidClassificationLoss>();
}

std::shared_ptr<const ClassificationLoss> build_weighted_softmax(const DetectionOptionReader& r,
                                                                 const std::string& prefix) {
  return std::make_shared<WeightedSoftmaxClassificationLoss>(
      r.options().get_float(prefix + ".logit_scale"));
}

std::shared_ptr<const ClassificationLoss> build_weighted_sigmoid_focal(
    const DetectionOptionReader& r, const std::string& prefix) {
  const Options& o = r.options();
  const double alpha = o.get_float(prefix + ".alpha");  // unset (-1): no alpha weighting
  return std::make_shared<SigmoidFocalClassificationLoss>(
      o.get_float(prefix + ".gamma"), alpha < 0.0 ? std::nullopt : std::optional<double>(alpha));
}

std::shared_ptr<const ClassificationLoss> build_bootstrapped_sigmoid(const DetectionOptionReader& r,
                                                                     const std::string& prefix) {
  const Options& o = r.options();
  return std::make_shared<BootstrappedSigmoidClassificationLoss>(
      o.get_float(prefix + ".alpha"), o.get_bool(prefix + ".hard_bootstrap") ? "hard" : "soft");
}

// post_processing_builder.py's _build_score_converter_fn (after the division by logit_scale).
Tensor identity_scores(const Tensor& logits) { return logits; }
Tensor sigmoid_scores(const Tensor& logits) { return ops::sigmoid(logits); }
Tensor softmax_scores(const Tensor& logits) { return ops::softmax(logits, -1); }

// pkg/detection's own parts, added by each copy of this static library (see part_registry.h).
#define TRAINYARD_OD_ADD_PART(name, builder) \
  held.push_back(registry.add(#name, &builder, NameSharing::kShared));

}  // namespace

PartRegistry<PartBuilder<AnchorGenerator>>& anchor_generators() {
  static PartRegistry<PartBuilder<AnchorGenerator>> registry("detection.anchor_generator",
                                                             "anchor generator");
  static const std::vector<NamedRegistration> filled = [] {
    std::vector<NamedRegistration> held;
    TRAINYARD_OD_ANCHOR_GENERATORS(TRAINYARD_OD_ADD_PART)
    return held;
  }();
  (void)filled;
  return registry;
}

PartRegistry<ScoreConverterFn>& score_converters() {
  static PartRegistry<ScoreConverterFn> registry("detection.score_converter", "score converter");
  static const std::vector<NamedRegistration> filled = [] {
    std::vector<NamedRegistration> held;
    TRAINYARD_OD_SCORE_CONVERTERS(TRAINYARD_OD_ADD_PART)
    return held;
  }();
  (void)filled;
  return registry;
}

PartRegistry<PartBuilder<BoxCoder>>& box_coders() {
  static PartRegistry<PartBuilder<BoxCoder>> registry("detection.box_coder", "box coder");
  static const std::vector<NamedRegistration> filled = [] {
    std::vector<NamedRegistration> held;
    TRAINYARD_OD_BOX_CODERS(TRAINYARD_OD_ADD_PART)
    return held;
  }();
  (void)filled;
  return registry;
}

PartRegistry<PartBuilder<Matcher>>& matchers() {
  static PartRegistry<PartBuilder<Matcher>> registry("detection.matcher", "matcher");
  static const std::vector<NamedRegistration> filled = [] {
    std::vector<NamedRegistration> held;
    TRAINYARD_OD_MATCHERS(TRAINYARD_OD_ADD_PART)
    return held;
  }();
  (void)filled;
  return registry;
}

PartRegistry<PartBuilder<RegionSimilarityCalculator>>& region_similarity_calculators() {
  static PartRegistry<PartBuilder<RegionSimilarityCalculator>> registry(
      "detection.region_similarity_calculator", "region similarity calculator");
  static const std::vector<NamedRegistration> filled = [] {
    std::vector<NamedRegistration> held;
    TRAINYARD_OD_SIMILARITY_CALCULATORS(TRAINYARD_OD_ADD_PART)
    return held;
  }();
  (void)filled;
  return registry;
}

PartRegistry<PartBuilder<LocalizationLoss>>& localization_losses() {
  static PartRegistry<PartBuilder<LocalizationLoss>> registry("detection.localization_loss",
                                                              "localization loss");
  static const std::vector<NamedRegistration> filled = [] {
    std::vector<NamedRegistration> held;
    TRAINYARD_OD_LOCALIZATION_LOSSES(TRAINYARD_OD_ADD_PART)
    return held;
  }();
  (void)filled;
  return registry;
}

PartRegistry<PartBuilder<ClassificationLoss>>& classification_losses() {
  static PartRegistry<PartBuilder<ClassificationLoss>> registry("detection.classification_loss",
                                                                "classification loss");
  static const std::vector<NamedRegistration> filled = [] {
    std::vector<NamedRegistration> held;
    TRAINYARD_OD_CLASSIFICATION_LOSSES(TRAINYARD_OD_ADD_PART)
    return held;
  }();
  (void)filled;
  return registry;
}

#undef TRAINYARD_OD_ADD_PART

}  // namespace trainyard::detection
