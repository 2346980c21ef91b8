// The forward pass of every op in ops.h, on every test backend ("cpu" and the scrambled-memory
// "opaque" fixture), against the plain reference loops of reference_ops.h: values, output shapes
// and dtypes, broadcasting and zero-element corner cases, views at non-zero byte offsets, the
// documented Philox mapping of the random ops, the optimizer formulas of op.h, the errors
// (op, shapes, dtypes, axes and devices named; nothing aborts) and a bitwise determinism rerun.
//
// A failure names the backend (test parameter), the op and its arguments (SCOPED_TRACE), the
// result tensor and the first differing elements: a one-line repro.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "reference_ops.h"
#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/error.h"
#include "trainyard/random.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

namespace ref = reference;
using ref::Array;
using ref::Dims;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// |actual - expected| <= atol + rtol * |expected| per element.
struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

constexpr Tolerance kExact{0.0, 0.0};
constexpr Tolerance kF32{1e-6, 1e-5};      // one f32 rounding per element
constexpr Tolerance kF32Sum{1e-5, 1e-5};   // f32 sums over a few dozen terms
constexpr Tolerance kF32Conv{1e-4, 1e-4};  // f32 conv / matmul, accumulation order free
constexpr Tolerance kF64{1e-12, 1e-12};

Tolerance tolerance_for(DType dtype, Tolerance f32) { return dtype == DType::kF64 ? kF64 : f32; }

// ---- Host data ----

// Uniform in [low, high), rounded to f32 so that f32 and f64 tensors hold exactly the values
// the reference sees.
std::vector<double> random_values(int64_t n, double low, double high, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<double> distribution(low, high);
  std::vector<double> values(static_cast<std::size_t>(n));
  for (double& v : values) v = static_cast<double>(static_cast<float>(distribution(engine)));
  return values;
}

Array random_array(const Dims& shape, double low, double high, uint32_t seed) {
  return {shape, random_values(ref::count(shape), low, high, seed)};
}

// Whole numbers in [low, high], for integer tensors, indices and ties.
Array random_ints(const Dims& shape, int64_t low, int64_t high, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<int64_t> distribution(low, high);
  Array a = ref::filled(shape, 0.0);
  for (double& v : a.values) v = static_cast<double>(distribution(engine));
  return a;
}

template <class T>
Tensor to_device_as(Backend& backend, const Array& a, DType dtype) {
  std::vector<T> values(a.values.size());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(a.values[i]);
  return Tensor::from_host(backend, Shape(a.shape), dtype, values.data(),
                           values.size() * sizeof(T));
}

Tensor to_device(Backend& backend, const Array& a, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return to_device_as<float>(backend, a, dtype);
    case DType::kF64:
      return to_device_as<double>(backend, a, dtype);
    case DType::kI32:
      return to_device_as<int32_t>(backend, a, dtype);
    case DType::kI64:
      return to_device_as<int64_t>(backend, a, dtype);
    case DType::kU8:
      return to_device_as<uint8_t>(backend, a, dtype);
    case DType::kBF16:
    case DType::kF16:  // the values are bit patterns
      return to_device_as<uint16_t>(backend, a, dtype);
    case DType::kBool: {
      Array bits = ref::map(a, [](double v) { return v != 0.0 ? 1.0 : 0.0; });
      return to_device_as<uint8_t>(backend, bits, dtype);
    }
    default:
      break;
  }
  ADD_FAILURE() << "to_device: unsupported dtype " << dtype_name(dtype);
  return Tensor();
}

template <class T>
std::vector<double> read_as(const Tensor& t) {
  std::vector<T> values(static_cast<std::size_t>(t.num_elements()));
  t.to_host(values.data(), values.size() * sizeof(T));
  return {values.begin(), values.end()};
}

// The tensor's values as doubles (bool as 0 / 1, bf16 and f16 as their bit patterns), read
// through its backend's copies.
Array read(const Tensor& t) {
  Array a{t.shape().to_vector(), {}};
  switch (t.dtype()) {
    case DType::kF32:
      a.values = read_as<float>(t);
      break;
    case DType::kF64:
      a.values = read_as<double>(t);
      break;
    case DType::kI32:
      a.values = read_as<int32_t>(t);
      break;
    case DType::kI64:
      a.values = read_as<int64_t>(t);
      break;
    case DType::kU8:
    case DType::kBool:
      a.values = read_as<uint8_t>(t);
      break;
    case DType::kBF16:
    case DType::kF16:  // bit patterns
      a.values = read_as<uint16_t>(t);
      break;
    default:
      ADD_FAILURE() << "read: unsupported dtype " << dtype_name(t.dtype());
  }
  return a;
}

std::vector<std::byte> bytes_of(const Tensor& t) {
  std::vector<std::byte> bytes(t.size_bytes());
  t.to_host(bytes.data(), bytes.size());
  return bytes;
}

std::string dims_string(const Dims& dims) { return Shape(dims).to_string(); }

// The result has `dtype`, the reference's shape and values within `tolerance`.
::testing::AssertionResult Matches(const Tensor& actual, DType dtype, const Array& expected,
                                   Tolerance tolerance) {
  if (!actual.defined()) return ::testing::AssertionFailure() << "the result is undefined";
  if (actual.dtype() != dtype) {
    return ::testing::AssertionFailure()
           << "dtype: got " << actual.description() << ", expected " << dtype_name(dtype);
  }
  if (actual.shape() != Shape(expected.shape)) {
    return ::testing::AssertionFailure()
           << "shape: got " << actual.description() << ", expected " << dims_string(expected.shape);
  }
  std::string diff = trainyard::testing::compare_close(read(actual).values, expected.values,
                                                       tolerance.atol, tolerance.rtol);
  if (!diff.empty()) {
    return ::testing::AssertionFailure()
           << actual.description() << " differs from the reference "
           << "(atol " << tolerance.atol << ", rtol " << tolerance.rtol << "):\n"
           << diff;
  }
  return ::testing::AssertionSuccess();
}

// Matches() on the result of `op`; an Error thrown by the op fails this check only, so the
// remaining cases of a test still run.
template <class Fn>
::testing::AssertionResult MatchesResultOf(Fn op, DType dtype, const Array& expected,
                                           Tolerance tolerance) {
  Tensor actual;
  try {
    actual = op();
  } catch (const Error& e) {
    return ::testing::AssertionFailure() << "the op threw: " << e.what();
  }
  return Matches(actual, dtype, expected, tolerance);
}

// ---- Errors ----

// The message of the InvalidArgument `fn` throws; another outcome is described instead.
template <class Fn>
std::string invalid_argument_of(Fn fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(not an InvalidArgument) ") + e.what();
  }
  return "(no error)";
}

::testing::AssertionResult Mentions(const std::string& message,
                                    std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << part << "' is missing from: " << message;
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- Fixtures: every suite runs once per backend ----

class OpTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }
  Tensor tensor(const Array& a, DType dtype = DType::kF32) const {
    return to_device(backend(), a, dtype);
  }
  // " on cpu", to find a tensor's description in a message.
  std::string on() const { return " on " + backend().device_name(); }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

#define TRAINYARD_BACKEND_SUITE(Suite)                                                  \
  class Suite : public OpTest {};                                                       \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::ValuesIn(test::backend_names()), \
                           backend_test_name)

TRAINYARD_BACKEND_SUITE(CreationTest);
TRAINYARD_BACKEND_SUITE(ElementwiseTest);
TRAINYARD_BACKEND_SUITE(ReductionTest);
TRAINYARD_BACKEND_SUITE(LinearAlgebraTest);
TRAINYARD_BACKEND_SUITE(ConvolutionTest);
TRAINYARD_BACKEND_SUITE(PoolingTest);
TRAINYARD_BACKEND_SUITE(NormalizationTest);
TRAINYARD_BACKEND_SUITE(DataMovementTest);
TRAINYARD_BACKEND_SUITE(ViewTest);
TRAINYARD_BACKEND_SUITE(RandomTest);
TRAINYARD_BACKEND_SUITE(OptimizerTest);
TRAINYARD_BACKEND_SUITE(ErrorTest);
TRAINYARD_BACKEND_SUITE(ParallelPathTest);
TRAINYARD_BACKEND_SUITE(DeterminismTest);

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

TEST_P(ElementwiseTest, CastConvertsEveryInterestingPair) {
  Array floats{{8}, {-2.7, -0.5, 0.5, 2.7, 3.0, -3.0, 0.0, 0.1}};
  auto truncate = [](double v) { return std::trunc(v); };
  auto to_f32 = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  auto to_bool = [](double v) { return v != 0.0 ? 1.0 : 0.0; };
  struct Case {
    DType from, to;
    Array input;
    std::function<double(double)> expected;
  };
  Array ints{{5}, {-7, 0, 3, 100, -1}};
  Array bools{{4}, {1, 0, 0, 1}};
  std::vector<Case> cases = {
      {DType::kF32, DType::kI32, floats, truncate},
      {DType::kF32, DType::kI64, floats, truncate},
      {DType::kF64, DType::kI32, floats, truncate},
      {DType::kF64, DType::kI64, floats, truncate},
      {DType::kF32, DType::kF64, floats, to_f32},
      {DType::kF64, DType::kF32, floats, to_f32},
      {DType::kI32, DType::kF32, ints, to_f32},
      {DType::kI64, DType::kF64, ints, to_f32},
      {DType::kI32, DType::kI64, ints, to_f32},
      {DType::kI64, DType::kI32, ints, to_f32},
      {DType::kF32, DType::kBool, floats, to_bool},
      {DType::kF64, DType::kBool, floats, to_bool},
      {DType::kI32, DType::kBool, ints, to_bool},
      {DType::kI64, DType::kBool, ints, to_bool},
      {DType::kBool, DType::kF32, bools, to_f32},
      {DType::kBool, DType::kI32, bools, to_f32},
      {DType::kBool, DType::kI64, bools, to_f32},
      {DType::kU8, DType::kF32, Array{{3}, {0, 7, 255}}, to_f32},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string("cast ") + dtype_name(c.from) + " -> " + dtype_name(c.to));
    // The input as stored in `from` (f32 rounds 0.1) is what the cast sees.
    Array stored = read(tensor(c.input, c.from));
    EXPECT_TRUE(Matches(ops::cast(tensor(c.input, c.from), c.to), c.to,
                        ref::map(stored, c.expected), kExact));
  }
}

TEST_P(ElementwiseTest, CastOfNegativeZeroAndNaNToBoolFollowsNotEqualZero) {
  Array x{{3}, {-0.0, kNaN, -kInf}};
  EXPECT_TRUE(
      Matches(ops::cast(tensor(x), DType::kBool), DType::kBool, Array{{3}, {0, 1, 1}}, kExact));
}

TEST_P(ElementwiseTest, CastToTheSameDtypeKeepsTheValues) {
  Array x = random_array({2, 2}, -1, 1, 800);
  EXPECT_TRUE(Matches(ops::cast(tensor(x), DType::kF32), DType::kF32, x, kExact));
}

TEST_P(ElementwiseTest, SigmoidCrossEntropyMatchesAndStaysFiniteForLargeLogits) {
  Array labels = random_array({2, 5}, 0, 1, 900);
  Array logits = random_array({2, 5}, -4, 4, 901);
  const std::vector<double> large = {-1e4, -100, 0, 100, 1e4, -30};
  std::copy(large.begin(), large.end(), logits.values.begin());
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor loss =
        ops::sigmoid_cross_entropy_with_logits(tensor(labels, dtype), tensor(logits, dtype));
    EXPECT_TRUE(Matches(loss, dtype, ref::sigmoid_cross_entropy(labels, logits),
                        tolerance_for(dtype, kF32)));
    for (double v : read(loss).values) EXPECT_TRUE(std::isfinite(v)) << v;
  }
}

// The fused loss and norms against plain loops (the opaque backend has no fused kernels and
// runs the composed ops, so both paths are checked).
TEST_P(ElementwiseTest, BinaryCrossEntropySumsTheOriginalsTermsPerExample) {
  Array p = random_array({3, 7}, 0.001, 0.999, 910);
  Array y = random_array({3, 7}, 0, 1, 911);
  p.values[0] = 0.0;  // log(eps) and log(1 + eps)
  p.values[1] = 1.0;
  y.values[2] = 1.0;
  y.values[3] = 0.0;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Array expected{{3}, {}};
    for (int r = 0; r < 3; ++r) {
      double sum = 0;
      for (int c = 0; c < 7; ++c) {
        double pv = p.values[r * 7 + c], yv = y.values[r * 7 + c];
        sum -= yv * std::log(pv + 1e-5) + (1 - yv) * std::log(1 - pv + 1e-5);
      }
      expected.values.push_back(sum);
    }
    Tensor loss = ops::binary_cross_entropy(tensor(p, dtype), tensor(y, dtype), 1e-5);
    EXPECT_TRUE(Matches(loss, dtype, expected, tolerance_for(dtype, kF32)));
  }
  // Probabilities outside [0, 1] give what std::log gives: NaN, not a wrong finite number.
  Array bad = p;
  bad.values[5] = 1.5;
  std::vector<double> out = read(ops::binary_cross_entropy(tensor(bad), tensor(y), 1e-5)).values;
  EXPECT_TRUE(std::isnan(out[0])) << out[0];
  EXPECT_TRUE(std::isfinite(out[1]));
}

