// pkg/layers' batch norm + activation composites (batch_norm_activation.h) on every test
// backend: the fused kernels (cpu, and opaque, which runs the cpu's) give the same bits as
// ops::batch_norm_training / batch_norm_inference followed by relu or relu6, forward and
// backward, in f32 and f64, for NHWC shapes whose channel count is no multiple of any SIMD
// width; the gradient's composition matches its fused kernel; the gradient passes central
// differences; slim's batch_norm layer gives the same outputs and moving averages through the
// composite as through the unfused ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/batch_norm_activation.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using layers::NormActivation;

class BatchNormActivationTest : public ::testing::TestWithParam<std::string> {
 public:
  // This program's copy of pkg/layers is the only one, so it declares the composites.
  void SetUp() override {
    ASSERT_NE(layers::batch_norm_activation_training_composite(), nullptr);
    ASSERT_NE(layers::batch_norm_activation_inference_composite(), nullptr);
    ASSERT_NE(layers::batch_norm_activation_grad_composite(), nullptr);
  }
  Backend& backend() const { return *test::backend(GetParam()); }
  Tensor tensor(const Shape& shape, const std::vector<double>& v, DType dtype) const {
    NoGradScope no_grad;
    return ops::cast(Tensor::from_vector(backend(), shape, v), dtype);
  }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, BatchNormActivationTest,
                         ::testing::ValuesIn(test::backend_names()), backend_test_name);

std::vector<double> values(const Tensor& t) {
  NoGradScope no_grad;
  return t.dtype() == DType::kF64 ? t.to_vector<double>()
                                  : ops::cast(t, DType::kF64).to_vector<double>();
}

// Deterministic values spread over about [offset - scale, offset + scale].
std::vector<double> wave(int64_t n, double scale, double offset, double phase) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) {
    v.push_back(offset + scale * std::sin(0.73 * static_cast<double>(i) + phase) *
                             std::cos(0.171 * static_cast<double>(i)));
  }
  return v;
}

const char* activation_name(NormActivation a) {
  switch (a) {
    case NormActivation::kRelu:
      return "relu";
    case NormActivation::kRelu6:
      return "relu6";
    case NormActivation::kNone:
      break;
  }
  return "none";
}

Tensor activate(const Tensor& z, NormActivation a) {
  if (a == NormActivation::kRelu) return ops::relu(z);
  if (a == NormActivation::kRelu6) return ops::relu6(z);
  return z;
}

constexpr NormActivation kActivations[] = {NormActivation::kNone, NormActivation::kRelu,
                                           NormActivation::kRelu6};

// [2, 5, 7, 13] (70 rows) and [3, 3, 3, 37] (27 rows): channels 13 and 37, rows and
// channels no multiple of 4, 8 or 16.
const Shape kShapes[] = {Shape{2, 5, 7, 13}, Shape{3, 3, 3, 37}};

struct Inputs {
  Tensor x, gamma, beta, w;
};

// Inputs of one case: gamma from 0 to 3 and beta from 0 to 2 put a good share of relu6's
// inputs above 6 and below 0; w is d loss / d y.
struct Case {
  Tensor x, gamma, beta, w;
};

Case make_case(const BatchNormActivationTest& t, const Shape& shape, DType dtype) {
  const int64_t c = shape[3], n = shape.num_elements();
  return {t.tensor(shape, wave(n, 2.0, 0.5, 0.3), dtype),
          t.tensor(Shape{c}, wave(c, 1.5, 1.5, 1.1), dtype),
          t.tensor(Shape{c}, wave(c, 1.0, 1.0, 2.0), dtype),
          t.tensor(shape, wave(n, 1.0, 0.2, 0.7), dtype)};
}

// Fresh leaves with the values of `inputs`, requiring a gradient.
std::vector<Tensor> leaves(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) {
    NoGradScope no_grad;
    Tensor copy = ops::add(t, 0.0);
    copy.set_requires_grad(true);
    out.push_back(copy);
  }
  return out;
}

constexpr double kEpsilon = 1e-3;
const char* const kGradNames[] = {"dx", "dgamma", "dbeta"};

