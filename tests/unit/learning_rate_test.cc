// Learning-rate schedules at their corner steps: the first step, the last step before and the
// first step after every burn-in, boundary, warmup and hold, the total and beyond.
#include "trainyard/core/learning_rate.h"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>

#include "trainyard/core/learning_rate_config.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ExponentialDecayExamplesTest, DecaysOncePerDecayExamples) {
  // train.py's defaults: 0.01 * 0.95 ^ floor(step * 1024 / 4,000,000).
  ExponentialDecayExamplesLearningRate yt8m({});
  EXPECT_DOUBLE_EQ(yt8m.at(0), 0.01);
  EXPECT_DOUBLE_EQ(yt8m.at(3906), 0.01);         // 3,999,744 examples
  EXPECT_DOUBLE_EQ(yt8m.at(3907), 0.01 * 0.95);  // 4,000,768 examples
  EXPECT_DOUBLE_EQ(yt8m.at(7812), 0.01 * 0.95);
  EXPECT_DOUBLE_EQ(yt8m.at(7813), 0.01 * 0.95 * 0.95);

  // The boundary itself belongs to the next stair; batch_size counts every tower's examples.
  ExponentialDecayExamplesLearningRate towers({.base_learning_rate = 0.1,
                                               .learning_rate_decay = 0.5,
                                               .learning_rate_decay_examples = 4000,
                                               .batch_size = 1000});
  EXPECT_DOUBLE_EQ(towers.at(3), 0.1);
  EXPECT_DOUBLE_EQ(towers.at(4), 0.05);
  EXPECT_DOUBLE_EQ(towers.at(8), 0.025);
  EXPECT_DOUBLE_EQ(towers.at(400), 0.1 * std::pow(0.5, 100.0));
  // Beyond float32's exact integers (2^24) the stair is still exact.
  ExponentialDecayExamplesLearningRate big({.base_learning_rate = 1.0,
                                            .learning_rate_decay = 0.5,
                                            .learning_rate_decay_examples = 16777217,
                                            .batch_size = 1});
  EXPECT_DOUBLE_EQ(big.at(16777216), 1.0);
  EXPECT_DOUBLE_EQ(big.at(16777217), 0.5);

  EXPECT_NE(error_of([] {
              ExponentialDecayExamplesLearningRate({.learning_rate_decay_examples = 0});
            }).find("learning_rate_decay_examples is 0"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ExponentialDecayExamplesLearningRate({.batch_size = -1});
            }).find("batch_size is -1"),
            std::string::npos);
}

TEST(ConstantLearningRateTest, IsConstant) {
  ConstantLearningRate constant(0.3);
  EXPECT_EQ(constant.at(0), 0.3);
  EXPECT_EQ(constant.at(1000000000), 0.3);
  EXPECT_EQ(ConstantLearningRate().at(5), 0.002);  // optimizer.proto's default
}

TEST(ExponentialDecayLearningRateTest, BurninThenStaircaseFromTheEndOfBurnin) {
  ExponentialDecayLearningRate lr({.initial_learning_rate = 0.1,
                                   .decay_steps = 10,
                                   .decay_factor = 0.5,
                                   .burnin_learning_rate = 0.01,
                                   .burnin_steps = 5});
  EXPECT_DOUBLE_EQ(lr.at(0), 0.01);
  EXPECT_DOUBLE_EQ(lr.at(4), 0.01);  // last burn-in step
  EXPECT_DOUBLE_EQ(lr.at(5), 0.1);   // burn-in end: the decay starts from step - burnin = 0
  EXPECT_DOUBLE_EQ(lr.at(14), 0.1);
  EXPECT_DOUBLE_EQ(lr.at(15), 0.05);  // first boundary, 10 steps after burn-in
  EXPECT_DOUBLE_EQ(lr.at(25), 0.025);
}

TEST(ExponentialDecayLearningRateTest, ZeroBurninRateMeansInitialRate) {
  ExponentialDecayLearningRate lr(
      {.initial_learning_rate = 0.1, .decay_steps = 10, .decay_factor = 0.5, .burnin_steps = 5});
  EXPECT_DOUBLE_EQ(lr.at(0), 0.1);
  EXPECT_DOUBLE_EQ(lr.at(4), 0.1);
  EXPECT_DOUBLE_EQ(lr.at(5), 0.1);
}