TEST_P(ElementwiseTest, BinaryCrossEntropyOfAWideBatchMatchesTheComposedOps) {
  // Wide enough for the vectorized, multi-threaded path.
  Array p = random_array({64, 3862}, 0.0, 1.0, 912);
  Array y = random_array({64, 3862}, 0.0, 1.0, 913);
  for (double& v : y.values) v = v > 0.99 ? 1.0 : 0.0;
  Tensor tp = tensor(p), ty = tensor(y);
  Tensor fused = ops::binary_cross_entropy(tp, ty, 1e-5);
  Tensor positive = ops::mul(ty, ops::log(ops::add(tp, 1e-5)));
  Tensor negative =
      ops::mul(ops::add(ops::neg(ty), 1.0), ops::log(ops::add(ops::add(ops::neg(tp), 1.0), 1e-5)));
  Tensor composed = ops::reduce_sum(ops::neg(ops::add(positive, negative)), {-1});
  EXPECT_TRUE(Matches(fused, DType::kF32, read(composed), Tolerance{1e-5, 1e-4}));
}

TEST_P(ElementwiseTest, L2LossAndClipByNormFollowTensorFlow) {
  Array x = random_array({5, 300}, -1, 1, 914);
  double sum_sq = 0;
  for (double v : x.values) sum_sq += v * v;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(Matches(ops::l2_loss(tensor(x, dtype)), dtype, Array{{}, {sum_sq / 2}},
                        tolerance_for(dtype, kF32)));
    for (double clip : {0.5, 1e3}) {
      SCOPED_TRACE(clip);
      double scale = clip / std::max(std::sqrt(sum_sq), clip);
      Array expected = x;
      for (double& v : expected.values) v *= scale;
      NoGradScope no_grad;
      EXPECT_TRUE(Matches(ops::clip_by_norm(tensor(x, dtype), clip), dtype, expected,
                          tolerance_for(dtype, kF32)));
    }
  }
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::clip_by_norm(tensor(x), 0.0); }),
                       {"clip_by_norm", "positive"}));
}

// =============================================================================================
// Reductions

struct ReduceCase {
  std::string name;
  std::function<Tensor(const Tensor&, std::vector<int64_t>, bool)> op;
  ref::Reduction kind;
};

std::vector<ReduceCase> reduce_cases() {
  return {
      {"reduce_sum",
       [](const Tensor& x, std::vector<int64_t> a, bool k) { return ops::reduce_sum(x, a, k); },
       ref::Reduction::kSum},
      {"reduce_mean",
       [](const Tensor& x, std::vector<int64_t> a, bool k) { return ops::reduce_mean(x, a, k); },
       ref::Reduction::kMean},
      {"reduce_max",
       [](const Tensor& x, std::vector<int64_t> a, bool k) { return ops::reduce_max(x, a, k); },
       ref::Reduction::kMax},
      {"reduce_min",
       [](const Tensor& x, std::vector<int64_t> a, bool k) { return ops::reduce_min(x, a, k); },
       ref::Reduction::kMin},
      {"reduce_logsumexp",
       [](const Tensor& x, std::vector<int64_t> a, bool k) {
         return ops::reduce_logsumexp(x, a, k);
       },
       ref::Reduction::kLogSumExp},
  };
}

TEST_P(ReductionTest, SingleSeveralAllAndNegativeAxesWithAndWithoutKeepdims) {
  const std::vector<Dims> axes_sets = {{},     {0},      {1},    {2},       {-1},
                                       {0, 2}, {-3, -1}, {1, 2}, {0, 1, 2}, {2, 0}};
  Array x = random_array({2, 3, 4}, -3, 3, 1000);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (const ReduceCase& c : reduce_cases()) {
      for (const Dims& axes : axes_sets) {
        for (bool keepdims : {false, true}) {
          SCOPED_TRACE(c.name + "(" + dtype_name(dtype) + "[2, 3, 4], axes " + dims_string(axes) +
                       ", keepdims " + (keepdims ? "true" : "false") + ")");
          EXPECT_TRUE(Matches(c.op(tensor(x, dtype), axes, keepdims), dtype,
                              ref::reduce(x, axes, keepdims, c.kind),
                              tolerance_for(dtype, kF32Sum)));
        }
      }
    }
  }
}

TEST_P(ReductionTest, NonAdjacentAxesOfARank4Input) {
  Array x = random_array({2, 3, 4, 5}, -3, 3, 1050);
  for (const ReduceCase& c : reduce_cases()) {
    for (const Dims& axes : {Dims{1, 3}, Dims{0, 2}, Dims{0, 3}, Dims{-4, -2, -1}}) {
      for (bool keepdims : {false, true}) {
        SCOPED_TRACE(c.name + "(f32[2, 3, 4, 5], axes " + dims_string(axes) + ", keepdims " +
                     (keepdims ? "true" : "false") + ")");
        EXPECT_TRUE(Matches(c.op(tensor(x), axes, keepdims), DType::kF32,
                            ref::reduce(x, axes, keepdims, c.kind), kF32Sum));
      }
    }
  }
}

TEST_P(ReductionTest, ZeroElementReductionsGiveTheIdentityOfOpH) {
  // Sum 0, mean NaN, max -inf, min +inf, logsumexp -inf.
  Array empty_rows = ref::filled({0, 3}, 0.0);
  Array empty_cols = ref::filled({2, 0}, 0.0);
  for (const ReduceCase& c : reduce_cases()) {
    SCOPED_TRACE(c.name);
    for (const auto& [x, axes, keepdims] :
         std::vector<std::tuple<Array, Dims, bool>>{{empty_rows, {0}, false},
                                                    {empty_rows, {0}, true},
                                                    {empty_rows, {}, false},
                                                    {empty_rows, {1}, false},
                                                    {empty_cols, {1}, false},
                                                    {empty_cols, {-1}, true}}) {
      SCOPED_TRACE("x " + dims_string(x.shape) + ", axes " + dims_string(axes));
      EXPECT_TRUE(Matches(c.op(tensor(x), axes, keepdims), DType::kF32,
                          ref::reduce(x, axes, keepdims, c.kind), kExact));
    }
  }
  // Spelled out, independent of the reference.
  Tensor x = tensor(empty_rows);
  EXPECT_TRUE(Matches(ops::reduce_sum(x, {0}), DType::kF32, Array{{3}, {0, 0, 0}}, kExact));
  EXPECT_TRUE(
      Matches(ops::reduce_mean(x, {0}), DType::kF32, Array{{3}, {kNaN, kNaN, kNaN}}, kExact));
  EXPECT_TRUE(
      Matches(ops::reduce_max(x, {0}), DType::kF32, Array{{3}, {-kInf, -kInf, -kInf}}, kExact));
  EXPECT_TRUE(
      Matches(ops::reduce_min(x, {0}), DType::kF32, Array{{3}, {kInf, kInf, kInf}}, kExact));
  EXPECT_TRUE(Matches(ops::reduce_logsumexp(x, {0}), DType::kF32, Array{{3}, {-kInf, -kInf, -kInf}},
                      kExact));
}

TEST_P(ReductionTest, ReducingAScalarGivesItsValue) {
  Array s{{}, {3.5}};
  for (const ReduceCase& c : reduce_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(
        Matches(c.op(tensor(s), {}, false), DType::kF32, ref::reduce(s, {}, false, c.kind), kF32));
    EXPECT_TRUE(
        Matches(c.op(tensor(s), {}, true), DType::kF32, ref::reduce(s, {}, true, c.kind), kF32));
  }
}

TEST_P(ReductionTest, ReduceSumOfIntegersIsExactInTheirDtype) {
  Array x = random_ints({3, 4}, -100, 100, 1100);
  for (DType dtype : {DType::kI32, DType::kI64}) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(Matches(ops::reduce_sum(tensor(x, dtype), {1}), dtype,
                        ref::reduce(x, {1}, false, ref::Reduction::kSum), kExact));
    EXPECT_TRUE(Matches(ops::reduce_sum(tensor(x, dtype)), dtype,
                        ref::reduce(x, {}, false, ref::Reduction::kSum), kExact));
  }
}

TEST_P(ReductionTest, LogSumExpIsStableForLargeValues) {
  Array x{{2, 3}, {1000, 999, 998, -1000, -1001, -1002}};
  EXPECT_TRUE(Matches(ops::reduce_logsumexp(tensor(x), {1}), DType::kF32,
                      ref::reduce(x, {1}, false, ref::Reduction::kLogSumExp), kF32));
}

TEST_P(ReductionTest, ArgmaxReturnsTheFirstMaximumAsI64) {
  Array x{{3, 4},
          {1, 3, 3, 0,  //
           2, 2, 2, 2,  //
           -1, -5, -1, -7}};
  EXPECT_TRUE(Matches(ops::argmax(tensor(x), 1), DType::kI64, Array{{3}, {1, 0, 0}}, kExact));
  EXPECT_TRUE(Matches(ops::argmax(tensor(x), -1), DType::kI64, Array{{3}, {1, 0, 0}}, kExact));
  EXPECT_TRUE(Matches(ops::argmax(tensor(x), 0), DType::kI64, Array{{4}, {1, 0, 0, 1}}, kExact));
  EXPECT_TRUE(
      Matches(ops::argmax(tensor(x, DType::kI32), 1), DType::kI64, Array{{3}, {1, 0, 0}}, kExact));
  Array y = random_ints({2, 5, 3}, -2, 2, 1200);  // many ties
  for (int64_t axis : {0, 1, 2, -2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    EXPECT_TRUE(Matches(ops::argmax(tensor(y, DType::kF64), axis), DType::kI64,
                        ref::argmax(y, axis), kExact));
  }
}

TEST_P(ReductionTest, SoftmaxAndLogSoftmaxAlongTheFirstAndLastAxis) {
  Array x = random_array({3, 4}, -5, 5, 1300);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (int64_t axis : {0, -1, 1, -2}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " axis " + std::to_string(axis));
      EXPECT_TRUE(Matches(ops::softmax(tensor(x, dtype), axis), dtype, ref::softmax(x, axis, false),
                          tolerance_for(dtype, kF32)));
      EXPECT_TRUE(Matches(ops::log_softmax(tensor(x, dtype), axis), dtype,
                          ref::softmax(x, axis, true), tolerance_for(dtype, kF32Sum)));
    }
  }
  Array y = random_array({2, 3, 4}, -5, 5, 1301);
  EXPECT_TRUE(Matches(ops::softmax(tensor(y)), DType::kF32, ref::softmax(y, -1, false), kF32));
  EXPECT_TRUE(Matches(ops::softmax(tensor(y), 1), DType::kF32, ref::softmax(y, 1, false), kF32));
}

// Narrow rows (MoeModel's gates over mixtures + 1) take a vectorized path on cpu: every width,
// many rows, logits far apart, and rows with NaN, infinities and -1e30.
TEST_P(ReductionTest, SoftmaxOfManyNarrowRowsMatchesTheReference) {
  for (int64_t n : {2, 3, 4, 5, 6, 8}) {
    SCOPED_TRACE("width " + std::to_string(n));
    Array x = random_array({5000, n}, -60, 60, 1302 + static_cast<uint32_t>(n));
    x.values[0] = -1e30;
    x.values[static_cast<std::size_t>(n)] = -std::numeric_limits<double>::infinity();
    EXPECT_TRUE(Matches(ops::softmax(tensor(x), -1), DType::kF32, ref::softmax(x, -1, false),
                        Tolerance{1e-7, 1e-6}));
    Array special = x;
    special.values[2 * static_cast<std::size_t>(n)] = std::numeric_limits<double>::quiet_NaN();
    special.values[3 * static_cast<std::size_t>(n)] = std::numeric_limits<double>::infinity();
    std::vector<double> got = read(ops::softmax(tensor(special), -1)).values;
    EXPECT_TRUE(std::isnan(got[2 * static_cast<std::size_t>(n)]));
    EXPECT_TRUE(std::isnan(got[3 * static_cast<std::size_t>(n)]));  // inf - inf, as TF gives
    EXPECT_NEAR(got[4 * static_cast<std::size_t>(n)], ref::softmax(x, -1, false).values[4 * n],
                1e-6);
  }
}

TEST_P(ReductionTest, SoftmaxIsStableForLargeLogits) {
  Array x{{2, 4}, {1000, 999, 998, -1000, -1000, -1001, -1e4, -1000}};
  EXPECT_TRUE(Matches(ops::softmax(tensor(x), -1), DType::kF32, ref::softmax(x, -1, false), kF32));
  EXPECT_TRUE(
      Matches(ops::log_softmax(tensor(x), -1), DType::kF32, ref::softmax(x, -1, true), kF32Sum));
}

// =============================================================================================
// Linear algebra

TEST_P(LinearAlgebraTest, MatmulAllFourTransposeCombinations) {
  const int64_t m = 3, k = 4, n = 5;
  uint32_t seed = 1400;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(std::string("matmul ") + dtype_name(dtype) + " transpose_a " +
                     (ta ? "true" : "false") + " transpose_b " + (tb ? "true" : "false"));
        Array a = random_array(ta ? Dims{k, m} : Dims{m, k}, -2, 2, seed++);
        Array b = random_array(tb ? Dims{n, k} : Dims{k, n}, -2, 2, seed++);
        EXPECT_TRUE(Matches(ops::matmul(tensor(a, dtype), tensor(b, dtype), ta, tb), dtype,
                            ref::matmul(a, b, ta, tb), tolerance_for(dtype, kF32Conv)));
      }
    }
  }
}