// Exact equality: the fused kernels make the unfused kernels' operations in their order.
TEST_P(BatchNormActivationTest, TrainingMatchesTheUnfusedOpsBitForBit) {
  for (const Shape& shape : kShapes) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      for (NormActivation act : kActivations) {
        SCOPED_TRACE(shape.to_string() + " " + dtype_name(dtype) + " " + activation_name(act));
        const Case k = make_case(*this, shape, dtype);
        std::vector<Tensor> fused_in = leaves({k.x, k.gamma, k.beta});
        std::vector<Tensor> plain_in = leaves({k.x, k.gamma, k.beta});
        const layers::BatchNormActivationAttrs attrs{kEpsilon, act};
        std::vector<Tensor> fused =
            (*layers::batch_norm_activation_training_composite())(fused_in, &attrs);
        ops::BatchNormResult plain =
            ops::batch_norm_training(plain_in[0], plain_in[1], plain_in[2], kEpsilon);
        Tensor plain_y = activate(plain.y, act);

        EXPECT_EQ(values(fused[0]), values(plain_y)) << "y";
        EXPECT_EQ(values(fused[1]), values(plain.batch_mean)) << "batch_mean";
        EXPECT_EQ(values(fused[2]), values(plain.batch_variance)) << "batch_variance";
        std::vector<Tensor> fused_grads =
            gradients(ops::reduce_sum(ops::mul(fused[0], k.w)), fused_in);
        std::vector<Tensor> plain_grads =
            gradients(ops::reduce_sum(ops::mul(plain_y, k.w)), plain_in);
        for (std::size_t i = 0; i < 3; ++i) {
          EXPECT_EQ(values(fused_grads[i]), values(plain_grads[i])) << kGradNames[i];
        }
        if (act == NormActivation::kRelu6) {
          // The data reach both of relu6's bounds, so both sides of the mask are exercised.
          int low = 0, high = 0;
          for (double v : values(fused[0])) low += v == 0.0, high += v == 6.0;
          EXPECT_GT(low, 0);
          EXPECT_GT(high, 0);
        }
      }
    }
  }
}

TEST_P(BatchNormActivationTest, InferenceMatchesTheUnfusedOpsBitForBit) {
  for (const Shape& shape : kShapes) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      for (NormActivation act : kActivations) {
        SCOPED_TRACE(shape.to_string() + " " + dtype_name(dtype) + " " + activation_name(act));
        const Case k = make_case(*this, shape, dtype);
        const int64_t c = shape[3];
        Tensor mean = tensor(Shape{c}, wave(c, 0.5, 0.3, 0.4), dtype);
        Tensor variance = tensor(Shape{c}, wave(c, 0.4, 0.6, 0.9), dtype);
        Tensor fused = layers::batch_norm_activation_inference(k.x, k.gamma, k.beta, mean, variance,
                                                               kEpsilon, act);
        Tensor plain = activate(
            ops::batch_norm_inference(k.x, k.gamma, k.beta, mean, variance, kEpsilon), act);
        EXPECT_EQ(values(fused), values(plain));

        // With gradients (batch norm frozen while the rest trains): through the composition.
        std::vector<Tensor> fused_in = leaves({k.x, k.gamma, k.beta});
        std::vector<Tensor> plain_in = leaves({k.x, k.gamma, k.beta});
        Tensor fused_y = layers::batch_norm_activation_inference(
            fused_in[0], fused_in[1], fused_in[2], mean, variance, kEpsilon, act);
        Tensor plain_y = activate(ops::batch_norm_inference(plain_in[0], plain_in[1], plain_in[2],
                                                            mean, variance, kEpsilon),
                                  act);
        std::vector<Tensor> fused_grads =
            gradients(ops::reduce_sum(ops::mul(fused_y, k.w)), fused_in);
        std::vector<Tensor> plain_grads =
            gradients(ops::reduce_sum(ops::mul(plain_y, k.w)), plain_in);
        for (std::size_t i = 0; i < 3; ++i) {
          EXPECT_EQ(values(fused_grads[i]), values(plain_grads[i])) << kGradNames[i];
        }
      }
    }
  }
}

