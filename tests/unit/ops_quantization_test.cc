// The quantization ops (ops/quantization.h) on every test backend: fake_quant_with_min_max_vars
// and its per-channel form, and their gradients for the inputs, min and max, against TensorFlow
// 2.21's own outputs, bit for bit, on the golden inputs of
// tests/golden/make_fake_quant_goldens.py (range ends, levels, half-steps, nudged ranges, 2 to 16
// bits, narrow and full range, scales subnormal in f32); a range nudged by hand; and the arguments
// TensorFlow refuses.
// ops_test_util.h has what the ops_<family>_test.cc files share.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops_test_util.h"
#include "trainyard/autodiff.h"
#include "trainyard/ops.h"

namespace trainyard::test {
namespace {

TRAINYARD_BACKEND_SUITE(FakeQuantTest);

const std::string kGolden = std::string(TRAINYARD_SOURCE_DIR) + "/tests/golden/fake_quant/";

std::vector<float> golden(const std::string& name, std::size_t count) {
  std::ifstream in(kGolden + name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + kGolden + name);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  if (bytes.size() != count * sizeof(float)) {
    throw std::runtime_error(kGolden + name + ": " + std::to_string(bytes.size()) +
                             " bytes, expected " + std::to_string(count * sizeof(float)));
  }
  std::vector<float> values(count);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

Tensor f32_tensor(Backend& backend, const Dims& shape, const std::vector<float>& values) {
  return Tensor::from_host(backend, Shape(shape), DType::kF32, values.data(),
                           values.size() * sizeof(float));
}

// Equal bit patterns (so -0 is not 0), any NaN matching any NaN (a device's NaN need not carry
// x86's payload); else the first differences, with the inputs there.
::testing::AssertionResult SameBits(const Tensor& actual, const std::vector<float>& expected,
                                    const std::vector<float>& x, const std::string& what) {
  std::vector<float> got(static_cast<std::size_t>(actual.num_elements()));
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " values, expected " << expected.size();
  }
  actual.to_host(got.data(), got.size() * sizeof(float));
  std::size_t bad = 0;
  auto failure = ::testing::AssertionFailure();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(expected[i])) continue;
    if (std::memcmp(&got[i], &expected[i], sizeof(float)) != 0) {
      if (bad++ < 5) {
        failure << what << "[" << i << "] = " << got[i] << ", TensorFlow " << expected[i]
                << (i < x.size() ? " (x = " + std::to_string(x[i]) + ")" : "") << "; ";
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return failure << bad << " of " << got.size() << " differ";
}

// The cases of the golden script (its CASES): name, per channel, shape, num_bits, narrow_range.
struct GoldenCase {
  const char* name;
  bool per_channel;
  Dims shape;
  int num_bits;
  bool narrow_range;
};

const GoldenCase kCases[] = {
    {"vars_b8_sym", false, {6, 40}, 8, false},
    {"vars_b8_sym_narrow", false, {6, 40}, 8, true},
    {"vars_b8_offset", false, {5, 48}, 8, false},
    {"vars_b8_min_positive", false, {5, 48}, 8, false},
    {"vars_b8_max_negative", false, {5, 48}, 8, true},
    {"vars_b4_offset", false, {4, 30}, 4, false},
    {"vars_b4_narrow", false, {4, 30}, 4, true},
    {"vars_b2_wide", false, {3, 20}, 2, false},
    {"vars_b16_offset", false, {3, 40}, 16, false},
    {"vars_b8_zero_range", false, {2, 10}, 8, false},
    {"per_channel_b8", true, {3, 2, 5, 6}, 8, false},
    {"per_channel_b8_narrow", true, {4, 9, 6}, 8, true},
    {"per_channel_b4", true, {60, 4}, 4, false},
    {"per_channel_b4_narrow", true, {2, 30, 4}, 4, true},
    {"per_channel_1d", true, {3}, 8, false},
    {"vars_b8_subnormal_scale", false, {4, 10}, 8, false},
    {"vars_b2_subnormal_inv_scale", false, {4, 10}, 2, false},
    {"per_channel_b8_subnormal_scale", true, {10, 3}, 8, false},
    {"per_channel_b2_subnormal", true, {12, 3}, 2, false},
};

TEST_P(FakeQuantTest, OutputsAndGradientsAreTensorFlowsBitForBit) {
  for (const GoldenCase& k : kCases) {
    SCOPED_TRACE(k.name);
    const std::string name = k.name;
    int64_t elements = 1;
    for (int64_t d : k.shape) elements *= d;
    const auto count = static_cast<std::size_t>(elements);
    const Dims range = k.per_channel ? Dims{k.shape.back()} : Dims{};
    const std::size_t channels = k.per_channel ? static_cast<std::size_t>(k.shape.back()) : 1;
    const std::vector<float> x = golden(name + "_x.f32", count);
    const std::vector<float> dy = golden(name + "_dy.f32", count);
    Tensor xt = f32_tensor(backend(), k.shape, x);
    Tensor lo = f32_tensor(backend(), range, golden(name + "_min.f32", channels));
    Tensor hi = f32_tensor(backend(), range, golden(name + "_max.f32", channels));
    for (Tensor* t : {&xt, &lo, &hi}) t->set_requires_grad(true);
    Tensor y =
        k.per_channel
            ? ops::fake_quant_with_min_max_vars_per_channel(xt, lo, hi, k.num_bits, k.narrow_range)
            : ops::fake_quant_with_min_max_vars(xt, lo, hi, k.num_bits, k.narrow_range);
    EXPECT_TRUE(SameBits(y, golden(name + "_y.f32", count), x, "outputs"));
    // d sum(y dy) / dy is dy itself: the gradient op runs on TensorFlow's output gradient.
    const std::vector<Tensor> g =
        gradients(ops::reduce_sum(ops::mul(y, f32_tensor(backend(), k.shape, dy))),
                  std::vector<Tensor>{xt, lo, hi});
    ASSERT_EQ(g.size(), 3u);
    EXPECT_TRUE(SameBits(g[0], golden(name + "_dx.f32", count), x, "d inputs"));
    EXPECT_TRUE(SameBits(g[1], golden(name + "_dmin.f32", channels), {}, "d min"));
    EXPECT_TRUE(SameBits(g[2], golden(name + "_dmax.f32", channels), {}, "d max"));
  }
}

TEST_P(FakeQuantTest, RangeIsNudgedToPutZeroOnALevel) {
  // [-1, 1] in 8 bits: scale 2 / 255; the zero point 1 / scale is 127.49999 in f32 (127.5
  // exactly), which rounds to 127, so the range becomes [-127, 128] scale, as in TensorFlow. 0.5
  // lies 63.75 levels up and goes to level 64, 0.9 to level 115 (114.75).
  const float scale = 2.0f / 255.0f;
  const Array x{{5}, {-3.0, -1.0, 0.0, 0.5, 0.9}};
  const Array expected{
      {5},
      {static_cast<double>(-127.0f * scale), static_cast<double>(-127.0f * scale), 0.0,
       static_cast<double>(64.0f * scale), static_cast<double>(115.0f * scale)}};
  EXPECT_TRUE(MatchesResultOf(
      [&] {
        return ops::fake_quant_with_min_max_vars(tensor(x), tensor(Array{{}, {-1.0}}),
                                                 tensor(Array{{}, {1.0}}));
      },
      DType::kF32, expected, kF32));
  // min > 0: the range starts at 0 and keeps its width.
  EXPECT_TRUE(MatchesResultOf(
      [&] {
        return ops::fake_quant_with_min_max_vars(tensor(Array{{3}, {-1.0, 0.25, 9.0}}),
                                                 tensor(Array{{}, {1.0}}), tensor(Array{{}, {4.0}}),
                                                 2);
      },
      DType::kF32, Array{{3}, {0.0, 0.0, 3.0}}, kExact));
}

TEST_P(FakeQuantTest, ArgumentsTensorFlowRefusesAreInvalidArgument) {
  const Tensor x = tensor(Array{{2, 3}, std::vector<double>(6, 0.5)});
  const Tensor lo = tensor(Array{{}, {-1.0}}), hi = tensor(Array{{}, {1.0}});
  const char* op = "fake_quant_with_min_max_vars";
  for (int bits : {1, 17}) {
    EXPECT_TRUE(
        Mentions(invalid_argument_of([&] { ops::fake_quant_with_min_max_vars(x, lo, hi, bits); }),
                 {op, "num_bits", "between 2 and 16", std::to_string(bits)}));
  }
  EXPECT_EQ(invalid_argument_of([&] { ops::fake_quant_with_min_max_vars(x, lo, hi, 16); }),
            "(no error)");
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::fake_quant_with_min_max_vars(x, tensor(Array{{1}, {-1.0}}), hi);
                       }),
                       {op, "min", "[]", "[1]"}));
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] {
                 ops::fake_quant_with_min_max_vars(x, lo, tensor(Array{{}, {1.0}}, DType::kF64));
               }),
               {op, "max", "f64"}));
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] {
                 ops::fake_quant_with_min_max_vars(tensor(Array{{2}, {1, 2}}, DType::kI32), lo, hi);
               }),
               {op, "float"}));
  const char* pc = "fake_quant_with_min_max_vars_per_channel";
  const Tensor lo3 = tensor(Array{{3}, {-1, -1, -1}}), hi3 = tensor(Array{{3}, {1, 1, 1}});
  EXPECT_EQ(invalid_argument_of(
                [&] { ops::fake_quant_with_min_max_vars_per_channel(x, lo3, hi3, 4, true); }),
            "(no error)");
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::fake_quant_with_min_max_vars_per_channel(x, lo, hi3); }),
      {pc, "min", "[3]"}));
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] {
                 ops::fake_quant_with_min_max_vars_per_channel(x, lo3, tensor(Array{{2}, {1, 1}}));
               }),
               {pc, "max", "[3]", "[2]"}));
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] {
                 ops::fake_quant_with_min_max_vars_per_channel(tensor(Array{{}, {0.5}}), lo3, hi3);
               }),
               {pc, "rank"}));
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::fake_quant_with_min_max_vars_per_channel(x, lo3, hi3, 0); }),
      {pc, "num_bits"}));
}

}  // namespace
}  // namespace trainyard::test
