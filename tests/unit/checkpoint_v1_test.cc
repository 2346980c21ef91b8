// TensorFlow V1 checkpoints (the single file TF-Slim's published checkpoints are) through
// CheckpointReader, against tests/golden/tf1_v1_checkpoint/model.ckpt written by TensorFlow's
// own tf.compat.v1.train.Saver(write_version=V1) (make_v1_checkpoint_golden.py): every dtype the
// file holds, a partitioned variable assembled from its 3 slices, the forms a checkpoint path
// may take, and damaged or missing files named in the errors; and tables built here byte by byte
// to show that a V1 checkpoint is read by slice: opening it reads its index and metadata only,
// and a tensor's read reads only the blocks holding it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"

#ifndef TRAINYARD_GOLDEN_DIR
#error "TRAINYARD_GOLDEN_DIR must name tests/golden"
#endif

namespace trainyard {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(TRAINYARD_GOLDEN_DIR) / "tf1_v1_checkpoint";

// The generator's values: element i of a tensor is i * 0.25 - 3.
std::vector<double> ramp(int64_t n) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(i) * 0.25 - 3.0);
  return v;
}

// --- A V1 checkpoint written byte by byte (the test cannot reach the core's table writer or its
// generated protobuf classes) ---

void put_varint(std::string* out, uint64_t value) {
  for (; value >= 0x80; value >>= 7) out->push_back(static_cast<char>(value | 0x80));
  out->push_back(static_cast<char>(value));
}

void put_fixed32(std::string* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

// A protobuf field: a varint, or a length-delimited payload (a message, a string, packed values).
std::string varint_field(int field, uint64_t value) {
  std::string out;
  put_varint(&out, static_cast<uint64_t>(field) << 3);
  put_varint(&out, value);
  return out;
}
std::string bytes_field(int field, const std::string& payload) {
  std::string out;
  put_varint(&out, (static_cast<uint64_t>(field) << 3) | 2);
  put_varint(&out, payload.size());
  return out + payload;
}

// A vector of floats, saved whole: its SavedSliceMeta (name 1, shape 2, type 3 = DT_FLOAT, one
// slice 4 whose one extent is empty, the whole dimension), and the SavedSlice entry (name 1,
// slice 2, data 3: a TensorProto of dtype 1 and packed float_val 5) under its key.
struct FloatVector {
  std::string name;
  uint64_t size = 0;
  std::vector<float> values;  // empty: the entry is not written (its block is a hole)
};

const std::string kWholeVector = bytes_field(1, "");  // TensorSliceProto{extent {}}

std::string slice_meta(const FloatVector& t) {
  return bytes_field(1, t.name) + bytes_field(2, bytes_field(2, varint_field(1, t.size))) +
         varint_field(3, 1) + bytes_field(4, kWholeVector);
}

std::string saved_slice(const FloatVector& t) {
  std::string floats(t.values.size() * 4, '\0');
  std::memcpy(floats.data(), t.values.data(), floats.size());
  return bytes_field(2, bytes_field(1, t.name) + bytes_field(2, kWholeVector) +
                            bytes_field(3, varint_field(1, 1) + bytes_field(5, floats)));
}

// TensorFlow's key for the whole of a vector (EncodeTensorNameSlice in OrderedCode): 0, the name
// and its terminator 00 01, the rank 1, then start 0 and length -1 as signed numbers.
std::string slice_key(const std::string& name) {
  return std::string("\x00", 1) + name + std::string("\x00\x01\x01\x01\x80\x7f", 6);
}

// A block of uncompressed entries (none sharing a prefix, one restart point) and its trailer.
std::string block(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out;
  for (const auto& [key, value] : entries) {
    put_varint(&out, 0);
    put_varint(&out, key.size());
    put_varint(&out, value.size());
    out += key + value;
  }
  put_fixed32(&out, 0);
  put_fixed32(&out, 1);
  out.push_back('\0');  // no compression
  put_fixed32(&out, mask_crc32c(crc32c(out.data(), out.size())));
  return out;
}

std::string block_handle(uint64_t offset, uint64_t size) {
  std::string out;
  put_varint(&out, offset);
  put_varint(&out, size);
  return out;
}

// Writes a V1 checkpoint to `path`: the metadata and `small` in the first block, then `big` in
// a block of its own of `big_block_bytes`, left a hole (sparse) when big.values is empty.
void write_v1_checkpoint(const std::string& path, const FloatVector& small, const FloatVector& big,
                         uint64_t big_block_bytes) {
  const std::string head =
      bytes_field(1, bytes_field(1, slice_meta(small)) + bytes_field(1, slice_meta(big)) +
                         bytes_field(2, varint_field(1, 1)));  // versions { producer: 1 }
  const std::string first = block({{"", head}, {slice_key(small.name), saved_slice(small)}});
  std::string second;
  if (!big.values.empty()) {
    second = block({{slice_key(big.name), saved_slice(big)}});
    big_block_bytes = second.size() - 5;
  }
  const uint64_t second_offset = first.size();
  const uint64_t index_offset = second_offset + big_block_bytes + 5;
  const std::string index =
      block({{slice_key(small.name), block_handle(0, first.size() - 5)},
             {slice_key(big.name), block_handle(second_offset, big_block_bytes)}});
  const std::string metaindex = block({});
  std::string footer = block_handle(index_offset + index.size(), metaindex.size() - 5) +
                       block_handle(index_offset, index.size() - 5);
  footer.resize(40, '\0');
  for (int i = 0; i < 8; ++i) footer.push_back(static_cast<char>(0xdb4775248b80fb57ull >> (8 * i)));
  const std::string tail = index + metaindex + footer;

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path;
  auto write_at = [&](const std::string& bytes, uint64_t offset) {
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)),
              static_cast<ssize_t>(bytes.size()));
  };
  write_at(first, 0);
  if (!second.empty()) write_at(second, second_offset);
  write_at(tail, index_offset);  // past a hole when the big block is not written
  ::close(fd);
}

