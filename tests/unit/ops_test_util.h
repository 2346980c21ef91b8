// What the forward op tests share: ops_<family>_test.cc (one per op family, mirroring
// core/src/engine/ops/<family>.cc) and ops_cross_family_test.cc. Together they test the forward
// pass of every op in ops.h on every test backend ("cpu" and the scrambled-memory "opaque" fixture)
// against the plain reference loops of reference_ops.h: values, output shapes and dtypes,
// broadcasting and zero-element corner cases, views at non-zero byte offsets, the documented
// Philox mapping of the random ops, the optimizer formulas of op.h, the errors (op, shapes,
// dtypes, axes and devices named; nothing aborts) and a bitwise determinism rerun.
//
// A failure names the backend (test parameter), the op and its arguments (SCOPED_TRACE), the
// result tensor and the first differing elements: a one-line repro.
#ifndef TRAINYARD_TESTS_UNIT_OPS_TEST_UTIL_H_
#define TRAINYARD_TESTS_UNIT_OPS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference_ops.h"
#include "test_backends.h"
#include "trainyard/backend.h"
#include "trainyard/error.h"
#include "trainyard/tensor.h"
#include "trainyard/testing.h"

namespace trainyard::test {

namespace ref = reference;
using ref::Array;
using ref::Dims;

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// |actual - expected| <= atol + rtol * |expected| per element.
struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

inline constexpr Tolerance kExact{0.0, 0.0};
inline constexpr Tolerance kF32{1e-6, 1e-5};      // one f32 rounding per element
inline constexpr Tolerance kF32Sum{1e-5, 1e-5};   // f32 sums over a few dozen terms
inline constexpr Tolerance kF32Conv{1e-4, 1e-4};  // f32 conv / matmul, accumulation order free
inline constexpr Tolerance kF64{1e-12, 1e-12};

inline Tolerance tolerance_for(DType dtype, Tolerance f32) {
  return dtype == DType::kF64 ? kF64 : f32;
}

// ---- Host data ----

// Uniform in [low, high), rounded to f32 so that f32 and f64 tensors hold exactly the values
// the reference sees.
inline std::vector<double> random_values(int64_t n, double low, double high, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<double> distribution(low, high);
  std::vector<double> values(static_cast<std::size_t>(n));
  for (double& v : values) v = static_cast<double>(static_cast<float>(distribution(engine)));
  return values;
}

inline Array random_array(const Dims& shape, double low, double high, uint32_t seed) {
  return {shape, random_values(ref::count(shape), low, high, seed)};
}

// Whole numbers in [low, high], for integer tensors, indices and ties.
inline Array random_ints(const Dims& shape, int64_t low, int64_t high, uint32_t seed) {
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

inline Tensor to_device(Backend& backend, const Array& a, DType dtype) {
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
inline Array read(const Tensor& t) {
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

inline std::vector<std::byte> bytes_of(const Tensor& t) {
  std::vector<std::byte> bytes(t.size_bytes());
  t.to_host(bytes.data(), bytes.size());
  return bytes;
}

inline std::string dims_string(const Dims& dims) { return Shape(dims).to_string(); }

// The result has `dtype`, the reference's shape and values within `tolerance`.
inline ::testing::AssertionResult Matches(const Tensor& actual, DType dtype, const Array& expected,
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

inline ::testing::AssertionResult Mentions(const std::string& message,
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

inline std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace trainyard::test

// A suite of OpTest that runs once per backend ("Backends/Suite.Test/cpu").
#define TRAINYARD_BACKEND_SUITE(Suite)                                              \
  class Suite : public ::trainyard::test::OpTest {};                                \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite,                                         \
                           ::testing::ValuesIn(::trainyard::test::backend_names()), \
                           ::trainyard::test::backend_test_name)

#endif  // TRAINYARD_TESTS_UNIT_OPS_TEST_UTIL_H_
