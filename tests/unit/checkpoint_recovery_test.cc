// Damaged checkpoints and the `checkpoint` state file (checkpoint_state.cc): whole-checkpoint
// verification, recovery to the newest intact checkpoint, state files that are hostile (entries
// outside the directory, too large, too deeply nested), index headers claiming absurd shard
// counts, files that are not regular files, and garbage collection that keeps the newest
// intact checkpoint.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint_test_util.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

using namespace checkpoint_test;  // the table decoder and the fixture (checkpoint_test_util.h)

TEST_F(CheckpointTest, LatestSkipsIncompleteCheckpointsAndReportsDamagedOnes) {
  const NamedTensors tensors = {{"w", make(Shape{2}, std::vector<float>{1, 2})}};
  for (const int step : {1, 2, 3, 4})
    write_checkpoint(path("model.ckpt-" + std::to_string(step)), tensors);
  // As TensorFlow 1.x Saver writes it: absolute paths for some, no timestamps.
  write_file(dir_ / "checkpoint",
             "model_checkpoint_path: \"model.ckpt-4\"\n"
             "all_model_checkpoint_paths: \"" +
                 path("model.ckpt-1") +
                 "\"\n"
                 "all_model_checkpoint_paths: \"model.ckpt-2\"\n"
                 "all_model_checkpoint_paths: \"model.ckpt-3\"\n"
                 "all_model_checkpoint_paths: \"model.ckpt-4\"\n");
  EXPECT_EQ(latest_checkpoint(dir_.string()), path("model.ckpt-4"));
  auto expect_damaged = [&](const std::string& prefix, const std::string& why) {
    try {
      const std::optional<std::string> latest = latest_checkpoint(dir_.string());
      ADD_FAILURE() << "no error; latest_checkpoint returned " << latest.value_or("nothing");
    } catch (const DataLoss& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("checkpoint " + prefix + ", the newest that"), std::string::npos)
          << message;
      EXPECT_NE(message.find("is damaged"), std::string::npos) << message;
      EXPECT_NE(message.find(why), std::string::npos) << message;
    }
  };
  const std::string index4 = read_file(dir_ / "model.ckpt-4.index");
  write_file(dir_ / "model.ckpt-4.index", index4.substr(0, index4.size() - 10));
  expect_damaged(path("model.ckpt-4"), path("model.ckpt-4.index"));
  fs::remove(dir_ / "model.ckpt-4.index");
  EXPECT_EQ(latest_checkpoint(dir_.string()), path("model.ckpt-3"));
  fs::remove(dir_ / "model.ckpt-3.index");
  EXPECT_EQ(latest_checkpoint(dir_.string()), path("model.ckpt-2"));
  fs::remove(dir_ / "model.ckpt-2.data-00000-of-00001");
  expect_damaged(path("model.ckpt-2"), path("model.ckpt-2.data-00000-of-00001"));
  fs::remove(dir_ / "model.ckpt-2.index");
  EXPECT_EQ(latest_checkpoint(dir_.string()), path("model.ckpt-1"));
  fs::remove(dir_ / "model.ckpt-1.index");
  EXPECT_EQ(latest_checkpoint(dir_.string()), std::nullopt);
  fs::remove(dir_ / "checkpoint");
  EXPECT_EQ(latest_checkpoint(dir_.string()), std::nullopt);
  EXPECT_EQ(latest_checkpoint((dir_ / "does_not_exist").string()), std::nullopt);
}

