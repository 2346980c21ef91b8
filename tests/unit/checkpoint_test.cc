// Checkpoints in TensorFlow's V2 layout: round trips of every dtype, the .index table byte by
// byte against LevelDB's table format, CRC and truncation errors, whole-checkpoint verification,
// CheckpointManager's retention and `checkpoint` file (untrusted when read), recovery from
// damaged checkpoints, and crash safety (simulated and with a writer killed at random).
#include "trainyard/core/checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "checkpoint_test_util.h"
#include "tf_python.h"
#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/wire/tensor_bundle.pb.h"

extern char** environ;

namespace trainyard {
namespace {

using namespace checkpoint_test;  // the table decoder and the fixture (checkpoint_test_util.h)

TEST_F(CheckpointTest, RoundTripsEveryDTypeWithScalarsEmptiesAndSlashedNames) {
  std::vector<float> weights(24);
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 0.5f * static_cast<float>(i) - 3;
  const NamedTensors tensors = {
      {"resnet_v1_50/conv1/weights", make(Shape{2, 3, 4}, weights)},
      {"resnet_v1_50/conv1/BatchNorm/beta", make(Shape{3}, std::vector<double>{1e-300, -2, 3})},
      {"global_step", make(Shape{}, std::vector<int64_t>{123456789012345})},
      {"counts", make(Shape{5}, std::vector<int32_t>{-1, 0, 1, 2147483647, -2147483647 - 1})},
      {"pixels", make(Shape{7}, std::vector<uint8_t>{0, 1, 2, 127, 128, 254, 255})},
      {"mask", make_raw(Shape{4}, DType::kBool, {1, 0, 0, 1})},
      {"empty", make(Shape{0, 5}, std::vector<float>{})},
      {"scalar", make(Shape{}, std::vector<float>{-7.25f})},
      {"half", make_raw(Shape{2}, DType::kF16, {0x00, 0x3c, 0x00, 0xc0})},
      {"bfloat", make_raw(Shape{1, 2}, DType::kBF16, {0x80, 0x3f, 0x49, 0x40})},
  };
  const std::string prefix = path("model.ckpt-7");
  write_checkpoint(prefix, tensors);
  EXPECT_EQ(files(),
            (std::vector<std::string>{"model.ckpt-7.data-00000-of-00001", "model.ckpt-7.index"}));

  CheckpointReader reader(prefix);
  std::vector<std::string> names;
  for (const CheckpointTensorInfo& info : reader.tensors()) {
    names.push_back(info.name);
    EXPECT_TRUE(info.unsupported.empty()) << info.name << ": " << info.unsupported;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"bfloat", "counts", "empty", "global_step", "half",
                                             "mask", "pixels", "resnet_v1_50/conv1/BatchNorm/beta",
                                             "resnet_v1_50/conv1/weights", "scalar"}));
  EXPECT_EQ(reader.info("global_step").tf_dtype, 9);
  EXPECT_EQ(reader.info("mask").tf_dtype, 10);
  EXPECT_EQ(reader.info("half").tf_dtype, 19);
  EXPECT_EQ(reader.info("bfloat").tf_dtype, 14);
  EXPECT_EQ(reader.info("pixels").tf_dtype, 4);
  for (const auto& [name, tensor] : tensors) {
    SCOPED_TRACE(name);
    const CheckpointTensorInfo& info = reader.info(name);
    EXPECT_EQ(info.dtype, tensor.dtype());
    EXPECT_EQ(info.shape, tensor.shape());
    const Tensor back = reader.read(name, *backend_);
    EXPECT_EQ(back.dtype(), tensor.dtype());
    EXPECT_EQ(back.shape(), tensor.shape());
    EXPECT_EQ(bytes_of(back), bytes_of(tensor));
  }
  EXPECT_EQ(reader.read("resnet_v1_50/conv1/weights", *backend_).to_vector<float>(), weights);

