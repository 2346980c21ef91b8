// The YouTube-8M frame-level models (plugin yt8m_frame_models), created through the plugin
// registry on every test backend: the variables the originals create, predictions against hand
// computations, frames past num_frames never changing an output, batch norm's update ops only
// in training, the options' errors, and gradients by central differences for every trainable
// variable on tiny configurations.
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

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

PluginRegistry& registry() { return test::plugin_registry(); }

std::shared_ptr<BaseModel> make_model(const std::string& name, const Opts& options = {}) {
  return registry().create<BaseModel>(ClassKind::kModel, name, options);
}

std::vector<double> values(const Tensor& t) {
  NoGradScope no_grad;
  return t.dtype() == DType::kF64 ? t.to_vector<double>()
                                  : ops::cast(t, DType::kF64).to_vector<double>();
}

std::vector<double> ramp(int64_t n, double scale, double offset = 0.0) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(std::sin(0.7 * static_cast<double>(i) + offset) * scale);
  return v;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

class FrameModelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }

  // A frame-level batch: [B, T, D] f64 and num_frames i32 [B].
  Batch batch(int64_t b, int64_t t, int64_t d, const std::vector<double>& frames,
              const std::vector<int32_t>& num_frames) const {
    Batch out;
    out.features["features"] = Tensor::from_vector(backend(), Shape{b, t, d}, frames);
    out.num_frames = Tensor::from_vector(backend(), Shape{b}, num_frames);
    return out;
  }

  // `frames` with every frame past num_frames replaced by large values.
  static std::vector<double> with_garbage_padding(std::vector<double> frames, int64_t t, int64_t d,
                                                  const std::vector<int32_t>& n) {
    for (std::size_t e = 0; e < n.size(); ++e)
      for (int64_t s = n[e]; s < t; ++s)
        for (int64_t k = 0; k < d; ++k) frames[(e * t + s) * d + k] = 40.0 + double(s * k);
    return frames;
  }

  // Gradient check of a model's predictions with respect to the frames and every trainable
  // variable.
  testing::GradCheckResult check_model(const std::string& name, const Opts& options,
                                       const Batch& input, int64_t num_classes) {
    auto model = make_model(name, options);
    FakeModelContext ctx(backend(), num_classes, /*seed=*/7);
    model->forward(ctx, input, Mode::kTrain);
    std::vector<Variable*> variables = ctx.store().trainable();
    std::vector<Tensor> inputs = {input.features.at("features")};
    for (Variable* v : variables) inputs.push_back(v->value());
    auto f = [&](const std::vector<Tensor>& in) {
      for (std::size_t i = 0; i < variables.size(); ++i) variables[i]->assign(in[i + 1]);
      Batch b = input;
      b.features["features"] = in[0];
      return model->forward(ctx, b, Mode::kTrain).predictions;
    };
    testing::GradCheckResult r = testing::check_gradients(f, inputs);
    r.report = name + ": " + r.report;
    return r;
  }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, FrameModelsTest, ::testing::ValuesIn(test::backend_names()),
                         backend_test_name);

TEST_P(FrameModelsTest, FrameLevelLogisticModelAveragesTheValidFramesOnly) {
  const int64_t b = 2, t = 4, d = 3, c = 2;
  const std::vector<int32_t> n = {2, 4};
  std::vector<double> x = ramp(b * t * d, 0.5);
  auto model = make_model("FrameLevelLogisticModel");
  FakeModelContext ctx(backend(), c);
  ModelOutput out = model->forward(ctx, batch(b, t, d, x, n), Mode::kTrain);
  ASSERT_EQ(out.predictions.shape(), (Shape{b, c}));
  Variable& w = ctx.at("fully_connected/weights");
  Variable& bias = ctx.at("fully_connected/biases");
  EXPECT_EQ(w.spec().shape, (Shape{d, c}));
  EXPECT_DOUBLE_EQ(w.spec().l2_regularization, 1e-8);
  bias.assign(Tensor::from_vector(backend(), Shape{c}, std::vector<double>{0.3, -0.2}));

  std::vector<double> wv = values(w.value()), expected;
  for (int64_t e = 0; e < b; ++e) {
    for (int64_t k = 0; k < c; ++k) {
      double logit = values(bias.value())[k];
      for (int64_t j = 0; j < d; ++j) {
        double mean = 0.0;
        for (int64_t s = 0; s < n[e]; ++s) mean += x[(e * t + s) * d + j];
        logit += mean / n[e] * wv[j * c + k];
      }
      expected.push_back(sigmoid(logit));
    }
  }
  ModelOutput clean = model->forward(ctx, batch(b, t, d, x, n), Mode::kEval);
  EXPECT_EQ(testing::compare_close(values(clean.predictions), expected, 1e-12, 1e-10), "");
  ModelOutput padded =
      model->forward(ctx, batch(b, t, d, with_garbage_padding(x, t, d, n), n), Mode::kEval);
  EXPECT_EQ(values(padded.predictions), values(clean.predictions))
      << "frames past num_frames changed the prediction";
}

