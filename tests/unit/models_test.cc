// The YouTube-8M video-level models (plugin yt8m_models), created through the plugin registry
// and run with a ModelContext backed by a VariableStore, on every test backend: variables and
// their shapes, predictions against hand computations, gradients and the L2 regularization.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"
#include "trainyard/variable.h"

namespace trainyard {
namespace {

PluginRegistry& registry() { return test::plugin_registry(); }

std::shared_ptr<BaseModel> make_model(const std::string& name,
                                      const std::map<std::string, OptionValue>& options = {}) {
  return registry().create<BaseModel>(ClassKind::kModel, name, options);
}

// What the trainer gives a model, reduced to a VariableStore and a class count.
class StoreContext final : public ModelContext {
 public:
  StoreContext(Backend& backend, int64_t num_classes)
      : store_(backend, 1234), classes_(num_classes) {}
  Backend& backend() override { return store_.backend(); }
  int64_t num_classes() const override { return classes_; }
  Variable& variable(const VariableSpec& spec) override { return store_.get_or_create(spec); }
  uint64_t seed() const override { return 99; }
  VariableStore& store() { return store_; }

 private:
  VariableStore store_;
  int64_t classes_;
};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

class ModelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }

  Batch batch(const std::vector<double>& values, int64_t rows, DType dtype = DType::kF32) const {
    Batch b;
    Tensor x = Tensor::from_vector(backend(),
                                   Shape{rows, static_cast<int64_t>(values.size()) / rows}, values);
    b.features["features"] = dtype == DType::kF64 ? x : ops::cast(x, dtype);
    return b;
  }

  // Sets a variable to `values` (its shape and dtype).
  void set(Variable& variable, const std::vector<double>& values) const {
    Tensor t = Tensor::from_vector(backend(), variable.spec().shape, values);
    if (variable.spec().dtype != DType::kF64) t = ops::cast(t, variable.spec().dtype);
    t.set_requires_grad(variable.trainable());
    variable.assign(t);
  }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, ModelsTest, ::testing::ValuesIn(test::backend_names()),
                         backend_test_name);

std::vector<double> as_doubles(const Tensor& t) {
  return t.dtype() == DType::kF64 ? t.to_vector<double>()
                                  : ops::cast(t, DType::kF64).to_vector<double>();
}

TEST_P(ModelsTest, LogisticModelCreatesSlimVariablesAndSigmoidPredictions) {
  auto model = make_model("LogisticModel");
  StoreContext ctx(backend(), 5);
  Batch b = batch({0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, -0.9}, 3);
  ModelOutput out = model->forward(ctx, b, Mode::kTrain);

  ASSERT_EQ(out.predictions.shape(), (Shape{3, 5}));
  EXPECT_EQ(out.predictions.dtype(), DType::kF32);
  EXPECT_FALSE(out.loss.has_value());
  EXPECT_FALSE(out.regularization_loss.has_value());

  Variable* weights = ctx.store().find("fully_connected/weights");
  Variable* biases = ctx.store().find("fully_connected/biases");
  ASSERT_NE(weights, nullptr);
  ASSERT_NE(biases, nullptr);
  EXPECT_EQ(weights->spec().shape, (Shape{3, 5}));
  EXPECT_EQ(biases->spec().shape, (Shape{5}));
  EXPECT_EQ(weights->spec().initializer.kind, Initializer::Kind::kGlorotUniform);
  EXPECT_EQ(biases->spec().initializer.kind, Initializer::Kind::kZeros);
  EXPECT_DOUBLE_EQ(weights->spec().l2_regularization, 1e-8);
  EXPECT_DOUBLE_EQ(biases->spec().l2_regularization, 0.0);
  EXPECT_EQ(ctx.store().trainable().size(), 2u);

  // sigmoid(x W + b) by hand, with biases set to something other than their zeros.
  set(*biases, {0.5, -0.5, 0.0, 1.0, -1.0});
  out = model->forward(ctx, b, Mode::kEval);
  std::vector<double> x = as_doubles(b.features["features"]);
  std::vector<double> w = as_doubles(weights->value());
  std::vector<double> bias = as_doubles(biases->value());
  std::vector<double> expected;
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 5; ++c) {
      double logit = bias[c];
      for (int d = 0; d < 3; ++d) logit += x[r * 3 + d] * w[d * 5 + c];
      expected.push_back(sigmoid(logit));
    }
  }
  std::vector<double> got = as_doubles(out.predictions);
  EXPECT_EQ(testing::compare_close(got, expected, 1e-6, 1e-5), "");
  for (double p : got) {
    EXPECT_GT(p, 0.0);
    EXPECT_LT(p, 1.0);
  }
  EXPECT_EQ(ctx.store().trainable().size(), 2u) << "a second forward reuses the variables";
}

