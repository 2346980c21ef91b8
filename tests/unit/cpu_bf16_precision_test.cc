// The cpu backend's bf16 precision policy (backends/cpu/compute_precision.h; --precision,
// backend.precision): matmul, matmul_bias_act and conv2d with both gradients computed in bf16
// from f32 tensors stay within bf16's error bound of the exact result and really are computed in
// bf16; the conversion rounds to nearest even; the f32 policy gives the same bits as a default
// backend whatever ran before; a CPU without bf16 gets an error naming the flag, or f32 with a
// warning under bf16_or_f32; and training LogisticModel and MoeModel with bf16 reaches the GAP of
// f32 training on the same data and steps, with f32 checkpoints.
//
// The bound. bf16 keeps 8 significant bits, so rounding an f32 to it (to nearest) has a relative
// error up to u = 2^-8, and the product of two rounded inputs one up to 2u + u^2 = 2^-7 + 2^-16.
// oneDNN accumulates the products in f32 (k products: up to about k * 2^-24 of their absolute
// sum). So every output is within (2^-7 + 2^-16 + (k + 2) * 2^-24) * sum_i |a_i| |b_i| of the
// exact value; the sums of absolute products come from the same op in f64 on |a| and |b| (for a
// gradient, on |dy| too: the ops are linear in each input). The tests also check the normwise
// relative error against 1e-2, and pin the policy down: every output is within the f32
// accumulation bound alone ((k + 2) * 2^-24 of the same sum) of the exact result of the inputs
// rounded to bf16 on the host (to nearest even), which an f32 computation does not meet.
//
// Tests that need bf16 skip, saying why, on a CPU where oneDNN cannot compute in it natively.
// The refusals are checked on this CPU too, in a child process that lowers oneDNN's ISA with
// ONEDNN_MAX_CPU_ISA=AVX512_CORE.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "data_tools.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/config.h"
#include "trainyard/core/evaluator.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/training_loop.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

PluginRegistry& registry() {
  static PluginRegistry* r = [] {
    PluginRegistry::Settings settings;
    settings.use_environment = false;
    return new PluginRegistry(settings);
  }();
  return *r;
}

std::shared_ptr<Backend> cpu_with(const std::string& precision) {
  return registry().create<Backend>(ClassKind::kBackend, "cpu", {{"precision", precision}});
}

// The bf16 backend, or nullptr with the reason when this CPU cannot compute in bf16.
std::shared_ptr<Backend> bf16_backend(std::string* why) {
  try {
    return cpu_with("bf16");
  } catch (const Error& e) {
    *why = e.what();
    return nullptr;
  }
}

// Whether /proc/cpuinfo lists AVX-512 BF16 (or AMX BF16) for this CPU.
bool cpuinfo_has_bf16() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    return line.find(" avx512_bf16") != std::string::npos ||
           line.find(" amx_bf16") != std::string::npos;
  }
  return false;
}

// A CPU with bf16 instructions on which the backend refuses bf16 is a failure, not a skip (the
// skip would hide the bf16 path in CI); only a CPU without them skips, saying so.
#define REQUIRE_BF16(backend)                                                                    \
  std::string why_no_bf16;                                                                       \
  std::shared_ptr<Backend> backend = bf16_backend(&why_no_bf16);                                 \
  if (!backend) {                                                                                \
    if (cpuinfo_has_bf16()) {                                                                    \
      FAIL() << "this CPU has bf16 instructions (/proc/cpuinfo) but the cpu backend refused "    \
                "precision bf16: "                                                               \
             << why_no_bf16;                                                                     \
    }                                                                                            \
    GTEST_SKIP() << "this CPU lacks AVX-512 BF16 and AMX BF16 (/proc/cpuinfo): " << why_no_bf16; \
  }

// Values exactly representable in f32, uniform in [-1, 1].
std::vector<double> random_values(int64_t n, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> distribution(-1.0f, 1.0f);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = distribution(engine);
  return v;
}

std::vector<double> absolute(std::vector<double> v) {
  for (double& x : v) x = std::abs(x);
  return v;
}

struct Operand {
  std::vector<int64_t> dims;
  std::vector<double> values;
};

Operand random_operand(std::vector<int64_t> dims, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return {dims, random_values(n, seed)};
}

Tensor to_tensor(Backend& backend, const std::vector<int64_t>& dims,
                 const std::vector<double>& values, DType dtype) {
  if (dtype == DType::kF64) return Tensor::from_vector<double>(backend, Shape(dims), values);
  std::vector<float> f(values.begin(), values.end());
  return Tensor::from_vector<float>(backend, Shape(dims), f);
}

