// Hostile and damaged inputs (issue 21) at the core's file boundaries: a data file that is not a
// regular file is refused by name instead of hanging or reading forever; sizes read from a file
// are bounded before they are allocated; shape arithmetic that would wrap is an error.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "formats/sstable.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/tensor.h"
#include "trainyard/wire/tensor_bundle.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

class HostileFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainyard_hostile_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string make_fifo(const std::string& name) const {
    const std::string p = path(name);
    EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
    return p;
  }
  void write_shard(const std::string& name) const {
    TFRecordWriter writer(path(name));
    writer.write("record");
    writer.close();
  }
  fs::path dir_;
};

// The message of the exception `f` throws, which must be InvalidArgument.
template <class F>
std::string invalid_argument_message(F f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidArgument was thrown";
  return "";
}

// Opening a FIFO used to wait for a writer forever; /dev/zero was read until memory ran out.
TEST_F(HostileFilesTest, TFRecordReaderRefusesAFifoAndDevicesByName) {
  const std::string fifo = make_fifo("shard.tfrecord");
  EXPECT_EQ(invalid_argument_message([&] { TFRecordReader reader(fifo); }),
            fifo + ": cannot open TFRecord file: it is a FIFO, not a regular file");
  for (const std::string device : {"/dev/zero", "/dev/null"}) {
    EXPECT_EQ(invalid_argument_message([&] { TFRecordReader reader(device); }),
              device + ": cannot open TFRecord file: it is a character device, not a regular file");
  }
}

// A FIFO, a device or /dev/stdin as a data pattern used to hang, read without end, or "train to
// step 0" and exit 0; a pattern matching only directories is an error, not an empty data set.
TEST_F(HostileFilesTest, DataPatternsRefuseFilesThatAreNotRegularFiles) {
  write_shard("a.tfrecord");
  const std::string fifo = make_fifo("b.tfrecord");
  EXPECT_EQ(invalid_argument_message([&] { expand_file_patterns(path("*.tfrecord")); }),
            fifo + ": data files must be regular files, and this is a FIFO");
  EXPECT_EQ(invalid_argument_message([&] { expand_file_patterns(fifo); }),
            fifo + ": data files must be regular files, and this is a FIFO");
  EXPECT_EQ(invalid_argument_message([&] { expand_file_patterns("/dev/zero"); }),
            "/dev/zero: data files must be regular files, and this is a character device");
  if (fs::exists("/dev/stdin")) {
    const std::string message =
        invalid_argument_message([&] { expand_file_patterns("/dev/stdin"); });
    EXPECT_EQ(message.rfind("/dev/stdin: data files must be regular files, and this is ", 0), 0u)
        << message;
  }
  fs::create_directories(dir_ / "only_dirs" / "x.tfrecord");
  const std::string dirs = path("only_dirs/*");
  EXPECT_EQ(invalid_argument_message([&] { expand_file_patterns(dirs); }),
            "file pattern '" + dirs + "' matches only directories (" +
                path("only_dirs/x.tfrecord") + "/): data files must be regular files");
  EXPECT_THROW(expand_file_patterns(path("none-*.tfrecord")), NotFound);
  EXPECT_EQ(expand_file_patterns(path("a.tfrecord")), std::vector<std::string>{path("a.tfrecord")});
}

// A snappy block's preamble used to reserve up to 4 GiB before a byte was decoded.
TEST_F(HostileFilesTest, SnappyLengthPreambleIsBoundedByTheCompressedBytes) {
  // varint 2^32, then one literal byte.
  const std::string block = std::string("\x80\x80\x80\x80\x10", 5) + std::string("\x00x", 2);
  try {
    sstable::snappy_uncompress(block, "model.ckpt.index: snappy block at byte offset 0");
    FAIL() << "a 4 GiB preamble over 2 bytes was accepted";
  } catch (const DataLoss& e) {
    EXPECT_EQ(std::string(e.what()),
              "model.ckpt.index: snappy block at byte offset 0: snappy length preamble claims "
              "4294967296 bytes, more than the 2 compressed bytes after it can hold");
  }
  EXPECT_EQ(sstable::snappy_uncompress(std::string("\x01\x00x", 3), "ok"), "x");
}

// [2^62, 4] used to wrap to 0 elements (and then fail far away in vector::_M_range_check).
TEST(ShapeOverflowTest, ElementCountThatWrapsIsAnError) {
  const int64_t huge = int64_t{1} << 62;
  try {
    Shape({huge, 4}).num_elements();
    FAIL() << "[2^62, 4] gave an element count";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "shape [4611686018427387904, 4] has more elements than an int64 holds (2^63 - 1)");
  }
  EXPECT_EQ(Shape({huge, 1}).num_elements(), huge);
  EXPECT_EQ(Shape({0, huge, huge}).num_elements(), 0);  // empty, however large the rest
  EXPECT_EQ(Shape({}).num_elements(), 1);
}

// A forged .index entry of f32[2^31, 2^31] (2^64 bytes, which wraps to 0 in 64 bits) with size 0
// and the CRC of no bytes used to pass verify(), and read() failed with an InvalidArgument that
// named no file (fuzz_checkpoint_v2).
TEST_F(HostileFilesTest, CheckpointTensorWhoseByteSizeWrapsIsDataLoss) {
  wire::tf::BundleHeaderProto header;
  header.set_num_shards(1);
  wire::tf::BundleEntryProto entry;
  entry.set_dtype(wire::tf::DT_FLOAT);
  entry.mutable_shape()->add_dim()->set_size(int64_t{1} << 31);
  entry.mutable_shape()->add_dim()->set_size(int64_t{1} << 31);
  entry.set_crc32c(mask_crc32c(crc32c("", 0)));
  sstable::TableBuilder table;
  table.add("", header.SerializeAsString());
  table.add("huge", entry.SerializeAsString());
  const std::string prefix = path("model.ckpt-1");
  std::ofstream(checkpoint_index_path(prefix), std::ios::binary) << table.finish();
  std::ofstream(checkpoint_data_path(prefix), std::ios::binary) << "data";

  CheckpointReader reader(prefix);
  try {
    reader.verify();
    FAIL() << "a tensor of 2^64 bytes stored in 0 passed verify()";
  } catch (const DataLoss& e) {
    EXPECT_EQ(std::string(e.what()),
              checkpoint_data_path(prefix) +
                  ": tensor 'huge' (f32[2147483648, 2147483648]) has more bytes than a 64-bit "
                  "size holds; its entry says 0");
  }
}

}  // namespace
}  // namespace trainyard
