// The input pipeline's per-example transforms and padding of variable-length features, with a
// detection-like Reader defined here: each record is a decimal integer v, parsed into
//   "image"               u8  [2, 4, 3]: pixel (y, x, c) = v + 50 y + 10 x + c (mod 256)
//   "groundtruth_boxes"   f32 [n, 4] with n = v % 4: box i = [0.1 i, 0.05 i + 0.1,
//                                                              0.1 i + 0.2, 0.05 i + 0.3]
//   "groundtruth_classes" i64 [n]: v * 10 + i
// and id "v".
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/core/config.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/example_transforms.h"

namespace trainyard {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kHeight = 2, kWidth = 4, kChannels = 3;

template <class T>
std::vector<T> values_of(const ParsedFeature& f) {
  std::vector<T> out(f.bytes.size() / sizeof(T));
  std::memcpy(out.data(), f.bytes.data(), f.bytes.size());
  return out;
}

template <class T>
ParsedFeature feature_of(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  ParsedFeature f;
  f.dtype = dtype;
  f.shape = std::move(shape);
  f.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(f.bytes.data(), values.data(), f.bytes.size());
  return f;
}

uint8_t pixel(int64_t v, int64_t y, int64_t x, int64_t c) {
  return static_cast<uint8_t>((v + 50 * y + 10 * x + c) % 256);
}

std::vector<float> box(int64_t i) {
  const auto f = static_cast<float>(i);
  return {0.1f * f, 0.05f * f + 0.1f, 0.1f * f + 0.2f, 0.05f * f + 0.3f};
}

class DetectionReader : public Reader {
 public:
  std::vector<FeatureSpec> features() const override {
    return {{"image", DType::kU8, {kHeight, kWidth, kChannels}},
            {"groundtruth_boxes", DType::kF32, {-1, 4}},
            {"groundtruth_classes", DType::kI64, {-1}}};
  }
  ParsedRecord parse(std::string_view record, const RecordLocation&) const override {
    const int64_t v = std::stoll(std::string(record));
    const int64_t n = v % 4;
    ParsedRecord out;
    out.id = std::string(record);
    std::vector<uint8_t> image;
    for (int64_t y = 0; y < kHeight; ++y) {
      for (int64_t x = 0; x < kWidth; ++x) {
        for (int64_t c = 0; c < kChannels; ++c) image.push_back(pixel(v, y, x, c));
      }
    }
    out.features["image"] = feature_of(DType::kU8, {kHeight, kWidth, kChannels}, image);
    std::vector<float> boxes;
    std::vector<int64_t> classes;
    for (int64_t i = 0; i < n; ++i) {
      for (float b : box(i)) boxes.push_back(b);
      classes.push_back(v * 10 + i);
    }
    out.features["groundtruth_boxes"] = feature_of(DType::kF32, {n, 4}, boxes);
    out.features["groundtruth_classes"] = feature_of(DType::kI64, {n}, classes);
    return out;
  }
};

class InputTransformTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = std::filesystem::temp_directory_path() /
           ("trainyard_input_transform_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Files "part-F.tfrecord", each with `per_file` records valued F * 100 + i.
  void write_parts(int files, int per_file) {
    for (int f = 0; f < files; ++f) {
      TFRecordWriter writer((dir_ / ("part-" + std::to_string(f) + ".tfrecord")).string(),
                            Compression::kNone);
      for (int i = 0; i < per_file; ++i) writer.write(std::to_string(f * 100 + i));
      writer.close();
    }
  }
  std::string file(int f) const {
    return (dir_ / ("part-" + std::to_string(f) + ".tfrecord")).string();
  }

  InputOptions options(int64_t batch_size, int num_readers) const {
    InputOptions o;
    o.data_pattern = (dir_ / "part-*.tfrecord").string();
    o.batch_size = batch_size;
    o.num_readers = num_readers;
    return o;
  }

  static void pad_boxes_and_classes(InputOptions& o, int64_t pad_to) {
    FeaturePadding boxes;
    boxes.pad_to = pad_to;
    boxes.pad_value = -1.0;
    boxes.count_feature = "num_groundtruth_boxes";
    boxes.mask_feature = "groundtruth_boxes_mask";
    o.padding["groundtruth_boxes"] = boxes;
    FeaturePadding classes;
    classes.pad_to = pad_to;
    classes.pad_value = 0;
    o.padding["groundtruth_classes"] = classes;
  }

  std::filesystem::path dir_;
};

// Every batch until the end, in order.
std::vector<HostBatch> drain(InputPipeline& pipeline) {
  std::vector<HostBatch> out;
  while (std::optional<HostBatch> b = pipeline.next()) out.push_back(std::move(*b));
  return out;
}

// Each record's features by id, from padded batches.
std::map<std::string, std::map<std::string, std::vector<std::byte>>> rows_by_id(
    const std::vector<HostBatch>& batches) {
  std::map<std::string, std::map<std::string, std::vector<std::byte>>> out;
  for (const HostBatch& b : batches) {
    for (const auto& [name, f] : b.features) {
      const std::size_t row = f.bytes.size() / static_cast<std::size_t>(b.size);
      for (int64_t i = 0; i < b.size; ++i) {
        const std::byte* at = f.bytes.data() + static_cast<std::size_t>(i) * row;
        out[b.ids[static_cast<std::size_t>(i)]][name].assign(at, at + row);
      }
    }
  }
  return out;
}

TEST_F(InputTransformTest, PaddingGivesFixedShapesPerFeatureWithCountsAndMasks) {
  write_parts(1, 8);  // n = 0, 1, 2, 3, 0, 1, 2, 3 boxes
  DetectionReader reader;
  InputOptions o = options(4, 1);
  o.shuffle = false;
  pad_boxes_and_classes(o, 3);
  InputPipeline pipeline(reader, o);
  std::vector<HostBatch> batches = drain(pipeline);
  ASSERT_EQ(batches.size(), 2u);
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const HostBatch& batch = batches[b];
    ASSERT_EQ(batch.size, 4);
    EXPECT_EQ(batch.features.at("image").shape, (std::vector<int64_t>{4, 2, 4, 3}));
    EXPECT_EQ(batch.features.at("groundtruth_boxes").shape, (std::vector<int64_t>{4, 3, 4}));
    EXPECT_EQ(batch.features.at("groundtruth_classes").shape, (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(batch.features.at("num_groundtruth_boxes").shape, (std::vector<int64_t>{4}));
    EXPECT_EQ(batch.features.at("num_groundtruth_boxes").dtype, DType::kI32);
    EXPECT_EQ(batch.features.at("groundtruth_boxes_mask").shape, (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(batch.features.count("groundtruth_classes_mask"), 0u);
    const auto boxes = values_of<float>(batch.features.at("groundtruth_boxes"));
    const auto classes = values_of<int64_t>(batch.features.at("groundtruth_classes"));
    const auto counts = values_of<int32_t>(batch.features.at("num_groundtruth_boxes"));
    const auto mask = values_of<float>(batch.features.at("groundtruth_boxes_mask"));
    const auto image = values_of<uint8_t>(batch.features.at("image"));
    for (int64_t r = 0; r < 4; ++r) {
      const int64_t v = static_cast<int64_t>(b) * 4 + r;
      const int64_t n = v % 4;
      EXPECT_EQ(batch.ids[static_cast<std::size_t>(r)], std::to_string(v));
      EXPECT_EQ(counts[static_cast<std::size_t>(r)], std::min<int64_t>(n, 3));
      EXPECT_EQ(image[static_cast<std::size_t>(r * 24 + 23)], pixel(v, 1, 3, 2));
      for (int64_t i = 0; i < 3; ++i) {
        const auto at = static_cast<std::size_t>(r * 3 + i);
        const bool real = i < n;
        EXPECT_EQ(mask[at], real ? 1.0f : 0.0f) << "record " << v << " box " << i;
        EXPECT_EQ(classes[at], real ? v * 10 + i : 0) << "record " << v << " box " << i;
        const std::vector<float> want = real ? box(i) : std::vector<float>(4, -1.0f);
        EXPECT_EQ(std::vector<float>(boxes.begin() + static_cast<std::ptrdiff_t>(at * 4),
                                     boxes.begin() + static_cast<std::ptrdiff_t>(at * 4 + 4)),
                  want)
            << "record " << v << " box " << i;
      }
    }
  }
}

TEST_F(InputTransformTest, RecycledBatchesArePaddedAfreshWithI64Counts) {
  write_parts(2, 12);
  DetectionReader reader;
  InputOptions o = options(5, 2);
  o.deterministic = true;
  o.seed = 3;
  pad_boxes_and_classes(o, 4);
  o.padding["groundtruth_boxes"].count_dtype = DType::kI64;
  std::vector<HostBatch> fresh;
  {
    InputPipeline pipeline(reader, o);
    fresh = drain(pipeline);
  }
  InputPipeline pipeline(reader, o);
  std::vector<HostBatch> recycled;
  while (std::optional<HostBatch> b = pipeline.next()) {
    recycled.push_back(*b);
    pipeline.recycle(std::move(*b));
  }
  ASSERT_EQ(recycled.size(), fresh.size());
  for (std::size_t b = 0; b < fresh.size(); ++b) {
    EXPECT_EQ(recycled[b].ids, fresh[b].ids);
    for (const auto& [name, f] : fresh[b].features) {
      EXPECT_EQ(recycled[b].features.at(name).shape, f.shape) << name;
      EXPECT_EQ(recycled[b].features.at(name).bytes, f.bytes) << name << " of batch " << b;
    }
  }
  EXPECT_EQ(fresh.back().size, 4);  // 24 records in batches of 5
  EXPECT_EQ(fresh.back().features.at("num_groundtruth_boxes").dtype, DType::kI64);
  EXPECT_EQ(fresh.back().features.at("num_groundtruth_boxes").shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(fresh.back().features.at("groundtruth_boxes_mask").shape, (std::vector<int64_t>{4, 4}));
}

TEST_F(InputTransformTest, RecordLongerThanPadToIsAnErrorNamingFileRecordFeatureAndSizes) {
  write_parts(1, 4);  // record 3 has 3 boxes
  DetectionReader reader;
  InputOptions o = options(2, 1);
  o.shuffle = false;
  pad_boxes_and_classes(o, 2);
  InputPipeline pipeline(reader, o);
  ASSERT_TRUE(pipeline.next().has_value());  // records 0 and 1
  try {
    pipeline.next();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("of " + file(0) + ", record 3 has 3 rows (shape [3"));
    EXPECT_THAT(e.what(), HasSubstr("feature 'groundtruth_"));
    EXPECT_THAT(e.what(), HasSubstr("pad_to is 2"));
    EXPECT_THAT(e.what(), HasSubstr("truncate"));
  }
}

TEST_F(InputTransformTest, TruncateKeepsTheFirstPadToRowsAndCountsTheCutFeatures) {
  write_parts(1, 4);
  DetectionReader reader;
  InputOptions o = options(4, 1);
  o.shuffle = false;
  pad_boxes_and_classes(o, 2);
  o.padding["groundtruth_boxes"].truncate = true;
  o.padding["groundtruth_classes"].truncate = true;
  InputPipeline pipeline(reader, o);
  std::optional<HostBatch> batch = pipeline.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(values_of<int32_t>(batch->features.at("num_groundtruth_boxes")),
            (std::vector<int32_t>{0, 1, 2, 2}));
  EXPECT_EQ(values_of<int64_t>(batch->features.at("groundtruth_classes")),
            (std::vector<int64_t>{0, 0, 10, 0, 20, 21, 30, 31}));
  EXPECT_FALSE(pipeline.next().has_value());
  EXPECT_EQ(pipeline.stats().truncated, 2);  // record 3's boxes and classes
}

TEST_F(InputTransformTest, UnpaddedVaryingFeatureInABatchOfUnequalShapesStillSaysHowToPadIt) {
  write_parts(1, 4);
  DetectionReader reader;
  InputOptions o = options(2, 1);
  o.shuffle = false;
  InputPipeline pipeline(reader, o);
  try {
    pipeline.next();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("record 1 has shape [1"));
    EXPECT_THAT(e.what(), HasSubstr("InputOptions.padding"));
  }
}

TEST_F(InputTransformTest, BadPaddingOptionsAreRefusedNamingTheFeatureAndOption) {
  write_parts(1, 1);
  DetectionReader reader;
  auto error_of = [&](const std::function<void(InputOptions&)>& edit) -> std::string {
    InputOptions o = options(2, 1);
    pad_boxes_and_classes(o, 3);
    edit(o);
    try {
      InputPipeline pipeline(reader, o);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(error_of([](InputOptions& o) { o.padding["boxes"].pad_to = 3; }),
              HasSubstr("padding['boxes']: no feature 'boxes' (the features are "
                        "groundtruth_boxes, groundtruth_classes, image)"));
  EXPECT_THAT(error_of([](InputOptions& o) { o.padding["image"].pad_to = 3; }),
              HasSubstr("feature 'image' is declared with shape [2, 4, 3]; only a feature whose "
                        "first dimension is -1 can be padded"));
  EXPECT_THAT(error_of([](InputOptions& o) { o.padding["groundtruth_classes"].pad_to = 0; }),
              HasSubstr("padding['groundtruth_classes'].pad_to is 0"));
  EXPECT_THAT(error_of([](InputOptions& o) {
                o.padding["groundtruth_classes"].count_feature = "num_groundtruth_boxes";
              }),
              HasSubstr("count_feature 'num_groundtruth_boxes' is already the name of a feature"));
  EXPECT_THAT(
      error_of([](InputOptions& o) { o.padding["groundtruth_boxes"].mask_feature = "image"; }),
      HasSubstr("mask_feature 'image' is already the name of a feature"));
  EXPECT_THAT(
      error_of([](InputOptions& o) { o.padding["groundtruth_boxes"].count_dtype = DType::kF32; }),
      HasSubstr("count_dtype is f32; it must be one of i32, i64"));
  EXPECT_THAT(error_of([](InputOptions& o) { o.padding["groundtruth_classes"].pad_value = 0.5; }),
              HasSubstr("is not a value of feature 'groundtruth_classes''s dtype i64"));
}

// Each record is a decimal integer n, parsed into "h" (f16) and "b" (bf16), both [n] of 1.0.
class HalfReader : public Reader {
 public:
  std::vector<FeatureSpec> features() const override {
    return {{"b", DType::kBF16, {-1}}, {"h", DType::kF16, {-1}}};
  }
  ParsedRecord parse(std::string_view record, const RecordLocation&) const override {
    const int64_t n = std::stoll(std::string(record));
    ParsedRecord out;
    out.id = std::string(record);
    out.features["b"] = feature_of(DType::kBF16, {n}, std::vector<uint16_t>(n, 0x3f80));
    out.features["h"] = feature_of(DType::kF16, {n}, std::vector<uint16_t>(n, 0x3c00));
    return out;
  }
};

TEST_F(InputTransformTest, PadValueIsWrittenInTheFeaturesDtypeForHalfFloats) {
  TFRecordWriter writer(file(0), Compression::kNone);
  writer.write("1");
  writer.write("0");
  writer.close();
  HalfReader reader;
  InputOptions o = options(2, 1);
  o.shuffle = false;
  o.padding["b"].pad_to = 2;
  o.padding["b"].pad_value = -2.5;
  o.padding["h"].pad_to = 2;
  o.padding["h"].pad_value = -2.5;
  InputPipeline pipeline(reader, o);
  std::optional<HostBatch> batch = pipeline.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(values_of<uint16_t>(batch->features.at("b")),
            (std::vector<uint16_t>{0x3f80, 0xc020, 0xc020, 0xc020}));
  EXPECT_EQ(values_of<uint16_t>(batch->features.at("h")),
            (std::vector<uint16_t>{0x3c00, 0xc100, 0xc100, 0xc100}));
}

TEST(RandomHorizontalFlipTest, BoxesBecomeYminOneMinusXmaxYmaxOneMinusXmin) {
  std::vector<float> boxes = {0.1f, 0.2f, 0.5f, 0.6f, 0.0f, 0.0f, 1.0f, 0.25f};
  RandomHorizontalFlip::flip_boxes(boxes.data(), 2);
  EXPECT_EQ(boxes, (std::vector<float>{0.1f, 1.0f - 0.6f, 0.5f, 1.0f - 0.2f,  //
                                       0.0f, 0.75f, 1.0f, 1.0f}));
  RandomHorizontalFlip::flip_boxes(boxes.data(), 2);  // twice: back where they were
  EXPECT_FLOAT_EQ(boxes[1], 0.2f);
  EXPECT_FLOAT_EQ(boxes[3], 0.6f);
}

TEST(RandomHorizontalFlipTest, ImageColumnsAreMirroredKeepingChannelsInOrder) {
  // [1, 2, 3, 2] f32: two rows of three pixels of two channels.
  std::vector<float> image = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  RandomHorizontalFlip::flip_image(reinterpret_cast<std::byte*>(image.data()), {1, 2, 3, 2},
                                   sizeof(float));
  EXPECT_EQ(image, (std::vector<float>{5, 6, 3, 4, 1, 2, 11, 12, 9, 10, 7, 8}));
  std::vector<uint8_t> even = {1, 2, 3, 4};  // [1, 4, 1] u8
  RandomHorizontalFlip::flip_image(reinterpret_cast<std::byte*>(even.data()), {1, 4, 1}, 1);
  EXPECT_EQ(even, (std::vector<uint8_t>{4, 3, 2, 1}));
}

TEST(RandomHorizontalFlipTest, RefusesFeaturesItCannotFlip) {
  RandomHorizontalFlip flip({});
  EXPECT_THAT(
      [&] {
        flip.features({{"image", DType::kU8, {4, 3}}});
      },
      ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("image feature 'image' has rank 2")));
  EXPECT_THAT(
      [&] {
        flip.features({{"image", DType::kU8, {4, 4, 3}}});
      },
      ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("no boxes feature 'groundtruth_boxes'")));
  EXPECT_THAT(
      [&] {
        flip.features(
            {{"image", DType::kU8, {4, 4, 3}}, {"groundtruth_boxes", DType::kF32, {-1, 5}}});
      },
      ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("it must be f32 [num_boxes, 4]")));
  EXPECT_THROW(RandomHorizontalFlip({.probability = 1.5f}), InvalidArgument);
}

// Whether record `v`'s image and boxes in `row` are flipped (checking they agree).
bool flipped(int64_t v, const std::map<std::string, std::vector<std::byte>>& row) {
  std::vector<uint8_t> image(row.at("image").size());
  std::memcpy(image.data(), row.at("image").data(), image.size());
  const bool mirrored = image[0] == pixel(v, 0, kWidth - 1, 0);
  EXPECT_EQ(image[0], mirrored ? pixel(v, 0, kWidth - 1, 0) : pixel(v, 0, 0, 0)) << v;
  std::vector<float> boxes(row.at("groundtruth_boxes").size() / sizeof(float));
  std::memcpy(boxes.data(), row.at("groundtruth_boxes").data(), row.at("groundtruth_boxes").size());
  for (int64_t i = 0; i < v % 4; ++i) {
    std::vector<float> want = box(i);
    if (mirrored) want = {want[0], 1.0f - want[3], want[2], 1.0f - want[1]};
    EXPECT_EQ(std::vector<float>(boxes.begin() + 4 * i, boxes.begin() + 4 * i + 4), want)
        << "record " << v << " box " << i;
  }
  return mirrored;
}

TEST_F(InputTransformTest, FlipDrawsDependOnTheSeedAndRecordNotOnReaderThreads) {
  write_parts(4, 16);
  DetectionReader reader;
  auto run = [&](int readers, bool deterministic, uint64_t seed) {
    InputOptions o = options(6, readers);
    o.deterministic = deterministic;
    o.seed = seed;
    o.transforms.push_back(std::make_shared<RandomHorizontalFlip>(RandomHorizontalFlip::Options{}));
    pad_boxes_and_classes(o, 3);
    InputPipeline pipeline(reader, o);
    return rows_by_id(drain(pipeline));
  };
  const auto one = run(1, true, 11);
  ASSERT_EQ(one.size(), 64u);
  int flips = 0;
  for (const auto& [id, row] : one) flips += flipped(std::stoll(id), row) ? 1 : 0;
  EXPECT_GT(flips, 16);  // about half of 64 with probability 0.5
  EXPECT_LT(flips, 48);
  EXPECT_EQ(run(4, true, 11), one);
  EXPECT_EQ(run(3, false, 11), one);  // and regardless of thread timing
  EXPECT_NE(run(1, true, 12), one);
}

TEST_F(InputTransformTest, ResumingBySkippingBatchesGivesTheUninterruptedRunsTransformedBatches) {
  write_parts(3, 10);
  DetectionReader reader;
  InputOptions o = options(4, 2);
  o.deterministic = true;
  o.seed = 5;
  o.num_epochs = 2;
  o.transforms.push_back(std::make_shared<RandomHorizontalFlip>(RandomHorizontalFlip::Options{}));
  pad_boxes_and_classes(o, 3);
  std::vector<HostBatch> whole;
  {
    InputPipeline pipeline(reader, o);
    whole = drain(pipeline);
  }
  ASSERT_EQ(whole.size(), 15u);
  constexpr std::size_t kSkipped = 9;  // into the second epoch
  InputPipeline resumed(reader, o);
  for (std::size_t i = 0; i < kSkipped; ++i) ASSERT_TRUE(resumed.next().has_value());
  std::vector<HostBatch> rest = drain(resumed);
  ASSERT_EQ(rest.size(), whole.size() - kSkipped);
  for (std::size_t b = 0; b < rest.size(); ++b) {
    const HostBatch& want = whole[kSkipped + b];
    EXPECT_EQ(rest[b].ids, want.ids);
    for (const auto& [name, f] : want.features) {
      EXPECT_EQ(rest[b].features.at(name).bytes, f.bytes) << name << " of batch " << b;
    }
  }
  // A record's draws differ between epochs (the epoch is part of the key): not every record
  // flips the same way twice.
  std::map<std::string, std::vector<bool>> flips;
  for (const HostBatch& b : whole) {
    for (const auto& [id, row] : rows_by_id({b})) flips[id].push_back(flipped(std::stoll(id), row));
  }
  int changed = 0;
  for (const auto& [id, f] : flips) changed += f.size() == 2 && f[0] != f[1] ? 1 : 0;
  EXPECT_GT(changed, 0);
}

// Adds "area" = [n] f32 box areas, declared; with `forget` it declares it but gives none.
class BoxAreas : public ExampleTransform {
 public:
  explicit BoxAreas(bool forget) : forget_(forget) {}
  std::string name() const override { return "BoxAreas"; }
  std::vector<FeatureSpec> features(std::vector<FeatureSpec> input) const override {
    input.push_back({"area", DType::kF32, {-1}});
    return input;
  }
  void apply(ParsedRecord& record, ExampleRandom&, const RecordLocation&) const override {
    if (forget_) return;
    const auto boxes = values_of<float>(record.features.at("groundtruth_boxes"));
    std::vector<float> area;
    for (std::size_t i = 0; i + 3 < boxes.size(); i += 4) {
      area.push_back((boxes[i + 2] - boxes[i]) * (boxes[i + 3] - boxes[i + 1]));
    }
    record.features["area"] = feature_of(DType::kF32, {static_cast<int64_t>(area.size())}, area);
  }

 private:
  bool forget_;
};

TEST_F(InputTransformTest, ATransformMayAddADeclaredFeatureThatIsThenPadded) {
  write_parts(1, 4);
  DetectionReader reader;
  InputOptions o = options(4, 1);
  o.shuffle = false;
  o.transforms.push_back(std::make_shared<BoxAreas>(false));
  pad_boxes_and_classes(o, 3);
  o.padding["area"].pad_to = 3;
  InputPipeline pipeline(reader, o);
  std::optional<HostBatch> batch = pipeline.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->features.at("area").shape, (std::vector<int64_t>{4, 3}));
  const auto area = values_of<float>(batch->features.at("area"));
  EXPECT_FLOAT_EQ(area[3], 0.2f * 0.2f);  // record 1, box 0
  EXPECT_FLOAT_EQ(area[4], 0.0f);         // record 1, padding
}

TEST_F(InputTransformTest, ATransformThatBreaksItsDeclarationIsAnErrorNamingIt) {
  write_parts(1, 2);
  DetectionReader reader;
  InputOptions o = options(2, 1);
  o.transforms.push_back(std::make_shared<BoxAreas>(true));
  pad_boxes_and_classes(o, 3);
  o.padding["area"].pad_to = 3;
  InputPipeline pipeline(reader, o);
  try {
    pipeline.next();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("the transforms (last 'BoxAreas') gave no feature 'area' for " +
                                    file(0) + ", record "));
  }
}

