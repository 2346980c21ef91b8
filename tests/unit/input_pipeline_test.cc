// InputPipeline and expand_file_patterns, with a Reader defined here: each record is a decimal
// integer v, parsed into "x" = [v] (i64) and "y" = [v, -v] (f32), with id "v".
#include "trainyard/core/input_pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <set>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

using ::testing::HasSubstr;

class IntReader : public Reader {
 public:
  // A record whose value is `wrong_shape_value` gets "x" of shape [2].
  explicit IntReader(int64_t wrong_shape_value = -1) : wrong_shape_value_(wrong_shape_value) {}

  std::vector<FeatureSpec> features() const override {
    return {{"x", DType::kI64, {1}}, {"y", DType::kF32, {2}}};
  }

  ParsedRecord parse(std::string_view record, const RecordLocation& where) const override {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(record.data(), record.data() + record.size(), v);
    if (ec != std::errc() || end != record.data() + record.size()) {
      throw InvalidArgument(where.file + ", record " + std::to_string(where.record_index) +
                            ": key 'x' expects a decimal integer, found '" + std::string(record) +
                            "'");
    }
    ParsedRecord out;
    out.id = std::string(record);
    ParsedFeature& x = out.features["x"];
    x.dtype = DType::kI64;
    const int64_t xs[2] = {v, v};
    const int64_t rows = v == wrong_shape_value_ ? 2 : 1;
    x.shape = {rows};
    x.bytes.resize(static_cast<std::size_t>(rows) * sizeof(int64_t));
    std::memcpy(x.bytes.data(), xs, x.bytes.size());
    ParsedFeature& y = out.features["y"];
    y.dtype = DType::kF32;
    y.shape = {2};
    const float ys[2] = {static_cast<float>(v), -static_cast<float>(v)};
    y.bytes.resize(sizeof(ys));
    std::memcpy(y.bytes.data(), ys, sizeof(ys));
    return out;
  }

 private:
  int64_t wrong_shape_value_;
};

// Each record is a decimal integer n, parsed into "v" = n bytes of value n, declared [-1].
class VaryingReader : public Reader {
 public:
  std::vector<FeatureSpec> features() const override { return {{"v", DType::kU8, {-1}}}; }
  ParsedRecord parse(std::string_view record, const RecordLocation&) const override {
    const int n = std::stoi(std::string(record));
    ParsedRecord out;
    out.id = std::string(record);
    ParsedFeature& v = out.features["v"];
    v.dtype = DType::kU8;
    v.shape = {n};
    v.bytes.assign(static_cast<std::size_t>(n), static_cast<std::byte>(n));
    return out;
  }
};

// Each record is "HxW" (and an optional "/T"), parsed into "image" u8 [H, W, 2] of
// image_value(T, y, x, c) and "size" i32 [2] = {H, W}; "image" is declared [-1, -1, 2].
uint8_t image_value(int tag, int64_t y, int64_t x, int64_t c) {
  return static_cast<uint8_t>(1 + (tag * 37 + y * 11 + x * 3 + c) % 250);
}

class ImageReader : public Reader {
 public:
  std::vector<FeatureSpec> features() const override {
    return {{"image", DType::kU8, {-1, -1, 2}}, {"size", DType::kI32, {2}}};
  }
  ParsedRecord parse(std::string_view record, const RecordLocation&) const override {
    const std::string text(record);
    const std::size_t x_at = text.find('x'), slash = text.find('/');
    const int h = std::stoi(text.substr(0, x_at));
    const int w = std::stoi(text.substr(x_at + 1, slash - x_at - 1));
    const int tag = slash == std::string::npos ? 0 : std::stoi(text.substr(slash + 1));
    ParsedRecord out;
    out.id = text;
    ParsedFeature& image = out.features["image"];
    image.dtype = DType::kU8;
    image.shape = {h, w, 2};
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t c = 0; c < 2; ++c) {
          image.bytes.push_back(static_cast<std::byte>(image_value(tag, y, x, c)));
        }
      }
    }
    ParsedFeature& size = out.features["size"];
    size.dtype = DType::kI32;
    size.shape = {2};
    const int32_t hw[2] = {h, w};
    size.bytes.resize(sizeof(hw));
    std::memcpy(size.bytes.data(), hw, sizeof(hw));
    return out;
  }
};

