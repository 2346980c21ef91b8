// InputOptions::memory_budget_bytes: the parsed records between the readers and the batches
// stay within the budget while the consumer takes nothing, a deterministic order does not
// depend on how fast batches are taken, a transform that shrinks a feature in place does not
// keep its old buffer, and a record larger than the budget still passes.
//
// The reader here turns record "n" into "v" = `size` bytes of value n % 251 (u8, declared
// [-1]) and counts its parse() calls, which is how the tests see what the pipeline holds.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/transform.h"

namespace trainyard {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

class SizedReader : public Reader {
 public:
  explicit SizedReader(std::size_t bytes) : bytes_(bytes) {}
  std::vector<FeatureSpec> features() const override { return {{"v", DType::kU8, {-1}}}; }
  ParsedRecord parse(std::string_view record, const RecordLocation&) const override {
    parsed_.fetch_add(1);
    const int n = std::stoi(std::string(record));
    ParsedRecord out;
    out.id = std::string(record);
    ParsedFeature& v = out.features["v"];
    v.dtype = DType::kU8;
    v.shape = {static_cast<int64_t>(bytes_)};
    v.bytes.assign(bytes_, static_cast<std::byte>(n % 251));
    return out;
  }
  int64_t parsed() const { return parsed_.load(); }

 private:
  std::size_t bytes_;
  mutable std::atomic<int64_t> parsed_{0};
};

// Keeps the first `keep` bytes of "v" by resizing its buffer in place (its capacity stays).
class ShrinkInPlace : public ExampleTransform {
 public:
  explicit ShrinkInPlace(int64_t keep) : keep_(keep) {}
  std::string name() const override { return "ShrinkInPlace"; }
  std::vector<FeatureSpec> features(std::vector<FeatureSpec> input) const override {
    input[0].shape = {keep_};
    return input;
  }
  void apply(ParsedRecord& record, ExampleRandom&, const RecordLocation&) const override {
    ParsedFeature& v = record.features.at("v");
    v.bytes.resize(static_cast<std::size_t>(keep_));
    v.shape = {keep_};
  }

 private:
  int64_t keep_;
};

// Record "n" gives "f" u8 [64, 1024] whose rows 0..n % 64 hold n % 251 and whose other rows are
// zeros: all 64 rows, or with `leading_rows` only those that are not zeros (reader.h). Each
// record counts as 64 KiB either way.
class RowsReader : public Reader {
 public:
  static constexpr int64_t kRows = 64;
  static constexpr int64_t kRowBytes = 1024;
  explicit RowsReader(bool leading_rows) : leading_rows_(leading_rows) {}
  std::vector<FeatureSpec> features() const override {
    return {{"f", DType::kU8, {kRows, kRowBytes}}};
  }
  ParsedRecord parse(std::string_view record, const RecordLocation&) const override {
    const int n = std::stoi(std::string(record));
    const int64_t rows = n % kRows + 1;
    ParsedRecord out;
    out.id = std::string(record);
    ParsedFeature& f = out.features["f"];
    f.dtype = DType::kU8;
    f.shape = {leading_rows_ ? rows : kRows, kRowBytes};
    f.bytes.reserve(static_cast<std::size_t>(f.shape[0] * kRowBytes));
    f.bytes.assign(static_cast<std::size_t>(rows * kRowBytes), static_cast<std::byte>(n % 251));
    f.bytes.resize(static_cast<std::size_t>(f.shape[0] * kRowBytes));
    return out;
  }

