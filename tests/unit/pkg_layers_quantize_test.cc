// Quantization-aware training in pkg/layers (trainyard/pkg/layers/quantize.h), contrib.quantize's
// rewrite as the layers apply it: outputs on at most 2^bits levels once the delay has passed and
// untouched before it, the variables contrib.quantize names, the weights' last-value ranges, the
// activations' zero-debiased moving averages equal to TensorFlow's, straight-through gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/quantize.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using layers::VariableScope;
using testing::FakeModelContext;

Backend& cpu() { return *test::backend("cpu"); }

std::vector<float> floats(const Tensor& t) {
  NoGradScope no_grad;
  return t.to_vector<float>();
}

float scalar_of(FakeModelContext& ctx, const std::string& name) {
  return floats(ctx.at(name).value()).at(0);
}

std::size_t distinct(const Tensor& t) {
  const std::vector<float> v = floats(t);
  return std::set<float>(v.begin(), v.end()).size();
}

Tensor images(int64_t offset = 0) {
  std::vector<float> v;
  for (int64_t i = 0; i < 2 * 12 * 12 * 3; ++i) {
    v.push_back(static_cast<float>(std::sin(static_cast<double>(i + offset) * 0.37) * 2.0));
  }
  return Tensor::from_vector(cpu(), Shape{2, 12, 12, 3}, v);
}

// SSD MobileNet's layer: conv, batch norm, relu6, in scope Conv2d_0.
layers::Conv2DOptions mobilenet_conv() {
  layers::Conv2DOptions c;
  c.scope = "Conv2d_0";
  c.normalizer = layers::BatchNormOptions{};
  c.activation_fn = layers::ActivationFn::relu6();
  c.weights_initializer = layers::truncated_normal_initializer(0.0, 0.5);
  return c;
}

layers::QuantizeOptions delayed(int64_t delay) {
  layers::QuantizeOptions q;
  q.delay = delay;
  return q;
}

Tensor forward(FakeModelContext& ctx, Mode mode, const std::optional<layers::QuantizeOptions>& q,
               const Tensor& x) {
  VariableScope root(ctx, mode);
  root.set_quantize(q);
  return layers::conv2d(root, x, 16, {3, 3}, mobilenet_conv());
}