// Each record is "NxHxW", parsed into "masks" u8 [N, H, W] of mask_value(n, y, x) and "classes"
// i32 [N] = 1..N (instance masks of an image of its own size and their boxes' classes), declared
// [-1, -1, -1] and [-1].
uint8_t mask_value(int64_t n, int64_t y, int64_t x) {
  return static_cast<uint8_t>(1 + (n * 53 + y * 7 + x) % 250);
}

class MaskReader : public Reader {
 public:
  std::vector<FeatureSpec> features() const override {
    return {{"masks", DType::kU8, {-1, -1, -1}}, {"classes", DType::kI32, {-1}}};
  }
  ParsedRecord parse(std::string_view record, const RecordLocation&) const override {
    const std::string text(record);
    const std::size_t a = text.find('x'), b = text.find('x', a + 1);
    const int n = std::stoi(text.substr(0, a));
    const int h = std::stoi(text.substr(a + 1, b - a - 1));
    const int w = std::stoi(text.substr(b + 1));
    ParsedRecord out;
    out.id = text;
    ParsedFeature& masks = out.features["masks"];
    masks.dtype = DType::kU8;
    masks.shape = {n, h, w};
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) masks.bytes.push_back(std::byte{mask_value(k, y, x)});
      }
    }
    ParsedFeature& classes = out.features["classes"];
    classes.dtype = DType::kI32;
    classes.shape = {n};
    for (int32_t k = 1; k <= n; ++k) {
      const auto* p = reinterpret_cast<const std::byte*>(&k);
      classes.bytes.insert(classes.bytes.end(), p, p + sizeof(k));
    }
    return out;
  }
};

// Checks that row `row` of a padded "image" batch holds the record of `size` and `tag` at its
// top left and zeros elsewhere.
void expect_padded_image(const ParsedFeature& image, int64_t row, int64_t h, int64_t w, int tag) {
  const int64_t height = image.shape[1], width = image.shape[2];
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      for (int64_t c = 0; c < 2; ++c) {
        const auto got = static_cast<int>(
            image.bytes[static_cast<std::size_t>(((row * height + y) * width + x) * 2 + c)]);
        const int want = y < h && x < w ? image_value(tag, y, x, c) : 0;
        ASSERT_EQ(got, want) << "row " << row << " y " << y << " x " << x << " c " << c;
      }
    }
  }
}

class InputPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = std::filesystem::temp_directory_path() /
           ("trainyard_input_pipeline_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string write(const std::string& name, const std::vector<std::string>& records,
                    Compression compression = Compression::kNone) {
    std::string p = path(name);
    TFRecordWriter writer(p, compression);
    for (const std::string& r : records) writer.write(r);
    writer.close();
    return p;
  }

  // Files "part-F.tfrecord" with sizes[F] records valued F * 1000 + i; returns every value.
  std::vector<int64_t> write_parts(const std::vector<int>& sizes) {
    std::vector<int64_t> values;
    for (std::size_t f = 0; f < sizes.size(); ++f) {
      std::vector<std::string> records;
      for (int i = 0; i < sizes[f]; ++i) {
        values.push_back(static_cast<int64_t>(f) * 1000 + i);
        records.push_back(std::to_string(values.back()));
      }
      write("part-" + std::to_string(f) + ".tfrecord", records);
    }
    return values;
  }

  std::string parts_pattern() const { return path("part-*.tfrecord"); }

  InputOptions options(int64_t batch_size, int num_readers) const {
    InputOptions o;
    o.data_pattern = parts_pattern();
    o.batch_size = batch_size;
    o.num_readers = num_readers;
    return o;
  }

  std::filesystem::path dir_;
};

