// The forward pass of the math ops (ops/math.h: full, zeros, ones and scalar, elementwise unary
// ops, broadcasting binary ops and comparisons, where, and the operators) on every test backend,
// against the plain reference loops of reference_ops.h. ops_test_util.h has what the
// ops_<family>_test.cc files share.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(CreationTest);
TRAINYARD_BACKEND_SUITE(ElementwiseTest);
TRAINYARD_BACKEND_SUITE(ParallelPathTest);

// =============================================================================================
// Creation

TEST_P(CreationTest, FullStoresTheValueInEveryDtype) {
  struct Case {
    DType dtype;
    double value;
    double stored;
  };
  for (const Case& c :
       {Case{DType::kF32, 2.5, 2.5}, Case{DType::kF64, -1.25, -1.25}, Case{DType::kI32, 7.0, 7.0},
        Case{DType::kI64, -3.0, -3.0}, Case{DType::kU8, 200.0, 200.0}, Case{DType::kBool, 3.0, 1.0},
        Case{DType::kBool, 0.0, 0.0}}) {
    SCOPED_TRACE(std::string("full(") + std::to_string(c.value) + ", " + dtype_name(c.dtype) + ")");
    EXPECT_TRUE(Matches(ops::full(backend(), Shape{2, 3}, c.value, c.dtype), c.dtype,
                        ref::filled({2, 3}, c.stored), kExact));
  }
}

TEST_P(CreationTest, FullRoundsToHalfPrecisionBitPatterns) {
  // 1.5 is 0x3FC0 in bf16 and 0x3E00 in f16; -2 is 0xC000 in both.
  EXPECT_TRUE(Matches(ops::full(backend(), Shape{3}, 1.5, DType::kBF16), DType::kBF16,
                      ref::filled({3}, 0x3FC0), kExact));
  EXPECT_TRUE(Matches(ops::full(backend(), Shape{3}, 1.5, DType::kF16), DType::kF16,
                      ref::filled({3}, 0x3E00), kExact));
  EXPECT_TRUE(Matches(ops::full(backend(), Shape{2}, -2.0, DType::kBF16), DType::kBF16,
                      ref::filled({2}, 0xC000), kExact));
  EXPECT_TRUE(Matches(ops::full(backend(), Shape{2}, -2.0, DType::kF16), DType::kF16,
                      ref::filled({2}, 0xC000), kExact));
}

TEST_P(CreationTest, ZerosOnesAndScalarHaveTheirShapeAndDtype) {
  EXPECT_TRUE(Matches(ops::zeros(backend(), Shape{3}), DType::kF32, ref::filled({3}, 0.0), kExact));
  EXPECT_TRUE(Matches(ops::ones(backend(), Shape{2, 2}, DType::kF64), DType::kF64,
                      ref::filled({2, 2}, 1.0), kExact));
  EXPECT_TRUE(Matches(ops::ones(backend(), Shape{4}, DType::kI64), DType::kI64,
                      ref::filled({4}, 1.0), kExact));
  Tensor s = ops::scalar(backend(), 4.5);
  EXPECT_EQ(s.shape().rank(), 0u);
  EXPECT_TRUE(Matches(s, DType::kF32, ref::filled({}, 4.5), kExact));
  EXPECT_TRUE(Matches(ops::scalar(backend(), -9.0, DType::kI32), DType::kI32, ref::filled({}, -9.0),
                      kExact));
  Tensor empty = ops::zeros(backend(), Shape{0, 4});
  EXPECT_EQ(empty.num_elements(), 0);
  EXPECT_EQ(empty.shape(), (Shape{0, 4}));
}

TEST_P(CreationTest, LikeVariantsKeepShapeDtypeAndBackend) {
  Tensor x = tensor(random_array({2, 3}, -1, 1, 1), DType::kF64);
  Tensor z = ops::zeros_like(x);
  EXPECT_EQ(&z.backend(), &backend());
  EXPECT_TRUE(Matches(z, DType::kF64, ref::filled({2, 3}, 0.0), kExact));
  Tensor i = tensor(random_ints({4, 1}, 0, 5, 2), DType::kI32);
  EXPECT_TRUE(Matches(ops::ones_like(i), DType::kI32, ref::filled({4, 1}, 1.0), kExact));
}