TEST(ExponentialDecayLearningRateTest, ContinuousDecayAndMinimum) {
  ExponentialDecayLearningRate smooth(
      {.initial_learning_rate = 0.1, .decay_steps = 10, .decay_factor = 0.5, .staircase = false});
  EXPECT_DOUBLE_EQ(smooth.at(0), 0.1);
  EXPECT_DOUBLE_EQ(smooth.at(5), 0.1 * std::sqrt(0.5));
  EXPECT_DOUBLE_EQ(smooth.at(10), 0.05);

  ExponentialDecayLearningRate floored({.initial_learning_rate = 0.1,
                                        .decay_steps = 10,
                                        .decay_factor = 0.5,
                                        .burnin_learning_rate = 0.001,
                                        .burnin_steps = 2,
                                        .min_learning_rate = 0.02});
  EXPECT_DOUBLE_EQ(floored.at(0), 0.02);  // the minimum holds during burn-in too
  EXPECT_DOUBLE_EQ(floored.at(2), 0.1);
  EXPECT_DOUBLE_EQ(floored.at(22), 0.025);
  EXPECT_DOUBLE_EQ(floored.at(32), 0.02);  // 0.0125 clamped
  EXPECT_DOUBLE_EQ(floored.at(1000000), 0.02);

  // optimizer.proto's defaults: 0.002 * 0.95 ^ floor(step / 4,000,000).
  ExponentialDecayLearningRate defaults({});
  EXPECT_DOUBLE_EQ(defaults.at(3999999), 0.002);
  EXPECT_DOUBLE_EQ(defaults.at(4000000), 0.002 * 0.95);

  EXPECT_NE(
      error_of([] { ExponentialDecayLearningRate({.decay_steps = 0}); }).find("decay_steps is 0"),
      std::string::npos);
}

TEST(ManualStepLearningRateTest, SwitchesAtEachBoundary) {
  // learning_schedules.py's docstring: boundaries [5, 10], rates [.1, .01, .001].
  ManualStepLearningRate lr({.boundaries = {5, 10}, .rates = {0.1, 0.01, 0.001}});
  EXPECT_DOUBLE_EQ(lr.at(0), 0.1);
  EXPECT_DOUBLE_EQ(lr.at(4), 0.1);
  EXPECT_DOUBLE_EQ(lr.at(5), 0.01);
  EXPECT_DOUBLE_EQ(lr.at(9), 0.01);
  EXPECT_DOUBLE_EQ(lr.at(10), 0.001);
  EXPECT_DOUBLE_EQ(lr.at(1000000), 0.001);
  EXPECT_DOUBLE_EQ(ManualStepLearningRate({.rates = {0.3}}).at(77), 0.3);
}

TEST(ManualStepLearningRateTest, WarmupRampsLinearlyToTheFirstBoundary) {
  ManualStepLearningRate lr({.boundaries = {4, 8}, .rates = {0.0, 0.4, 0.1}, .warmup = true});
  EXPECT_DOUBLE_EQ(lr.at(0), 0.0);
  EXPECT_DOUBLE_EQ(lr.at(1), 0.1);
  EXPECT_DOUBLE_EQ(lr.at(3), 0.30000000000000004);  // 0.0 + 0.1 * 3, as Python computes it
  EXPECT_DOUBLE_EQ(lr.at(4), 0.4);                  // warmup end: rates[1]
  EXPECT_DOUBLE_EQ(lr.at(7), 0.4);
  EXPECT_DOUBLE_EQ(lr.at(8), 0.1);
  EXPECT_DOUBLE_EQ(lr.at(100), 0.1);
  // A ramp down works the same way.
  ManualStepLearningRate down({.boundaries = {2}, .rates = {1.0, 0.5}, .warmup = true});
  EXPECT_DOUBLE_EQ(down.at(1), 0.75);
  EXPECT_DOUBLE_EQ(down.at(2), 0.5);
}

