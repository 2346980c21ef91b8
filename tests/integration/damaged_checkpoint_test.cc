// A damaged checkpoint never loses a run silently: `train` moves a damaged newest checkpoint
// aside, says so and resumes from the newest intact one; it refuses to start over when none is
// intact; start_new_model deletes only a directory that holds a training run; eval reports a
// damaged newest checkpoint instead of evaluating an older one.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "trainer_fixture.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void flip_byte(const fs::path& path, std::size_t offset) {
  std::string bytes = read_bytes(path);
  bytes.at(offset) ^= 0x20;
  write_bytes(path, bytes);
}

class DamagedCheckpointTest : public TrainerTest {
 protected:
  std::string train_dir() const { return (root_ / "train").string(); }
  std::string prefix(int step) const { return train_dir() + "/model.ckpt-" + std::to_string(step); }
  std::string data(int step) const { return prefix(step) + ".data-00000-of-00001"; }
};

TEST_F(DamagedCheckpointTest, DamagedNewestIsMovedAsideReportedAndThePreviousRestored) {
  config::Pipeline p = pipeline();
  p.mutable_train_config()->set_save_interval_secs(0);  // a checkpoint every step
  p.mutable_train_config()->set_max_steps(3);
  std::ostringstream first;
  ASSERT_EQ(train(*registry_, p, first).global_step, 3);
  flip_byte(data(3), 100);  // inside a tensor: only its CRC can tell

  p.mutable_train_config()->set_max_steps(5);
  std::ostringstream log;
  TrainResult r = train(*registry_, p, log);
  EXPECT_EQ(r.global_step, 5);
  EXPECT_NE(log.str().find("warning: checkpoint " + prefix(3) + " is damaged (" + data(3) +
                           ": CRC-32C mismatch for tensor '"),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("; moved aside to " + data(3) + ".damaged, " + prefix(3) +
                           ".index.damaged; restoring " + prefix(2) + "\n"),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("restoring from " + prefix(2) + " at step 2\n"), std::string::npos)
      << log.str();
  // Kept for inspection while the run went on (and wrote a new model.ckpt-3).
  EXPECT_TRUE(fs::exists(data(3) + ".damaged"));
  EXPECT_TRUE(fs::exists(prefix(3) + ".index.damaged"));
  EXPECT_EQ(checkpoint_damage(prefix(3)), std::nullopt);
  EXPECT_EQ(latest_checkpoint(train_dir()), prefix(5));
}

TEST_F(DamagedCheckpointTest, OnlyCheckpointDamagedRefusesToStartOverUntilStartNewModel) {
  config::Pipeline p = pipeline();
  p.mutable_train_config()->set_max_steps(2);  // one checkpoint, at the end
  std::ostringstream first;
  train(*registry_, p, first);
  ASSERT_TRUE(fs::exists(prefix(2) + ".index"));
  const std::string bytes = read_bytes(data(2));
  write_bytes(data(2), bytes.substr(0, bytes.size() / 2));

  p.mutable_train_config()->set_max_steps(4);
  std::ostringstream refused;
  try {
    train(*registry_, p, refused);
    FAIL() << "a run whose only checkpoint is damaged started over\n" << refused.str();
  } catch (const DataLoss& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no checkpoint that " + train_dir() +
                           "/checkpoint lists is intact: " + prefix(2) + " (" + data(2) + " is "),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("pass --start_new_model to start over"), std::string::npos) << message;
  }
  EXPECT_TRUE(fs::exists(prefix(2) + ".index"));  // nothing renamed
  EXPECT_FALSE(fs::exists(data(2) + ".damaged"));

  p.mutable_train_config()->set_start_new_model(true);
  std::ostringstream over;
  EXPECT_EQ(train(*registry_, p, over).global_step, 4);
  EXPECT_NE(over.str().find("start_new_model: deleting the training run in " + train_dir() + ": "),
            std::string::npos)
      << over.str();
  EXPECT_EQ(over.str().find("restoring from"), std::string::npos) << over.str();
  EXPECT_FALSE(fs::exists(data(2)));
}

TEST_F(DamagedCheckpointTest, StartNewModelRefusesADirectoryThatHoldsNoRun) {
  const fs::path thesis = root_ / "thesis";
  fs::create_directories(thesis / "figures");
  write_bytes(thesis / "thesis.tex", "\\documentclass{article}\n");
  config::Pipeline p = pipeline();
  p.mutable_train_config()->set_train_dir(thesis.string());
  p.mutable_train_config()->set_start_new_model(true);
  p.mutable_train_config()->set_max_steps(1);
  std::ostringstream log;
  try {
    train(*registry_, p, log);
    FAIL() << "start_new_model deleted a directory that holds no training run";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("start_new_model: " + thesis.string() +
                           " holds no training run (no `checkpoint` state file, model.ckpt-* or "
                           "events.out.tfevents.*), so nothing in it is deleted; it holds figures, "
                           "thesis.tex"),
              std::string::npos)
        << message;
  }
  EXPECT_TRUE(fs::exists(thesis / "thesis.tex"));
  EXPECT_TRUE(fs::exists(thesis / "figures"));
}

TEST_F(DamagedCheckpointTest, EvalReportsADamagedNewestCheckpointInsteadOfAnOlderOne) {
  config::Pipeline p = pipeline();
  p.mutable_train_config()->set_save_interval_secs(0);
  p.mutable_train_config()->set_max_steps(2);
  std::ostringstream log;
  train(*registry_, p, log);
  const std::string bytes = read_bytes(data(2));
  write_bytes(data(2), bytes.substr(0, bytes.size() - 8));
  std::ostringstream eval_log;
  try {
    evaluate(*registry_, p, "", eval_log);
    FAIL() << "eval used a checkpoint other than the damaged newest one";
  } catch (const DataLoss& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint " + prefix(2) + ", the newest that"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::exists(data(2)));  // a reader moves nothing aside
}

}  // namespace
}  // namespace trainyard
