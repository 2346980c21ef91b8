// Files and directories published whole (atomic_file.h): the final name holds the old content
// or the whole new one, temporaries are hidden siblings, an abandoned write leaves nothing.
#include "trainyard/core/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "trainyard/error.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("trainyard_atomic_file_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      out.push_back(entry.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

TEST_F(AtomicFileTest, TemporaryIsAHiddenSiblingThatGlobsDoNotMatch) {
  const std::string t = temporary_sibling((dir_ / "train-0000.tfrecord").string());
  EXPECT_EQ(fs::path(t).parent_path(), dir_);
  EXPECT_EQ(fs::path(t).filename().string().rfind(".train-0000.tfrecord.tmp-", 0), 0u) << t;
  EXPECT_NE(t, temporary_sibling((dir_ / "train-0000.tfrecord").string()));
}

TEST_F(AtomicFileTest, WriteCreatesAndReplacesLeavingNoTemporary) {
  write_file_atomically((dir_ / "model_flags.json").string(), "{\"a\": 1}");
  EXPECT_EQ(read(dir_ / "model_flags.json"), "{\"a\": 1}");
  write_file_atomically((dir_ / "model_flags.json").string(), "{}");
  EXPECT_EQ(read(dir_ / "model_flags.json"), "{}");
  write_file_atomically((dir_ / "empty").string(), "");
  EXPECT_EQ(names(), (std::vector<std::string>{"empty", "model_flags.json"}));
}

TEST_F(AtomicFileTest, WriteIntoAMissingDirectoryThrowsNamingTheFile) {
  try {
    write_file_atomically((dir_ / "missing/file").string(), "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing/.file.tmp-"), std::string::npos) << e.what();
  }
}

TEST_F(AtomicFileTest, UncommittedFileLeavesNothingAndCommittedReplaces) {
  { std::ofstream(dir_ / "out") << "old"; }
  {
    AtomicFile file((dir_ / "out").string());
    std::ofstream(file.temporary_path()) << "half";
    EXPECT_EQ(names().size(), 2u);
  }
  EXPECT_EQ(names(), std::vector<std::string>{"out"});
  EXPECT_EQ(read(dir_ / "out"), "old");
  AtomicFile file((dir_ / "out").string());
  std::ofstream(file.temporary_path()) << "new";
  file.commit();
  EXPECT_EQ(read(dir_ / "out"), "new");
  EXPECT_EQ(names(), std::vector<std::string>{"out"});
}

TEST_F(AtomicFileTest, CommitWithoutAFileThrows) {
  AtomicFile file((dir_ / "out").string());
  EXPECT_THROW(file.commit(), Error);
  EXPECT_TRUE(names().empty());
}

TEST_F(AtomicFileTest, PublishDirectoryCreatesAndReplacesWhole) {
  auto staged = [&](const std::string& content) {
    const fs::path staging = temporary_sibling((dir_ / "export").string());
    fs::create_directories(fs::path(staging) / "sub");
    std::ofstream(fs::path(staging) / "a") << content;
    std::ofstream(fs::path(staging) / "sub/b") << content;
    return staging.string();
  };
  publish_directory(staged("one"), (dir_ / "export").string());
  EXPECT_EQ(read(dir_ / "export/sub/b"), "one");
  { std::ofstream(dir_ / "export/stale") << "from the old export"; }
  publish_directory(staged("two"), (dir_ / "export").string());
  EXPECT_EQ(read(dir_ / "export/a"), "two");
  EXPECT_EQ(read(dir_ / "export/sub/b"), "two");
  EXPECT_FALSE(fs::exists(dir_ / "export/stale"));
  EXPECT_EQ(names(), std::vector<std::string>{"export"});
}

// A killed export left its staging directory (up to 88 MB) that nothing removed: the staging
// name carries the pid and host of its writer, and remove_dead_staging removes those whose
// process is gone, keeping a live writer's, another host's and another target's.
TEST_F(AtomicFileTest, DeadStagingDirectoriesAreRemovedAndLiveOnesKept) {
  const std::string target = (dir_ / "step_100").string();
  const std::string live = staging_sibling(target);
  EXPECT_EQ(fs::path(live).parent_path(), dir_);
  const std::string name = fs::path(live).filename().string();
  ASSERT_EQ(name.rfind(".step_100.staging-" + std::to_string(::getpid()) + "@", 0), 0u) << name;
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);                            // its pid is gone now
  const std::string suffix = name.substr(name.find('@'));  // "@<host>.<hex>"
  const fs::path dead = dir_ / (".step_100.staging-" + std::to_string(child) + suffix);
  const fs::path other_host =
      dir_ / (".step_100.staging-" + std::to_string(child) + "@another-host.0123456789abcdef");
  const fs::path other_target = dir_ / (".step_2.staging-" + std::to_string(child) + suffix);
  for (const fs::path& d : {fs::path(live), dead, other_host, other_target}) {
    fs::create_directories(d / "variables");
    std::ofstream(d / "variables" / "model.safetensors") << "weights";
  }
  EXPECT_EQ(remove_dead_staging(target), std::vector<std::string>{dead.string()});
  EXPECT_FALSE(fs::exists(dead));
  for (const fs::path& d : {fs::path(live), other_host, other_target}) {
    EXPECT_TRUE(fs::exists(d / "variables" / "model.safetensors")) << d;
  }
}

}  // namespace
}  // namespace trainyard
