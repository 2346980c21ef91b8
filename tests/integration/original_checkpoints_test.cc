// Checkpoints written by the originals' own training graphs (tests/golden/
// make_yt8m_checkpoints_golden.py: TensorFlow, train.py's layout) work with Trainyard: the
// starter code's, whose model variables and Adam slots sit under the "tower/" variable scope,
// and the WILLOW fork's, without it; an int32 global_step; no Trainyard entries. Each restores
// for prediction with TensorFlow's predictions, resumes training (its slots restored, the new
// checkpoint written under the same names and global_step dtype, so the original graph can
// restore it in turn), and serves as a fine-tuning checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "trainyard/core/checkpoint.h"
#include "trainyard/core/config.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/trainer.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

const fs::path kGolden = fs::path(TRAINYARD_GOLDEN_DIR) / "yt8m_checkpoints";

struct OriginalCase {
  std::string name, model, scope;
  std::vector<std::string> variables;
  std::vector<double> predictions;  // [4, 5]
};

std::vector<OriginalCase> read_manifest() {
  std::ifstream file(kGolden / "manifest.txt");
  std::vector<OriginalCase> cases;
  OriginalCase c;
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream in(line);
    std::string key, word;
    in >> key;
    if (key == "case") {
      c = OriginalCase();
      in >> c.name;
    } else if (key == "model") {
      in >> c.model;
    } else if (key == "scope") {
      in >> c.scope;
      if (c.scope == "-") c.scope.clear();
    } else if (key == "variables") {
      while (in >> word) c.variables.push_back(word);
    } else if (key == "predictions") {
      double v;
      while (in >> v) c.predictions.push_back(v);
    } else if (key == "end") {
      cases.push_back(c);
    }
  }
  return cases;
}

class OriginalCheckpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("trainyard_original_checkpoints_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    PluginRegistry::Settings s;
    s.use_environment = false;
    registry_ = std::make_unique<PluginRegistry>(s);
    cases_ = read_manifest();
    ASSERT_EQ(cases_.size(), 4u) << "cannot read " << (kGolden / "manifest.txt");
  }
  void TearDown() override { fs::remove_all(root_); }

  config::Pipeline pipeline(const OriginalCase& c, const fs::path& train_dir) {
    const std::string reader =
        "  reader { class: \"YT8MAggregatedFeatureReader\"\n"
        "    params { key: \"feature_names\" string_list { value: [\"mean_rgb\", "
        "\"mean_audio\"] } }\n"
        "    params { key: \"feature_sizes\" int_list { value: [6, 2] } }\n"
        "    params { key: \"num_classes\" int_value: 5 } }\n";
    const std::string data = (kGolden / "examples.tfrecord").string();
    config::Pipeline p = parse_pipeline_config(
        "model { class: \"" + c.model + "\" }\nnum_classes: 5\n" +
            "train_config { batch_size: 4 log_every_n_steps: 1 save_interval_secs: 1000 seed: 1\n"
            "  learning_rate { constant { learning_rate: 0.01 } } }\n"
            "train_input_reader { data_pattern: \"" +
            data + "\" num_epochs: 0 num_readers: 1\n" + reader +
            "}\neval_input_reader { data_pattern: \"" + data + "\"\n" + reader +
            "}\neval_config { batch_size: 4 }\n",
        "test");
    p.mutable_train_config()->set_train_dir(train_dir.string());
    return p;
  }

  // A copy of the case's train_dir, as a user unpacks a released model.
  fs::path unpack(const OriginalCase& c) {
    fs::path dir = root_ / c.name;
    fs::copy(kGolden / c.name, dir, fs::copy_options::recursive);
    return dir;
  }

  fs::path root_;
  std::unique_ptr<PluginRegistry> registry_;
  std::vector<OriginalCase> cases_;
};