TEST_P(ModelsTest, MoeModelCreatesGatesWithoutBiasAndExperts) {
  auto model = make_model("MoeModel", {{"moe_num_mixtures", int64_t{3}}});
  StoreContext ctx(backend(), 4);
  ModelOutput out = model->forward(ctx, batch({0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, 2), Mode::kTrain);
  ASSERT_EQ(out.predictions.shape(), (Shape{2, 4}));

  Variable* gates = ctx.store().find("gates/weights");
  Variable* experts = ctx.store().find("experts/weights");
  Variable* expert_biases = ctx.store().find("experts/biases");
  ASSERT_NE(gates, nullptr);
  ASSERT_NE(experts, nullptr);
  ASSERT_NE(expert_biases, nullptr);
  EXPECT_EQ(ctx.store().find("gates/biases"), nullptr);
  EXPECT_EQ(gates->spec().shape, (Shape{3, 4 * 4}));
  EXPECT_EQ(experts->spec().shape, (Shape{3, 4 * 3}));
  EXPECT_EQ(expert_biases->spec().shape, (Shape{4 * 3}));
  EXPECT_DOUBLE_EQ(gates->spec().l2_regularization, 1e-8);
  EXPECT_DOUBLE_EQ(experts->spec().l2_regularization, 1e-8);
  EXPECT_DOUBLE_EQ(expert_biases->spec().l2_regularization, 0.0);
  for (double p : as_doubles(out.predictions)) {
    EXPECT_GT(p, 0.0);
    EXPECT_LT(p, 1.0);
  }
}

// B = 2, D = 2, C = 2, M = 2 with chosen weights: for class c the gate logits are columns
// c * 3 + {0, 1, 2} (the last the dummy expert), the expert logits columns c * 2 + {0, 1}.
TEST_P(ModelsTest, MoeModelMatchesHandComputation) {
  auto model = make_model("MoeModel");
  StoreContext ctx(backend(), 2);
  Batch b = batch({1.0, 0.0, 0.6, -0.8}, 2, DType::kF64);
  model->forward(ctx, b, Mode::kTrain);                                 // creates the variables
  const std::vector<double> gate_w = {0.1, -0.2, 0.3,  0.0, 0.5, -0.1,  //
                                      0.2, 0.4,  -0.3, 0.1, 0.0, 0.2};
  const std::vector<double> expert_w = {0.3,  -0.1, 0.2, 0.4,  //
                                        -0.5, 0.6,  0.1, -0.2};
  const std::vector<double> expert_b = {0.05, -0.05, 0.1, 0.0};
  set(*ctx.store().find("gates/weights"), gate_w);
  set(*ctx.store().find("experts/weights"), expert_w);
  set(*ctx.store().find("experts/biases"), expert_b);
  std::vector<double> got = model->forward(ctx, b, Mode::kEval).predictions.to_vector<double>();

  const std::vector<double> x = {1.0, 0.0, 0.6, -0.8};
  std::vector<double> expected;
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 2; ++c) {
      double g[3], z = 0;
      for (int j = 0; j < 3; ++j) {
        const int col = c * 3 + j;
        g[j] = std::exp(x[r * 2] * gate_w[col] + x[r * 2 + 1] * gate_w[6 + col]);
        z += g[j];
      }
      double p = 0;
      for (int j = 0; j < 2; ++j) {
        const int col = c * 2 + j;
        p += g[j] / z *
             sigmoid(x[r * 2] * expert_w[col] + x[r * 2 + 1] * expert_w[4 + col] + expert_b[col]);
      }
      expected.push_back(p);
    }
  }
  EXPECT_EQ(testing::compare_close(got, expected, 1e-12, 1e-12), "");
}

TEST_P(ModelsTest, MoeModelDummyExpertTakesProbabilityMass) {
  // All weights zero: each gate is 1 / (M + 1) and each expert 0.5, so p = M / (M + 1) * 0.5.
  auto model = make_model("MoeModel", {{"moe_num_mixtures", int64_t{3}}});
  StoreContext ctx(backend(), 3);
  Batch b = batch({0.3, -0.4}, 1);
  model->forward(ctx, b, Mode::kTrain);
  for (Variable* v : ctx.store().trainable()) {
    set(*v, std::vector<double>(static_cast<std::size_t>(v->spec().shape.num_elements()), 0.0));
  }
  std::vector<double> got = as_doubles(model->forward(ctx, b, Mode::kEval).predictions);
  EXPECT_EQ(testing::compare_close(got, std::vector<double>(3, 0.375), 1e-7, 0), "");
}

TEST_P(ModelsTest, GradientsReachEveryTrainableVariable) {
  for (const char* name : {"LogisticModel", "MoeModel"}) {
    SCOPED_TRACE(name);
    auto model = make_model(name);
    StoreContext ctx(backend(), 3);
    Batch b = batch({0.1, 0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8}, 2);
    ModelOutput out = model->forward(ctx, b, Mode::kTrain);
    std::vector<Variable*> variables = ctx.store().trainable();
    ASSERT_EQ(variables.size(), std::string(name) == "MoeModel" ? 3u : 2u);
    std::vector<Tensor> sources;
    for (Variable* v : variables) sources.push_back(v->value());
    std::vector<Tensor> grads = gradients(ops::reduce_sum(out.predictions), sources);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      SCOPED_TRACE(variables[i]->name());
      ASSERT_TRUE(grads[i].defined());
      EXPECT_EQ(grads[i].shape(), variables[i]->spec().shape);
      double norm = 0;
      for (double g : as_doubles(grads[i])) norm += g * g;
      EXPECT_GT(norm, 0.0);
    }
  }
}

