// pkg/layers, TF-Slim's layers, on every test backend through testing::FakeModelContext:
// variable names, shapes and initializers as slim names them, outputs against hand
// computations, batch norm's update op and its training/inference switch, dropout's scaling and
// seeding, and gradients by central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using layers::VariableScope;
using testing::FakeModelContext;

class PkgLayersTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }
  Tensor tensor(const Shape& shape, const std::vector<double>& values) const {
    return Tensor::from_vector(backend(), shape, values);
  }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, PkgLayersTest, ::testing::ValuesIn(test::backend_names()),
                         backend_test_name);

std::vector<double> values(const Tensor& t) {
  NoGradScope no_grad;
  return t.dtype() == DType::kF64 ? t.to_vector<double>()
                                  : ops::cast(t, DType::kF64).to_vector<double>();
}

// Options with one field set (designated initializers would leave the others unnamed).
layers::FullyConnectedOptions fc_options(
    const std::string& scope, layers::ActivationFn activation = layers::ActivationFn::relu()) {
  layers::FullyConnectedOptions options;
  options.scope = scope;
  options.activation_fn = std::move(activation);
  return options;
}

layers::DropoutOptions keep(double keep_prob) {
  layers::DropoutOptions options;
  options.keep_prob = keep_prob;
  return options;
}

layers::Conv2DOptions strided(int64_t stride, layers::ActivationFn activation) {
  layers::Conv2DOptions options;
  options.stride = {stride, stride};
  options.activation_fn = std::move(activation);
  return options;
}

std::vector<double> ramp(int64_t n, double scale, double offset = 0.0) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(std::sin(static_cast<double>(i) + offset) * scale);
  return v;
}

TEST_P(PkgLayersTest, FullyConnectedHasSlimNamesDefaultsAndUniquifiedDefaultScopes) {
  FakeModelContext ctx(backend());
  VariableScope root(ctx, Mode::kTrain);
  Tensor x = tensor({2, 3}, ramp(6, 1.0));
  Tensor y = layers::fully_connected(root, x, 4);
  layers::fully_connected(root, x, 5);
  VariableScope tower = root.child("tower");
  layers::fully_connected(tower, x, 2, fc_options("fc1"));

  EXPECT_EQ(ctx.variable_names(),
            (std::vector<std::string>{"fully_connected/weights", "fully_connected/biases",
                                      "fully_connected_1/weights", "fully_connected_1/biases",
                                      "tower/fc1/weights", "tower/fc1/biases"}));
  const VariableSpec& w = ctx.at("fully_connected/weights").spec();
  const VariableSpec& b = ctx.at("fully_connected/biases").spec();
  EXPECT_EQ(w.shape, (Shape{3, 4}));
  EXPECT_EQ(b.shape, (Shape{4}));
  EXPECT_EQ(w.initializer.kind, Initializer::Kind::kGlorotUniform);
  EXPECT_EQ(b.initializer.kind, Initializer::Kind::kZeros);
  EXPECT_TRUE(w.trainable);
  EXPECT_EQ(ctx.at("fully_connected_1/weights").spec().shape, (Shape{3, 5}));

  // Default activation relu: y = relu(x W + b).
  ctx.set_value("fully_connected/biases", {0.1, -0.2, 0.3, -0.4});
  VariableScope again(ctx, Mode::kEval);
  y = layers::fully_connected(again, x, 4);
  std::vector<double> xv = values(x), wv = ctx.values("fully_connected/weights");
  std::vector<double> expected;
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 4; ++c) {
      double z = std::vector<double>{0.1, -0.2, 0.3, -0.4}[c];
      for (int k = 0; k < 3; ++k) z += xv[r * 3 + k] * wv[k * 4 + c];
      expected.push_back(std::max(z, 0.0));
    }
  }
  EXPECT_EQ(testing::compare_close(values(y), expected, 1e-6, 1e-5), "");
  EXPECT_EQ(ctx.variable_names().size(), 6u) << "a new root scope finds the same variables";
}

