// The forward pass of the reduce ops (ops/reduce.h: reductions over any axes, logsumexp, argmax,
// softmax and log_softmax) on every test backend, against the plain reference loops of
// reference_ops.h. ops_test_util.h has what the ops_<family>_test.cc files share.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(ReductionTest);
TRAINYARD_BACKEND_SUITE(ParallelPathTest);

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
// Inputs above the kernels' parallel threshold (32768 elements), so the threaded and tiled paths
// run too

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

// The bias gradient's reduction: column sums of a wide f32 batch. The cpu backend adds each
// column's values in row order in f64 and rounds once, whatever its chunks of columns and its
// threads; so the sums are those of the same loop on the host, bit for bit. Widths around the
// chunk sizes (512, 2048 and the thread count's share) and the LogisticModel's 3862.
TEST_P(ParallelPathTest, ColumnSumsOfF32AddInRowOrderInF64) {
  if (GetParam() != "cpu") GTEST_SKIP() << "the order of the sums is the cpu backend's";
  for (int64_t width : {int64_t{511}, int64_t{513}, int64_t{2049}, int64_t{3862}, int64_t{4100}}) {
    SCOPED_TRACE("width " + std::to_string(width));
    const int64_t rows = 70;
    Array x = random_array({rows, width}, -1, 1, 6200 + static_cast<uint32_t>(width));
    std::vector<double> expected(static_cast<std::size_t>(width), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < width; ++c) {
        expected[c] += static_cast<double>(static_cast<float>(x.values[r * width + c]));
      }
    }
    std::vector<double> got = read(ops::reduce_sum(tensor(x), {0})).values;
    ASSERT_EQ(got.size(), expected.size());
    int64_t differ = 0;
    for (std::size_t c = 0; c < got.size(); ++c) {
      differ += got[c] != static_cast<double>(static_cast<float>(expected[c]));
    }
    EXPECT_EQ(differ, 0) << "columns whose sum is not the row-ordered f64 sum";
  }
}

}  // namespace
}  // namespace trainyard