// =============================================================================================
// Elementwise unary

struct UnaryCase {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> reference;
  double low, high;             // where the random inputs are drawn
  std::vector<double> special;  // inputs always included
};

std::vector<UnaryCase> unary_cases() {
  auto sign = [](double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); };
  auto elu = [](double alpha) {
    return [alpha](double v) { return v > 0 ? v : alpha * std::expm1(v); };
  };
  return {
      {"neg", [](const Tensor& x) { return ops::neg(x); }, [](double v) { return -v; }, -3, 3, {0}},
      {"abs",
       [](const Tensor& x) { return ops::abs(x); },
       [](double v) { return std::abs(v); },
       -3,
       3,
       {0, -2}},
      {"sign", [](const Tensor& x) { return ops::sign(x); }, sign, -3, 3, {0, -1e-3, 1e-3}},
      {"exp",
       [](const Tensor& x) { return ops::exp(x); },
       [](double v) { return std::exp(v); },
       -5,
       5,
       {0}},
      {"log",
       [](const Tensor& x) { return ops::log(x); },
       [](double v) { return std::log(v); },
       0.05,
       10,
       {1}},
      {"log1p",
       [](const Tensor& x) { return ops::log1p(x); },
       [](double v) { return std::log1p(v); },
       -0.5,
       5,
       {0, 1.0 / 1024 / 1024}},
      {"sqrt",
       [](const Tensor& x) { return ops::sqrt(x); },
       [](double v) { return std::sqrt(v); },
       0,
       9,
       {0, 4}},
      {"rsqrt",
       [](const Tensor& x) { return ops::rsqrt(x); },
       [](double v) { return 1.0 / std::sqrt(v); },
       0.1,
       9,
       {4}},
      {"square",
       [](const Tensor& x) { return ops::square(x); },
       [](double v) { return v * v; },
       -3,
       3,
       {0}},
      {"sigmoid",
       [](const Tensor& x) { return ops::sigmoid(x); },
       [](double v) { return 1.0 / (1.0 + std::exp(-v)); },
       -10,
       10,
       {0, -30, 30}},
      {"tanh",
       [](const Tensor& x) { return ops::tanh(x); },
       [](double v) { return std::tanh(v); },
       -4,
       4,
       {0}},
      {"relu",
       [](const Tensor& x) { return ops::relu(x); },
       [](double v) { return std::max(v, 0.0); },
       -3,
       3,
       {0}},
      {"relu6",
       [](const Tensor& x) { return ops::relu6(x); },
       [](double v) { return std::min(std::max(v, 0.0), 6.0); },
       -3,
       9,
       {0, 6}},
      {"elu(alpha=1)", [](const Tensor& x) { return ops::elu(x); }, elu(1.0), -4, 4, {0}},
      {"elu(alpha=0.5)", [](const Tensor& x) { return ops::elu(x, 0.5); }, elu(0.5), -4, 4, {0}},
      {"softplus",
       [](const Tensor& x) { return ops::softplus(x); },
       [](double v) { return std::max(v, 0.0) + std::log1p(std::exp(-std::abs(v))); },
       -20,
       20,
       {0, -100, 100}},
      {"pow(x, 3)",
       [](const Tensor& x) { return ops::pow(x, 3.0); },
       [](double v) { return v * v * v; },
       -2,
       2,
       {0}},
      {"pow(x, 2)",
       [](const Tensor& x) { return ops::pow(x, 2.0); },
       [](double v) { return v * v; },
       -3,
       3,
       {0}},
      {"pow(x, 1)",
       [](const Tensor& x) { return ops::pow(x, 1.0); },
       [](double v) { return v; },
       -3,
       3,
       {0}},
      {"pow(x, 0.5)",
       [](const Tensor& x) { return ops::pow(x, 0.5); },
       [](double v) { return std::sqrt(v); },
       0,
       4,
       {0, 1}},
      {"pow(x, -1)",
       [](const Tensor& x) { return ops::pow(x, -1.0); },
       [](double v) { return 1.0 / v; },
       0.5,
       4,
       {1}},
      {"pow(x, 0)",
       [](const Tensor& x) { return ops::pow(x, 0.0); },
       [](double) { return 1.0; },
       -2,
       2,
       {0}},
      {"clip_by_value(x, -1, 2)",
       [](const Tensor& x) { return ops::clip_by_value(x, -1.0, 2.0); },
       [](double v) { return std::min(std::max(v, -1.0), 2.0); },
       -3,
       3,
       {-1, 2}},
  };
}

