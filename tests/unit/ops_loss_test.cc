// The forward pass of the loss ops (ops/loss.h: sigmoid cross entropy with logits, and the fused
// binary cross entropy and l2_loss) on every test backend, against the plain reference loops of
// reference_ops.h. The test of l2_loss checks clip_by_norm (ops/training.h, the same fused norm)
// too. ops_test_util.h has what the ops_<family>_test.cc files share.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/trace.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(ElementwiseTest);

// =============================================================================================
// Losses

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

// Wide enough for the CPU kernels' vectorized loops over several chunks in parallel: the loss
// and its gradient (dloss (sigmoid(x) - z)) against the formulas in double, over logits where
// exp(-|x|) spans [0, 1] and underflows. Labels are fractional only where |x| is small: with
// large |x|, max(x, 0) - x z cancels and f32 rounding of x z alone is past the tolerance.
TEST_P(ElementwiseTest, SigmoidCrossEntropyAndItsGradientOfAWideBatchMatchTheFormula) {
  const Dims shape = {1000, 91};
  Array logits = random_array(shape, -6, 6, 902);
  Array labels = random_array(shape, 0, 1, 903);
  Array dloss = random_array(shape, -2, 2, 904);
  Array wide = random_array(shape, -120, 120, 905);
  for (std::size_t i = 0; i < logits.values.size(); i += 3) {
    logits.values[i] = wide.values[i];
    labels.values[i] = labels.values[i] > 0.5 ? 1.0 : 0.0;
  }
  Array expected_grad = dloss;
  for (std::size_t i = 0; i < logits.values.size(); ++i) {
    const double x = logits.values[i];
    expected_grad.values[i] *= 1 / (1 + std::exp(-x)) - labels.values[i];
  }
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = tensor(logits, dtype);
    x.set_requires_grad(true);
    Tensor loss = ops::sigmoid_cross_entropy_with_logits(tensor(labels, dtype), x);
    EXPECT_TRUE(Matches(loss, dtype, ref::sigmoid_cross_entropy(labels, logits),
                        tolerance_for(dtype, kF32)));
    std::vector<Tensor> grad = gradients(loss, std::vector<Tensor>{x}, tensor(dloss, dtype));
    EXPECT_TRUE(Matches(grad[0], dtype, expected_grad, tolerance_for(dtype, kF32)));
  }
  // A NaN logit gives a NaN loss and gradient, not a finite number.
  Array nan = ref::filled({2}, std::nan(""));
  nan.values[1] = 1.0;
  Tensor x = tensor(nan);
  x.set_requires_grad(true);
  Tensor loss = ops::sigmoid_cross_entropy_with_logits(tensor(ref::filled({2}, 1.0)), x);
  EXPECT_TRUE(std::isnan(read(loss).values[0]));
  EXPECT_TRUE(std::isfinite(read(loss).values[1]));
  EXPECT_TRUE(
      std::isnan(read(gradients(ops::reduce_sum(loss), std::vector<Tensor>{x})[0]).values[0]));
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

bool has_fused_kernel(Backend& backend, const std::string& op) {
  for (const KernelRegistration& k : backend.kernels()) {
    if (k.op == op && (k.flags & kFusedComposite) != 0) return true;
  }
  return false;
}

// LogisticModel's loss: binary_cross_entropy over matmul_bias_act's sigmoid. The backward walk
// takes the gradient through both in one binary_cross_entropy_sigmoid_grad (where the backend
// fuses it, no binary_cross_entropy_grad and no sigmoid_grad launch), with the values of the two
// ops apart: those of the same graph where the predictions have a second, zero-weighted use,
// which keeps the walk from fusing. Labels that need a gradient keep the ops apart too.
TEST_P(ElementwiseTest, BinaryCrossEntropyOverASigmoidFusesTheTwoGradients) {
  const Array x = random_array({16, 24}, -1, 1, 920), w = random_array({24, 40}, -0.5, 0.5, 921),
              b = random_array({40}, -0.5, 0.5, 922);
  Array y = random_array({16, 40}, 0, 1, 923);
  for (double& v : y.values) v = v > 0.8 ? 1.0 : 0.0;
  const bool fuses = has_fused_kernel(backend(), "binary_cross_entropy_sigmoid_grad");
  if (GetParam() == "cpu") {
    EXPECT_TRUE(fuses) << "the cpu backend has no fused kernel";
  }
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    struct Run {
      std::vector<std::vector<double>> grads;
      std::vector<std::string> launched;
    };
    auto run = [&](bool second_use, bool labels_need_grad) {
      Tensor tx = tensor(x, dtype), tw = tensor(w, dtype), tb = tensor(b, dtype),
             ty = tensor(y, dtype);
      tw.set_requires_grad(true);
      tb.set_requires_grad(true);
      if (labels_need_grad) ty.set_requires_grad(true);
      Tensor p = ops::matmul_bias_act(tx, tw, tb, Activation::kSigmoid);
      Tensor loss = ops::reduce_mean(ops::binary_cross_entropy(p, ty, 1e-5));
      if (second_use) loss = ops::add(loss, ops::mul(ops::reduce_sum(p), 0.0));
      Run r;
      std::vector<Tensor> sources = {tw, tb};
      if (labels_need_grad) sources.push_back(ty);
      StepTrace trace;
      for (const Tensor& g : gradients(loss, sources)) r.grads.push_back(read(g).values);
      for (const StepTrace::Event& e : trace.events()) r.launched.push_back(e.name);
      return r;
    };
    auto launched = [](const Run& r, const std::string& op) {
      return std::count(r.launched.begin(), r.launched.end(), op);
    };
    const Run fused = run(false, false), apart = run(true, false);
    EXPECT_EQ(fused.grads, apart.grads) << on();
    EXPECT_EQ(launched(apart, "sigmoid_grad"), 1) << on();
    if (fuses) {
      EXPECT_EQ(launched(fused, "binary_cross_entropy_sigmoid_grad"), 1) << on();
      EXPECT_EQ(launched(fused, "binary_cross_entropy_grad"), 0) << on();
      EXPECT_EQ(launched(fused, "sigmoid_grad"), 0) << on();
      EXPECT_EQ(launched(apart, "binary_cross_entropy_sigmoid_grad"), 0) << on();
    }
    const Run with_labels = run(false, true);
    EXPECT_EQ(launched(with_labels, "binary_cross_entropy_sigmoid_grad"), 0) << on();
    EXPECT_EQ(launched(with_labels, "sigmoid_grad"), 1) << on();
    ASSERT_EQ(with_labels.grads.size(), 3u);
    EXPECT_EQ(with_labels.grads[0], fused.grads[0]) << on();
    EXPECT_EQ(with_labels.grads[1], fused.grads[1]) << on();
  }
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

}  // namespace
}  // namespace trainyard