TEST_F(OriginalCheckpointsTest, PredictionsMatchTensorFlowsFromTheOriginalsCheckpoints) {
  for (const OriginalCase& c : cases_) {
    SCOPED_TRACE(c.name);
    fs::path dir = unpack(c);
    std::ostringstream log;
    fs::path csv = root_ / (c.name + ".csv");
    ASSERT_EQ(predict(*registry_, pipeline(c, dir), "", csv.string(), 5, log), 4) << log.str();
    // "vid<i>,class score class score ...": all 5 classes of each of the 4 videos.
    std::ifstream in(csv);
    std::string line;
    std::getline(in, line);
    int rows = 0;
    while (std::getline(in, line)) {
      std::istringstream row(line.substr(line.find(',') + 1));
      const int video = std::stoi(line.substr(3, line.find(',') - 3));
      int cls;
      double score;
      int seen = 0;
      while (row >> cls >> score) {
        EXPECT_NEAR(score, c.predictions.at(static_cast<std::size_t>(video * 5 + cls)), 1e-5)
            << "video " << video << " class " << cls;
        ++seen;
      }
      EXPECT_EQ(seen, 5);
      ++rows;
    }
    EXPECT_EQ(rows, 4);
  }
}

TEST_F(OriginalCheckpointsTest, TrainingResumesAndWritesTheOriginalsNames) {
  for (const OriginalCase& c : cases_) {
    SCOPED_TRACE(c.name);
    fs::path dir = unpack(c);
    config::Pipeline p = pipeline(c, dir);
    p.mutable_train_config()->set_max_steps(5);
    std::ostringstream log;
    TrainResult r = train(*registry_, p, log);
    EXPECT_EQ(r.global_step, 5);
    EXPECT_NE(log.str().find("restoring from " + (dir / "model.ckpt-3").string() + " at step 3"),
              std::string::npos)
        << log.str();
    EXPECT_EQ(log.str().find("starting it from its initializer"), std::string::npos)
        << "the Adam slots were in the checkpoint: " << log.str();

    CheckpointReader written(r.last_checkpoint);
    EXPECT_EQ(written.info("global_step").dtype, DType::kI32) << "the originals' int32 step";
    const std::string prefix = c.scope.empty() ? "" : c.scope + "/";
    for (const std::string& name : c.variables) {
      if (name == "global_step" || name == "beta1_power" || name == "beta2_power") continue;
      EXPECT_TRUE(written.contains(name)) << "the resumed checkpoint lacks " << name;
    }
    for (const CheckpointTensorInfo& info : written.tensors()) {
      if (info.name.rfind("trainyard/", 0) == 0 || info.name == "global_step" ||
          info.name.find("_power") != std::string::npos) {
        continue;
      }
      EXPECT_EQ(info.name.rfind(prefix, 0), 0u) << info.name << " is not under '" << prefix << "'";
    }
  }
}

TEST_F(OriginalCheckpointsTest, FineTunesFromTheOriginalsCheckpoints) {
  for (const OriginalCase& c : cases_) {
    SCOPED_TRACE(c.name);
    config::Pipeline p = pipeline(c, root_ / (c.name + "_tuned"));
    p.mutable_train_config()->set_fine_tune_checkpoint(
        (kGolden / c.name / "model.ckpt-3").string());
    p.mutable_train_config()->set_max_steps(1);
    std::ostringstream log;
    train(*registry_, p, log);
    const std::size_t model_variables = c.model == "MoeModel" ? 3 : 2;
    EXPECT_NE(log.str().find("restored " + std::to_string(model_variables)), std::string::npos)
        << log.str();
    // A fresh run writes Trainyard's own names.
    CheckpointReader written((root_ / (c.name + "_tuned") / "model.ckpt-1").string());
    EXPECT_FALSE(written.contains("tower/gates/weights"));
    EXPECT_TRUE(
        written.contains(c.model == "MoeModel" ? "gates/weights" : "fully_connected/weights"));
  }
}

// The starter code's LogisticModel checkpoint saved again by TensorFlow in the V1 layout
// (tests/golden/tf1_v1_checkpoint/starter_logistic.ckpt): fine-tuning restores the same
// variables from the single file.
TEST_F(OriginalCheckpointsTest, FineTunesFromAV1Checkpoint) {
  for (const OriginalCase& c : cases_) {
    if (c.name != "starter_logistic") continue;
    config::Pipeline p = pipeline(c, root_ / "v1_tuned");
    p.mutable_train_config()->set_fine_tune_checkpoint(
        (kGolden.parent_path() / "tf1_v1_checkpoint" / "starter_logistic.ckpt").string());
    p.mutable_train_config()->set_max_steps(1);
    std::ostringstream log;
    train(*registry_, p, log);
    EXPECT_NE(log.str().find("restored 2"), std::string::npos) << log.str();
    return;
  }
  FAIL() << "no starter_logistic case";
}

}  // namespace
}  // namespace trainyard
