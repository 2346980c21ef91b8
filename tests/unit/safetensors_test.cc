// safetensors: the layout byte for byte (length, JSON header padded to 8, data), a round trip
// of every dtype, and clean errors for damaged files.
#include "trainyard/core/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_backends.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainyard_safetensors_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  fs::path dir_;
  std::shared_ptr<Backend> cpu_ = test::backend("cpu");
};

TEST_F(SafetensorsTest, LayoutIsLengthPaddedJsonThenData) {
  std::string path = (dir_ / "a.safetensors").string();
  Tensor t = Tensor::from_vector(*cpu_, Shape{2}, std::vector<float>{1.0f, -2.0f});
  write_safetensors(path, {{"w", t}}, {{"format", "pt"}});
  std::string bytes = bytes_of(path);
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | static_cast<unsigned char>(bytes[b]);
  EXPECT_EQ(n % 8, 0u);
  std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
            "\"data_offsets\":[0,8]}}");
  ASSERT_EQ(bytes.size(), 8 + n + 8);
  float values[2];
  std::memcpy(values, bytes.data() + 8 + n, 8);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], -2.0f);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST_F(SafetensorsTest, RoundTripKeepsNamesShapesDtypesAndValues) {
  std::string path = (dir_ / "b.safetensors").string();
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"tower/fc/weights",
       Tensor::from_vector(*cpu_, Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6})},
      {"step", Tensor::from_vector(*cpu_, Shape{}, std::vector<int64_t>{42})},
      {"d", Tensor::from_vector(*cpu_, Shape{1}, std::vector<double>{0.25})},
      {"empty", Tensor::from_vector(*cpu_, Shape{0, 4}, std::vector<float>{})},
      {"name \"quoted\"", Tensor::from_vector(*cpu_, Shape{1}, std::vector<int32_t>{-7})}};
  write_safetensors(path, tensors);
  SafetensorsFile file = read_safetensors(path, *cpu_);
  ASSERT_EQ(file.tensors.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(file.tensors[i].first, tensors[i].first);
    EXPECT_EQ(file.tensors[i].second.shape(), tensors[i].second.shape());
    EXPECT_EQ(file.tensors[i].second.dtype(), tensors[i].second.dtype());
  }
  EXPECT_EQ(file.tensors[0].second.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(file.tensors[1].second.to_vector<int64_t>().at(0), 42);
  EXPECT_EQ(file.tensors[2].second.to_vector<double>().at(0), 0.25);
  EXPECT_EQ(file.tensors[4].second.to_vector<int32_t>().at(0), -7);
}

TEST_F(SafetensorsTest, DuplicateNamesAreRefused) {
  Tensor t = Tensor::from_vector(*cpu_, Shape{1}, std::vector<float>{1});
  EXPECT_THROW(write_safetensors((dir_ / "c.safetensors").string(), {{"a", t}, {"a", t}}),
               InvalidArgument);
}

TEST_F(SafetensorsTest, DamagedFilesNameTheFileAndTheProblem) {
  std::string path = (dir_ / "d.safetensors").string();
  Tensor t = Tensor::from_vector(*cpu_, Shape{4}, std::vector<float>{1, 2, 3, 4});
  write_safetensors(path, {{"w", t}});
  std::string good = bytes_of(path);
  auto expect_error = [&](const std::string& bytes, const std::string& message) {
    write_bytes(path, bytes);
    try {
      read_safetensors(path, *cpu_);
      ADD_FAILURE() << "no error for " << message;
    } catch (const DataLoss& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  expect_error(good.substr(0, 5), "no header length");
  expect_error(good.substr(0, good.size() - 4), "data_offsets [0, 16]");
  std::string huge = good;
  huge[7] = 0x7f;
  expect_error(huge, "exceeds the file");
  std::string bad_json = good;
  bad_json[8] = '[';
  expect_error(bad_json, "bad safetensors header");
  std::string bad_dtype = good;
  bad_dtype.replace(bad_dtype.find("F32"), 3, "F99");
  expect_error(bad_dtype, "unsupported dtype F99");
}

// Header values from a hostile file: a shape whose element count wraps (loaded as a tensor of
// 0 bytes before), an integer past int64 and a bad \u escape (raw `stoll` / `stoi` errors
// before), and a file that is not a regular file (a FIFO hung, /dev/zero was read until
// bad_alloc): each is an error naming the file and, where there is one, the tensor.
TEST_F(SafetensorsTest, HostileHeadersAndNonRegularFilesAreCleanErrors) {
  const std::string path = (dir_ / "h.safetensors").string();
  auto file_with_header = [](std::string header) {
    while (header.size() % 8 != 0) header += ' ';
    std::string bytes;
    for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<char>(header.size() >> (8 * b)));
    return bytes + header;
  };
  auto expect_error = [&](const std::string& header, const std::string& message) {
    write_bytes(path, file_with_header(header));
    try {
      read_safetensors(path, *cpu_);
      ADD_FAILURE() << "no error for " << header;
    } catch (const DataLoss& e) {
      EXPECT_EQ(std::string(e.what()), path + ": " + message);
    }
  };
  expect_error(R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})",
               "tensor 'w': shape [4611686018427387904, 4] has more elements than an int64 holds "
               "(2^63 - 1)");
  expect_error(
      R"({"w":{"dtype":"F32","shape":[2305843009213693952,2],"data_offsets":[0,0]}})",
      "tensor 'w' of shape [2305843009213693952, 2] has more bytes than a 64-bit size holds");
  expect_error(R"({"w":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,0]}})",
               "bad safetensors header: integer 99999999999999999999 at byte 29 is larger than "
               "2^63 - 1");
  expect_error(R"({"w\uzz00":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
               "bad safetensors header: bad \\u escape '\\uzz00' at byte 3");

  const std::string fifo = (dir_ / "fifo.safetensors").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& special : {fifo, std::string("/dev/zero")}) {
    try {
      read_safetensors(special, *cpu_);
      ADD_FAILURE() << "no error for " << special;
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), "safetensors file " + special + " is " +
                                           (special == fifo ? "a FIFO" : "a character device") +
                                           ", not a regular file; it was not read");
    }
  }
}

}  // namespace
}  // namespace trainyard
