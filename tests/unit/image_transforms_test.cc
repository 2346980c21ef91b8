// ImageClassificationPreprocessing (core/src/input/image_transforms.cc): TF-Slim's
// vgg_preprocessing.preprocess_for_eval against TensorFlow (tests/golden/images/vgg_eval_*,
// written by tests/golden/make_images_golden.py), random crops and flips from the record's
// stream, the normalizations, and errors; and its pipeline config.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/core/config.h"
#include "trainyard/core/image_transforms.h"
#include "trainyard/core/input_config.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

using ::testing::HasSubstr;
using Normalization = ImageClassificationPreprocessing::Normalization;

const RecordLocation kWhere{"train-00.tfrecord", 17};

std::string read_file(const std::string& name) {
  const std::string path = std::string(TRAINYARD_SOURCE_DIR) + "/tests/golden/images/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

ParsedRecord record_with_image(DType dtype, std::vector<int64_t> shape, const void* data,
                               std::size_t bytes) {
  ParsedRecord record;
  ParsedFeature image{dtype, std::move(shape), std::vector<std::byte>(bytes)};
  std::memcpy(image.bytes.data(), data, bytes);
  record.features.emplace("image", std::move(image));
  record.features.emplace("labels", ParsedFeature{DType::kF32, {2}, std::vector<std::byte>(8)});
  return record;
}

std::vector<float> floats_of(const ParsedFeature& f) {
  std::vector<float> out(f.bytes.size() / sizeof(float));
  std::memcpy(out.data(), f.bytes.data(), f.bytes.size());
  return out;
}

// A u8 image whose pixel (y, x), channel c holds 10 y + x + 100 c: offsets can be read back.
ParsedRecord position_image(int64_t height, int64_t width, int64_t channels) {
  std::vector<uint8_t> pixels;
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      for (int64_t c = 0; c < channels; ++c) {
        pixels.push_back(static_cast<uint8_t>(10 * y + x + 100 * c));
      }
    }
  }
  return record_with_image(DType::kU8, {height, width, channels}, pixels.data(), pixels.size());
}

TEST(ImageClassificationPreprocessing, VggEvalEqualsTensorFlowSlim) {
  const std::string in = read_file("vgg_eval_in.u8");
  const std::string expected_bytes = read_file("vgg_eval_out.f32");
  std::vector<float> expected(expected_bytes.size() / sizeof(float));
  std::memcpy(expected.data(), expected_bytes.data(), expected_bytes.size());

  ImageClassificationPreprocessing t({.fixed_resize_side = 32, .default_image_size = 24});
  ParsedRecord record = record_with_image(DType::kU8, {30, 41, 3}, in.data(), in.size());
  ExampleRandom random(7);
  t.apply(record, random, kWhere);
  const ParsedFeature& image = record.features.at("image");
  EXPECT_EQ(image.dtype, DType::kF32);
  EXPECT_EQ(image.shape, (std::vector<int64_t>{24, 24, 3}));
  const std::vector<float> got = floats_of(image);
  ASSERT_EQ(got.size(), expected.size());
  float worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - expected[i]));
  EXPECT_EQ(worst, 0.0f);
}

TEST(ImageClassificationPreprocessing, DeclaresASquareF32Image) {
  ImageClassificationPreprocessing t({.default_image_size = 8});
  const std::vector<FeatureSpec> out =
      t.features({{"image", DType::kU8, {-1, -1, 3}}, {"labels", DType::kF32, {5}}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dtype, DType::kF32);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{8, 8, 3}));
  EXPECT_EQ(out[1].shape, (std::vector<int64_t>{5}));
}

TEST(ImageClassificationPreprocessing, CentralCropWithoutResize) {
  ImageClassificationPreprocessing t(
      {.fixed_resize_side = 0, .default_image_size = 2, .normalization = Normalization::kNone});
  ParsedRecord record = position_image(5, 8, 1);
  ExampleRandom random(1);
  t.apply(record, random, kWhere);
  // Offsets (5 - 2) / 2 = 1 and (8 - 2) / 2 = 3.
  EXPECT_EQ(floats_of(record.features.at("image")), (std::vector<float>{13, 14, 23, 24}));
}