TEST_P(ElementwiseTest, UnaryOpsMatchTheReferenceInF32AndF64) {
  uint32_t seed = 100;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (const UnaryCase& c : unary_cases()) {
      SCOPED_TRACE(c.name + " on " + dtype_name(dtype) + "[3, 5]");
      Array x = random_array({3, 5}, c.low, c.high, seed++);
      for (std::size_t i = 0; i < c.special.size(); ++i) x.values[i] = c.special[i];
      EXPECT_TRUE(Matches(c.op(tensor(x, dtype)), dtype, ref::map(x, c.reference),
                          tolerance_for(dtype, kF32)));
    }
  }
}

TEST_P(ElementwiseTest, UnaryOpsKeepRankZeroAndEmptyShapes) {
  Array s{{}, {-2.5}};
  EXPECT_TRUE(Matches(ops::abs(tensor(s)), DType::kF32, Array{{}, {2.5}}, kExact));
  Array empty = ref::filled({0, 3}, 0.0);
  EXPECT_TRUE(Matches(ops::exp(tensor(empty)), DType::kF32, empty, kExact));
}

TEST_P(ElementwiseTest, SoftplusAndSigmoidStayFiniteForLargeInputs) {
  Array x{{6}, {-1e4, -100, -88, 88, 100, 1e4}};
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Array softplus = read(ops::softplus(tensor(x, dtype)));
    Array sigmoid = read(ops::sigmoid(tensor(x, dtype)));
    for (std::size_t i = 0; i < x.values.size(); ++i) {
      EXPECT_TRUE(std::isfinite(softplus.values[i])) << "softplus(" << x.values[i] << ")";
      EXPECT_TRUE(std::isfinite(sigmoid.values[i])) << "sigmoid(" << x.values[i] << ")";
    }
    EXPECT_NEAR(softplus.values[5], 1e4, 1e-2);
    EXPECT_NEAR(softplus.values[0], 0.0, 1e-6);
    EXPECT_EQ(sigmoid.values[0], 0.0);
    EXPECT_EQ(sigmoid.values[5], 1.0);
  }
}

// A NaN input gives NaN wherever it sits in a vectorized loop (the f32 kernel's exp polynomial
// must neither turn it into 0 or 1 nor convert it to an integer), and its neighbours keep their
// values.
TEST_P(ElementwiseTest, SigmoidOfNanIsNanInEveryLane) {
  Array x = ref::filled({37}, 0.0);
  for (std::size_t i = 0; i < x.values.size(); ++i) x.values[i] = 0.25 * static_cast<double>(i) - 4;
  for (std::size_t i : {0, 16, 36}) x.values[i] = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Array sigmoid = read(ops::sigmoid(tensor(x, dtype)));
    for (std::size_t i = 0; i < x.values.size(); ++i) {
      if (std::isnan(x.values[i])) {
        EXPECT_TRUE(std::isnan(sigmoid.values[i])) << "sigmoid(nan) at " << i;
      } else {
        EXPECT_NEAR(sigmoid.values[i], 1 / (1 + std::exp(-x.values[i])), 1e-6) << i;
      }
    }
  }
}

// ---- Binary ----

struct BinaryCase {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> reference;
  double a_low, a_high, b_low, b_high;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return ops::add(a, b); },
       [](double a, double b) { return a + b; }, -3, 3, -3, 3},
      {"sub", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); },
       [](double a, double b) { return a - b; }, -3, 3, -3, 3},
      {"mul", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); },
       [](double a, double b) { return a * b; }, -3, 3, -3, 3},
      {"div", [](const Tensor& a, const Tensor& b) { return ops::div(a, b); },
       [](double a, double b) { return a / b; }, -3, 3, 0.5, 3},
      {"maximum", [](const Tensor& a, const Tensor& b) { return ops::maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }, -3, 3, -3, 3},
      {"minimum", [](const Tensor& a, const Tensor& b) { return ops::minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }, -3, 3, -3, 3},
      {"pow", [](const Tensor& a, const Tensor& b) { return ops::pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, 0.5, 2, -2, 2},
  };
}