TEST_P(LinearAlgebraTest, MatmulBatchedOverEqualBatchDims) {
  uint32_t seed = 1500;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("transpose_a ") + (ta ? "true" : "false") + " transpose_b " +
                   (tb ? "true" : "false"));
      Array a = random_array(ta ? Dims{2, 4, 3} : Dims{2, 3, 4}, -2, 2, seed++);
      Array b = random_array(tb ? Dims{2, 5, 4} : Dims{2, 4, 5}, -2, 2, seed++);
      EXPECT_TRUE(Matches(ops::matmul(tensor(a), tensor(b), ta, tb), DType::kF32,
                          ref::matmul(a, b, ta, tb), kF32Conv));
    }
  }
  Array a = random_array({2, 3, 2, 4}, -2, 2, seed++);
  Array b = random_array({2, 3, 4, 3}, -2, 2, seed++);
  EXPECT_TRUE(Matches(ops::matmul(tensor(a, DType::kF64), tensor(b, DType::kF64)), DType::kF64,
                      ref::matmul(a, b, false, false), kF64));
}

TEST_P(LinearAlgebraTest, MatmulSharesARank2BAcrossEveryBatch) {
  uint32_t seed = 1600;
  for (bool tb : {false, true}) {
    SCOPED_TRACE(std::string("transpose_b ") + (tb ? "true" : "false"));
    Array a = random_array({2, 3, 4}, -2, 2, seed++);
    Array b = random_array(tb ? Dims{5, 4} : Dims{4, 5}, -2, 2, seed++);
    EXPECT_TRUE(Matches(ops::matmul(tensor(a), tensor(b), false, tb), DType::kF32,
                        ref::matmul(a, b, false, tb), kF32Conv));
  }
  Array a = random_array({2, 2, 4, 3}, -2, 2, seed++);
  Array b = random_array({4, 5}, -2, 2, seed++);
  EXPECT_TRUE(Matches(ops::matmul(tensor(a), tensor(b), true, false), DType::kF32,
                      ref::matmul(a, b, true, false), kF32Conv));
}

TEST_P(LinearAlgebraTest, MatmulSharesARank2AAcrossEveryBatchOfB) {
  uint32_t seed = 1650;
  for (bool ta : {false, true}) {
    SCOPED_TRACE(std::string("transpose_a ") + (ta ? "true" : "false"));
    Array a = random_array(ta ? Dims{4, 3} : Dims{3, 4}, -2, 2, seed++);
    Array b = random_array({2, 4, 5}, -2, 2, seed++);
    Tensor y = ops::matmul(tensor(a), tensor(b), ta, false);
    EXPECT_EQ(y.shape(), (Shape{2, 3, 5}));
    EXPECT_TRUE(Matches(y, DType::kF32, ref::matmul(a, b, ta, false), kF32Conv));
  }
  Array a = random_array({3, 4}, -2, 2, seed++);
  Array b = random_array({2, 2, 5, 4}, -2, 2, seed++);
  EXPECT_TRUE(Matches(ops::matmul(tensor(a, DType::kF64), tensor(b, DType::kF64), false, true),
                      DType::kF64, ref::matmul(a, b, false, true), kF64));
}

TEST_P(LinearAlgebraTest, MatmulDegenerateDimensions) {
  struct Case {
    Dims a, b;
  };
  uint32_t seed = 1680;
  for (const Case& c : {Case{{1, 4}, {4, 1}}, Case{{3, 1}, {1, 5}}, Case{{2, 0}, {0, 3}},
                        Case{{0, 4}, {4, 3}}, Case{{2, 4}, {4, 0}}, Case{{0, 2, 3}, {0, 3, 2}}}) {
    SCOPED_TRACE("matmul(f32" + dims_string(c.a) + ", f32" + dims_string(c.b) + ")");
    Array a = random_array(c.a, -2, 2, seed++);
    Array b = random_array(c.b, -2, 2, seed++);
    Tensor ta = tensor(a), tb = tensor(b);
    EXPECT_TRUE(MatchesResultOf([&] { return ops::matmul(ta, tb); }, DType::kF32,
                                ref::matmul(a, b, false, false), kF32Conv));
  }
}

TEST_P(LinearAlgebraTest, MatmulBiasActAppliesEachActivation) {
  struct Case {
    Activation activation;
    ref::Act reference;
    const char* name;
  };
  Array x = random_array({3, 4}, -2, 2, 1700);
  Array w = random_array({4, 5}, -1, 1, 1701);
  Array bias = random_array({5}, -1, 1, 1702);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (const Case& c : {Case{Activation::kNone, ref::Act::kNone, "none"},
                          Case{Activation::kRelu, ref::Act::kRelu, "relu"},
                          Case{Activation::kSigmoid, ref::Act::kSigmoid, "sigmoid"},
                          Case{Activation::kTanh, ref::Act::kTanh, "tanh"}}) {
      SCOPED_TRACE(std::string("matmul_bias_act ") + c.name + " " + dtype_name(dtype));
      EXPECT_TRUE(Matches(ops::matmul_bias_act(tensor(x, dtype), tensor(w, dtype),
                                               tensor(bias, dtype), c.activation),
                          dtype, ref::matmul_bias_act(x, w, bias, c.reference),
                          tolerance_for(dtype, kF32Conv)));
    }
  }
}

// =============================================================================================
// Convolution

TEST_P(ConvolutionTest, Conv2DValidStrideOne) {
  Array input = random_array({2, 5, 5, 3}, -1, 1, 1800);
  Array filter = random_array({3, 3, 3, 4}, -1, 1, 1801);
  EXPECT_TRUE(Matches(ops::conv2d(tensor(input), tensor(filter)), DType::kF32,
                      ref::conv2d(input, filter, ref::Window{}), kF32Conv));
  EXPECT_TRUE(Matches(ops::conv2d(tensor(input, DType::kF64), tensor(filter, DType::kF64)),
                      DType::kF64, ref::conv2d(input, filter, ref::Window{}), kF64));
}

TEST_P(ConvolutionTest, Conv2DSameWithStrideTwoPadsTheOddRowAtTheBottom) {
  // H = 6, k = 3, stride 2: out 3, one row of padding, all of it after (bottom); W = 5: one
  // column each side.
  ASSERT_EQ(ref::same_padding(6, 3, 2, 1), (std::pair<int64_t, int64_t>{0, 1}));
  ASSERT_EQ(ref::same_padding(5, 3, 2, 1), (std::pair<int64_t, int64_t>{1, 1}));
  Array input = random_array({1, 6, 5, 2}, -1, 1, 1900);
  Array filter = random_array({3, 3, 2, 3}, -1, 1, 1901);
  Tensor y = ops::conv2d(tensor(input), tensor(filter), {2, 2}, Padding2D::same());
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 3}));
  EXPECT_TRUE(Matches(y, DType::kF32,
                      ref::conv2d(input, filter, ref::same_window(6, 5, 3, 3, 2, 2)), kF32Conv));
  // A 4x4 filter on 6x6 with stride 2: total padding 2 per side pair, 1 and 1.
  Array filter4 = random_array({4, 4, 2, 2}, -1, 1, 1902);
  Array square = random_array({2, 6, 6, 2}, -1, 1, 1903);
  EXPECT_TRUE(Matches(ops::conv2d(tensor(square), tensor(filter4), {2, 2}, Padding2D::same()),
                      DType::kF32, ref::conv2d(square, filter4, ref::same_window(6, 6, 4, 4, 2, 2)),
                      kF32Conv));
}

TEST_P(ConvolutionTest, Conv2DExplicitPadsAndUnequalStrides) {
  Array input = random_array({1, 5, 6, 2}, -1, 1, 2000);
  Array filter = random_array({3, 2, 2, 3}, -1, 1, 2001);
  ref::Window win;
  win.stride_w = 2;
  win.pad_top = 1;
  win.pad_bottom = 0;
  win.pad_left = 2;
  win.pad_right = 1;
  EXPECT_TRUE(Matches(
      ops::conv2d(tensor(input), tensor(filter), {1, 2}, Padding2D::explicit_pads(1, 0, 2, 1)),
      DType::kF32, ref::conv2d(input, filter, win), kF32Conv));
}

TEST_P(ConvolutionTest, Conv2DDilationTwo) {
  Array input = random_array({1, 7, 8, 2}, -1, 1, 2100);
  Array filter = random_array({3, 3, 2, 3}, -1, 1, 2101);
  ref::Window valid;
  valid.dilation_h = valid.dilation_w = 2;
  Tensor y = ops::conv2d(tensor(input), tensor(filter), {1, 1}, Padding2D::valid(), {2, 2});
  EXPECT_EQ(y.shape(), (Shape{1, 3, 4, 3}));
  EXPECT_TRUE(Matches(y, DType::kF32, ref::conv2d(input, filter, valid), kF32Conv));
  EXPECT_TRUE(Matches(
      ops::conv2d(tensor(input), tensor(filter), {1, 1}, Padding2D::same(), {2, 2}), DType::kF32,
      ref::conv2d(input, filter, ref::same_window(7, 8, 3, 3, 1, 1, 2, 2)), kF32Conv));
}

TEST_P(ConvolutionTest, Conv2DGroupsTwoSplitsChannels) {
  Array input = random_array({2, 5, 5, 4}, -1, 1, 2200);
  Array filter = random_array({3, 3, 2, 6}, -1, 1, 2201);
  EXPECT_TRUE(Matches(
      ops::conv2d(tensor(input), tensor(filter), {1, 1}, Padding2D::same(), {1, 1}, 2), DType::kF32,
      ref::conv2d(input, filter, ref::same_window(5, 5, 3, 3, 1, 1), 2), kF32Conv));
  EXPECT_TRUE(Matches(ops::conv2d(tensor(input, DType::kF64), tensor(filter, DType::kF64), {2, 1},
                                  Padding2D::valid(), {1, 1}, 2),
                      DType::kF64, ref::conv2d(input, filter, ref::Window{2, 1}, 2), kF64));
}

TEST_P(ConvolutionTest, Conv2DCombinesGroupsStrideDilationAndSamePadding) {
  Array input = random_array({2, 9, 8, 6}, -1, 1, 2250);
  Array filter = random_array({3, 2, 2, 9}, -1, 1, 2251);
  EXPECT_TRUE(Matches(
      ops::conv2d(tensor(input), tensor(filter), {2, 3}, Padding2D::same(), {2, 2}, 3), DType::kF32,
      ref::conv2d(input, filter, ref::same_window(9, 8, 3, 2, 2, 3, 2, 2), 3), kF32Conv));
  // A 1x1 convolution is a matmul over channels.
  Array pointwise = random_array({1, 1, 6, 4}, -1, 1, 2252);
  EXPECT_TRUE(Matches(ops::conv2d(tensor(input), tensor(pointwise)), DType::kF32,
                      ref::conv2d(input, pointwise, ref::Window{}), kF32Conv));
}

TEST_P(ConvolutionTest, DepthwiseConv2DTakesTensorFlowsFilterLayout) {
  Array input = random_array({1, 5, 6, 3}, -1, 1, 2300);
  Array filter = random_array({3, 3, 3, 2}, -1, 1, 2301);
  Tensor valid = ops::depthwise_conv2d(tensor(input), tensor(filter));
  EXPECT_EQ(valid.shape(), (Shape{1, 3, 4, 6}));
  EXPECT_TRUE(
      Matches(valid, DType::kF32, ref::depthwise_conv2d(input, filter, ref::Window{}), kF32Conv));
  EXPECT_TRUE(Matches(
      ops::depthwise_conv2d(tensor(input), tensor(filter), {2, 2}, Padding2D::same()), DType::kF32,
      ref::depthwise_conv2d(input, filter, ref::same_window(5, 6, 3, 3, 2, 2)), kF32Conv));
  ref::Window dilated;
  dilated.dilation_h = dilated.dilation_w = 2;
  EXPECT_TRUE(Matches(ops::depthwise_conv2d(tensor(input, DType::kF64), tensor(filter, DType::kF64),
                                            {1, 1}, Padding2D::valid(), {2, 2}),
                      DType::kF64, ref::depthwise_conv2d(input, filter, dilated), kF64));
}

// =============================================================================================
// Pooling

TEST_P(PoolingTest, MaxPoolValid) {
  Array input = random_array({2, 4, 6, 3}, -2, 2, 2400);
  ref::Window win{2, 2};
  EXPECT_TRUE(Matches(ops::max_pool2d(tensor(input), {2, 2}, {2, 2}), DType::kF32,
                      ref::pool2d(input, 2, 2, win, false), kExact));
  ref::Window overlapping{1, 2};
  EXPECT_TRUE(Matches(ops::max_pool2d(tensor(input, DType::kF64), {3, 2}, {1, 2}), DType::kF64,
                      ref::pool2d(input, 3, 2, overlapping, false), kExact));
}

TEST_P(PoolingTest, MaxPoolSameNeverPicksThePadding) {
  // All inputs negative: a zero from the padding would win any window that touches it.
  Array input = random_array({1, 5, 6, 2}, -5, -1, 2500);
  Tensor y = ops::max_pool2d(tensor(input), {3, 3}, {2, 2}, Padding2D::same());
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 2}));
  EXPECT_TRUE(Matches(y, DType::kF32,
                      ref::pool2d(input, 3, 3, ref::same_window(5, 6, 3, 3, 2, 2), false), kExact));
  for (double v : read(y).values) EXPECT_LT(v, 0.0);
  ref::Window pads{1, 1};
  pads.pad_top = 1;
  pads.pad_left = 2;
  pads.pad_right = 1;
  EXPECT_TRUE(
      Matches(ops::max_pool2d(tensor(input), {2, 3}, {1, 1}, Padding2D::explicit_pads(1, 0, 2, 1)),
              DType::kF32, ref::pool2d(input, 2, 3, pads, false), kExact));
}