// The kernel's resident-set figures of this process, in bytes ("VmRSS", "VmHWM").
uint64_t proc_status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  ADD_FAILURE() << "no " << field << " in /proc/self/status";
  return 0;
}

// Resets VmHWM (the peak resident set) to the current resident set.
bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

class CheckpointV1Test : public ::testing::Test {
 protected:
  CheckpointV1Test() : registry_(settings()) {
    backend_ = registry_.create<Backend>(ClassKind::kBackend, "cpu");
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    tmp_ = fs::temp_directory_path() /
           ("trainyard_checkpoint_v1_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  ~CheckpointV1Test() override {
    std::error_code ignored;
    fs::remove_all(tmp_, ignored);
  }
  static PluginRegistry::Settings settings() {
    PluginRegistry::Settings s;
    s.use_environment = false;
    return s;
  }
  std::vector<double> read_f64(const CheckpointReader& r, const std::string& name) {
    Tensor t = r.read(name, *backend_);
    std::vector<double> out;
    switch (t.dtype()) {
      case DType::kF32:
        for (float v : t.to_vector<float>()) out.push_back(v);
        break;
      case DType::kF64:
        return t.to_vector<double>();
      default:
        ADD_FAILURE() << name << " is " << dtype_name(t.dtype());
    }
    return out;
  }
  std::string golden_bytes() {
    std::ifstream in(kDir / "model.ckpt", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void write(const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }

  PluginRegistry registry_;
  std::shared_ptr<Backend> backend_;
  fs::path tmp_;
};

TEST_F(CheckpointV1Test, ReadsEveryTensorTensorFlowWroteWithItsDtypeAndShape) {
  CheckpointReader r((kDir / "model.ckpt").string());
  std::vector<std::string> names;
  for (const CheckpointTensorInfo& info : r.tensors()) {
    names.push_back(info.name);
    EXPECT_EQ(info.unsupported, "") << info.name;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"counts", "flags", "global_step", "half", "partitioned",
                                      "resnet_v1_50/conv1/BatchNorm/moving_mean",
                                      "resnet_v1_50/conv1/weights", "resnet_v1_50/logits/biases"}));
  const CheckpointTensorInfo& w = r.info("resnet_v1_50/conv1/weights");
  EXPECT_EQ(w.dtype, DType::kF32);
  EXPECT_EQ(w.shape, (Shape{3, 3, 2, 4}));
  EXPECT_EQ(read_f64(r, "resnet_v1_50/conv1/weights"), ramp(72));
  EXPECT_EQ(read_f64(r, "resnet_v1_50/conv1/BatchNorm/moving_mean"), ramp(4));
  EXPECT_EQ(r.info("resnet_v1_50/logits/biases").dtype, DType::kF64);
  EXPECT_EQ(read_f64(r, "resnet_v1_50/logits/biases"), ramp(6));
  Tensor step = r.read("global_step", *backend_);
  EXPECT_EQ(step.dtype(), DType::kI64);
  EXPECT_EQ(step.shape(), Shape{});
  EXPECT_EQ(step.to_vector<int64_t>(), std::vector<int64_t>{7});
  EXPECT_EQ(r.read("counts", *backend_).to_vector<int32_t>(),
            (std::vector<int32_t>{-4, -1, 2, 5, 8}));
  Tensor flags = r.read("flags", *backend_);
  EXPECT_EQ(flags.dtype(), DType::kBool);
  std::vector<uint8_t> flag_bytes(3);
  flags.to_host(flag_bytes.data(), flag_bytes.size());
  EXPECT_EQ(flag_bytes, (std::vector<uint8_t>{1, 0, 1}));
  // f16 bit patterns of -3, -2.75, -2.5, -2.25.
  Tensor half = r.read("half", *backend_);
  EXPECT_EQ(half.dtype(), DType::kF16);
  std::vector<uint16_t> bits(4);
  half.to_host(bits.data(), bits.size() * 2);
  EXPECT_EQ(bits, (std::vector<uint16_t>{0xC200, 0xC180, 0xC100, 0xC080}));
}

TEST_F(CheckpointV1Test, AssemblesAPartitionedVariableFromItsSlices) {
  CheckpointReader r((kDir / "model.ckpt").string());
  EXPECT_EQ(r.info("partitioned").shape, (Shape{6, 4}));
  EXPECT_EQ(read_f64(r, "partitioned"), ramp(24));
}

// Slices on axis 1 (saved out of order) and on both axes, written by TensorFlow's SaveSlices
// (make_v1_checkpoint_golden.py; TensorFlow's RestoreSlice reads both back as the ramp): a
// slice assembled with the wrong stride or offset on any axis misplaces values.
TEST_F(CheckpointV1Test, AssemblesTensorsPartitionedOnAxisOneAndOnTwoAxes) {
  CheckpointReader r((kDir / "partitioned_axes.ckpt").string());
  for (const char* name : {"partitioned_cols", "partitioned_grid"}) {
    EXPECT_EQ(r.info(name).shape, (Shape{4, 6})) << name;
    EXPECT_EQ(read_f64(r, name), ramp(24)) << name;
  }
}

TEST_F(CheckpointV1Test, AV1CopyOfTheStarterCodesCheckpointHoldsTheSameTensors) {
  // The same checkpoint saved by TensorFlow in both layouts (make_v1_checkpoint_golden.py).
  CheckpointReader v1((kDir / "starter_logistic.ckpt").string());
  CheckpointReader v2(
      (fs::path(TRAINYARD_GOLDEN_DIR) / "yt8m_checkpoints/starter_logistic/model.ckpt-3").string());
  ASSERT_EQ(v1.tensors().size(), v2.tensors().size());
  for (std::size_t i = 0; i < v1.tensors().size(); ++i) {
    const CheckpointTensorInfo &a = v1.tensors()[i], &b = v2.tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dtype, b.dtype) << a.name;
    EXPECT_EQ(a.shape, b.shape) << a.name;
    Tensor x = v1.read(a.name, *backend_), y = v2.read(b.name, *backend_);
    std::string xb(x.size_bytes(), '\0'), yb(y.size_bytes(), '\0');
    x.to_host(xb.data(), xb.size());
    y.to_host(yb.data(), yb.size());
    EXPECT_EQ(xb, yb) << a.name;
  }
  EXPECT_TRUE(v1.contains("tower/fully_connected/weights"));
  EXPECT_EQ(v1.info("global_step").dtype, DType::kI32);
}