TEST(InputConfigTest, InputReaderPaddingAndPreprocessingStepsBecomeInputOptions) {
  const config::Pipeline pipeline = parse_pipeline_config(R"(
    train_input_reader {
      data_pattern: "x-*.tfrecord"
      deterministic: true
      padding { feature: "groundtruth_boxes" pad_to: 100 pad_value: -1
                count_feature: "num_groundtruth_boxes" mask_dtype: "u8" mask_feature: "m" }
      padding { feature: "groundtruth_classes" pad_to: 100 truncate: true count_dtype: "i64" }
      preprocessing_step { random_horizontal_flip { probability: 0.25 } }
    })",
                                                          "test.config");
  const InputOptions o =
      input_options_from_config(pipeline.train_input_reader(), 8, 42, "train_input_reader");
  EXPECT_EQ(o.data_pattern, "x-*.tfrecord");
  EXPECT_EQ(o.batch_size, 8);
  EXPECT_EQ(o.seed, 42u);
  EXPECT_TRUE(o.deterministic);
  ASSERT_EQ(o.padding.size(), 2u);
  const FeaturePadding& boxes = o.padding.at("groundtruth_boxes");
  EXPECT_EQ(boxes.pad_to, 100);
  EXPECT_EQ(boxes.pad_value, -1.0);
  EXPECT_FALSE(boxes.truncate);
  EXPECT_EQ(boxes.count_feature, "num_groundtruth_boxes");
  EXPECT_EQ(boxes.count_dtype, DType::kI32);
  EXPECT_EQ(boxes.mask_feature, "m");
  EXPECT_EQ(boxes.mask_dtype, DType::kU8);
  EXPECT_TRUE(o.padding.at("groundtruth_classes").truncate);
  EXPECT_EQ(o.padding.at("groundtruth_classes").count_dtype, DType::kI64);
  ASSERT_EQ(o.transforms.size(), 1u);
  EXPECT_EQ(o.transforms[0]->name(), "RandomHorizontalFlip");
}

TEST(InputConfigTest, BadPaddingOrStepIsAConfigErrorNamingTheField) {
  auto error_of = [](const std::string& text) -> std::string {
    const config::Pipeline pipeline =
        parse_pipeline_config("eval_input_reader { " + text + " }", "test.config");
    try {
      input_options_from_config(pipeline.eval_input_reader(), 8, 0, "eval_input_reader");
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(error_of(R"(padding { feature: "a" })"),
              HasSubstr("eval_input_reader.padding[0] ('a'): 'pad_to' is missing"));
  EXPECT_THAT(error_of(R"(padding { feature: "a" pad_to: 2 count_dtype: "int" })"),
              HasSubstr("eval_input_reader.padding[0].count_dtype: 'int' is not a dtype"));
  EXPECT_THAT(error_of(R"(padding { feature: "a" pad_to: 2 } padding { feature: "a" pad_to: 3 })"),
              HasSubstr("eval_input_reader.padding[1]: feature 'a' is padded twice"));
  EXPECT_THAT(error_of(R"(preprocessing_step { random_horizontal_flip { probability: 2 } })"),
              HasSubstr("eval_input_reader.preprocessing_step[0].random_horizontal_flip: "));
}

}  // namespace
}  // namespace trainyard