std::vector<double> to_doubles(const Tensor& t) {
  if (t.dtype() == DType::kF64) return t.to_vector<double>();
  std::vector<float> f = t.to_vector<float>();
  return {f.begin(), f.end()};
}

// An op of two inputs whose output and two gradients are checked.
using BinaryOp = std::function<Tensor(const Tensor&, const Tensor&)>;

struct Results {
  std::vector<double> y, da, db;
};

// The f32 value `x` rounded to bf16 (to nearest, ties to even), as oneDNN converts.
double round_to_bf16(double x) {
  const auto f = static_cast<float>(x);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  float r;
  std::memcpy(&r, &bits, sizeof(r));
  return r;
}

std::vector<double> rounded_to_bf16(std::vector<double> v) {
  for (double& x : v) x = round_to_bf16(x);
  return v;
}

enum class DyValues { kAsDrawn, kAbsolute, kRoundedToBf16 };

// op(a, b) and its gradients for the output gradient `dy` (random values of the output's shape
// drawn from `dy_seed`, or their absolute values, or those rounded to bf16) on `backend` in
// `dtype`.
Results run(Backend& backend, DType dtype, const BinaryOp& op, const Operand& a, const Operand& b,
            uint32_t dy_seed, DyValues dy_values = DyValues::kAsDrawn) {
  Tensor ta = to_tensor(backend, a.dims, a.values, dtype);
  Tensor tb = to_tensor(backend, b.dims, b.values, dtype);
  ta.set_requires_grad(true);
  tb.set_requires_grad(true);
  Tensor y = op(ta, tb);
  std::vector<int64_t> y_dims(y.shape().dims().begin(), y.shape().dims().end());
  std::vector<double> dy = random_values(y.num_elements(), dy_seed);
  if (dy_values == DyValues::kAbsolute) dy = absolute(dy);
  if (dy_values == DyValues::kRoundedToBf16) dy = rounded_to_bf16(dy);
  const Tensor sources[] = {ta, tb};
  std::vector<Tensor> grads = gradients(y, sources, to_tensor(backend, y_dims, dy, dtype));
  return {to_doubles(y), to_doubles(grads[0]), to_doubles(grads[1])};
}

// The bound of the error of a sum of `k` products of f32 inputs rounded to bf16, accumulated in
// f32, relative to the sum of their absolute values.
double bf16_bound(int64_t k) {
  return std::ldexp(1.0, -7) + std::ldexp(1.0, -16) +
         static_cast<double>(k + 2) * std::ldexp(1.0, -24);
}

// The bound of f32 accumulation alone (inputs already bf16, so their products exact), relative
// to the same sum (with 1% for the rounded inputs' larger absolute values).
double f32_accumulation_bound(int64_t k) {
  return 1.01 * static_cast<double>(k + 2) * std::ldexp(1.0, -24);
}

// Checks that every element of `got` is within `bound` x `scale` of `expected`; with
// `normwise`, also that the normwise relative error is under 1e-2.
void expect_within(const std::vector<double>& got, const std::vector<double>& expected,
                   const std::vector<double>& scale, double bound, bool normwise,
                   const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  double diff2 = 0, expected2 = 0;
  int64_t outside = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(got[i] - expected[i]);
    if (error > bound * scale[i] && outside++ < 3) {
      ADD_FAILURE() << what << " element " << i << ": " << got[i] << ", expected " << expected[i]
                    << ", error " << error << " over the bound " << bound * scale[i];
    }
    diff2 += (got[i] - expected[i]) * (got[i] - expected[i]);
    expected2 += expected[i] * expected[i];
  }
  EXPECT_EQ(outside, 0) << what << ": elements outside " << bound << " x their scale";
  if (normwise) {
    EXPECT_LT(std::sqrt(diff2 / expected2), 1e-2) << what << ": normwise relative error";
  }
}

// op in bf16, output and both gradients: within bf16_bound of the exact (f64) results, and
// within f32_accumulation_bound of the exact results of the inputs (and output gradient) rounded
// to bf16 first, which pins down the policy (bf16 inputs rounded to nearest even, f32 sums); `k`
// bounds the number of products in any element of the three.
void expect_bf16_matches_exact(Backend& bf16, const BinaryOp& op, const Operand& a,
                               const Operand& b, int64_t k, const std::string& what) {
  std::shared_ptr<Backend> f32 = cpu_with("f32");
  const uint32_t dy_seed = 77;
  const Results got = run(bf16, DType::kF32, op, a, b, dy_seed);
  const Results exact = run(*f32, DType::kF64, op, a, b, dy_seed);
  const Results of_bf16 =
      run(*f32, DType::kF64, op, {a.dims, rounded_to_bf16(a.values)},
          {b.dims, rounded_to_bf16(b.values)}, dy_seed, DyValues::kRoundedToBf16);
  const Results scale = run(*f32, DType::kF64, op, {a.dims, absolute(a.values)},
                            {b.dims, absolute(b.values)}, dy_seed, DyValues::kAbsolute);
  const std::vector<double> Results::*outputs[] = {&Results::y, &Results::da, &Results::db};
  const char* names[] = {" output", " gradient of input 0", " gradient of input 1"};
  for (int i = 0; i < 3; ++i) {
    const auto& field = outputs[i];
    expect_within(got.*field, exact.*field, scale.*field, bf16_bound(k), true,
                  what + names[i] + " against the exact result");
    expect_within(got.*field, of_bf16.*field, scale.*field, f32_accumulation_bound(k), false,
                  what + names[i] + " against the exact result of bf16 inputs");
  }
}

