#include "trainyard/pkg/detection/part_builders.h"

#include <optional>
#include <string>
#include <vector>

namespace trainyard::detection {
namespace {

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

#define TRAINYARD_OD_ADD_PART(name, builder) registry.add(#name, &builder);

}  // namespace

PartRegistry<PartBuilder<BoxCoder>>& box_coders() {
  static PartRegistry<PartBuilder<BoxCoder>> registry("box coder");
  static const bool filled = [] {
    TRAINYARD_OD_BOX_CODERS(TRAINYARD_OD_ADD_PART)
    return true;
  }();
  (void)filled;
  return registry;
}

PartRegistry<PartBuilder<Matcher>>& matchers() {
  static PartRegistry<PartBuilder<Matcher>> registry("matcher");
  static const bool filled = [] {
    TRAINYARD_OD_MATCHERS(TRAINYARD_OD_ADD_PART)
    return true;
  }();
  (void)filled;
  return registry;
}

PartRegistry<PartBuilder<RegionSimilarityCalculator>>& region_similarity_calculators() {
  static PartRegistry<PartBuilder<RegionSimilarityCalculator>> registry(
      "region similarity calculator");
  static const bool filled = [] {
    TRAINYARD_OD_SIMILARITY_CALCULATORS(TRAINYARD_OD_ADD_PART)
    return true;
  }();
  (void)filled;
  return registry;
}

PartRegistry<PartBuilder<LocalizationLoss>>& localization_losses() {
  static PartRegistry<PartBuilder<LocalizationLoss>> registry("localization loss");
  static const bool filled = [] {
    TRAINYARD_OD_LOCALIZATION_LOSSES(TRAINYARD_OD_ADD_PART)
    return true;
  }();
  (void)filled;
  return registry;
}

PartRegistry<PartBuilder<ClassificationLoss>>& classification_losses() {
  static PartRegistry<PartBuilder<ClassificationLoss>> registry("classification loss");
  static const bool filled = [] {
    TRAINYARD_OD_CLASSIFICATION_LOSSES(TRAINYARD_OD_ADD_PART)
    return true;
  }();
  (void)filled;
  return registry;
}

#undef TRAINYARD_OD_ADD_PART

}  // namespace trainyard::detection
