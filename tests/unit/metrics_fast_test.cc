// training_batch_metrics, the one-pass Hit@1, PERR and GAP of a logged training batch: the very
// doubles hit_at_one, precision_at_equal_recall_rate and gap return (EXPECT_EQ, no tolerance),
// on seeded random batches and on the inputs where ties decide the result (scores rounded to
// two decimals, rows of one value, saturated scores, 0 and -0), rows with no or only positives
// or more positives than top_k, batch sizes 1 to 1024 and num_classes 1 to 3862.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/pkg/yt8m/metrics.h"

namespace trainyard::metrics {
namespace {

// SplitMix64: a seeded stream that is the same on every platform.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(static_cast<double>(next() >> 40) * 0x1.0p-24); }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

// How a case's scores are drawn.
enum class Scores {
  kUniform,     // uniform in [0, 1): few ties
  kRounded,     // rounded to two decimals: ties everywhere, also at the top-k boundary
  kCoarse,      // five values in [-1, 1], 0 and -0 among them
  kSaturated,   // sigmoid of wide logits: many exact 1s and tiny values
  kConstantRow  // every score of a row equal (rows differ)
};

// How a case's labels are drawn.
enum class Labels {
  kFew,        // 1 to 4 positives per row, as YouTube-8M
  kMixed,      // rows with none, a few, more than 20, or every class positive
  kFractional  // positives of 0.5 and 1, negatives of 0 and -1 (a value > 0 is a positive)
};

struct Case {
  int64_t batch;
  int64_t num_classes;
  int64_t top_k;
  Scores scores;
  Labels labels;
  uint64_t seed;
};

std::string describe(const Case& c) {
  return "batch " + std::to_string(c.batch) + " num_classes " + std::to_string(c.num_classes) +
         " top_k " + std::to_string(c.top_k) + " scores " +
         std::to_string(static_cast<int>(c.scores)) + " labels " +
         std::to_string(static_cast<int>(c.labels)) + " seed " + std::to_string(c.seed);
}

void make_batch(const Case& c, std::vector<float>* predictions, std::vector<float>* labels) {
  Random random(c.seed);
  const auto size = static_cast<std::size_t>(c.batch * c.num_classes);
  predictions->assign(size, 0.0f);
  labels->assign(size, 0.0f);
  for (int64_t v = 0; v < c.batch; ++v) {
    float* p = predictions->data() + v * c.num_classes;
    float* y = labels->data() + v * c.num_classes;
    const float row_value = random.uniform();
    for (int64_t k = 0; k < c.num_classes; ++k) {
      const float u = random.uniform();
      switch (c.scores) {
        case Scores::kUniform:
          p[k] = u;
          break;
        case Scores::kRounded:
          p[k] = std::round(u * 100.0f) / 100.0f;
          break;
        case Scores::kCoarse: {
          static constexpr float kValues[] = {-1.0f, -0.0f, 0.0f, 0.5f, 1.0f};
          p[k] = kValues[random.below(5)];
          break;
        }
        case Scores::kSaturated:
          p[k] = 1.0f / (1.0f + std::exp(-(u * 60.0f - 30.0f)));
          break;
        case Scores::kConstantRow:
          p[k] = std::round(row_value * 4.0f) / 4.0f;
          break;
      }
    }
    int64_t positives = 1 + random.below(4);
    if (c.labels == Labels::kMixed) {
      switch (random.below(5)) {
        case 0:
          positives = 0;
          break;
        case 1:
          positives = c.num_classes;
          break;
        case 2:
          positives = std::min<int64_t>(c.num_classes, 21 + random.below(20));
          break;
        default:
          break;
      }
    }
    if (positives == c.num_classes) {
      for (int64_t k = 0; k < c.num_classes; ++k) y[k] = 1.0f;
    } else {
      for (int64_t i = 0; i < positives; ++i) y[random.below(c.num_classes)] = 1.0f;
    }
    if (c.labels == Labels::kFractional) {
      for (int64_t k = 0; k < c.num_classes; ++k) {
        if (y[k] > 0 && random.below(2) == 0) y[k] = 0.5f;
        if (y[k] == 0 && random.below(3) == 0) y[k] = -1.0f;
      }
    }
  }
}

void expect_same_as_the_three_functions(const Case& c) {
  std::vector<float> predictions;
  std::vector<float> labels;
  make_batch(c, &predictions, &labels);
  const TrainingBatchMetrics fast =
      training_batch_metrics(predictions, labels, c.batch, c.num_classes, c.top_k);
  EXPECT_EQ(fast.hit_at_one, hit_at_one(predictions, labels, c.batch, c.num_classes))
      << describe(c);
  EXPECT_EQ(fast.perr, precision_at_equal_recall_rate(predictions, labels, c.batch, c.num_classes))
      << describe(c);
  EXPECT_EQ(fast.gap, gap(predictions, labels, c.batch, c.num_classes, c.top_k)) << describe(c);
}

constexpr Scores kAllScores[] = {Scores::kUniform, Scores::kRounded, Scores::kCoarse,
                                 Scores::kSaturated, Scores::kConstantRow};
constexpr Labels kAllLabels[] = {Labels::kFew, Labels::kMixed, Labels::kFractional};

TEST(TrainingBatchMetrics, EqualsTheThreeFunctionsOnSmallBatches) {
  uint64_t seed = 1;
  for (int64_t batch : {1, 2, 3, 5, 16, 33}) {
    for (int64_t num_classes : {1, 2, 3, 7, 20, 21, 50, 161}) {
      for (int64_t top_k : {1, 3, 20, 64}) {
        for (Scores scores : kAllScores) {
          for (Labels labels : kAllLabels) {
            expect_same_as_the_three_functions({batch, num_classes, top_k, scores, labels, seed++});
          }
        }
      }
    }
  }
}

TEST(TrainingBatchMetrics, EqualsTheThreeFunctionsAtYoutube8mWidth) {
  uint64_t seed = 1000;
  for (int64_t batch : {1, 7, 64}) {
    for (Scores scores : kAllScores) {
      for (Labels labels : kAllLabels) {
        expect_same_as_the_three_functions({batch, 3862, 20, scores, labels, seed++});
      }
    }
  }
}

TEST(TrainingBatchMetrics, EqualsTheThreeFunctionsOnATrainingBatch) {
  // The logged batch of a YouTube-8M run: 1024 x 3862, top_k 20.
  uint64_t seed = 2000;
  for (Scores scores : {Scores::kUniform, Scores::kRounded, Scores::kSaturated}) {
    expect_same_as_the_three_functions({1024, 3862, 20, scores, Labels::kFew, seed++});
  }
  expect_same_as_the_three_functions({1024, 3862, 20, Scores::kCoarse, Labels::kMixed, seed++});
}

TEST(TrainingBatchMetrics, RejectsWhatTheThreeFunctionsReject) {
  const std::vector<float> four(4, 0.5f);
  EXPECT_THROW(training_batch_metrics(four, four, 2, 3), InvalidArgument);
  EXPECT_THROW(training_batch_metrics(four, std::vector<float>(3, 0.0f), 2, 2), InvalidArgument);
  EXPECT_THROW(training_batch_metrics(four, four, 0, 4), InvalidArgument);
  EXPECT_THROW(training_batch_metrics(four, four, 2, 2, 0), InvalidArgument);
}

}  // namespace
}  // namespace trainyard::metrics