BinaryOp matmul_op(bool ta, bool tb) {
  return [=](const Tensor& a, const Tensor& b) { return ops::matmul(a, b, ta, tb); };
}

BinaryOp conv_op(std::pair<int64_t, int64_t> strides, Padding2D padding, int64_t groups = 1) {
  return [=](const Tensor& x, const Tensor& w) {
    return ops::conv2d(x, w, strides, padding, {1, 1}, groups);
  };
}

TEST(CpuBf16PrecisionTest, MatmulAndGradientsWithinTheBf16Bound) {
  REQUIRE_BF16(bf16);
  const int64_t m = 64, k = 96, n = 80;
  uint32_t seed = 1;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Operand a =
          random_operand(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, seed++);
      const Operand b =
          random_operand(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, seed++);
      expect_bf16_matches_exact(*bf16, matmul_op(ta, tb), a, b, std::max({m, k, n}),
                                std::string("matmul transpose_a ") + (ta ? "1" : "0") +
                                    " transpose_b " + (tb ? "1" : "0"));
    }
  }
  // Batched operands, and a rank-2 b shared by every batch (stacked into one GEMM).
  expect_bf16_matches_exact(*bf16, matmul_op(false, false), random_operand({3, 16, 24}, 101),
                            random_operand({3, 24, 20}, 102), 48, "batched matmul");
  expect_bf16_matches_exact(*bf16, matmul_op(false, false), random_operand({3, 16, 24}, 103),
                            random_operand({24, 20}, 104), 48, "matmul with a shared b");
  // The YouTube-8M LogisticModel's shapes, smaller batch: [32, 1152] x [1152, 3862].
  expect_bf16_matches_exact(*bf16, matmul_op(false, false), random_operand({32, 1152}, 105),
                            random_operand({1152, 3862}, 106), 3862, "matmul 1152 -> 3862");
}

TEST(CpuBf16PrecisionTest, MatmulBiasReluWithinTheBf16Bound) {
  REQUIRE_BF16(bf16);
  std::shared_ptr<Backend> f32 = cpu_with("f32");
  const Operand x = random_operand({48, 72}, 11), w = random_operand({72, 40}, 12),
                bias = random_operand({40}, 13);
  auto with = [&](Backend& backend, DType dtype, const Operand& xo, const Operand& wo) {
    return to_doubles(ops::matmul_bias_act(to_tensor(backend, xo.dims, xo.values, dtype),
                                           to_tensor(backend, wo.dims, wo.values, dtype),
                                           to_tensor(backend, bias.dims, bias.values, dtype),
                                           Activation::kRelu));
  };
  const std::vector<double> got = with(*bf16, DType::kF32, x, w);
  // Exact: relu(x w + bias) in f64; relu is 1-Lipschitz, so the product's bound carries over,
  // plus the f32 rounding of the sum with the bias (2^-24 of |x w| + |bias|).
  const std::vector<double> product =
      to_doubles(ops::matmul(to_tensor(*f32, x.dims, x.values, DType::kF64),
                             to_tensor(*f32, w.dims, w.values, DType::kF64)));
  const std::vector<double> scale =
      to_doubles(ops::matmul(to_tensor(*f32, x.dims, absolute(x.values), DType::kF64),
                             to_tensor(*f32, w.dims, absolute(w.values), DType::kF64)));
  std::vector<double> exact(product.size()), bounded_scale(product.size());
  for (std::size_t i = 0; i < product.size(); ++i) {
    const double b = bias.values[i % 40];
    exact[i] = std::max(product[i] + b, 0.0);
    bounded_scale[i] = scale[i] + std::abs(b);
  }
  expect_within(got, exact, bounded_scale, bf16_bound(72), true, "matmul_bias_act relu");
  // The bf16 path ran: f32 inputs give other bits.
  EXPECT_NE(got, with(*f32, DType::kF32, x, w)) << "matmul_bias_act relu: bf16 gave f32's bits";
}