TEST_P(FrameModelsTest, DbofModelCreatesTheStarterCodesVariables) {
  const Opts tiny = {{"iterations", int64_t{3}},
                     {"dbof_cluster_size", int64_t{6}},
                     {"dbof_hidden_size", int64_t{5}}};
  auto model = make_model("DbofModel", tiny);
  FakeModelContext ctx(backend(), 3);
  ModelOutput out = model->forward(ctx, batch(2, 4, 3, ramp(24, 0.5), {4, 2}), Mode::kTrain);
  ASSERT_EQ(out.predictions.shape(), (Shape{2, 3}));
  for (double p : values(out.predictions)) {
    EXPECT_GT(p, 0.0);
    EXPECT_LT(p, 1.0);
  }
  EXPECT_EQ(ctx.at("cluster_weights").spec().shape, (Shape{3, 6}));
  EXPECT_EQ(ctx.at("cluster_weights").spec().initializer.kind, Initializer::Kind::kNormal);
  EXPECT_NEAR(ctx.at("cluster_weights").spec().initializer.stddev, 1.0 / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(ctx.at("hidden1_weights").spec().shape, (Shape{6, 5}));
  EXPECT_NEAR(ctx.at("hidden1_weights").spec().initializer.stddev, 1.0 / std::sqrt(6.0), 1e-12);
  for (const char* bn : {"input_bn", "cluster_bn", "hidden1_bn"}) {
    EXPECT_NE(ctx.find(std::string(bn) + "/gamma"), nullptr) << bn << " scales (scale=True)";
    EXPECT_NE(ctx.find(std::string(bn) + "/moving_mean"), nullptr) << bn;
  }
  EXPECT_EQ(ctx.find("cluster_biases"), nullptr) << "batch norm replaces the biases";
  // The MoE at the root: gates [H, C (M + 1)] without bias, experts [H, C M].
  EXPECT_EQ(ctx.at("gates/weights").spec().shape, (Shape{5, 3 * 3}));
  EXPECT_EQ(ctx.find("gates/biases"), nullptr);
  EXPECT_EQ(ctx.at("experts/weights").spec().shape, (Shape{5, 3 * 2}));

  Opts no_bn = tiny;
  no_bn["dbof_add_batch_norm"] = false;
  FakeModelContext plain(backend(), 3);
  make_model("DbofModel", no_bn)
      ->forward(plain, batch(2, 4, 3, ramp(24, 0.5), {4, 2}), Mode::kTrain);
  EXPECT_EQ(plain.at("cluster_biases").spec().shape, (Shape{6}));
  EXPECT_NEAR(plain.at("hidden1_biases").spec().initializer.stddev, 0.01, 1e-15);
  EXPECT_EQ(plain.find("input_bn/beta"), nullptr);
}

TEST_P(FrameModelsTest, DbofModelSamplesOnlyValidFramesAndUpdatesStatisticsOnlyInTraining) {
  const Opts tiny = {{"iterations", int64_t{5}},
                     {"dbof_cluster_size", int64_t{4}},
                     {"dbof_hidden_size", int64_t{3}}};
  const std::vector<int32_t> n = {2, 3};
  std::vector<double> x = ramp(2 * 6 * 3, 0.6);
  auto model = make_model("DbofModel", tiny);
  FakeModelContext ctx(backend(), 2, /*seed=*/11);
  ModelOutput clean = model->forward(ctx, batch(2, 6, 3, x, n), Mode::kTrain);
  ModelOutput padded =
      model->forward(ctx, batch(2, 6, 3, with_garbage_padding(x, 6, 3, n), n), Mode::kTrain);
  EXPECT_EQ(values(padded.predictions), values(clean.predictions))
      << "a sampled frame came from the padding";

  std::vector<double> mean = values(ctx.at("cluster_bn/moving_mean").value());
  model->forward(ctx, batch(2, 6, 3, x, n), Mode::kEval);
  model->forward(ctx, batch(2, 6, 3, x, n), Mode::kPredict);
  EXPECT_EQ(values(ctx.at("cluster_bn/moving_mean").value()), mean) << "eval changed the BN";
  model->forward(ctx, batch(2, 6, 3, x, n), Mode::kTrain);
  EXPECT_NE(values(ctx.at("cluster_bn/moving_mean").value()), mean) << "training's update op";

  // The same step seed samples the same frames; another seed other frames.
  FakeModelContext other(backend(), 2, /*seed=*/11);
  auto twin = make_model("DbofModel", tiny);
  EXPECT_EQ(values(twin->forward(other, batch(2, 6, 3, x, n), Mode::kEval).predictions),
            values(twin->forward(other, batch(2, 6, 3, x, n), Mode::kEval).predictions));
}

TEST_P(FrameModelsTest, RecurrentModelsFeedTheOriginalsStateToTheClassifier) {
  const std::vector<int32_t> n = {3, 1};
  Batch in = batch(2, 4, 3, ramp(24, 0.5), n);
  {
    // The starter code: the top layer's final h (3 cells) into the MoE.
    auto model = make_model("LstmModel", {{"lstm_cells", int64_t{3}}, {"lstm_layers", int64_t{2}}});
    FakeModelContext ctx(backend(), 4);
    EXPECT_EQ(model->forward(ctx, in, Mode::kTrain).predictions.shape(), (Shape{2, 4}));
    EXPECT_EQ(ctx.at("rnn/multi_rnn_cell/cell_1/basic_lstm_cell/kernel").spec().shape,
              (Shape{6, 12}));
    EXPECT_EQ(ctx.at("gates/weights").spec().shape, (Shape{3, 4 * 3}));
  }
  {
    // WILLOW: [c1, h1, c2, h2] (4 x 3) into the MoE, under the RNN scope.
    auto model = make_model(
        "LstmModel",
        {{"lstm_cells", int64_t{3}}, {"lstm_layers", int64_t{2}}, {"lstm_concat_state", true}});
    FakeModelContext ctx(backend(), 4);
    model->forward(ctx, in, Mode::kTrain);
    EXPECT_NE(ctx.find("RNN/rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel"), nullptr);
    EXPECT_EQ(ctx.at("gates/weights").spec().shape, (Shape{12, 4 * 3}));
  }
  {
    auto model = make_model("GruModel", {{"gru_cells", int64_t{2}}, {"gru_layers", int64_t{2}}});
    FakeModelContext ctx(backend(), 4);
    ModelOutput out = model->forward(ctx, in, Mode::kTrain);
    EXPECT_NE(ctx.find("RNN/rnn/multi_rnn_cell/cell_1/gru_cell/candidate/kernel"), nullptr);
    EXPECT_EQ(ctx.at("gates/weights").spec().shape, (Shape{4, 4 * 3}));
    Batch padded = batch(2, 4, 3, with_garbage_padding(ramp(24, 0.5), 4, 3, n), n);
    EXPECT_EQ(values(model->forward(ctx, padded, Mode::kTrain).predictions),
              values(out.predictions))
        << "padding frames changed the GRU's prediction";
  }
}

TEST_P(FrameModelsTest, OptionsAndInputsAreCheckedNamingTheModel) {
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(message([] {
              make_model("DbofModel", {{"dbof_activation", std::string("tanh")}});
            }).find("dbof_activation"),
            std::string::npos);
  EXPECT_NE(message([] {
              make_model("DbofModel", {{"video_level_classifier_model", std::string("Moe")}});
            }).find("LogisticModel, MoeModel"),
            std::string::npos);
  EXPECT_NE(message([] {
              make_model("LstmModel", {{"lstm_backward", true}});
            }).find("lstm_concat_state"),
            std::string::npos);
  auto model = make_model("FrameLevelLogisticModel");
  FakeModelContext ctx(backend(), 2);
  Batch video_level;
  video_level.features["features"] =
      Tensor::from_vector(backend(), Shape{2, 3}, std::vector<double>(6, 0.1));
  EXPECT_NE(message([&] {
              model->forward(ctx, video_level, Mode::kTrain);
            }).find("FrameLevelLogisticModel"),
            std::string::npos);
}

TEST_P(FrameModelsTest, GradientsMatchCentralDifferencesForEveryTrainableVariable) {
  const std::vector<int32_t> n = {3, 2};
  Batch in = batch(2, 3, 2, ramp(12, 0.6, 0.3), n);
  const std::vector<std::pair<std::string, Opts>> models = {
      {"FrameLevelLogisticModel", {}},
      {"DbofModel",
       {{"iterations", int64_t{3}},
        {"dbof_cluster_size", int64_t{3}},
        {"dbof_hidden_size", int64_t{2}},
        {"dbof_pooling_method", std::string("average")}}},
      {"LstmModel", {{"lstm_cells", int64_t{2}}, {"lstm_layers", int64_t{1}}}},
      {"GruModel",
       {{"gru_cells", int64_t{2}},
        {"gru_layers", int64_t{1}},
        {"video_level_classifier_model", std::string("LogisticModel")}}},
  };
  for (const auto& [name, options] : models) {
    testing::GradCheckResult r = check_model(name, options, in, 2);
    EXPECT_TRUE(r.ok) << r.report;
    EXPECT_GT(r.checked, 12u) << name;
  }
}

}  // namespace
}  // namespace trainyard