// The values of one batch, checking that its features agree with each other and its ids.
std::vector<int64_t> batch_values(const HostBatch& batch) {
  const ParsedFeature& x = batch.features.at("x");
  const ParsedFeature& y = batch.features.at("y");
  EXPECT_EQ(x.shape, (std::vector<int64_t>{batch.size, 1}));
  EXPECT_EQ(y.shape, (std::vector<int64_t>{batch.size, 2}));
  EXPECT_EQ(x.bytes.size(), static_cast<std::size_t>(batch.size) * sizeof(int64_t));
  EXPECT_EQ(y.bytes.size(), static_cast<std::size_t>(batch.size) * 2 * sizeof(float));
  EXPECT_EQ(batch.ids.size(), static_cast<std::size_t>(batch.size));
  std::vector<int64_t> values(static_cast<std::size_t>(batch.size));
  std::memcpy(values.data(), x.bytes.data(), values.size() * sizeof(int64_t));
  std::vector<float> ys(values.size() * 2);
  std::memcpy(ys.data(), y.bytes.data(), ys.size() * sizeof(float));
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(batch.ids[i], std::to_string(values[i]));
    EXPECT_EQ(ys[2 * i], static_cast<float>(values[i]));
    EXPECT_EQ(ys[2 * i + 1], -static_cast<float>(values[i]));
  }
  return values;
}

// Every value until the end of input, with the batch sizes seen.
std::vector<int64_t> drain(InputPipeline& pipeline, std::vector<int64_t>* sizes = nullptr) {
  std::vector<int64_t> values;
  while (std::optional<HostBatch> batch = pipeline.next()) {
    if (sizes != nullptr) sizes->push_back(batch->size);
    std::vector<int64_t> v = batch_values(*batch);
    values.insert(values.end(), v.begin(), v.end());
  }
  return values;
}

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int64_t> repeat(const std::vector<int64_t>& v, int times) {
  std::vector<int64_t> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), v.begin(), v.end());
  return out;
}

// Runs `fn` on another thread; aborts the test binary if it has not returned within `limit`.
void run_with_timeout(const std::function<void()>& fn, std::chrono::seconds limit) {
  std::packaged_task<void()> task(fn);
  std::future<void> done = task.get_future();
  std::thread thread(std::move(task));
  if (done.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "timed out after %lld s: the pipeline did not shut down\n",
                 static_cast<long long>(limit.count()));
    std::abort();
  }
  thread.join();
  done.get();
}

void flip_byte(const std::string& path, std::streamoff offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x5a));
}

// Records "100".."109": 3 bytes of data, 8 + 4 + 3 + 4 = 19 bytes per record on disk.
constexpr std::streamoff kRecordBytes = 19;
std::vector<std::string> ten_records() {
  std::vector<std::string> r;
  for (int i = 0; i < 10; ++i) r.push_back(std::to_string(100 + i));
  return r;
}

TEST_F(InputPipelineTest, ExpandFilePatternsTakesCommaListsAndGlobsSortedWithoutDuplicates) {
  write("b.tfrecord", {"1"});
  write("a.tfrecord", {"1"});
  write("c.txt", {"1"});
  std::filesystem::create_directories(dir_ / "d.tfrecord");  // a directory is not a file
  EXPECT_EQ(expand_file_patterns(path("b.tfrecord") + "," + path("*.tfrecord")),
            (std::vector<std::string>{path("a.tfrecord"), path("b.tfrecord")}));
  EXPECT_EQ(expand_file_patterns(path("c.txt") + ", " + path("a*")),
            (std::vector<std::string>{path("a.tfrecord"), path("c.txt")}));
}

TEST_F(InputPipelineTest, ExpandFilePatternsThrowsNotFoundNamingThePatternThatMatchesNothing) {
  write("a.tfrecord", {"1"});
  const std::string missing = path("missing-*.tfrecord");
  try {
    expand_file_patterns(path("a.tfrecord") + "," + missing);
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_THAT(e.what(), HasSubstr("no file matches pattern '" + missing + "'"));
  }
  IntReader reader;
  InputOptions o;
  o.data_pattern = missing;
  EXPECT_THROW(InputPipeline(reader, o).next(), NotFound);
}