// What a backend without the fused gradient kernel runs, against the kernel: the same
// gradient up to rounding (the composition's sums are f32 in f32, the kernel's f64).
TEST_P(BatchNormActivationTest, GradientCompositionMatchesTheFusedKernel) {
  for (const Shape& shape : kShapes) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      for (NormActivation act : kActivations) {
        SCOPED_TRACE(shape.to_string() + " " + dtype_name(dtype) + " " + activation_name(act));
        const Case k = make_case(*this, shape, dtype);
        const layers::BatchNormActivationAttrs attrs{kEpsilon, act};
        std::vector<Tensor> forward =
            (*layers::batch_norm_activation_training_composite())({k.x, k.gamma, k.beta}, &attrs);
        std::vector<Tensor> in = {k.x, k.gamma, k.beta, forward[1], forward[2], forward[3], k.w};
        std::vector<Tensor> fused = (*layers::batch_norm_activation_grad_composite())(in, &attrs);
        std::vector<Tensor> composed = layers::batch_norm_activation_grad_composed(in, attrs);
        const double tol = dtype == DType::kF32 ? 2e-4 : 1e-11;
        for (std::size_t i = 0; i < 3; ++i) {
          EXPECT_EQ(testing::compare_close(values(fused[i]), values(composed[i]), tol, tol), "")
              << kGradNames[i];
        }
      }
    }
  }
}

// Central differences in f64 through the composite (fused where the backend fuses it). The
// data keep every input of relu / relu6 at least 0.01 from 0 and 6, where the derivative jumps.
TEST_P(BatchNormActivationTest, GradientPassesCentralDifferences) {
  const Shape shape{2, 3, 3, 5};
  const Case k = make_case(*this, shape, DType::kF64);
  {
    ops::BatchNormResult r = ops::batch_norm_training(k.x, k.gamma, k.beta, kEpsilon);
    for (double z : values(r.y)) {
      ASSERT_GT(std::min(std::abs(z), std::abs(z - 6.0)), 0.01) << "the data sit on a kink";
    }
  }
  for (NormActivation act : kActivations) {
    SCOPED_TRACE(activation_name(act));
    auto f = [act](const std::vector<Tensor>& in) {
      const layers::BatchNormActivationAttrs attrs{kEpsilon, act};
      return (*layers::batch_norm_activation_training_composite())({in[0], in[1], in[2]},
                                                                   &attrs)[0];
    };
    testing::GradCheckResult r = testing::check_gradients(f, {k.x, k.gamma, k.beta});
    EXPECT_TRUE(r.ok) << r.report;
    EXPECT_EQ(r.checked, static_cast<std::size_t>(shape.num_elements() + 10));
  }
}

// slim's batch_norm with activation_fn relu6 (the composite) against batch_norm then relu6
// (two ops): outputs, moving averages and variable gradients, in training and out of it.
TEST_P(BatchNormActivationTest, BatchNormLayerFusesRelu6WithTheSameResults) {
  const Shape shape{2, 4, 3, 13};
  const Case k = make_case(*this, shape, DType::kF32);
  auto run = [&](bool fused, Mode mode) {
    testing::FakeModelContext ctx(backend());
    layers::BatchNormOptions bn;
    bn.scale = true;
    bn.decay = 0.9;
    if (fused) bn.activation_fn = layers::ActivationFn::relu6();
    {
      layers::VariableScope root(ctx, Mode::kTrain);
      layers::batch_norm(root, k.x, bn);  // creates the variables, updates once
    }
    ctx.set_value("BatchNorm/gamma", values(k.gamma));
    ctx.set_value("BatchNorm/beta", values(k.beta));
    layers::VariableScope root(ctx, mode);
    Tensor y = layers::batch_norm(root, k.x, bn);
    if (!fused) y = ops::relu6(y);
    std::vector<std::vector<double>> out = {values(y), ctx.values("BatchNorm/moving_mean"),
                                            ctx.values("BatchNorm/moving_variance")};
    std::vector<Tensor> sources = {ctx.at("BatchNorm/gamma").value(),
                                   ctx.at("BatchNorm/beta").value()};
    for (const Tensor& g : gradients(ops::reduce_sum(ops::mul(y, k.w)), sources)) {
      out.push_back(values(g));
    }
    return out;
  };
  for (Mode mode : {Mode::kTrain, Mode::kEval}) {
    SCOPED_TRACE(mode_name(mode));
    EXPECT_EQ(run(true, mode), run(false, mode));
  }
}

}  // namespace
}  // namespace trainyard
