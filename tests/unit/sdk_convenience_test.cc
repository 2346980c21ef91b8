// The SDK's conveniences for plugin authors: arithmetic with a number on either side of a tensor
// (ops.h), the Initializer factories (variable.h) and the label losses on logits
// (logit_losses.h). Values against hand-computed ones, gradients by central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/random.h"
#include "trainyard/testing.h"
#include "trainyard/variable.h"

namespace trainyard {
namespace {

Backend& cpu() { return *test::backend("cpu"); }

Tensor f64(const Shape& shape, const std::vector<double>& values) {
  return Tensor::from_vector(cpu(), shape, values);
}

void expect_values(const Tensor& t, const std::vector<double>& expected, double tol,
                   const std::string& what) {
  std::vector<double> got = ops::cast(t, DType::kF64).to_vector<double>();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], tol) << what << ", element " << i;
  }
}

// --- Arithmetic with a number on either side ---

TEST(SdkConvenienceTest, NumberOnEitherSideIsAScalarOfTheTensorsDtype) {
  const std::vector<double> x = {0.5, -2.0, 4.0};
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor t = ops::cast(f64(Shape{3}, x), dtype);
    struct Case {
      const char* what;
      Tensor result;
      std::vector<double> expected;
    };
    const std::vector<Case> cases = {
        {"1.0 - t", 1.0 - t, {0.5, 3.0, -3.0}},
        {"t - 1.0", t - 1.0, {-0.5, -3.0, 3.0}},
        {"2.0f * t", 2.0f * t, {1.0, -4.0, 8.0}},
        {"t * 2", t * 2, {1.0, -4.0, 8.0}},
        {"1 / t", 1 / t, {2.0, -0.5, 0.25}},
        {"t / 4.0", t / 4.0, {0.125, -0.5, 1.0}},
        {"3 + t", 3 + t, {3.5, 1.0, 7.0}},
        {"t + 3", t + 3, {3.5, 1.0, 7.0}},
        {"1.0 - 2 * t", 1.0 - 2 * t, {0.0, 5.0, -7.0}},
    };
    for (const Case& c : cases) {
      EXPECT_EQ(c.result.dtype(), dtype) << c.what;
      EXPECT_EQ(c.result.shape(), Shape{3}) << c.what;
      expect_values(c.result, c.expected, 0.0, c.what);
    }
  }
}

TEST(SdkConvenienceTest, NumberOnEitherSideDifferentiates) {
  Tensor x = f64(Shape{2, 3}, {0.5, -1.5, 2.0, 3.0, -0.75, 1.25});
  const std::vector<std::pair<const char*, testing::TensorFunction>> functions = {
      {"1.0 - x", [](const std::vector<Tensor>& in) { return 1.0 - in[0]; }},
      {"x - 2", [](const std::vector<Tensor>& in) { return in[0] - 2; }},
      {"3 * x", [](const std::vector<Tensor>& in) { return 3 * in[0]; }},
      {"x * 3", [](const std::vector<Tensor>& in) { return in[0] * 3; }},
      {"1 / x", [](const std::vector<Tensor>& in) { return 1 / in[0]; }},
      {"x / 4", [](const std::vector<Tensor>& in) { return in[0] / 4; }},
      {"0.5 + x", [](const std::vector<Tensor>& in) { return 0.5 + in[0]; }},
  };
  for (const auto& [what, f] : functions) {
    testing::GradCheckResult r = testing::check_gradients(f, {x});
    EXPECT_TRUE(r.ok) << what << ":\n" << r.report;
    EXPECT_EQ(r.checked, 6u) << what;
  }
}

// --- Initializer factories ---

