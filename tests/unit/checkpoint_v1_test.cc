// TensorFlow V1 checkpoints (the single file TF-Slim's published checkpoints are) through
// CheckpointReader, against tests/golden/tf1_v1_checkpoint/model.ckpt written by TensorFlow's
// own tf.compat.v1.train.Saver(write_version=V1) (make_v1_checkpoint_golden.py): every dtype the
// file holds, a partitioned variable assembled from its 3 slices, the forms a checkpoint path
// may take, and damaged or missing files named in the errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
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

}  // namespace
}  // namespace trainyard
