// What a pipeline leaves to its task (issue 36, section 3: defaults live in one place): a
// pipeline that names no task runs under the one task that claims unnamed pipelines (the
// YouTube-8M starter code's, which trains from flags alone), and a train_dir the config does not
// set is the task's own default (train.py's /tmp/yt8m_model/, train_image_classifier.py's
// /tmp/tfmodel/; model_main.py has none and requires --model_dir). The record a run keeps in
// train_dir names the resolved task, so a run naming no task resumes one that named it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_backends.h"
#include "trainyard/core/config.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

TEST(TaskDefaults, APipelineNamingNoTaskRunsUnderTheStarterCodesTaskAndTrainDir) {
  PluginRegistry& registry = test::backend_registry();
  EXPECT_EQ(default_task_name(registry), "yt8m");
  config::Pipeline p = parse_pipeline_config("num_classes: 20", "unnamed.config");
  const std::shared_ptr<const Task> task = resolve_task(registry, p);
  EXPECT_EQ(p.task(), "yt8m");
  EXPECT_EQ(p.train_config().train_dir(), "/tmp/yt8m_model/");
  EXPECT_EQ(task->defaults().model, "LogisticModel");
  EXPECT_EQ(task_pipeline_of(*task, p).task, "yt8m");
}

TEST(TaskDefaults, TheConfigsTrainDirWinsAndEachTaskHasItsOwnDefault) {
  PluginRegistry& registry = test::backend_registry();
  config::Pipeline set = parse_pipeline_config(
      "task: \"classification\" train_config { train_dir: \"/data/run\" }", "set.config");
  resolve_task(registry, set);
  EXPECT_EQ(set.train_config().train_dir(), "/data/run");
  config::Pipeline unset = parse_pipeline_config("task: \"classification\"", "unset.config");
  resolve_task(registry, unset);
  EXPECT_EQ(unset.task(), "classification");
  EXPECT_EQ(unset.train_config().train_dir(), "/tmp/tfmodel/");
}

TEST(TaskDefaults, ATaskWithoutADefaultTrainDirIsRefusedNamingTheTask) {
  config::Pipeline p = parse_pipeline_config("task: \"detection\"", "detection.config");
  try {
    resolve_task(test::backend_registry(), p);
    FAIL() << "a detection pipeline without train_dir was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no train_dir"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the detection task has no default"), std::string::npos)
        << e.what();
  }
}

TEST(TaskDefaults, AnUnknownTaskIsRefusedListingTheKnownOnes) {
  config::Pipeline p = parse_pipeline_config("task: \"segmentation\"", "unknown.config");
  try {
    resolve_task(test::backend_registry(), p);
    FAIL() << "an unknown task was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown task 'segmentation'"), std::string::npos) << what;
    EXPECT_NE(what.find("classification, detection, yt8m"), std::string::npos) << what;
  }
}

TEST(TaskDefaults, ARunNamingNoTaskResumesTheRecordOfOneThatNamedIt) {
  PluginRegistry& registry = test::backend_registry();
  const fs::path dir = fs::path(::testing::TempDir()) / "task_defaults_resume";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The same model in every run below, so that only the task tells them apart.
  config::Pipeline named = parse_pipeline_config(
      "task: \"yt8m\" num_classes: 20 model { class: \"LogisticModel\" }", "named");
  check_or_record_pipeline_config(*task_of(registry, named), named, dir.string());
  // Not resolved: the core names the task it ran under, not the empty field.
  const config::Pipeline unnamed =
      parse_pipeline_config("num_classes: 20 model { class: \"LogisticModel\" }", "unnamed");
  EXPECT_NO_THROW(
      check_or_record_pipeline_config(*task_of(registry, unnamed), unnamed, dir.string()));
  config::Pipeline other = parse_pipeline_config(
      "task: \"classification\" num_classes: 20 "
      "model { class: \"LogisticModel\" }",
      "other");
  EXPECT_THROW(check_or_record_pipeline_config(*task_of(registry, other), other, dir.string()),
               ConfigError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainyard
