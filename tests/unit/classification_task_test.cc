// The image classification task: accuracy as tf.metrics.accuracy over argmax (the first of
// equal scores), top-5 as tf.nn.in_top_k (ties at the boundary count in), the evaluation's
// loss weighted by batch sizes, the estimator's log lines, the predictions CSV with ids or
// record indices and 6 significant digits, and train_dir/pipeline.config recorded and
// enforced on a resumed run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "test_backends.h"
#include "top_k_counts.h"
#include "trainyard/core/config.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

Backend& cpu() { return *test::backend("cpu"); }

std::shared_ptr<const Task> classification() {
  return make_task(test::backend_registry(), "classification");
}

using tasks::count_correct;
using tasks::TopKCounts;

TEST(ClassificationTask, AccuracyTakesTheFirstArgmaxAndTopKCountsTiesIn) {
  // Three classes, k = 2. Row 0: label 1 is the argmax. Row 1: label 2 ties with class 0 for
  // the top score; argmax is class 0 (the first), so top-1 misses, but no class scores higher
  // than it, so it is in the top 2. Row 2: label 0 scores lowest of three: in neither.
  // Row 3: label 2, two classes tie above it: out of the top 2.
  const std::vector<float> p = {0.1f, 0.8f, 0.1f,  //
                                0.4f, 0.2f, 0.4f,  //
                                0.1f, 0.5f, 0.4f,  //
                                0.4f, 0.4f, 0.2f};
  const std::vector<float> l = {0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1};
  TopKCounts c = count_correct(p, l, 4, 3, 2);
  EXPECT_EQ(c.top1, 1);
  EXPECT_EQ(c.topk, 2);
  EXPECT_EQ(count_correct(p, l, 4, 3, 3).topk, 4);
  EXPECT_THROW(count_correct(p, l, 5, 3, 2), InvalidArgument);
}

TEST(ClassificationTask, EvaluationReportsAccuracyTopFiveAndLossWeightedByBatchSize) {
  const std::shared_ptr<const Task> task_object = classification();
  const Task& task = *task_object;
  config::Pipeline pipeline;
  pipeline.set_task("classification");
  pipeline.set_num_classes(6);
  auto evaluation = task.make_evaluation(task_pipeline_of(task, pipeline));
  Batch batch;
  // Two examples, labels 0 and 5; the first right, the second ranked 6th.
  batch.labels = Tensor::from_vector(cpu(), Shape{2, 6},
                                     std::vector<float>{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  Tensor p = Tensor::from_vector(
      cpu(), Shape{2, 6},
      std::vector<float>{0.5f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.3f, 0.2f, 0.2f, 0.1f, 0.15f, 0.05f});
  evaluation->add(p, batch, /*loss=*/1.0, 2);
  Batch one;
  one.labels = Tensor::from_vector(cpu(), Shape{1, 6}, std::vector<float>{0, 0, 1, 0, 0, 0});
  evaluation->add(Tensor::from_vector(cpu(), Shape{1, 6}, std::vector<float>{0, 0, 1, 0, 0, 0}),
                  one, 4.0, 1);
  std::vector<Metric> m = evaluation->result();
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].name, "accuracy");
  EXPECT_DOUBLE_EQ(m[0].value, 2.0 / 3.0);
  EXPECT_EQ(m[1].name, "top_5_accuracy");
  EXPECT_DOUBLE_EQ(m[1].value, 2.0 / 3.0);
  EXPECT_EQ(m[2].name, "loss");
  EXPECT_DOUBLE_EQ(m[2].value, (1.0 * 2 + 4.0 * 1) / 3.0);
  // The declared metrics are the reported ones, in the same order.
  std::vector<Metric> declared = task.evaluation_metrics();
  ASSERT_EQ(declared.size(), m.size());
  for (std::size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(declared[i].name, m[i].name);
    EXPECT_EQ(declared[i].tag, m[i].tag);
  }

  std::ostringstream log;
  const fs::path dir = fs::path(::testing::TempDir()) / "classification_task_eval";
  fs::remove_all(dir);
  SummaryWriter summaries(dir.string(), ".test");
  task.report_evaluation(7, m, log, summaries);
  EXPECT_EQ(log.str(),
            "Saving dict for global step 7: accuracy = 0.666667, top_5_accuracy = 0.666667, "
            "loss = 2, examples = 3, global_step = 7\n");
}

