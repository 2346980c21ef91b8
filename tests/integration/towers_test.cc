// Towers in one process (issue 16): train_config.num_clones splits each step's batch into clones
// run one after another and combines their gradients as the seeds do. YouTube-8M's train.py sums
// the towers' gradients; the Object Detection API's model_deploy averages the clone losses. With
// plain gradient descent and a loss that is a mean over the batch, a step of two summed towers
// on 2B examples moves every weight twice as far as one step on the same 2B examples, and a step
// of two averaged clones exactly as far.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/config.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/train_step.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

class TowersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PluginRegistry::Settings s;
    s.use_environment = false;
    registry_ = std::make_unique<PluginRegistry>(s);
  }

  config::Pipeline pipeline(int clones, config::TrainConfig::CloneGradients combine) {
    config::Pipeline p = parse_pipeline_config(
        "model { class: \"LogisticModel\" }\n"
        "num_classes: 3\n"
        "train_config { batch_size: 4 seed: 5 clip_gradient_norm: 0\n"
        "  optimizer { class: \"GradientDescentOptimizer\" }\n"
        "  learning_rate { constant { learning_rate: 0.5 } } }\n",
        "test");
    p.mutable_train_config()->set_num_clones(clones);
    p.mutable_train_config()->set_clone_gradients(combine);
    return p;
  }

  static Batch batch(Backend& device, int size) {
    std::vector<float> x;
    std::vector<float> y(static_cast<std::size_t>(size) * 3, 0.0f);
    for (int i = 0; i < size; ++i) {
      for (int d = 0; d < 5; ++d) x.push_back(static_cast<float>(((i * 5 + d * 3) % 7) - 3) / 3.0f);
      y[static_cast<std::size_t>(i * 3 + i % 3)] = 1.0f;
    }
    Batch b;
    b.features["features"] = Tensor::from_vector(device, Shape{size, 5}, x);
    b.labels = Tensor::from_vector(device, Shape{size, 3}, y);
    return b;
  }

  // Each weight's change over one step on `b`, and the step's reported loss.
  std::vector<float> step_delta(const config::Pipeline& p, int size, double* loss) {
    std::ostringstream log;
    TrainStep step(*registry_, p, nullptr, log);
    config::Pipeline frozen = p;
    StepResult r = step.run(batch(step.backend(), size), 0);
    *loss = r.loss;
    std::vector<float> after;
    std::vector<float> before;
    for (const auto& [name, value] : step.state(1)) {
      if (name.find("weights") != std::string::npos) after = value.to_vector<float>();
    }
    // The initial weights (the seed's): a step of the same pipeline at learning rate 0.
    frozen.mutable_train_config()->mutable_learning_rate()->mutable_constant()->set_learning_rate(
        0);
    TrainStep initial(*registry_, frozen, nullptr, log);
    initial.run(batch(initial.backend(), size), 0);
    for (const auto& [name, value] : initial.state(1)) {
      if (name.find("weights") != std::string::npos) before = value.to_vector<float>();
    }
    EXPECT_EQ(after.size(), before.size());
    std::vector<float> delta;
    for (std::size_t i = 0; i < after.size(); ++i) delta.push_back(after[i] - before[i]);
    return delta;
  }

  std::unique_ptr<PluginRegistry> registry_;
};

TEST_F(TowersTest, YouTube8MSumsTheTowersGradients) {
  double one_loss = 0;
  double towers_loss = 0;
  const std::vector<float> one = step_delta(pipeline(1, config::TrainConfig::SUM), 8, &one_loss);
  const std::vector<float> towers =
      step_delta(pipeline(2, config::TrainConfig::SUM), 8, &towers_loss);
  ASSERT_FALSE(one.empty());
  ASSERT_EQ(one.size(), towers.size());
  bool moved = false;
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_NEAR(towers[i], 2.0f * one[i], 1e-6) << "weight " << i;
    moved |= one[i] != 0.0f;
  }
  EXPECT_TRUE(moved);
  // The reported loss is the mean of the towers' label losses: the batch's mean.
  EXPECT_NEAR(towers_loss, one_loss, 1e-6);
}

TEST_F(TowersTest, ObjectDetectionApiAveragesTheCloneLosses) {
  double one_loss = 0;
  double clones_loss = 0;
  const std::vector<float> one = step_delta(pipeline(1, config::TrainConfig::MEAN), 8, &one_loss);
  const std::vector<float> clones =
      step_delta(pipeline(2, config::TrainConfig::MEAN), 8, &clones_loss);
  ASSERT_EQ(one.size(), clones.size());
  for (std::size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(clones[i], one[i], 1e-6) << i;
  EXPECT_NEAR(clones_loss, one_loss, 1e-6);
}

TEST_F(TowersTest, ABatchThatDoesNotSplitIntoEqualClonesIsRefused) {
  std::ostringstream log;
  TrainStep step(*registry_, pipeline(3, config::TrainConfig::SUM), nullptr, log);
  try {
    step.run(batch(step.backend(), 8), 0);
    FAIL() << "8 examples were split into 3 clones";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("num_clones 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trainyard
