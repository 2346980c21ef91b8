// The YouTube-8M label losses (plugin yt8m_losses), created through the plugin registry, on
// every test backend: values against losses.py's formulas worked by hand, the epsilons at
// p = 0 and p = 1, label weights, gradients and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/loss.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

PluginRegistry& registry() { return test::plugin_registry(); }

std::shared_ptr<Loss> make_loss(const std::string& name,
                                const std::map<std::string, OptionValue>& options = {}) {
  return registry().create<Loss>(ClassKind::kLoss, name, options);
}

class LossesTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }
  Tensor f64(const std::vector<double>& values, int64_t rows = 2) const {
    return Tensor::from_vector(backend(), Shape{rows, static_cast<int64_t>(values.size()) / rows},
                               values);
  }
  double value(const Tensor& loss) const {
    EXPECT_EQ(loss.shape().rank(), 0u);
    return loss.dtype() == DType::kF64 ? loss.to_vector<double>().at(0)
                                       : ops::cast(loss, DType::kF64).to_vector<double>().at(0);
  }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, LossesTest, ::testing::ValuesIn(test::backend_names()),
                         backend_test_name);

const std::vector<double> kPredictions = {0.9, 0.2, 0.6, 0.3, 0.5, 0.05};
const std::vector<double> kLabels = {1, 0, 1, 0, 0, 1};

// losses.py's CrossEntropyLoss element: -(y log(p + 1e-5) + (1 - y) log(1 - p + 1e-5)).
double xent(double p, double y) {
  return -(y * std::log(p + 1e-5) + (1 - y) * std::log(1 - p + 1e-5));
}

TEST_P(LossesTest, CrossEntropyIsBatchMeanOfClassSums) {
  auto loss = make_loss("CrossEntropyLoss");
  double expected = 0;
  for (std::size_t i = 0; i < kLabels.size(); ++i) expected += xent(kPredictions[i], kLabels[i]);
  expected /= 2;  // two examples
  EXPECT_NEAR(value(loss->calculate_loss(f64(kPredictions), f64(kLabels), std::nullopt)), expected,
              1e-12);
  // f32 predictions with f32 labels: the same within float rounding.
  Tensor p32 = ops::cast(f64(kPredictions), DType::kF32);
  Tensor y32 = ops::cast(f64(kLabels), DType::kF32);
  Tensor l32 = loss->calculate_loss(p32, y32, std::nullopt);
  EXPECT_EQ(l32.dtype(), DType::kF32);
  EXPECT_NEAR(value(l32), expected, 1e-5);
}

TEST_P(LossesTest, CrossEntropyEpsilonKeepsCertainMistakesFinite) {
  auto loss = make_loss("CrossEntropyLoss");
  // p = 0 for a positive and p = 1 for a negative each cost -log(1e-5); the correct certain
  // predictions cost -log(1 + 1e-5), slightly below zero.
  double got =
      value(loss->calculate_loss(f64({0.0, 1.0, 1.0, 0.0}, 1), f64({1, 0, 1, 0}, 1), std::nullopt));
  EXPECT_NEAR(got, -2 * std::log(1e-5) - 2 * std::log(1 + 1e-5), 1e-9);
  EXPECT_NEAR(-std::log(1e-5), 11.512925464970229, 1e-12);
}

TEST_P(LossesTest, CrossEntropyLabelWeightsScaleEachTerm) {
  auto loss = make_loss("CrossEntropyLoss");
  const std::vector<double> weights = {1, 0, 2, 0.5, 0, 3};
  double expected = 0;
  for (std::size_t i = 0; i < kLabels.size(); ++i) {
    expected += weights[i] * xent(kPredictions[i], kLabels[i]);
  }
  expected /= 2;
  EXPECT_NEAR(value(loss->calculate_loss(f64(kPredictions), f64(kLabels), f64(weights))), expected,
              1e-12);
  // All-zero weights: no loss at all.
  EXPECT_EQ(value(loss->calculate_loss(f64(kPredictions), f64(kLabels),
                                       f64(std::vector<double>(6, 0.0)))),
            0.0);
}