TEST(ManualStepLearningRateTest, RejectsWhatLearningSchedulesRejects) {
  EXPECT_NE(error_of([] {
              ManualStepLearningRate({.boundaries = {0, 5}, .rates = {1, 2, 3}});
            }).find("boundaries[0] is 0"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ManualStepLearningRate({.boundaries = {5, 5}, .rates = {1, 2, 3}});
            }).find("strictly increase"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ManualStepLearningRate({.boundaries = {5}, .rates = {1, 2, 3}});
            }).find("3 rates for 1 boundaries"),
            std::string::npos);
}

TEST(CosineDecayLearningRateTest, WarmupHoldCosineAndEnd) {
  CosineDecayLearningRate lr({.learning_rate_base = 1.0,
                              .total_steps = 100,
                              .warmup_learning_rate = 0.1,
                              .warmup_steps = 10,
                              .hold_base_rate_steps = 20});
  EXPECT_DOUBLE_EQ(lr.at(0), 0.1);
  EXPECT_DOUBLE_EQ(lr.at(5), 0.55);
  EXPECT_DOUBLE_EQ(lr.at(9), 0.09 * 9 + 0.1);
  EXPECT_DOUBLE_EQ(lr.at(10), 1.0);  // warmup end
  EXPECT_DOUBLE_EQ(lr.at(30), 1.0);  // hold end
  EXPECT_DOUBLE_EQ(lr.at(31), 0.5 * (1 + std::cos(std::numbers::pi / 70)));
  EXPECT_NEAR(lr.at(65), 0.5, 1e-15);
  EXPECT_NEAR(lr.at(100), 0.0, 1e-15);  // total steps
  EXPECT_EQ(lr.at(101), 0.0);           // beyond
  EXPECT_EQ(lr.at(1000000), 0.0);
}

TEST(CosineDecayLearningRateTest, NoWarmupNoHold) {
  CosineDecayLearningRate lr({.learning_rate_base = 0.2,
                              .total_steps = 100,
                              .warmup_learning_rate = 0.0,
                              .warmup_steps = 0,
                              .hold_base_rate_steps = 0});
  EXPECT_DOUBLE_EQ(lr.at(0), 0.2);
  EXPECT_NEAR(lr.at(50), 0.1, 1e-15);
  EXPECT_NEAR(lr.at(100), 0.0, 1e-15);
  EXPECT_EQ(lr.at(101), 0.0);

  // optimizer.proto's defaults: warmup from 0.0002 to 0.002 over 10,000 steps.
  CosineDecayLearningRate defaults({});
  EXPECT_DOUBLE_EQ(defaults.at(0), 0.0002);
  EXPECT_DOUBLE_EQ(defaults.at(5000), 0.0011);
  EXPECT_DOUBLE_EQ(defaults.at(10000), 0.002);
  EXPECT_EQ(defaults.at(4000001), 0.0);

  // Warmup spanning every step: the cosine never starts.
  CosineDecayLearningRate only_warmup({.learning_rate_base = 1.0,
                                       .total_steps = 10,
                                       .warmup_learning_rate = 0.0,
                                       .warmup_steps = 10});
  EXPECT_DOUBLE_EQ(only_warmup.at(9), 0.9);
  EXPECT_DOUBLE_EQ(only_warmup.at(10), 1.0);
  EXPECT_EQ(only_warmup.at(11), 0.0);
}

TEST(CosineDecayLearningRateTest, RejectsWhatLearningSchedulesRejects) {
  EXPECT_NE(error_of([] {
              CosineDecayLearningRate({.total_steps = 10, .warmup_steps = 20});
            }).find("total_steps (10) is less than warmup_steps (20)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              CosineDecayLearningRate({.learning_rate_base = 0.1, .warmup_learning_rate = 0.2});
            }).find("learning_rate_base (0.1) is less than warmup_learning_rate (0.2)"),
            std::string::npos);
}