// NumPy's corner cases: a size-1 axis against a longer one on both sides, a missing leading
// axis, scalars on either side, an empty axis against size 1, and two scalars.
const std::vector<std::pair<Dims, Dims>>& broadcast_pairs() {
  static const std::vector<std::pair<Dims, Dims>> pairs = {{{2, 1, 3}, {4, 1}},
                                                           {{4, 1}, {2, 1, 3}},
                                                           {{}, {2, 3}},
                                                           {{2, 3}, {}},
                                                           {{0, 3}, {1, 3}},
                                                           {{1, 3}, {0, 3}},
                                                           {{}, {}},
                                                           {{3}, {2, 3}},
                                                           {{2, 3}, {2, 3}},
                                                           {{2, 1, 3, 1, 2}, {4, 1, 1, 1}},
                                                           {{1}, {3, 1, 2}}};
  return pairs;
}

TEST_P(ElementwiseTest, BinaryOpsBroadcastLikeNumPy) {
  uint32_t seed = 200;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (const BinaryCase& c : binary_cases()) {
      for (const auto& [a_shape, b_shape] : broadcast_pairs()) {
        SCOPED_TRACE(c.name + "(" + dtype_name(dtype) + dims_string(a_shape) + ", " +
                     dtype_name(dtype) + dims_string(b_shape) + ")");
        Array a = random_array(a_shape, c.a_low, c.a_high, seed++);
        Array b = random_array(b_shape, c.b_low, c.b_high, seed++);
        EXPECT_TRUE(Matches(c.op(tensor(a, dtype), tensor(b, dtype)), dtype,
                            ref::binary(a, b, c.reference), tolerance_for(dtype, kF32)));
      }
    }
  }
}

TEST_P(ElementwiseTest, BroadcastResultShapes) {
  auto shape_of = [&](const Dims& a, const Dims& b) {
    return ops::add(tensor(ref::filled(a, 1.0)), tensor(ref::filled(b, 2.0))).shape();
  };
  EXPECT_EQ(shape_of({2, 1, 3}, {4, 1}), (Shape{2, 4, 3}));
  EXPECT_EQ(shape_of({0, 3}, {1, 3}), (Shape{0, 3}));
  EXPECT_EQ(shape_of({}, {}), Shape{});
  EXPECT_EQ(shape_of({}, {2, 3}), (Shape{2, 3}));
  EXPECT_EQ(shape_of({5, 1, 1}, {1, 4}), (Shape{5, 1, 4}));
}

TEST_P(ElementwiseTest, IntegerArithmeticIsExactWithBroadcasting) {
  struct Case {
    std::string name;
    std::function<Tensor(const Tensor&, const Tensor&)> op;
    std::function<double(double, double)> reference;
  };
  std::vector<Case> cases = {
      {"add", [](const Tensor& a, const Tensor& b) { return ops::add(a, b); },
       [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); },
       [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); },
       [](double a, double b) { return a * b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return ops::maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return ops::minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
  };
  Array a = random_ints({2, 1, 3}, -9, 9, 300);
  Array b = random_ints({4, 1}, -9, 9, 301);
  for (DType dtype : {DType::kI32, DType::kI64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name + " on " + dtype_name(dtype));
      EXPECT_TRUE(Matches(c.op(tensor(a, dtype), tensor(b, dtype)), dtype,
                          ref::binary(a, b, c.reference), kExact));
    }
  }
}