TEST(PkgLayersQuantizeTest, ConvOutputsTakeAtMost256ValuesFromTheDelayOnAndAreFloatBefore) {
  FakeModelContext ctx(cpu());
  const Tensor x = images();
  // Passes 1 and 2 of delay 3: the float outputs, the layer's without the rewrite (its batch
  // norm folded, the same function to rounding).
  for (int pass = 1; pass <= 2; ++pass) {
    const Tensor quantized = forward(ctx, Mode::kTrain, delayed(3), x);
    const Tensor plain = forward(ctx, Mode::kTrain, std::nullopt, x);
    const std::vector<float> q = floats(quantized), p = floats(plain);
    ASSERT_EQ(q.size(), p.size());
    for (std::size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(q[i], p[i], 1e-5) << "pass " << pass;
    EXPECT_GT(distinct(quantized), 1000u) << "pass " << pass;
    EXPECT_EQ(ctx.at("fake_quantization_step").value().to_vector<int64_t>(),
              std::vector<int64_t>{pass});
  }
  // Passes 3 and 4: fake_quantization_step >= delay, every output on the 8-bit grid.
  std::vector<float> moving_variance;
  for (int pass = 3; pass <= 4; ++pass) {
    moving_variance = floats(ctx.at("Conv2d_0/BatchNorm/moving_variance").value());
    const Tensor y = forward(ctx, Mode::kTrain, delayed(3), x);
    EXPECT_LE(distinct(y), 256u) << "pass " << pass;
    EXPECT_GT(distinct(y), 50u) << "pass " << pass;
    const std::vector<float> v = floats(y);
    const float lo = scalar_of(ctx, "Conv2d_0/act_quant/min");
    const float hi = scalar_of(ctx, "Conv2d_0/act_quant/max");
    const float scale = (hi - lo) / 255.0f;
    for (float value : v) {
      const double level = (static_cast<double>(value) - lo) / scale;
      ASSERT_NEAR(level, std::round(level), 0.02) << value << " is off the grid";
    }
  }
  EXPECT_EQ(ctx.at("fake_quantization_step").value().to_vector<int64_t>(), std::vector<int64_t>{4});
  // The variables contrib.quantize creates, none of them trained.
  for (const char* name :
       {"Conv2d_0/weights_quant/min", "Conv2d_0/weights_quant/max", "Conv2d_0/act_quant/min",
        "Conv2d_0/act_quant/max", "Conv2d_0/act_quant/Conv2d_0/act_quant/min/biased",
        "Conv2d_0/act_quant/Conv2d_0/act_quant/max/local_step"}) {
    EXPECT_FALSE(ctx.at(name).trainable()) << name;
  }
  EXPECT_FLOAT_EQ(scalar_of(ctx, "Conv2d_0/act_quant/Conv2d_0/act_quant/max/local_step"), 4.0f);
  // The weights' range is the last one of the folded weights, with 0 in it: in training
  // w * gamma / sqrt(moving_variance + eps) (gamma 1), the moving variance read before the pass.
  std::vector<float> w = floats(ctx.at("Conv2d_0/weights").value());
  for (std::size_t i = 0; i < w.size(); ++i) {
    w[i] = static_cast<float>(w[i] / std::sqrt(moving_variance[i % 16] + 0.001));
  }
  EXPECT_NEAR(scalar_of(ctx, "Conv2d_0/weights_quant/min"),
              std::min(*std::min_element(w.begin(), w.end()), 0.0f), 1e-5);
  EXPECT_NEAR(scalar_of(ctx, "Conv2d_0/weights_quant/max"),
              std::max(*std::max_element(w.begin(), w.end()), 0.0f), 1e-5);
}

TEST(PkgLayersQuantizeTest, EvaluationQuantizesFromTheStartAndUpdatesNothing) {
  FakeModelContext ctx(cpu());
  const Tensor y = forward(ctx, Mode::kEval, delayed(500000), images());
  EXPECT_LE(distinct(y), 256u);
  EXPECT_EQ(ctx.find("fake_quantization_step"), nullptr);
  EXPECT_EQ(scalar_of(ctx, "Conv2d_0/act_quant/min"), 0.0f);  // the initial range [0, 6]
  EXPECT_EQ(scalar_of(ctx, "Conv2d_0/act_quant/max"), 6.0f);
  EXPECT_EQ(scalar_of(ctx, "Conv2d_0/weights_quant/min"), -6.0f);
  EXPECT_EQ(ctx.find("Conv2d_0/act_quant/Conv2d_0/act_quant/min/biased"), nullptr);
}

TEST(PkgLayersQuantizeTest, LayersOutsideAQuantizedScopeAndCustomActivationsAreLeftAlone) {
  FakeModelContext ctx(cpu());
  VariableScope root(ctx, Mode::kEval);
  root.set_quantize(layers::QuantizeOptions{});
  layers::Conv2DOptions sigmoid = mobilenet_conv();
  sigmoid.scope = "Sigmoid";
  sigmoid.activation_fn =
      layers::ActivationFn::custom([](const Tensor& t) { return ops::sigmoid(t); });
  layers::conv2d(root, images(), 4, {1, 1}, sigmoid);
  EXPECT_NE(ctx.find("Sigmoid/weights_quant/min"), nullptr);
  EXPECT_EQ(ctx.find("Sigmoid/act_quant/min"), nullptr);
  root.set_quantize(std::nullopt);
  layers::conv2d(root, images(), 4, {1, 1}, mobilenet_conv());
  EXPECT_EQ(ctx.find("Conv2d_0/weights_quant/min"), nullptr);
}

// TensorFlow 2.21's outputs (tests/interop/qat_ema_golden.py): act_quant's min and max after
// moving_averages.assign_moving_average(var, min(min(x), 0) or max(max(x), 0), 0.999) with its
// zero debiasing, from min 0 and max 6, and fake_quant_with_min_max_vars(x, min, max) with them,
// for three batches in turn.
struct EmaGolden {
  std::vector<float> x;
  float min, max;
  std::vector<float> y;
};

TEST(PkgLayersQuantizeTest, ActivationRangesAreTensorFlowsZeroDebiasedMovingAverages) {
  const EmaGolden goldens[] = {
      {{-0.5f, 0.25f, 3.0f, 1.7f},
       -0.5000064373016357f,
       3.0000386238098145f,
       {-0.49412402510643005f, 0.24706201255321503f, 3.0059211254119873f, 1.7019827365875244f}},
      {{0.1f, 2.0f, 5.5f, -1.25f},
       -0.8752047419548035f,
       4.25070858001709f,
       {0.10050810128450394f, 1.9900603294372559f, 4.24144172668457f, -0.8844712972640991f}},
      {{0.3f, 0.2f, 0.9f, 0.4f},
       -0.5831704139709473f,
       3.1326534748077393f,
       {0.3060090243816376f, 0.20400601625442505f, 0.9034552574157715f, 0.3934401869773865f}},
  };
  FakeModelContext ctx(cpu());
  for (const EmaGolden& g : goldens) {
    VariableScope root(ctx, Mode::kTrain);
    root.set_quantize(layers::QuantizeOptions{});
    const VariableScope layer = root.child("layer");
    const Tensor y = layers::quantize_activations(layer, Tensor::from_vector(cpu(), Shape{4}, g.x));
    EXPECT_FLOAT_EQ(scalar_of(ctx, "layer/act_quant/min"), g.min);
    EXPECT_FLOAT_EQ(scalar_of(ctx, "layer/act_quant/max"), g.max);
    const std::vector<float> got = floats(y);
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], g.y[i]) << i;
  }
}