TEST(CpuBf16PrecisionTest, Conv2dAndGradientsWithinTheBf16Bound) {
  REQUIRE_BF16(bf16);
  // ResNet-20's 3x3 convolutions (same padding), a strided 1x1 projection, a valid 5x5.
  expect_bf16_matches_exact(*bf16, conv_op({1, 1}, Padding2D::same()),
                            random_operand({4, 12, 12, 16}, 21), random_operand({3, 3, 16, 32}, 22),
                            4 * 12 * 12, "conv2d 3x3 same");
  expect_bf16_matches_exact(*bf16, conv_op({2, 2}, Padding2D::valid()),
                            random_operand({4, 12, 12, 16}, 23), random_operand({1, 1, 16, 32}, 24),
                            4 * 6 * 6, "conv2d 1x1 stride 2");
  expect_bf16_matches_exact(*bf16, conv_op({1, 1}, Padding2D::valid()),
                            random_operand({2, 11, 9, 8}, 25), random_operand({5, 5, 8, 16}, 26),
                            2 * 7 * 5 * 25, "conv2d 5x5 valid");
}

TEST(CpuBf16PrecisionTest, ConversionRoundsToNearestEven) {
  REQUIRE_BF16(bf16);
  // a [1, 8] times the identity: each output is a's element as bf16, exactly (1 and the products
  // by 0 are exact, and so is the f32 sum). bf16's spacing in [1, 2) is 2^-7.
  const double u = std::ldexp(1.0, -8);
  const std::vector<double> a = {1 + u,
                                 1 + 3 * u,
                                 1 + u + std::ldexp(1.0, -20),
                                 1 + 3 * u - std::ldexp(1.0, -20),
                                 -(1 + u),
                                 -(1 + 3 * u),
                                 1.5 + u,
                                 3.0};
  const std::vector<double> expected = {1,  1 + 4 * u,    1 + 2 * u, 1 + 2 * u,
                                        -1, -(1 + 4 * u), 1.5,       3.0};
  std::vector<double> identity(64, 0.0);
  for (int i = 0; i < 8; ++i) identity[static_cast<std::size_t>(i * 9)] = 1.0;
  const std::vector<double> got = to_doubles(ops::matmul(
      to_tensor(*bf16, {1, 8}, a, DType::kF32), to_tensor(*bf16, {8, 8}, identity, DType::kF32)));
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(got[i], expected[i]) << "bf16 of " << a[i];
  }
}

// The same shapes as the bf16 tests, computed by a backend of the f32 policy, by a default
// backend, and by the f32 backend again after the bf16 backend ran them: the f32 kernels and
// their cached primitives are those of a backend without the policy.
TEST(CpuBf16PrecisionTest, F32PolicyGivesTheDefaultBackendsBits) {
  std::shared_ptr<Backend> f32 = cpu_with("f32");
  std::shared_ptr<Backend> plain = registry().create<Backend>(ClassKind::kBackend, "cpu");
  struct Case {
    BinaryOp op;
    Operand a, b;
  };
  const std::vector<Case> cases = {
      {matmul_op(false, false), random_operand({64, 96}, 31), random_operand({96, 80}, 32)},
      {matmul_op(true, true), random_operand({96, 64}, 33), random_operand({80, 96}, 34)},
      {conv_op({1, 1}, Padding2D::same()), random_operand({4, 12, 12, 16}, 35),
       random_operand({3, 3, 16, 32}, 36)},
      {conv_op({2, 2}, Padding2D::valid()), random_operand({4, 12, 12, 16}, 37),
       random_operand({1, 1, 16, 32}, 38)},
  };
  std::vector<Results> before;
  for (const Case& c : cases) before.push_back(run(*f32, DType::kF32, c.op, c.a, c.b, 5));
  std::string why_no_bf16;
  std::shared_ptr<Backend> bf16 = bf16_backend(&why_no_bf16);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Results default_backend = run(*plain, DType::kF32, c.op, c.a, c.b, 5);
    std::vector<double> bf16_y;
    if (bf16) bf16_y = run(*bf16, DType::kF32, c.op, c.a, c.b, 5).y;
    const Results after = run(*f32, DType::kF32, c.op, c.a, c.b, 5);
    const std::string what = "case " + std::to_string(i);
    EXPECT_EQ(before[i].y, default_backend.y) << what;
    EXPECT_EQ(before[i].da, default_backend.da) << what;
    EXPECT_EQ(before[i].db, default_backend.db) << what;
    EXPECT_EQ(before[i].y, after.y) << what << ", after the bf16 backend ran it";
    EXPECT_EQ(before[i].da, after.da) << what << ", after the bf16 backend ran it";
    EXPECT_EQ(before[i].db, after.db) << what << ", after the bf16 backend ran it";
    if (bf16) {
      EXPECT_NE(before[i].y, bf16_y) << what << ": bf16 gave f32's bits";
    }
  }
}