TEST_P(LossesTest, HingeLossWithDefaultAndCustomMargin) {
  // Per element max(0, b - (2y - 1) p).
  auto hinge = [](double b) {
    double total = 0;
    for (std::size_t i = 0; i < kLabels.size(); ++i) {
      total += std::max(0.0, b - (2 * kLabels[i] - 1) * kPredictions[i]);
    }
    return total / 2;
  };
  EXPECT_NEAR(
      value(make_loss("HingeLoss")->calculate_loss(f64(kPredictions), f64(kLabels), std::nullopt)),
      hinge(1.0), 1e-12);
  // b = 1: 0.1 + 1.2 + 0.4 + 1.3 + 1.5 + 0.95 over two examples.
  EXPECT_NEAR(hinge(1.0), 5.45 / 2, 1e-12);
  // A margin of 0.25 zeroes the terms the predictions already satisfy.
  EXPECT_NEAR(value(make_loss("HingeLoss", {{"b", 0.25}})
                        ->calculate_loss(f64(kPredictions), f64(kLabels), std::nullopt)),
              hinge(0.25), 1e-12);
}

TEST_P(LossesTest, SoftmaxLossUsesL1NormalizedLabels) {
  auto loss = make_loss("SoftmaxLoss");
  const std::vector<double> p = {0.9, 0.2, 0.6, 0.3, 0.5, 0.05};
  const std::vector<double> y = {1, 0, 1, 0, 0, 0};  // second example has no labels
  // Example 0: labels {0, 2}, each weighted 1/2, against log softmax(0.9, 0.2, 0.6).
  double z0 = std::exp(0.9) + std::exp(0.2) + std::exp(0.6);
  double expected0 = -0.5 * (std::log(std::exp(0.9) / z0) + std::log(std::exp(0.6) / z0));
  // Example 1: no labels; the epsilon 1e-7 divides 0 by 1e-7 instead of 0 by 0.
  double expected = (expected0 + 0.0) / 2;
  double got = value(loss->calculate_loss(f64(p), f64(y), std::nullopt));
  EXPECT_FALSE(std::isnan(got));
  EXPECT_NEAR(got, expected, 1e-12);
}

TEST_P(LossesTest, SoftmaxLossEpsilonScalesFractionalLabels) {
  // Labels summing to less than 1e-7 are divided by 1e-7, not by their sum.
  auto loss = make_loss("SoftmaxLoss");
  const std::vector<double> p = {0.0, 0.0};
  const std::vector<double> y = {1e-8, 0.0};
  double got = value(loss->calculate_loss(f64(p, 1), f64(y, 1), std::nullopt));
  EXPECT_NEAR(got, -(1e-8 / 1e-7) * std::log(0.5), 1e-12);
}

TEST_P(LossesTest, GradientsMatchCentralDifferences) {
  for (const char* name : {"CrossEntropyLoss", "HingeLoss", "SoftmaxLoss"}) {
    SCOPED_TRACE(name);
    auto loss = make_loss(name);
    Tensor labels = f64(kLabels);
    auto f = [&](const std::vector<Tensor>& in) {
      return loss->calculate_loss(in[0], labels, std::nullopt);
    };
    testing::GradCheckOptions options;
    // Hinge's kink: 1 - (2y - 1) p = 0 at p = 1 (positive) or p = -1 (negative).
    options.kinks = {1.0, -1.0};
    testing::GradCheckResult result = testing::check_gradients(f, {f64(kPredictions)}, options);
    EXPECT_TRUE(result.ok) << result.report;
  }
}

TEST_P(LossesTest, ShapeMismatchNamesBothShapes) {
  for (const char* name : {"CrossEntropyLoss", "HingeLoss", "SoftmaxLoss"}) {
    SCOPED_TRACE(name);
    auto loss = make_loss(name);
    try {
      loss->calculate_loss(f64(kPredictions), f64({1, 0, 1, 0}), std::nullopt);
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgument& e) {
      std::string message = e.what();
      EXPECT_NE(message.find(name), std::string::npos) << message;
      EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
      EXPECT_NE(message.find("[2, 2]"), std::string::npos) << message;
    }
  }
  EXPECT_THROW(make_loss("CrossEntropyLoss")
                   ->calculate_loss(f64(kPredictions), f64(kLabels), f64({1, 1}, 1)),
               InvalidArgument);
}

TEST_P(LossesTest, BoolLabelsAreCastToThePredictionsType) {
  auto loss = make_loss("CrossEntropyLoss");
  Tensor bool_labels = ops::not_equal(f64(kLabels), ops::zeros_like(f64(kLabels)));
  ASSERT_EQ(bool_labels.dtype(), DType::kBool);
  EXPECT_NEAR(value(loss->calculate_loss(f64(kPredictions), bool_labels, std::nullopt)),
              value(loss->calculate_loss(f64(kPredictions), f64(kLabels), std::nullopt)), 1e-15);
}

}  // namespace
}  // namespace trainyard
