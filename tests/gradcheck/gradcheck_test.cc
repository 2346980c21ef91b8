// Gradient checks by central differences in f64 (trainyard/testing.h) for every
// differentiable op, on the CPU reference backend and on the opaque fixture backend.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using Inputs = std::vector<Tensor>;

struct InputSpec {
  Shape shape;
  double low = -2.0;
  double high = 2.0;
};

struct GradCase {
  std::string name;
  std::vector<InputSpec> inputs;
  std::function<Tensor(const Inputs&)> f;
  std::vector<double> kinks;
};

Tensor constant_i64(Backend& b, Shape shape, std::vector<int64_t> values) {
  return Tensor::from_vector(b, std::move(shape), values);
}

// Fake quantization's gradient is TensorFlow's straight-through estimator, not the derivative of
// its staircase: it is the derivative of s = x inside the nudged range, min below it and max
// above it. The returned tensor has s's value (s - fake_quant is added as a constant) and
// fake_quant's recorded gradient, so central differences check that gradient against s's.
Tensor fake_quant_straight_through(const Inputs& in, bool per_channel) {
  auto quantize = [per_channel](const Tensor& x, const Tensor& lo, const Tensor& hi) {
    return per_channel ? ops::fake_quant_with_min_max_vars_per_channel(x, lo, hi, 4, false)
                       : ops::fake_quant_with_min_max_vars(x, lo, hi, 4, false);
  };
  Tensor y = quantize(in[0], in[1], in[2]);
  std::vector<double> offset;
  {
    NoGradScope no_grad;
    // The nudged range's ends, per channel: what the op makes of -1e300 and 1e300.
    const int64_t channels = in[1].num_elements();
    std::vector<double> far(static_cast<std::size_t>(2 * channels), 1e300);
    for (int64_t c = 0; c < channels; ++c) far[static_cast<std::size_t>(c)] = -1e300;
    const Shape far_shape = per_channel ? Shape{2, channels} : Shape{2};
    const std::vector<double> ends =
        quantize(Tensor::from_vector(in[0].backend(), far_shape, far), in[1], in[2])
            .to_vector<double>();
    const std::vector<double> x = in[0].to_vector<double>(), q = y.to_vector<double>();
    const std::vector<double> lo = in[1].to_vector<double>(), hi = in[2].to_vector<double>();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t c = per_channel ? i % lo.size() : 0;
      const double s = x[i] < ends[c] ? lo[c] : x[i] > ends[lo.size() + c] ? hi[c] : x[i];
      offset.push_back(s - q[i]);
    }
  }
  return ops::add(y, Tensor::from_vector(in[0].backend(), in[0].shape(), offset));
}