TEST(CpuBf16PrecisionTest, Bf16OrF32IsBf16WhereTheCpuHasIt) {
  REQUIRE_BF16(bf16);
  std::shared_ptr<Backend> either = cpu_with("bf16_or_f32");
  const Operand a = random_operand({64, 96}, 41), b = random_operand({96, 80}, 42);
  const std::vector<double> got = run(*either, DType::kF32, matmul_op(false, false), a, b, 6).y;
  EXPECT_EQ(got, run(*bf16, DType::kF32, matmul_op(false, false), a, b, 6).y);
  // ... and bf16 is not f32 here: the inputs were rounded.
  EXPECT_NE(got, run(*cpu_with("f32"), DType::kF32, matmul_op(false, false), a, b, 6).y)
      << "bf16_or_f32 gave f32's bits";
}

TEST(CpuBf16PrecisionTest, UnknownPrecisionNamesTheValues) {
  try {
    cpu_with("fp16");
    ADD_FAILURE() << "precision fp16 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--precision"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f32, bf16 or bf16_or_f32, got 'fp16'"), std::string::npos)
        << e.what();
  }
}

// ---- The recurrent cells (lstm_sequence, gru_sequence): their products in bf16 ----

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// out [B, N] += round(a [B, K]) round(w [K, N]), each operand rounded to bf16 first: the
// products are exact in f64.
void add_bf16_product(const double* a, const std::vector<double>& w, int64_t b, int64_t k,
                      int64_t n, double* out) {
  for (int64_t e = 0; e < b; ++e)
    for (int64_t i = 0; i < k; ++i) {
      const double x = round_to_bf16(a[e * k + i]);
      for (int64_t j = 0; j < n; ++j) out[e * n + j] += x * round_to_bf16(w[i * n + j]);
    }
}

// The share of `got`'s elements within `tolerance` of `expected`.
double share_within(const std::vector<double>& got, const std::vector<double>& expected,
                    double tolerance) {
  int64_t within = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    within += std::abs(got[i] - expected[i]) <= tolerance;
  return static_cast<double>(within) / static_cast<double>(got.size());
}

double normwise(const std::vector<double>& got, const std::vector<double>& expected) {
  double diff2 = 0, expected2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff2 += (got[i] - expected[i]) * (got[i] - expected[i]);
    expected2 += expected[i] * expected[i];
  }
  return std::sqrt(diff2 / expected2);
}

constexpr int64_t kSteps = 6, kRows = 8, kUnits = 48;

// Every state of a sequence against one step of the cell from the backend's own previous state
// (so that no error carries from step to step), with the recurrent products of bf16-rounded
// operands. All of a bf16 computation's states are within f32 rounding (1e-5) of it, but for an
// occasional element whose rounding to bf16 went the other way on the two sides; an f32
// computation is off by bf16's rounding (about 1e-3) nearly everywhere.
constexpr double kStepTolerance = 1e-5;

// lstm_sequence's h and c on `backend`, and the per-step bf16 reference of each.
struct LstmStates {
  std::vector<double> h, c, h_reference, c_reference;
};

LstmStates lstm_states(Backend& backend, const Operand& x, const Operand& w) {
  const std::vector<double> mask(kSteps * kRows, 1.0);
  const ops::LstmSequence s = ops::lstm_sequence(
      to_tensor(backend, x.dims, x.values, DType::kF32),
      to_tensor(backend, w.dims, w.values, DType::kF32),
      ops::cast(to_tensor(backend, {kSteps, kRows}, mask, DType::kF32), DType::kBool), 1.0);
  LstmStates r{to_doubles(s.h), to_doubles(s.c), {}, {}};
  const std::vector<double> zero(kRows * kUnits, 0.0);
  for (int64_t t = 0; t < kSteps; ++t) {
    const double* h_prev = t == 0 ? zero.data() : r.h.data() + (t - 1) * kRows * kUnits;
    const double* c_prev = t == 0 ? zero.data() : r.c.data() + (t - 1) * kRows * kUnits;
    std::vector<double> g(x.values.begin() + t * kRows * 4 * kUnits,
                          x.values.begin() + (t + 1) * kRows * 4 * kUnits);
    add_bf16_product(h_prev, w.values, kRows, kUnits, 4 * kUnits, g.data());
    for (int64_t e = 0; e < kRows; ++e) {
      for (int64_t k = 0; k < kUnits; ++k) {
        const double* ge = g.data() + e * 4 * kUnits;
        const double c = c_prev[e * kUnits + k] * sigmoid(ge[2 * kUnits + k] + 1.0) +
                         sigmoid(ge[k]) * std::tanh(ge[kUnits + k]);
        r.c_reference.push_back(c);
        r.h_reference.push_back(std::tanh(c) * sigmoid(ge[3 * kUnits + k]));
      }
    }
  }
  return r;
}