TEST_P(PoolingTest, WindowsLargerThanTheInputUnderSamePadding) {
  Array input = random_array({1, 2, 2, 3}, -2, 2, 2550);
  ref::Window same = ref::same_window(2, 2, 3, 3, 1, 1);
  EXPECT_TRUE(Matches(ops::max_pool2d(tensor(input), {3, 3}, {1, 1}, Padding2D::same()),
                      DType::kF32, ref::pool2d(input, 3, 3, same, false), kExact));
  EXPECT_TRUE(Matches(ops::avg_pool2d(tensor(input), {3, 3}, {1, 1}, Padding2D::same()),
                      DType::kF32, ref::pool2d(input, 3, 3, same, true), kF32));
}

TEST_P(PoolingTest, AvgPoolExplicitPaddingIsLeftOutOfTheAverage) {
  Array input = random_array({1, 4, 5, 2}, -2, 2, 2560);
  ref::Window pads{2, 2};
  pads.pad_top = 1;
  pads.pad_bottom = 1;
  pads.pad_left = 0;
  pads.pad_right = 1;
  EXPECT_TRUE(
      Matches(ops::avg_pool2d(tensor(input), {2, 2}, {2, 2}, Padding2D::explicit_pads(1, 1, 0, 1)),
              DType::kF32, ref::pool2d(input, 2, 2, pads, true), kF32));
}

TEST_P(PoolingTest, AvgPoolValid) {
  Array input = random_array({2, 4, 6, 3}, -2, 2, 2600);
  EXPECT_TRUE(Matches(ops::avg_pool2d(tensor(input), {3, 2}, {1, 2}), DType::kF32,
                      ref::pool2d(input, 3, 2, ref::Window{1, 2}, true), kF32));
}

TEST_P(PoolingTest, AvgPoolSameLeavesThePaddingOutOfTheAverage) {
  // Ones average to one everywhere, edges included, only if the padding is not counted.
  Tensor ones = ops::ones(backend(), Shape{1, 5, 5, 1});
  EXPECT_TRUE(Matches(ops::avg_pool2d(ones, {3, 3}, {2, 2}, Padding2D::same()), DType::kF32,
                      ref::filled({1, 3, 3, 1}, 1.0), kF32));
  Array input = random_array({2, 5, 6, 2}, -2, 2, 2700);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(Matches(ops::avg_pool2d(tensor(input, dtype), {3, 3}, {2, 2}, Padding2D::same()),
                        dtype, ref::pool2d(input, 3, 3, ref::same_window(5, 6, 3, 3, 2, 2), true),
                        tolerance_for(dtype, kF32)));
  }
}

// =============================================================================================
// Normalization

TEST_P(NormalizationTest, BatchNormTrainingNormalizesOverAllButTheLastAxis) {
  Array x = random_array({2, 3, 2, 4}, -2, 3, 2800);
  Array gamma = random_array({4}, 0.5, 1.5, 2801);
  Array beta = random_array({4}, -1, 1, 2802);
  ref::BatchNorm expected = ref::batch_norm_training(x, gamma, beta, 1e-3);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tolerance tol = tolerance_for(dtype, {1e-5, 1e-4});
    ops::BatchNormResult r =
        ops::batch_norm_training(tensor(x, dtype), tensor(gamma, dtype), tensor(beta, dtype));
    EXPECT_TRUE(Matches(r.y, dtype, expected.y, tol));
    EXPECT_TRUE(Matches(r.batch_mean, dtype, expected.mean, tol));
    EXPECT_TRUE(Matches(r.batch_variance, dtype, expected.variance, tol)) << "biased variance";
  }
  // A larger epsilon is used as given.
  ref::BatchNorm loose = ref::batch_norm_training(x, gamma, beta, 0.5);
  EXPECT_TRUE(Matches(ops::batch_norm_training(tensor(x), tensor(gamma), tensor(beta), 0.5).y,
                      DType::kF32, loose.y, {1e-5, 1e-4}));
}

TEST_P(NormalizationTest, BatchNormInferenceUsesTheGivenStatistics) {
  Array x = random_array({5, 3}, -2, 2, 2900);
  Array gamma = random_array({3}, 0.5, 1.5, 2901);
  Array beta = random_array({3}, -1, 1, 2902);
  Array mean = random_array({3}, -0.5, 0.5, 2903);
  Array variance = random_array({3}, 0.2, 2, 2904);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(Matches(
        ops::batch_norm_inference(tensor(x, dtype), tensor(gamma, dtype), tensor(beta, dtype),
                                  tensor(mean, dtype), tensor(variance, dtype), 1e-2),
        dtype, ref::batch_norm_inference(x, gamma, beta, mean, variance, 1e-2),
        tolerance_for(dtype, kF32Sum)));
  }
}

TEST_P(NormalizationTest, AssignMovingAverageUpdatesInPlace) {
  Array moving = random_array({4}, -1, 1, 3000);
  Array value = random_array({4}, -1, 1, 3001);
  Tensor t = tensor(moving);
  Tensor alias = t;  // shares the storage
  ops::assign_moving_average(t, tensor(value), 0.9);
  Array expected = ref::binary(moving, value, [](double m, double v) { return m * 0.9 + v * 0.1; });
  EXPECT_TRUE(Matches(t, DType::kF32, expected, kF32));
  EXPECT_TRUE(Matches(alias, DType::kF32, expected, kF32));
}

TEST_P(NormalizationTest, L2NormalizeAlongAnAxisWithEpsilonForZeroRows) {
  Array x = random_array({3, 4}, -2, 2, 3100);
  for (std::size_t j = 0; j < 4; ++j) x.values[4 + j] = 0.0;  // a zero row stays zero
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (int64_t axis : {-1, 0}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " axis " + std::to_string(axis));
      EXPECT_TRUE(Matches(ops::l2_normalize(tensor(x, dtype), axis), dtype,
                          ref::l2_normalize(x, axis, 1e-12), tolerance_for(dtype, kF32)));
    }
  }
  // A large epsilon caps the scale: x / sqrt(max(sum, eps)).
  EXPECT_TRUE(Matches(ops::l2_normalize(tensor(x), 1, 100.0), DType::kF32,
                      ref::l2_normalize(x, 1, 100.0), kF32));
}

TEST_P(NormalizationTest, DropoutWhenNotTrainingOrAtRateZeroIsTheIdentity) {
  Array x = random_array({4, 5}, -2, 2, 3200);
  Generator generator(5, 10);
  EXPECT_TRUE(Matches(ops::dropout(tensor(x), 0.5, generator, false), DType::kF32, x, kExact));
  EXPECT_TRUE(Matches(ops::dropout(tensor(x), 0.0, generator, true), DType::kF32, x, kExact));
  EXPECT_EQ(generator.counter(), 10u) << "the identity drew random numbers";
}

TEST_P(NormalizationTest, DropoutKeepsAboutOneMinusRateAndScalesThem) {
  const int64_t n = 100000;
  const double rate = 0.3;
  Array x = random_array({n}, 0.5, 2, 3300);
  Generator generator(77);
  Array y = read(ops::dropout(tensor(x), rate, generator, true));
  int64_t kept = 0;
  for (std::size_t i = 0; i < x.values.size(); ++i) {
    if (y.values[i] == 0.0) continue;
    ++kept;
    ASSERT_NEAR(y.values[i], x.values[i] / (1.0 - rate), 1e-5 * y.values[i]) << "element " << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - rate, 0.01);
  EXPECT_GT(generator.counter(), 0u) << "training dropout drew nothing from the generator";
}

TEST_P(NormalizationTest, DropoutMaskDependsOnlyOnTheGeneratorState) {
  Array x = ref::filled({1000}, 1.0);
  Generator g1(9, 4), g2(9, 4);
  std::vector<std::byte> first = bytes_of(ops::dropout(tensor(x), 0.5, g1, true));
  EXPECT_EQ(first, bytes_of(ops::dropout(tensor(x), 0.5, g2, true)));
  EXPECT_EQ(g1.counter(), g2.counter());
  EXPECT_NE(first, bytes_of(ops::dropout(tensor(x), 0.5, g1, true)))
      << "a second draw from the advanced generator gave the same mask";
}

// =============================================================================================
// Data movement

TEST_P(DataMovementTest, ReshapeInfersMinusOneAndSharesStorage) {
  Array x = random_array({2, 3, 4}, -1, 1, 3400);
  Tensor t = tensor(x);
  Tensor r = ops::reshape(t, Shape{4, -1});
  EXPECT_TRUE(Matches(r, DType::kF32, Array{{4, 6}, x.values}, kExact));
  EXPECT_EQ(r.storage(), t.storage());
  EXPECT_EQ(r.byte_offset(), t.byte_offset());
  EXPECT_EQ(ops::reshape(t, Shape{-1}).shape(), Shape{24});
  EXPECT_EQ(ops::reshape(t, Shape{2, 3, 1, 4}).shape(), (Shape{2, 3, 1, 4}));
  // A write through the original shows in the view.
  Array other = random_array({2, 3, 4}, -1, 1, 3401);
  ops::assign(t, tensor(other));
  EXPECT_TRUE(Matches(r, DType::kF32, Array{{4, 6}, other.values}, kExact));
  // Empty and scalar reshapes.
  EXPECT_EQ(ops::reshape(tensor(ref::filled({0, 3}, 0)), Shape{-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::reshape(tensor(Array{{1, 1}, {5}}), Shape{}).shape(), Shape{});
}

TEST_P(DataMovementTest, SliceCopiesInnerRangesAndSizeMinusOneRunsToTheEnd) {
  Array x = random_array({4, 5, 6}, -1, 1, 3500);
  for (DType dtype : {DType::kF32, DType::kI32}) {
    Array xi = dtype == DType::kI32 ? random_ints({4, 5, 6}, -50, 50, 3501) : x;
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(Matches(ops::slice(tensor(xi, dtype), {1, 2, 0}, {2, -1, 3}), dtype,
                        ref::slice(xi, {1, 2, 0}, {2, -1, 3}), kExact));
    EXPECT_TRUE(Matches(ops::slice(tensor(xi, dtype), {0, 0, 5}, {-1, 5, 1}), dtype,
                        ref::slice(xi, {0, 0, 5}, {-1, 5, 1}), kExact));
    EXPECT_TRUE(Matches(ops::slice(tensor(xi, dtype), {3, 1, 2}, {0, 2, 2}), dtype,
                        ref::slice(xi, {3, 1, 2}, {0, 2, 2}), kExact));
  }
  // A slice of whole rows is a view.
  Tensor t = tensor(x);
  Tensor rows = ops::slice(t, {1, 0, 0}, {2, -1, -1});
  EXPECT_TRUE(Matches(rows, DType::kF32, ref::slice(x, {1, 0, 0}, {2, 5, 6}), kExact));
  EXPECT_EQ(rows.storage(), t.storage());
}

TEST_P(DataMovementTest, ConcatJoinsThreeInputsAlongAMiddleAxis) {
  uint32_t seed = 3600;
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI64}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<Array> parts = {random_ints({2, 1, 3}, -50, 50, seed++),
                                random_ints({2, 3, 3}, -50, 50, seed++),
                                random_ints({2, 2, 3}, -50, 50, seed++)};
    std::vector<Tensor> inputs;
    for (const Array& p : parts) inputs.push_back(tensor(p, dtype));
    EXPECT_TRUE(Matches(ops::concat(inputs, 1), dtype, ref::concat(parts, 1), kExact));
    EXPECT_TRUE(Matches(ops::concat(inputs, -2), dtype, ref::concat(parts, 1), kExact));
  }
  std::vector<Array> last = {random_array({2, 2}, -1, 1, seed++),
                             random_array({2, 0}, -1, 1, seed++),
                             random_array({2, 3}, -1, 1, seed++)};
  std::vector<Tensor> inputs = {tensor(last[0]), tensor(last[1]), tensor(last[2])};
  EXPECT_TRUE(Matches(ops::concat(inputs, -1), DType::kF32, ref::concat(last, -1), kExact));
  EXPECT_TRUE(Matches(ops::concat(std::vector<Tensor>{tensor(last[0]), tensor(last[0])}, 0),
                      DType::kF32, ref::concat({last[0], last[0]}, 0), kExact));
}