TEST_P(PkgLayersTest, FullyConnectedAppliesOnTheLastAxisOfHigherRankInputs) {
  FakeModelContext ctx(backend());
  VariableScope root(ctx, Mode::kTrain);
  Tensor x = tensor({2, 3, 4}, ramp(24, 0.5));
  layers::FullyConnectedOptions options;
  options.activation_fn = layers::ActivationFn::none();
  Tensor y = layers::fully_connected(root, x, 5, options);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(ctx.at("fully_connected/weights").spec().shape, (Shape{4, 5}));
  VariableScope flat_root(ctx, Mode::kTrain);
  Tensor flat = layers::fully_connected(flat_root, ops::reshape(x, Shape{6, 4}), 5, options);
  EXPECT_EQ(testing::compare_close(values(y), values(flat), 0, 0), "");
}

TEST_P(PkgLayersTest, NormalizerReplacesBiasesWithBatchNormInTheLayerScope) {
  FakeModelContext ctx(backend());
  VariableScope root(ctx, Mode::kTrain);
  layers::FullyConnectedOptions fc;
  fc.normalizer = layers::BatchNormOptions{};
  fc.scope = "hidden";
  layers::fully_connected(root, tensor({4, 3}, ramp(12, 1.0)), 2, fc);
  EXPECT_EQ(ctx.variable_names(),
            (std::vector<std::string>{"hidden/weights", "hidden/BatchNorm/beta",
                                      "hidden/BatchNorm/moving_mean",
                                      "hidden/BatchNorm/moving_variance"}));

  layers::Conv2DOptions conv;
  conv.normalizer = layers::BatchNormOptions{};
  conv.normalizer->scale = true;
  layers::conv2d(root, tensor({2, 3, 3, 1}, ramp(18, 1.0)), 2, {3, 3}, conv);
  for (const char* name : {"Conv/weights", "Conv/BatchNorm/beta", "Conv/BatchNorm/gamma",
                           "Conv/BatchNorm/moving_mean", "Conv/BatchNorm/moving_variance"}) {
    EXPECT_NE(ctx.find(name), nullptr) << name;
  }
  EXPECT_EQ(ctx.find("Conv/biases"), nullptr);
}

TEST_P(PkgLayersTest, Conv2dHasHwioWeightsAndMatchesAHandConvolution) {
  FakeModelContext ctx(backend());
  VariableScope root(ctx, Mode::kTrain);
  Tensor same = layers::conv2d(root, tensor({1, 5, 5, 2}, ramp(50, 1.0)), 4, {3, 3},
                               strided(2, layers::ActivationFn::relu()));
  EXPECT_EQ(same.shape(), (Shape{1, 3, 3, 4})) << "SAME padding by default";
  EXPECT_EQ(ctx.at("Conv/weights").spec().shape, (Shape{3, 3, 2, 4}));
  EXPECT_EQ(ctx.at("Conv/biases").spec().shape, (Shape{4}));
  EXPECT_EQ(ctx.at("Conv/weights").spec().initializer.kind, Initializer::Kind::kGlorotUniform);

  // VALID, 2x2 kernel, one output channel, no activation: a hand convolution.
  layers::Conv2DOptions valid;
  valid.padding = Padding2D::valid();
  valid.activation_fn = layers::ActivationFn::none();
  valid.scope = "valid";
  Tensor x = tensor({1, 3, 3, 1}, ramp(9, 1.0));
  layers::conv2d(root, x, 1, {2, 2}, valid);
  ctx.set_value("valid/weights", {1.0, -2.0, 0.5, 3.0});
  ctx.set_value("valid/biases", {0.25});
  VariableScope again(ctx, Mode::kTrain);
  Tensor y = layers::conv2d(again, x, 1, {2, 2}, valid);
  ASSERT_EQ(y.shape(), (Shape{1, 2, 2, 1}));
  std::vector<double> xv = values(x), expected;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      expected.push_back(0.25 + xv[i * 3 + j] * 1.0 - 2.0 * xv[i * 3 + j + 1] +
                         0.5 * xv[(i + 1) * 3 + j] + 3.0 * xv[(i + 1) * 3 + j + 1]);
    }
  }
  EXPECT_EQ(testing::compare_close(values(y), expected, 1e-5, 1e-5), "");

  layers::Conv2DOptions both;
  both.stride = {2, 2};
  both.rate = {2, 2};
  EXPECT_THROW(layers::conv2d(root, x, 1, {2, 2}, both), InvalidArgument);
  EXPECT_THROW(layers::conv2d(root, tensor({3, 3}, ramp(9, 1.0)), 1, {2, 2}), InvalidArgument);
}

