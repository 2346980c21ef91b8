// Reverse-mode autodiff: accumulation over several uses, no-grad scopes, unconnected sources,
// release of saved tensors as backward proceeds, and the errors.
#include "trainyard/autodiff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "test_backends.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

class AutodiffTest : public ::testing::Test {
 protected:
  Backend& cpu() { return *test::backend("cpu"); }
  Tensor leaf(std::vector<double> values) {
    Tensor t = Tensor::from_vector(cpu(), Shape{static_cast<int64_t>(values.size())}, values);
    t.set_requires_grad(true);
    return t;
  }
};

TEST_F(AutodiffTest, ValueUsedSeveralTimesAccumulatesItsGradient) {
  Tensor x = leaf({1.0, -2.0, 3.0});
  // loss = sum(x * x + x + exp(x)): d/dx = 2x + 1 + exp(x)
  Tensor loss = ops::reduce_sum(ops::add(ops::add(ops::mul(x, x), x), ops::exp(x)));
  std::vector<Tensor> grads = gradients(loss, std::vector<Tensor>{x});
  std::vector<double> g = grads[0].to_vector<double>();
  std::vector<double> v = {1.0, -2.0, 3.0};
  for (std::size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(g[i], 2 * v[i] + 1 + std::exp(v[i]), 1e-12);
}

TEST_F(AutodiffTest, GradientsOfSeveralSourcesAndAnUnconnectedOne) {
  Tensor a = leaf({2.0});
  Tensor b = leaf({5.0});
  Tensor unused = leaf({1.0});
  Tensor loss = ops::reduce_sum(ops::mul(a, b));
  std::vector<Tensor> grads = gradients(loss, std::vector<Tensor>{a, b, unused});
  EXPECT_EQ(grads[0].to_vector<double>(), std::vector<double>{5.0});
  EXPECT_EQ(grads[1].to_vector<double>(), std::vector<double>{2.0});
  EXPECT_FALSE(grads[2].defined());
}

TEST_F(AutodiffTest, SplitGradientIsOneConcatenationWithZerosForUnusedParts) {
  Tensor x = leaf({1.0, 2.0, 3.0, 4.0, 5.0, 6.0});
  std::vector<Tensor> parts = ops::split(x, {1, 2, 3}, 0);
  // Only the middle part reaches the loss: the others' gradients are zeros, not missing.
  Tensor loss = ops::reduce_sum(ops::mul(parts[1], parts[1]));
  std::vector<Tensor> grads = gradients(loss, std::vector<Tensor>{x});
  EXPECT_EQ(grads[0].to_vector<double>(), (std::vector<double>{0, 4, 6, 0, 0, 0}));
  // One tape node, whichever parts are used: every part is an output of the same node, and a
  // second use of a part accumulates into it.
  std::vector<Tensor> again = ops::split(x, {3, 3}, 0);
  Tensor both = ops::add(ops::reduce_sum(again[0]), ops::reduce_sum(ops::mul(again[1], again[0])));
  grads = gradients(both, std::vector<Tensor>{x});
  EXPECT_EQ(grads[0].to_vector<double>(), (std::vector<double>{5, 6, 7, 1, 2, 3}));
}

TEST_F(AutodiffTest, NoGradScopeRecordsNothing) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y;
  {
    NoGradScope no_grad;
    EXPECT_FALSE(grad_recording_enabled());
    y = ops::mul(x, x);
  }
  EXPECT_TRUE(grad_recording_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(gradients(ops::reduce_sum(y), std::vector<Tensor>{x}), InvalidArgument);
}

TEST_F(AutodiffTest, NonScalarLossNeedsGradLoss) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = ops::mul(x, 3.0);
  try {
    gradients(y, std::vector<Tensor>{x});
    FAIL() << "a non-scalar loss without grad_loss was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("is not a scalar; pass grad_loss"), std::string::npos);
  }
  Tensor seed = Tensor::from_vector(cpu(), Shape{2}, std::vector<double>{1.0, 10.0});
  std::vector<Tensor> g = gradients(y, std::vector<Tensor>{x}, seed);
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{3.0, 30.0}));
}

