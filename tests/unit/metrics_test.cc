// YouTube-8M metrics: Hit@1, PERR, GAP, AP/mAP calculators and EvaluationMetrics, against
// values computed by hand, against the original Python code on continuous scores
// (tests/golden/metrics_original.txt), and, on tie-heavy inputs, against Trainyard's documented
// tie rule where it differs from the original's numpy-dependent choice.
#include "trainyard/pkg/yt8m/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "trainyard/error.h"

namespace trainyard::metrics {
namespace {

constexpr double kTolerance = 1e-12;

// Three videos, four classes; class 3 has no positive. Used by the mAP and epoch tests.
//   v0: p [0.9, 0.2, 0.6, 0.1 ], labels [1, 0, 1, 0]
//   v1: p [0.3, 0.8, 0.5, 0.4 ], labels [0, 1, 0, 0]
//   v2: p [0.7, 0.1, 0.2, 0.65], labels [0, 0, 1, 0]
// With top_k = 2 the kept pairs are v0: c0 .9(1), c2 .6(1); v1: c1 .8(1), c2 .5(0);
// v2: c0 .7(0), c3 .65(0). v2's positive c2 (0.2) is outside its top 2.
const std::vector<float> kPredictions = {0.9f, 0.2f, 0.6f, 0.1f,  //
                                         0.3f, 0.8f, 0.5f, 0.4f,  //
                                         0.7f, 0.1f, 0.2f, 0.65f};
const std::vector<float> kLabels = {1, 0, 1, 0,  //
                                    0, 1, 0, 0,  //
                                    0, 0, 1, 0};

// The tie-heavy batch of the Python cross-check: scores in {0, .25, .5, .75, 1}.
void tie_heavy(int batch, int num_classes, int salt, std::vector<float>* predictions,
               std::vector<float>* labels) {
  predictions->clear();
  labels->clear();
  for (int v = 0; v < batch; ++v) {
    for (int c = 0; c < num_classes; ++c) {
      predictions->push_back(static_cast<float>((v * 7 + c * 13 + salt) % 5) / 4.0f);
      labels->push_back((v * 3 + c * 5 + salt) % 7 == 0 ? 1.0f : 0.0f);
    }
  }
}

std::span<const float> rows(const std::vector<float>& matrix, int first, int count, int width) {
  return std::span<const float>(matrix).subspan(static_cast<std::size_t>(first * width),
                                                static_cast<std::size_t>(count * width));
}

// ------------------------------------------------ the original on continuous scores (golden)

// tests/golden/metrics_original.txt: three batches at 3,862 classes, written by
// tests/golden/make_metrics_golden.py with the values the original eval_util.py,
// average_precision_calculator.py and mean_average_precision_calculator.py computed for them
// under numpy 1.26.4. No two scores in the file are equal, so these values do not depend on
// how ties are broken.
//
// Tolerances, relative. The original rounds Hit@1 to float32 (numpy.average of float32
// labels returns float32: at most 2^-24 ~ 6e-8 off), so Hit@1 gets 1e-6. Numpy 1.26 computes
// PERR, loss, GAP, AP and mAP in float64 (a Python float plus a numpy.float32 scalar is a
// float64 there), in the order Trainyard does; they agree to ~1e-15, and 1e-9 still catches a
// single positive moved by one rank anywhere in the 7,400-item GAP list (>= 6.9e-8). Numpy 2
// keeps those sums in float32 (NEP 50) and gives values up to 8e-7 off: hence the pinned numpy.
constexpr double kOriginalFloat32Tolerance = 1e-6;
constexpr double kOriginalFloat64Tolerance = 1e-9;

struct OriginalBatch {
  int64_t videos = 0;
  double loss = 0.0;
  uint64_t checksum = 0;
  std::vector<float> predictions;  // [videos x num_classes]
  std::vector<float> labels;
  double hit_at_one = 0.0;  // calculate_hit_at_one / _precision_at_equal_recall_rate /
  double perr = 0.0;        // _gap(top_k) of the batch alone
  double gap = 0.0;
  BatchMetrics accumulated;  // what EvaluationMetrics.accumulate returned
};

struct OriginalMetrics {
  std::string numpy_version;
  int64_t num_classes = 0;
  int64_t top_k = 0;
  std::vector<OriginalBatch> batches;
  EpochMetrics epoch;  // EvaluationMetrics(num_classes, top_k, None).get() after all batches
};

// The generator's background_code: a bijection of [0, 2^23); entry g of all batches
// concatenated (row-major) scores background_code(g) / 2^24 unless the file raises it.
uint64_t background_code(uint64_t g) {
  constexpr uint64_t kMask = (uint64_t{1} << 23) - 1;
  uint64_t x = (g * 0x5BD1E995u + 0x1B873593u) & kMask;
  x ^= x >> 11;
  x = (x * 0x27D4EB2Fu) & kMask;
  x ^= x >> 13;
  return x;
}

// The generator's checksum: the sum of float32 bits(p[j]) * (j + 1) modulo 2^64.
uint64_t score_checksum(const std::vector<float>& predictions) {
  uint64_t sum = 0;
  for (std::size_t j = 0; j < predictions.size(); ++j) {
    sum += static_cast<uint64_t>(std::bit_cast<uint32_t>(predictions[j])) * (j + 1);
  }
  return sum;
}

// Reads the whitespace-separated fields of one line of the golden file; every failure names
// the file's line.
class GoldenLine {
 public:
  GoldenLine(const std::string& text, int number) : in_(text), number_(number) {}