TEST(SdkConvenienceTest, InitializerFactoriesFillTensorFlowsFields) {
  using I = Initializer;
  EXPECT_EQ(I::zeros().kind, I::Kind::kZeros);
  EXPECT_EQ(I::ones().kind, I::Kind::kConstant);
  EXPECT_EQ(I::ones().value, 1.0);
  EXPECT_EQ(I::constant(0.25).value, 0.25);

  constexpr I uniform = I::random_uniform(-0.5, 0.5);
  EXPECT_EQ(uniform.kind, I::Kind::kUniform);
  EXPECT_EQ(uniform.minval, -0.5);
  EXPECT_EQ(uniform.maxval, 0.5);
  EXPECT_EQ(I::random_uniform().maxval, 1.0);  // tf.random_uniform_initializer's defaults

  // By name, or in TensorFlow's order (mean, stddev).
  constexpr I by_name = I::truncated_normal({.stddev = 0.01});
  EXPECT_EQ(by_name.kind, I::Kind::kTruncatedNormal);
  EXPECT_EQ(by_name.mean, 0.0);
  EXPECT_EQ(by_name.stddev, 0.01);
  const I in_order = I::random_normal({0.5, 2.0});
  EXPECT_EQ(in_order.kind, I::Kind::kNormal);
  EXPECT_EQ(in_order.mean, 0.5);
  EXPECT_EQ(in_order.stddev, 2.0);
  EXPECT_EQ(I::truncated_normal().stddev, 1.0);

  EXPECT_EQ(I::glorot_uniform().kind, I::Kind::kGlorotUniform);
  EXPECT_EQ(I::glorot_normal().kind, I::Kind::kGlorotNormal);
  const I scaling = I::variance_scaling();  // tf.variance_scaling_initializer's defaults
  EXPECT_EQ(scaling.kind, I::Kind::kVarianceScaling);
  EXPECT_EQ(scaling.scale, 1.0);
  EXPECT_EQ(scaling.mode, I::FanMode::kFanIn);
  EXPECT_EQ(scaling.distribution, I::Distribution::kTruncatedNormal);
  EXPECT_EQ(I::he_normal().scale, 2.0);
  EXPECT_EQ(I::he_uniform().distribution, I::Distribution::kUniform);
}

double stddev_of(const std::vector<float>& v) {
  double m = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()), s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

std::vector<float> drawn(const Initializer& init, const Shape& shape) {
  VariableSpec spec{.name = "scope/weights", .shape = shape, .initializer = init};
  Generator generator(17);
  return initial_value(cpu(), spec, generator).to_vector<float>();
}

TEST(SdkConvenienceTest, InitializerFactoriesDrawWithTensorFlowsFormulas) {
  // glorot_uniform of [200, 300]: uniform in +-sqrt(6 / 500).
  std::vector<float> v = drawn(Initializer::glorot_uniform(), Shape{200, 300});
  const double limit = std::sqrt(6.0 / 500.0);
  EXPECT_LE(*std::max_element(v.begin(), v.end()), limit);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -limit);
  EXPECT_NEAR(stddev_of(v), limit / std::sqrt(3.0), 0.02 * limit);
  // truncated_normal({.stddev = 0.1}): nothing beyond 0.2, spread 0.88 * 0.1.
  v = drawn(Initializer::truncated_normal({.stddev = 0.1}), Shape{20000});
  EXPECT_LE(*std::max_element(v.begin(), v.end()), 0.2f + 1e-6f);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -0.2f - 1e-6f);
  EXPECT_NEAR(stddev_of(v), 0.1 * 0.87962566103423978, 0.003);
  // he_normal of [100, 50]: spread sqrt(2 / 100) after truncation's correction.
  v = drawn(Initializer::he_normal(), Shape{100, 50});
  EXPECT_NEAR(stddev_of(v), std::sqrt(2.0 / 100.0), 0.05 * std::sqrt(2.0 / 100.0));
  EXPECT_EQ(drawn(Initializer::constant(-3.0), Shape{3}), std::vector<float>(3, -3.0f));
  EXPECT_EQ(drawn(Initializer::ones(), Shape{2}), std::vector<float>(2, 1.0f));
}

// --- Label losses on logits ---

double sigmoid_xent(double y, double x) {  // -(y log s(x) + (1 - y) log(1 - s(x)))
  const double s = 1.0 / (1.0 + std::exp(-x));
  return -(y * std::log(s) + (1.0 - y) * std::log(1.0 - s));
}