TEST_F(InputPipelineTest, BadOptionsThrowInvalidArgument) {
  write_parts({3});
  IntReader reader;
  InputOptions o = options(0, 1);
  EXPECT_THROW(InputPipeline(reader, o).next(), InvalidArgument);
  o = options(4, 0);
  EXPECT_THROW(InputPipeline(reader, o).next(), InvalidArgument);
  o = options(4, 1);
  o.num_epochs = -1;
  EXPECT_THROW(InputPipeline(reader, o).next(), InvalidArgument);
}

TEST_F(InputPipelineTest, DeliversEveryRecordExactlyOnceInOneEpochWithSeveralReaders) {
  const std::vector<int64_t> values = write_parts({37, 0, 64, 5, 100, 1});
  IntReader reader;
  InputOptions o = options(16, 3);
  InputPipeline pipeline(reader, o);
  EXPECT_EQ(sorted(drain(pipeline)), sorted(values));
  EXPECT_FALSE(pipeline.next().has_value());
  InputStats stats = pipeline.stats();
  EXPECT_EQ(stats.records, static_cast<int64_t>(values.size()));
  EXPECT_EQ(stats.files_opened, 6);
  EXPECT_EQ(stats.epochs_completed, 1);
  EXPECT_EQ(stats.corrupt_skipped, 0);
}

TEST_F(InputPipelineTest, DeliversEveryRecordExactlyThreeTimesInThreeEpochs) {
  const std::vector<int64_t> values = write_parts({37, 0, 64, 5, 100, 1});
  IntReader reader;
  for (bool deterministic : {false, true}) {
    InputOptions o = options(16, 4);
    o.num_epochs = 3;
    o.deterministic = deterministic;
    InputPipeline pipeline(reader, o);
    EXPECT_EQ(sorted(drain(pipeline)), sorted(repeat(values, 3))) << deterministic;
    EXPECT_EQ(pipeline.stats().files_opened, 18);
    EXPECT_EQ(pipeline.stats().epochs_completed, 3);
  }
}

TEST_F(InputPipelineTest, LastBatchIsSmallerWhenAllowed) {
  write_parts({50});
  IntReader reader;
  InputOptions o = options(16, 1);
  InputPipeline pipeline(reader, o);
  std::vector<int64_t> sizes;
  EXPECT_EQ(drain(pipeline, &sizes).size(), 50u);
  EXPECT_EQ(sizes, (std::vector<int64_t>{16, 16, 16, 2}));
  EXPECT_FALSE(pipeline.next().has_value());
}

TEST_F(InputPipelineTest, SmallerLastBatchIsDroppedWhenNotAllowed) {
  write_parts({20, 30});
  IntReader reader;
  InputOptions o = options(16, 2);
  o.allow_smaller_final_batch = false;
  InputPipeline pipeline(reader, o);
  std::vector<int64_t> sizes;
  EXPECT_EQ(drain(pipeline, &sizes).size(), 48u);
  EXPECT_EQ(sizes, (std::vector<int64_t>{16, 16, 16}));
  EXPECT_EQ(pipeline.stats().records, 48);
}

TEST_F(InputPipelineTest, ShufflePermutesTheRecords) {
  const std::vector<int64_t> values = write_parts({200});
  IntReader reader;
  InputOptions o = options(10, 1);
  InputPipeline pipeline(reader, o);
  std::vector<int64_t> got = drain(pipeline);
  EXPECT_NE(got, values);
  EXPECT_EQ(sorted(got), values);
}

TEST_F(InputPipelineTest, WithoutShuffleOneReaderKeepsFileAndRecordOrder) {
  const std::vector<int64_t> values = write_parts({7, 0, 12, 3});
  IntReader reader;
  InputOptions o = options(5, 1);
  o.shuffle = false;
  o.num_epochs = 2;
  InputPipeline pipeline(reader, o);
  EXPECT_EQ(drain(pipeline), repeat(values, 2));
}

