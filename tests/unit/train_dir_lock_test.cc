// The train_dir lock: one writer per train_dir, released by the kernel however its holder
// ends, naming the holder to a second writer.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "trainyard/core/train_dir_lock.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

class TrainDirLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("trainyard_lock_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string message_of_second_lock() {
    std::ostringstream log;
    try {
      TrainDirLock second(dir_.string(), "train", log);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(TrainDirLockTest, ASecondWriterIsRefusedNamingTheHolder) {
  std::ostringstream log;
  TrainDirLock first(dir_.string(), "train_and_evaluate", log);
  const std::string message = message_of_second_lock();
  EXPECT_NE(message.find("train_dir " + dir_.string() + " is in use by another training run"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("pid " + std::to_string(::getpid()) + ","), std::string::npos) << message;
  EXPECT_NE(message.find("command train_and_evaluate"), std::string::npos) << message;
  EXPECT_NE(message.find(", started 20"), std::string::npos) << message;
  EXPECT_NE(message.find(first.path()), std::string::npos) << message;
}

TEST_F(TrainDirLockTest, TheLockIsFreeAgainWhenItsHolderEnds) {
  std::ostringstream log;
  { TrainDirLock first(dir_.string(), "train", log); }
  EXPECT_EQ(message_of_second_lock(), "");
}

TEST_F(TrainDirLockTest, AHolderKilledWithSigkillLeavesNoStaleLock) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::ostringstream log;
    TrainDirLock held(dir_.string(), "train", log);
    char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  EXPECT_NE(message_of_second_lock().find("pid " + std::to_string(child) + ","), std::string::npos);
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(message_of_second_lock(), "");
  EXPECT_TRUE(fs::exists(dir_ / TrainDirLock::kFileName));  // kept: it only names the last holder
}

TEST_F(TrainDirLockTest, ALockFileThatIsASymlinkOrNotAFileIsRefused) {
  fs::create_symlink(dir_ / "elsewhere", dir_ / TrainDirLock::kFileName);
  std::ostringstream log;
  try {
    TrainDirLock lock(dir_.string(), "train", log);
    FAIL() << "a symlinked lock file was followed";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "elsewhere"));
  fs::remove(dir_ / TrainDirLock::kFileName);
  fs::create_directory(dir_ / TrainDirLock::kFileName);
  EXPECT_THROW(TrainDirLock(dir_.string(), "train", log), ConfigError);
}

TEST_F(TrainDirLockTest, AForgedHolderRecordIsBoundedAndPrintable) {
  {
    std::ofstream forged(dir_ / TrainDirLock::kFileName, std::ios::binary);
    forged << std::string(100000, 'x') << "\x1b[2Jescape";
  }
  std::ostringstream log;
  TrainDirLock first(dir_.string(), "train", log);  // rewrites the record
  const std::string message = message_of_second_lock();
  EXPECT_LT(message.size(), 1000u);
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace trainyard