TEST(SdkConvenienceTest, SigmoidLabelLossIsTheBatchMeanOfPerExampleSums) {
  const std::vector<double> y = {1, 0, 1, 0, 0, 1};
  const std::vector<double> x = {0.3, -1.2, 2.0, 0.7, -0.1, -2.5};
  double expected = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) expected += sigmoid_xent(y[i], x[i]);
  expected /= 2.0;  // two examples of three classes
  Tensor loss = ops::sigmoid_cross_entropy_label_loss(f64(Shape{2, 3}, y), f64(Shape{2, 3}, x));
  EXPECT_EQ(loss.shape(), Shape{});
  expect_values(loss, {expected}, 1e-12, "sigmoid_cross_entropy_label_loss");

  // f32 labels of f64 logits are cast; saturated logits stay finite where log(sigmoid) is not.
  Tensor y32 = ops::cast(f64(Shape{1, 2}, {1, 0}), DType::kF32);
  Tensor far = f64(Shape{1, 2}, {-800.0, 800.0});
  expect_values(ops::sigmoid_cross_entropy_label_loss(y32, far), {1600.0}, 1e-9,
                "saturated logits");
  EXPECT_FALSE(
      std::isfinite(ops::reduce_sum(ops::neg(ops::log(ops::sigmoid(far)))).to_vector<double>()[0]));
}

TEST(SdkConvenienceTest, SoftmaxLabelLossMatchesHandComputedValues) {
  // Row 0: logits (0, ln 2, ln 5), one-hot on class 1: -log(2 / 8). Row 1: uniform logits,
  // labels (0.5, 0.5, 0): -log(1 / 3).
  const std::vector<double> logits = {0.0, std::log(2.0), std::log(5.0), 1.0, 1.0, 1.0};
  const std::vector<double> labels = {0, 1, 0, 0.5, 0.5, 0};
  Tensor per_example =
      ops::softmax_cross_entropy_with_logits(f64(Shape{2, 3}, labels), f64(Shape{2, 3}, logits));
  EXPECT_EQ(per_example.shape(), Shape{2});
  expect_values(per_example, {std::log(4.0), std::log(3.0)}, 1e-12,
                "softmax_cross_entropy_with_logits");
  expect_values(
      ops::softmax_cross_entropy_label_loss(f64(Shape{2, 3}, labels), f64(Shape{2, 3}, logits)),
      {(std::log(4.0) + std::log(3.0)) / 2.0}, 1e-12, "softmax_cross_entropy_label_loss");
  // Logits far apart: finite, and the wrong class costs the gap.
  expect_values(
      ops::softmax_cross_entropy_with_logits(f64(Shape{1, 2}, {1, 0}), f64(Shape{1, 2}, {0, 1e4})),
      {1e4}, 1e-6, "far logits");
}

TEST(SdkConvenienceTest, LogitLossesDifferentiate) {
  Tensor labels = f64(Shape{2, 3}, {1, 0, 1, 0.2, 0.8, 0});
  Tensor logits = f64(Shape{2, 3}, {0.3, -1.2, 2.0, 0.7, -0.1, -2.5});
  testing::GradCheckResult r = testing::check_gradients(
      [&](const std::vector<Tensor>& in) {
        return ops::sigmoid_cross_entropy_label_loss(labels, in[0]);
      },
      {logits});
  EXPECT_TRUE(r.ok) << r.report;
  r = testing::check_gradients(
      [&](const std::vector<Tensor>& in) {
        return ops::softmax_cross_entropy_label_loss(labels, in[0]);
      },
      {logits});
  EXPECT_TRUE(r.ok) << r.report;

  // With rows of labels that are distributions: (softmax - labels) / batch size.
  Tensor one_hot = f64(Shape{2, 3}, {0, 0, 1, 0.2, 0.8, 0});
  Tensor x = f64(Shape{2, 3}, logits.to_vector<double>());
  x.set_requires_grad(true);
  Tensor g =
      gradients(ops::softmax_cross_entropy_label_loss(one_hot, x), std::vector<Tensor>{x})[0];
  std::vector<double> expected = ((ops::softmax(logits, -1) - one_hot) / 2.0).to_vector<double>();
  expect_values(g, expected, 1e-12, "gradient of softmax_cross_entropy_label_loss");
}

TEST(SdkConvenienceTest, LogitLossesNameBothShapesWhenTheyDiffer) {
  Tensor labels = f64(Shape{2, 3}, std::vector<double>(6, 0.0));
  Tensor logits = f64(Shape{3}, {0, 0, 0});
  for (auto loss :
       {&ops::sigmoid_cross_entropy_label_loss, &ops::softmax_cross_entropy_label_loss}) {
    try {
      loss(labels, logits);
      ADD_FAILURE() << "labels [2, 3] with logits [3] were accepted";
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
      EXPECT_NE(message.find("[3]"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace trainyard
