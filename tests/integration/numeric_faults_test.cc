// Numeric faults in training (issue 19): an inf or nan stops the run naming the step, the batch
// and the loss or the first variable whose gradient holds it; with
// train_config.max_nan_rollbacks the run restores the last good checkpoint, skips the batch,
// logs it, and goes on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/config.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/core/train_step.h"
#include "trainyard/core/trainer.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

class NumericFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("trainyard_numeric_faults_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    PluginRegistry::Settings s;
    s.use_environment = false;
    registry_ = std::make_unique<PluginRegistry>(s);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes `file`: videos "v<i>" for each i of `ids`, mean_rgb[4] of small values and one label
  // of 3; the video `poisoned` has `value` as its first feature.
  void write_videos(const fs::path& file, const std::vector<int>& ids, int poisoned = -1,
                    float value = 0.0f, int poisoned_too = -1) {
    TFRecordWriter writer(file.string());
    for (int i : ids) {
      wire::tf::Example example;
      auto& map = *example.mutable_features()->mutable_feature();
      map["id"].mutable_bytes_list()->add_value("v" + std::to_string(i));
      map["labels"].mutable_int64_list()->add_value(i % 3);
      auto* features = map["mean_rgb"].mutable_float_list();
      for (int d = 0; d < 4; ++d) {
        features->add_value(i == poisoned || i == poisoned_too
                                ? (d == 0 ? value : 0.5f)
                                : static_cast<float>(((i * 7 + d * 3) % 11) - 5) / 5.0f +
                                      (d == i % 3 ? 1.0f : 0.0f));
      }
      writer.write(example.SerializeAsString());
    }
    writer.close();
  }

  static std::vector<int> range(int begin, int end) {
    std::vector<int> out;
    for (int i = begin; i < end; ++i) out.push_back(i);
    return out;
  }

  // Batches of 10 in file order, one reader, one epoch: batch k holds videos 10(k-1)..10k-1.
  config::Pipeline pipeline(const fs::path& data, const fs::path& train_dir) {
    config::Pipeline p = parse_pipeline_config(
        "model { class: \"LogisticModel\" }\n"
        "num_classes: 3\n"
        "train_config { batch_size: 10 log_every_n_steps: 1 save_interval_secs: 1000 seed: 1\n"
        "  learning_rate { constant { learning_rate: 0.05 } } }\n"
        "train_input_reader { num_epochs: 1 num_readers: 1 shuffle: false deterministic: true\n"
        "  reader { class: \"YT8MAggregatedFeatureReader\"\n"
        "    params { key: \"feature_names\" string_list { value: [\"mean_rgb\"] } }\n"
        "    params { key: \"feature_sizes\" int_list { value: [4] } }\n"
        "    params { key: \"num_classes\" int_value: 3 } } }\n",
        "test");
    p.mutable_train_input_reader()->set_data_pattern(data.string());
    p.mutable_train_config()->set_train_dir(train_dir.string());
    return p;
  }

  // Every variable of the newest checkpoint in `dir` (weights and Adam's slots).
  std::vector<std::pair<std::string, std::vector<float>>> variables(const fs::path& dir) {
    std::shared_ptr<Backend> cpu = registry_->create<Backend>(ClassKind::kBackend, "cpu");
    CheckpointReader reader(dir.string());
    std::vector<std::pair<std::string, std::vector<float>>> out;
    for (const CheckpointTensorInfo& info : reader.tensors()) {
      if (info.dtype != DType::kF32 || info.name.rfind("trainyard/", 0) == 0) continue;
      out.emplace_back(info.name, reader.read(info.name, *cpu).to_vector<float>());
    }
    return out;
  }

  fs::path root_;
  std::unique_ptr<PluginRegistry> registry_;
};

// A gradient multiplier beyond float32's range makes the weights' gradient inf (or nan where it
// is 0) while the loss is finite: the run stops at the first step, naming the weights, not the
// biases created after them.
TEST_F(NumericFaultsTest, AnInfiniteGradientStopsTheRunNamingTheStepBatchAndVariable) {
  write_videos(root_ / "data.tfrecord", range(0, 40));
  config::Pipeline p = pipeline(root_ / "data.tfrecord", root_ / "train");
  config::GradientMultiplier* m = p.mutable_train_config()->add_gradient_multipliers();
  m->set_variable_regex(".*weights");
  m->set_multiplier(1e39);
  std::ostringstream log;
  try {
    train(*registry_, p, log);
    FAIL() << "training went on past the inf gradient:\n" << log.str();
  } catch (const NonFiniteError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.step(), 0);
    EXPECT_EQ(e.source(), NonFiniteError::Source::kGradient);
    EXPECT_NE(e.variable().find("weights"), std::string::npos) << what;
    EXPECT_EQ(what.rfind("a gradient is inf or nan at step 0: first that of variable '" +
                             e.variable() + "' (1 of the 2 trained variables; the loss, ",
                         0),
              0u)
        << what;
    EXPECT_NE(what.find(", is finite), on input batch 1 (10 examples, ids 'v0' to 'v9'); the "
                        "last good checkpoint is kept"),
              std::string::npos)
        << what;
  }
}