// An f32 image is cropped as it is, without a resize.
TEST(ImageClassificationPreprocessing, CentralCropOfF32WithoutResize) {
  std::vector<float> pixels;
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) pixels.push_back(static_cast<float>(10 * y + x) + 0.5f);
  }
  ImageClassificationPreprocessing t(
      {.fixed_resize_side = 0, .default_image_size = 2, .normalization = Normalization::kNone});
  ParsedRecord record =
      record_with_image(DType::kF32, {4, 4, 1}, pixels.data(), pixels.size() * sizeof(float));
  ExampleRandom random(1);
  t.apply(record, random, kWhere);
  EXPECT_EQ(floats_of(record.features.at("image")),
            (std::vector<float>{11.5f, 12.5f, 21.5f, 22.5f}));
}

// The record leaves with a buffer of the crop's size: reusing the decoded image's would keep
// all of it with the record (a 28 x 28 crop of an 8000 x 8000 PNG held 192 MB in the shuffle
// buffer, and 40 such records took a training run to 24 GB).
TEST(ImageClassificationPreprocessing, TheCropDoesNotKeepTheDecodedImagesBuffer) {
  for (int64_t resize : {0, 64}) {
    ImageClassificationPreprocessing t({.fixed_resize_side = resize,
                                        .default_image_size = 28,
                                        .normalization = Normalization::kLenet});
    ParsedRecord record = position_image(300, 400, 3);
    ExampleRandom random(2);
    t.apply(record, random, kWhere);
    const ParsedFeature& image = record.features.at("image");
    EXPECT_EQ(image.bytes.size(), std::size_t{28 * 28 * 3 * 4});
    EXPECT_EQ(image.bytes.capacity(), image.bytes.size()) << "fixed_resize_side " << resize;
  }
}

TEST(ImageClassificationPreprocessing, RandomCropCoversEveryOffsetAndRepeatsPerKey) {
  ImageClassificationPreprocessing t({.fixed_resize_side = 0,
                                      .default_image_size = 4,
                                      .random_crop = true,
                                      .normalization = Normalization::kNone});
  std::set<std::pair<int, int>> offsets;
  for (uint64_t key = 0; key < 400; ++key) {
    ParsedRecord record = position_image(6, 8, 1);
    ExampleRandom random(key);
    t.apply(record, random, kWhere);
    const std::vector<float> out = floats_of(record.features.at("image"));
    const int top = static_cast<int>(out[0]) / 10, left = static_cast<int>(out[0]) % 10;
    ASSERT_LE(top, 2);
    ASSERT_LE(left, 4);
    for (int y = 0; y < 4; ++y) {
      for (int x = 0; x < 4; ++x) {
        ASSERT_EQ(out[static_cast<std::size_t>(4 * y + x)], 10 * (top + y) + left + x);
      }
    }
    offsets.emplace(top, left);
    // The same record key draws the same crop.
    ParsedRecord again = position_image(6, 8, 1);
    ExampleRandom same(key);
    t.apply(again, same, kWhere);
    ASSERT_EQ(floats_of(again.features.at("image")), out);
  }
  EXPECT_EQ(offsets.size(), 15u);  // 3 rows x 5 columns of offsets
}

TEST(ImageClassificationPreprocessing, RandomFlipMirrorsAboutHalfTheRecords) {
  ImageClassificationPreprocessing t({.fixed_resize_side = 0,
                                      .default_image_size = 3,
                                      .random_flip = true,
                                      .normalization = Normalization::kNone});
  int flipped = 0;
  for (uint64_t key = 0; key < 200; ++key) {
    ParsedRecord record = position_image(3, 3, 2);
    ExampleRandom random(key);
    t.apply(record, random, kWhere);
    const std::vector<float> out = floats_of(record.features.at("image"));
    if (out[0] == 2.0f) {
      ++flipped;
      EXPECT_EQ(out[1], 102.0f);  // channels keep their order
      EXPECT_EQ(out[4], 0.0f);
    } else {
      EXPECT_EQ(out[0], 0.0f);
    }
  }
  EXPECT_GT(flipped, 70);
  EXPECT_LT(flipped, 130);
}

TEST(ImageClassificationPreprocessing, Normalizations) {
  const uint8_t pixels[3] = {0, 128, 255};
  auto normalized = [&](Normalization n) {
    ImageClassificationPreprocessing t(
        {.fixed_resize_side = 0, .default_image_size = 1, .normalization = n});
    ParsedRecord record = record_with_image(DType::kU8, {1, 1, 3}, pixels, 3);
    ExampleRandom random(0);
    t.apply(record, random, kWhere);
    return floats_of(record.features.at("image"));
  };
  EXPECT_EQ(normalized(Normalization::kNone), (std::vector<float>{0, 128, 255}));
  EXPECT_EQ(normalized(Normalization::kVgg),
            (std::vector<float>{0 - 123.68f, 128 - 116.78f, 255 - 103.94f}));
  EXPECT_EQ(normalized(Normalization::kLenet), (std::vector<float>{-1, 0, 127.0f / 128.0f}));
  const std::vector<float> inception = normalized(Normalization::kInception);
  EXPECT_EQ(inception[0], -1.0f);
  EXPECT_NEAR(inception[1], 0.0039215, 1e-6);
  EXPECT_EQ(inception[2], 1.0f);
}