// gru_sequence's h on `backend`, and the per-step bf16 reference.
struct GruStates {
  std::vector<double> h, h_reference;
};

GruStates gru_states(Backend& backend, const Operand& xg, const Operand& xc, const Operand& wg,
                     const Operand& wc) {
  const std::vector<double> mask(kSteps * kRows, 1.0);
  Tensor h = ops::gru_sequence(
      to_tensor(backend, xg.dims, xg.values, DType::kF32),
      to_tensor(backend, xc.dims, xc.values, DType::kF32),
      to_tensor(backend, wg.dims, wg.values, DType::kF32),
      to_tensor(backend, wc.dims, wc.values, DType::kF32),
      ops::cast(to_tensor(backend, {kSteps, kRows}, mask, DType::kF32), DType::kBool));
  GruStates r{to_doubles(h), {}};
  const std::vector<double> zero(kRows * kUnits, 0.0);
  for (int64_t t = 0; t < kSteps; ++t) {
    const double* h_prev = t == 0 ? zero.data() : r.h.data() + (t - 1) * kRows * kUnits;
    std::vector<double> g(xg.values.begin() + t * kRows * 2 * kUnits,
                          xg.values.begin() + (t + 1) * kRows * 2 * kUnits);
    std::vector<double> cand(xc.values.begin() + t * kRows * kUnits,
                             xc.values.begin() + (t + 1) * kRows * kUnits);
    add_bf16_product(h_prev, wg.values, kRows, kUnits, 2 * kUnits, g.data());
    for (double& v : g) v = sigmoid(v);
    std::vector<double> rh(kRows * kUnits);
    for (int64_t e = 0; e < kRows; ++e)
      for (int64_t k = 0; k < kUnits; ++k)
        rh[e * kUnits + k] = g[e * 2 * kUnits + k] * h_prev[e * kUnits + k];
    add_bf16_product(rh.data(), wc.values, kRows, kUnits, kUnits, cand.data());
    for (int64_t e = 0; e < kRows; ++e) {
      for (int64_t k = 0; k < kUnits; ++k) {
        const double u = g[e * 2 * kUnits + kUnits + k], c = std::tanh(cand[e * kUnits + k]);
        r.h_reference.push_back(u * h_prev[e * kUnits + k] + (1 - u) * c);
      }
    }
  }
  return r;
}

TEST(CpuBf16PrecisionTest, LstmAndGruSequencesMultiplyInBf16) {
  REQUIRE_BF16(bf16);
  std::shared_ptr<Backend> f32 = cpu_with("f32");
  const Operand x = random_operand({kSteps, kRows, 4 * kUnits}, 61),
                w = random_operand({kUnits, 4 * kUnits}, 62);
  for (Backend* backend : {bf16.get(), f32.get()}) {
    const bool is_bf16 = backend == bf16.get();
    SCOPED_TRACE(is_bf16 ? "bf16 backend" : "f32 backend");
    const LstmStates lstm = lstm_states(*backend, x, w);
    const double h_within = share_within(lstm.h, lstm.h_reference, kStepTolerance);
    const double c_within = share_within(lstm.c, lstm.c_reference, kStepTolerance);
    if (is_bf16) {
      EXPECT_GE(h_within, 0.95) << "lstm_sequence h";
      EXPECT_GE(c_within, 0.95) << "lstm_sequence c";
    } else {
      EXPECT_LT(h_within, 0.5) << "the f32 LSTM meets the bf16 reference: the test cannot tell";
    }
  }
  const Operand xg = random_operand({kSteps, kRows, 2 * kUnits}, 63),
                xc = random_operand({kSteps, kRows, kUnits}, 64),
                wg = random_operand({kUnits, 2 * kUnits}, 65),
                wc = random_operand({kUnits, kUnits}, 66);
  for (Backend* backend : {bf16.get(), f32.get()}) {
    const bool is_bf16 = backend == bf16.get();
    SCOPED_TRACE(is_bf16 ? "bf16 backend" : "f32 backend");
    const GruStates gru = gru_states(*backend, xg, xc, wg, wc);
    const double within = share_within(gru.h, gru.h_reference, kStepTolerance);
    if (is_bf16) {
      EXPECT_GE(within, 0.95) << "gru_sequence h";
    } else {
      EXPECT_LT(within, 0.5) << "the f32 GRU meets the bf16 reference: the test cannot tell";
    }
  }
}