TEST_F(InputPipelineTest, RecycledBatchesAreReusedAndStillHoldTheRightValues) {
  const std::vector<int64_t> values = write_parts({40, 40});
  IntReader reader;
  InputOptions o = options(8, 1);
  o.shuffle = false;
  o.prefetch_batches = 1;
  InputPipeline pipeline(reader, o);
  std::vector<int64_t> seen;
  std::set<const std::byte*> buffers;
  int batches = 0;
  while (std::optional<HostBatch> batch = pipeline.next()) {
    std::vector<int64_t> v = batch_values(*batch);
    seen.insert(seen.end(), v.begin(), v.end());
    buffers.insert(batch->features.at("x").bytes.data());
    ++batches;
    pipeline.recycle(std::move(*batch));
  }
  EXPECT_EQ(seen, values);
  EXPECT_EQ(batches, 10);
  // With one batch in flight, one being filled and one handed back, a few buffers serve all.
  EXPECT_LE(buffers.size(), 4u) << "recycled batch buffers were not reused";
}

TEST_F(InputPipelineTest, DeterministicOrderDependsOnlyOnTheSeed) {
  write_parts({40, 3, 25, 60, 0, 17});
  IntReader reader;
  auto run = [&](uint64_t seed) {
    InputOptions o = options(8, 4);
    o.num_epochs = 2;
    o.deterministic = true;
    o.seed = seed;
    o.prefetch_batches = 1;
    InputPipeline pipeline(reader, o);
    return drain(pipeline);
  };
  const std::vector<int64_t> first = run(7);
  EXPECT_EQ(first.size(), 2u * 145u);
  EXPECT_EQ(run(7), first);
  EXPECT_EQ(run(7), first);
  const std::vector<int64_t> other = run(8);
  EXPECT_NE(other, first);
  EXPECT_EQ(sorted(other), sorted(first));
}

TEST_F(InputPipelineTest, ReadsGzipFiles) {
  write("z.tfrecord.gz", {"1", "2", "3"}, Compression::kGzip);
  IntReader reader;
  InputOptions o = options(2, 1);
  o.data_pattern = path("z.tfrecord.gz");
  InputPipeline pipeline(reader, o);
  EXPECT_EQ(sorted(drain(pipeline)), (std::vector<int64_t>{1, 2, 3}));
}

TEST_F(InputPipelineTest, ZeroEpochsKeepsGoingPastSeveralEpochsUntilDestroyed) {
  const std::vector<int64_t> values = write_parts({10, 10});
  IntReader reader;
  run_with_timeout(
      [&] {
        InputOptions o = options(7, 2);
        o.num_epochs = 0;
        InputPipeline pipeline(reader, o);
        std::vector<int64_t> got;
        for (int i = 0; i < 20; ++i) {
          std::optional<HostBatch> batch = pipeline.next();
          ASSERT_TRUE(batch.has_value());
          ASSERT_EQ(batch->size, 7);
          std::vector<int64_t> v = batch_values(*batch);
          got.insert(got.end(), v.begin(), v.end());
        }
        EXPECT_GE(pipeline.stats().epochs_completed, 6);  // 140 records of 20 per epoch
        for (int64_t v : values) EXPECT_GE(std::count(got.begin(), got.end(), v), 2) << v;
      },
      std::chrono::seconds(10));
}

TEST_F(InputPipelineTest, DestroyingWithFullQueuesDoesNotHang) {
  write_parts({500, 500, 500, 500});
  IntReader reader;
  for (bool deterministic : {false, true}) {
    for (int consumed : {0, 1}) {
      run_with_timeout(
          [&] {
            InputOptions o = options(4, 4);
            o.num_epochs = 0;
            o.prefetch_batches = 1;
            o.deterministic = deterministic;
            InputPipeline pipeline(reader, o);
            for (int i = 0; i < consumed; ++i) ASSERT_TRUE(pipeline.next().has_value());
            std::this_thread::sleep_for(std::chrono::milliseconds(30));  // queues fill up
          },
          std::chrono::seconds(10));
    }
  }
  run_with_timeout([&] { InputPipeline pipeline(reader, options(4, 8)); },
                   std::chrono::seconds(10));
}