// x [4, 2] in f64, scale and center, decay 0.9: y = gamma (x - mean) / sqrt(var + eps) + beta
// with the batch's biased variance; then moving = moving * 0.9 + stat * 0.1, with the variance
// corrected by n / (n - 1) = 4 / 3 as tf.nn.fused_batch_norm reports it.
TEST_P(PkgLayersTest, BatchNormTrainingNormalizesWithBatchStatisticsAndUpdatesMovingAverages) {
  FakeModelContext ctx(backend());
  layers::BatchNormOptions bn;
  bn.scale = true;
  bn.decay = 0.9;
  const std::vector<double> xv = {1.0, -2.0, 3.0, 0.5, -1.0, 4.0, 2.0, 1.5};
  Tensor x = tensor({4, 2}, xv);
  {
    VariableScope root(ctx, Mode::kTrain);
    layers::batch_norm(root, x, bn);  // creates the variables, updates once
  }
  EXPECT_EQ(ctx.variable_names(),
            (std::vector<std::string>{"BatchNorm/beta", "BatchNorm/gamma", "BatchNorm/moving_mean",
                                      "BatchNorm/moving_variance"}));
  EXPECT_TRUE(ctx.at("BatchNorm/beta").trainable());
  EXPECT_TRUE(ctx.at("BatchNorm/gamma").trainable());
  EXPECT_FALSE(ctx.at("BatchNorm/moving_mean").trainable());
  EXPECT_FALSE(ctx.at("BatchNorm/moving_variance").trainable());
  EXPECT_TRUE(ctx.at("BatchNorm/moving_mean").spec().collections & kModelVariables);
  EXPECT_EQ(ctx.store().trainable().size(), 2u);

  ctx.set_value("BatchNorm/gamma", {2.0, 0.5});
  ctx.set_value("BatchNorm/beta", {0.1, -0.3});
  ctx.set_value("BatchNorm/moving_mean", {0.0, 1.0});
  ctx.set_value("BatchNorm/moving_variance", {1.0, 2.0});
  VariableScope root(ctx, Mode::kTrain);
  std::vector<double> y = values(layers::batch_norm(root, x, bn));

  const double gamma[2] = {2.0, 0.5}, beta[2] = {0.1, -0.3};
  std::vector<double> expected(8), mean(2, 0.0), var(2, 0.0);
  for (int c = 0; c < 2; ++c) {
    for (int r = 0; r < 4; ++r) mean[c] += xv[r * 2 + c] / 4;
    for (int r = 0; r < 4; ++r) var[c] += (xv[r * 2 + c] - mean[c]) * (xv[r * 2 + c] - mean[c]) / 4;
    for (int r = 0; r < 4; ++r) {
      expected[r * 2 + c] =
          gamma[c] * (xv[r * 2 + c] - mean[c]) / std::sqrt(var[c] + 0.001) + beta[c];
    }
  }
  EXPECT_EQ(testing::compare_close(y, expected, 1e-10, 1e-10), "");
  EXPECT_EQ(
      testing::compare_close(ctx.values("BatchNorm/moving_mean"),
                             {0.0 * 0.9 + mean[0] * 0.1, 1.0 * 0.9 + mean[1] * 0.1}, 1e-12, 1e-12),
      "");
  EXPECT_EQ(testing::compare_close(
                ctx.values("BatchNorm/moving_variance"),
                {1.0 * 0.9 + var[0] * 4 / 3 * 0.1, 2.0 * 0.9 + var[1] * 4 / 3 * 0.1}, 1e-12, 1e-12),
            "");
}