// train_config.learning_rate in a pipeline config selects and parameterises each schedule,
// with optimizer.proto's field names and defaults.
config::TrainConfig train_config(const std::string& text) {
  config::TrainConfig train;
  if (!google::protobuf::TextFormat::ParseFromString(text, &train)) {
    ADD_FAILURE() << "unparsable TrainConfig: " << text;
  }
  return train;
}

TEST(LearningRateFromConfigTest, NoScheduleIsTheYouTube8MDecayWithTheBatchSize) {
  std::unique_ptr<LearningRate> lr = learning_rate_from_config(train_config("batch_size: 1000"));
  EXPECT_DOUBLE_EQ(lr->at(3999), 0.01);
  EXPECT_DOUBLE_EQ(lr->at(4000), 0.01 * 0.95);  // 4,000,000 examples
}

TEST(LearningRateFromConfigTest, EachObjectDetectionScheduleByItsFieldNames) {
  std::unique_ptr<LearningRate> exponential = learning_rate_from_config(train_config(R"(
    learning_rate { exponential_decay_learning_rate {
      initial_learning_rate: 0.1 decay_steps: 10 decay_factor: 0.5
      burnin_learning_rate: 0.01 burnin_steps: 5 } })"));
  EXPECT_DOUBLE_EQ(exponential->at(4), 0.01);
  EXPECT_DOUBLE_EQ(exponential->at(15), 0.05);

  std::unique_ptr<LearningRate> manual = learning_rate_from_config(train_config(R"(
    learning_rate { manual_step_learning_rate {
      initial_learning_rate: 0.1
      schedule { step: 5 learning_rate: 0.01 }
      schedule { step: 10 learning_rate: 0.001 } } })"));
  EXPECT_DOUBLE_EQ(manual->at(4), 0.1);
  EXPECT_DOUBLE_EQ(manual->at(5), 0.01);
  EXPECT_DOUBLE_EQ(manual->at(10), 0.001);

  std::unique_ptr<LearningRate> warm = learning_rate_from_config(train_config(R"(
    learning_rate { manual_step_learning_rate {
      initial_learning_rate: 0.0 warmup: true
      schedule { step: 10 learning_rate: 1.0 } } })"));
  EXPECT_DOUBLE_EQ(warm->at(5), 0.5);

  std::unique_ptr<LearningRate> cosine = learning_rate_from_config(train_config(R"(
    learning_rate { cosine_decay_learning_rate {
      learning_rate_base: 1.0 total_steps: 100 warmup_learning_rate: 0.1
      warmup_steps: 10 hold_base_rate_steps: 20 } })"));
  EXPECT_DOUBLE_EQ(cosine->at(5), 0.55);
  EXPECT_DOUBLE_EQ(cosine->at(30), 1.0);
  EXPECT_EQ(cosine->at(101), 0.0);

  std::unique_ptr<LearningRate> constant =
      learning_rate_from_config(train_config("learning_rate { constant { learning_rate: 0.3 } }"));
  EXPECT_EQ(constant->at(12345), 0.3);
}

TEST(LearningRateFromConfigTest, UnsetFieldsTakeOptimizerProtosDefaults) {
  std::unique_ptr<LearningRate> exponential = learning_rate_from_config(
      train_config("learning_rate { exponential_decay_learning_rate {} }"));
  EXPECT_DOUBLE_EQ(exponential->at(3999999), 0.002);
  EXPECT_DOUBLE_EQ(exponential->at(4000000), 0.002 * 0.95);
  std::unique_ptr<LearningRate> cosine =
      learning_rate_from_config(train_config("learning_rate { cosine_decay_learning_rate {} }"));
  EXPECT_DOUBLE_EQ(cosine->at(0), 0.0002);
  EXPECT_DOUBLE_EQ(cosine->at(10000), 0.002);
}

TEST(LearningRateFromConfigTest, RefusedParametersNameTheConfigField) {
  std::string message;
  try {
    learning_rate_from_config(train_config(
        "learning_rate { cosine_decay_learning_rate { total_steps: 10 warmup_steps: 20 } }"));
  } catch (const ConfigError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("train_config.learning_rate"), std::string::npos) << message;
  EXPECT_NE(message.find("total_steps (10) is less than warmup_steps (20)"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace trainyard