TEST_F(InputPipelineTest, CorruptRecordThrowsDataLossNamingFileAndOffset) {
  const std::string file = write("bad.tfrecord", ten_records());
  flip_byte(file, 5 * kRecordBytes + 12 + 1);  // data of record 5
  IntReader reader;
  InputOptions o = options(4, 1);
  o.data_pattern = file;
  o.shuffle = false;
  InputPipeline pipeline(reader, o);
  std::optional<HostBatch> batch = pipeline.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch_values(*batch), (std::vector<int64_t>{100, 101, 102, 103}));
  for (int attempt = 0; attempt < 2; ++attempt) {  // and again on the next call
    try {
      pipeline.next();
      FAIL() << "expected DataLoss";
    } catch (const DataLoss& e) {
      EXPECT_THAT(e.what(), HasSubstr(file));
      EXPECT_THAT(e.what(), HasSubstr("offset " + std::to_string(5 * kRecordBytes)));
    }
  }
}

TEST_F(InputPipelineTest, SkipCorruptRecordsContinuesAndCountsThem) {
  const std::string bad_data = write("part-0.tfrecord", ten_records());
  flip_byte(bad_data, 5 * kRecordBytes + 12 + 1);  // data CRC of record 5: only it is lost
  const std::string bad_length = write("part-1.tfrecord", ten_records());
  flip_byte(bad_length, 3 * kRecordBytes + 2);  // length of record 3: the rest is lost
  const std::string truncated = write("part-2.tfrecord", ten_records());
  std::filesystem::resize_file(truncated, 8 * kRecordBytes + 10);  // inside record 8
  IntReader reader;
  InputOptions o = options(4, 2);
  o.skip_corrupt_records = true;
  InputPipeline pipeline(reader, o);
  std::vector<int64_t> expected;
  for (int i = 0; i < 10; ++i) {
    if (i != 5) expected.push_back(100 + i);
    if (i < 3) expected.push_back(100 + i);
    if (i < 8) expected.push_back(100 + i);
  }
  EXPECT_EQ(sorted(drain(pipeline)), sorted(expected));
  EXPECT_EQ(pipeline.stats().corrupt_skipped, 3);
  EXPECT_EQ(pipeline.stats().records, static_cast<int64_t>(expected.size()));
}

TEST_F(InputPipelineTest, ReaderErrorIsRethrownWithItsMessage) {
  write_parts({0, 30});
  const std::string file = write("part-0.tfrecord", {"1", "2", "oops", "4"});
  IntReader reader;
  for (bool skip : {false, true}) {  // skipping covers only corrupt records
    InputOptions o = options(4, 2);
    o.skip_corrupt_records = skip;
    InputPipeline pipeline(reader, o);
    try {
      drain(pipeline);
      FAIL() << "expected InvalidArgument";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()),
                file + ", record 2: key 'x' expects a decimal integer, found 'oops'");
    }
  }
}

TEST_F(InputPipelineTest, FeatureWithAnotherShapeThanDeclaredIsAnErrorNamingBoth) {
  const std::string file = write("part-0.tfrecord", {"1", "2", "3", "7", "5"});
  IntReader reader(/*wrong_shape_value=*/7);
  InputOptions o = options(2, 1);
  InputPipeline pipeline(reader, o);
  try {
    drain(pipeline);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("feature 'x'"));
    EXPECT_THAT(e.what(), HasSubstr(file + ", record 3"));
    EXPECT_THAT(e.what(), HasSubstr("[2]"));
    EXPECT_THAT(e.what(), HasSubstr("[1]"));
  }
}

TEST_F(InputPipelineTest, VaryingDimensionIsBatchedWhenEqualWithinTheBatchAndRejectedOtherwise) {
  const std::string file = write("part-0.tfrecord", {"2", "2", "3", "3", "3", "2"});
  VaryingReader reader;
  InputOptions o = options(2, 1);
  o.shuffle = false;
  InputPipeline pipeline(reader, o);
  for (int n : {2, 3}) {
    std::optional<HostBatch> batch = pipeline.next();
    ASSERT_TRUE(batch.has_value());
    const ParsedFeature& v = batch->features.at("v");
    EXPECT_EQ(v.shape, (std::vector<int64_t>{2, n}));
    EXPECT_EQ(v.bytes, std::vector<std::byte>(2u * n, static_cast<std::byte>(n)));
  }
  try {
    pipeline.next();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("feature 'v' of " + file + ", record 5 has shape [2]"));
    EXPECT_THAT(e.what(), HasSubstr("[3]"));
    EXPECT_THAT(e.what(), HasSubstr("[-1]"));
  }
}