 private:
  bool leading_rows_;
};

class InputMemoryBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("trainyard_input_budget_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `files` files of `per_file` records "f * 1000 + i".
  InputOptions write_files(int files, int per_file) {
    for (int f = 0; f < files; ++f) {
      TFRecordWriter writer((dir_ / ("part-" + std::to_string(f) + ".tfrecord")).string());
      for (int i = 0; i < per_file; ++i) writer.write(std::to_string(f * 1000 + i));
      writer.close();
    }
    InputOptions o;
    o.data_pattern = (dir_ / "part-*.tfrecord").string();
    o.num_epochs = 1;
    o.seed = 3;
    return o;
  }

  std::filesystem::path dir_;
};

// Waits until the reader has parsed nothing new for 300 ms (at most 20 s): the pipeline has
// filled what it may fill while nobody takes a batch.
int64_t parsed_when_settled(const SizedReader& reader) {
  int64_t last = -1;
  auto stable_since = std::chrono::steady_clock::now();
  const auto give_up = stable_since + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < give_up) {
    const int64_t now = reader.parsed();
    if (now != last) {
      last = now;
      stable_since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - stable_since > std::chrono::milliseconds(300)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return last;
}

std::vector<std::string> drain_ids(InputPipeline& pipeline, int pause_every = 0) {
  std::vector<std::string> ids;
  int batches = 0;
  while (std::optional<HostBatch> batch = pipeline.next()) {
    ids.insert(ids.end(), batch->ids.begin(), batch->ids.end());
    if (pause_every > 0 && ++batches % pause_every == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return ids;
}

// 400 records of 1 MiB, a shuffle buffer of 1,000 and a 16 MiB budget: with no batch taken the
// pipeline parses the records its two halves hold (8 + 8), one more per reader, the chunk the
// batch thread took and the batch it fills: about 25, not the 400 the buffer's capacity allows.
TEST_F(InputMemoryBudgetTest, RecordsInFlightStayWithinTheBudgetWhileNothingIsTaken) {
  for (bool deterministic : {true, false}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "not deterministic");
    InputOptions o = write_files(4, 100);
    o.batch_size = 1;
    o.num_readers = 4;
    o.shuffle_buffer_size = 1000;
    o.prefetch_batches = 1;
    o.deterministic = deterministic;
    o.memory_budget_bytes = 16 * kMiB;
    SizedReader reader(kMiB);
    InputPipeline pipeline(reader, o);
    const int64_t parsed = parsed_when_settled(reader);
    EXPECT_LE(parsed, 30) << "records parsed while no batch was taken";
    EXPECT_GE(parsed, 8);
    std::vector<std::string> ids = drain_ids(pipeline);
    EXPECT_EQ(ids.size(), 400u);
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end()) << "a record came twice";
    const int64_t limited = pipeline.stats().shuffle_buffer_limited_to;
    EXPECT_GE(limited, 1);
    EXPECT_LE(limited, 9) << "the buffer's half is 8 MiB";
  }
}

// The buffer's byte limit reads only the records' sizes, so a deterministic pipeline gives the
// same order whether batches are taken at once or slowly, and a different seed another one.
TEST_F(InputMemoryBudgetTest, DeterministicOrderUnderABudgetDependsOnlyOnTheSeed) {
  InputOptions o = write_files(3, 60);
  o.batch_size = 4;
  o.num_readers = 3;
  o.deterministic = true;
  o.num_epochs = 2;
  o.shuffle_buffer_size = 64;
  o.memory_budget_bytes = 1 * kMiB;  // a buffer of 8 records of 64 KiB, not 64
  SizedReader reader(64 * 1024);
  auto run = [&](uint64_t seed, int pause_every) {
    InputOptions with_seed = o;
    with_seed.seed = seed;
    InputPipeline pipeline(reader, with_seed);
    std::vector<std::string> ids = drain_ids(pipeline, pause_every);
    EXPECT_GE(pipeline.stats().shuffle_buffer_limited_to, 1);
    return ids;
  };
  const std::vector<std::string> fast = run(5, 0);
  ASSERT_EQ(fast.size(), 360u);
  EXPECT_EQ(run(5, 1), fast);
  EXPECT_EQ(run(5, 7), fast);
  EXPECT_NE(run(6, 0), fast);
}

// A reader that gives only a feature's leading rows (reader.h) yields the batches, in the same
// order, of one that gives every row with zeros after them: the rows left out are zeros in the
// batch (also in recycled batches, which held other records there), and the budget counts the
// record with all its rows, so where it limits the shuffle buffer it limits it alike.
TEST_F(InputMemoryBudgetTest, LeadingRowsBatchAsTheWholeFeatureInTheSameOrder) {
  InputOptions o = write_files(3, 50);
  o.batch_size = 4;
  o.num_readers = 3;
  o.deterministic = true;
  o.num_epochs = 2;
  o.shuffle_buffer_size = 64;
  o.memory_budget_bytes = 1 * kMiB;  // a buffer of 8 records of 64 KiB, not 64
  auto run = [&](bool leading_rows) {
    RowsReader reader(leading_rows);
    InputPipeline pipeline(reader, o);
    std::vector<std::pair<std::string, std::vector<std::byte>>> batches;
    while (std::optional<HostBatch> batch = pipeline.next()) {
      const ParsedFeature& f = batch->features.at("f");
      EXPECT_EQ(f.shape,
                (std::vector<int64_t>{batch->size, RowsReader::kRows, RowsReader::kRowBytes}));
      std::string ids;
      for (const std::string& id : batch->ids) ids += id + " ";
      batches.emplace_back(ids, f.bytes);
      pipeline.recycle(std::move(*batch));
    }
    EXPECT_GE(pipeline.stats().shuffle_buffer_limited_to, 1);
    return std::make_pair(batches, pipeline.stats().shuffle_buffer_limited_to);
  };
  const auto whole = run(false);
  const auto leading = run(true);
  ASSERT_EQ(whole.first.size(), 75u);
  ASSERT_EQ(leading.first.size(), whole.first.size());
  EXPECT_EQ(leading.second, whole.second);
  for (std::size_t b = 0; b < whole.first.size(); ++b) {
    EXPECT_EQ(leading.first[b].first, whole.first[b].first) << "batch " << b;
    EXPECT_TRUE(leading.first[b].second == whole.first[b].second) << "batch " << b;
  }
}

// The transform leaves 16 bytes in a 1 MiB buffer; the pipeline reallocates it, so 64 records
// fit the 16 MiB budget's buffer half and the buffer is never limited.
TEST_F(InputMemoryBudgetTest, AFeatureShrunkInPlaceDoesNotKeepItsOldBuffer) {
  InputOptions o = write_files(2, 100);
  o.batch_size = 2;
  o.num_readers = 2;
  o.shuffle_buffer_size = 64;
  o.memory_budget_bytes = 16 * kMiB;
  o.transforms.push_back(std::make_shared<ShrinkInPlace>(16));
  SizedReader reader(kMiB);
  InputPipeline pipeline(reader, o);
  EXPECT_EQ(drain_ids(pipeline).size(), 200u);
  EXPECT_EQ(pipeline.stats().shuffle_buffer_limited_to, 0);
}

// Records of 4 MiB under a 1 MiB budget pass one at a time, all of them.
TEST_F(InputMemoryBudgetTest, ARecordLargerThanTheBudgetStillPasses) {
  for (bool deterministic : {true, false}) {
    InputOptions o = write_files(3, 5);
    o.batch_size = 2;
    o.num_readers = 3;
    o.deterministic = deterministic;
    o.memory_budget_bytes = 1 * kMiB;
    SizedReader reader(4 * kMiB);
    InputPipeline pipeline(reader, o);
    EXPECT_EQ(drain_ids(pipeline).size(), 15u) << deterministic;
  }
}

TEST_F(InputMemoryBudgetTest, TheDefaultIsAQuarterOfPhysicalMemoryAndANegativeBudgetIsRefused) {
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  EXPECT_EQ(default_input_memory_budget(),
            std::max<int64_t>(physical / sysconf(_SC_PAGESIZE) / 4 * sysconf(_SC_PAGESIZE),
                              int64_t{256} << 20));
  InputOptions o = write_files(1, 1);
  o.memory_budget_bytes = -1;
  SizedReader reader(8);
  EXPECT_THROW(InputPipeline(reader, o), InvalidArgument);
}

}  // namespace
}  // namespace trainyard
