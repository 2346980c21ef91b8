// model_flags.json (pkg/yt8m/include/trainyard/pkg/yt8m/model_flags.h): the five keys train.py
// writes, plus num_classes and the model's options, read back by a JSON reader that takes the
// original's files and refuses malformed ones naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_backends.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/pkg/yt8m/model_flags.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

using yt8m::model_flags_to_json;
using yt8m::ModelFlags;
using yt8m::read_model_flags;

class ModelFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("model_flags_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text) {
    const std::string path = (dir_ / "model_flags.json").string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::string error_of(const std::string& text) {
    try {
      read_model_flags(write(text));
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  }

  fs::path dir_;
};

TEST_F(ModelFlagsTest, WritesAndReadsNumClassesAndModelOptions) {
  ModelFlags f;
  f.model = "MoeModel";
  f.feature_names = "mean_rgb,mean_audio";
  f.feature_sizes = "1024,128";
  f.label_loss = "CrossEntropyLoss";
  f.num_classes = 4716;
  f.model_params = {{"moe_num_mixtures", "4"}, {"l2_penalty", "1e-06"}};
  ModelFlags back = read_model_flags(write(model_flags_to_json(f)));
  EXPECT_EQ(back.model, "MoeModel");
  EXPECT_EQ(back.feature_names, "mean_rgb,mean_audio");
  EXPECT_EQ(back.feature_sizes, "1024,128");
  EXPECT_FALSE(back.frame_features);
  EXPECT_EQ(back.label_loss, "CrossEntropyLoss");
  EXPECT_EQ(back.num_classes, 4716);
  EXPECT_EQ(back.model_params, f.model_params);
}

TEST_F(ModelFlagsTest, ReadsTheOriginalsFile) {
  // What train.py writes (json.dumps of its flags dict): no num_classes, no options.
  ModelFlags f = read_model_flags(
      write("{\"frame_features\": true, \"feature_sizes\": \"1024, 128\", \"label_loss\": "
            "\"CrossEntropyLoss\", \"feature_names\": \"rgb, audio\", \"model\": \"DbofModel\"}"));
  EXPECT_EQ(f.model, "DbofModel");
  EXPECT_TRUE(f.frame_features);
  EXPECT_EQ(f.feature_names, "rgb, audio");
  EXPECT_EQ(f.num_classes, 0);
  EXPECT_TRUE(f.model_params.empty());
  // Options may come as JSON numbers, booleans and arrays too.
  f = read_model_flags(write(
      "{\"model\": \"M\", \"feature_names\": \"a\", \"feature_sizes\": \"1\", \"frame_features\": "
      "false, \"label_loss\": \"L\", \"model_params\": {\"k\": 3, \"gating\": true, \"sizes\": [1, "
      "2]}}"));
  ASSERT_EQ(f.model_params.size(), 3u);
  EXPECT_EQ(f.model_params[0].second, "3");
  EXPECT_EQ(f.model_params[1].second, "true");
  EXPECT_EQ(f.model_params[2].second, "1,2");
}

TEST_F(ModelFlagsTest, MalformedFilesNameTheFileAndTheProblem) {
  std::string m = error_of("{\"model\": \"M\"");
  EXPECT_NE(m.find("model_flags.json: invalid JSON: expected '}' at byte 13"), std::string::npos)
      << m;
  m = error_of("{\"model\": \"M\", \"feature_names\": \"a\"}");
  EXPECT_NE(m.find("model_flags.json: no \"feature_sizes\""), std::string::npos) << m;
  m = error_of("{\"model\": 3}");
  EXPECT_NE(m.find("\"model\" is not a string"), std::string::npos) << m;
  m = error_of(
      "{\"model\": \"M\", \"feature_names\": \"a\", \"feature_sizes\": \"1\", "
      "\"frame_features\": false, \"label_loss\": \"L\", \"num_classes\": -4}");
  EXPECT_NE(m.find("\"num_classes\" is -4, not a positive integer"), std::string::npos) << m;
  m = error_of(std::string(100, '[') + std::string(100, ']'));
  EXPECT_NE(m.find("nesting deeper than 64"), std::string::npos) << m;
  // 65 levels were accepted (fuzz_json): the limit counts arrays and objects, not values.
  m = error_of(std::string(65, '[') + std::string(65, ']'));
  EXPECT_NE(m.find("nesting deeper than 64"), std::string::npos) << m;
  m = error_of(std::string(64, '[') + "1" + std::string(64, ']'));
  EXPECT_NE(m.find("model_flags.json: not a JSON object"), std::string::npos) << m;
  m = error_of("[\"\\ud800\"]");
  EXPECT_NE(m.find("a lone high surrogate"), std::string::npos) << m;
  m = error_of("{} x");
  EXPECT_NE(m.find("text after the JSON value"), std::string::npos) << m;
}

// A FIFO named model_flags.json used to block train, eval and export until a writer came.
TEST_F(ModelFlagsTest, FifoIsRefusedWithoutWaiting) {
  const std::string path = (dir_ / "model_flags.json").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  try {
    read_model_flags(path);
    ADD_FAILURE() << "a FIFO was read";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              path + " is not a regular file (a FIFO, device or directory); not read");
  }
}

// A dangling model_flags.json link in train_dir must not make train create (or read) its target
// outside train_dir: the link is refused by name and nothing is created.
TEST_F(ModelFlagsTest, SymbolicLinkInTrainDirIsRefusedAndItsTargetNotCreated) {
  const fs::path train_dir = dir_ / "train";
  fs::create_directories(train_dir);
  const fs::path outside = dir_ / "outside.json";
  fs::create_symlink(outside, train_dir / "model_flags.json");
  try {
    check_or_record_run(*make_task(test::backend_registry(), "yt8m"), config::Pipeline(),
                        train_dir.string());
    ADD_FAILURE() << "the link was followed";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), (train_dir / "model_flags.json").string() +
                                         " is a symbolic link (to " + outside.string() +
                                         "); train records the run in train_dir itself and "
                                         "follows no link there: remove it");
  }
  EXPECT_FALSE(fs::exists(outside));
  EXPECT_TRUE(fs::is_symlink(train_dir / "model_flags.json"));
}

}  // namespace
}  // namespace trainyard