TEST_F(CheckpointV1Test, APathMayBeTheFileOrItsDirectory) {
  CheckpointReader from_dir(kDir.string());
  EXPECT_EQ(from_dir.prefix(), (kDir / "model.ckpt").string());
  EXPECT_EQ(read_f64(from_dir, "resnet_v1_50/conv1/BatchNorm/moving_mean"), ramp(4));
  EXPECT_EQ(latest_checkpoint(kDir.string()), (kDir / "model.ckpt").string());
}

TEST_F(CheckpointV1Test, AV2CheckpointMayBeNamedByItsIndexDataFileOrDirectory) {
  const std::string prefix = (tmp_ / "model.ckpt-5").string();
  write_checkpoint(
      prefix, {{"w", Tensor::from_vector(*backend_, Shape{2}, std::vector<float>{1.5f, -2.0f})}});
  for (const std::string& path : {prefix, prefix + ".index", prefix + ".data-00000-of-00001"}) {
    CheckpointReader r(path);
    EXPECT_EQ(r.prefix(), prefix) << path;
    EXPECT_EQ(read_f64(r, "w"), (std::vector<double>{1.5, -2.0})) << path;
  }
  // A directory without a `checkpoint` file names what it holds.
  try {
    CheckpointReader r(tmp_.string());
    ADD_FAILURE() << "a directory without a checkpoint state file was accepted";
  } catch (const NotFound& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(tmp_.string()), std::string::npos) << message;
    EXPECT_NE(message.find("model.ckpt-5.index"), std::string::npos) << message;
  }
}