  // The data file is the tensors' bytes in name order, nothing else.
  std::string expected_data;
  for (const std::string& name : names) {
    for (const uint8_t byte : bytes_of(reader.read(name, *backend_))) {
      expected_data.push_back(static_cast<char>(byte));
    }
  }
  EXPECT_EQ(read_file(prefix + ".data-00000-of-00001"), expected_data);

  // An empty checkpoint is valid too.
  write_checkpoint(path("nothing"), {});
  EXPECT_TRUE(CheckpointReader(path("nothing")).tensors().empty());
}

TEST_F(CheckpointTest, RejectsDuplicateEmptyAndUndefinedNames) {
  const Tensor t = make(Shape{1}, std::vector<float>{1});
  EXPECT_THROW(write_checkpoint(path("a"), {{"x", t}, {"x", t}}), InvalidArgument);
  EXPECT_THROW(write_checkpoint(path("a"), {{"", t}}), InvalidArgument);
  EXPECT_THROW(write_checkpoint(path("a"), {{"x", Tensor()}}), InvalidArgument);
  EXPECT_TRUE(files().empty());
}

TEST_F(CheckpointTest, IndexIsATensorFlowTableWithBlocksAndRestarts) {
  // Names that differ in their first bytes defeat prefix compression: ~85 bytes an entry, so
  // 9000 entries span several 256 KiB data blocks.
  const Tensor scalar = make(Shape{}, std::vector<float>{1.5f});
  const Tensor vector = make(Shape{3}, std::vector<int32_t>{7, 8, 9});
  NamedTensors tensors;
  std::mt19937 rng(3);
  for (int i = 0; i < 9000; ++i) {
    char name[96];
    std::snprintf(name, sizeof(name), "%08x/resnet_v1_50/block3/unit_%d/bottleneck_v1/weights",
                  static_cast<unsigned>(rng()), i);
    tensors.emplace_back(name, i % 2 ? scalar : vector);
  }
  const std::string prefix = path("many");
  write_checkpoint(prefix, tensors);
  const std::string file = read_file(prefix + ".index");
  const std::string data = read_file(prefix + ".data-00000-of-00001");
  const Table table = decode_table(file);

  // The metaindex block is empty: one restart point at 0.
  EXPECT_EQ(file.substr(table.metaindex.offset, table.metaindex.size),
            std::string("\0\0\0\0\1\0\0\0", 8));
  // Index block: a restart at every entry, so every key is stored whole.
  ASSERT_GE(table.data_blocks.size(), 3u);
  EXPECT_EQ(table.index_block.restarts.size(), table.index_block.entries.size());
  for (std::size_t i = 0; i < table.index_block.entries.size(); ++i) {
    EXPECT_EQ(table.index_block.entries[i].shared, 0u);
    EXPECT_EQ(table.index_block.restarts[i], table.index_block.entries[i].offset);
  }
  // Blocks are laid out back to back from offset 0, each followed by its 5-byte trailer.
  uint64_t expected_offset = 0;
  std::vector<Entry> all;
  for (std::size_t b = 0; b < table.data_blocks.size(); ++b) {
    const Block& block = table.data_blocks[b];
    SCOPED_TRACE("data block " + std::to_string(b));
    EXPECT_EQ(block.handle.offset, expected_offset);
    expected_offset = block.handle.offset + block.handle.size + 5;
    // Flushed when the size estimate reaches 256 KiB, so every block but the last is at least
    // that big and no more than one entry over.
    if (b + 1 < table.data_blocks.size()) {
      EXPECT_GE(block.handle.size, 256u * 1024u);
      EXPECT_LT(block.handle.size, 256u * 1024u + 200u);
    }
    // A restart every 16 entries; restart entries share nothing with the previous key.
    EXPECT_EQ(block.restarts.size(), (block.entries.size() + 15) / 16);
    for (std::size_t i = 0; i < block.entries.size(); ++i) {
      if (i % 16 == 0) {
        EXPECT_EQ(block.restarts[i / 16], block.entries[i].offset);
        EXPECT_EQ(block.entries[i].shared, 0u);
      }
    }
    // The index key separates this block from the next.
    const std::string& separator = table.index_block.entries[b].key;
    EXPECT_GE(separator, block.entries.back().key);
    if (b + 1 < table.data_blocks.size()) {
      EXPECT_LT(separator, table.data_blocks[b + 1].entries.front().key);
    }
    all.insert(all.end(), block.entries.begin(), block.entries.end());
  }
  EXPECT_EQ(expected_offset, table.metaindex.offset);
  EXPECT_EQ(table.metaindex.offset + table.metaindex.size + 5, table.index.offset);
  EXPECT_EQ(table.index.offset + table.index.size + 5 + 48, file.size());

  // "" holds the header; then every tensor in bytewise order with its entry.
  ASSERT_EQ(all.size(), tensors.size() + 1);
  EXPECT_EQ(all[0].key, "");
  wire::tf::BundleHeaderProto header;
  ASSERT_TRUE(header.ParseFromString(all[0].value));
  EXPECT_EQ(header.num_shards(), 1);
  EXPECT_EQ(header.endianness(), wire::tf::BundleHeaderProto::LITTLE);
  EXPECT_EQ(header.version().producer(), 1);
  EXPECT_EQ(header.version().min_consumer(), 0);
  int64_t offset = 0;
  for (std::size_t i = 1; i < all.size(); ++i) {
    ASSERT_LT(all[i - 1].key, all[i].key);
    wire::tf::BundleEntryProto entry;
    ASSERT_TRUE(entry.ParseFromString(all[i].value)) << all[i].key;
    EXPECT_TRUE(entry.has_shape());
    EXPECT_EQ(entry.shard_id(), 0);
    EXPECT_EQ(entry.offset(), offset);
    const bool is_scalar = entry.dtype() == wire::tf::DT_FLOAT;
    EXPECT_EQ(entry.size(), is_scalar ? 4 : 12);
    EXPECT_EQ(entry.shape().dim_size(), is_scalar ? 0 : 1);
    const std::string bytes = data.substr(static_cast<std::size_t>(offset), entry.size());
    EXPECT_EQ(entry.crc32c(), reference_mask(bitwise_crc32c(bytes.data(), bytes.size())));
    offset += entry.size();
  }
  EXPECT_EQ(static_cast<std::size_t>(offset), data.size());

  // And the library reads it back.
  CheckpointReader reader(prefix);
  ASSERT_EQ(reader.tensors().size(), tensors.size());
  EXPECT_EQ(reader.read(tensors[4].first, *backend_).to_vector<int32_t>(),
            (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(reader.read(tensors[8999].first, *backend_).to_vector<float>(),
            std::vector<float>{1.5f});
}

TEST_F(CheckpointTest, ReadsSnappyCompressedIndexBlocks) {
  NamedTensors tensors;
  for (int i = 0; i < 40; ++i) {
    tensors.emplace_back("tower_0/layer_" + std::to_string(i) + "/kernel",
                         make(Shape{2}, std::vector<float>{static_cast<float>(i), -1}));
  }
  const std::string prefix = path("snappy");
  write_checkpoint(prefix, tensors);
  const std::string original = read_file(prefix + ".index");
  const std::string compressed = compress_data_blocks(original);
  ASSERT_LT(compressed.size(), original.size()) << "the test encoder emitted no copies";
  write_file(prefix + ".index", compressed);
  CheckpointReader reader(prefix);
  ASSERT_EQ(reader.tensors().size(), 40u);
  EXPECT_EQ(reader.read("tower_0/layer_17/kernel", *backend_).to_vector<float>(),
            (std::vector<float>{17, -1}));
}

TEST_F(CheckpointTest, CorruptTensorIsDataLossNamingTheFileAndTensor) {
  const std::string prefix = path("model.ckpt-1");
  write_checkpoint(prefix, {{"a/weights", make(Shape{2}, std::vector<float>{1, 2})},
                            {"b/weights", make(Shape{2}, std::vector<float>{3, 4})}});
  const std::string data_path = prefix + ".data-00000-of-00001";
  std::string data = read_file(data_path);
  data.back() ^= 0x01;  // the last byte belongs to "b/weights"
  write_file(data_path, data);

  CheckpointReader reader(prefix);
  EXPECT_EQ(reader.read("a/weights", *backend_).to_vector<float>(), (std::vector<float>{1, 2}));
  try {
    reader.read("b/weights", *backend_);
    FAIL() << "a flipped bit was not detected";
  } catch (const DataLoss& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'b/weights'"), std::string::npos) << message;
    EXPECT_NE(message.find(data_path), std::string::npos) << message;
    EXPECT_NE(message.find("CRC-32C mismatch"), std::string::npos) << message;
  }
}

TEST_F(CheckpointTest, DamagedOrMissingIndexAndDataAreReported) {
  const std::string prefix = path("model.ckpt-1");
  write_checkpoint(prefix, {{"w", make(Shape{64}, std::vector<float>(64, 1.0f))}});
  const std::string index_path = prefix + ".index";
  const std::string data_path = prefix + ".data-00000-of-00001";
  const std::string index = read_file(index_path);
  const std::string data = read_file(data_path);
  auto expect_data_loss = [&](const std::string& mentions) {
    try {
      CheckpointReader reader(prefix);
      ADD_FAILURE() << "no error; expected one naming " << mentions;
    } catch (const DataLoss& e) {
      EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
    }
  };

  write_file(index_path, index.substr(0, index.size() - 1));  // truncated: footer gone
  expect_data_loss(index_path);
  write_file(index_path, index.substr(0, 20));
  expect_data_loss(index_path);
  std::string flipped = index;
  flipped[3] ^= 0x40;  // inside the first data block: its CRC no longer matches
  write_file(index_path, flipped);
  expect_data_loss("block checksum mismatch");
  write_file(index_path, index);
  write_file(data_path, data.substr(0, data.size() - 4));
  expect_data_loss(data_path);
  fs::remove(data_path);
  expect_data_loss(data_path);
  fs::remove(index_path);
  try {
    CheckpointReader reader(prefix);
    ADD_FAILURE() << "a missing index was not reported";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find(index_path), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, MissingTensorListsSimilarNames) {
  const std::string prefix = path("model.ckpt-1");
  const Tensor t = make(Shape{1}, std::vector<float>{1});
  write_checkpoint(prefix, {{"conv1/weights", t}, {"conv1/biases", t}, {"fc/weights", t}});
  CheckpointReader reader(prefix);
  EXPECT_FALSE(reader.contains("conv1/weight"));
  try {
    reader.read("conv1/weight", *backend_);
    FAIL() << "no error for a missing tensor";
  } catch (const NotFound& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'conv1/weight' not found in checkpoint " + prefix), std::string::npos)
        << message;
    EXPECT_NE(message.find("Did you mean 'conv1/weights'?"), std::string::npos) << message;
    EXPECT_NE(message.find("conv1/biases"), std::string::npos) << message;
  }
}

TEST_F(CheckpointTest, ManagerKeepsMaxToKeepAndWritesTheStateFileAsTensorFlowDoes) {
  FakeClock clock;
  const NamedTensors tensors = {{"w", make(Shape{2}, std::vector<float>{1, 2})}};
  {
    CheckpointManager manager(dir_.string(), /*max_to_keep=*/2, 10000.0, clock.clock());
    EXPECT_TRUE(manager.all_checkpoints().empty());
    EXPECT_EQ(manager.latest_checkpoint(), std::nullopt);
    clock.now = 1700000010.0;
    EXPECT_EQ(manager.save(10, tensors), path("model.ckpt-10"));
    clock.now = 1700000020.5;
    manager.save(20, tensors);
    clock.now = 1700000030.25;
    manager.save(30, tensors);
    EXPECT_EQ(manager.all_checkpoints(),
              (std::vector<std::string>{path("model.ckpt-20"), path("model.ckpt-30")}));
    EXPECT_EQ(manager.latest_checkpoint(), path("model.ckpt-30"));
  }
  EXPECT_EQ(files(), (std::vector<std::string>{
                         "checkpoint", "model.ckpt-20.data-00000-of-00001", "model.ckpt-20.index",
                         "model.ckpt-30.data-00000-of-00001", "model.ckpt-30.index"}));
  // text_format.MessageToString(CheckpointState) as tf.train.CheckpointManager writes it.
  EXPECT_EQ(read_file(dir_ / "checkpoint"),
            "model_checkpoint_path: \"model.ckpt-30\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-20\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-30\"\n"
            "all_model_checkpoint_timestamps: 1700000020.5\n"
            "all_model_checkpoint_timestamps: 1700000030.25\n"
            "last_preserved_timestamp: 1699999999.0\n");
  EXPECT_EQ(latest_checkpoint(dir_.string()), path("model.ckpt-30"));

  // A new manager (a restarted job) recovers the list and keeps deleting the oldest.
  CheckpointManager manager(dir_.string(), 2, 10000.0, clock.clock());
  EXPECT_EQ(manager.all_checkpoints(),
            (std::vector<std::string>{path("model.ckpt-20"), path("model.ckpt-30")}));
  clock.now = 1700000040.0;
  manager.save(40, tensors);
  EXPECT_FALSE(fs::exists(dir_ / "model.ckpt-20.index"));
  EXPECT_FALSE(fs::exists(dir_ / "model.ckpt-20.data-00000-of-00001"));
  EXPECT_EQ(read_file(dir_ / "checkpoint"),
            "model_checkpoint_path: \"model.ckpt-40\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-30\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-40\"\n"
            "all_model_checkpoint_timestamps: 1700000030.25\n"
            "all_model_checkpoint_timestamps: 1700000040.0\n"
            "last_preserved_timestamp: 1699999999.0\n");
  // Saving a step again replaces it and moves it to the end.
  clock.now = 1700000050.0;
  manager.save(30, {{"w", make(Shape{2}, std::vector<float>{5, 6})}});
  EXPECT_EQ(manager.all_checkpoints(),
            (std::vector<std::string>{path("model.ckpt-40"), path("model.ckpt-30")}));
  EXPECT_EQ(CheckpointReader(path("model.ckpt-30")).read("w", *backend_).to_vector<float>(),
            (std::vector<float>{5, 6}));
}

TEST_F(CheckpointTest, KeepCheckpointEveryNHoursPreservesOnePerInterval) {
  FakeClock clock;
  clock.now = 0;
  CheckpointManager manager(dir_.string(), /*max_to_keep=*/1,
                            /*keep_checkpoint_every_n_hours=*/1.0, clock.clock());
  const NamedTensors tensors = {{"w", make(Shape{1}, std::vector<float>{1})}};
  for (int step = 1; step <= 10; ++step) {
    clock.now = 1000.0 * step;
    manager.save(step, tensors);
  }
  // Checkpoint k (saved at 1000 k s) is preserved when it falls out of max_to_keep at least an
  // hour after the last preserved one: k = 4 (4000 >= -1 + 3600), then k = 8 (8000 >= 7600).
  EXPECT_EQ(files(), (std::vector<std::string>{
                         "checkpoint", "model.ckpt-10.data-00000-of-00001", "model.ckpt-10.index",
                         "model.ckpt-4.data-00000-of-00001", "model.ckpt-4.index",
                         "model.ckpt-8.data-00000-of-00001", "model.ckpt-8.index"}));
  EXPECT_EQ(manager.all_checkpoints(), std::vector<std::string>{path("model.ckpt-10")});
  EXPECT_EQ(read_file(dir_ / "checkpoint"),
            "model_checkpoint_path: \"model.ckpt-10\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-10\"\n"
            "all_model_checkpoint_timestamps: 10000.0\n"
            "last_preserved_timestamp: 8000.0\n");
}

TEST_F(CheckpointTest, CrashBetweenDataAndIndexLeavesThePreviousCheckpointLatest) {
  FakeClock clock;
  CheckpointManager manager(dir_.string(), 5, 10000.0, clock.clock());
  manager.save(10, {{"w", make(Shape{2}, std::vector<float>{1, 2})}});
  const std::string state = read_file(dir_ / "checkpoint");

  // What save(20) leaves when killed after renaming the data file but before the index:
  // the data file in place, the index still under its temporary name (half written), and the
  // state file untouched. Plus a state-file temporary from another interrupted save.
  const fs::path scratch = dir_ / "scratch";
  write_checkpoint((scratch / "model.ckpt-20").string(),
                   {{"w", make(Shape{2}, std::vector<float>{3, 4})}});
  const std::string index = read_file(scratch / "model.ckpt-20.index");
  fs::copy_file(scratch / "model.ckpt-20.data-00000-of-00001",
                dir_ / "model.ckpt-20.data-00000-of-00001");
  fs::copy_file(scratch / "model.ckpt-20.data-00000-of-00001",
                dir_ / "model.ckpt-20.data-00000-of-00001.tempstate00000000deadbeef");
  write_file(dir_ / "model.ckpt-20.index.tempstate00000000deadbeef",
             index.substr(0, index.size() / 2));
  write_file(dir_ / "checkpoint.tmp0123456789abcdef", "model_checkpoint_path: \"model.ck");
  fs::remove_all(scratch);

  EXPECT_EQ(read_file(dir_ / "checkpoint"), state);
  EXPECT_EQ(latest_checkpoint(dir_.string()), path("model.ckpt-10"));
  EXPECT_EQ(CheckpointReader(path("model.ckpt-10")).read("w", *backend_).to_vector<float>(),
            (std::vector<float>{1, 2}));

  // The next save (here by a restarted job) removes every leftover.
  CheckpointManager restarted(dir_.string(), 5, 10000.0, clock.clock());
  restarted.save(30, {{"w", make(Shape{2}, std::vector<float>{5, 6})}});
  EXPECT_EQ(files(), (std::vector<std::string>{
                         "checkpoint", "model.ckpt-10.data-00000-of-00001", "model.ckpt-10.index",
                         "model.ckpt-30.data-00000-of-00001", "model.ckpt-30.index"}));
  EXPECT_EQ(latest_checkpoint(dir_.string()), path("model.ckpt-30"));
}

// A listed checkpoint whose index is gone is what an interrupted save, replacement or deletion
// leaves: latest_checkpoint takes the one before it. One whose files are there but truncated
// or corrupt is damaged: reported, not silently replaced by an older one.
TEST(CheckpointCrashChild, SaveUntilKilled) {
  const char* dir = std::getenv(kCrashDirVariable);
  if (dir == nullptr) GTEST_SKIP() << "runs only as the child of the kill test";
  PluginRegistry::Settings settings;
  settings.use_environment = false;
  PluginRegistry registry(settings);
  const auto backend = registry.create<Backend>(ClassKind::kBackend, "cpu");
  int64_t step = 1;
  if (const auto latest = latest_checkpoint(dir)) {
    step = CheckpointReader(*latest).read("global_step", *backend).to_vector<int64_t>()[0] + 1;
  }
  CheckpointManager manager(dir, /*max_to_keep=*/2);
  for (;; ++step) {
    manager.save(step, {{"global_step", Tensor::from_vector(*backend, Shape{}, std::vector{step})},
                        {"w", Tensor::from_vector(*backend, Shape{256 * 1024},
                                                  std::vector<float>(256 * 1024, float(step)))}});
  }
}

TEST_F(CheckpointTest, KilledWriterLeavesTheLatestCheckpointWhole) {
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::mt19937 rng(11);
  int64_t last_step = 0;
  int rounds_with_checkpoint = 0;
  for (int round = 0; round < 12; ++round) {
    ::setenv(kCrashDirVariable, dir_.c_str(), 1);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    std::string filter = "--gtest_filter=CheckpointCrashChild.SaveUntilKilled";
    char* argv[] = {self.data(), filter.data(), nullptr};
    pid_t child = 0;
    const int spawned = posix_spawn(&child, self.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::unsetenv(kCrashDirVariable);
    ASSERT_EQ(spawned, 0) << std::strerror(spawned);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 400)(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child exited by itself, status " << status;

    const std::optional<std::string> latest = latest_checkpoint(dir_.string());
    if (!latest) continue;
    ++rounds_with_checkpoint;
    CheckpointReader reader(*latest);
    const int64_t step = reader.read("global_step", *backend_).to_vector<int64_t>()[0];
    EXPECT_GE(step, last_step);
    last_step = step;
    EXPECT_EQ(*latest, path("model.ckpt-" + std::to_string(step)));
    const std::vector<float> w = reader.read("w", *backend_).to_vector<float>();
    ASSERT_EQ(w.size(), 256u * 1024u);
    EXPECT_EQ(std::count(w.begin(), w.end(), float(step)), 256 * 1024);
  }
  EXPECT_GT(rounds_with_checkpoint, 0);
  EXPECT_GT(last_step, 1);
}

TEST_F(CheckpointTest, TensorFlowReadsOurCheckpointsAndWeReadTheirs) {
  const test::TensorFlowPython python = test::tensorflow_python();
  if (python.status == test::TensorFlowPython::kSkip) GTEST_SKIP() << python.reason;
  ASSERT_EQ(python.status, 0) << python.reason;
  std::vector<float> weights(24);
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 0.5f * static_cast<float>(i);
  FakeClock clock;
  CheckpointManager manager(dir_.string(), 5, 10000.0, clock.clock());
  manager.save(20, {{"model/conv1/weights", make(Shape{2, 3, 4}, weights)},
                    {"model/bias", make(Shape{3}, std::vector<double>{1, -2, 3.5})},
                    {"global_step", make(Shape{}, std::vector<int64_t>{20})},
                    {"counts", make(Shape{2}, std::vector<int32_t>{-4, 5})},
                    {"pixels", make(Shape{3}, std::vector<uint8_t>{0, 128, 255})},
                    {"mask", make_raw(Shape{2}, DType::kBool, {1, 0})},
                    {"empty", make(Shape{0, 3}, std::vector<float>{})}});
  const fs::path script = dir_ / "interop.py";
  write_file(script, R"(import sys
import numpy as np
import tensorflow as tf
directory, ours, theirs = sys.argv[1], sys.argv[2], sys.argv[3]
assert tf.train.latest_checkpoint(directory) == ours, tf.train.latest_checkpoint(directory)
r = tf.train.load_checkpoint(ours)
expected = {
    "model/conv1/weights": np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5,
    "model/bias": np.array([1, -2, 3.5], dtype=np.float64),
    "global_step": np.array(20, dtype=np.int64),
    "counts": np.array([-4, 5], dtype=np.int32),
    "pixels": np.array([0, 128, 255], dtype=np.uint8),
    "mask": np.array([True, False]),
    "empty": np.zeros((0, 3), dtype=np.float32),
}
assert sorted(r.get_variable_to_shape_map()) == sorted(expected), r.get_variable_to_shape_map()
for name, want in expected.items():
    got = r.get_tensor(name)
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape)
    assert np.array_equal(got, want), (name, got, want)
tf.raw_ops.SaveV2(prefix=theirs, tensor_names=["tf/kernel", "tf/step", "tf/flags"],
                  shape_and_slices=["", "", ""],
                  tensors=[tf.constant([[1.5, 2.5]], tf.float32), tf.constant(7, tf.int64),
                           tf.constant([False, True])])
)");
  const std::string theirs = path("theirs/model.ckpt-7");
  const std::string command = "TF_CPP_MIN_LOG_LEVEL=2 '" + python.interpreter + "' '" +
                              script.string() + "' '" + dir_.string() + "' '" +
                              path("model.ckpt-20") + "' '" + theirs + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  CheckpointReader reader(theirs);
  EXPECT_EQ(reader.read("tf/kernel", *backend_).to_vector<float>(),
            (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ(reader.read("tf/kernel", *backend_).shape(), (Shape{1, 2}));
  EXPECT_EQ(reader.read("tf/step", *backend_).to_vector<int64_t>(), std::vector<int64_t>{7});
  EXPECT_EQ(bytes_of(reader.read("tf/flags", *backend_)), (std::vector<uint8_t>{0, 1}));
}

}  // namespace
}  // namespace trainyard
