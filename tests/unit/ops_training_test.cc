// The forward pass of the training ops (ops/training.h: the optimizer updates and
// assign_moving_average, in place, also through views) on every test backend, against the plain
// reference loops of reference_ops.h. ops_test_util.h has what the ops_<family>_test.cc files
// share.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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

// TensorFlow's ApplyRMSProp / ApplyCenteredRMSProp in double, slots (ms, mg, mom).
void rms_prop_reference(Array& var, Array& ms, Array& mg, Array& mom, const Array& grad, double lr,
                        double rho, double momentum, double epsilon, bool centered) {
  for (std::size_t i = 0; i < var.values.size(); ++i) {
    const double g = grad.values[i];
    ms.values[i] += (g * g - ms.values[i]) * (1 - rho);
    double denominator = ms.values[i];
    if (centered) {
      mg.values[i] += (g - mg.values[i]) * (1 - rho);
      denominator -= mg.values[i] * mg.values[i];
    }
    mom.values[i] = mom.values[i] * momentum + g * lr / std::sqrt(denominator + epsilon);
    var.values[i] -= mom.values[i];
  }
}

TEST_P(OptimizerTest, RmsPropAndCenteredRmsPropFollowTensorFlowsFormulaOverSteps) {
  const Dims shape = {4, 1100};  // past the CPU kernel's parallel threshold
  Array var0 = random_array(shape, -1, 1, 5100);
  for (bool centered : {false, true}) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (centered ? " centered" : " plain"));
      Array var = var0, ms = ref::filled(shape, 1.0), mg = ref::filled(shape, 0.0), mom = mg;
      Tensor tv = tensor(var, dtype), tms = tensor(ms, dtype), tmg = tensor(mg, dtype),
             tmom = tensor(mom, dtype);
      for (uint32_t step = 0; step < 3; ++step) {
        Array grad = random_array(shape, -2, 2, 5110 + step);
        const double lr = 0.01 * (step + 1);
        if (centered) {
          ops::apply_centered_rms_prop(tv, tmg, tms, tmom, tensor(grad, dtype), lr, 0.9, 0.5, 1e-3);
        } else {
          ops::apply_rms_prop(tv, tms, tmom, tensor(grad, dtype), lr, 0.9, 0.5, 1e-3);
        }
        rms_prop_reference(var, ms, mg, mom, grad, lr, 0.9, 0.5, 1e-3, centered);
      }
      EXPECT_TRUE(Matches(tv, dtype, var, tolerance_for(dtype, kF32)));
      EXPECT_TRUE(Matches(tms, dtype, ms, tolerance_for(dtype, kF32)));
      EXPECT_TRUE(Matches(tmom, dtype, mom, tolerance_for(dtype, kF32)));
      if (centered) {
        EXPECT_TRUE(Matches(tmg, dtype, mg, tolerance_for(dtype, kF32)));
      }
    }
  }
}

// The CPU kernel (which the opaque fixture runs too) rounds as TF's f32 kernel does: each
// operation in TF's order in f32, 1 - rho computed in f32 (0x3DCCCCD0 for rho 0.9, where the
// f32 of 1 - 0.9 is 0x3DCCCCCD). Other backends may contract into FMAs.
TEST_P(OptimizerTest, RmsPropInF32RoundsAsTensorFlowsKernelOnTheCpu) {
  if (GetParam() != "cpu" && GetParam() != "opaque") GTEST_SKIP() << "not the CPU kernel";
  const Dims shape = {3, 1500};
  Array var0 = random_array(shape, -1, 1, 5200);
  for (bool centered : {false, true}) {
    SCOPED_TRACE(centered ? "centered" : "plain");
    const std::size_t n = var0.values.size();
    std::vector<float> w(n), ms(n, 1.0f), mg(n, 0.0f), mom(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<float>(var0.values[i]);
    Tensor tv = tensor(var0), tms = tensor(ref::filled(shape, 1.0)),
           tmg = tensor(ref::filled(shape, 0.0)), tmom = tensor(ref::filled(shape, 0.0));
    // The SSD sample config's settings, given in double as a config gives them.
    const double rho = 0.9, momentum = 0.9, epsilon = 1.0, lr = 0.004;
    const float rho_f = static_cast<float>(rho), momentum_f = static_cast<float>(momentum),
                epsilon_f = static_cast<float>(epsilon), lr_f = static_cast<float>(lr);
    for (uint32_t step = 0; step < 4; ++step) {
      Array grad = random_array(shape, -3, 3, 5210 + step);
      if (centered) {
        ops::apply_centered_rms_prop(tv, tmg, tms, tmom, tensor(grad), lr, rho, momentum, epsilon);
      } else {
        ops::apply_rms_prop(tv, tms, tmom, tensor(grad), lr, rho, momentum, epsilon);
      }
      for (std::size_t i = 0; i < n; ++i) {
        const float g = static_cast<float>(grad.values[i]);
        ms[i] += (g * g - ms[i]) * (1.0f - rho_f);
        float denominator = ms[i];
        if (centered) {
          mg[i] += (g - mg[i]) * (1.0f - rho_f);
          denominator = ms[i] - mg[i] * mg[i];
        }
        mom[i] = mom[i] * momentum_f + (g * lr_f) / std::sqrt(denominator + epsilon_f);
        w[i] -= mom[i];
      }
    }
    auto as_array = [&](const std::vector<float>& v) {
      return Array{shape, std::vector<double>(v.begin(), v.end())};
    };
    EXPECT_TRUE(Matches(tv, DType::kF32, as_array(w), kExact));
    EXPECT_TRUE(Matches(tms, DType::kF32, as_array(ms), kExact));
    EXPECT_TRUE(Matches(tmom, DType::kF32, as_array(mom), kExact));
    if (centered) {
      EXPECT_TRUE(Matches(tmg, DType::kF32, as_array(mg), kExact));
    }
  }
}

TEST_P(OptimizerTest, RmsPropRejectsSlotsOfAnotherShape) {
  Tensor var = ops::zeros(backend(), Shape{2, 3}), ms = ops::ones(backend(), Shape{2, 3}),
         mom = ops::zeros(backend(), Shape{3, 2}), mg = ops::zeros(backend(), Shape{2, 3});
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::apply_rms_prop(var, ms, mom, var, 0.1, 0.9, 0.0, 1e-10); }),
      {"apply_rms_prop", "[3, 2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::apply_centered_rms_prop(var, mg, ms, mom, var, 0.1, 0.9, 0.0, 1e-10);
                       }),
                       {"apply_centered_rms_prop", "[3, 2]"}));
}

}  // namespace
}  // namespace trainyard