std::vector<GradCase> make_cases() {
  using namespace ops;
  auto un = [](std::string name, std::function<Tensor(const Tensor&)> f, double lo = -2.0,
               double hi = 2.0, std::vector<double> kinks = {}) {
    return GradCase{name, {{Shape{2, 3}, lo, hi}}, [f](const Inputs& x) { return f(x[0]); }, kinks};
  };
  auto bin = [](std::string name, std::function<Tensor(const Tensor&, const Tensor&)> f,
                Shape a = Shape{2, 3}, Shape b = Shape{2, 3}, double lo = -2.0, double hi = 2.0) {
    return GradCase{
        name, {{a, lo, hi}, {b, lo, hi}}, [f](const Inputs& x) { return f(x[0], x[1]); }, {}};
  };
  std::vector<GradCase> c = {
      un("neg", [](const Tensor& x) { return neg(x); }),
      un("abs", [](const Tensor& x) { return abs(x); }, -2, 2, {0.0}),
      un("exp", [](const Tensor& x) { return exp(x); }),
      un("log", [](const Tensor& x) { return log(x); }, 0.5, 3.0),
      un("log1p", [](const Tensor& x) { return log1p(x); }, -0.5, 3.0),
      un("sqrt", [](const Tensor& x) { return sqrt(x); }, 0.5, 3.0),
      un("rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.5, 3.0),
      un("square", [](const Tensor& x) { return square(x); }),
      un("sigmoid", [](const Tensor& x) { return sigmoid(x); }),
      un("tanh", [](const Tensor& x) { return tanh(x); }),
      un("relu", [](const Tensor& x) { return relu(x); }, -2, 2, {0.0}),
      un("relu6", [](const Tensor& x) { return relu6(x); }, -2, 8, {0.0, 6.0}),
      un("elu", [](const Tensor& x) { return elu(x, 0.7); }, -2, 2, {0.0}),
      un("softplus", [](const Tensor& x) { return softplus(x); }),
      un("pow_scalar", [](const Tensor& x) { return pow(x, 2.5); }, 0.5, 2.0),
      un("clip_by_value", [](const Tensor& x) { return clip_by_value(x, -1.0, 0.5); }, -2, 2,
         {-1.0, 0.5}),
      bin("add_broadcast", [](const Tensor& a, const Tensor& b) { return add(a, b); }, Shape{2, 3},
          Shape{3}),
      bin("sub_broadcast", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, Shape{2, 1},
          Shape{1, 3}),
      bin("mul_broadcast", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, Shape{2, 3},
          Shape{2, 1}),
      bin("div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, Shape{2, 3},
          Shape{2, 3}, 0.5, 2.0),
      bin("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }),
      bin("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }),
      bin("pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, Shape{2, 3},
          Shape{2, 3}, 0.5, 2.0),
      bin("where", [](const Tensor& a, const Tensor& b) { return where(greater(a, b), a, mul(b, 3.0)); }),
      un("add_scalar", [](const Tensor& x) { return add(x, 1.5); }),
      un("mul_scalar", [](const Tensor& x) { return mul(x, -0.5); }),
      un("reduce_sum_axis", [](const Tensor& x) { return reduce_sum(x, {1}); }),
      un("reduce_sum_all", [](const Tensor& x) { return reduce_sum(x); }),
      un("reduce_mean_keepdims", [](const Tensor& x) { return reduce_mean(x, {0}, true); }),
      un("reduce_max", [](const Tensor& x) { return reduce_max(x, {-1}); }),
      un("reduce_min", [](const Tensor& x) { return reduce_min(x, {0}); }),
      un("reduce_logsumexp", [](const Tensor& x) { return reduce_logsumexp(x, {1}); }),
      un("softmax", [](const Tensor& x) { return softmax(x, -1); }),
      un("softmax_axis0", [](const Tensor& x) { return softmax(x, 0); }),
      un("log_softmax", [](const Tensor& x) { return log_softmax(x); }),
      bin("matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, Shape{2, 3},
          Shape{3, 4}),
      bin("matmul_ta", [](const Tensor& a, const Tensor& b) { return matmul(a, b, true, false); },
          Shape{3, 2}, Shape{3, 4}),
      bin("matmul_tb", [](const Tensor& a, const Tensor& b) { return matmul(a, b, false, true); },
          Shape{2, 3}, Shape{4, 3}),
      bin("matmul_ta_tb", [](const Tensor& a, const Tensor& b) { return matmul(a, b, true, true); },
          Shape{3, 2}, Shape{4, 3}),
      bin("matmul_batched", [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
          Shape{2, 2, 3}, Shape{2, 3, 2}),
      bin("matmul_shared_b", [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
          Shape{2, 2, 3}, Shape{3, 2}),
      un("reshape", [](const Tensor& x) { return square(reshape(x, Shape{3, -1})); }),
      un("slice_outer", [](const Tensor& x) { return square(slice_outer(x, 1, 1)); }),
      un("slice", [](const Tensor& x) { return square(slice(x, {0, 1}, {2, 2})); }),
      un("split", [](const Tensor& x) {
        auto parts = split(x, {1, 2}, 1);
        return mul(parts[0], reduce_sum(parts[1], {1}, true));
      }),
      bin("concat", [](const Tensor& a, const Tensor& b) {
        std::vector<Tensor> parts = {a, square(b)};
        return concat(parts, 1);
      }, Shape{2, 3}, Shape{2, 2}),
      un("transpose", [](const Tensor& x) { return mul(transpose(reshape(x, Shape{1, 2, 3}), {2, 0, 1}), 2.0); }),
      un("pad", [](const Tensor& x) { return square(pad(x, {{1, 0}, {0, 2}}, 0.5)); }),
      un("copy", [](const Tensor& x) { return square(copy(x)); }),
      un("l2_normalize", [](const Tensor& x) { return l2_normalize(x, 1); }),
      bin("sigmoid_cross_entropy", [](const Tensor& labels, const Tensor& logits) {
        return sigmoid_cross_entropy_with_logits(sigmoid(labels), mul(logits, 3.0));
      }),
      // Probabilities from sigmoid, labels in (0, 1): both inputs get gradients.
      bin("binary_cross_entropy", [](const Tensor& p, const Tensor& y) {
        return binary_cross_entropy(sigmoid(p), sigmoid(y), 1e-5);
      }),
      un("l2_loss", [](const Tensor& x) { return l2_loss(x); }),
      // Norm above and below the clip.
      un("clip_by_norm_clipped", [](const Tensor& x) { return clip_by_norm(x, 0.5); }),
      un("clip_by_norm_unclipped", [](const Tensor& x) { return clip_by_norm(x, 100.0); }),
      un("dropout_fixed_mask", [](const Tensor& x) {
        Generator g(42);
        return ops::dropout(x, 0.4, g, true);
      }),
      un("gather", [](const Tensor& x) {
        Tensor idx = constant_i64(x.backend(), Shape{2, 2}, {2, 0, 2, 1});
        return square(gather(x, idx, 1));
      }),
      GradCase{"scatter_add",
               {{Shape{2, 4}}},
               [](const Inputs& x) {
                 Tensor idx = constant_i64(x[0].backend(), Shape{4}, {1, 0, 1, 2});
                 return square(scatter_add(x[0], idx, 1, Shape{2, 3}));
               },
               {}},
      GradCase{"matmul_bias_act_none",
               {{Shape{2, 3}}, {Shape{3, 4}}, {Shape{4}}},
               [](const Inputs& x) { return matmul_bias_act(x[0], x[1], x[2], Activation::kNone); },
               {}},
      GradCase{"matmul_bias_act_sigmoid",
               {{Shape{2, 3}}, {Shape{3, 4}}, {Shape{4}}},
               [](const Inputs& x) { return matmul_bias_act(x[0], x[1], x[2], Activation::kSigmoid); },
               {}},
      GradCase{"matmul_bias_act_tanh",
               {{Shape{2, 3}}, {Shape{3, 4}}, {Shape{4}}},
               [](const Inputs& x) { return matmul_bias_act(x[0], x[1], x[2], Activation::kTanh); },
               {}},
      GradCase{"conv2d_valid",
               {{Shape{1, 4, 4, 2}}, {Shape{3, 3, 2, 2}}},
               [](const Inputs& x) { return conv2d(x[0], x[1]); },
               {}},
      GradCase{"conv2d_same_stride2",
               {{Shape{1, 5, 4, 2}}, {Shape{3, 2, 2, 3}}},
               [](const Inputs& x) { return conv2d(x[0], x[1], {2, 2}, Padding2D::same()); },
               {}},
      GradCase{"conv2d_dilated_groups",
               {{Shape{1, 5, 5, 4}}, {Shape{2, 2, 2, 4}}},
               [](const Inputs& x) {
                 return conv2d(x[0], x[1], {1, 1}, Padding2D::explicit_pads(1, 0, 0, 1), {2, 2}, 2);
               },
               {}},
      GradCase{"depthwise_conv2d",
               {{Shape{1, 4, 4, 2}}, {Shape{3, 3, 2, 2}}},
               [](const Inputs& x) { return depthwise_conv2d(x[0], x[1], {1, 1}, Padding2D::same()); },
               {}},
      GradCase{"max_pool2d",
               {{Shape{1, 4, 4, 2}}},
               [](const Inputs& x) { return max_pool2d(x[0], {2, 2}, {2, 2}); },
               {}},
      GradCase{"max_pool2d_same",
               {{Shape{1, 5, 5, 1}}},
               [](const Inputs& x) { return max_pool2d(x[0], {3, 3}, {2, 2}, Padding2D::same()); },
               {}},
      GradCase{"avg_pool2d_same",
               {{Shape{1, 5, 4, 2}}},
               [](const Inputs& x) { return avg_pool2d(x[0], {3, 3}, {2, 2}, Padding2D::same()); },
               {}},
      GradCase{"batch_norm_training",
               {{Shape{4, 3}}, {Shape{3}, 0.5, 1.5}, {Shape{3}}},
               [](const Inputs& x) { return batch_norm_training(x[0], x[1], x[2], 1e-3).y; },
               {}},
      GradCase{"batch_norm_training_rank4",
               {{Shape{2, 2, 2, 3}}, {Shape{3}, 0.5, 1.5}, {Shape{3}}},
               [](const Inputs& x) { return batch_norm_training(x[0], x[1], x[2], 1e-3).y; },
               {}},
      GradCase{"batch_norm_inference",
               {{Shape{4, 3}}, {Shape{3}, 0.5, 1.5}, {Shape{3}}},
               [](const Inputs& x) {
                 Backend& b = x[0].backend();
                 Tensor mean = Tensor::from_vector(b, Shape{3}, std::vector<double>{0.1, -0.2, 0.3});
                 Tensor var = Tensor::from_vector(b, Shape{3}, std::vector<double>{0.5, 1.5, 2.0});
                 return batch_norm_inference(x[0], x[1], x[2], mean, var, 1e-3);
               },
               {}},
      // R-FCN's pooling: boxes partly outside the image and flipped; 12 channels for 2 x 3 bins.
      GradCase{"position_sensitive_crop_regions_pooled",
               {{Shape{1, 4, 5, 12}}},
               [](const Inputs& x) {
                 Tensor boxes = Tensor::from_vector(
                     x[0].backend(), Shape{1, 2, 4},
                     std::vector<double>{0.1, -0.2, 0.85, 0.7, 0.9, 0.8, 0.2, 0.05});
                 return ops::position_sensitive_crop_regions(x[0], boxes, {4, 6}, {2, 3}, true);
               },
               {}},
      GradCase{"position_sensitive_crop_regions_assembled",
               {{Shape{1, 4, 5, 12}}},
               [](const Inputs& x) {
                 Tensor boxes = Tensor::from_vector(
                     x[0].backend(), Shape{1, 2, 4},
                     std::vector<double>{0.1, -0.2, 0.85, 0.7, 0.9, 0.8, 0.2, 0.05});
                 return square(ops::position_sensitive_crop_regions(x[0], boxes, {4, 6}, {2, 3},
                                                                    false));
               },
               {}},
      // Inputs below, inside and above ranges of 4 bits that get nudged.
      GradCase{"fake_quant_with_min_max_vars",
               {{Shape{3, 4}, -2.0, 2.0}, {Shape{}, -1.5, -0.5}, {Shape{}, 0.5, 1.5}},
               [](const Inputs& x) { return fake_quant_straight_through(x, false); },
               {}},
      GradCase{"fake_quant_with_min_max_vars_per_channel",
               {{Shape{3, 4}, -2.0, 2.0}, {Shape{4}, -1.5, -0.5}, {Shape{4}, 0.5, 1.5}},
               [](const Inputs& x) { return fake_quant_straight_through(x, true); },
               {}},
      GradCase{"value_used_twice",
               {{Shape{3}}},
               [](const Inputs& x) { return add(mul(x[0], x[0]), sigmoid(x[0])); },
               {}},
  };
  return c;
}

const std::vector<GradCase>& cases() {
  static const std::vector<GradCase> all = make_cases();
  return all;
}

struct Param {
  std::string backend;
  std::size_t index;
};

class GradCheckTest : public ::testing::TestWithParam<Param> {};

TEST_P(GradCheckTest, AnalyticGradientMatchesCentralDifferences) {
  const GradCase& c = cases()[GetParam().index];
  std::shared_ptr<Backend> backend = test::backend(GetParam().backend);
  Generator generator(1234);
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : c.inputs) {
    inputs.push_back(
        ops::random_uniform(*backend, spec.shape, generator, spec.low, spec.high, DType::kF64));
  }
  testing::GradCheckOptions options;
  options.kinks = c.kinks;
  testing::GradCheckResult result = testing::check_gradients(c.f, inputs, options);
  EXPECT_TRUE(result.ok) << c.name << " on " << GetParam().backend << ", max error "
                         << result.max_error << ":\n"
                         << result.report;
  EXPECT_GT(result.checked, 0u);
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (const std::string& b : test::backend_names()) {
    for (std::size_t i = 0; i < cases().size(); ++i) out.push_back({b, i});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheckTest, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return cases()[info.param.index].name + "_" + info.param.backend;
                         });

TEST(GradCheckerTest, DetectsAWrongGradient) {
  // exp's forward with a deliberately wrong backward: check_gradients must report it.
  std::shared_ptr<Backend> backend = test::backend("cpu");
  Generator generator(7);
  Tensor x = ops::random_uniform(*backend, Shape{4}, generator, -1, 1, DType::kF64);
  auto wrong = [](const Inputs& in) {
    // d/dx (x^2 with the input detached on one side) = x, not 2x.
    Tensor detached =
        Tensor::from_vector(in[0].backend(), in[0].shape(), in[0].to_vector<double>());
    return ops::mul(in[0], detached);
  };
  testing::GradCheckResult result = testing::check_gradients(wrong, {x});
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.report.find("input 0 element 0"), std::string::npos) << result.report;
}

}  // namespace
}  // namespace trainyard