// verify() reads every tensor once and checks the CRC-32C TensorFlow stores for it: a flipped
// byte anywhere (here past the first 4 MiB read of a 6 MB tensor, and in a one-byte tensor),
// which opening the checkpoint cannot see, a truncated data file and a truncated index.
TEST_F(CheckpointTest, VerifyCatchesFlippedBytesAndTruncatedFiles) {
  const std::string prefix = path("model.ckpt-1");
  write_checkpoint(prefix, {{"big", make(Shape{1500000}, std::vector<float>(1500000, 0.5f))},
                            {"flag", make_raw(Shape{1}, DType::kBool, {1})},
                            {"step", make(Shape{}, std::vector<int64_t>{1})}});
  const std::string data_path = prefix + ".data-00000-of-00001";
  const std::string index_path = prefix + ".index";
  const std::string data = read_file(data_path);
  const std::string index = read_file(index_path);
  EXPECT_NO_THROW(CheckpointReader(prefix).verify());
  EXPECT_EQ(checkpoint_damage(prefix), std::nullopt);

  // "big" is first (bytewise order), "flag" right after it.
  for (const auto& [offset, tensor] :
       std::vector<std::pair<std::size_t, std::string>>{{5000000, "'big'"}, {6000000, "'flag'"}}) {
    SCOPED_TRACE(tensor);
    std::string flipped = data;
    flipped[offset] ^= 0x10;
    write_file(data_path, flipped);
    CheckpointReader reader(prefix);  // the sizes are right: opening it cannot tell
    try {
      reader.verify();
      ADD_FAILURE() << "a flipped byte at " << offset << " was not detected";
    } catch (const DataLoss& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("CRC-32C mismatch for tensor " + tensor), std::string::npos)
          << message;
      EXPECT_NE(message.find(data_path), std::string::npos) << message;
    }
    const std::optional<std::string> damage = checkpoint_damage(prefix);
    ASSERT_TRUE(damage.has_value());
    EXPECT_NE(damage->find("CRC-32C mismatch for tensor " + tensor), std::string::npos) << *damage;
  }

  write_file(data_path, data.substr(0, data.size() - 1));
  std::optional<std::string> damage = checkpoint_damage(prefix);
  ASSERT_TRUE(damage.has_value());
  EXPECT_NE(damage->find(data_path + " is " + std::to_string(data.size() - 1) + " bytes"),
            std::string::npos)
      << *damage;

  write_file(data_path, data);
  write_file(index_path, index.substr(0, index.size() / 2));
  damage = checkpoint_damage(prefix);
  ASSERT_TRUE(damage.has_value());
  EXPECT_NE(damage->find(index_path), std::string::npos) << *damage;

  write_file(index_path, index);
  EXPECT_EQ(checkpoint_damage(prefix), std::nullopt);
}

// The trainer's restore: damaged checkpoints newer than the newest intact one are reported and
// moved aside, older damaged ones too, and the state file then lists only intact checkpoints.
TEST_F(CheckpointTest, RecoveryMovesDamagedCheckpointsAsideAndListsOnlyIntactOnes) {
  FakeClock clock;
  {
    CheckpointManager manager(dir_.string(), 5, 10000.0, clock.clock());
    for (const int step : {1, 2, 3, 4}) {
      clock.now += 10;
      manager.save(step, {{"w", make(Shape{4}, std::vector<float>(4, float(step)))}});
    }
  }
  std::string data4 = read_file(dir_ / "model.ckpt-4.data-00000-of-00001");
  data4[5] ^= 0x01;
  write_file(dir_ / "model.ckpt-4.data-00000-of-00001", data4);
  const std::string index1 = read_file(dir_ / "model.ckpt-1.index");
  write_file(dir_ / "model.ckpt-1.index", index1.substr(0, index1.size() - 3));

  std::ostringstream log;
  EXPECT_EQ(recover_latest_checkpoint(dir_.string(), log), path("model.ckpt-3"));
  EXPECT_NE(log.str().find("warning: checkpoint " + path("model.ckpt-4") + " is damaged (" +
                           path("model.ckpt-4.data-00000-of-00001") +
                           ": CRC-32C mismatch for tensor 'w'"),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("; moved aside to " + path("model.ckpt-4.data-00000-of-00001") +
                           ".damaged, " + path("model.ckpt-4.index") + ".damaged; restoring " +
                           path("model.ckpt-3") + "\n"),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("warning: checkpoint " + path("model.ckpt-1") + " is damaged ("),
            std::string::npos)
      << log.str();
  EXPECT_EQ(files(),
            (std::vector<std::string>{
                "checkpoint", "model.ckpt-1.data-00000-of-00001.damaged",
                "model.ckpt-1.index.damaged", "model.ckpt-2.data-00000-of-00001",
                "model.ckpt-2.index", "model.ckpt-3.data-00000-of-00001", "model.ckpt-3.index",
                "model.ckpt-4.data-00000-of-00001.damaged", "model.ckpt-4.index.damaged"}));
  EXPECT_EQ(read_file(dir_ / "checkpoint"),
            "model_checkpoint_path: \"model.ckpt-3\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-2\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-3\"\n"
            "all_model_checkpoint_timestamps: 1700000020.0\n"
            "all_model_checkpoint_timestamps: 1700000030.0\n"
            "last_preserved_timestamp: 1699999999.0\n");
  // Nothing to recover now: quiet, and the same answer.
  std::ostringstream again;
  EXPECT_EQ(recover_latest_checkpoint(dir_.string(), again), path("model.ckpt-3"));
  EXPECT_EQ(again.str(), "");
  EXPECT_EQ(latest_checkpoint(dir_.string()), path("model.ckpt-3"));
}