// The gradients of both cells with respect to their inputs and kernels, under bf16: within 2e-2
// (normwise) of the exact (f64) gradients, and further from them than f32 rounding (1e-4, where
// f32 is within 1e-6): the backward products (the state's per step, the kernels' at the end) are
// bf16 too. Each product's 2^-7 compounds over the 6 steps: here 0.5% for the LSTM and 1.0-1.1%
// for the GRU, whose candidate's product takes the reset gate's product of the state.
TEST(CpuBf16PrecisionTest, LstmAndGruGradientsWithinTheBf16Bound) {
  REQUIRE_BF16(bf16);
  std::shared_ptr<Backend> f32 = cpu_with("f32");
  const std::vector<double> mask(kSteps * kRows, 1.0);
  const Operand x = random_operand({kSteps, kRows, 4 * kUnits}, 71),
                w = random_operand({kUnits, 4 * kUnits}, 72),
                xg = random_operand({kSteps, kRows, 2 * kUnits}, 73),
                xc = random_operand({kSteps, kRows, kUnits}, 74),
                wg = random_operand({kUnits, 2 * kUnits}, 75),
                wc = random_operand({kUnits, kUnits}, 76),
                dh = random_operand({kSteps, kRows, kUnits}, 77);
  struct Cell {
    const char* name;
    std::vector<const Operand*> inputs;
    std::function<Tensor(std::vector<Tensor>&, const Tensor& mask)> h;
  };
  const Cell cells[] = {
      {"lstm_sequence",
       {&x, &w},
       [](std::vector<Tensor>& in, const Tensor& m) {
         return ops::lstm_sequence(in[0], in[1], m, 1.0).h;
       }},
      {"gru_sequence",
       {&xg, &xc, &wg, &wc},
       [](std::vector<Tensor>& in, const Tensor& m) {
         return ops::gru_sequence(in[0], in[1], in[2], in[3], m);
       }},
  };
  for (const Cell& cell : cells) {
    auto grads = [&](Backend& backend, DType dtype) {
      std::vector<Tensor> in;
      for (const Operand* o : cell.inputs) {
        in.push_back(to_tensor(backend, o->dims, o->values, dtype));
        in.back().set_requires_grad(true);
      }
      const Tensor m =
          ops::cast(to_tensor(backend, {kSteps, kRows}, mask, DType::kF32), DType::kBool);
      const Tensor h = cell.h(in, m);
      const Tensor loss =
          ops::reduce_sum(ops::mul(h, to_tensor(backend, dh.dims, dh.values, dtype)));
      std::vector<std::vector<double>> out;
      for (const Tensor& g : gradients(loss, in)) out.push_back(to_doubles(g));
      return out;
    };
    const auto exact = grads(*f32, DType::kF64);
    const auto got = grads(*bf16, DType::kF32);
    const auto f32_got = grads(*f32, DType::kF32);
    for (std::size_t i = 0; i < exact.size(); ++i) {
      const std::string what = std::string(cell.name) + " gradient of input " + std::to_string(i);
      EXPECT_LT(normwise(got[i], exact[i]), 2e-2) << what;
      EXPECT_LT(normwise(f32_got[i], exact[i]), 1e-5) << what << " in f32";
      EXPECT_GT(normwise(got[i], exact[i]), 1e-4) << what << ": bf16 gave f32's accuracy";
    }
  }
}

// A CPU without bf16, as oneDNN sees one with ONEDNN_MAX_CPU_ISA=AVX512_CORE (read once per
// process, so in a child: a "threadsafe" death test re-runs this test in a new process, which
// inherits the variable).
class CpuBf16PrecisionDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE", 1);
  }
  void TearDown() override { unsetenv("ONEDNN_MAX_CPU_ISA"); }
};