TEST_F(CheckpointV1Test, AStateFileNamingADirectoryNamesNoCheckpoint) {
  write(tmp_ / "checkpoint", "model_checkpoint_path: \".\"\n");
  EXPECT_EQ(latest_checkpoint(tmp_.string()), std::nullopt);
  EXPECT_THROW(CheckpointReader r(tmp_.string()), NotFound);
}

TEST_F(CheckpointV1Test, AMissingCheckpointListsWhatTheDirectoryHolds) {
  write(tmp_ / "model.ckpt-100.index", "x");
  write(tmp_ / "notes.txt", "x");
  const std::string missing = (tmp_ / "model.ckpt-10").string();
  try {
    CheckpointReader r(missing);
    ADD_FAILURE() << "a missing checkpoint was accepted";
  } catch (const NotFound& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(missing + ".index"), std::string::npos) << message;
    EXPECT_NE(message.find("model.ckpt-100.index, notes.txt"), std::string::npos) << message;
  }
}

TEST_F(CheckpointV1Test, DamagedV1FilesAreDataLossNamingTheFile) {
  const std::string bytes = golden_bytes();
  ASSERT_GT(bytes.size(), 100u);
  const fs::path file = tmp_ / "model.ckpt";
  auto expect_data_loss = [&](const std::string& what) {
    try {
      CheckpointReader r(file.string());
      ADD_FAILURE() << what << ": accepted";
    } catch (const DataLoss& e) {
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos)
          << what << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": not DataLoss: " << e.what();
    }
  };
  write(file, bytes.substr(0, bytes.size() - 10));
  expect_data_loss("truncated");
  std::string flipped = bytes;
  flipped[40] = static_cast<char>(flipped[40] ^ 0x5a);
  write(file, flipped);
  expect_data_loss("a flipped byte");
  write(file, std::string(4096, 'z'));
  expect_data_loss("not a table");
  // Every single-byte change is either read back exactly or refused: never a crash, never
  // other values under the same names without an error (the blocks' CRC-32C).
  for (std::size_t i = 0; i < bytes.size(); i += 7) {
    std::string changed = bytes;
    changed[i] = static_cast<char>(changed[i] ^ 0x01);
    write(file, changed);
    try {
      CheckpointReader r(file.string());
      EXPECT_EQ(read_f64(r, "partitioned"), ramp(24)) << "byte " << i;
    } catch (const Error&) {
    }
  }
}

// A 12 GiB tensor in a 12 GiB hole, beside a small one: opening reads the index and the first
// block only (the whole file was read before, and refused past 8 GiB), the small one reads back,
// and the big one is refused before anything is allocated for it, naming the file and the tensor.
TEST_F(CheckpointV1Test, OpeningReadsTheIndexAndMetadataNotTheData) {
  const std::string path = (tmp_ / "sparse.ckpt").string();
  const uint64_t big = uint64_t{3} << 30;
  write_v1_checkpoint(path, {"a_small", 3, {1.5f, -2.0f, 0.25f}}, {"z_big", big, {}}, big * 4);
  ASSERT_GT(fs::file_size(path), big * 4);
  CheckpointReader r(path);
  ASSERT_EQ(r.tensors().size(), 2u);
  EXPECT_EQ(r.info("z_big").shape, (Shape{static_cast<int64_t>(big)}));
  EXPECT_EQ(read_f64(r, "a_small"), (std::vector<double>{1.5, -2.0, 0.25}));
  try {
    r.read("z_big", *backend_);
    ADD_FAILURE() << "a 12 GiB tensor was read";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path + ": tensor 'z_big'"), std::string::npos) << message;
    EXPECT_NE(message.find("more than the limit"), std::string::npos) << message;
  }
  // The small tensor still reads after the refusal.
  EXPECT_EQ(read_f64(r, "a_small"), (std::vector<double>{1.5, -2.0, 0.25}));
}