TEST(PkgLayersQuantizeTest, GradientsGoStraightThroughInsideTheRange) {
  FakeModelContext ctx(cpu());
  VariableScope root(ctx, Mode::kEval);  // the stored range [0, 6]
  root.set_quantize(layers::QuantizeOptions{});
  Tensor x = Tensor::from_vector(cpu(), Shape{4}, std::vector<float>{-1.0f, 0.7f, 5.9f, 7.5f});
  x.set_requires_grad(true);
  const Tensor y = layers::quantize_activations(root.child("layer"), x);
  const std::vector<Tensor> g = gradients(ops::reduce_sum(ops::mul(y, 3.0)), {&x, 1});
  EXPECT_EQ(floats(g[0]), (std::vector<float>{0.0f, 3.0f, 3.0f, 0.0f}));
}

// Batch-norm folding: TensorFlow 2.21 running fold_batch_norms.py's rewrite of a conv2d with a
// fused batch norm (scale) and relu6, then quantize.py's weight and activation quantization
// (tests/interop/qat_fold_golden.py): two training passes (outputs, gradients of
// sum(out * coef) for the input, weights, gamma and beta, the moving statistics after the pass,
// the weights' and activations' ranges), then an evaluation pass with the moving statistics.
struct FoldPass {
  std::vector<float> out, dx, dw, dgamma, dbeta, moving_mean, moving_variance;
  float weights_min, weights_max, act_min, act_max;
};
struct FoldGolden {
  FoldPass first, second;
  std::vector<float> eval;
};

#include "pkg_layers_quantize_fold_golden.inc"