TEST_F(CpuBf16PrecisionDeathTest, Bf16WithoutCpuSupportIsAnErrorNamingTheFlag) {
  EXPECT_EXIT(
      {
        try {
          cpu_with("bf16");
        } catch (const Error& e) {
          std::cerr << e.what() << std::endl;
          std::exit(3);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(3),
      "precision bf16 \\(--precision=bf16, backend.precision\\).*no AVX-512 BF16 or AMX "
      "\\(oneDNN's ISA here is AVX512_CORE\\).*--precision=bf16_or_f32");
}

// In the child: a bf16_or_f32 backend's matmul against an f32 backend's, said on stderr.
[[noreturn]] void compare_bf16_or_f32_with_f32_and_exit() {
  std::shared_ptr<Backend> either = cpu_with("bf16_or_f32");
  std::shared_ptr<Backend> f32 = cpu_with("f32");
  const Operand a = random_operand({64, 96}, 51), b = random_operand({96, 80}, 52);
  const bool same = run(*either, DType::kF32, matmul_op(false, false), a, b, 7).y ==
                    run(*f32, DType::kF32, matmul_op(false, false), a, b, 7).y;
  std::cerr << (same ? "same bits as f32" : "other bits than f32") << std::endl;
  std::exit(0);
}

TEST_F(CpuBf16PrecisionDeathTest, Bf16OrF32WithoutCpuSupportWarnsAndComputesF32) {
  EXPECT_EXIT(compare_bf16_or_f32_with_f32_and_exit(), ::testing::ExitedWithCode(0),
              "warning: cpu: precision bf16_or_f32 computes in f32: this CPU has no AVX-512 BF16 "
              "or AMX.*same bits as f32");
}

// LogisticModel and MoeModel trained on the same synthetic YouTube-8M data and steps with f32
// and with bf16: the evaluated GAP within 0.005, every checkpointed tensor f32.
class CpuBf16TrainingTest : public ::testing::Test {
 protected:
  static constexpr int64_t kClasses = 200;

  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("trainyard_bf16_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    app::SynthYt8mOptions o;
    o.output_dir = (root_ / "data").string();
    o.num_videos = 2000;
    o.num_classes = kClasses;
    o.num_shards = 2;
    o.feature_sizes = {96, 32};
    o.seed = 9;
    app::synth_yt8m(o);
  }
  void TearDown() override { fs::remove_all(root_); }

  config::Pipeline pipeline(const std::string& model, const std::string& precision) {
    const std::string reader =
        "  reader { class: \"YT8MAggregatedFeatureReader\"\n"
        "    params { key: \"feature_names\" string_list { value: [\"mean_rgb\", "
        "\"mean_audio\"] } }\n"
        "    params { key: \"feature_sizes\" int_list { value: [96, 32] } }\n"
        "    params { key: \"num_classes\" int_value: " +
        std::to_string(kClasses) + " } } }\n";
    config::Pipeline p = parse_pipeline_config(
        "model { class: \"" + model + "\" }\nnum_classes: " + std::to_string(kClasses) + "\n" +
            "train_config { batch_size: 50 log_every_n_steps: 10 save_interval_secs: 1000 seed: "
            "1\n  learning_rate { constant { learning_rate: 0.01 } } }\n" +
            "train_input_reader { data_pattern: \"" + (root_ / "data/train-*").string() +
            "\"\n  num_epochs: 1 num_readers: 1\n" + reader +
            "eval_input_reader { data_pattern: \"" + (root_ / "data/validate-*").string() + "\"\n" +
            reader + "eval_config { batch_size: 100 }\n" +
            "backend { num_threads: 2 precision: \"" + precision + "\" }\n",
        "test");
    p.mutable_train_config()->set_train_dir((root_ / (model + "_" + precision)).string());
    return p;
  }

  // Trains, checks the checkpoint's dtypes, and returns the evaluated GAP.
  double train_and_evaluate(const std::string& model, const std::string& precision) {
    const config::Pipeline p = pipeline(model, precision);
    std::ostringstream log;
    const TrainResult r = train(registry(), p, log);
    CheckpointReader checkpoint(r.last_checkpoint);
    int64_t weights = 0;
    for (const CheckpointTensorInfo& info : checkpoint.tensors()) {
      if (info.dtype == DType::kI32 || info.dtype == DType::kI64) continue;  // steps, counters
      EXPECT_EQ(info.dtype, DType::kF32) << precision << " checkpoint tensor " << info.name;
      weights += info.name.ends_with("weights");
    }
    EXPECT_GT(weights, 0) << "no weights in " << r.last_checkpoint;
    std::ostringstream eval_log;
    const double gap = evaluate(registry(), p, "", eval_log).metric("GAP");
    std::cerr << model << " " << precision << ": GAP " << gap << " after step " << r.global_step
              << "\n";
    return gap;
  }

  void expect_same_gap(const std::string& model) {
    REQUIRE_BF16(bf16);
    const double f32_gap = train_and_evaluate(model, "f32");
    const double bf16_gap = train_and_evaluate(model, "bf16");
    EXPECT_GT(f32_gap, 0.3) << model << " did not learn; the comparison says nothing";
    EXPECT_NEAR(bf16_gap, f32_gap, 0.005) << model;
  }

  fs::path root_;
};

TEST_F(CpuBf16TrainingTest, LogisticModelGapWithinPointZeroZeroFiveOfF32) {
  expect_same_gap("LogisticModel");
}

TEST_F(CpuBf16TrainingTest, MoeModelGapWithinPointZeroZeroFiveOfF32) {
  expect_same_gap("MoeModel");
}

}  // namespace
}  // namespace trainyard