TEST_P(DataMovementTest, SplitUndoesConcat) {
  Array x = random_array({2, 6, 3}, -1, 1, 3700);
  std::vector<Tensor> parts = ops::split(tensor(x), {1, 3, 2}, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(Matches(parts[0], DType::kF32, ref::slice(x, {0, 0, 0}, {2, 1, 3}), kExact));
  EXPECT_TRUE(Matches(parts[1], DType::kF32, ref::slice(x, {0, 1, 0}, {2, 3, 3}), kExact));
  EXPECT_TRUE(Matches(parts[2], DType::kF32, ref::slice(x, {0, 4, 0}, {2, 2, 3}), kExact));
  std::vector<Tensor> last = ops::split(tensor(x), {2, 0, 1}, -1);
  ASSERT_EQ(last.size(), 3u);
  EXPECT_TRUE(Matches(last[0], DType::kF32, ref::slice(x, {0, 0, 0}, {2, 6, 2}), kExact));
  EXPECT_EQ(last[1].shape(), (Shape{2, 6, 0}));
  EXPECT_TRUE(Matches(last[2], DType::kF32, ref::slice(x, {0, 0, 2}, {2, 6, 1}), kExact));
  std::vector<Tensor> rows = ops::split(tensor(x), {1, 1}, 0);
  EXPECT_TRUE(Matches(rows[1], DType::kF32, ref::slice(x, {1, 0, 0}, {1, 6, 3}), kExact));
}

TEST_P(DataMovementTest, TransposeRank4PermutesDimensions) {
  Array x = random_array({2, 3, 4, 5}, -1, 1, 3800);
  for (const Dims& perm :
       {Dims{2, 0, 3, 1}, Dims{3, 2, 1, 0}, Dims{0, 1, 2, 3}, Dims{-1, 0, 1, 2}}) {
    SCOPED_TRACE("perm " + dims_string(perm));
    EXPECT_TRUE(
        Matches(ops::transpose(tensor(x), perm), DType::kF32, ref::transpose(x, perm), kExact));
  }
  Array ints = random_ints({2, 3, 4, 5}, -100, 100, 3801);
  EXPECT_TRUE(Matches(ops::transpose(tensor(ints, DType::kI32), {1, 3, 0, 2}), DType::kI32,
                      ref::transpose(ints, {1, 3, 0, 2}), kExact));
}

TEST_P(DataMovementTest, PadFillsWithTheValueInTheTensorsDtype) {
  Array x = random_array({2, 3}, -1, 1, 3900);
  EXPECT_TRUE(Matches(ops::pad(tensor(x), {{1, 0}, {2, 1}}, 1.5), DType::kF32,
                      ref::pad(x, {{1, 0}, {2, 1}}, 1.5), kExact));
  EXPECT_TRUE(Matches(ops::pad(tensor(x), {{0, 0}, {0, 0}}), DType::kF32, x, kExact));
  Array y = random_array({2, 2, 3}, -1, 1, 3901);
  EXPECT_TRUE(Matches(ops::pad(tensor(y, DType::kF64), {{0, 1}, {1, 1}, {2, 0}}, -2.0), DType::kF64,
                      ref::pad(y, {{0, 1}, {1, 1}, {2, 0}}, -2.0), kExact));
  Array n = random_ints({3}, -9, 9, 3902);
  EXPECT_TRUE(Matches(ops::pad(tensor(n, DType::kI32), {{2, 3}}, 7.0), DType::kI32,
                      ref::pad(n, {{2, 3}}, 7.0), kExact));
}

TEST_P(DataMovementTest, GatherAlongAxisOneWithTwoDimensionalIndices) {
  Array params = random_array({3, 4, 2}, -1, 1, 4000);
  Array indices = random_ints({2, 3}, 0, 3, 4001);
  indices.values[0] = 3;
  indices.values[1] = 3;  // repeated index
  for (DType index_dtype : {DType::kI32, DType::kI64}) {
    SCOPED_TRACE(std::string("indices ") + dtype_name(index_dtype));
    Tensor y = ops::gather(tensor(params), tensor(indices, index_dtype), 1);
    EXPECT_EQ(y.shape(), (Shape{3, 2, 3, 2}));
    EXPECT_TRUE(Matches(y, DType::kF32, ref::gather(params, indices, 1), kExact));
    EXPECT_TRUE(Matches(ops::gather(tensor(params), tensor(indices, index_dtype), -2), DType::kF32,
                        ref::gather(params, indices, 1), kExact));
  }
  Array rows{{4}, {2, 0, 2, 1}};
  EXPECT_TRUE(Matches(ops::gather(tensor(params, DType::kF64), tensor(rows, DType::kI64)),
                      DType::kF64, ref::gather(params, Array{{4}, {2, 0, 2, 1}}, 0), kExact));
  Array ints = random_ints({5, 2}, -9, 9, 4002);
  Array scalar_index{{}, {4}};
  EXPECT_TRUE(Matches(ops::gather(tensor(ints, DType::kI32), tensor(scalar_index, DType::kI32), 0),
                      DType::kI32, ref::gather(ints, scalar_index, 0), kExact));
}

TEST_P(DataMovementTest, GatherIndexOutOfRangeIsAnErrorNamingIt) {
  Array params = random_array({3, 4}, -1, 1, 4100);
  for (double bad : {17.0, -1.0, 4.0}) {
    SCOPED_TRACE("index " + std::to_string(bad));
    Array indices{{3}, {0, bad, 1}};
    std::string m = invalid_argument_of(
        [&] { ops::gather(tensor(params), tensor(indices, DType::kI64), 1).to_vector<float>(); });
    EXPECT_TRUE(Mentions(m, {"gather", std::to_string(static_cast<int64_t>(bad))}));
  }
}

TEST_P(DataMovementTest, ScatterAddIndexOutOfRangeIsAnErrorNamingIt) {
  Array updates = random_array({3}, -1, 1, 4150);
  for (double bad : {12.0, -3.0}) {
    SCOPED_TRACE("index " + std::to_string(bad));
    Array indices{{3}, {0, bad, 1}};
    std::string m = invalid_argument_of([&] {
      ops::scatter_add(tensor(updates), tensor(indices, DType::kI32), 0, Shape{5})
          .to_vector<float>();
    });
    EXPECT_TRUE(Mentions(m, {"scatter_add", std::to_string(static_cast<int64_t>(bad))}));
  }
}

TEST_P(DataMovementTest, ScatterAddSumsRepeatedIndices) {
  Array indices{{2, 2}, {0, 2, 2, 3}};
  Array updates = random_array({3, 2, 2}, -1, 1, 4200);
  for (DType index_dtype : {DType::kI32, DType::kI64}) {
    SCOPED_TRACE(dtype_name(index_dtype));
    EXPECT_TRUE(
        Matches(ops::scatter_add(tensor(updates), tensor(indices, index_dtype), 1, Shape{3, 4}),
                DType::kF32, ref::scatter_add(updates, indices, 1, {3, 4}), kF32));
  }
  Array rows{{3}, {1, 1, 0}};
  Array row_updates = random_array({3, 3}, -1, 1, 4201);
  EXPECT_TRUE(Matches(
      ops::scatter_add(tensor(row_updates, DType::kF64), tensor(rows, DType::kI32), 0, Shape{2, 3}),
      DType::kF64, ref::scatter_add(row_updates, rows, 0, {2, 3}), kF64));
}

TEST_P(DataMovementTest, ScatterAddIntoAnOutputLargerThanTheUpdates) {
  // The usual gradient-of-gather case (an embedding lookup): few rows updated in a big table.
  Array few{{2}, {7, 2}};
  Array few_updates = random_array({2}, -1, 1, 4202);
  Tensor u = tensor(few_updates), i = tensor(few, DType::kI64);
  EXPECT_TRUE(MatchesResultOf([&] { return ops::scatter_add(u, i, 0, Shape{10}); }, DType::kF32,
                              ref::scatter_add(few_updates, few, 0, {10}), kExact));
  Array ids{{3}, {4, 0, 4}};
  Array updates = random_array({3, 2}, -1, 1, 4203);
  Tensor tu = tensor(updates), ti = tensor(ids, DType::kI32);
  EXPECT_TRUE(MatchesResultOf(
      [&] {
        return ops::scatter_add(tu, ti, 0, Shape{6, 2});
      },
      DType::kF32, ref::scatter_add(updates, ids, 0, {6, 2}), kF32));
}

TEST_P(DataMovementTest, OneHotLeavesOutOfRangeRowsAllOff) {
  Array indices{{2, 3}, {0, 3, -1, 4, 1, 2}};
  EXPECT_TRUE(Matches(ops::one_hot(tensor(indices, DType::kI32), 4, 5.0, -1.0, DType::kF64),
                      DType::kF64, ref::one_hot(indices, 4, 5.0, -1.0), kExact));
  EXPECT_TRUE(Matches(ops::one_hot(tensor(indices, DType::kI64), 4), DType::kF32,
                      ref::one_hot(indices, 4, 1.0, 0.0), kExact));
  EXPECT_TRUE(Matches(ops::one_hot(tensor(indices, DType::kI64), 3, 1.0, 0.0, DType::kI32),
                      DType::kI32, ref::one_hot(indices, 3, 1.0, 0.0), kExact));
}

TEST_P(DataMovementTest, DataMovementWorksOnEveryDtype) {
  uint32_t seed = 4240;
  for (DType dtype : {DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kBool, DType::kBF16,
                      DType::kF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    // Values every dtype holds exactly (bf16 and f16 as bit patterns).
    int64_t high = dtype == DType::kBool ? 1 : 200;
    Array x = random_ints({2, 3, 4}, 0, high, seed++);
    Array y = random_ints({2, 2, 4}, 0, high, seed++);
    Tensor tx = tensor(x, dtype), ty = tensor(y, dtype);
    EXPECT_TRUE(Matches(ops::concat(std::vector<Tensor>{tx, ty, tx}, 1), dtype,
                        ref::concat({x, y, x}, 1), kExact));
    EXPECT_TRUE(Matches(ops::slice(tx, {1, 1, 1}, {1, 2, -1}), dtype,
                        ref::slice(x, {1, 1, 1}, {1, 2, 3}), kExact));
    EXPECT_TRUE(
        Matches(ops::transpose(tx, {2, 0, 1}), dtype, ref::transpose(x, {2, 0, 1}), kExact));
    Array indices{{3}, {3, 0, 3}};
    EXPECT_TRUE(Matches(ops::gather(tx, tensor(indices, DType::kI32), 2), dtype,
                        ref::gather(x, indices, 2), kExact));
    EXPECT_TRUE(Matches(ops::copy(tx), dtype, x, kExact));
    std::vector<Tensor> parts = ops::split(tx, {1, 2}, 1);
    EXPECT_TRUE(Matches(parts[1], dtype, ref::slice(x, {0, 1, 0}, {2, 2, 4}), kExact));
  }
  // The pad value is cast to the tensor's dtype: 1 is 0x3F80 in bf16 and 0x3C00 in f16.
  struct PadCase {
    DType dtype;
    double stored_one;
  };
  Array x = random_ints({2, 3}, 0, 1, seed++);
  for (const PadCase& c :
       {PadCase{DType::kF64, 1.0}, PadCase{DType::kI32, 1.0}, PadCase{DType::kI64, 1.0},
        PadCase{DType::kU8, 1.0}, PadCase{DType::kBool, 1.0}, PadCase{DType::kBF16, 0x3F80},
        PadCase{DType::kF16, 0x3C00}}) {
    SCOPED_TRACE(std::string("pad ") + dtype_name(c.dtype));
    EXPECT_TRUE(Matches(ops::pad(tensor(x, c.dtype), {{0, 1}, {1, 0}}, 1.0), c.dtype,
                        ref::pad(x, {{0, 1}, {1, 0}}, c.stored_one), kExact));
  }
}

TEST_P(DataMovementTest, TransposeOfAHighRankTensor) {
  Array x = random_array({2, 1, 3, 1, 2, 2}, -1, 1, 4245);
  for (const Dims& perm : {Dims{5, 4, 3, 2, 1, 0}, Dims{2, 0, 5, 1, 4, 3}}) {
    SCOPED_TRACE("perm " + dims_string(perm));
    EXPECT_TRUE(
        Matches(ops::transpose(tensor(x), perm), DType::kF32, ref::transpose(x, perm), kExact));
  }
}

TEST_P(DataMovementTest, EmptyAndSizeOneEdgeCases) {
  Array x = random_array({3, 4}, -1, 1, 4250);
  Array none{{0}, {}};
  EXPECT_TRUE(Matches(ops::gather(tensor(x), tensor(none, DType::kI32), 0), DType::kF32,
                      ref::filled({0, 4}, 0.0), kExact));
  EXPECT_TRUE(Matches(ops::one_hot(tensor(Array{{2}, {0, 1}}, DType::kI32), 0), DType::kF32,
                      ref::filled({2, 0}, 0.0), kExact));
  EXPECT_TRUE(Matches(ops::concat(std::vector<Tensor>{tensor(x)}, 0), DType::kF32, x, kExact));
  EXPECT_TRUE(Matches(ops::transpose(tensor(ref::filled({0, 3}, 0.0)), {1, 0}), DType::kF32,
                      ref::filled({3, 0}, 0.0), kExact));
  Array column = random_array({4, 1}, -1, 1, 4251);
  EXPECT_TRUE(Matches(ops::softmax(tensor(column)), DType::kF32, ref::filled({4, 1}, 1.0), kF32));
  EXPECT_TRUE(
      Matches(ops::log_softmax(tensor(column)), DType::kF32, ref::filled({4, 1}, 0.0), kF32));
  EXPECT_TRUE(Matches(ops::argmax(tensor(column), 1), DType::kI64, ref::filled({4}, 0.0), kExact));
}

TEST_P(DataMovementTest, TopKIsDescendingWithLowerIndexFirstOnTies) {
  Array x{{2, 6},
          {3, 1, 3, 2, 3, 0,  //
           -1, 5, 5, -2, 0, 5}};
  for (DType dtype : {DType::kF32, DType::kI32}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto [values, indices] = ops::top_k(tensor(x, dtype), 3);
    EXPECT_TRUE(Matches(values, dtype, Array{{2, 3}, {3, 3, 3, 5, 5, 5}}, kExact));
    EXPECT_TRUE(Matches(indices, DType::kI64, Array{{2, 3}, {0, 2, 4, 1, 2, 5}}, kExact));
  }
  for (int64_t k : {0, 1, 4, 6}) {
    SCOPED_TRACE("k " + std::to_string(k));
    auto [values, indices] = ops::top_k(tensor(x), k);
    auto [ref_values, ref_indices] = ref::top_k(x, k);
    EXPECT_TRUE(Matches(values, DType::kF32, ref_values, kExact));
    EXPECT_TRUE(Matches(indices, DType::kI64, ref_indices, kExact));
  }
  Array y = random_ints({2, 3, 7}, -3, 3, 4300);
  auto [values, indices] = ops::top_k(tensor(y, DType::kF64), 5);
  auto [ref_values, ref_indices] = ref::top_k(y, 5);
  EXPECT_TRUE(Matches(values, DType::kF64, ref_values, kExact));
  EXPECT_TRUE(Matches(indices, DType::kI64, ref_indices, kExact));
}

TEST_P(DataMovementTest, CopyIsContiguousAndIndependentOfItsSource) {
  Array x = random_array({4, 3}, -1, 1, 4400);
  Tensor base = tensor(x);
  Tensor view = ops::slice_outer(base, 1, 2);
  Tensor c = ops::copy(view);
  EXPECT_TRUE(Matches(c, DType::kF32, ref::slice(x, {1, 0}, {2, 3}), kExact));
  EXPECT_NE(c.storage(), base.storage());
  EXPECT_EQ(c.byte_offset(), 0u);
  ops::assign(base, ops::zeros(backend(), Shape{4, 3}));
  EXPECT_TRUE(Matches(c, DType::kF32, ref::slice(x, {1, 0}, {2, 3}), kExact))
      << "the copy changed with its source";
  Array n = random_ints({3}, -5, 5, 4401);
  EXPECT_TRUE(Matches(ops::copy(tensor(n, DType::kI64)), DType::kI64, n, kExact));
}

// =============================================================================================
// Views at a non-zero byte offset as inputs and outputs

TEST_P(ViewTest, SliceOuterIsAViewAtARowOffset) {
  Array x = random_array({5, 3, 4}, -1, 1, 4500);
  Tensor base = tensor(x);
  Tensor v = ops::slice_outer(base, 2, 2);
  EXPECT_EQ(v.storage(), base.storage());
  EXPECT_EQ(v.byte_offset(), 2u * 3 * 4 * sizeof(float));
  EXPECT_TRUE(Matches(v, DType::kF32, ref::slice(x, {2, 0, 0}, {2, 3, 4}), kExact));
  Tensor nested = ops::slice_outer(ops::slice_outer(base, 1, 4), 1, 2);
  EXPECT_EQ(nested.byte_offset(), v.byte_offset());
  EXPECT_TRUE(Matches(nested, DType::kF32, ref::slice(x, {2, 0, 0}, {2, 3, 4}), kExact));
  EXPECT_EQ(ops::slice_outer(base, 5, 0).num_elements(), 0);
}

TEST_P(ViewTest, ViewsAtANonZeroOffsetFeedEveryKindOfOp) {
  Array x = random_array({6, 4, 5}, -2, 2, 4600);
  Tensor base = tensor(x);
  Tensor w_t = tensor(random_array({5, 2}, -1, 1, 4601));
  Array w = read(w_t);
  // Rows [2, 5) directly and through a view of a view; rows [0, 3) as a second operand.
  Array xv = ref::slice(x, {2, 0, 0}, {3, 4, 5});
  Array xo = ref::slice(x, {0, 0, 0}, {3, 4, 5});
  Tensor other = ops::slice_outer(base, 0, 3);
  Tensor views[] = {ops::slice_outer(base, 2, 3),
                    ops::slice_outer(ops::slice_outer(base, 1, 5), 1, 3),
                    ops::slice(base, {2, 0, 0}, {3, -1, -1})};
  for (const Tensor& v : views) {
    SCOPED_TRACE("view at byte offset " + std::to_string(v.byte_offset()));
    ASSERT_GT(v.byte_offset(), 0u);
    EXPECT_TRUE(Matches(ops::neg(v), DType::kF32, ref::map(xv, std::negate<>()), kExact));
    EXPECT_TRUE(Matches(ops::add(v, 1.5), DType::kF32,
                        ref::map(xv, [](double a) { return a + 1.5; }), kF32));
    EXPECT_TRUE(
        Matches(ops::sub(v, other), DType::kF32, ref::binary(xv, xo, std::minus<>()), kF32));
    EXPECT_TRUE(Matches(ops::mul(v, ops::slice_outer(other, 1, 1)), DType::kF32,
                        ref::binary(xv, ref::slice(x, {1, 0, 0}, {1, 4, 5}), std::multiplies<>()),
                        kF32));
    EXPECT_TRUE(Matches(ops::where(ops::greater(v, other), v, other), DType::kF32,
                        ref::binary(xv, xo, [](double a, double b) { return std::max(a, b); }),
                        kExact));
    EXPECT_TRUE(Matches(ops::reduce_sum(v, {1}), DType::kF32,
                        ref::reduce(xv, {1}, false, ref::Reduction::kSum), kF32Sum));
    EXPECT_TRUE(Matches(ops::reduce_max(v), DType::kF32,
                        ref::reduce(xv, {}, false, ref::Reduction::kMax), kExact));
    EXPECT_TRUE(Matches(ops::argmax(v, 2), DType::kI64, ref::argmax(xv, 2), kExact));
    EXPECT_TRUE(Matches(ops::softmax(v), DType::kF32, ref::softmax(xv, -1, false), kF32));
    EXPECT_TRUE(
        Matches(ops::matmul(v, w_t), DType::kF32, ref::matmul(xv, w, false, false), kF32Conv));
    EXPECT_TRUE(Matches(ops::matmul(v, other, false, true), DType::kF32,
                        ref::matmul(xv, xo, false, true), kF32Conv));
    EXPECT_TRUE(
        Matches(ops::transpose(v, {2, 0, 1}), DType::kF32, ref::transpose(xv, {2, 0, 1}), kExact));
    EXPECT_TRUE(Matches(ops::slice(v, {1, 1, 0}, {-1, 2, 3}), DType::kF32,
                        ref::slice(xv, {1, 1, 0}, {2, 2, 3}), kExact));
    EXPECT_TRUE(Matches(ops::concat(std::vector<Tensor>{v, other, v}, 1), DType::kF32,
                        ref::concat({xv, xo, xv}, 1), kExact));
    EXPECT_TRUE(Matches(ops::pad(v, {{0, 0}, {1, 0}, {0, 2}}, 0.5), DType::kF32,
                        ref::pad(xv, {{0, 0}, {1, 0}, {0, 2}}, 0.5), kExact));
    Array indices{{2}, {3, 0}};
    EXPECT_TRUE(Matches(ops::gather(v, tensor(indices, DType::kI64), 1), DType::kF32,
                        ref::gather(xv, indices, 1), kExact));
    auto [top_values, top_indices] = ops::top_k(v, 2);
    EXPECT_TRUE(Matches(top_values, DType::kF32, ref::top_k(xv, 2).first, kExact));
    EXPECT_TRUE(Matches(top_indices, DType::kI64, ref::top_k(xv, 2).second, kExact));
    EXPECT_TRUE(Matches(ops::copy(v), DType::kF32, xv, kExact));
    EXPECT_TRUE(Matches(ops::cast(v, DType::kF64), DType::kF64, xv, kExact));
    EXPECT_TRUE(
        Matches(ops::l2_normalize(v, 0), DType::kF32, ref::l2_normalize(xv, 0, 1e-12), kF32));
    EXPECT_TRUE(Matches(ops::sigmoid_cross_entropy_with_logits(ops::sigmoid(other), v), DType::kF32,
                        ref::sigmoid_cross_entropy(
                            ref::map(xo, [](double a) { return 1.0 / (1.0 + std::exp(-a)); }), xv),
                        kF32Sum));
    Array gamma = ref::filled({5}, 1.0), beta = ref::filled({5}, 0.0);
    EXPECT_TRUE(Matches(ops::batch_norm_training(v, tensor(gamma), tensor(beta)).y, DType::kF32,
                        ref::batch_norm_training(xv, gamma, beta, 1e-3).y, {1e-5, 1e-4}));
    // As NHWC images: reshape keeps the offset.
    Tensor image = ops::reshape(v, Shape{3, 4, 5, 1});
    EXPECT_EQ(image.byte_offset(), v.byte_offset());
    Array image_ref{{3, 4, 5, 1}, xv.values};
    Array filter = random_array({2, 2, 1, 2}, -1, 1, 4602);
    EXPECT_TRUE(Matches(ops::conv2d(image, tensor(filter)), DType::kF32,
                        ref::conv2d(image_ref, filter, ref::Window{}), kF32Conv));
    EXPECT_TRUE(Matches(ops::max_pool2d(image, {2, 2}, {2, 2}, Padding2D::same()), DType::kF32,
                        ref::pool2d(image_ref, 2, 2, ref::same_window(4, 5, 2, 2, 2, 2), false),
                        kExact));
    EXPECT_TRUE(Matches(ops::avg_pool2d(image, {2, 2}, {1, 1}), DType::kF32,
                        ref::pool2d(image_ref, 2, 2, ref::Window{}, true), kF32));
  }
  Array ids{{4, 3}, {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}};
  Tensor id_rows = ops::slice_outer(tensor(ids, DType::kI32), 1, 2);
  EXPECT_TRUE(Matches(ops::one_hot(id_rows, 4), DType::kF32,
                      ref::one_hot(ref::slice(ids, {1, 0}, {2, 3}), 4, 1.0, 0.0), kExact));
  Array updates = random_array({2, 3, 2}, -1, 1, 4603);
  Tensor update_rows = ops::slice_outer(tensor(updates), 1, 1);
  Array index_pair{{3}, {1, 1, 0}};
  EXPECT_TRUE(Matches(
      ops::scatter_add(update_rows, tensor(index_pair, DType::kI64), 1, Shape{1, 2, 2}),
      DType::kF32,
      ref::scatter_add(ref::slice(updates, {1, 0, 0}, {1, 3, 2}), index_pair, 1, {1, 2, 2}), kF32));
}

TEST_P(ViewTest, InPlaceUpdatesThroughAViewWriteOnlyItsRows) {
  Array x = random_array({4, 3}, -1, 1, 4700);
  Array grad = random_array({2, 3}, -1, 1, 4701);
  Tensor base = tensor(x);
  Tensor rows = ops::slice_outer(base, 1, 2);
  ops::apply_gradient_descent(rows, tensor(grad), 0.5);
  Array expected = x;
  for (std::size_t i = 0; i < 6; ++i) expected.values[3 + i] -= 0.5 * grad.values[i];
  EXPECT_TRUE(Matches(base, DType::kF32, expected, kF32));

  Tensor last = ops::slice_outer(base, 3, 1);
  Array value = random_array({1, 3}, -1, 1, 4702);
  ops::assign_moving_average(last, tensor(value), 0.75);
  for (std::size_t i = 0; i < 3; ++i) {
    expected.values[9 + i] = expected.values[9 + i] * 0.75 + value.values[i] * 0.25;
  }
  EXPECT_TRUE(Matches(base, DType::kF32, expected, kF32));

  Tensor first = ops::slice_outer(base, 0, 1);
  ops::assign(first, ops::full(backend(), Shape{1, 3}, 9.0));
  for (std::size_t i = 0; i < 3; ++i) expected.values[i] = 9.0;
  EXPECT_TRUE(Matches(base, DType::kF32, expected, kF32));
}

// =============================================================================================
// Random numbers

TEST_P(RandomTest, SameSeedAndCounterGiveBitwiseEqualDraws) {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    using Draw = std::function<Tensor(Generator&)>;
    std::vector<std::pair<std::string, Draw>> draws = {
        {"random_uniform",
         [&](Generator& g) {
           return ops::random_uniform(backend(), Shape{7, 9}, g, -1, 2, dtype);
         }},
        {"random_normal",
         [&](Generator& g) {
           return ops::random_normal(backend(), Shape{7, 9}, g, 1, 3, dtype);
         }},
        {"truncated_normal",
         [&](Generator& g) {
           return ops::truncated_normal(backend(), Shape{7, 9}, g, 0, 2, dtype);
         }},
    };
    for (const auto& [name, draw] : draws) {
      SCOPED_TRACE(name);
      Generator a(1234, 56), b(1234, 56), later(1234, 57), reseeded(1235, 56);
      std::vector<std::byte> first = bytes_of(draw(a));
      EXPECT_EQ(first, bytes_of(draw(b)));
      EXPECT_EQ(a.counter(), b.counter());
      EXPECT_NE(first, bytes_of(draw(later))) << "a different counter gave the same numbers";
      EXPECT_NE(first, bytes_of(draw(reseeded))) << "a different seed gave the same numbers";
      EXPECT_NE(first, bytes_of(draw(a))) << "the next draw repeated the previous one";
    }
  }
}

TEST_P(RandomTest, DrawsAdvanceTheCounterByTheBlocksTheyUse) {
  Generator g(3, 100);
  ops::random_uniform(backend(), Shape{10}, g);
  EXPECT_EQ(g.counter(), 100u + 3u);  // 4 f32 per block
  ops::random_uniform(backend(), Shape{5}, g, 0, 1, DType::kF64);
  EXPECT_EQ(g.counter(), 103u + 3u);  // 2 f64 per block
  ops::random_normal(backend(), Shape{2, 5}, g);
  EXPECT_EQ(g.counter(), 106u + 10u);
  ops::truncated_normal(backend(), Shape{4}, g);
  EXPECT_EQ(g.counter(), 116u + 4u * random::kTruncatedNormalAttempts);
  EXPECT_EQ(g.seed(), 3u);
}

TEST_P(RandomTest, ValuesFollowTheDocumentedPhiloxMapping) {
  const uint64_t seed = 0x0123456789ABCDEFull, counter = 42;
  const int64_t n = 11;
  Generator g(seed, counter);
  Array uniform32 = read(ops::random_uniform(backend(), Shape{n}, g));
  g.set_state(seed, counter);
  Array uniform64 = read(ops::random_uniform(backend(), Shape{n}, g, 0, 1, DType::kF64));
  g.set_state(seed, counter);
  Array scaled = read(ops::random_uniform(backend(), Shape{n}, g, -2, 3));
  g.set_state(seed, counter);
  Array normal32 = read(ops::random_normal(backend(), Shape{n}, g));
  g.set_state(seed, counter);
  Array normal64 = read(ops::random_normal(backend(), Shape{n}, g, 0, 1, DType::kF64));
  g.set_state(seed, counter);
  Array shifted = read(ops::random_normal(backend(), Shape{n}, g, 5, 0.5, DType::kF64));
  g.set_state(seed, counter);
  Array truncated = read(ops::truncated_normal(backend(), Shape{n}, g, 0, 1, DType::kF64));
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE("element " + std::to_string(i));
    auto u = static_cast<uint64_t>(i);
    auto k = static_cast<std::size_t>(i);
    random::Block b32 = random::philox4x32_10(seed, counter + u / 4);
    EXPECT_EQ(uniform32.values[k], random::uniform_f32(b32[u % 4]));
    EXPECT_NEAR(scaled.values[k], -2.0 + 5.0 * random::uniform_f32(b32[u % 4]), 1e-6);
    random::Block b64 = random::philox4x32_10(seed, counter + u / 2);
    EXPECT_EQ(uniform64.values[k], random::uniform_f64(b64[2 * (u % 2)], b64[2 * (u % 2) + 1]));
    random::Block bn = random::philox4x32_10(seed, counter + u);
    double z = random::normal_from(bn[0], bn[1]);
    EXPECT_NEAR(normal32.values[k], z, 1e-6 * std::max(1.0, std::abs(z)));
    EXPECT_NEAR(normal64.values[k], z, 1e-15);
    EXPECT_NEAR(shifted.values[k], 5.0 + 0.5 * z, 1e-14);
    EXPECT_NEAR(truncated.values[k],
                random::truncated_normal(seed, counter, static_cast<uint64_t>(n), u), 1e-15);
  }
}