TEST_P(ElementwiseTest, ComparisonsGiveBoolOfTheBroadcastShapeIncludingTies) {
  struct Case {
    std::string name;
    std::function<Tensor(const Tensor&, const Tensor&)> op;
    std::function<bool(double, double)> reference;
  };
  std::vector<Case> cases = {
      {"equal", [](const Tensor& a, const Tensor& b) { return ops::equal(a, b); },
       [](double a, double b) { return a == b; }},
      {"not_equal", [](const Tensor& a, const Tensor& b) { return ops::not_equal(a, b); },
       [](double a, double b) { return a != b; }},
      {"less", [](const Tensor& a, const Tensor& b) { return ops::less(a, b); },
       [](double a, double b) { return a < b; }},
      {"less_equal", [](const Tensor& a, const Tensor& b) { return ops::less_equal(a, b); },
       [](double a, double b) { return a <= b; }},
      {"greater", [](const Tensor& a, const Tensor& b) { return ops::greater(a, b); },
       [](double a, double b) { return a > b; }},
      {"greater_equal", [](const Tensor& a, const Tensor& b) { return ops::greater_equal(a, b); },
       [](double a, double b) { return a >= b; }},
  };
  // Values in {-1, 0, 1}: many ties.
  std::vector<std::pair<Dims, Dims>> shapes = {{{2, 1, 3}, {4, 1}}, {{}, {3}}, {{2, 3}, {2, 3}}};
  uint32_t seed = 400;
  for (DType dtype :
       {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kBool}) {
    // u8 and bool hold {0, 1}; the others {-1, 0, 1}.
    int64_t low = dtype == DType::kU8 || dtype == DType::kBool ? 0 : -1;
    for (const auto& [a_shape, b_shape] : shapes) {
      Array a = random_ints(a_shape, low, 1, seed++);
      Array b = random_ints(b_shape, low, 1, seed++);
      for (const Case& c : cases) {
        SCOPED_TRACE(c.name + "(" + dtype_name(dtype) + dims_string(a_shape) + ", " +
                     dims_string(b_shape) + ")");
        auto f = c.reference;
        Array expected = ref::binary(a, b, [f](double x, double y) { return f(x, y) ? 1.0 : 0.0; });
        EXPECT_TRUE(
            Matches(c.op(tensor(a, dtype), tensor(b, dtype)), DType::kBool, expected, kExact));
      }
    }
  }
}

TEST_P(ElementwiseTest, ComparisonsWithNaNFollowIeee) {
  Array a{{4}, {kNaN, kNaN, 1.0, kNaN}};
  Array b{{4}, {kNaN, 1.0, kNaN, 0.0}};
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor ta = tensor(a, dtype), tb = tensor(b, dtype);
    EXPECT_TRUE(Matches(ops::equal(ta, tb), DType::kBool, ref::filled({4}, 0.0), kExact));
    EXPECT_TRUE(Matches(ops::not_equal(ta, tb), DType::kBool, ref::filled({4}, 1.0), kExact));
    EXPECT_TRUE(Matches(ops::less(ta, tb), DType::kBool, ref::filled({4}, 0.0), kExact));
    EXPECT_TRUE(Matches(ops::greater_equal(ta, tb), DType::kBool, ref::filled({4}, 0.0), kExact));
  }
}

TEST_P(ElementwiseTest, WhereSelectsWithBroadcastingOfAllThreeInputs) {
  struct Case {
    Dims condition, a, b;
  };
  uint32_t seed = 500;
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8}) {
    for (const Case& c :
         {Case{{2, 1, 3}, {4, 1}, {3}}, Case{{}, {2, 3}, {2, 3}}, Case{{2, 3}, {}, {}},
          Case{{3}, {2, 1}, {2, 3}}, Case{{2, 3}, {2, 3}, {}}, Case{{2, 1}, {1, 3}, {1, 3}}}) {
      SCOPED_TRACE(std::string("where(bool") + dims_string(c.condition) + ", " + dtype_name(dtype) +
                   dims_string(c.a) + ", " + dtype_name(dtype) + dims_string(c.b) + ")");
      Array condition = random_ints(c.condition, 0, 1, seed++);
      Array a = random_ints(c.a, 0, 50, seed++);
      Array b = random_ints(c.b, 0, 50, seed++);
      Tensor tc = tensor(condition, DType::kBool), ta = tensor(a, dtype), tb = tensor(b, dtype);
      EXPECT_TRUE(MatchesResultOf([&] { return ops::where(tc, ta, tb); }, dtype,
                                  ref::where(condition, a, b), kExact));
    }
  }
}

