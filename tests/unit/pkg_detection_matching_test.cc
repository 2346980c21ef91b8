// pkg/detection's matchers, target assigner, balanced sampler and hard example miner: each
// ArgMaxMatcher threshold path, the -2 ignore band, force_match_for_each_row, greedy bipartite
// matching, the target assigner and the miner against goldens of the TF Object Detection API
// (tests/fixtures/detection/make_goldens.py), and the miner's negatives-per-positive ratio.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pkg_detection_goldens.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/balanced_positive_negative_sampler.h"
#include "trainyard/pkg/detection/box_coder.h"
#include "trainyard/pkg/detection/hard_example_miner.h"
#include "trainyard/pkg/detection/matcher.h"
#include "trainyard/pkg/detection/region_similarity_calculator.h"
#include "trainyard/pkg/detection/target_assigner.h"

namespace trainyard {
namespace {

using detection::ArgMaxMatcher;
using detection::ArgMaxMatcherOptions;
using detection::Match;
using test::Goldens;

using Results = std::vector<int32_t>;

// 2 groundtruth rows x 5 anchor columns. Column maxima: 0.9 (row 0), 0.55 (row 1), 0.45 (row 1),
// 0.1 (row 0), 0.6 (row 1).
const std::vector<float> kSimilarity = {0.9f, 0.45f, 0.2f,  0.1f,  0.3f,
                                        0.3f, 0.55f, 0.45f, 0.05f, 0.6f};

Results argmax(const ArgMaxMatcherOptions& options, std::vector<uint8_t> valid_rows = {},
               const std::vector<float>& similarity = kSimilarity, int64_t rows = 2) {
  const int64_t cols = static_cast<int64_t>(similarity.size()) / std::max<int64_t>(rows, 1);
  return ArgMaxMatcher(options)
      .match(similarity, rows, rows == 0 ? 5 : cols, valid_rows)
      .match_results();
}

TEST(PkgDetectionMatcherTest, ArgMaxThresholdsSplitMatchedIgnoredAndUnmatched) {
  // 0.45 lies in the band [0.4, 0.5): ignored; 0.1 below it: unmatched.
  EXPECT_EQ(argmax({0.5, 0.4, true, false}), (Results{0, 1, -2, -1, 1}));
  // negatives_lower_than_unmatched false swaps the two: the band is negative, below it ignored.
  EXPECT_EQ(argmax({0.5, 0.4, false, false}), (Results{0, 1, -1, -2, 1}));
  // Equal thresholds (the SSD configs): no band.
  EXPECT_EQ(argmax({0.5, 0.5, true, false}), (Results{0, 1, -1, -1, 1}));
  // A similarity equal to matched_threshold is matched; equal to unmatched_threshold is in the
  // band.
  EXPECT_EQ(argmax({0.45, 0.2, true, false}), (Results{0, 1, 1, -1, 1}));
  EXPECT_EQ(argmax({0.5, 0.45, true, false}), (Results{0, 1, -2, -1, 1}));
  // No thresholds: every column goes to its argmax row.
  EXPECT_EQ(argmax({std::nullopt, std::nullopt, true, false}), (Results{0, 1, 1, 0, 1}));
  // No rows: everything unmatched.
  EXPECT_EQ(argmax({0.5, 0.4, true, true}, {}, {}, 0), (Results{-1, -1, -1, -1, -1}));
}

TEST(PkgDetectionMatcherTest, ForceMatchGivesEveryValidRowItsBestColumn) {
  // Nothing reaches 0.95: all unmatched, then row 0 takes column 0 and row 1 column 4.
  EXPECT_EQ(argmax({0.95, 0.95, true, false}), (Results{-1, -1, -1, -1, -1}));
  EXPECT_EQ(argmax({0.95, 0.95, true, true}), (Results{0, -1, -1, -1, 1}));
  // An invalid row (groundtruth weight 0) forces nothing.
  EXPECT_EQ(argmax({0.95, 0.95, true, true}, {1, 0}), (Results{0, -1, -1, -1, -1}));
  // Two rows whose best column is the same: the first row gets it, even against the column's
  // own (thresholded) argmax.
  const std::vector<float> shared = {0.8f, 0.1f, 0.9f, 0.2f};
  EXPECT_EQ(argmax({0.5, 0.5, true, false}, {}, shared, 2), (Results{1, -1}));
  EXPECT_EQ(argmax({0.5, 0.5, true, true}, {}, shared, 2), (Results{0, -1}));
}

TEST(PkgDetectionMatcherTest, ArgMaxRejectsInconsistentThresholds) {
  EXPECT_THROW(ArgMaxMatcher({std::nullopt, 0.3, true, false}), InvalidArgument);
  EXPECT_THROW(ArgMaxMatcher({0.3, 0.5, true, false}), InvalidArgument);
  EXPECT_THROW(ArgMaxMatcher({0.5, 0.5, false, false}), InvalidArgument);
  EXPECT_THROW(ArgMaxMatcher({0.5, 0.4, true, false}).match(kSimilarity, 2, 4), InvalidArgument);
}

TEST(PkgDetectionMatcherTest, MatchCountsAndIndices) {
  const Match m({0, 1, -2, -1, 1});
  EXPECT_EQ(m.matched_column_indices(), (std::vector<int64_t>{0, 1, 4}));
  EXPECT_EQ(m.matched_row_indices(), (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(m.unmatched_column_indices(), (std::vector<int64_t>{3}));
  EXPECT_EQ(m.ignored_column_indices(), (std::vector<int64_t>{2}));
  EXPECT_EQ(m.num_matched_columns(), 3);
  EXPECT_EQ(m.num_unmatched_columns(), 1);
  EXPECT_EQ(m.num_ignored_columns(), 1);
  EXPECT_THROW(Match({0, -3}), InvalidArgument);
}

TEST(PkgDetectionMatcherTest, BipartiteMatchesGreedilyByHighestSimilarity) {
  const detection::BipartiteMatcher matcher;
  const std::vector<float> sim = {0.9f, 0.8f, 0.85f, 0.1f};
  // (0, 0) first; row 1 then gets the remaining column 1 however poor.
  EXPECT_EQ(matcher.match(sim, 2, 2).match_results(), (Results{0, 1}));
  EXPECT_EQ(matcher.match(sim, 2, 2, std::vector<uint8_t>{1, 0}).match_results(), (Results{0, -1}));
  EXPECT_EQ(matcher.match(sim, 2, 2, std::vector<uint8_t>{0, 1}).match_results(), (Results{1, -1}));
  // More rows than columns: the extra row stays unmatched.
  const std::vector<float> tall = {0.2f, 0.9f, 0.5f};
  EXPECT_EQ(matcher.match(tall, 3, 1).match_results(), (Results{1}));
}

TEST(PkgDetectionTargetAssignerTest, MatchesTheApiOnSsdRpnAndNegativeBandConfigurations) {
  Goldens goldens("target_assigner.txt");
  const std::vector<float> anchors = goldens.get("anchors").f32();
  const std::vector<float> gt = goldens.get("groundtruth_boxes").f32();
  const std::vector<float> labels = goldens.get("groundtruth_labels").f32();
  const std::vector<float> weights = goldens.get("groundtruth_weights").f32();
  const std::vector<float> unmatched = goldens.get("unmatched_class_label").f32();
  struct Case {
    std::string name;
    ArgMaxMatcherOptions matcher;
    double negative_class_weight;
  };
  const std::vector<Case> cases = {{"ssd", {0.5, 0.5, true, true}, 1.0},
                                   {"rpn", {0.7, 0.3, true, true}, 0.5},
                                   {"between", {0.5, 0.2, false, false}, 1.0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const detection::TargetAssigner assigner(
        std::make_shared<detection::IouSimilarity>(), std::make_shared<ArgMaxMatcher>(c.matcher),
        std::make_shared<detection::FasterRcnnBoxCoder>(std::vector<double>{10, 10, 5, 5}),
        c.negative_class_weight);
    const detection::TargetAssignment t = assigner.assign(anchors, gt, labels, unmatched, weights);
    EXPECT_EQ(t.num_anchors, 384);
    EXPECT_EQ(t.label_size, 5);
    EXPECT_EQ(t.match.match_results(), goldens.get(c.name + "_match").i32());
    EXPECT_EQ(t.cls_targets, goldens.get(c.name + "_cls_targets").f32());
    EXPECT_EQ(t.cls_weights, goldens.get(c.name + "_cls_weights").f32());
    EXPECT_EQ(t.reg_weights, goldens.get(c.name + "_reg_weights").f32());
    const std::vector<float> reg = goldens.get(c.name + "_reg_targets").f32();
    ASSERT_EQ(t.reg_targets.size(), reg.size());
    for (std::size_t i = 0; i < reg.size(); ++i) {
      ASSERT_NEAR(t.reg_targets[i], reg[i], 1e-5 + 1e-5 * std::fabs(reg[i])) << "element " << i;
    }
    // The weight-0 box (row 5) is matched nowhere, even by force_match.
    for (int32_t r : t.match.match_results()) EXPECT_NE(r, 5);
  }
}

TEST(PkgDetectionTargetAssignerTest, WeightsAndTargetsPerMatchKind) {
  // Anchors: one on the box, one in the ignore band, one far away.
  const std::vector<float> anchors = {0.0f, 0.0f, 0.5f, 0.5f, 0.0f, 0.0f,
                                      0.5f, 0.7f, 0.8f, 0.8f, 1.0f, 1.0f};
  const std::vector<float> gt = {0.0f, 0.0f, 0.5f, 0.5f};
  const std::vector<float> labels = detection::one_hot_with_background(std::vector<int64_t>{2}, 3);
  EXPECT_EQ(labels, (std::vector<float>{0, 0, 1, 0}));
  const std::vector<float> background = detection::background_class_label(3);
  const detection::TargetAssigner assigner(
      std::make_shared<detection::IouSimilarity>(),
      std::make_shared<ArgMaxMatcher>(ArgMaxMatcherOptions{0.8, 0.5, true, false}),
      std::make_shared<detection::FasterRcnnBoxCoder>(), 0.25);
  const std::vector<float> gt_weights = {0.5f};
  const auto t = assigner.assign(anchors, gt, labels, background, gt_weights);
  // IoU of anchor 1 with the box is 0.25 / 0.35 = 0.714: in [0.5, 0.8), ignored.
  EXPECT_EQ(t.match.match_results(), (Results{0, -2, -1}));
  EXPECT_EQ(t.cls_weights, (std::vector<float>{0.5f, 0.0f, 0.25f}));
  EXPECT_EQ(t.reg_weights, (std::vector<float>{0.5f, 0.0f, 0.0f}));
  EXPECT_EQ(t.cls_targets, (std::vector<float>{0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0}));
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(t.reg_targets[k], 0.0f, 1e-6f);
  for (int k = 4; k < 12; ++k) EXPECT_EQ(t.reg_targets[k], 0.0f);
  // No groundtruth: every anchor a negative of the background class.
  const auto none = assigner.assign(anchors, {}, {}, background, {});
  EXPECT_EQ(none.match.match_results(), (Results{-1, -1, -1}));
  EXPECT_EQ(none.cls_weights, (std::vector<float>{0.25f, 0.25f, 0.25f}));
  // The API's binary default: label 1 per box, unmatched 0.
  const auto binary = assigner.assign(anchors, gt);
  EXPECT_EQ(binary.cls_targets, (std::vector<float>{1, 0, 0}));
  EXPECT_THROW(assigner.assign(anchors, gt, std::vector<float>{1, 0}, background), InvalidArgument);
  EXPECT_THROW(detection::one_hot_with_background(std::vector<int64_t>{4}, 3), InvalidArgument);
}

TEST(PkgDetectionSamplerTest, BalancesPositivesAndNegativesDeterministically) {
  const detection::BalancedPositiveNegativeSampler sampler(0.5);
  std::vector<uint8_t> indicator(100, 1), labels(100, 0);
  for (int i = 0; i < 10; ++i) labels[i * 7] = 1;  // 10 positives
  indicator[1] = 0;                                // never sampled
  auto count = [&](const std::vector<uint8_t>& s, bool positive) {
    int n = 0;
    for (std::size_t i = 0; i < s.size(); ++i) n += (s[i] && (labels[i] != 0) == positive) ? 1 : 0;
    return n;
  };
  std::mt19937_64 g1(7), g2(7);
  const auto a = sampler.subsample(indicator, 16, labels, g1);
  EXPECT_EQ(count(a, true), 8);
  EXPECT_EQ(count(a, false), 8);
  EXPECT_EQ(a[1], 0);
  EXPECT_EQ(sampler.subsample(indicator, 16, labels, g2), a);
  // Fewer positives than half the batch: negatives fill the rest.
  std::vector<uint8_t> few(100, 0);
  few[3] = few[50] = few[99] = 1;
  std::mt19937_64 g3(1);
  const auto b = sampler.subsample(indicator, 16, few, g3);
  int pos = 0, total = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    pos += b[i] && few[i];
    total += b[i];
  }
  EXPECT_EQ(pos, 3);
  EXPECT_EQ(total, 16);
  // No batch size: every positive and (1 - f) / f negatives per positive.
  const detection::BalancedPositiveNegativeSampler quarter(0.25);
  std::mt19937_64 g4(3);
  const auto c = quarter.subsample(indicator, std::nullopt, few, g4);
  total = 0;
  for (uint8_t v : c) total += v;
  EXPECT_EQ(total, 3 + 9);
  EXPECT_THROW(detection::BalancedPositiveNegativeSampler(1.5), InvalidArgument);
}

TEST(PkgDetectionHardExampleMinerTest, RatioKeepsPositivesAndTheFirstNegatives) {
  // The API's docstring example: indices 2,4,5,7,9,10, positives 2 and 5, one negative per
  // positive: 2, 4, 5, 7.
  std::vector<int32_t> results(12, Match::kUnmatched);
  results[2] = 0;
  results[5] = 1;
  const Match match(results);
  const std::vector<int64_t> indices = {2, 4, 5, 7, 9, 10};
  int64_t positives = 0, negatives = 0;
  EXPECT_EQ(detection::subsample_selection_to_desired_neg_pos_ratio(indices, match, 1.0, 0,
                                                                    &positives, &negatives),
            (std::vector<int64_t>{2, 4, 5, 7}));
  EXPECT_EQ(positives, 2);
  EXPECT_EQ(negatives, 2);
  // min_negatives_per_image allows negatives in an image without positives.
  const Match none(std::vector<int32_t>(12, Match::kUnmatched));
  EXPECT_EQ(detection::subsample_selection_to_desired_neg_pos_ratio(indices, none, 3.0, 2,
                                                                    &positives, &negatives),
            (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(positives, 0);
  EXPECT_EQ(negatives, 2);
  // An ignored anchor passes while the running count of negatives allows, and counts as a
  // negative in the summary, as the API's.
  results[9] = Match::kIgnored;
  EXPECT_EQ(detection::subsample_selection_to_desired_neg_pos_ratio(indices, Match(results), 1.0, 0,
                                                                    &positives, &negatives),
            (std::vector<int64_t>{2, 4, 5, 7, 9}));
  EXPECT_EQ(negatives, 3);
}

TEST(PkgDetectionHardExampleMinerTest, MatchesTheApisMinedLossesAndCounts) {
  Goldens goldens("losses.txt");
  const std::vector<float> boxes = goldens.get("miner_boxes").f32();
  const std::vector<float> loc = goldens.get("miner_location_losses").f32();
  const std::vector<float> cls = goldens.get("miner_cls_losses").f32();
  const std::vector<int32_t> match_results = goldens.get("miner_match").i32();
  const int64_t n = 40;
  std::vector<Match> matches = {
      Match(std::vector<int32_t>(match_results.begin(), match_results.begin() + n)),
      Match(std::vector<int32_t>(match_results.begin() + n, match_results.end()))};
  using LossType = detection::HardExampleMinerOptions::LossType;
  struct Case {
    std::string name;
    detection::HardExampleMinerOptions options;
  };
  const std::vector<Case> cases = {
      {"miner_both", {10, 0.5f, LossType::kBoth, 0.05, 0.06, 0, 0}},
      {"miner_cls_ratio", {20, 0.7f, LossType::kClassification, 1.0, 1.0, 2, 1}},
      {"miner_loc_ratio_min", {0, 0.4f, LossType::kLocalization, 1.0, 1.0, 1, 5}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const detection::HardExampleMiner miner(c.options);
    const auto r = miner.mine(loc, cls, boxes, 2, n, matches);
    EXPECT_NEAR(r.location_loss, goldens.get(c.name + "_location_loss").values[0], 1e-5);
    EXPECT_NEAR(r.classification_loss, goldens.get(c.name + "_cls_loss").values[0], 1e-5);
    if (c.options.max_negatives_per_positive > 0) {
      EXPECT_EQ(r.num_positives, goldens.get(c.name + "_num_positives").i64());
      EXPECT_EQ(r.num_negatives, goldens.get(c.name + "_num_negatives").i64());
    } else {
      EXPECT_TRUE(r.num_positives.empty());
      for (const auto& s : r.selected_indices) EXPECT_LE(s.size(), 10u);
    }
    // The mask marks exactly the selected anchors.
    double mask_sum = 0.0;
    for (float v : r.selection_mask) mask_sum += v;
    EXPECT_EQ(mask_sum,
              static_cast<double>(r.selected_indices[0].size() + r.selected_indices[1].size()));
  }
}

}  // namespace
}  // namespace trainyard