TEST_P(RandomTest, MomentsAreRightOnAHundredThousandSamples) {
  const int64_t n = 100000;
  auto moments = [](const Array& a) {
    double mean = 0.0, sq = 0.0;
    for (double v : a.values) mean += v;
    mean /= static_cast<double>(a.values.size());
    for (double v : a.values) sq += (v - mean) * (v - mean);
    return std::pair<double, double>{mean, std::sqrt(sq / static_cast<double>(a.values.size()))};
  };
  Generator g(2718);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Array uniform = read(ops::random_uniform(backend(), Shape{n}, g, -1, 3, dtype));
    for (double v : uniform.values) ASSERT_TRUE(v >= -1.0 && v < 3.0) << v;
    auto [um, us] = moments(uniform);
    EXPECT_NEAR(um, 1.0, 0.02);
    EXPECT_NEAR(us, 4.0 / std::sqrt(12.0), 0.02);

    Array normal = read(ops::random_normal(backend(), Shape{n}, g, 2, 0.5, dtype));
    auto [nm, ns] = moments(normal);
    EXPECT_NEAR(nm, 2.0, 0.01);
    EXPECT_NEAR(ns, 0.5, 0.01);

    // A normal truncated at two stddev has stddev 0.8796 of the untruncated one.
    Array truncated = read(ops::truncated_normal(backend(), Shape{n}, g, -1, 2, dtype));
    for (double v : truncated.values) ASSERT_TRUE(v >= -5.0 && v <= 3.0) << v;
    auto [tm, ts] = moments(truncated);
    EXPECT_NEAR(tm, -1.0, 0.03);
    EXPECT_NEAR(ts, 2.0 * 0.8796, 0.03);
  }
}