  std::string word() {
    std::string token;
    if (!(in_ >> token)) fail("a field is missing");
    return token;
  }
  void key(const std::string& expected) {
    const std::string token = word();
    if (token != expected) fail("expected '" + expected + "', found '" + token + "'");
  }
  int64_t integer() {
    return parse("an integer", [](const char* text, char** end) {
      return static_cast<int64_t>(std::strtoll(text, end, 10));
    });
  }
  uint64_t unsigned_integer() {
    return parse("an unsigned integer", [](const char* text, char** end) {
      return static_cast<uint64_t>(std::strtoull(text, end, 10));
    });
  }
  // strtof rounds correctly, as the generator checked its shortest decimals need.
  float float32() {
    return parse("a number", [](const char* text, char** end) { return std::strtof(text, end); });
  }
  double float64() {
    return parse("a number", [](const char* text, char** end) { return std::strtod(text, end); });
  }
  void end() {
    std::string extra;
    if (in_ >> extra) fail("unexpected field '" + extra + "'");
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error(golden_path() + ":" + std::to_string(number_) + ": " + why);
  }

  static std::string golden_path() {
    return std::string(TRAINYARD_GOLDEN_DIR) + "/metrics_original.txt";
  }

 private:
  template <typename Parse>
  std::invoke_result_t<Parse, const char*, char**> parse(const char* what, Parse parse_token) {
    const std::string token = word();
    char* end = nullptr;
    const auto value = parse_token(token.c_str(), &end);
    if (end != token.c_str() + token.size()) fail("'" + token + "' is not " + what);
    return value;
  }

