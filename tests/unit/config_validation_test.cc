// validate_pipeline, check_input_file and check_directory_argument: each invalid value is
// refused with a message naming the field and, when a flag set it, the flag.
#include "trainyard/core/config_validation.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "trainyard/core/config.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

// The message validate_pipeline throws for `text`, or "" when it accepts it.
std::string problem(const std::string& text, const FieldFlags& flags = {},
                    std::string_view source = {}) {
  try {
    validate_pipeline(parse_pipeline_config(text, "test"), source, flags);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigValidationTest, DefaultsAndTheUsualValuesAreValid) {
  EXPECT_EQ(problem(""), "");
  EXPECT_EQ(problem("train_config { batch_size: 1 max_steps: 0 clip_gradient_norm: 0 "
                    "max_nan_rollbacks: 3 learning_rate { constant { learning_rate: 0 } } }\n"
                    "train_input_reader { num_epochs: 0 }"),
            "");
}

TEST(ConfigValidationTest, NanFromAFlagNamesTheFlagAndTheField) {
  config::Pipeline p;
  p.mutable_train_config()
      ->mutable_learning_rate()
      ->mutable_exponential_decay_examples()
      ->set_base_learning_rate(std::nan(""));
  const std::string field =
      "train_config.learning_rate.exponential_decay_examples.base_learning_rate";
  try {
    validate_pipeline(p, "", {{field, "base_learning_rate"}});
    FAIL() << "a nan learning rate was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--base_learning_rate is nan (" + field + "); it must be a finite number");
  }
}

TEST(ConfigValidationTest, InfinitiesInFloatFieldsAreRefused) {
  EXPECT_EQ(problem("train_config { regularization_penalty: inf }", {}, "x.config"),
            "x.config: train_config.regularization_penalty is inf; it must be a finite number");
  EXPECT_EQ(problem("eval_config { throttle_secs: -inf }"),
            "eval_config.throttle_secs is -inf; it must be a finite number");
  EXPECT_EQ(problem("train_config { gradient_multipliers { variable_regex: \"a\" multiplier: nan "
                    "} }"),
            "train_config.gradient_multipliers[0].multiplier is nan; it must be a finite number");
  EXPECT_EQ(problem("train_input_reader { preprocessing_step { random_horizontal_flip { "
                    "probability: inf } } }"),
            "train_input_reader.preprocessing_step[0].random_horizontal_flip.probability is inf; "
            "it must be a finite number");
}

TEST(ConfigValidationTest, NanPluginParamsAreRefusedNamingTheParamAndItsFlag) {
  const std::string text =
      "model { class: \"LogisticModel\" params { key: \"l2_penalty\" float_value: nan } }";
  EXPECT_EQ(problem(text), "model param 'l2_penalty' is nan; it must be a finite number");
  EXPECT_EQ(problem(text, {{"model.params.l2_penalty", "l2_penalty"}}),
            "--l2_penalty is nan (model param 'l2_penalty'); it must be a finite number");
  EXPECT_EQ(problem("train_config { optimizer { class: \"AdamOptimizer\" params { key: \"b\" "
                    "float_list { value: [0.5, inf] } } } }"),
            "train_config.optimizer param 'b'[1] is inf; it must be a finite number");
}

TEST(ConfigValidationTest, BatchSizesMustBePositive) {
  EXPECT_EQ(problem("train_config { batch_size: -5 }"),
            "train_config.batch_size is -5; it must be at least 1");
  EXPECT_EQ(problem("train_config { batch_size: 0 }", {{"train_config.batch_size", "batch_size"}}),
            "--batch_size is 0 (train_config.batch_size); it must be at least 1");
  EXPECT_EQ(problem("eval_config { batch_size: 0 }"),
            "eval_config.batch_size is 0; it must be at least 1");
}