// =============================================================================================
// Optimizer updates

TEST_P(OptimizerTest, GradientDescentSubtractsTheScaledGradientInPlace) {
  Array var = random_array({2, 3}, -1, 1, 4800), grad = random_array({2, 3}, -1, 1, 4801);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor v = tensor(var, dtype);
    ops::apply_gradient_descent(v, tensor(grad, dtype), 0.1);
    Array expected = var;
    ref::gradient_descent(expected, grad, 0.1);
    EXPECT_TRUE(Matches(v, dtype, expected, tolerance_for(dtype, kF32)));
  }
}

TEST_P(OptimizerTest, MomentumWithAndWithoutNesterovOverThreeSteps) {
  Array var0 = random_array({5}, -1, 1, 4900);
  for (bool nesterov : {false, true}) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (nesterov ? " nesterov" : " plain"));
      Array var = var0, accum = ref::filled({5}, 0.0);
      Tensor v = tensor(var, dtype), a = tensor(accum, dtype);
      for (uint32_t step = 0; step < 3; ++step) {
        Array grad = random_array({5}, -1, 1, 4910 + step);
        ops::apply_momentum(v, a, tensor(grad, dtype), 0.05, 0.9, nesterov);
        ref::momentum(var, accum, grad, 0.05, 0.9, nesterov);
      }
      EXPECT_TRUE(Matches(v, dtype, var, tolerance_for(dtype, kF32)));
      EXPECT_TRUE(Matches(a, dtype, accum, tolerance_for(dtype, kF32)));
    }
  }
}

TEST_P(OptimizerTest, AdamFollowsTensorFlowsFormulaOverSteps) {
  Array var0 = random_array({2, 4}, -1, 1, 5000);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Array var = var0, m = ref::filled({2, 4}, 0.0), v = m;
    Tensor tv = tensor(var, dtype), tm = tensor(m, dtype), tvv = tensor(v, dtype);
    for (int64_t step = 1; step <= 3; ++step) {
      Array grad = random_array({2, 4}, -1, 1, 5010 + static_cast<uint32_t>(step));
      ops::apply_adam(tv, tm, tvv, tensor(grad, dtype), 0.01, 0.9, 0.999, 1e-7, step);
      ref::adam(var, m, v, grad, 0.01, 0.9, 0.999, 1e-7, step);
    }
    EXPECT_TRUE(Matches(tv, dtype, var, tolerance_for(dtype, kF32)));
    EXPECT_TRUE(Matches(tm, dtype, m, tolerance_for(dtype, kF32)));
    EXPECT_TRUE(Matches(tvv, dtype, v, tolerance_for(dtype, kF32)));
  }
}

TEST_P(OptimizerTest, AssignCopiesIntoTheTarget) {
  Array value = random_array({3, 2}, -1, 1, 5100);
  Tensor target = ops::zeros(backend(), Shape{3, 2}, DType::kF64);
  ops::assign(target, tensor(value, DType::kF64));
  EXPECT_TRUE(Matches(target, DType::kF64, value, kExact));
}

// =============================================================================================
// Errors: InvalidArgument naming what is wrong; nothing aborts

TEST_P(ErrorTest, ShapeMismatchNamesTheOpAndBothShapesAndDtypes) {
  Tensor a = ops::zeros(backend(), Shape{2, 3});
  Tensor b = ops::zeros(backend(), Shape{4, 5});
  Tensor c = ops::zeros(backend(), Shape{4});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::matmul(a, b); }),
                       {"matmul", "inner dimensions", "f32[2, 3]" + on(), "f32[4, 5]" + on()}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::add(a, c); }),
                       {"add", "broadcast", "f32[2, 3]" + on(), "f32[4]" + on()}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::where(ops::less(a, a), a, c); }),
                       {"where", "f32[2, 3]" + on(), "f32[4]" + on()}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::concat(std::vector<Tensor>{a, b}, 0);
                       }),
                       {"concat", "f32[2, 3]" + on(), "f32[4, 5]" + on()}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::sigmoid_cross_entropy_with_logits(a, b); }),
                       {"sigmoid_cross_entropy_with_logits", "f32[2, 3]", "f32[4, 5]"}));
  Tensor var = ops::zeros(backend(), Shape{2, 3});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::apply_gradient_descent(var, b, 0.1); }),
                       {"apply_gradient_descent", "f32[2, 3]", "f32[4, 5]"}));
  Tensor image = ops::zeros(backend(), Shape{1, 4, 4, 3});
  Tensor filter = ops::zeros(backend(), Shape{2, 2, 2, 4});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::conv2d(image, filter); }),
                       {"conv2d", "f32[2, 2, 2, 4]"}));
  Tensor gamma = ops::ones(backend(), Shape{2});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::batch_norm_training(a, gamma, gamma); }),
                       {"batch_norm_training", "f32[2, 3]", "f32[2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::reshape(a, Shape{4, 2});
                       }),
                       {"reshape", "f32[2, 3]", "[4, 2]"}));
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] {
        ops::matmul(ops::zeros(backend(), Shape{2, 2, 3}), ops::zeros(backend(), Shape{3, 3, 4}));
      }),
      {"matmul", "batch", "f32[2, 2, 3]", "f32[3, 3, 4]"}));
}

TEST_P(ErrorTest, DtypeMismatchNamesBothDtypes) {
  Tensor f32 = ops::zeros(backend(), Shape{2});
  Tensor f64 = ops::zeros(backend(), Shape{2}, DType::kF64);
  Tensor i32 = ops::zeros(backend(), Shape{2}, DType::kI32);
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::add(f32, f64); }),
                       {"add", "f32[2]" + on(), "f64[2]" + on()}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::matmul(ops::zeros(backend(), Shape{2, 2}),
                                     ops::zeros(backend(), Shape{2, 2}, DType::kF64));
                       }),
                       {"matmul", "f32[2, 2]", "f64[2, 2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::where(f32, f32, f32); }),
                       {"where", "bool", "f32[2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::gather(f32, f32); }), {"gather", "f32[2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::exp(i32); }), {"exp", "i32[2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::div(i32, i32); }), {"div", "i32[2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::concat(std::vector<Tensor>{f32, f64}, 0);
                       }),
                       {"concat", "f32[2]", "f64[2]"}));
  Generator g;
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::random_normal(backend(), Shape{2}, g, 0, 1, DType::kI32); }),
      {"random_normal", "i32"}));
}

TEST_P(ErrorTest, OutOfRangeAxisIsNamed) {
  Tensor x = ops::zeros(backend(), Shape{2, 3});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::reduce_sum(x, {2}); }),
                       {"reduce_sum", "axis 2", "f32[2, 3]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::reduce_mean(x, {-3}); }),
                       {"reduce_mean", "axis -3"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::softmax(x, 2); }), {"softmax", "axis 2"}));
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] { ops::log_softmax(x, -3); }), {"log_softmax", "axis -3"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::argmax(x, 5); }), {"argmax", "axis 5"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::concat(std::vector<Tensor>{x, x}, 2);
                       }),
                       {"concat", "axis 2"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::split(x, {1, 1}, -3);
                       }),
                       {"split", "axis -3"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::transpose(x, {0, 2});
                       }),
                       {"transpose", "axis 2"}));
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::gather(x, ops::zeros(backend(), Shape{1}, DType::kI32), 2); }),
      {"gather", "axis 2"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::l2_normalize(x, 4); }), {"axis 4"}));
}

TEST_P(ErrorTest, OutOfRangeIndicesAndSizesAreNamed) {
  Tensor x = ops::zeros(backend(), Shape{4, 6});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::slice_outer(x, 3, 2); }),
                       {"slice_outer", "[3, 5)", "f32[4, 6]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::slice(x, {0, 4}, {1, 3});
                       }),
                       {"slice", "[4, 7)", "f32[4, 6]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::top_k(x, 7); }), {"top_k", "k = 7"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::split(x, {2, 3}, 1);
                       }),
                       {"split", "5", "6"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::reshape(x, Shape{-1, -1}); }), {"reshape"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::argmax(ops::zeros(backend(), Shape{2, 0}), 1);
                       }),
                       {"argmax", "empty"}));
}

TEST_P(ErrorTest, InvalidAttributesAreRejected) {
  Tensor x = ops::zeros(backend(), Shape{2, 3});
  Generator g;
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] { ops::dropout(x, 1.0, g, true); }), {"dropout", "rate"}));
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] { ops::random_uniform(backend(), Shape{2}, g, 1, 1); }),
               {"random_uniform"}));
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] { ops::clip_by_value(x, 2, 1); }), {"clip_by_value"}));
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::one_hot(ops::zeros(backend(), Shape{2}, DType::kI32), -1); }),
      {"one_hot", "depth"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::pad(x, {{0, 0}, {-1, 0}}); }), {"pad"}));
  Tensor var = ops::zeros(backend(), Shape{2}), m = ops::zeros(backend(), Shape{2}),
         v = ops::zeros(backend(), Shape{2});
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::apply_adam(var, m, v, var, 0.1, 0.9, 0.999, 1e-8, 0); }),
      {"apply_adam", "step"}));
  Tensor image = ops::zeros(backend(), Shape{1, 2, 2, 1});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::max_pool2d(image, {3, 3}, {1, 1});
                       }),
                       {"max_pool", "VALID"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::avg_pool2d(image, {1, 1}, {0, 1});
                       }),
                       {"avg_pool", "stride"}));
}