TEST(ClassificationTask, PredictionsCsvHasIdsOrIndicesAndSixSignificantDigits) {
  const std::shared_ptr<const Task> task_object = classification();
  const Task& task = *task_object;
  config::Pipeline pipeline;
  pipeline.set_task("classification");
  pipeline.set_num_classes(3);
  std::ostringstream out;
  {
    auto writer = task.make_prediction_writer(task_pipeline_of(task, pipeline), out,
                                              /*top_k=*/5);  // capped at 3
    Batch batch;
    batch.ids = {"img_001.png", ""};
    writer->write(Tensor::from_vector(
                      cpu(), Shape{2, 3},
                      std::vector<float>{0.123456789f, 0.8f, 0.076543211f, 0.5f, 0.25f, 0.25f}),
                  batch);
    Batch next;
    next.ids = {""};
    writer->write(Tensor::from_vector(cpu(), Shape{1, 3}, std::vector<float>{0, 0, 1}), next);
  }
  EXPECT_EQ(out.str(),
            "ImageId,LabelConfidencePairs\n"
            "img_001.png,1 0.8 0 0.123457 2 0.0765432\n"
            "1,0 0.5 1 0.25 2 0.25\n"
            "2,2 1 0 0 1 0\n");
}

TEST(ClassificationTask, RecordsTheRunsConfigAndRefusesAnotherModelOnResume) {
  const std::shared_ptr<const Task> task_object = classification();
  const Task& task = *task_object;
  const fs::path dir = fs::path(::testing::TempDir()) / "classification_task_run";
  fs::remove_all(dir);
  fs::create_directories(dir);
  config::Pipeline p = parse_pipeline_config(
      "task: 'classification' num_classes: 10 model { class: 'lenet' }", "test");
  check_or_record_run(task, p, dir.string());
  ASSERT_TRUE(fs::exists(dir / "pipeline.config"));
  EXPECT_EQ(load_pipeline_config(dir / "pipeline.config").model().class_(), "lenet");
  check_or_record_run(task, p, dir.string());  // the same run again
  // Another batch size or data is fine; another model, option or class count is not.
  config::Pipeline other = p;
  other.mutable_train_config()->set_batch_size(7);
  EXPECT_NO_THROW(check_or_record_run(task, other, dir.string()));
  other = p;
  other.set_num_classes(11);
  EXPECT_THROW(check_or_record_run(task, other, dir.string()), ConfigError);
  other = p;
  config::Param* option = other.mutable_model()->add_params();
  option->set_key("dropout_keep_prob");
  option->set_float_value(0.9);
  try {
    check_or_record_run(task, other, dir.string());
    FAIL() << "a changed model option was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.config: this train_dir was created with"),
              std::string::npos)
        << e.what();
  }
}

TEST(ClassificationTask, ACheckpointWithoutItsRunGetsSlimsPreprocessingForItsNet) {
  const std::shared_ptr<const Task> task = classification();
  // preprocessing_factory: lenet's own on one channel at 28; the MobileNets' and the Inceptions'
  // inception (the shorter side resized to the crop; Inception v3's at 299); the ResNets' vgg
  // (256, then the crop).
  const std::optional<CheckpointInput> lenet = task->checkpoint_input("lenet", "", 0);
  ASSERT_TRUE(lenet.has_value());
  EXPECT_EQ(lenet->normalization, "lenet");
  EXPECT_EQ(lenet->image_size, 28);
  EXPECT_EQ(lenet->resize_side, 0);
  EXPECT_EQ(lenet->channels, 1);
  const std::optional<CheckpointInput> mobilenet = task->checkpoint_input("mobilenet_v1", "", 0);
  EXPECT_EQ(mobilenet->normalization, "inception");
  EXPECT_EQ(mobilenet->image_size, 224);
  EXPECT_EQ(mobilenet->resize_side, 224);
  EXPECT_EQ(mobilenet->channels, 3);
  const std::optional<CheckpointInput> inception = task->checkpoint_input("inception_v3", "", 0);
  EXPECT_EQ(inception->normalization, "inception");
  EXPECT_EQ(inception->image_size, 299);
  EXPECT_EQ(inception->resize_side, 299);
  EXPECT_EQ(task->checkpoint_input("inception_v2", "", 0)->image_size, 224);
  const std::optional<CheckpointInput> resnet = task->checkpoint_input("resnet_v1_50", "", 0);
  EXPECT_EQ(resnet->normalization, "vgg");
  EXPECT_EQ(resnet->resize_side, 256);
  EXPECT_EQ(task->checkpoint_input("resnet_20", "", 0)->image_size, 32);
  // The flags' choices win; an unknown preprocessing is refused naming the flag.
  const std::optional<CheckpointInput> chosen = task->checkpoint_input("resnet_v1_50", "none", 96);
  EXPECT_EQ(chosen->normalization, "none");
  EXPECT_EQ(chosen->image_size, 96);
  EXPECT_EQ(chosen->resize_side, 0);
  try {
    task->checkpoint_input("lenet", "cifarnet", 0);
    FAIL() << "an unknown preprocessing was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--preprocessing_name is 'cifarnet'"), std::string::npos)
        << e.what();
  }
  // The other tasks take no model name alone: predict finds this one.
  EXPECT_FALSE(make_task(test::backend_registry(), "yt8m")->checkpoint_input("lenet", "", 0));
  EXPECT_FALSE(make_task(test::backend_registry(), "detection")->checkpoint_input("lenet", "", 0));
}

}  // namespace
}  // namespace trainyard