Tensor sequence(const Shape& shape, double scale, double step, double phase, int64_t offset = 0,
                bool cosine = false) {
  std::vector<float> v;
  for (int64_t i = 0; i < shape.num_elements(); ++i) {
    const double a = static_cast<double>(i + offset) * step + phase;
    v.push_back(static_cast<float>((cosine ? std::cos(a) : std::sin(a)) * scale));
  }
  return Tensor::from_vector(cpu(), shape, v);
}

void set(FakeModelContext& ctx, const std::string& name, Tensor value) {
  value.set_requires_grad(ctx.at(name).trainable());
  ctx.at(name).assign(value);
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::abs(want[i]))) << what << " " << i;
  }
}

// The quantized outputs: equal within 1e-5 but for a few (at most 2%) one activation step apart,
// the values whose level rounds the other way over a last-bit difference in the folded weights
// or the sums (TensorFlow's Eigen rsqrt and convolution against ours).
void expect_outputs(const std::vector<float>& got, const std::vector<float>& want, float step,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t off_by_a_step = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - want[i]);
    if (diff <= 1e-5 * std::max(1.0f, std::abs(want[i]))) continue;
    EXPECT_NEAR(diff, step, 1e-5) << what << " " << i << ": " << got[i] << " vs " << want[i];
    ++off_by_a_step;
  }
  EXPECT_LE(off_by_a_step, got.size() / 50) << what;
}

void check_fold(const FoldGolden& golden, std::optional<int64_t> freeze_bn_delay) {
  FakeModelContext ctx(cpu());
  layers::QuantizeOptions q;
  q.freeze_bn_delay = freeze_bn_delay;
  layers::Conv2DOptions conv = mobilenet_conv();
  conv.normalizer->scale = true;
  auto forward = [&](Mode mode, const Tensor& x) {
    VariableScope root(ctx, mode);
    root.set_quantize(q);
    return layers::conv2d(root, x, 4, {3, 3}, conv);
  };
  forward(Mode::kEval, sequence(Shape{2, 5, 5, 3}, 2.0, 0.37, 0.0));  // creates the variables
  set(ctx, "Conv2d_0/weights", sequence(Shape{3, 3, 3, 4}, 0.4, 0.11, 0.5));
  set(ctx, "Conv2d_0/BatchNorm/gamma",
      Tensor::from_vector(cpu(), Shape{4}, std::vector<float>{2.5f, 3.0f, 3.5f, 2.8f}));
  set(ctx, "Conv2d_0/BatchNorm/beta",
      Tensor::from_vector(cpu(), Shape{4}, std::vector<float>{0.1f, -0.2f, 0.05f, 0.3f}));
  set(ctx, "Conv2d_0/BatchNorm/moving_mean",
      Tensor::from_vector(cpu(), Shape{4}, std::vector<float>{0.2f, -0.1f, 0.05f, 0.4f}));
  set(ctx, "Conv2d_0/BatchNorm/moving_variance",
      Tensor::from_vector(cpu(), Shape{4}, std::vector<float>{1.5f, 0.8f, 2.0f, 1.2f}));
  const Tensor coef = sequence(Shape{2, 5, 5, 4}, 1.0, 0.13, 0.0, 0, true);
  int64_t offset = 0;
  for (const FoldPass* pass : {&golden.first, &golden.second}) {
    const std::string what = "pass at offset " + std::to_string(offset);
    Tensor x = sequence(Shape{2, 5, 5, 3}, 2.0, 0.37, 0.0, offset);
    x.set_requires_grad(true);
    const Tensor sources[] = {x, ctx.at("Conv2d_0/weights").value(),
                              ctx.at("Conv2d_0/BatchNorm/gamma").value(),
                              ctx.at("Conv2d_0/BatchNorm/beta").value()};
    const Tensor y = forward(Mode::kTrain, x);
    const std::vector<Tensor> g = gradients(ops::reduce_sum(ops::mul(y, coef)), sources);
    expect_outputs(floats(y), pass->out, (pass->act_max - pass->act_min) / 255.0f, what + " out");
    expect_close(floats(g[0]), pass->dx, what + " d/dx");
    expect_close(floats(g[1]), pass->dw, what + " d/dweights");
    expect_close(floats(g[2]), pass->dgamma, what + " d/dgamma");
    expect_close(floats(g[3]), pass->dbeta, what + " d/dbeta");
    expect_close(floats(ctx.at("Conv2d_0/BatchNorm/moving_mean").value()), pass->moving_mean,
                 what + " moving_mean");
    expect_close(floats(ctx.at("Conv2d_0/BatchNorm/moving_variance").value()),
                 pass->moving_variance, what + " moving_variance");
    expect_close(
        {scalar_of(ctx, "Conv2d_0/weights_quant/min"), scalar_of(ctx, "Conv2d_0/weights_quant/max"),
         scalar_of(ctx, "Conv2d_0/act_quant/min"), scalar_of(ctx, "Conv2d_0/act_quant/max")},
        {pass->weights_min, pass->weights_max, pass->act_min, pass->act_max}, what + " ranges");
    offset += 7;
  }
  expect_outputs(floats(forward(Mode::kEval, sequence(Shape{2, 5, 5, 3}, 2.0, 0.37, 0.0))),
                 golden.eval, (golden.second.act_max - golden.second.act_min) / 255.0f,
                 "evaluation");
}