// tf.data's padded_batch for images of their own sizes (the Object Detection API's batches with
// keep_aspect_ratio_resizer): each image at the top left of the batch's largest height and
// width, zeros around it, its own size kept in another feature; the smaller final batch is
// padded to its own largest, and a recycled batch's old pixels do not leak into the padding.
TEST_F(InputPipelineTest, PadToLargestZeroPadsImagesToTheLargestOfTheirBatch) {
  write("part-0.tfrecord",
        {"2x3/1", "4x1/2", "3x2/3", "5x5/4", "1x1/5", "2x2/6", "1x2/7", "2x1/8"});
  ImageReader reader;
  InputOptions o = options(3, 1);
  o.shuffle = false;
  o.prefetch_batches = 1;
  o.pad_to_largest = {"image"};
  InputPipeline pipeline(reader, o);
  const std::vector<std::vector<std::array<int, 3>>> expected = {
      {{2, 3, 1}, {4, 1, 2}, {3, 2, 3}}, {{5, 5, 4}, {1, 1, 5}, {2, 2, 6}}, {{1, 2, 7}, {2, 1, 8}}};
  const std::vector<std::vector<int64_t>> shapes = {{3, 4, 3, 2}, {3, 5, 5, 2}, {2, 2, 2, 2}};
  for (std::size_t b = 0; b < expected.size(); ++b) {
    std::optional<HostBatch> batch = pipeline.next();
    ASSERT_TRUE(batch.has_value()) << "batch " << b;
    const ParsedFeature& image = batch->features.at("image");
    EXPECT_EQ(image.shape, shapes[b]) << "batch " << b;
    ASSERT_EQ(image.bytes.size(),
              static_cast<std::size_t>(shapes[b][0] * shapes[b][1] * shapes[b][2] * shapes[b][3]));
    std::vector<int32_t> sizes(static_cast<std::size_t>(batch->size) * 2);
    std::memcpy(sizes.data(), batch->features.at("size").bytes.data(), sizes.size() * 4);
    for (std::size_t r = 0; r < expected[b].size(); ++r) {
      const auto [h, w, tag] = expected[b][r];
      EXPECT_EQ(sizes[2 * r], h);
      EXPECT_EQ(sizes[2 * r + 1], w);
      expect_padded_image(image, static_cast<int64_t>(r), h, w, tag);
    }
    pipeline.recycle(std::move(*batch));
  }
  EXPECT_FALSE(pipeline.next().has_value());
}

// A batch whose padding would multiply its largest record more than kMaxPaddingGrowth times (a
// 1 x 40 and a 40 x 1 image: 1,600 elements for 40) is refused, naming the feature and both
// records, instead of allocating it.
TEST_F(InputPipelineTest, PadToLargestRefusesABatchThatPaddingWouldBlowUp) {
  const std::string file = write("part-0.tfrecord", {"1x40", "40x1"});
  ImageReader reader;
  InputOptions o = options(2, 1);
  o.shuffle = false;
  o.pad_to_largest = {"image"};
  InputPipeline pipeline(reader, o);
  try {
    pipeline.next();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("feature 'image'"));
    EXPECT_THAT(e.what(), HasSubstr("[40, 40, 2]"));
    EXPECT_THAT(e.what(), HasSubstr(file + ", record 0 [1, 40, 2]"));
    EXPECT_THAT(e.what(), HasSubstr(file + ", record 1 [40, 1, 2]"));
  }
}