TEST(ConfigValidationTest, NegativeStepsSizesIntervalsAndRatesAreRefused) {
  EXPECT_EQ(problem("train_config { max_steps: -1 }"),
            "train_config.max_steps is -1; it must be at least 0");
  EXPECT_EQ(problem("train_config { learning_rate { constant { learning_rate: -0.1 } } }"),
            "train_config.learning_rate.constant.learning_rate is -0.1; it must be at least 0");
  EXPECT_EQ(problem("train_config { clip_gradient_norm: -1 }"),
            "train_config.clip_gradient_norm is -1; it must be at least 0 (0 disables clipping)");
  EXPECT_EQ(problem("train_config { save_interval_secs: -5 }"),
            "train_config.save_interval_secs is -5; it must be at least 0");
  EXPECT_EQ(problem("train_config { max_nan_rollbacks: -1 }"),
            "train_config.max_nan_rollbacks is -1; it must be at least 0 (0 stops at the first "
            "inf or nan)");
  EXPECT_EQ(problem("train_config { learning_rate { exponential_decay_examples { "
                    "learning_rate_decay_examples: 0 } } }"),
            "train_config.learning_rate.exponential_decay_examples.learning_rate_decay_examples "
            "is 0; it must be at least 1");
  EXPECT_EQ(problem("train_input_reader { num_epochs: -2 }"),
            "train_input_reader.num_epochs is -2; it must be at least 0 (0: forever)");
  EXPECT_EQ(problem("eval_input_reader { num_readers: 0 }"),
            "eval_input_reader.num_readers is 0; it must be at least 1");
  EXPECT_EQ(problem("train_input_reader { num_readers: 100000 }"),
            "train_input_reader.num_readers is 100000; it must be at most 1024 (one thread each)");
  EXPECT_EQ(problem("num_classes: 0"), "num_classes is 0; it must be at least 1");
  EXPECT_EQ(problem("train_config { moving_average_decay: 1.5 }"),
            "train_config.moving_average_decay is 1.5; it must be between 0 and 1");
}

TEST(ConfigValidationTest, EveryProblemIsListed) {
  EXPECT_EQ(problem("train_config { batch_size: -5 regularization_penalty: nan }"),
            "2 invalid values: train_config.regularization_penalty is nan; it must be a finite "
            "number; train_config.batch_size is -5; it must be at least 1");
}

TEST(ConfigValidationTest, WhatTheScheduleAndTransformsRefuseIsReported) {
  EXPECT_NE(problem("train_input_reader { padding { pad_to: 4 } }").find("'feature' is missing"),
            std::string::npos);
}

class PathArgumentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("trainyard_config_validation_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  // The message `f` throws, or "".
  template <typename F>
  static std::string message_of(F f) {
    try {
      f();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  fs::path root_;
};

TEST_F(PathArgumentTest, APipelineConfigMustBeARegularFile) {
  const fs::path file = root_ / "p.config";
  std::ofstream(file) << "num_classes: 3\n";
  const fs::path fifo = root_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto check = [](const fs::path& path) {
    return message_of([&] { check_input_file(path, "--pipeline_config_path", "a config file"); });
  };
  EXPECT_EQ(check(file), "");
  EXPECT_EQ(check(root_), "--pipeline_config_path: " + root_.string() +
                              " is a directory; expected a config file");
  EXPECT_EQ(check(fifo),
            "--pipeline_config_path: " + fifo.string() + " is a FIFO; expected a config file");
  EXPECT_EQ(check("/dev/null"),
            "--pipeline_config_path: /dev/null is a device; expected a config file");
  EXPECT_EQ(check(root_ / "missing"),
            "--pipeline_config_path: " + (root_ / "missing").string() + " does not exist");
  // load_pipeline_config refuses a directory instead of reading it as an empty config, and a
  // FIFO instead of blocking on it.
  EXPECT_NE(message_of([&] { load_pipeline_config(root_); }).find("is a directory"),
            std::string::npos);
  EXPECT_NE(message_of([&] { load_pipeline_config(fifo); }).find("is a FIFO"), std::string::npos);
  EXPECT_EQ(load_pipeline_config(file).num_classes(), 3);
}

TEST_F(PathArgumentTest, ATrainDirMustBeADirectoryWhereSomethingExists) {
  const fs::path file = root_ / "file";
  std::ofstream(file) << "x";
  EXPECT_EQ(message_of([&] { check_directory_argument(root_, "--train_dir"); }), "");
  EXPECT_EQ(message_of([&] { check_directory_argument(root_ / "new", "--train_dir"); }), "");
  EXPECT_EQ(message_of([&] { check_directory_argument(file, "--train_dir"); }),
            "--train_dir: " + file.string() + " is a regular file; expected a directory");
}

}  // namespace
}  // namespace trainyard
