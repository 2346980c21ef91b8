// ops::moe_mixture (MoeModel's softmax gates times sigmoid experts, a composite of the core) on
// every test backend: the fused kernels of the cpu backend (and the opaque fixture, which runs
// the cpu's) give the values and gradients of the composed ops for widths M = 1 to 5 and 8 (the
// vectorized widths and the scalar path), in f32 and f64, over a row count no multiple of a
// chunk or a vector; the gradient passes central differences; NaN propagates to its row only,
// and a gate of -inf takes no mass.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

class MoeMixtureTest : public ::testing::TestWithParam<std::string> {
 public:
  Backend& backend() const { return *test::backend(GetParam()); }
  Tensor tensor(const Shape& shape, const std::vector<double>& v, DType dtype) const {
    NoGradScope no_grad;
    return ops::cast(Tensor::from_vector(backend(), shape, v), dtype);
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, MoeMixtureTest, ::testing::ValuesIn(test::backend_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// The unfused ops, as references: {p} and {d gate_logits, d expert_logits}.
std::vector<Tensor> composed(const Tensor& a, const Tensor& b) {
  const int64_t m = b.shape()[1];
  Tensor real_gates = ops::slice(ops::softmax(a), {0, 0}, {-1, m});
  return {ops::reduce_sum(ops::mul(real_gates, ops::sigmoid(b)), {1})};
}
std::vector<Tensor> composed_grad(const Tensor& a, const Tensor& b, const Tensor& dp) {
  const int64_t n = a.shape()[0], m = b.shape()[1];
  Tensor g = ops::softmax(a), e = ops::sigmoid(b);
  Tensor real_gates = ops::slice(g, {0, 0}, {-1, m});
  Tensor p = ops::reshape(ops::reduce_sum(ops::mul(real_gates, e), {1}), Shape{n, 1});
  Tensor d = ops::reshape(dp, Shape{n, 1});
  return {ops::mul(ops::mul(d, g), ops::sub(ops::pad(e, {{0, 0}, {0, 1}}), p)),
          ops::mul(ops::mul(d, ops::mul(real_gates, e)), 1.0 - e)};
}

// Runs the composite's gradient on (a, b, dp) through autodiff of moe_mixture.
std::vector<Tensor> fused_grad(Tensor a, Tensor b, const Tensor& dp) {
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  return gradients(ops::reduce_sum(ops::mul(ops::moe_mixture(a, b), dp)),
                   std::vector<Tensor>{a, b});
}

bool has_fused_kernel(Backend& backend, const std::string& op) {
  for (const KernelRegistration& k : backend.kernels()) {
    if (k.op == op && (k.flags & kFusedComposite) != 0) return true;
  }
  return false;
}

std::vector<double> values(const Tensor& t) {
  NoGradScope no_grad;
  return ops::cast(t, DType::kF64).to_vector<double>();
}

// Logits spread over about [-scale, scale], with every 37th value 8x larger (saturated
// sigmoids, a dominant gate).
std::vector<double> logits(int64_t n, double scale, double phase) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) {
    const double x = scale * std::sin(0.61 * static_cast<double>(i) + phase) *
                     std::cos(0.093 * static_cast<double>(i));
    v.push_back(i % 37 == 0 ? 8.0 * x : x);
  }
  return v;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " element " << i;
  }
}

TEST_P(MoeMixtureTest, FusedMixtureAndGradientMatchTheComposedOps) {
  if (GetParam() != "cuda") {
    EXPECT_TRUE(has_fused_kernel(backend(), "moe_mixture"));
    EXPECT_TRUE(has_fused_kernel(backend(), "moe_mixture_grad"));
  }
  constexpr int64_t kRows = 4096 + 1000 + 3;  // more than one chunk, no multiple of a vector
  for (DType dtype : {DType::kF32, DType::kF64}) {
    const double tol = dtype == DType::kF32 ? 3e-6 : 1e-13;
    for (int64_t m : {1, 2, 3, 4, 5, 8}) {
      const std::string what = std::string(dtype_name(dtype)) + " M=" + std::to_string(m);
      Tensor a = tensor(Shape{kRows, m + 1}, logits(kRows * (m + 1), 4.0, 0.3), dtype);
      Tensor b = tensor(Shape{kRows, m}, logits(kRows * m, 5.0, 1.1), dtype);
      Tensor dp = tensor(Shape{kRows}, logits(kRows, 1.0, 2.0), dtype);
      a.set_requires_grad(true);
      b.set_requires_grad(true);
      const Tensor p = ops::moe_mixture(a, b);
      ASSERT_EQ(p.shape(), Shape{kRows}) << what;
      ASSERT_EQ(p.dtype(), dtype) << what;
      const std::vector<Tensor> grads =
          gradients(ops::reduce_sum(ops::mul(p, dp)), std::vector<Tensor>{a, b});
      std::vector<Tensor> want, want_grads;
      {
        NoGradScope no_grad;
        want = composed(a, b);
        want_grads = composed_grad(a, b, dp);
      }
      expect_near_all(values(p), values(want[0]), tol, what + " p");
      expect_near_all(values(grads[0]), values(want_grads[0]), tol, what + " d gate_logits");
      expect_near_all(values(grads[1]), values(want_grads[1]), tol, what + " d expert_logits");
      // The composed gradient is the unfused ops' own autodiff.
      a.set_requires_grad(true);
      const std::vector<Tensor> autodiff =
          gradients(ops::reduce_sum(ops::mul(composed(a, b)[0], dp)), std::vector<Tensor>{a, b});
      expect_near_all(values(autodiff[0]), values(want_grads[0]), tol, what + " autodiff dg");
      expect_near_all(values(autodiff[1]), values(want_grads[1]), tol, what + " autodiff de");
    }
  }
}