// When no listed checkpoint is intact the run must not start over silently: the error names
// each checkpoint and why, and nothing is renamed.
TEST_F(CheckpointTest, RecoveryRefusesWhenNoListedCheckpointIsIntact) {
  CheckpointManager manager(dir_.string(), 5);
  manager.save(1, {{"w", make(Shape{4}, std::vector<float>(4, 1.0f))}});
  manager.save(2, {{"w", make(Shape{4}, std::vector<float>(4, 2.0f))}});
  std::string data2 = read_file(dir_ / "model.ckpt-2.data-00000-of-00001");
  data2[0] ^= 0x01;
  write_file(dir_ / "model.ckpt-2.data-00000-of-00001", data2);
  fs::remove(dir_ / "model.ckpt-1.index");
  const std::vector<std::string> before = files();
  std::ostringstream log;
  try {
    recover_latest_checkpoint(dir_.string(), log);
    FAIL() << "no error when every listed checkpoint is damaged";
  } catch (const DataLoss& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no checkpoint that " + path("checkpoint") +
                           " lists is intact: " + path("model.ckpt-2") + " ("),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("CRC-32C mismatch"), std::string::npos) << message;
    EXPECT_NE(message.find("; " + path("model.ckpt-1") + " (checkpoint " + path("model.ckpt-1") +
                           " not found"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("Nothing was changed; pass --start_new_model to start over"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(files(), before);
}

// Entries naming paths outside the directory (absolute elsewhere, `..`) are reported and
// ignored: never restored, renamed or deleted, by recovery or by garbage collection.
TEST_F(CheckpointTest, StateFileEntriesOutsideTheDirectoryAreIgnoredAndNeverTouched) {
  const fs::path outside = dir_.string() + "_outside";
  fs::create_directories(outside);
  const std::string foreign = (outside / "model.ckpt-9").string();
  write_checkpoint(foreign, {{"w", make(Shape{4}, std::vector<float>(4, 9.0f))}});
  std::string foreign_data = read_file(foreign + ".data-00000-of-00001");
  foreign_data[0] ^= 0x01;  // damaged: recovery would move it aside if it were inside
  write_file(foreign + ".data-00000-of-00001", foreign_data);
  write_checkpoint(path("model.ckpt-1"), {{"w", make(Shape{4}, std::vector<float>(4, 1.0f))}});
  const std::string dotdot = "../" + outside.filename().string() + "/model.ckpt-9";
  write_file(dir_ / "checkpoint", "model_checkpoint_path: \"" + foreign +
                                      "\"\n"
                                      "all_model_checkpoint_paths: \"model.ckpt-1\"\n"
                                      "all_model_checkpoint_paths: \"" +
                                      dotdot +
                                      "\"\n"
                                      "all_model_checkpoint_paths: \"" +
                                      foreign +
                                      "\"\n"
                                      "all_model_checkpoint_timestamps: 1.0\n"
                                      "all_model_checkpoint_timestamps: 2.0\n"
                                      "all_model_checkpoint_timestamps: 3.0\n"
                                      "last_preserved_timestamp: 0.5\n");
  const std::vector<std::string> foreign_files = {"model.ckpt-9.data-00000-of-00001",
                                                  "model.ckpt-9.index"};
  auto outside_files = [&] {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(outside)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  };

  EXPECT_EQ(latest_checkpoint(dir_.string()), path("model.ckpt-1"));
  std::ostringstream log;
  EXPECT_EQ(recover_latest_checkpoint(dir_.string(), log), path("model.ckpt-1"));
  for (const std::string& entry : {foreign, dotdot}) {
    EXPECT_NE(log.str().find("warning: " + path("checkpoint") + " lists \"" + entry +
                             "\", which is outside " + dir_.string() +
                             "; ignored (never restored, renamed or deleted)\n"),
              std::string::npos)
        << log.str();
  }
  EXPECT_EQ(outside_files(), foreign_files);

  CheckpointManager manager(dir_.string(), /*max_to_keep=*/1);
  EXPECT_EQ(manager.all_checkpoints(), std::vector<std::string>{path("model.ckpt-1")});
  manager.save(2, {{"w", make(Shape{4}, std::vector<float>(4, 2.0f))}});
  manager.save(3, {{"w", make(Shape{4}, std::vector<float>(4, 3.0f))}});
  EXPECT_EQ(outside_files(), foreign_files);
  EXPECT_FALSE(fs::exists(dir_ / "model.ckpt-1.index"));  // inside: garbage-collected as usual
  fs::remove_all(outside);
}

// The state file is bounded before it is parsed, and nesting is limited: 30,000 nested
// unknown fields are an error naming the file, not a stack overflow.
TEST_F(CheckpointTest, OversizedOrDeeplyNestedStateFileIsAnError) {
  write_checkpoint(path("model.ckpt-1"), {{"w", make(Shape{1}, std::vector<float>{1})}});
  std::string nested = "model_checkpoint_path: \"model.ckpt-1\"\n";
  for (int i = 0; i < 30000; ++i) nested += "x {";
  for (int i = 0; i < 30000; ++i) nested += "}";
  std::string huge = "model_checkpoint_path: \"model.ckpt-1\"\n";
  while (huge.size() <= kMaxCheckpointStateBytes) {
    huge += "all_model_checkpoint_paths: \"model.ckpt-1\"\n";
  }
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {nested, "is not a checkpoint state file (text-format CheckpointState): line 2"},
           {huge, "is more than 1048576 bytes, too large for a checkpoint state file"}}) {
    SCOPED_TRACE(why);
    write_file(dir_ / "checkpoint", text);
    auto expect_error = [&](const std::function<void()>& f) {
      try {
        f();
        ADD_FAILURE() << "no error";
      } catch (const DataLoss& e) {
        EXPECT_NE(std::string(e.what()).find(path("checkpoint") + " " + why), std::string::npos)
            << e.what();
      }
    };
    expect_error([&] { latest_checkpoint(dir_.string()); });
    expect_error([&] { CheckpointManager manager(dir_.string()); });
    std::ostringstream log;
    expect_error([&] { recover_latest_checkpoint(dir_.string(), log); });
  }
}

