// The forward pass of the training ops (ops/training.h: the optimizer updates and
// assign_moving_average, in place, also through views) on every test backend, against the plain
// reference loops of reference_ops.h. ops_test_util.h has what the ops_<family>_test.cc files
// share.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(NormalizationTest);
TRAINYARD_BACKEND_SUITE(ViewTest);
TRAINYARD_BACKEND_SUITE(OptimizerTest);

// =============================================================================================
// Moving averages

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

// =============================================================================================
// Views at a non-zero byte offset as inputs and outputs

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

}  // namespace
}  // namespace trainyard