TEST(PkgLayersQuantizeTest, BatchNormFoldingIsContribQuantizesWithBatchStatistics) {
  check_fold(kFold, std::nullopt);
}

TEST(PkgLayersQuantizeTest, BatchNormFoldingUsesTheMovingStatisticsFromFreezeBnDelayOn) {
  check_fold(kFoldFrozen, 1);
}

// MobileNet v2's residual sums: contrib.quantize's post_activation_bypass_quant in the block's
// scope, a moving-average range from [-6, 6] (the sum is signed), updated in training.
TEST(PkgLayersQuantizeTest, BypassSumsAreQuantizedInTheirBlocksScope) {
  FakeModelContext ctx(cpu());
  const Tensor sum =
      Tensor::from_vector(cpu(), Shape{4}, std::vector<float>{-2.5f, 0.3f, 1.7f, 4.1f});
  {
    VariableScope root(ctx, Mode::kEval);
    root.set_quantize(layers::QuantizeOptions{});
    const std::vector<float> y =
        floats(layers::quantize_bypass(root.child("expanded_conv_2"), sum));
    const float step = 12.0f / 255.0f;  // the initial range [-6, 6], nudged to hold 0 exactly
    for (std::size_t i = 0; i < y.size(); ++i) {
      EXPECT_NEAR(y[i], floats(sum)[i], step / 2 + 1e-6) << i;
      const double level = static_cast<double>(y[i]) / step;
      EXPECT_NEAR(level, std::round(level), 0.02) << y[i] << " is off the grid";
    }
    EXPECT_EQ(scalar_of(ctx, "expanded_conv_2/post_activation_bypass_quant/min"), -6.0f);
  }
  VariableScope root(ctx, Mode::kTrain);
  root.set_quantize(layers::QuantizeOptions{});
  layers::quantize_bypass(root.child("expanded_conv_2"), sum);
  // One zero-debiased step: the batch's range.
  EXPECT_NEAR(scalar_of(ctx, "expanded_conv_2/post_activation_bypass_quant/min"), -2.5f, 1e-4);
  EXPECT_NEAR(scalar_of(ctx, "expanded_conv_2/post_activation_bypass_quant/max"), 4.1f, 1e-4);
  VariableScope plain(ctx, Mode::kTrain);
  EXPECT_EQ(floats(layers::quantize_bypass(plain.child("expanded_conv_3"), sum)), floats(sum));
  EXPECT_EQ(ctx.find("expanded_conv_3/post_activation_bypass_quant/min"), nullptr);
}

}  // namespace
}  // namespace trainyard