// A header claiming 2^31-1 shards used to allocate 16 GiB for the shard table before any data
// file was opened. The count is bounded by kMaxCheckpointShards and by the last data file.
TEST_F(CheckpointTest, ShardCountIsBoundedBeforeTheShardTableIsAllocated) {
  const std::string prefix = path("model.ckpt-1");
  write_checkpoint(prefix, {{"w", make(Shape{2}, std::vector<float>{1, 2})}});
  const std::string index_path = prefix + ".index";
  const std::string index = read_file(index_path);
  wire::tf::BundleHeaderProto header;
  header.set_num_shards(1);
  write_file(index_path, with_bundle_header(index, header));
  EXPECT_EQ(CheckpointReader(prefix).read("w", *backend_).to_vector<float>(),
            (std::vector<float>{1, 2}));  // the rewritten table itself reads back

  auto data_loss = [&] {
    try {
      CheckpointReader reader(prefix);
    } catch (const DataLoss& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no DataLoss";
    return std::string();
  };
  for (const int shards : {100001, 2147483647}) {
    header.set_num_shards(shards);
    write_file(index_path, with_bundle_header(index, header));
    EXPECT_EQ(data_loss(), index_path + ": the bundle header claims " + std::to_string(shards) +
                               " data shards (at most 100000 are read)");
  }
  header.set_num_shards(1000);
  write_file(index_path, with_bundle_header(index, header));
  EXPECT_EQ(data_loss(), "checkpoint " + prefix + " is incomplete: " + index_path +
                             " claims 1000 data shards but " + prefix +
                             ".data-00999-of-01000 does not exist");
}

// A FIFO as a checkpoint's .index, data file or state file used to block in open() waiting for
// a writer; a device would be read without end. Each is refused by name before it is read.
TEST_F(CheckpointTest, FifoIndexDataOrStateFileIsRefusedByName) {
  const std::string prefix =
      CheckpointManager(dir_.string()).save(1, {{"w", make(Shape{2}, std::vector<float>{1, 2})}});
  auto invalid_argument = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no InvalidArgument";
    return std::string();
  };
  for (const std::string suffix : {".index", ".data-00000-of-00001"}) {
    const std::string file = prefix + suffix;
    fs::remove(file);
    ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
    EXPECT_EQ(invalid_argument([&] { CheckpointReader reader(prefix); }),
              file + " is a FIFO, not a regular file; it was not read");
    fs::remove(file);
    write_checkpoint(prefix, {{"w", make(Shape{2}, std::vector<float>{1, 2})}});
  }
  const std::string state = path("checkpoint");
  fs::remove(state);
  ASSERT_EQ(::mkfifo(state.c_str(), 0600), 0);
  EXPECT_EQ(invalid_argument([&] { latest_checkpoint(dir_.string()); }),
            state + " is a FIFO, not a regular file; it was not read");
}