// The same rows give the same bits wherever they sit in memory (vector lanes or a scalar peel
// or tail): inputs placed one row further into their buffers, so that their alignment differs,
// give bitwise the values and gradients of the aligned ones; a resumed run relies on it.
TEST_P(MoeMixtureTest, ResultsDoNotDependOnWhereTheRowsSit) {
  constexpr int64_t kRows = 4096 + 37;
  for (int64_t m : {1, 2, 3, 4, 8}) {
    const std::vector<double> av = logits((kRows + 1) * (m + 1), 4.0, 0.7);
    const std::vector<double> bv = logits((kRows + 1) * m, 5.0, 1.9);
    const std::vector<double> dv = logits(kRows + 1, 1.0, 0.2);
    // Rows 1.. of the larger tensors (views at an offset) and the same rows in tensors of their
    // own.
    const Tensor a_big = tensor(Shape{kRows + 1, m + 1}, av, DType::kF32);
    const Tensor b_big = tensor(Shape{kRows + 1, m}, bv, DType::kF32);
    const Tensor d_big = tensor(Shape{kRows + 1}, dv, DType::kF32);
    const Tensor a_view = ops::slice_outer(a_big, 1, kRows);
    const Tensor b_view = ops::slice_outer(b_big, 1, kRows);
    const Tensor d_view = ops::slice_outer(d_big, 1, kRows);
    const Tensor a_own = tensor(Shape{kRows, m + 1},
                                std::vector<double>(av.begin() + (m + 1), av.end()), DType::kF32);
    const Tensor b_own =
        tensor(Shape{kRows, m}, std::vector<double>(bv.begin() + m, bv.end()), DType::kF32);
    const Tensor d_own =
        tensor(Shape{kRows}, std::vector<double>(dv.begin() + 1, dv.end()), DType::kF32);
    const std::string what = "M=" + std::to_string(m);
    {
      NoGradScope no_grad;
      EXPECT_EQ(ops::moe_mixture(a_view, b_view).to_vector<float>(),
                ops::moe_mixture(a_own, b_own).to_vector<float>())
          << what;
    }
    const std::vector<Tensor> g_view = fused_grad(a_view, b_view, d_view);
    const std::vector<Tensor> g_own = fused_grad(a_own, b_own, d_own);
    EXPECT_EQ(g_view[0].to_vector<float>(), g_own[0].to_vector<float>()) << what;
    EXPECT_EQ(g_view[1].to_vector<float>(), g_own[1].to_vector<float>()) << what;
  }
}

TEST_P(MoeMixtureTest, GradientPassesCentralDifferences) {
  for (int64_t m : {2, 3, 6}) {
    const Tensor a = tensor(Shape{7, m + 1}, logits(7 * (m + 1), 2.0, 0.4), DType::kF64);
    const Tensor b = tensor(Shape{7, m}, logits(7 * m, 2.5, 0.9), DType::kF64);
    const testing::GradCheckResult r = testing::check_gradients(
        [](const std::vector<Tensor>& in) { return ops::moe_mixture(in[0], in[1]); }, {a, b});
    EXPECT_TRUE(r.ok) << "M=" << m << "\n" << r.report;
  }
}

TEST_P(MoeMixtureTest, NanStaysInItsRowAndMinusInfinityGatesTakeNoMass) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::kF32, DType::kF64}) {
    // Rows: a NaN gate, a NaN expert, a -inf gate, an ordinary row.
    const Tensor a = tensor(Shape{4, 3}, {nan, 0, 0, 0, 0, 0, -inf, 0, 0, 0.5, -0.5, 1}, dtype);
    const Tensor b = tensor(Shape{4, 2}, {1, 2, nan, 2, 1, 2, 1, 2}, dtype);
    NoGradScope no_grad;
    const std::vector<double> p = values(ops::moe_mixture(a, b));
    EXPECT_TRUE(std::isnan(p[0]));
    EXPECT_TRUE(std::isnan(p[1]));
    const double s2 = 1.0 / (1.0 + std::exp(-2.0));
    EXPECT_NEAR(p[2], 0.5 * s2, 1e-6);  // gates 0, 1/2, 1/2
    EXPECT_NEAR(p[3], values(composed(a, b)[0])[3], 1e-6);
  }
}

}  // namespace
}  // namespace trainyard