TEST_F(AutodiffTest, RecordedGraphIsConsumedAndSavedTensorsReleased) {
  Backend& backend = cpu();
  Generator generator(3);
  Tensor x = ops::random_uniform(backend, Shape{1 << 16}, generator, -1, 1, DType::kF32);
  x.set_requires_grad(true);
  std::size_t before = backend.allocator_stats().bytes_in_use;
  Tensor h = x;
  for (int i = 0; i < 8; ++i) h = ops::tanh(ops::mul(h, 1.01));  // saves each output
  Tensor loss = ops::reduce_sum(h);
  std::size_t recorded = backend.allocator_stats().bytes_in_use;
  EXPECT_GT(recorded, before + 8 * (1u << 16) * sizeof(float));
  {
    std::vector<Tensor> g = gradients(loss, std::vector<Tensor>{x});
    EXPECT_TRUE(g[0].defined());
  }
  h = Tensor();
  // Only the loss (and x) remain: every saved intermediate was released by backward.
  std::size_t after = backend.allocator_stats().bytes_in_use;
  EXPECT_LT(after, before + 4 * (1u << 16) * sizeof(float)) << "saved tensors were kept";
  try {
    gradients(loss, std::vector<Tensor>{x});
    FAIL() << "a consumed graph was differentiated twice";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("was already differentiated"), std::string::npos);
  }
}

TEST_F(AutodiffTest, OnlyFloatTensorsRequireGradients) {
  Tensor i = Tensor::from_vector(cpu(), Shape{2}, std::vector<int64_t>{1, 2});
  EXPECT_THROW(i.set_requires_grad(true), InvalidArgument);
  Tensor x = leaf({1.0});
  EXPECT_TRUE(x.requires_grad());
  x.set_requires_grad(false);
  EXPECT_FALSE(x.requires_grad());
}

TEST_F(AutodiffTest, GradientFlowsThroughViews) {
  Tensor x = Tensor::from_vector(cpu(), Shape{2, 3}, std::vector<double>{1, 2, 3, 4, 5, 6});
  x.set_requires_grad(true);
  Tensor row = ops::slice_outer(x, 1, 1);               // [[4, 5, 6]]
  Tensor flat = ops::reshape(row, Shape{3});            // [4, 5, 6]
  Tensor loss = ops::reduce_sum(ops::mul(flat, flat));  // 16 + 25 + 36
  EXPECT_EQ(loss.to_vector<double>(), std::vector<double>{77.0});
  std::vector<Tensor> g = gradients(loss, std::vector<Tensor>{x});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{0, 0, 0, 8, 10, 12}));
}

TEST_F(AutodiffTest, TrainingStepOnTheOpaqueBackendMatchesCpu) {
  // A logistic-regression step, gradients included, gives the same numbers on a backend whose
  // memory the host cannot read: the core touches tensors only through the backend.
  std::map<std::string, std::vector<double>> results;
  for (const std::string& name : test::backend_names()) {
    Backend& b = *test::backend(name);
    Generator generator(11);
    Tensor x = ops::random_normal(b, Shape{8, 5}, generator, 0, 1, DType::kF32);
    Tensor labels =
        ops::cast(ops::greater(ops::random_uniform(b, Shape{8, 3}, generator), ops::scalar(b, 0.5)),
                  DType::kF32);
    Tensor w = ops::truncated_normal(b, Shape{5, 3}, generator, 0, 0.1, DType::kF32);
    w.set_requires_grad(true);
    Tensor logits = ops::matmul(x, w);
    Tensor loss = ops::reduce_mean(ops::sigmoid_cross_entropy_with_logits(labels, logits));
    Tensor grad = gradients(loss, std::vector<Tensor>{w})[0];
    ops::apply_gradient_descent(w, grad, 0.5);
    results[name] = ops::cast(w, DType::kF64).to_vector<double>();
    results[name].push_back(loss.to_vector<float>()[0]);
  }
  // The opaque backend runs the cpu's kernels: the same bits. A device with kernels of its own
  // (cuda): the same numbers to f32 rounding.
  const std::vector<double>& cpu = results.at("cpu");
  EXPECT_EQ(results.at("opaque"), cpu);
  for (const auto& [name, values] : results) {
    SCOPED_TRACE(name);
    ASSERT_EQ(values.size(), cpu.size());
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_NEAR(values[i], cpu[i], 1e-6 + 1e-5 * std::abs(cpu[i])) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace trainyard