// A read that cannot allocate is an Error naming the file and the tensor, not a bare
// std::bad_alloc: in a child whose address space leaves 128 MiB, a 512 MiB tensor's block.
TEST_F(CheckpointV1Test, AnAllocationFailureNamesTheFileAndTheTensor) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves more address space than RLIMIT_AS would leave";
#else
  const std::string path = (tmp_ / "sparse.ckpt").string();
  const uint64_t big = uint64_t{1} << 27;
  write_v1_checkpoint(path, {"a_small", 2, {1.0f, 2.0f}}, {"z_big", big, {}}, big * 4);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    int code = 2;
    std::string report = "no exception";
    try {
      CheckpointReader r(path);
      const rlimit limit{proc_status_bytes("VmSize") + (uint64_t{128} << 20), RLIM_INFINITY};
      ::setrlimit(RLIMIT_AS, &limit);
      r.read("z_big", *backend_);
    } catch (const Error& e) {
      code = 0;
      report = e.what();
    } catch (const std::exception& e) {
      code = 1;
      report = std::string("not an Error: ") + e.what();
    }
    (void)!::write(pipe_fds[1], report.data(), report.size());
    ::_exit(code);
  }
  ::close(pipe_fds[1]);
  std::string report;
  char buffer[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) report.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << report;
  EXPECT_EQ(WEXITSTATUS(status), 0) << report;
  EXPECT_NE(report.find(path + ": tensor 'z_big'"), std::string::npos) << report;
  EXPECT_NE(report.find("out of memory"), std::string::npos) << report;
#endif
}

// What a read keeps resident: opening and reading the small tensor beside a 64 MiB one leaves
// the peak resident set within 16 MiB of where it was (the whole file and every tensor were read
// when it was opened before); reading the big one, within three times its size.
TEST_F(CheckpointV1Test, ReadingOneTensorKeepsTheOthersOutOfMemory) {
  const std::string path = (tmp_ / "dense.ckpt").string();
  const uint64_t big_bytes = uint64_t{64} << 20;
  {
    FloatVector big{"z_big", big_bytes / 4, std::vector<float>(big_bytes / 4, 0.5f)};
    big.values.back() = -1.0f;
    write_v1_checkpoint(path, {"a_small", 2, {1.0f, 2.0f}}, big, 0);
  }
  ASSERT_TRUE(reset_peak_resident()) << "cannot write /proc/self/clear_refs";
  const uint64_t before = proc_status_bytes("VmRSS");
  {
    CheckpointReader r(path);
    EXPECT_EQ(read_f64(r, "a_small"), (std::vector<double>{1.0, 2.0}));
  }
  const uint64_t small_peak = proc_status_bytes("VmHWM");
  EXPECT_LT(small_peak, before + (uint64_t{16} << 20))
      << "opening and reading 8 bytes took the resident set from " << before << " to " << small_peak
      << " bytes";

  ASSERT_TRUE(reset_peak_resident());
  const uint64_t before_big = proc_status_bytes("VmRSS");
  CheckpointReader r(path);
  Tensor t = r.read("z_big", *backend_);
  const uint64_t big_peak = proc_status_bytes("VmHWM");
  EXPECT_LT(big_peak, before_big + 3 * big_bytes)
      << "reading a 64 MiB tensor took the resident set from " << before_big << " to " << big_peak
      << " bytes";
  const std::vector<float> values = t.to_vector<float>();
  ASSERT_EQ(values.size(), big_bytes / 4);
  EXPECT_EQ(values.front(), 0.5f);
  EXPECT_EQ(values.back(), -1.0f);
  std::cout << "resident growth: open + 8-byte tensor " << (small_peak - before) / 1024
            << " KiB; 64 MiB tensor " << (big_peak - before_big) / 1024 << " KiB\n";
}

}  // namespace
}  // namespace trainyard
