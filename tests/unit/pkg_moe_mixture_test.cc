// pkg/yt8m's gated mixture (moe_mixture, MoeModel's softmax gates times sigmoid experts) on
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
#include "trainyard/pkg/yt8m/video_level.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

class MoeMixtureTest : public ::testing::TestWithParam<std::string> {
 public:
  // This program's copy of pkg/yt8m is the only one, so it declares the composites.
  void SetUp() override {
    ASSERT_NE(yt8m::moe_mixture_composite(), nullptr);
    ASSERT_NE(yt8m::moe_mixture_grad_composite(), nullptr);
  }
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
    EXPECT_TRUE(yt8m::moe_mixture_composite()->has_fused_kernel(backend()));
    EXPECT_TRUE(yt8m::moe_mixture_grad_composite()->has_fused_kernel(backend()));
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
      const Tensor p = yt8m::moe_mixture(a, b);
      ASSERT_EQ(p.shape(), Shape{kRows}) << what;
      ASSERT_EQ(p.dtype(), dtype) << what;
      const std::vector<Tensor> grads =
          gradients(ops::reduce_sum(ops::mul(p, dp)), std::vector<Tensor>{a, b});
      std::vector<Tensor> want, want_grads;
      {
        NoGradScope no_grad;
        want = yt8m::moe_mixture_composed(a, b);
        want_grads = yt8m::moe_mixture_grad_composed(a, b, dp);
      }
      expect_near_all(values(p), values(want[0]), tol, what + " p");
      expect_near_all(values(grads[0]), values(want_grads[0]), tol, what + " d gate_logits");
      expect_near_all(values(grads[1]), values(want_grads[1]), tol, what + " d expert_logits");
      // The composed gradient is the unfused ops' own autodiff.
      a.set_requires_grad(true);
      const std::vector<Tensor> autodiff =
          gradients(ops::reduce_sum(ops::mul(yt8m::moe_mixture_composed(a, b)[0], dp)),
                    std::vector<Tensor>{a, b});
      expect_near_all(values(autodiff[0]), values(want_grads[0]), tol, what + " autodiff dg");
      expect_near_all(values(autodiff[1]), values(want_grads[1]), tol, what + " autodiff de");
    }
  }
}

TEST_P(MoeMixtureTest, GradientPassesCentralDifferences) {
  for (int64_t m : {2, 3, 6}) {
    const Tensor a = tensor(Shape{7, m + 1}, logits(7 * (m + 1), 2.0, 0.4), DType::kF64);
    const Tensor b = tensor(Shape{7, m}, logits(7 * m, 2.5, 0.9), DType::kF64);
    const testing::GradCheckResult r = testing::check_gradients(
        [](const std::vector<Tensor>& in) { return yt8m::moe_mixture(in[0], in[1]); }, {a, b});
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
    const std::vector<double> p = values(yt8m::moe_mixture(a, b));
    EXPECT_TRUE(std::isnan(p[0]));
    EXPECT_TRUE(std::isnan(p[1]));
    const double s2 = 1.0 / (1.0 + std::exp(-2.0));
    EXPECT_NEAR(p[2], 0.5 * s2, 1e-6);  // gates 0, 1/2, 1/2
    EXPECT_NEAR(p[3], values(yt8m::moe_mixture_composed(a, b)[0])[3], 1e-6);
  }
}

}  // namespace
}  // namespace trainyard