TEST(ImageClassificationPreprocessing, F32InputIsResizedToo) {
  const std::vector<float> pixels = {0, 10, 20, 30};  // 2 x 2 x 1
  ImageClassificationPreprocessing t(
      {.fixed_resize_side = 4, .default_image_size = 4, .normalization = Normalization::kNone});
  ParsedRecord record =
      record_with_image(DType::kF32, {2, 2, 1}, pixels.data(), pixels.size() * sizeof(float));
  ExampleRandom random(0);
  t.apply(record, random, kWhere);
  // resize_bilinear without half-pixel centres: rows 0, 0.5, 1, 1.5 -> clamped to row 1.
  EXPECT_EQ(floats_of(record.features.at("image")),
            (std::vector<float>{0, 5, 10, 10, 10, 15, 20, 20, 20, 25, 30, 30, 20, 25, 30, 30}));
}

TEST(ImageClassificationPreprocessing, ImageSmallerThanTheCropNamesTheRecord) {
  ImageClassificationPreprocessing t({.fixed_resize_side = 0, .default_image_size = 4});
  ParsedRecord record = position_image(3, 8, 3);
  ExampleRandom random(0);
  try {
    t.apply(record, random, kWhere);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("train-00.tfrecord, record 17: image feature 'image' is 3 x "
                                    "8, smaller than the 4 x 4 crop (default_image_size)"));
  }
  ImageClassificationPreprocessing resized({.fixed_resize_side = 3, .default_image_size = 4});
  ParsedRecord again = position_image(6, 8, 3);
  EXPECT_THROW(resized.apply(again, random, kWhere), InvalidArgument);
}

TEST(ImageClassificationPreprocessing, RefusesFeaturesAndOptionsItCannotUse) {
  ImageClassificationPreprocessing t({});
  EXPECT_THROW(t.features({{"labels", DType::kF32, {5}}}), InvalidArgument);
  EXPECT_THROW(t.features({{"image", DType::kI32, {-1, -1, 3}}}), InvalidArgument);
  EXPECT_THROW(t.features({{"image", DType::kU8, {-1, 3}}}), InvalidArgument);
  try {
    t.features({{"image", DType::kU8, {-1, -1, 1}}});
    FAIL() << "VGG normalization of a gray image was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("has 1 channels (use INCEPTION, LENET or NONE"));
  }
  EXPECT_NO_THROW(ImageClassificationPreprocessing({.normalization = Normalization::kLenet})
                      .features({{"image", DType::kU8, {-1, -1, 1}}}));
  EXPECT_THROW(ImageClassificationPreprocessing({.default_image_size = 0}), InvalidArgument);
  EXPECT_THROW(ImageClassificationPreprocessing({.fixed_resize_side = -1}), InvalidArgument);
  EXPECT_THROW(ImageClassificationPreprocessing({.image = ""}), InvalidArgument);
}

TEST(ImageClassificationPreprocessing, FromPipelineConfig) {
  const config::Pipeline pipeline = parse_pipeline_config(R"(
    train_input_reader {
      preprocessing_step {
        image_classification_preprocessing {
          fixed_resize_side: 32 default_image_size: 28 random_crop: true random_flip: true
          normalization: INCEPTION
        }
      }
    }
    eval_input_reader {
      preprocessing_step { image_classification_preprocessing { default_image_size: 0 } }
    })",
                                                          "test.config");
  const InputOptions o =
      input_options_from_config(pipeline.train_input_reader(), 8, 42, "train_input_reader");
  ASSERT_EQ(o.transforms.size(), 1u);
  EXPECT_EQ(o.transforms[0]->name(), "ImageClassificationPreprocessing");
  EXPECT_EQ(o.transforms[0]->features({{"image", DType::kU8, {-1, -1, 1}}})[0].shape,
            (std::vector<int64_t>{28, 28, 1}));
  try {
    input_options_from_config(pipeline.eval_input_reader(), 8, 0, "eval_input_reader");
    FAIL() << "default_image_size 0 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("eval_input_reader.preprocessing_step[0]."
                                    "image_classification_preprocessing: "));
  }
}

}  // namespace
}  // namespace trainyard