  std::istringstream in_;
  int number_;
};

OriginalMetrics read_original_metrics() {
  std::ifstream file(GoldenLine::golden_path());
  if (!file) throw std::runtime_error("cannot read " + GoldenLine::golden_path());
  int number = 0;
  auto next = [&] {
    std::string text;
    do {
      if (!std::getline(file, text)) {
        GoldenLine(text, number + 1).fail("the file ends early");
      }
      ++number;
    } while (text.empty() || text[0] == '#');
    return GoldenLine(text, number);
  };
  OriginalMetrics golden;
  {
    GoldenLine line = next();
    line.key("format");
    line.key("trainyard-metrics-golden");
    line.key("1");
  }
  GoldenLine line = next();
  line.key("numpy");
  golden.numpy_version = line.word();
  line = next();
  line.key("youtube8m_commit");
  line.word();
  line = next();
  line.key("num_classes");
  golden.num_classes = line.integer();
  line = next();
  line.key("top_k");
  golden.top_k = line.integer();
  line = next();
  line.key("batches");
  golden.batches.resize(static_cast<std::size_t>(line.integer()));
  const int64_t num_classes = golden.num_classes;
  uint64_t first_entry = 0;
  for (std::size_t b = 0; b < golden.batches.size(); ++b) {
    OriginalBatch& batch = golden.batches[b];
    line = next();
    line.key("batch");
    if (line.integer() != static_cast<int64_t>(b)) line.fail("batches out of order");
    line.key("videos");
    batch.videos = line.integer();
    line.key("loss");
    batch.loss = line.float64();
    line.key("checksum");
    batch.checksum = line.unsigned_integer();
    const auto entries = static_cast<std::size_t>(batch.videos * num_classes);
    batch.predictions.resize(entries);
    batch.labels.assign(entries, 0.0f);
    for (std::size_t j = 0; j < entries; ++j) {
      batch.predictions[j] =
          static_cast<float>(background_code(first_entry + j)) / static_cast<float>(1 << 24);
    }
    first_entry += entries;
    for (int64_t v = 0; v < batch.videos; ++v) {
      line = next();
      line.key("video");
      if (line.integer() != v) line.fail("videos out of order");
      float* row = batch.predictions.data() + v * num_classes;
      float* row_labels = batch.labels.data() + v * num_classes;
      auto class_index = [&] {
        const int64_t c = line.integer();
        if (c < 0 || c >= num_classes) line.fail("class " + std::to_string(c) + " out of range");
        return c;
      };
      line.key("labels");
      for (int64_t i = line.integer(); i > 0; --i) row_labels[class_index()] = 1.0f;
      line.key("raised");
      for (int64_t i = line.integer(); i > 0; --i) {
        const int64_t c = class_index();
        row[c] = line.float32();
      }
      line.end();
    }
    line = next();
    line.key("expect_batch");
    line.key("hit_at_one");
    batch.hit_at_one = line.float64();
    line.key("perr");
    batch.perr = line.float64();
    line.key("gap");
    batch.gap = line.float64();
    line = next();
    line.key("expect_accumulate");
    line.key("hit_at_one");
    batch.accumulated.hit_at_one = line.float64();
    line.key("perr");
    batch.accumulated.perr = line.float64();
    line.key("loss");
    batch.accumulated.loss = line.float64();
  }
  line = next();
  line.key("expect_epoch");
  line.key("avg_hit_at_one");
  golden.epoch.avg_hit_at_one = line.float64();
  line.key("avg_perr");
  golden.epoch.avg_perr = line.float64();
  line.key("avg_loss");
  golden.epoch.avg_loss = line.float64();
  line.key("gap");
  golden.epoch.gap = line.float64();
  line.key("mean_ap");
  golden.epoch.mean_ap = line.float64();
  line.key("aps");
  for (int64_t i = line.integer(); i > 0; --i) {
    line = next();
    line.key("ap");
    golden.epoch.ap_classes.push_back(line.integer());
    golden.epoch.aps.push_back(line.float64());
  }
  line = next();
  line.key("end");
  return golden;
}

// Parsed once; a malformed file fails every test that uses it, naming the line.
const OriginalMetrics& original_metrics() {
  static const OriginalMetrics golden = read_original_metrics();
  return golden;
}

void expect_relative(double actual, double expected, double tolerance, const std::string& what) {
  EXPECT_NEAR(actual, expected, tolerance * std::abs(expected)) << what;
}

std::string batch_name(std::size_t b) { return "batch " + std::to_string(b); }

TEST(OriginalMetricsGoldenTest, RebuildsTheGeneratorsScoresWithoutTies) {
  const OriginalMetrics& golden = original_metrics();
  EXPECT_EQ(golden.numpy_version, "1.26.4")
      << "the tolerances assume numpy 1.26's float64 sums: regenerate with "
         "tests/golden/make_metrics_golden.py as its docstring says";
  EXPECT_EQ(golden.num_classes, 3862);
  EXPECT_EQ(golden.top_k, 20);
  ASSERT_EQ(golden.batches.size(), 3u);
  std::vector<float> every_score;
  for (std::size_t b = 0; b < golden.batches.size(); ++b) {
    const OriginalBatch& batch = golden.batches[b];
    EXPECT_EQ(score_checksum(batch.predictions), batch.checksum) << batch_name(b);
    every_score.insert(every_score.end(), batch.predictions.begin(), batch.predictions.end());
  }
  std::sort(every_score.begin(), every_score.end());
  EXPECT_EQ(std::adjacent_find(every_score.begin(), every_score.end()), every_score.end())
      << "two scores are equal";
}

// ------------------------------------------------------------------------------------ Hit@1

TEST(HitAtOneTest, MeanOfTheLabelAtTheTopPrediction) {
  const std::vector<float> p = {0.1f, 0.9f, 0.3f, 0.2f,  //
                                0.2f, 0.3f, 0.8f, 0.1f,  //
                                0.6f, 0.1f, 0.0f, 0.3f};
  const std::vector<float> l = {0, 1, 0, 0,  //
                                1, 0, 0, 1,  //
                                1, 0, 0, 0};
  EXPECT_NEAR(hit_at_one(p, l, 3, 4), 2.0 / 3.0, kTolerance);
}

TEST(HitAtOneTest, TiedTopScoresPickTheFirstClassAsNumpyArgmax) {
  const std::vector<float> p = {0.5f, 0.5f, 0.1f, 0.0f};
  EXPECT_EQ(hit_at_one(p, std::vector<float>{0, 1, 0, 0}, 1, 4), 0.0);
  EXPECT_EQ(hit_at_one(p, std::vector<float>{1, 0, 0, 0}, 1, 4), 1.0);
}

TEST(HitAtOneTest, VideoWithoutLabelsIsAMiss) {
  const std::vector<float> p = {0.9f, 0.1f, 0.8f, 0.2f};
  const std::vector<float> l = {1, 0, 0, 0};
  EXPECT_EQ(hit_at_one(p, l, 2, 2), 0.5);
}

TEST(HitAtOneTest, MatchesTheOriginalOnContinuousScores) {
  const OriginalMetrics& golden = original_metrics();
  for (std::size_t b = 0; b < golden.batches.size(); ++b) {
    const OriginalBatch& batch = golden.batches[b];
    expect_relative(hit_at_one(batch.predictions, batch.labels, batch.videos, golden.num_classes),
                    batch.hit_at_one, kOriginalFloat32Tolerance, batch_name(b));
  }
}

TEST(HitAtOneTest, WrongSizeNamesBothSizes) {
  const std::vector<float> p(7, 0.0f);
  const std::vector<float> l(8, 0.0f);
  try {
    hit_at_one(p, l, 2, 4);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("predictions hold 7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("batch 2 x num_classes 4 = 8"), std::string::npos)
        << e.what();
  }
}

// ------------------------------------------------------------------------------------- PERR

TEST(PrecisionAtEqualRecallRateTest, TopKOfAVideoWithKPositives) {
  // v0: k=2, top 2 = {c0, c1}, one positive -> 1/2. v1: k=3, top 3 = {c4, c3, c2}, all
  // positive -> 1. Mean 3/4.
  const std::vector<float> p = {0.9f, 0.8f, 0.1f, 0.7f, 0.2f,  //
                                0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  const std::vector<float> l = {1, 0, 0, 1, 0,  //
                                0, 0, 1, 1, 1};
  EXPECT_NEAR(precision_at_equal_recall_rate(p, l, 2, 5), 0.75, kTolerance);
}

TEST(PrecisionAtEqualRecallRateTest, VideoWithoutLabelsCountsAsZeroInTheMean) {
  const std::vector<float> p = {0.9f, 0.8f, 0.1f, 0.7f, 0.2f,  //
                                0.1f, 0.2f, 0.3f, 0.4f, 0.5f,  //
                                0.9f, 0.9f, 0.9f, 0.9f, 0.9f};
  const std::vector<float> l = {1, 0, 0, 1, 0,  //
                                0, 0, 1, 1, 1,  //
                                0, 0, 0, 0, 0};
  EXPECT_NEAR(precision_at_equal_recall_rate(p, l, 3, 5), 1.5 / 3.0, kTolerance);
}

TEST(PrecisionAtEqualRecallRateTest, MatchesTheOriginalOnContinuousScores) {
  const OriginalMetrics& golden = original_metrics();
  for (std::size_t b = 0; b < golden.batches.size(); ++b) {
    const OriginalBatch& batch = golden.batches[b];
    expect_relative(precision_at_equal_recall_rate(batch.predictions, batch.labels, batch.videos,
                                                   golden.num_classes),
                    batch.perr, kOriginalFloat64Tolerance, batch_name(b));
  }
}

TEST(PrecisionAtEqualRecallRateTest, PositivesScoredZeroOrBelowDoNotCount) {
  const std::vector<float> p = {0.0f, -0.5f, -0.2f, -0.3f};
  const std::vector<float> l = {1, 0, 0, 0};
  EXPECT_EQ(precision_at_equal_recall_rate(p, l, 1, 4), 0.0);
}

TEST(PrecisionAtEqualRecallRateTest, TieAtTheKthScoreGoesToTheLowerClassIndex) {
  const std::vector<float> p = {0.5f, 0.5f, 0.5f, 0.1f};
  EXPECT_EQ(precision_at_equal_recall_rate(p, std::vector<float>{0, 0, 1, 0}, 1, 4), 0.0);
  EXPECT_EQ(precision_at_equal_recall_rate(p, std::vector<float>{1, 0, 0, 0}, 1, 4), 1.0);
}

TEST(PrecisionAtEqualRecallRateTest, AllClassesPositive) {
  const std::vector<float> p = {0.3f, 0.2f, 0.1f};
  const std::vector<float> l = {1, 1, 1};
  EXPECT_EQ(precision_at_equal_recall_rate(p, l, 1, 3), 1.0);
}

// -------------------------------------------------------------------------------------- GAP

// v0: p [0.9, 0.6, 0.3, 0.1], labels [1, 0, 1, 0]; v1: p [0.2, 0.8, 0.7, 0.4], labels
// [0, 1, 0, 0]. Three positives in all.
const std::vector<float> kGapPredictions = {0.9f, 0.6f, 0.3f, 0.1f,  //
                                            0.2f, 0.8f, 0.7f, 0.4f};
const std::vector<float> kGapLabels = {1, 0, 1, 0,  //
                                       0, 1, 0, 0};

TEST(GapTest, CountsPositivesOutsideTheTopKInN) {
  // Top 2 pooled: .9(1) .8(1) .7(0) .6(0); v0's positive c2 (0.3) is cut but still in N = 3.
  EXPECT_NEAR(gap(kGapPredictions, kGapLabels, 2, 4, 2), (1.0 + 1.0) / 3.0, kTolerance);
}

TEST(GapTest, TopKSmallerThanThePositivesOfAVideo) {
  // Top 1: .9(1) .8(1); N = 3.
  EXPECT_NEAR(gap(kGapPredictions, kGapLabels, 2, 4, 1), 2.0 / 3.0, kTolerance);
}

TEST(GapTest, TopKLargerThanNumClassesKeepsEveryPrediction) {
  // All 8: .9(1) .8(1) .7 .6 .4 .3(1) .2 .1 -> (1 + 1 + 3/6) / 3.
  EXPECT_NEAR(gap(kGapPredictions, kGapLabels, 2, 4, 20), 2.5 / 3.0, kTolerance);
  EXPECT_NEAR(gap(kGapPredictions, kGapLabels, 2, 4, 4), 2.5 / 3.0, kTolerance);
}

TEST(GapTest, BatchWithoutLabelsIsZero) {
  const std::vector<float> l(8, 0.0f);
  EXPECT_EQ(gap(kGapPredictions, l, 2, 4, 20), 0.0);
}

TEST(GapTest, NonPositiveTopKIsRejected) {
  EXPECT_THROW(gap(kGapPredictions, kGapLabels, 2, 4, 0), InvalidArgument);
}

TEST(GapTest, MatchesTheOriginalOnContinuousScores) {
  const OriginalMetrics& golden = original_metrics();
  for (std::size_t b = 0; b < golden.batches.size(); ++b) {
    const OriginalBatch& batch = golden.batches[b];
    expect_relative(
        gap(batch.predictions, batch.labels, batch.videos, golden.num_classes, golden.top_k),
        batch.gap, kOriginalFloat64Tolerance, batch_name(b));
  }
}

TEST(GapTest, TieHeavyScoresKeepTheLowerClassIndexUnlikeTheOriginal) {
  // A deliberate, documented difference (see metrics.h, "Ties"). Scores in {0, .25, .5, .75,
  // 1}: a video's top 5 (GAP) and its top k for k positives (PERR) cut through equal scores,
  // and which of them the original keeps is numpy.argpartition's unspecified choice, which
  // changes with the numpy version; Trainyard keeps the lower class indices. The original
  // (youtube-8m e6f6bf6) gives on this batch:
  //   calculate_gap(top_k=5): 0.11985689661595084 with numpy 1.26.4; 0.11007839441299438 with
  //     numpy 2.4.6, Trainyard's value up to numpy 2's float32 sums;
  //   calculate_precision_at_equal_recall_rate: 0.125 with both (Trainyard: 0.15625).
  // calculate_gap(top_k=20), which keeps whole rows, and calculate_hit_at_one (numpy.argmax
  // takes the first maximum, as here) do not depend on the choice: the original gives
  // 0.15904395942170263 and 0.125 too. The ranking of the kept ties for AP (seed-0 shuffle,
  // stable sort) is the original's.
  std::vector<float> p;
  std::vector<float> l;
  tie_heavy(16, 12, 0, &p, &l);
  EXPECT_NEAR(gap(p, l, 16, 12, 5), 0.11007839639332577, kTolerance);
  EXPECT_NEAR(gap(p, l, 16, 12, 20), 0.15904395942170263, kTolerance);
  EXPECT_NEAR(hit_at_one(p, l, 16, 12), 0.125, kTolerance);
  EXPECT_NEAR(precision_at_equal_recall_rate(p, l, 16, 12), 0.15625, kTolerance);
}

TEST(TopKByClassTest, GroupsEachVideosTopKByClassInVideoOrder) {
  const TopKByClass sparse = top_k_by_class(kPredictions, kLabels, 3, 4, 2);
  ASSERT_EQ(sparse.predictions.size(), 4u);
  EXPECT_EQ(sparse.predictions[0], (std::vector<float>{0.9f, 0.7f}));
  EXPECT_EQ(sparse.labels[0], (std::vector<float>{1, 0}));
  EXPECT_EQ(sparse.predictions[1], (std::vector<float>{0.8f}));
  EXPECT_EQ(sparse.predictions[2], (std::vector<float>{0.6f, 0.5f}));
  EXPECT_EQ(sparse.labels[2], (std::vector<float>{1, 0}));
  EXPECT_EQ(sparse.predictions[3], (std::vector<float>{0.65f}));
  EXPECT_EQ(sparse.num_positives, (std::vector<double>{1, 1, 2, 0}));
}

// ------------------------------------------------------------------- AveragePrecisionCalculator

TEST(AveragePrecisionCalculatorTest, ApOfARankedList) {
  const std::vector<float> p = {0.6f, 0.8f, 0.9f, 0.7f};
  const std::vector<float> a = {0, 0, 1, 1};  // ranked: .9(1) .8(0) .7(1) .6(0)
  EXPECT_NEAR(AveragePrecisionCalculator::ap(p, a), (1.0 + 2.0 / 3.0) / 2.0, kTolerance);
}

TEST(AveragePrecisionCalculatorTest, ApAtNCutsTheListAndCapsThePositives) {
  const std::vector<float> p = {0.9f, 0.8f, 0.7f, 0.6f};
  const std::vector<float> a = {0, 1, 1, 1};
  // n = 2: .9(0) .8(1); positives min(3, 2) = 2 -> (1/2) / 2.
  EXPECT_NEAR(AveragePrecisionCalculator::ap_at_n(p, a, 2), 0.25, kTolerance);
  // n = 1: .9(0) -> 0.
  EXPECT_EQ(AveragePrecisionCalculator::ap_at_n(p, a, 1), 0.0);
  EXPECT_THROW(AveragePrecisionCalculator::ap_at_n(p, a, 0), InvalidArgument);
}

TEST(AveragePrecisionCalculatorTest, ListWithoutPositivesIsZero) {
  const std::vector<float> p = {0.9f, 0.8f};
  const std::vector<float> a = {0, 0};
  EXPECT_EQ(AveragePrecisionCalculator::ap(p, a), 0.0);
}

TEST(AveragePrecisionCalculatorTest, TiesAreRankedInTheOriginalsSeedZeroShuffleOrder) {
  // random.seed(0); random.sample(range(4), 4) == [3, 1, 0, 2], then a stable sort: all-equal
  // scores keep that order. [1,0,0,1] -> 1,0,1,0; [0,1,1,0] -> 0,1,0,1.
  const std::vector<float> p(4, 0.5f);
  EXPECT_NEAR(AveragePrecisionCalculator::ap(p, std::vector<float>{1, 0, 0, 1}), 5.0 / 6.0,
              kTolerance);
  EXPECT_NEAR(AveragePrecisionCalculator::ap(p, std::vector<float>{0, 1, 1, 0}), 0.5, kTolerance);
}

TEST(AveragePrecisionCalculatorTest, AccumulatingInPiecesEqualsOneList) {
  AveragePrecisionCalculator calculator;
  calculator.accumulate(std::vector<float>{0.6f, 0.8f}, std::vector<float>{0, 0});
  calculator.accumulate(std::vector<float>{0.9f, 0.7f}, std::vector<float>{1, 1});
  EXPECT_EQ(calculator.heap_size(), 4);
  EXPECT_EQ(calculator.num_accumulated_positives(), 2.0);
  EXPECT_NEAR(calculator.peek_ap_at_n(), (1.0 + 2.0 / 3.0) / 2.0, kTolerance);
}

TEST(AveragePrecisionCalculatorTest, NumPositivesCountsPositivesNeverPassedIn) {
  AveragePrecisionCalculator calculator;
  calculator.accumulate(std::vector<float>{0.9f, 0.8f}, std::vector<float>{1, 0}, 4.0);
  EXPECT_NEAR(calculator.peek_ap_at_n(), 0.25, kTolerance);
  EXPECT_THROW(calculator.accumulate(std::vector<float>{0.1f}, std::vector<float>{0}, -1.0),
               InvalidArgument);
}

TEST(AveragePrecisionCalculatorTest, TopNKeepsTheHighestScores) {
  AveragePrecisionCalculator calculator(2);
  calculator.accumulate(std::vector<float>{0.1f, 0.9f, 0.5f, 0.8f}, std::vector<float>{1, 1, 0, 0});
  EXPECT_EQ(calculator.heap_size(), 2);
  // Kept .9(1) .8(0); positives min(2, 2) = 2.
  EXPECT_NEAR(calculator.peek_ap_at_n(), 0.5, kTolerance);
}

TEST(AveragePrecisionCalculatorTest, TopNWithTiesMatchesTheOriginal) {
  // From the original: AveragePrecisionCalculator(3), accumulate([.5]*6, [1,0,0,1,0,1]),
  // accumulate([.5, .75, .5], [0, 0, 1]), peek_ap_at_n().
  AveragePrecisionCalculator calculator(3);
  calculator.accumulate(std::vector<float>(6, 0.5f), std::vector<float>{1, 0, 0, 1, 0, 1});
  calculator.accumulate(std::vector<float>{0.5f, 0.75f, 0.5f}, std::vector<float>{0, 0, 1});
  EXPECT_NEAR(calculator.peek_ap_at_n(), 0.16666666666666666, kTolerance);
}

TEST(AveragePrecisionCalculatorTest, EmptyIsZeroAndClearForgetsEverything) {
  AveragePrecisionCalculator calculator;
  EXPECT_EQ(calculator.peek_ap_at_n(), 0.0);
  EXPECT_EQ(calculator.peek_interpolated_ap_at_n(), 0.0);
  calculator.accumulate(std::vector<float>{0.9f}, std::vector<float>{1});
  EXPECT_EQ(calculator.peek_ap_at_n(), 1.0);
  calculator.clear();
  EXPECT_EQ(calculator.heap_size(), 0);
  EXPECT_EQ(calculator.num_accumulated_positives(), 0.0);
  EXPECT_EQ(calculator.peek_ap_at_n(), 0.0);
}

TEST(AveragePrecisionCalculatorTest, RejectsMismatchedSizesAndNonPositiveTopN) {
  AveragePrecisionCalculator calculator;
  EXPECT_THROW(calculator.accumulate(std::vector<float>{0.1f, 0.2f}, std::vector<float>{1}),
               InvalidArgument);
  EXPECT_THROW(AveragePrecisionCalculator(0), InvalidArgument);
}

TEST(AveragePrecisionCalculatorTest, InterpolatedApAtBreakPoints) {
  // taus 1, .75, .5, .25, 0; ranked .75(1) .5(0) .25(1) .125(0), two positives:
  // at .5: P=1, dR=.5; at .25: P=1/2, dR=0; at .125: P=2/3, dR=.5; last: dR=0.
  const std::vector<float> p = {0.75f, 0.5f, 0.25f, 0.125f};
  const std::vector<float> a = {1, 0, 1, 0};
  EXPECT_NEAR(AveragePrecisionCalculator::interpolated_ap(p, a, 4), 0.5 + 1.0 / 3.0, kTolerance);
}

TEST(AveragePrecisionCalculatorTest, InterpolatedApNormalizesScoresOutsideZeroOne) {
  // (p - 0.5) / 2.5 -> 1, .6, .2, 0: at .6: P=1, dR=.5; at .2: P=1/2, dR=0; last: P=2/4,
  // dR=.5.
  const std::vector<float> p = {3.0f, 2.0f, 1.0f, 0.5f};
  const std::vector<float> a = {1, 0, 1, 0};
  EXPECT_NEAR(AveragePrecisionCalculator::interpolated_ap(p, a, 4), 0.75, kTolerance);
  AveragePrecisionCalculator calculator;
  calculator.accumulate(p, a);
  EXPECT_NEAR(calculator.peek_interpolated_ap_at_n(4), 0.75, kTolerance);
  EXPECT_THROW(AveragePrecisionCalculator::interpolated_ap(p, a, 0), InvalidArgument);
}

// --------------------------------------------------------------- MeanAveragePrecisionCalculator

TEST(MeanAveragePrecisionCalculatorTest, SkipsClassesWithoutPositives) {
  // c0: .9(1) .7(0), N=1 -> 1. c1: .8(1), N=1 -> 1. c2: .6(1) .5(0), N=2 -> 1/2.
  // c3: .65(0), N=0 -> left out.
  const TopKByClass sparse = top_k_by_class(kPredictions, kLabels, 3, 4, 2);
  MeanAveragePrecisionCalculator calculator(4);
  calculator.accumulate(sparse.predictions, sparse.labels, sparse.num_positives);
  const std::vector<double> aps = calculator.peek_map_at_n();
  ASSERT_EQ(aps.size(), 3u);
  EXPECT_NEAR(aps[0], 1.0, kTolerance);
  EXPECT_NEAR(aps[1], 1.0, kTolerance);
  EXPECT_NEAR(aps[2], 0.5, kTolerance);
  EXPECT_EQ(calculator.peek_map_classes(), (std::vector<int64_t>{0, 1, 2}));
}

TEST(MeanAveragePrecisionCalculatorTest, WithoutFilteringEmptyClassesReportZero) {
  const TopKByClass sparse = top_k_by_class(kPredictions, kLabels, 3, 4, 2);
  MeanAveragePrecisionCalculator calculator(4, /*filter_empty_classes=*/false);
  calculator.accumulate(sparse.predictions, sparse.labels, sparse.num_positives);
  const std::vector<double> aps = calculator.peek_map_at_n();
  ASSERT_EQ(aps.size(), 4u);
  EXPECT_NEAR(aps[2], 0.5, kTolerance);
  EXPECT_EQ(aps[3], 0.0);
  EXPECT_EQ(calculator.peek_map_classes(), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(MeanAveragePrecisionCalculatorTest, InfersPositivesWhenNoCountsAreGiven) {
  // Without num_positives, c2's positive outside the top 2 is not counted: c2 -> 1.
  const TopKByClass sparse = top_k_by_class(kPredictions, kLabels, 3, 4, 2);
  MeanAveragePrecisionCalculator calculator(4);
  calculator.accumulate(sparse.predictions, sparse.labels);
  const std::vector<double> aps = calculator.peek_map_at_n();
  ASSERT_EQ(aps.size(), 3u);
  EXPECT_NEAR(aps[2], 1.0, kTolerance);
}

TEST(MeanAveragePrecisionCalculatorTest, ClearAndValidation) {
  MeanAveragePrecisionCalculator calculator(4);
  EXPECT_TRUE(calculator.is_empty());
  const TopKByClass sparse = top_k_by_class(kPredictions, kLabels, 3, 4, 2);
  calculator.accumulate(sparse.predictions, sparse.labels, sparse.num_positives);
  EXPECT_FALSE(calculator.is_empty());
  calculator.clear();
  EXPECT_TRUE(calculator.is_empty());
  EXPECT_TRUE(calculator.peek_map_at_n().empty());
  EXPECT_THROW(MeanAveragePrecisionCalculator(1), InvalidArgument);
  EXPECT_THROW(
      calculator.accumulate(std::vector<std::vector<float>>(3), std::vector<std::vector<float>>(3)),
      InvalidArgument);
}

// ------------------------------------------------------------------------ EvaluationMetrics

TEST(EvaluationMetricsTest, AccumulateReturnsTheBatchMetrics) {
  EvaluationMetrics metrics(4, 2);
  const BatchMetrics batch = metrics.accumulate(kPredictions, kLabels, 0.5, 3);
  EXPECT_NEAR(batch.hit_at_one, 2.0 / 3.0, kTolerance);  // v0 c0, v1 c1 hit; v2 c0 misses
  EXPECT_NEAR(batch.perr, 2.0 / 3.0, kTolerance);        // 1, 1, 0
  EXPECT_EQ(batch.loss, 0.5);
  EXPECT_EQ(metrics.num_examples(), 3);
}

TEST(EvaluationMetricsTest, EpochAveragesAreWeightedByBatchSize) {
  EvaluationMetrics metrics(4, 2);
  // Batch A = v0 (hit 1, perr 1, loss .3); batch B = v1, v2 (hit 1/2, perr 1/2, loss .6).
  const BatchMetrics a =
      metrics.accumulate(rows(kPredictions, 0, 1, 4), rows(kLabels, 0, 1, 4), 0.3, 1);
  const BatchMetrics b = metrics.accumulate(rows(kPredictions, 1, 2, 4), rows(kLabels, 1, 2, 4),
                                            std::vector<float>{0.5f, 0.7f}, 2);
  EXPECT_EQ(a.hit_at_one, 1.0);
  EXPECT_EQ(b.hit_at_one, 0.5);
  EXPECT_NEAR(b.loss, 0.6, 1e-7);
  const EpochMetrics epoch = metrics.get();
  EXPECT_NEAR(epoch.avg_hit_at_one, (1.0 * 1 + 0.5 * 2) / 3.0, kTolerance);  // not (1 + .5)/2
  EXPECT_NEAR(epoch.avg_perr, (1.0 * 1 + 0.5 * 2) / 3.0, kTolerance);
  EXPECT_NEAR(epoch.avg_loss, (0.3 * 1 + 0.6 * 2) / 3.0, 1e-7);
  // Pooled over both batches: .9(1) .8(1) .7(0) .65(0) .6(1) .5(0), N = 4.
  EXPECT_NEAR(epoch.gap, (1.0 + 1.0 + 3.0 / 5.0) / 4.0, kTolerance);
  ASSERT_EQ(epoch.aps.size(), 3u);
  EXPECT_EQ(epoch.ap_classes, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_NEAR(epoch.aps[2], 0.5, kTolerance);
  EXPECT_NEAR(epoch.mean_ap, 2.5 / 3.0, kTolerance);
}

TEST(EvaluationMetricsTest, ClearStartsANewEpoch) {
  EvaluationMetrics metrics(4, 2);
  metrics.accumulate(kPredictions, kLabels, 1.0, 3);
  metrics.clear();
  EXPECT_EQ(metrics.num_examples(), 0);
  EXPECT_THROW(metrics.get(), InvalidArgument);

  metrics.accumulate(rows(kPredictions, 1, 2, 4), rows(kLabels, 1, 2, 4), 0.25, 2);
  const EpochMetrics epoch = metrics.get();
  EXPECT_EQ(epoch.avg_hit_at_one, 0.5);
  EXPECT_EQ(epoch.avg_loss, 0.25);
  // v1, v2 only: .8(1) .7(0) .65(0) .5(0), N = 2.
  EXPECT_NEAR(epoch.gap, 0.5, kTolerance);
  // c0 has no positive left; c1 -> 1, c2 (.5(0), N=1) -> 0.
  EXPECT_EQ(epoch.ap_classes, (std::vector<int64_t>{1, 2}));
  EXPECT_NEAR(epoch.mean_ap, 0.5, kTolerance);
}

TEST(EvaluationMetricsTest, EpochWithoutPositivesHasNanMeanAp) {
  EvaluationMetrics metrics(4, 2);
  metrics.accumulate(kPredictions, std::vector<float>(12, 0.0f), 0.0, 3);
  const EpochMetrics epoch = metrics.get();
  EXPECT_TRUE(epoch.aps.empty());
  EXPECT_TRUE(std::isnan(epoch.mean_ap));
  EXPECT_EQ(epoch.gap, 0.0);
}

TEST(EvaluationMetricsTest, MatchesTheOriginalOnContinuousScores) {
  // EvaluationMetrics(3862, 20, None), as eval.py builds it, fed the three batches in order.
  const OriginalMetrics& golden = original_metrics();
  EvaluationMetrics metrics(golden.num_classes, golden.top_k);
  for (std::size_t b = 0; b < golden.batches.size(); ++b) {
    const OriginalBatch& batch = golden.batches[b];
    const BatchMetrics got =
        metrics.accumulate(batch.predictions, batch.labels, batch.loss, batch.videos);
    expect_relative(got.hit_at_one, batch.accumulated.hit_at_one, kOriginalFloat32Tolerance,
                    batch_name(b) + " hit_at_one");
    expect_relative(got.perr, batch.accumulated.perr, kOriginalFloat64Tolerance,
                    batch_name(b) + " perr");
    expect_relative(got.loss, batch.accumulated.loss, kOriginalFloat64Tolerance,
                    batch_name(b) + " loss");
  }
  const EpochMetrics epoch = metrics.get();
  const EpochMetrics& expected = golden.epoch;
  expect_relative(epoch.avg_hit_at_one, expected.avg_hit_at_one, kOriginalFloat32Tolerance,
                  "avg_hit_at_one");
  expect_relative(epoch.avg_perr, expected.avg_perr, kOriginalFloat64Tolerance, "avg_perr");
  expect_relative(epoch.avg_loss, expected.avg_loss, kOriginalFloat64Tolerance, "avg_loss");
  expect_relative(epoch.gap, expected.gap, kOriginalFloat64Tolerance, "gap");
  expect_relative(epoch.mean_ap, expected.mean_ap, kOriginalFloat64Tolerance, "mean_ap");
  ASSERT_EQ(epoch.ap_classes, expected.ap_classes);
  ASSERT_EQ(epoch.aps.size(), expected.aps.size());
  for (std::size_t i = 0; i < expected.aps.size(); ++i) {
    expect_relative(epoch.aps[i], expected.aps[i], kOriginalFloat64Tolerance,
                    "AP of class " + std::to_string(expected.ap_classes[i]));
  }
}

TEST(EvaluationMetricsTest, TieHeavyBatchesKeepTheLowerClassIndexUnlikeTheOriginal) {
  // A deliberate, documented difference, as GapTest.TieHeavyScoresKeepTheLowerClassIndex...:
  // EvaluationMetrics(12, 5) over two tie-heavy batches, where the top 5 and PERR's top k cut
  // through equal scores. The original (youtube-8m e6f6bf6) gives, with numpy 1.26.4 / 2.4.6:
  //   second batch perr 0.2222222222222222 / 0.2222222238779068 (Trainyard: 1/9);
  //   avg_perr 0.16 / 0.1599999964237213 (Trainyard: 0.14);
  //   gap 0.07994384132990358 / 0.08431707322597504 (Trainyard's value up to float32 sums);
  //   mean_ap 0.1568621270704604 / 0.14658289651075998, numpy 1.26.4 differing in
  //   the APs of class 0 (0.16666666666666666) and class 5 (0.10251748251748252).
  // Hit@1 and the loss do not depend on ties; the original rounds Hit@1 to float32
  // (0.2222222238779068, avg 0.16000000059604644). The values below are Trainyard's.
  std::vector<float> p1;
  std::vector<float> l1;
  std::vector<float> p2;
  std::vector<float> l2;
  tie_heavy(16, 12, 0, &p1, &l1);
  tie_heavy(9, 12, 3, &p2, &l2);
  EvaluationMetrics metrics(12, 5);
  metrics.accumulate(p1, l1, 0.25, 16);
  const BatchMetrics second = metrics.accumulate(p2, l2, 0.5, 9);
  EXPECT_NEAR(second.hit_at_one, 0.2222222222222222, kTolerance);
  EXPECT_NEAR(second.perr, 0.1111111111111111, kTolerance);
  const EpochMetrics epoch = metrics.get();
  EXPECT_NEAR(epoch.avg_hit_at_one, 0.16, kTolerance);
  EXPECT_NEAR(epoch.avg_perr, 0.14, kTolerance);
  EXPECT_NEAR(epoch.avg_loss, 0.34, kTolerance);
  EXPECT_NEAR(epoch.gap, 0.08431707707229567, kTolerance);
  const std::vector<double> expected_aps = {0.1125,
                                            0.15740740740740738,
                                            0.17857142857142855,
                                            0.22916666666666663,
                                            0.041666666666666664,
                                            0.03333333333333333,
                                            0.0,
                                            0.08333333333333333,
                                            0.06666666666666667,
                                            0.17857142857142855,
                                            0.4333333333333333,
                                            0.24444444444444444};
  ASSERT_EQ(epoch.aps.size(), expected_aps.size());
  for (std::size_t c = 0; c < expected_aps.size(); ++c) {
    EXPECT_NEAR(epoch.aps[c], expected_aps[c], kTolerance) << "class " << c;
  }
  EXPECT_NEAR(epoch.mean_ap, 0.14658289241622574, kTolerance);
}

TEST(EvaluationMetricsTest, RejectsAWrongClassCount) {
  EvaluationMetrics metrics(5, 2);
  EXPECT_THROW(metrics.accumulate(kPredictions, kLabels, 0.0, 3), InvalidArgument);
  EXPECT_THROW(EvaluationMetrics(4, 0), InvalidArgument);
}

}  // namespace
}  // namespace trainyard::metrics