TEST_P(ElementwiseTest, ScalarOverloadsTakeTheTensorsDtype) {
  Array x = random_array({2, 3}, -3, 3, 600);
  auto plus = [](double s) { return [s](double v) { return v + s; }; };
  auto times = [](double s) { return [s](double v) { return v * s; }; };
  EXPECT_TRUE(Matches(ops::add(tensor(x), 2.5), DType::kF32, ref::map(x, plus(2.5)), kF32));
  EXPECT_TRUE(Matches(ops::mul(tensor(x), -1.5), DType::kF32, ref::map(x, times(-1.5)), kF32));
  EXPECT_TRUE(
      Matches(ops::add(tensor(x, DType::kF64), 0.1), DType::kF64, ref::map(x, plus(0.1)), kF64));
  Array n = random_ints({5}, -9, 9, 601);
  EXPECT_TRUE(
      Matches(ops::add(tensor(n, DType::kI32), 3.0), DType::kI32, ref::map(n, plus(3)), kExact));
  EXPECT_TRUE(
      Matches(ops::mul(tensor(n, DType::kI64), -2.0), DType::kI64, ref::map(n, times(-2)), kExact));
}

TEST_P(ElementwiseTest, OperatorsAreTheirOps) {
  Array a = random_array({3}, -3, 3, 700), b = random_array({3}, 0.5, 3, 701);
  Tensor ta = tensor(a), tb = tensor(b);
  EXPECT_TRUE(Matches(ta + tb, DType::kF32, ref::binary(a, b, std::plus<>()), kF32));
  EXPECT_TRUE(Matches(ta - tb, DType::kF32, ref::binary(a, b, std::minus<>()), kF32));
  EXPECT_TRUE(Matches(ta * tb, DType::kF32, ref::binary(a, b, std::multiplies<>()), kF32));
  EXPECT_TRUE(Matches(ta / tb, DType::kF32, ref::binary(a, b, std::divides<>()), kF32));
  EXPECT_TRUE(Matches(-ta, DType::kF32, ref::map(a, std::negate<>()), kExact));
}

// =============================================================================================
// Inputs above the kernels' parallel threshold (32768 elements), so the threaded and tiled paths
// run too

TEST_P(ParallelPathTest, ElementwiseOpsOnLargeInputs) {
  Array a = random_array({2, 1, 20000}, -2, 2, 6000);
  Array b = random_array({3, 1}, -2, 2, 6001);
  EXPECT_TRUE(
      Matches(ops::add(tensor(a), tensor(b)), DType::kF32, ref::binary(a, b, std::plus<>()), kF32));
  EXPECT_TRUE(Matches(ops::maximum(tensor(b), tensor(a)), DType::kF32,
                      ref::binary(b, a, [](double x, double y) { return std::max(x, y); }), kF32));
  Array big = random_array({300, 200}, -2, 2, 6002);
  Array row = random_array({200}, -2, 2, 6003);
  EXPECT_TRUE(Matches(ops::greater(tensor(big), tensor(row)), DType::kBool,
                      ref::binary(big, row, [](double x, double y) { return x > y ? 1.0 : 0.0; }),
                      kExact));
  Array mask = ref::map(big, [](double v) { return v > 0 ? 1.0 : 0.0; });
  EXPECT_TRUE(Matches(ops::where(tensor(mask, DType::kBool), tensor(big), tensor(row)), DType::kF32,
                      ref::where(mask, big, row), kExact));
  Array x = random_array({50000}, -5, 5, 6004);
  EXPECT_TRUE(Matches(ops::exp(tensor(x)), DType::kF32,
                      ref::map(x, [](double v) { return std::exp(v); }), kF32));
  EXPECT_TRUE(Matches(ops::cast(tensor(x), DType::kI32), DType::kI32,
                      ref::map(x, [](double v) { return std::trunc(v); }), kExact));
  EXPECT_TRUE(Matches(ops::mul(tensor(x, DType::kF64), 3.0), DType::kF64,
                      ref::map(x, [](double v) { return v * 3.0; }), kF64));
}

}  // namespace
}  // namespace trainyard