TEST_P(ModelsTest, MoeModelGradientsMatchCentralDifferences) {
  auto model = make_model("MoeModel");
  StoreContext ctx(backend(), 2);
  Batch b = batch({0.5, -0.3, 0.2, 0.1, 0.4, -0.6}, 2, DType::kF64);
  model->forward(ctx, b, Mode::kTrain);
  std::vector<Variable*> variables = ctx.store().trainable();
  std::vector<Tensor> inputs = {b.features["features"]};
  for (Variable* v : variables) inputs.push_back(v->value());
  auto f = [&](const std::vector<Tensor>& in) {
    for (std::size_t i = 0; i < variables.size(); ++i) variables[i]->assign(in[i + 1]);
    Batch batch_in;
    batch_in.features["features"] = in[0];
    return model->forward(ctx, batch_in, Mode::kTrain).predictions;
  };
  testing::GradCheckResult result = testing::check_gradients(f, inputs);
  EXPECT_TRUE(result.ok) << result.report;
  EXPECT_GT(result.checked, 0u);
}

TEST_P(ModelsTest, RegularizationIsHalfL2PenaltyTimesSquaredWeights) {
  for (const char* name : {"LogisticModel", "MoeModel"}) {
    SCOPED_TRACE(name);
    auto model = make_model(name, {{"l2_penalty", 0.25}});
    StoreContext ctx(backend(), 3);
    model->forward(ctx, batch({0.1, 0.2, 0.3, 0.4}, 2), Mode::kTrain);
    double expected = 0;
    for (Variable* v : ctx.store().trainable()) {
      if (v->name().ends_with("/biases")) continue;
      for (double w : as_doubles(v->value())) expected += 0.25 * w * w / 2;
    }
    ASSERT_GT(expected, 0.0);
    std::vector<double> got = as_doubles(ctx.store().regularization_loss());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_NEAR(got[0], expected, 1e-6 * expected);
  }
}

TEST_P(ModelsTest, MoeModelTakesWillowsPenaltyAndGatingOptions) {
  // --moe_l2 is WILLOW's penalty for every MoE layer.
  auto model = make_model("MoeModel", {{"moe_l2", 1e-6}});
  StoreContext ctx(backend(), 3);
  model->forward(ctx, batch({0.1, 0.2, 0.3, 0.4}, 2), Mode::kTrain);
  EXPECT_DOUBLE_EQ(ctx.store().find("gates/weights")->spec().l2_regularization, 1e-6);
  EXPECT_DOUBLE_EQ(ctx.store().find("experts/weights")->spec().l2_regularization, 1e-6);

  // Low-rank gates (gates1 [D, r], gates2 [r, C (M + 1)]) and probability gating
  // (gating_prob_weights [C, C] with its batch norm), with WILLOW's names.
  auto gated =
      make_model("MoeModel", {{"moe_low_rank_gating", int64_t{3}}, {"moe_prob_gating", true}});
  StoreContext g(backend(), 4);
  ModelOutput out = gated->forward(g, batch({0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, 2), Mode::kTrain);
  ASSERT_EQ(out.predictions.shape(), (Shape{2, 4}));
  ASSERT_NE(g.store().find("gates1/weights"), nullptr);
  EXPECT_EQ(g.store().find("gates1/weights")->spec().shape, (Shape{3, 3}));
  EXPECT_EQ(g.store().find("gates2/weights")->spec().shape, (Shape{3, 4 * 3}));
  EXPECT_EQ(g.store().find("gates/weights"), nullptr);
  ASSERT_NE(g.store().find("gating_prob_weights"), nullptr);
  EXPECT_EQ(g.store().find("gating_prob_weights")->spec().shape, (Shape{4, 4}));
  EXPECT_NE(g.store().find("gating_prob_bn/moving_variance"), nullptr);
  for (double p : as_doubles(out.predictions)) {
    EXPECT_GT(p, 0.0);
    EXPECT_LT(p, 1.0);
  }
  EXPECT_THROW(make_model("MoeModel", {{"moe_prob_gating_input", std::string("logits")}}), Error);
  EXPECT_THROW(make_model("MoeModel", {{"moe_low_rank_gating", int64_t{0}}}), Error);
}

TEST_P(ModelsTest, RejectsBadInputAndOptions) {
  auto model = make_model("LogisticModel");
  StoreContext ctx(backend(), 3);
  Batch empty;
  EXPECT_THROW(model->forward(ctx, empty, Mode::kTrain), InvalidArgument);
  Batch frames;
  frames.features["features"] = ops::zeros(backend(), Shape{2, 4, 3});
  EXPECT_THROW(model->forward(ctx, frames, Mode::kTrain), InvalidArgument);
  EXPECT_THROW(make_model("MoeModel", {{"moe_num_mixtures", int64_t{0}}}), Error);
  EXPECT_THROW(make_model("LogisticModel", {{"l2_penalty", -1.0}}), Error);
}

}  // namespace
}  // namespace trainyard
