// Variables: initializers with TensorFlow's formulas, the store's get-or-create by name,
// collections and the L2 regularization loss.
#include "trainyard/variable.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "test_backends.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

double mean(const std::vector<float>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double stddev(const std::vector<float>& v) {
  double m = mean(v), s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

VariableSpec spec(std::string name, Shape shape, Initializer init) {
  VariableSpec s;
  s.name = std::move(name);
  s.shape = std::move(shape);
  s.initializer = init;
  return s;
}

TEST(VariableTest, InitializersFollowTensorFlowFormulas) {
  Backend& cpu = *test::backend("cpu");
  Generator g(5);
  Initializer glorot;
  glorot.kind = Initializer::Kind::kGlorotUniform;
  // fan_in 300, fan_out 500: limit sqrt(6 / 800)
  std::vector<float> v =
      initial_value(cpu, spec("w", Shape{300, 500}, glorot), g).to_vector<float>();
  double limit = std::sqrt(6.0 / 800.0);
  EXPECT_LE(*std::max_element(v.begin(), v.end()), limit);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -limit);
  EXPECT_NEAR(stddev(v), limit / std::sqrt(3.0), 0.01 * limit);

  Initializer scaling;
  scaling.kind = Initializer::Kind::kVarianceScaling;
  scaling.scale = 2.0;  // He: fan_in of a 3x3x16 -> 32 filter is 144
  v = initial_value(cpu, spec("k", Shape{3, 3, 16, 32}, scaling), g).to_vector<float>();
  EXPECT_NEAR(stddev(v), std::sqrt(2.0 / 144.0), 0.05 * std::sqrt(2.0 / 144.0));

  Initializer constant;
  constant.kind = Initializer::Kind::kConstant;
  constant.value = 0.25;
  v = initial_value(cpu, spec("b", Shape{4}, constant), g).to_vector<float>();
  EXPECT_EQ(v, std::vector<float>(4, 0.25f));

  Initializer truncated;
  truncated.kind = Initializer::Kind::kTruncatedNormal;
  truncated.stddev = 0.1;
  v = initial_value(cpu, spec("t", Shape{10000}, truncated), g).to_vector<float>();
  EXPECT_LE(*std::max_element(v.begin(), v.end()), 0.2f + 1e-6f);
  EXPECT_NEAR(mean(v), 0.0, 0.005);
}

TEST(VariableTest, StoreCreatesOnceAndChecksShapes) {
  VariableStore store(*test::backend("cpu"), 42);
  Initializer normal;
  normal.kind = Initializer::Kind::kNormal;
  Variable& w = store.get_or_create(spec("tower/fc1/weights", Shape{4, 3}, normal));
  Variable& again = store.get_or_create(spec("tower/fc1/weights", Shape{4, 3}, normal));
  EXPECT_EQ(&w, &again);
  EXPECT_TRUE(w.value().requires_grad());
  try {
    store.get_or_create(spec("tower/fc1/weights", Shape{4, 4}, normal));
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "variable 'tower/fc1/weights' exists as f32[4, 3], requested as f32[4, 4]");
  }
}

TEST(VariableTest, InitialValueDependsOnNameAndSeedNotOnOrder) {
  Initializer normal;
  normal.kind = Initializer::Kind::kNormal;
  VariableStore a(*test::backend("cpu"), 7), b(*test::backend("cpu"), 7);
  a.get_or_create(spec("x", Shape{3}, normal));
  std::vector<float> ya = a.get_or_create(spec("y", Shape{3}, normal)).value().to_vector<float>();
  std::vector<float> yb = b.get_or_create(spec("y", Shape{3}, normal)).value().to_vector<float>();
  EXPECT_EQ(ya, yb);
  EXPECT_NE(ya, a.find("x")->value().to_vector<float>());
}

TEST(VariableTest, CollectionsAndRegularization) {
  VariableStore store(*test::backend("cpu"), 1);
  Initializer ones;
  ones.kind = Initializer::Kind::kConstant;
  ones.value = 1.0;
  VariableSpec w = spec("w", Shape{2, 2}, ones);
  w.l2_regularization = 0.5;
  VariableSpec step = spec("global_step", Shape{}, Initializer{});
  step.trainable = false;
  step.dtype = DType::kI64;
  step.collections = kGlobalVariables;
  store.get_or_create(w);
  store.get_or_create(step);
  EXPECT_EQ(store.trainable().size(), 1u);
  EXPECT_EQ(store.collection(kGlobalVariables).size(), 2u);
  EXPECT_EQ(store.collection(kModelVariables).size(), 1u);
  // 0.5 * sum(1^2 over 4) / 2 = 1
  EXPECT_FLOAT_EQ(store.regularization_loss().to_vector<float>()[0], 1.0f);
}

}  // namespace
}  // namespace trainyard