// pad_to_largest names a declared feature with a -1 dimension that is not also in `padding`.
TEST_F(InputPipelineTest, PadToLargestOptionsAreChecked) {
  write("part-0.tfrecord", {"2x2"});
  ImageReader reader;
  auto message = [&](std::set<std::string> names, bool also_padded) {
    InputOptions o = options(1, 1);
    o.pad_to_largest = std::move(names);
    if (also_padded) o.padding["image"].pad_to = 4;
    try {
      InputPipeline pipeline(reader, o);
      pipeline.next();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message({"images"}, false), HasSubstr("no feature 'images'"));
  EXPECT_THAT(message({"size"}, false), HasSubstr("no dimension (-1) to pad"));
}

// Instance masks of images of their own sizes (the Object Detection API's
// groundtruth_instance_masks with keep_aspect_ratio_resizer): `padding` pads (and truncates)
// their first dimension to pad_to, as the boxes', and pad_to_largest their height and width to
// the batch's largest; each plane at its top left, zeros around, padded planes all zero; the
// count feature counts the real planes.
TEST_F(InputPipelineTest, PaddingAndPadToLargestTogetherPadMasksRowsAndPlanes) {
  write("part-0.tfrecord", {"2x3x4", "4x2x5", "0x4x1", "1x1x1"});
  MaskReader reader;
  InputOptions o = options(3, 1);
  o.shuffle = false;
  o.prefetch_batches = 1;
  o.padding["masks"].pad_to = 3;
  o.padding["masks"].truncate = true;
  o.padding["masks"].count_feature = "num_masks";
  o.padding["classes"].pad_to = 3;
  o.padding["classes"].truncate = true;
  o.pad_to_largest = {"masks"};
  InputPipeline pipeline(reader, o);
  const std::vector<std::vector<std::array<int64_t, 3>>> expected = {
      {{2, 3, 4}, {3, 2, 5}, {0, 4, 1}}, {{1, 1, 1}}};  // record 1's 4 masks cut to 3
  const std::vector<std::vector<int64_t>> shapes = {{3, 3, 4, 5}, {1, 3, 1, 1}};
  for (std::size_t b = 0; b < expected.size(); ++b) {
    std::optional<HostBatch> batch = pipeline.next();
    ASSERT_TRUE(batch.has_value()) << "batch " << b;
    const ParsedFeature& masks = batch->features.at("masks");
    ASSERT_EQ(masks.shape, shapes[b]) << "batch " << b;
    const int64_t H = shapes[b][2], W = shapes[b][3];
    ASSERT_EQ(masks.bytes.size(), static_cast<std::size_t>(shapes[b][0] * 3 * H * W));
    std::vector<int32_t> counts(static_cast<std::size_t>(batch->size));
    std::memcpy(counts.data(), batch->features.at("num_masks").bytes.data(), counts.size() * 4);
    EXPECT_EQ(batch->features.at("classes").shape, (std::vector<int64_t>{shapes[b][0], 3}));
    for (std::size_t r = 0; r < expected[b].size(); ++r) {
      const auto [n, h, w] = expected[b][r];
      EXPECT_EQ(counts[r], n) << "batch " << b << " row " << r;
      for (int64_t k = 0; k < 3; ++k) {
        for (int64_t y = 0; y < H; ++y) {
          for (int64_t x = 0; x < W; ++x) {
            const auto got = static_cast<int>(masks.bytes[static_cast<std::size_t>(
                (((static_cast<int64_t>(r) * 3 + k) * H + y) * W + x))]);
            const int want = k < n && y < h && x < w ? mask_value(k, y, x) : 0;
            ASSERT_EQ(got, want) << "batch " << b << " row " << r << " mask " << k << " y " << y
                                 << " x " << x;
          }
        }
      }
    }
    pipeline.recycle(std::move(*batch));
  }
  EXPECT_FALSE(pipeline.next().has_value());
}

// A feature in both `padding` and pad_to_largest needs a -1 after its first dimension and pads
// with zeros only.
TEST_F(InputPipelineTest, PaddingWithPadToLargestOptionsAreChecked) {
  write("part-0.tfrecord", {"1x2x2"});
  MaskReader reader;
  auto message = [&](const std::string& name, double pad_value) {
    InputOptions o = options(1, 1);
    o.pad_to_largest = {name};
    o.padding[name].pad_to = 4;
    o.padding[name].pad_value = pad_value;
    try {
      InputPipeline pipeline(reader, o);
      pipeline.next();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message("classes", 0.0), HasSubstr("also in InputOptions.padding"));
  EXPECT_THAT(message("masks", 1.0), HasSubstr("pads with zeros only"));
  EXPECT_EQ(message("masks", 0.0), "no error");
}

}  // namespace
}  // namespace trainyard