TEST_P(PkgLayersTest, BatchNormOutOfTrainingUsesMovingStatisticsAndUpdatesNothing) {
  FakeModelContext ctx(backend());
  const std::vector<double> xv = {1.0, -2.0, 3.0, 0.5, -1.0, 4.0};
  Tensor x = tensor({3, 2}, xv);
  {
    VariableScope root(ctx, Mode::kEval);
    layers::batch_norm(root, x);
  }
  EXPECT_EQ(ctx.find("BatchNorm/gamma"), nullptr) << "slim's scale defaults to false";
  EXPECT_EQ(ctx.values("BatchNorm/moving_mean"), (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(ctx.values("BatchNorm/moving_variance"), (std::vector<double>{1.0, 1.0}));

  ctx.set_value("BatchNorm/beta", {0.5, -0.5});
  ctx.set_value("BatchNorm/moving_mean", {1.0, -1.0});
  ctx.set_value("BatchNorm/moving_variance", {4.0, 0.25});
  for (Mode mode : {Mode::kEval, Mode::kPredict}) {
    SCOPED_TRACE(mode_name(mode));
    VariableScope root(ctx, mode);
    EXPECT_FALSE(root.is_training());
    std::vector<double> y = values(layers::batch_norm(root, x));
    std::vector<double> expected;
    for (int r = 0; r < 3; ++r) {
      expected.push_back((xv[r * 2] - 1.0) / std::sqrt(4.0 + 0.001) + 0.5);
      expected.push_back((xv[r * 2 + 1] + 1.0) / std::sqrt(0.25 + 0.001) - 0.5);
    }
    EXPECT_EQ(testing::compare_close(y, expected, 1e-12, 1e-12), "");
    EXPECT_EQ(ctx.values("BatchNorm/moving_mean"), (std::vector<double>{1.0, -1.0}));
    EXPECT_EQ(ctx.values("BatchNorm/moving_variance"), (std::vector<double>{4.0, 0.25}));
  }

  // An explicit is_training overrides the scope's mode (slim's is_training argument).
  VariableScope train_root(ctx, Mode::kTrain);
  layers::BatchNormOptions frozen;
  frozen.is_training = false;
  layers::batch_norm(train_root, x, frozen);
  EXPECT_EQ(ctx.values("BatchNorm/moving_mean"), (std::vector<double>{1.0, -1.0}));
}

TEST_P(PkgLayersTest, DropoutScalesKeptValuesAndIsDeterministicBySeed) {
  FakeModelContext ctx(backend(), 2, /*seed=*/42);
  Tensor x = ops::full(backend(), Shape{100, 50}, 3.0, DType::kF64);
  {
    VariableScope eval(ctx, Mode::kEval);
    EXPECT_EQ(values(layers::dropout(eval, x)), values(x)) << "identity out of training";
  }
  auto masks = [&]() {
    VariableScope root(ctx, Mode::kTrain);
    Tensor a = layers::dropout(root, x, keep(0.8));
    Tensor b = layers::dropout(root, x, keep(0.8));
    return std::make_pair(values(a), values(b));
  };
  auto [first, second] = masks();
  std::size_t kept = 0;
  for (double v : first) {
    ASSERT_TRUE(v == 0.0 || std::abs(v - 3.0 / 0.8) < 1e-12) << v;
    kept += v != 0.0;
  }
  EXPECT_NEAR(static_cast<double>(kept) / first.size(), 0.8, 0.03);
  EXPECT_NE(first, second) << "Dropout and Dropout_1 draw different masks";
  EXPECT_EQ(masks().first, first) << "the same seed draws the same mask";
  ctx.set_seed(43);
  EXPECT_NE(masks().first, first) << "another step's seed draws another mask";
  VariableScope root(ctx, Mode::kTrain);
  EXPECT_THROW(layers::dropout(root, x, keep(0.0)), InvalidArgument);
}

// Gradient checks in f64: the layer's inputs and variables are the checked inputs.
testing::GradCheckResult check_layer(
    FakeModelContext& ctx, Mode mode, const Tensor& x,
    const std::function<Tensor(VariableScope&, const Tensor&)>& layer) {
  {
    VariableScope root(ctx, mode);
    layer(root, x);
  }
  std::vector<Variable*> variables = ctx.store().trainable();
  std::vector<Tensor> inputs = {x};
  for (Variable* v : variables) inputs.push_back(v->value());
  auto f = [&](const std::vector<Tensor>& in) {
    for (std::size_t i = 0; i < variables.size(); ++i) variables[i]->assign(in[i + 1]);
    VariableScope root(ctx, mode);
    return layer(root, in[0]);
  };
  return testing::check_gradients(f, inputs);
}

TEST_P(PkgLayersTest, GradientsMatchCentralDifferences) {
  Tensor x2 = tensor({3, 4}, ramp(12, 1.0, 0.3));
  {
    SCOPED_TRACE("fully_connected, tanh");
    FakeModelContext ctx(backend());
    auto r = check_layer(ctx, Mode::kTrain, x2, [](VariableScope& s, const Tensor& x) {
      return layers::fully_connected(s, x, 3, fc_options("", layers::ActivationFn::tanh()));
    });
    EXPECT_TRUE(r.ok) << r.report;
    EXPECT_EQ(r.checked, 12u + 12u + 3u);
  }
  {
    SCOPED_TRACE("conv2d, sigmoid, stride 2");
    FakeModelContext ctx(backend());
    Tensor x4 = tensor({1, 4, 4, 2}, ramp(32, 1.0, 0.7));
    auto r = check_layer(ctx, Mode::kTrain, x4, [](VariableScope& s, const Tensor& x) {
      return layers::conv2d(s, x, 2, {3, 3}, strided(2, layers::ActivationFn::sigmoid()));
    });
    EXPECT_TRUE(r.ok) << r.report;
  }
  for (Mode mode : {Mode::kTrain, Mode::kEval}) {
    SCOPED_TRACE(std::string("batch_norm with scale, ") + mode_name(mode));
    FakeModelContext ctx(backend());
    auto r = check_layer(ctx, mode, x2, [](VariableScope& s, const Tensor& x) {
      layers::BatchNormOptions bn;
      bn.scale = true;
      return layers::batch_norm(s, x, bn);
    });
    EXPECT_TRUE(r.ok) << r.report;
    EXPECT_EQ(r.checked, 12u + 4u + 4u);
  }
  {
    SCOPED_TRACE("fully_connected with batch norm, training");
    FakeModelContext ctx(backend());
    auto r = check_layer(ctx, Mode::kTrain, x2, [](VariableScope& s, const Tensor& x) {
      layers::FullyConnectedOptions fc;
      fc.activation_fn = layers::ActivationFn::tanh();
      fc.normalizer = layers::BatchNormOptions{};
      return layers::fully_connected(s, x, 3, fc);
    });
    EXPECT_TRUE(r.ok) << r.report;
  }
}

TEST_P(PkgLayersTest, ScopeNamesAndErrorsNameTheLayer) {
  FakeModelContext ctx(backend());
  VariableScope root(ctx, Mode::kPredict);
  EXPECT_EQ(root.child("a").child("b").full_name("weights"), "a/b/weights");
  EXPECT_THROW(root.child(""), InvalidArgument);
  EXPECT_THROW(root.child("a//b"), InvalidArgument);
  try {
    layers::fully_connected(root, tensor({3}, {1, 2, 3}), 2, fc_options("logits"));
    FAIL() << "a rank-1 input was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("logits"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ctx.at("nothing"), InvalidArgument);
}

}  // namespace
}  // namespace trainyard
