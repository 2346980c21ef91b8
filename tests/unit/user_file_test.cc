// Files a user names are opened without blocking and read within a bound (user_file.h): a FIFO
// (which blocked `open` forever as a label map), a directory, a device and a socket are refused
// at once, naming the file and what it was for; a file over the limit is refused before it is
// read; the readers that take user-named paths (label maps, COCO JSON, pipeline configs) refuse
// a FIFO the same way.
#include "trainyard/user_file.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "trainyard/core/config.h"
#include "trainyard/pkg/detection/coco_json.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class UserFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("user_file_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string fifo() {
    const std::string path = (dir_ / "fifo").string();
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
    return path;
  }

  // Runs `read` on another thread; fails (instead of hanging the suite) when it takes 10 s.
  template <typename Read>
  std::string error_of(Read read) {
    auto result = std::async(std::launch::async, [read] {
      try {
        read();
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    });
    if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "the read blocked for 10 s";
      std::abort();  // the blocked thread cannot be joined
    }
    return result.get();
  }

  fs::path dir_;
};

TEST_F(UserFileTest, ReadsARegularFileWhole) {
  const std::string path = (dir_ / "a.txt").string();
  std::ofstream(path) << "item { id: 1 name: 'a' }\n";
  EXPECT_EQ(read_user_file(path, "label map", 1024), "item { id: 1 name: 'a' }\n");
  EXPECT_EQ(read_user_file(path, "label map", 25), "item { id: 1 name: 'a' }\n");  // exactly
}

TEST_F(UserFileTest, RefusesWhatIsNotARegularFileWithoutBlocking) {
  const std::string f = fifo();
  EXPECT_EQ(error_of([&] { read_user_file(f, "label map", 1024); }),
            "label map " + f + " is a FIFO, not a regular file; it was not read");
  EXPECT_EQ(error_of([&] { read_user_file(dir_.string(), "COCO JSON", 1024); }),
            "COCO JSON " + dir_.string() + " is a directory, not a regular file; it was not read");
  EXPECT_EQ(error_of([&] { read_user_file("/dev/zero", "pipeline config", 1024); }),
            "pipeline config /dev/zero is a character device, not a regular file; it was not read");
  const std::string socket_path = (dir_ / "s").string();
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", socket_path.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_THAT(error_of([&] { open_user_file(socket_path, "label map"); }),
              HasSubstr("is a socket, not a regular file"));
  ::close(s);
  try {
    read_user_file((dir_ / "missing").string(), "label map", 1024);
    ADD_FAILURE() << "no NotFound";
  } catch (const NotFound& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot open label map " + (dir_ / "missing").string() + ": no such file");
  }
}

TEST_F(UserFileTest, RefusesAFileOverTheLimitBeforeReadingIt) {
  const std::string path = (dir_ / "big").string();
  std::ofstream(path) << std::string(100, 'x');
  try {
    read_user_file(path, "label map", 99);
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "label map " + path +
                                         " holds 100 bytes, more than the limit of 99; it was "
                                         "not read");
  }
}

// The readers of user-named files go through it: a FIFO as COCO JSON (coco-eval hung on one)
// or as a pipeline config is refused at once, naming it.
TEST_F(UserFileTest, CocoJsonAndPipelineConfigReadersRefuseAFifo) {
  const std::string f = fifo();
  EXPECT_THAT(error_of([&] { detection::read_coco_instances(f); }), HasSubstr(f + " is a FIFO"));
  EXPECT_THAT(error_of([&] { load_pipeline_config(f); }), HasSubstr(f + " is a FIFO"));
}

}  // namespace
}  // namespace trainyard