// Garbage collection never deletes the newest intact checkpoint: a checkpoint that does not
// verify right after it was written (damaged here between the write and the check, by the
// clock the manager reads then) is moved aside and reported, and nothing older is deleted.
// Later saves collect garbage again but never touch the files moved aside.
TEST_F(CheckpointTest, GarbageCollectionKeepsTheNewestIntactCheckpoint) {
  FakeClock clock;
  bool damage_next = false;
  const std::string data2 = path("model.ckpt-2.data-00000-of-00001");
  CheckpointManager manager(dir_.string(), /*max_to_keep=*/1, 10000.0, [&] {
    if (std::exchange(damage_next, false)) {
      std::string data = read_file(data2);
      data[0] ^= 0x01;
      write_file(data2, data);
    }
    return clock.now;
  });
  manager.save(1, {{"w", make(Shape{4}, std::vector<float>(4, 1.0f))}});
  const std::string state = read_file(dir_ / "checkpoint");
  damage_next = true;
  try {
    manager.save(2, {{"w", make(Shape{4}, std::vector<float>(4, 2.0f))}});
    FAIL() << "a checkpoint damaged as it was written was accepted";
  } catch (const DataLoss& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("checkpoint " + path("model.ckpt-2") +
                           " is damaged right after it was written ("),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("moved aside to " + data2 + ".damaged"), std::string::npos) << message;
  }
  EXPECT_EQ(read_file(dir_ / "checkpoint"), state);
  EXPECT_EQ(latest_checkpoint(dir_.string()), path("model.ckpt-1"));
  EXPECT_EQ(checkpoint_damage(path("model.ckpt-1")), std::nullopt);
  EXPECT_EQ(manager.all_checkpoints(), std::vector<std::string>{path("model.ckpt-1")});

  manager.save(2, {{"w", make(Shape{4}, std::vector<float>(4, 2.0f))}});
  manager.save(3, {{"w", make(Shape{4}, std::vector<float>(4, 3.0f))}});
  EXPECT_EQ(files(),
            (std::vector<std::string>{"checkpoint", "model.ckpt-2.data-00000-of-00001.damaged",
                                      "model.ckpt-2.index.damaged",
                                      "model.ckpt-3.data-00000-of-00001", "model.ckpt-3.index"}));
}

// Run in a child process by KilledWriterLeavesTheLatestCheckpointWhole: saves until killed.

}  // namespace
}  // namespace trainyard