// Not per backend: it needs both.
TEST(CrossBackendErrorTest, InputsOnDifferentBackendsAreRejectedNamingBoth) {
  Backend& cpu = *test::backend("cpu");
  Backend& opaque = *test::backend("opaque");
  Tensor a = ops::ones(cpu, Shape{2, 2});
  Tensor b = ops::ones(opaque, Shape{2, 2});
  auto check = [&](const char* op, const std::function<void()>& fn) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(Mentions(invalid_argument_of(fn), {op, "f32[2, 2] on cpu", "f32[2, 2] on opaque"}));
  };
  check("add", [&] { ops::add(a, b); });
  check("add", [&] { ops::add(b, a); });
  check("matmul", [&] { ops::matmul(a, b); });
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::where(ops::less(a, a), b, b); }),
                       {"where", "bool[2, 2] on cpu", "f32[2, 2] on opaque"}));
  check("concat", [&] { ops::concat(std::vector<Tensor>{a, b}, 0); });
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::gather(a, ops::zeros(opaque, Shape{2}, DType::kI32)); }),
      {"gather", "f32[2, 2] on cpu", "i32[2] on opaque"}));
  check("sigmoid_cross_entropy_with_logits", [&] { ops::sigmoid_cross_entropy_with_logits(a, b); });
  check("apply_gradient_descent", [&] { ops::apply_gradient_descent(a, b, 0.1); });
  check("assign", [&] { ops::assign(a, b); });
  Tensor bias = ops::ones(opaque, Shape{2});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::matmul_bias_act(a, a, bias); }),
                       {"matmul_bias_act", "on cpu", "on opaque"}));
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

TEST_P(ParallelPathTest, ReductionsAndSoftmaxOnLargeInputs) {
  const Tolerance tol{1e-4, 1e-4};
  Array x = random_array({300, 200}, -1, 1, 6100);
  for (const Dims& axes : {Dims{0}, Dims{1}, Dims{}}) {
    SCOPED_TRACE("axes " + dims_string(axes));
    EXPECT_TRUE(Matches(ops::reduce_sum(tensor(x), axes), DType::kF32,
                        ref::reduce(x, axes, false, ref::Reduction::kSum), tol));
    EXPECT_TRUE(Matches(ops::reduce_max(tensor(x), axes), DType::kF32,
                        ref::reduce(x, axes, false, ref::Reduction::kMax), kExact));
    EXPECT_TRUE(Matches(ops::reduce_logsumexp(tensor(x), axes), DType::kF32,
                        ref::reduce(x, axes, false, ref::Reduction::kLogSumExp), tol));
  }
  Array y = random_array({40, 50, 30}, -1, 1, 6101);
  EXPECT_TRUE(Matches(ops::reduce_mean(tensor(y), {0, 2}, true), DType::kF32,
                      ref::reduce(y, {0, 2}, true, ref::Reduction::kMean), tol));
  EXPECT_TRUE(Matches(ops::reduce_min(tensor(y), {1}), DType::kF32,
                      ref::reduce(y, {1}, false, ref::Reduction::kMin), kExact));
  Array ties = random_ints({200, 300}, -3, 3, 6102);
  for (int64_t axis : {0, 1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    EXPECT_TRUE(
        Matches(ops::argmax(tensor(ties), axis), DType::kI64, ref::argmax(ties, axis), kExact));
    EXPECT_TRUE(
        Matches(ops::softmax(tensor(x), axis), DType::kF32, ref::softmax(x, axis, false), kF32));
    EXPECT_TRUE(
        Matches(ops::log_softmax(tensor(x), axis), DType::kF32, ref::softmax(x, axis, true), tol));
  }
  auto [values, indices] = ops::top_k(tensor(ties), 10);
  auto [ref_values, ref_indices] = ref::top_k(ties, 10);
  EXPECT_TRUE(Matches(values, DType::kF32, ref_values, kExact));
  EXPECT_TRUE(Matches(indices, DType::kI64, ref_indices, kExact));
}

TEST_P(ParallelPathTest, DataMovementOnLargeInputs) {
  Array x = random_array({60, 70, 20}, -1, 1, 6200);
  EXPECT_TRUE(Matches(ops::transpose(tensor(x), {2, 0, 1}), DType::kF32,
                      ref::transpose(x, {2, 0, 1}), kExact));
  EXPECT_TRUE(Matches(ops::transpose(tensor(x), {1, 0, 2}), DType::kF32,
                      ref::transpose(x, {1, 0, 2}), kExact));
  EXPECT_TRUE(Matches(ops::slice(tensor(x), {5, 3, 1}, {50, 60, 18}), DType::kF32,
                      ref::slice(x, {5, 3, 1}, {50, 60, 18}), kExact));
  EXPECT_TRUE(Matches(ops::pad(tensor(x), {{1, 2}, {0, 3}, {4, 0}}, -1.0), DType::kF32,
                      ref::pad(x, {{1, 2}, {0, 3}, {4, 0}}, -1.0), kExact));
  std::vector<Array> parts = {random_array({200, 100}, -1, 1, 6201),
                              random_array({200, 50}, -1, 1, 6202),
                              random_array({200, 100}, -1, 1, 6203)};
  EXPECT_TRUE(Matches(
      ops::concat(std::vector<Tensor>{tensor(parts[0]), tensor(parts[1]), tensor(parts[2])}, 1),
      DType::kF32, ref::concat(parts, 1), kExact));
  Array table = random_array({1000, 40}, -1, 1, 6204);
  Array ids = random_ints({900}, 0, 999, 6205);
  EXPECT_TRUE(Matches(ops::gather(tensor(table), tensor(ids, DType::kI64)), DType::kF32,
                      ref::gather(table, ids, 0), kExact));
  Array updates = random_array({40000}, -1, 1, 6206);
  Array buckets = random_ints({40000}, 0, 9, 6207);
  EXPECT_TRUE(Matches(ops::scatter_add(tensor(updates), tensor(buckets, DType::kI32), 0, Shape{10}),
                      DType::kF32, ref::scatter_add(updates, buckets, 0, {10}), {1e-3, 1e-4}));
  Array labels = random_ints({5000}, -1, 10, 6208);
  EXPECT_TRUE(Matches(ops::one_hot(tensor(labels, DType::kI32), 10), DType::kF32,
                      ref::one_hot(labels, 10, 1.0, 0.0), kExact));
}

TEST_P(ParallelPathTest, NnOpsAndUpdatesOnLargeInputs) {
  Array a = random_array({64, 128}, -1, 1, 6300);
  Array b = random_array({128, 96}, -1, 1, 6301);
  EXPECT_TRUE(Matches(ops::matmul(tensor(a), tensor(b)), DType::kF32,
                      ref::matmul(a, b, false, false), kF32Conv));
  Array input = random_array({1, 16, 16, 8}, -1, 1, 6302);
  Array filter = random_array({3, 3, 8, 8}, -1, 1, 6303);
  EXPECT_TRUE(Matches(ops::conv2d(tensor(input), tensor(filter), {1, 1}, Padding2D::same()),
                      DType::kF32, ref::conv2d(input, filter, ref::same_window(16, 16, 3, 3, 1, 1)),
                      kF32Conv));
  Array images = random_array({2, 40, 50, 10}, -1, 1, 6304);
  ref::Window same = ref::same_window(40, 50, 3, 3, 2, 2);
  EXPECT_TRUE(Matches(ops::max_pool2d(tensor(images), {3, 3}, {2, 2}, Padding2D::same()),
                      DType::kF32, ref::pool2d(images, 3, 3, same, false), kExact));
  EXPECT_TRUE(Matches(ops::avg_pool2d(tensor(images), {3, 3}, {2, 2}, Padding2D::same()),
                      DType::kF32, ref::pool2d(images, 3, 3, same, true), kF32));
  Array x = random_array({600, 64}, -2, 3, 6305);
  Array gamma = random_array({64}, 0.5, 1.5, 6306), beta = random_array({64}, -1, 1, 6307);
  ref::BatchNorm bn = ref::batch_norm_training(x, gamma, beta, 1e-3);
  ops::BatchNormResult r = ops::batch_norm_training(tensor(x), tensor(gamma), tensor(beta));
  EXPECT_TRUE(Matches(r.y, DType::kF32, bn.y, {1e-4, 1e-4}));
  EXPECT_TRUE(Matches(r.batch_mean, DType::kF32, bn.mean, {1e-5, 1e-4}));
  EXPECT_TRUE(Matches(r.batch_variance, DType::kF32, bn.variance, {1e-5, 1e-4}));
  Array var = random_array({50000}, -1, 1, 6308), grad = random_array({50000}, -1, 1, 6309);
  Array m = ref::filled({50000}, 0.0), v = m;
  Tensor tv = tensor(var), tm = tensor(m), tvv = tensor(v);
  ops::apply_adam(tv, tm, tvv, tensor(grad), 0.01, 0.9, 0.999, 1e-7, 1);
  ref::adam(var, m, v, grad, 0.01, 0.9, 0.999, 1e-7, 1);
  EXPECT_TRUE(Matches(tv, DType::kF32, var, kF32));
  EXPECT_TRUE(Matches(tvv, DType::kF32, v, kF32));
}

TEST_P(ParallelPathTest, LargeRandomDrawsFollowThePhiloxMappingEverywhere) {
  const uint64_t seed = 99, counter = 7;
  const int64_t n = 100003;
  Generator g(seed, counter);
  Array uniform = read(ops::random_uniform(backend(), Shape{n}, g));
  g.set_state(seed, counter);
  Array normal = read(ops::random_normal(backend(), Shape{n}, g, 0, 1, DType::kF64));
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto u = static_cast<uint64_t>(i);
    auto k = static_cast<std::size_t>(i);
    random::Block b = random::philox4x32_10(seed, counter + u / 4);
    random::Block bn = random::philox4x32_10(seed, counter + u);
    if (uniform.values[k] != random::uniform_f32(b[u % 4]) ||
        normal.values[k] != random::normal_from(bn[0], bn[1])) {
      if (mismatches++ < 5) ADD_FAILURE() << "element " << i << " does not follow random.h";
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// =============================================================================================
// Determinism: the same chain of ops on the same inputs gives the same bits

std::vector<std::vector<std::byte>> run_chain(Backend& backend) {
  Generator g(2024);
  Tensor x = ops::random_normal(backend, Shape{4, 8, 8, 3}, g);
  Tensor filter = ops::truncated_normal(backend, Shape{3, 3, 3, 4}, g, 0, 0.3);
  Tensor y = ops::conv2d(x, filter, {1, 1}, Padding2D::same());  // 1
  y = ops::batch_norm_training(y, ops::ones(backend, Shape{4}), ops::zeros(backend, Shape{4}))
          .y;                              // 2
  y = ops::relu(y);                        // 3
  y = ops::max_pool2d(y, {2, 2}, {2, 2});  // 4
  y = ops::reshape(y, Shape{4, -1});       // 5
  Tensor w = ops::random_uniform(backend, Shape{64, 10}, g, -0.2, 0.2);
  Tensor bias = ops::random_uniform(backend, Shape{10}, g, -0.1, 0.1);
  Tensor h = ops::matmul_bias_act(y, w, bias, Activation::kTanh);                       // 6
  Tensor s = ops::softmax(h);                                                           // 7
  Tensor ls = ops::log_softmax(h, 0);                                                   // 8
  Tensor d = ops::dropout(h, 0.3, g, true);                                             // 9
  Tensor t = ops::transpose(ops::reshape(d, Shape{4, 2, 5}), {2, 0, 1});                // 10
  Tensor c = ops::concat(std::vector<Tensor>{t, ops::exp(t)}, 1);                       // 11, 12
  Tensor r = ops::reduce_logsumexp(c, {0});                                             // 13
  auto [top_values, top_indices] = ops::top_k(h, 3);                                    // 14
  Tensor gathered = ops::gather(s, top_indices, 1);                                     // 15
  Tensor n = ops::l2_normalize(ops::avg_pool2d(x, {3, 3}, {2, 2}, Padding2D::same()));  // 16, 17
  Tensor loss = ops::reduce_mean(ops::sigmoid_cross_entropy_with_logits(s, h));         // 18, 19
  Tensor p = ops::matmul(ops::slice_outer(ls, 1, 3), ls, false, true);                  // 20
  std::vector<std::vector<std::byte>> out;
  for (const Tensor& result : {s, ls, d, c, r, top_values, top_indices, gathered, n, loss, p}) {
    out.push_back(bytes_of(result));
  }
  return out;
}

// The opaque backend runs the cpu kernels on copies: any difference is the core's or a copy's.
TEST(CrossBackendDeterminismTest, ChainGivesTheSameBitsOnEveryBackend) {
  std::vector<std::vector<std::byte>> cpu = run_chain(*test::backend("cpu"));
  for (const std::string& name : test::backend_names()) {
    SCOPED_TRACE(name);
    std::vector<std::vector<std::byte>> other = run_chain(*test::backend(name));
    ASSERT_EQ(cpu.size(), other.size());
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_EQ(cpu[i], other[i]) << "result " << i << " of the chain differs from cpu's";
    }
  }
}

TEST_P(DeterminismTest, ChainOfOpsRunTwiceIsBitwiseEqual) {
  std::vector<std::vector<std::byte>> first = run_chain(backend());
  std::vector<std::vector<std::byte>> second = run_chain(backend());
  ASSERT_EQ(first.size(), second.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i], second[i]) << "result " << i << " of the chain differs between runs";
  }
}

}  // namespace
}  // namespace trainyard