// A learning rate of 1e30 throws the weights so far that the L2 regularization loss overflows
// after the first step, while the label loss (its probabilities clamped) stays finite.
TEST_F(NumericFaultsTest, ADivergedRunStopsNamingTheRegularizationLoss) {
  write_videos(root_ / "data.tfrecord", range(0, 40));
  config::Pipeline p = pipeline(root_ / "data.tfrecord", root_ / "train");
  p.mutable_train_config()->mutable_learning_rate()->mutable_constant()->set_learning_rate(1e30);
  std::ostringstream log;
  try {
    train(*registry_, p, log);
    FAIL() << "training went on past the inf loss:\n" << log.str();
  } catch (const NonFiniteError& e) {
    EXPECT_EQ(e.step(), 1);
    EXPECT_EQ(e.source(), NonFiniteError::Source::kRegularizationLoss);
    EXPECT_EQ(std::string(e.what()).rfind(
                  "loss is inf or nan at step 1: the regularization loss (inf) times "
                  "regularization_penalty (1) is inf; the label loss, ",
                  0),
              0u)
        << e.what();
  }
}

// A nan feature makes the label loss nan: the message says it is the label loss.
TEST_F(NumericFaultsTest, ANanLossStopsTheRunNamingTheLabelLoss) {
  write_videos(root_ / "data.tfrecord", range(0, 40), 15, std::nanf(""));
  std::ostringstream log;
  try {
    train(*registry_, pipeline(root_ / "data.tfrecord", root_ / "train"), log);
    FAIL() << "training went on past the nan loss:\n" << log.str();
  } catch (const NonFiniteError& e) {
    EXPECT_EQ(e.step(), 1);
    EXPECT_EQ(e.source(), NonFiniteError::Source::kLabelLoss);
    EXPECT_EQ(std::string(e.what()).rfind(
                  "loss is inf or nan at step 1: the label loss is nan, on input batch 2 (10 "
                  "examples, ids 'v10' to 'v19')",
                  0),
              0u)
        << e.what();
  }
}

// With max_nan_rollbacks the run restores the last good checkpoint (step 1, written by an
// earlier run), skips the poisoned batch 3 and trains on batch 4 from there: its variables then
// equal those of a run that trained on batch 1 and then batch 4 alone.
TEST_F(NumericFaultsTest, RollbackRestoresTheCheckpointSkipsTheBatchAndLogsIt) {
  write_videos(root_ / "data.tfrecord", range(0, 40), 25, std::nanf(""));
  config::Pipeline first = pipeline(root_ / "data.tfrecord", root_ / "train");
  first.mutable_train_config()->set_max_steps(1);
  std::ostringstream log;
  ASSERT_EQ(train(*registry_, first, log).global_step, 1);
  fs::copy(root_ / "train", root_ / "reference", fs::copy_options::recursive);

  config::Pipeline resumed = pipeline(root_ / "data.tfrecord", root_ / "train");
  resumed.mutable_train_config()->set_max_nan_rollbacks(1);
  log.str("");
  TrainResult r = train(*registry_, resumed, log);
  EXPECT_EQ(r.global_step, 2) << log.str();
  const std::string text = log.str();
  EXPECT_NE(text.find("warning: loss is inf or nan at step 2: the label loss is nan; skipping "
                      "input batch 3 (10 examples, ids 'v20' to 'v29') and rolling "
                      "back to " +
                      (root_ / "train" / "model.ckpt-1").string() +
                      " at step 1 (rollback 1 of 1, train_config.max_nan_rollbacks)\n"),
            std::string::npos)
      << text;

  // The reference: the checkpoint of step 1, then batch 4 (the resumed run skips batch 1 of
  // this file as it did the first run's).
  std::vector<int> batches_1_and_4 = range(0, 10);
  for (int i = 30; i < 40; ++i) batches_1_and_4.push_back(i);
  write_videos(root_ / "reference.tfrecord", batches_1_and_4);
  std::ostringstream reference_log;
  ASSERT_EQ(
      train(*registry_, pipeline(root_ / "reference.tfrecord", root_ / "reference"), reference_log)
          .global_step,
      2);
  const auto got = variables(root_ / "train");
  const auto want = variables(root_ / "reference");
  ASSERT_EQ(got.size(), want.size());
  ASSERT_GE(got.size(), 6u);  // weights, biases and Adam's two slots of each
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].first, want[i].first);
    ASSERT_EQ(got[i].second.size(), want[i].second.size());
    for (std::size_t k = 0; k < got[i].second.size(); ++k) {
      EXPECT_NEAR(got[i].second[k], want[i].second[k], 1e-6) << got[i].first << "[" << k << "]";
    }
  }
}

// Without a checkpoint the variables stay as the failed step found them; once the rollbacks are
// used up the next inf stops the run, saying so.
TEST_F(NumericFaultsTest, RollbacksAreLimitedToMaxNanRollbacks) {
  write_videos(root_ / "data.tfrecord", range(0, 40), 15, std::nanf(""), 35);
  config::Pipeline p = pipeline(root_ / "data.tfrecord", root_ / "train");
  p.mutable_train_config()->set_max_nan_rollbacks(1);
  std::ostringstream log;
  try {
    train(*registry_, p, log);
    FAIL() << "the second inf did not stop the run:\n" << log.str();
  } catch (const NonFiniteError& e) {
    // Batch 2 was skipped at step 1, so batch 4 ran as step 2.
    EXPECT_EQ(e.step(), 2);
    EXPECT_NE(std::string(e.what()).find(
                  ", on input batch 4 (10 examples, ids 'v30' to 'v39'); the last good "
                  "checkpoint is kept; the 1 rollbacks train_config.max_nan_rollbacks allows "
                  "are used up"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NE(log.str().find("warning: loss is inf or nan at step 1: the label loss is nan; skipping "
                           "input batch 2 (10 examples, ids 'v10' to 'v19'); no "
                           "checkpoint yet, so the variables keep the values the step found "
                           "(rollback 1 of 1, train_config.max_nan_rollbacks)\n"),
            std::string::npos)
      << log.str();
}

}  // namespace
}  // namespace trainyard
