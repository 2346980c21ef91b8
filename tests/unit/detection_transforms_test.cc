// The Object Detection API's preprocessing steps (trainyard/pkg/detection/transforms.h) on records
// laid out as DetectionReader yields them, with transformed boxes and pixels computed by hand, and
// the builder of od_preprocessor.proto's PreprocessingStep.
#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "od_config_test_util.h"
#include "trainyard/config_dialect.h"
#include "trainyard/error.h"
#include "trainyard/example_transforms.h"
#include "trainyard/pkg/detection/transforms.h"
#include "trainyard/wire/od_preprocessor.pb.h"

namespace trainyard::detection {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const RecordLocation kWhere{"train.tfrecord", 3};

template <class T>
std::vector<T> values_of(const ParsedFeature& f) {
  std::vector<T> out(f.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), f.bytes.data(), f.bytes.size());
  return out;
}

template <class T>
ParsedFeature feature_of(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  ParsedFeature f{dtype, std::move(shape), std::vector<std::byte>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(f.bytes.data(), values.data(), f.bytes.size());
  return f;
}

// A height x width x channels u8 image whose value at (y, x, c) is (y * width + x) * channels + c
// (mod 256), with `boxes`, classes 1..N, areas 10, 20, ... and true_image_shape.
ParsedRecord record_with(int64_t height, int64_t width, int64_t channels,
                         const std::vector<float>& boxes) {
  std::vector<uint8_t> pixels(static_cast<std::size_t>(height * width * channels));
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i % 256);
  const auto n = static_cast<int64_t>(boxes.size() / 4);
  std::vector<int32_t> classes;
  std::vector<float> areas;
  for (int64_t i = 0; i < n; ++i) {
    classes.push_back(static_cast<int32_t>(i + 1));
    areas.push_back(10.0f * static_cast<float>(i + 1));
  }
  ParsedRecord r;
  r.id = "r";
  r.features["image"] = feature_of(DType::kU8, {height, width, channels}, pixels);
  r.features["groundtruth_boxes"] = feature_of(DType::kF32, {n, 4}, boxes);
  r.features["groundtruth_classes"] = feature_of(DType::kI32, {n}, classes);
  r.features["groundtruth_area"] = feature_of(DType::kF32, {n}, areas);
  r.features["true_image_shape"] =
      feature_of(DType::kI32, {3},
                 std::vector<int32_t>{static_cast<int32_t>(height), static_cast<int32_t>(width),
                                      static_cast<int32_t>(channels)});
  return r;
}

std::vector<FeatureSpec> reader_features(int64_t channels = 3) {
  return {{"image", DType::kU8, {-1, -1, channels}},
          {"groundtruth_boxes", DType::kF32, {-1, 4}},
          {"groundtruth_classes", DType::kI32, {-1}},
          {"groundtruth_area", DType::kF32, {-1}},
          {"true_image_shape", DType::kI32, {3}}};
}

void expect_boxes_near(const ParsedFeature& f, const std::vector<float>& expected) {
  const std::vector<float> got = values_of<float>(f);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
  EXPECT_EQ(f.shape, (std::vector<int64_t>{static_cast<int64_t>(expected.size() / 4), 4}));
}

TEST(RandomVerticalFlip, MirrorsImageRowsAndBoxesTopToBottom) {
  ParsedRecord r = record_with(2, 1, 1, {0.1f, 0.2f, 0.4f, 0.6f});
  ExampleRandom random(1);
  RandomVerticalFlip({.probability = 1.0f}).apply(r, random, kWhere);
  EXPECT_THAT(values_of<uint8_t>(r.features["image"]), ElementsAre(1, 0));
  expect_boxes_near(r.features["groundtruth_boxes"], {0.6f, 0.2f, 0.9f, 0.6f});
}

TEST(RandomVerticalFlip, ProbabilityZeroLeavesTheRecord) {
  ParsedRecord r = record_with(2, 1, 1, {0.1f, 0.2f, 0.4f, 0.6f});
  ExampleRandom random(1);
  RandomVerticalFlip({.probability = 0.0f}).apply(r, random, kWhere);
  EXPECT_THAT(values_of<uint8_t>(r.features["image"]), ElementsAre(0, 1));
  expect_boxes_near(r.features["groundtruth_boxes"], {0.1f, 0.2f, 0.4f, 0.6f});
}

TEST(RandomRotation90, RotatesCounterClockwiseWithBoxesAndShape) {
  // [[0 1 2] [3 4 5]] rotated counter-clockwise is [[2 5] [1 4] [0 3]] (tf.image.rot90).
  ParsedRecord r = record_with(2, 3, 1, {0.1f, 0.2f, 0.4f, 0.6f});
  ExampleRandom random(1);
  RandomRotation90({.probability = 1.0f}).apply(r, random, kWhere);
  EXPECT_EQ(r.features["image"].shape, (std::vector<int64_t>{3, 2, 1}));
  EXPECT_THAT(values_of<uint8_t>(r.features["image"]), ElementsAre(2, 5, 1, 4, 0, 3));
  // [ymin, xmin, ymax, xmax] -> [1 - xmax, ymin, 1 - xmin, ymax].
  expect_boxes_near(r.features["groundtruth_boxes"], {0.4f, 0.1f, 0.8f, 0.4f});
  EXPECT_THAT(values_of<int32_t>(r.features["true_image_shape"]), ElementsAre(3, 2, 1));
}

// Image 10 x 20, window rows 2..6, columns 5..14: normalized y [0.2, 0.7], x [0.25, 0.75].
std::vector<float> crop_boxes() {
  return {
      0.3f, 0.3f, 0.5f, 0.5f,  // inside: [0.2, 0.1, 0.6, 0.5]
      0.0f, 0.0f, 0.4f, 0.5f,  // 0.2 x 0.25 of 0.4 x 0.5 inside (0.25 < 0.3): dropped
      0.5f, 0.5f, 0.8f, 0.8f,  // 0.2 x 0.25 of 0.3 x 0.3 inside (0.56): kept, cut by the window
      0.8f, 0.0f, 0.9f, 0.1f,  // entirely outside: dropped
  };
}

TEST(RandomCropImage, WindowCutsImageAndReframesFiltersAndClipsBoxes) {
  ParsedRecord r = record_with(10, 20, 1, crop_boxes());
  RandomCropImage::apply_window(RandomCropImage::Options{}, DetectionFeatureNames{}, r,
                                {.top = 2, .left = 5, .height = 5, .width = 10});
  const ParsedFeature& image = r.features["image"];
  EXPECT_EQ(image.shape, (std::vector<int64_t>{5, 10, 1}));
  const std::vector<uint8_t> pixels = values_of<uint8_t>(image);
  EXPECT_EQ(pixels.front(), 2 * 20 + 5);
  EXPECT_EQ(pixels.back(), 6 * 20 + 14);
  expect_boxes_near(r.features["groundtruth_boxes"],
                    {0.2f, 0.1f, 0.6f, 0.5f, 0.6f, 0.5f, 1.0f, 1.0f});
  EXPECT_THAT(values_of<int32_t>(r.features["groundtruth_classes"]), ElementsAre(1, 3));
  EXPECT_THAT(values_of<float>(r.features["groundtruth_area"]), ElementsAre(10.0f, 30.0f));
  EXPECT_EQ(r.features["groundtruth_classes"].shape, (std::vector<int64_t>{2}));
  EXPECT_THAT(values_of<int32_t>(r.features["true_image_shape"]), ElementsAre(5, 10, 1));
}

TEST(RandomCropImage, WithoutClipBoxesKeepsCoordinatesOutsideTheWindow) {
  ParsedRecord r = record_with(10, 20, 1, crop_boxes());
  RandomCropImage::apply_window({.clip_boxes = false}, DetectionFeatureNames{}, r,
                                {.top = 2, .left = 5, .height = 5, .width = 10});
  expect_boxes_near(r.features["groundtruth_boxes"],
                    {0.2f, 0.1f, 0.6f, 0.5f, 0.6f, 0.5f, 1.2f, 1.1f});
}

TEST(RandomCropImage, OverlapThreshOneKeepsOnlyBoxesEntirelyInside) {
  ParsedRecord r = record_with(10, 20, 1, crop_boxes());
  RandomCropImage::apply_window({.overlap_thresh = 1.0f}, DetectionFeatureNames{}, r,
                                {.top = 2, .left = 5, .height = 5, .width = 10});
  expect_boxes_near(r.features["groundtruth_boxes"], {0.2f, 0.1f, 0.6f, 0.5f});
  EXPECT_THAT(values_of<int32_t>(r.features["groundtruth_classes"]), ElementsAre(1));
}

TEST(RandomCropImage, ACropMayLeaveNoBoxes) {
  ParsedRecord r = record_with(10, 20, 1, {0.8f, 0.0f, 0.9f, 0.1f});
  RandomCropImage::apply_window({}, DetectionFeatureNames{}, r,
                                {.top = 2, .left = 5, .height = 5, .width = 10});
  EXPECT_EQ(r.features["groundtruth_boxes"].shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(r.features["groundtruth_classes"].shape, (std::vector<int64_t>{0}));
  EXPECT_EQ(r.features["image"].shape, (std::vector<int64_t>{5, 10, 1}));
}

TEST(RandomCropImage, SampledWindowsSatisfyAreaAspectAndCoverage) {
  // One box, pixels [40, 60) x [30, 50) of a 100 x 100 image, must be covered entirely.
  const std::vector<float> boxes = {0.4f, 0.3f, 0.6f, 0.5f};
  const RandomCropImage::Options o{};
  for (uint64_t key = 0; key < 200; ++key) {
    ExampleRandom random(key);
    const RandomCropImage::Window w = RandomCropImage::sample_window(100, 100, boxes, o, random);
    SCOPED_TRACE("key " + std::to_string(key));
    ASSERT_GE(w.top, 0);
    ASSERT_GE(w.left, 0);
    ASSERT_LE(w.top + w.height, 100);
    ASSERT_LE(w.left + w.width, 100);
    EXPECT_LE(w.top, 40);
    EXPECT_GE(w.top + w.height, 60);
    EXPECT_LE(w.left, 30);
    EXPECT_GE(w.left + w.width, 50);
    EXPECT_GE(w.height * w.width, 1000);  // min_area 0.1
    const double aspect = static_cast<double>(w.width) / static_cast<double>(w.height);
    EXPECT_GT(aspect, 0.75 - 0.05);
    EXPECT_LT(aspect, 1.33 + 0.05);
  }
}

TEST(RandomCropImage, NoSatisfyingWindowGivesTheWholeImage) {
  // Covering all of a whole-image box needs the whole image, which max_area 0.5 forbids.
  ExampleRandom random(7);
  const RandomCropImage::Window w =
      RandomCropImage::sample_window(50, 80, {0.0f, 0.0f, 1.0f, 1.0f}, {.max_area = 0.5f}, random);
  EXPECT_EQ(w.top, 0);
  EXPECT_EQ(w.left, 0);
  EXPECT_EQ(w.height, 50);
  EXPECT_EQ(w.width, 80);
}

TEST(RandomCropImage, RandomCoefOneLeavesTheRecord) {
  ParsedRecord r = record_with(10, 20, 1, crop_boxes());
  ExampleRandom random(3);
  RandomCropImage({.min_object_covered = 0.0f, .random_coef = 1.0f}).apply(r, random, kWhere);
  EXPECT_EQ(r.features["image"].shape, (std::vector<int64_t>{10, 20, 1}));
  expect_boxes_near(r.features["groundtruth_boxes"], crop_boxes());
}

TEST(RandomCropImage, RejectsOptionsOutsideTheApiRanges) {
  EXPECT_THROW(RandomCropImage({.min_area = 0.0f}), InvalidArgument);
  EXPECT_THROW(RandomCropImage({.min_aspect_ratio = 2.0f, .max_aspect_ratio = 1.0f}),
               InvalidArgument);
  EXPECT_THROW(RandomCropImage({.overlap_thresh = 1.5f}), InvalidArgument);
}

TEST(SsdRandomCrop, DefaultsAreTheApisSevenOperations) {
  const std::vector<RandomCropImage::Options> ops = SsdRandomCrop::default_operations();
  ASSERT_EQ(ops.size(), 7u);
  const float thresholds[] = {0.0f, 0.1f, 0.3f, 0.5f, 0.7f, 0.9f, 1.0f};
  for (std::size_t i = 0; i < ops.size(); ++i) {
    EXPECT_FLOAT_EQ(ops[i].min_object_covered, thresholds[i]);
    EXPECT_FLOAT_EQ(ops[i].overlap_thresh, thresholds[i]);
    EXPECT_FLOAT_EQ(ops[i].min_aspect_ratio, 0.5f);
    EXPECT_FLOAT_EQ(ops[i].max_aspect_ratio, 2.0f);
    EXPECT_FLOAT_EQ(ops[i].min_area, 0.1f);
    EXPECT_FLOAT_EQ(ops[i].max_area, 1.0f);
    EXPECT_TRUE(ops[i].clip_boxes);
    EXPECT_FLOAT_EQ(ops[i].random_coef, 0.15f);
  }
}

TEST(SsdRandomCrop, KeepsBoxesAndTheirRowsConsistentAndIsDeterministicPerKey) {
  const SsdRandomCrop crop({});
  int cropped = 0;
  for (uint64_t key = 0; key < 50; ++key) {
    ParsedRecord a = record_with(60, 80, 3, crop_boxes());
    ParsedRecord b = record_with(60, 80, 3, crop_boxes());
    ExampleRandom ra(key), rb(key);
    crop.apply(a, ra, kWhere);
    crop.apply(b, rb, kWhere);
    EXPECT_EQ(a.features["image"].bytes, b.features["image"].bytes);
    EXPECT_EQ(a.features["groundtruth_boxes"].bytes, b.features["groundtruth_boxes"].bytes);
    const std::vector<float> boxes = values_of<float>(a.features["groundtruth_boxes"]);
    const std::size_t n = boxes.size() / 4;
    EXPECT_EQ(a.features["groundtruth_classes"].shape,
              (std::vector<int64_t>{static_cast<int64_t>(n)}));
    EXPECT_EQ(a.features["groundtruth_area"].shape,
              (std::vector<int64_t>{static_cast<int64_t>(n)}));
    for (float v : boxes) {
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 1.0f);
    }
    const std::vector<int64_t>& shape = a.features["image"].shape;
    EXPECT_THAT(values_of<int32_t>(a.features["true_image_shape"]),
                ElementsAre(shape[0], shape[1], 3));
    if (shape[0] != 60 || shape[1] != 80) ++cropped;
  }
  EXPECT_GT(cropped, 10);  // random_coef 0.15 and seven operations: most records are cut
}

TEST(ResizeImage, BilinearAsTensorFlow1AndTheImageBecomesFloat) {
  // [[0 10] [20 30]] to 4 x 4: output (y, x) samples (y / 2, x / 2), clamped at the last pixel.
  ParsedRecord r = record_with(2, 2, 1, {0.1f, 0.2f, 0.3f, 0.4f});
  const std::vector<uint8_t> pixels = {0, 10, 20, 30};
  r.features["image"] = feature_of(DType::kU8, {2, 2, 1}, pixels);
  const ResizeImage resize({.new_height = 4, .new_width = 4});
  const std::vector<FeatureSpec> specs = resize.features(reader_features(1));
  EXPECT_EQ(specs[0].dtype, DType::kF32);
  EXPECT_EQ(specs[0].shape, (std::vector<int64_t>{4, 4, 1}));
  ExampleRandom random(0);
  resize.apply(r, random, kWhere);
  EXPECT_EQ(r.features["image"].dtype, DType::kF32);
  EXPECT_THAT(values_of<float>(r.features["image"]),
              ElementsAre(0, 5, 10, 10, 10, 15, 20, 20, 20, 25, 30, 30, 20, 25, 30, 30));
  expect_boxes_near(r.features["groundtruth_boxes"], {0.1f, 0.2f, 0.3f, 0.4f});
  EXPECT_THAT(values_of<int32_t>(r.features["true_image_shape"]), ElementsAre(4, 4, 1));
}

TEST(ResizeImage, NearestNeighborTakesTheFlooredSourcePixel) {
  ParsedRecord r = record_with(2, 2, 1, {});
  r.features["image"] = feature_of(DType::kU8, {2, 2, 1}, std::vector<uint8_t>{0, 10, 20, 30});
  ExampleRandom random(0);
  ResizeImage({.new_height = 3, .new_width = 4, .method = ResizeImage::Method::kNearestNeighbor})
      .apply(r, random, kWhere);
  // Rows sample 0, 0 (2/3 floored), 1 (4/3 floored); columns 0, 0, 1, 1.
  EXPECT_THAT(values_of<float>(r.features["image"]),
              ElementsAre(0, 0, 10, 10, 0, 0, 10, 10, 20, 20, 30, 30));
}

TEST(NormalizeImage, MapsTheOriginalRangeOntoTheTarget) {
  ParsedRecord r = record_with(1, 3, 1, {});
  r.features["image"] = feature_of(DType::kU8, {1, 3, 1}, std::vector<uint8_t>{0, 51, 255});
  ExampleRandom random(0);
  NormalizeImage(
      {.original_minval = 0, .original_maxval = 255, .target_minval = -1, .target_maxval = 1})
      .apply(r, random, kWhere);
  const std::vector<float> v = values_of<float>(r.features["image"]);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_FLOAT_EQ(v[0], -1.0f);
  EXPECT_NEAR(v[1], -0.6f, 1e-6);
  EXPECT_FLOAT_EQ(v[2], 1.0f);
}

TEST(ColourSteps, FixedFactorsGiveTheHandComputedPixels) {
  ExampleRandom random(0);
  ParsedRecord r = record_with(1, 2, 1, {});
  r.features["image"] = feature_of(DType::kU8, {1, 2, 1}, std::vector<uint8_t>{10, 200});
  RandomPixelValueScale({.minval = 2.0f, .maxval = 2.0f}).apply(r, random, kWhere);
  EXPECT_THAT(values_of<float>(r.features["image"]), ElementsAre(20.0f, 255.0f));

  r.features["image"] = feature_of(DType::kU8, {1, 2, 1}, std::vector<uint8_t>{10, 30});
  RandomAdjustContrast({.min_delta = 2.0f, .max_delta = 2.0f}).apply(r, random, kWhere);
  EXPECT_THAT(values_of<float>(r.features["image"]), ElementsAre(0.0f, 40.0f));  // mean 20

  r.features["image"] = feature_of(DType::kU8, {1, 2, 1}, std::vector<uint8_t>{10, 250});
  RandomAdjustBrightness({.max_delta = 0.0f}).apply(r, random, kWhere);
  EXPECT_THAT(values_of<float>(r.features["image"]), ElementsAre(10.0f, 250.0f));
}

TEST(ColourSteps, BrightnessShiftsEveryValueByOneDeltaWithinRange) {
  ParsedRecord r = record_with(1, 2, 1, {});
  r.features["image"] = feature_of(DType::kU8, {1, 2, 1}, std::vector<uint8_t>{100, 120});
  ExampleRandom random(5);
  RandomAdjustBrightness({.max_delta = 0.2f}).apply(r, random, kWhere);
  const std::vector<float> v = values_of<float>(r.features["image"]);
  EXPECT_NEAR(v[1] - v[0], 20.0f, 1e-4);
  EXPECT_LE(std::abs(v[0] - 100.0f), 0.2f * 255.0f + 1e-3f);
}

TEST(RandomJitterBoxes, MovesEachCornerByAtMostRatioOfTheBoxSideAndClips) {
  const std::vector<float> boxes = {0.2f, 0.4f, 0.6f, 0.5f, 0.0f, 0.9f, 1.0f, 1.0f};
  for (uint64_t key = 0; key < 20; ++key) {
    ParsedRecord r = record_with(4, 4, 1, boxes);
    ExampleRandom random(key);
    RandomJitterBoxes({.ratio = 0.05f}).apply(r, random, kWhere);
    const std::vector<float> v = values_of<float>(r.features["groundtruth_boxes"]);
    ASSERT_EQ(v.size(), boxes.size());
    // Box 0 is 0.4 high and 0.1 wide: y moves by at most 0.02, x by at most 0.005.
    const float limit[8] = {0.02f, 0.005f, 0.02f, 0.005f, 0.05f, 0.005f, 0.05f, 0.005f};
    for (std::size_t i = 0; i < v.size(); ++i) {
      EXPECT_LE(std::abs(v[i] - boxes[i]), limit[i] + 1e-6f) << i;
      EXPECT_GE(v[i], 0.0f);
      EXPECT_LE(v[i], 1.0f);
    }
  }
}

TEST(ColourSteps, HueAndSaturationInHsv) {
  std::vector<float> red = {255.0f, 0.0f, 0.0f};
  RandomAdjustHue::adjust_hue(red, 1.0f / 3.0f);  // red -> green
  EXPECT_NEAR(red[0], 0.0f, 1e-3);
  EXPECT_NEAR(red[1], 255.0f, 1e-3);
  EXPECT_NEAR(red[2], 0.0f, 1e-3);
  std::vector<float> orange = {200.0f, 100.0f, 0.0f};
  RandomAdjustSaturation::adjust_saturation(orange, 0.0f);  // no saturation: the value, grey
  EXPECT_THAT(orange, ElementsAre(200.0f, 200.0f, 200.0f));
  std::vector<float> same = {200.0f, 100.0f, 50.0f};
  RandomAdjustHue::adjust_hue(same, 0.0f);
  EXPECT_NEAR(same[0], 200.0f, 1e-3);
  EXPECT_NEAR(same[1], 100.0f, 1e-3);
  EXPECT_NEAR(same[2], 50.0f, 1e-3);
}

TEST(ColourSteps, DistortColorKeepsValuesInRangeAndIsDeterministicPerKey) {
  for (int ordering : {0, 1}) {
    ParsedRecord a = record_with(3, 4, 3, {}), b = record_with(3, 4, 3, {});
    ExampleRandom ra(11), rb(11);
    RandomDistortColor({.color_ordering = ordering}).apply(a, ra, kWhere);
    RandomDistortColor({.color_ordering = ordering}).apply(b, rb, kWhere);
    EXPECT_EQ(a.features["image"].bytes, b.features["image"].bytes);
    for (float v : values_of<float>(a.features["image"])) {
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 255.0f);
    }
  }
  EXPECT_THROW(RandomDistortColor({.color_ordering = 2}), InvalidArgument);
}

TEST(RandomPadImage, PlacesTheImageInACanvasAndMovesTheBoxes) {
  ParsedRecord r = record_with(2, 2, 1, {0.0f, 0.0f, 1.0f, 1.0f, 0.5f, 0.5f, 1.0f, 1.0f});
  RandomPadImage::pad(DetectionFeatureNames{}, r, 1, 2, 4, 6, {7.0f});
  EXPECT_EQ(r.features["image"].shape, (std::vector<int64_t>{4, 6, 1}));
  EXPECT_THAT(values_of<float>(r.features["image"]), ElementsAre(7, 7, 7, 7, 7, 7,  //
                                                                 7, 7, 0, 1, 7, 7,  //
                                                                 7, 7, 2, 3, 7, 7,  //
                                                                 7, 7, 7, 7, 7, 7));
  // y: (y x 2 + 1) / 4, x: (x x 2 + 2) / 6.
  expect_boxes_near(r.features["groundtruth_boxes"], {0.25f, 2.0f / 6, 0.75f, 4.0f / 6,  //
                                                      0.5f, 3.0f / 6, 0.75f, 4.0f / 6});
  EXPECT_THAT(values_of<int32_t>(r.features["true_image_shape"]), ElementsAre(4, 6, 1));
}

TEST(RandomPadImage, DrawsSizesBetweenTheImageAndTwiceItWithTheMeanColour) {
  for (uint64_t key = 0; key < 20; ++key) {
    ParsedRecord r = record_with(3, 5, 1, {0.0f, 0.0f, 1.0f, 1.0f});
    ExampleRandom random(key);
    RandomPadImage({}).apply(r, random, kWhere);
    const std::vector<int64_t>& shape = r.features["image"].shape;
    EXPECT_GE(shape[0], 3);
    EXPECT_LT(shape[0], 6);
    EXPECT_GE(shape[1], 5);
    EXPECT_LT(shape[1], 10);
    const std::vector<float> b = values_of<float>(r.features["groundtruth_boxes"]);
    EXPECT_NEAR((b[2] - b[0]) * static_cast<float>(shape[0]), 3.0f, 1e-4);  // the box keeps
    EXPECT_NEAR((b[3] - b[1]) * static_cast<float>(shape[1]), 5.0f, 1e-4);  // its pixel size
  }
}

TEST(RandomBlackPatches, BlackensOneSquareOfTheRatiosSide) {
  ParsedRecord r = record_with(4, 4, 1, {});
  r.features["image"] = feature_of(DType::kU8, {4, 4, 1}, std::vector<uint8_t>(16, 9));
  ExampleRandom random(2);
  RandomBlackPatches({.max_black_patches = 1, .probability = 1.0f, .size_to_image_ratio = 0.5f})
      .apply(r, random, kWhere);
  const std::vector<uint8_t> v = values_of<uint8_t>(r.features["image"]);
  int zeros = 0, first = -1;
  for (int i = 0; i < 16; ++i) {
    if (v[static_cast<std::size_t>(i)] == 0) {
      ++zeros;
      if (first < 0) first = i;
    }
  }
  ASSERT_EQ(zeros, 4);
  EXPECT_EQ(v[static_cast<std::size_t>(first + 1)], 0);
  EXPECT_EQ(v[static_cast<std::size_t>(first + 4)], 0);
  EXPECT_EQ(v[static_cast<std::size_t>(first + 5)], 0);
}

TEST(RandomImageScale, ResizesWithAlignedCornersKeepingBoxes) {
  ParsedRecord r = record_with(2, 2, 1, {0.1f, 0.2f, 0.3f, 0.4f});
  r.features["image"] = feature_of(DType::kU8, {2, 2, 1}, std::vector<uint8_t>{0, 30, 60, 90});
  ExampleRandom random(0);
  RandomImageScale({.min_scale_ratio = 2.0f, .max_scale_ratio = 2.0f}).apply(r, random, kWhere);
  EXPECT_EQ(r.features["image"].shape, (std::vector<int64_t>{4, 4, 1}));
  const std::vector<float> v = values_of<float>(r.features["image"]);
  // Row 0 samples x = 0, 1/3, 2/3, 1 of [0 30]; the last row likewise of [60 90].
  const float expected_first[4] = {0, 10, 20, 30};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(v[static_cast<std::size_t>(i)], expected_first[i], 1e-4);
    EXPECT_NEAR(v[static_cast<std::size_t>(12 + i)], expected_first[i] + 60, 1e-4);
  }
  expect_boxes_near(r.features["groundtruth_boxes"], {0.1f, 0.2f, 0.3f, 0.4f});
  EXPECT_THAT(values_of<int32_t>(r.features["true_image_shape"]), ElementsAre(4, 4, 1));
}

TEST(RandomCropPadImage, PadsRelativeToTheOriginalSize) {
  // The crop is skipped (random_coef 1); equal ratios 2, 2 give a canvas of exactly 4 x 6.
  CropPadOperation op;
  op.crop.random_coef = 1.0f;
  op.min_padded_size_ratio[0] = op.min_padded_size_ratio[1] = 2.0f;
  op.pad_color = {100.0f};
  ParsedRecord r = record_with(2, 3, 1, {0.0f, 0.0f, 1.0f, 1.0f});
  ExampleRandom random(4);
  RandomCropPadImage(op).apply(r, random, kWhere);
  EXPECT_EQ(r.features["image"].shape, (std::vector<int64_t>{4, 6, 1}));
  const std::vector<float> b = values_of<float>(r.features["groundtruth_boxes"]);
  EXPECT_NEAR(b[2] - b[0], 0.5f, 1e-6);
  EXPECT_NEAR(b[3] - b[1], 0.5f, 1e-6);
  const std::vector<float> v = values_of<float>(r.features["image"]);
  EXPECT_EQ(std::count(v.begin(), v.end(), 100.0f), 24 - 6);
}

// random_crop_to_aspect_ratio's window: the whole height and round(height x ratio) columns of a
// wider image, the whole width and round(width / ratio) rows of a taller one, the image itself at
// its own ratio (preprocessor.py's target_height_fn / target_width_fn).
TEST(RandomCropToAspectRatio, WindowIsTheLargestOfTheRatioTheImageHolds) {
  using W = RandomCropImage::Window;
  auto size = [](int64_t h, int64_t w, float ratio) {
    const W win = RandomCropToAspectRatio::window_size(h, w, ratio);
    return std::vector<int64_t>{win.height, win.width};
  };
  EXPECT_EQ(size(10, 20, 1.0f), (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(size(20, 10, 1.0f), (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(size(10, 20, 2.0f), (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(size(60, 80, 0.85f), (std::vector<int64_t>{60, 51}));   // round(60 * 0.85) = 51
  EXPECT_EQ(size(100, 50, 0.85f), (std::vector<int64_t>{59, 50}));  // round(50 / 0.85) = 59
  EXPECT_THROW(RandomCropToAspectRatio({0.0f, 0.3f, true}), InvalidArgument);
  EXPECT_THROW(RandomCropToAspectRatio({1.0f, 1.5f, true}), InvalidArgument);
}

// Every offset the window can take is drawn, and the boxes are those of that window: filtered by
// overlap_thresh, re-framed and clipped as the API's im_box arithmetic gives them.
TEST(RandomCropToAspectRatio, OffsetIsUniformAndBoxesFollowTheWindow) {
  const RandomCropToAspectRatio crop({1.0f, 0.3f, true});
  std::set<int64_t> lefts;
  for (uint64_t key = 0; key < 200; ++key) {
    ParsedRecord r = record_with(10, 20, 1, crop_boxes());
    ExampleRandom random(key);
    crop.apply(r, random, kWhere);
    ASSERT_EQ(r.features["image"].shape, (std::vector<int64_t>{10, 10, 1}));
    const std::vector<uint8_t> pixels = values_of<uint8_t>(r.features["image"]);
    const int64_t left = pixels[0];  // the value at (0, left) of the original is left
    lefts.insert(left);
    const float x0 = static_cast<float>(left) / 20.0f, x1 = static_cast<float>(left + 10) / 20.0f;
    std::vector<float> expected;
    const std::vector<float> boxes = crop_boxes();
    for (std::size_t i = 0; i < boxes.size(); i += 4) {
      const float* b = &boxes[i];
      const float inter = std::max(0.0f, std::min(b[3], x1) - std::max(b[1], x0)) * (b[2] - b[0]);
      if (!(inter / ((b[2] - b[0]) * (b[3] - b[1])) >= 0.3f)) continue;
      for (float v : {b[0], (b[1] - x0) / (x1 - x0), b[2], (b[3] - x0) / (x1 - x0)}) {
        expected.push_back(std::clamp(v, 0.0f, 1.0f));
      }
    }
    expect_boxes_near(r.features["groundtruth_boxes"], expected);
    EXPECT_EQ(r.features["groundtruth_classes"].shape[0],
              static_cast<int64_t>(expected.size() / 4));
    EXPECT_THAT(values_of<int32_t>(r.features["true_image_shape"]), ElementsAre(10, 10, 1));
  }
  EXPECT_EQ(lefts.size(), 11u);  // 0 .. 10
}

TEST(SsdRandomCropPad, DefaultsAreTheApisSixOperationsAndRowsStayConsistent) {
  const std::vector<CropPadOperation> ops = SsdRandomCropPad::default_operations();
  ASSERT_EQ(ops.size(), 6u);
  EXPECT_FLOAT_EQ(ops[0].crop.min_object_covered, 0.1f);
  EXPECT_FLOAT_EQ(ops[5].crop.overlap_thresh, 1.0f);
  EXPECT_FLOAT_EQ(ops[2].max_padded_size_ratio[1], 2.0f);
  EXPECT_TRUE(ops[3].pad_color.empty());
  const SsdRandomCropPad step({});
  for (uint64_t key = 0; key < 30; ++key) {
    ParsedRecord a = record_with(30, 40, 3, crop_boxes()), b = record_with(30, 40, 3, crop_boxes());
    ExampleRandom ra(key), rb(key);
    step.apply(a, ra, kWhere);
    step.apply(b, rb, kWhere);
    EXPECT_EQ(a.features["image"].bytes, b.features["image"].bytes);
    const std::vector<float> boxes = values_of<float>(a.features["groundtruth_boxes"]);
    EXPECT_EQ(a.features["groundtruth_classes"].shape[0], static_cast<int64_t>(boxes.size() / 4));
    for (float v : boxes) {
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 1.0f);
    }
    EXPECT_LT(a.features["image"].shape[0], 60);
    EXPECT_LT(a.features["image"].shape[1], 80);
  }
}

TEST(ColourSteps, RgbToGrayAndSubtractChannelMean) {
  ExampleRandom random(0);
  ParsedRecord r = record_with(1, 1, 3, {});
  r.features["image"] = feature_of(DType::kU8, {1, 1, 3}, std::vector<uint8_t>{100, 200, 50});
  RandomRgbToGray({.probability = 1.0f}).apply(r, random, kWhere);
  const float gray = 0.2989f * 100 + 0.5870f * 200 + 0.1140f * 50;
  EXPECT_THAT(values_of<float>(r.features["image"]), ElementsAre(gray, gray, gray));
  r.features["image"] = feature_of(DType::kU8, {1, 1, 3}, std::vector<uint8_t>{100, 200, 50});
  SubtractChannelMean({.means = {10, 20, 30}}).apply(r, random, kWhere);
  EXPECT_THAT(values_of<float>(r.features["image"]), ElementsAre(90, 180, 20));
  EXPECT_THROW(SubtractChannelMean({.means = {1}}).apply(r, random, kWhere), InvalidArgument);
}

TEST(DetectionTransform, FeaturesNameAMissingOrMistypedFeature) {
  std::vector<FeatureSpec> no_boxes = {{"image", DType::kU8, {-1, -1, 3}}};
  try {
    RandomVerticalFlip({}).features(no_boxes);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("groundtruth_boxes"));
  }
  std::vector<FeatureSpec> bad_image = reader_features();
  bad_image[0].dtype = DType::kI32;
  EXPECT_THROW(ResizeImage({.new_height = 2, .new_width = 2}).features(bad_image), InvalidArgument);
}

wire::od::PreprocessingStep step_of(const std::string& text) {
  wire::od::PreprocessingStep step;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &step)) << text;
  return step;
}

// The detection task's step type (od_dialect.cc), as the core's input pipeline reaches it: by
// the message's full name, built from its bytes.
std::shared_ptr<const InputTransformType> od_step_type() {
  test::load_task_dialects();
  auto type = config_dialects::input_transform_type("trainyard.od.PreprocessingStep");
  if (!type)
    throw std::logic_error("the detection task registers no trainyard.od.PreprocessingStep");
  return type;
}

std::shared_ptr<const ExampleTransform> build_od_preprocessing_step(
    const wire::od::PreprocessingStep& step) {
  return od_step_type()->build(step.SerializeAsString());
}

TEST(BuildOdPreprocessingStep, BuildsTheImplementedStepsWithTheApiDefaults) {
  EXPECT_EQ(build_od_preprocessing_step(step_of("random_horizontal_flip {}"))->name(),
            "RandomHorizontalFlip");
  EXPECT_EQ(build_od_preprocessing_step(step_of("ssd_random_crop {}"))->name(), "SsdRandomCrop");
  EXPECT_EQ(build_od_preprocessing_step(step_of("random_crop_image { min_object_covered: 0 "
                                                "min_aspect_ratio: 0.75 max_aspect_ratio: 3 "
                                                "min_area: 0.75 max_area: 1 overlap_thresh: 0 }"))
                ->name(),
            "RandomCropImage");
  EXPECT_EQ(build_od_preprocessing_step(
                step_of("resize_image { new_height: 300 new_width: 300 method: BILINEAR }"))
                ->name(),
            "ResizeImage");
  EXPECT_EQ(build_od_preprocessing_step(step_of("random_vertical_flip {}"))->name(),
            "RandomVerticalFlip");
  EXPECT_EQ(build_od_preprocessing_step(step_of("random_rotation90 {}"))->name(),
            "RandomRotation90");
  EXPECT_EQ(build_od_preprocessing_step(step_of("normalize_image { original_minval: 0 "
                                                "original_maxval: 255 }"))
                ->name(),
            "NormalizeImage");
  EXPECT_EQ(build_od_preprocessing_step(step_of("random_adjust_brightness {}"))->name(),
            "RandomAdjustBrightness");
  EXPECT_EQ(build_od_preprocessing_step(step_of("random_jitter_boxes {}"))->name(),
            "RandomJitterBoxes");
  for (const auto& [text, name] : std::vector<std::pair<std::string, std::string>>{
           {"random_adjust_hue {}", "RandomAdjustHue"},
           {"random_adjust_saturation {}", "RandomAdjustSaturation"},
           {"random_distort_color { color_ordering: 1 }", "RandomDistortColor"},
           {"random_pad_image {}", "RandomPadImage"},
           {"random_black_patches {}", "RandomBlackPatches"},
           {"random_image_scale {}", "RandomImageScale"},
           {"random_pixel_value_scale {}", "RandomPixelValueScale"},
           {"random_adjust_contrast {}", "RandomAdjustContrast"},
           {"random_crop_pad_image {}", "RandomCropPadImage"},
           {"ssd_random_crop_pad {}", "SsdRandomCropPad"},
           {"random_rgb_to_gray {}", "RandomRgbToGray"},
           {"subtract_channel_mean { means: 1 means: 2 means: 3 }", "SubtractChannelMean"}}) {
    EXPECT_EQ(build_od_preprocessing_step(step_of(text))->name(), name);
  }
}

TEST(BuildOdPreprocessingStep, SsdRandomCropOperationsReplaceTheDefaults) {
  // One operation that always keeps the image: nothing changes.
  auto crop = build_od_preprocessing_step(
      step_of("ssd_random_crop { operations { min_object_covered: 0 min_aspect_ratio: 0.5 "
              "max_aspect_ratio: 2 min_area: 0.1 max_area: 1 overlap_thresh: 0 random_coef: 1 "
              "} }"));
  ParsedRecord r = record_with(10, 20, 1, crop_boxes());
  ExampleRandom random(9);
  crop->apply(r, random, kWhere);
  EXPECT_EQ(r.features["image"].shape, (std::vector<int64_t>{10, 20, 1}));
}

TEST(BuildOdPreprocessingStep, AnUnimplementedStepIsAConfigErrorNamingIt) {
  for (const char* name : {"rgb_to_gray", "autoaugment_image", "adjust_gamma"}) {
    try {
      build_od_preprocessing_step(step_of(std::string(name) + " {}"));
      ADD_FAILURE() << name << ": expected ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(name));
      EXPECT_THAT(e.what(), HasSubstr("not implemented"));
    }
  }
  EXPECT_THROW(build_od_preprocessing_step(step_of("resize_image { new_height: 3 new_width: 3 "
                                                   "method: AREA }")),
               ConfigError);
  EXPECT_THROW(build_od_preprocessing_step(
                   step_of("random_horizontal_flip { keypoint_flip_permutation: 1 }")),
               ConfigError);
  EXPECT_THROW(build_od_preprocessing_step(wire::od::PreprocessingStep{}), ConfigError);
}

// ssd_random_crop_fixed_aspect_ratio always ends at the ratio (its second crop), from the
// config's operations or the seven defaults with that ratio.
TEST(SsdRandomCropFixedAspectRatio, EveryOutputHasTheRatio) {
  const auto built = build_od_preprocessing_step(
      step_of("ssd_random_crop_fixed_aspect_ratio { aspect_ratio: 0.5 }"));
  const auto from_ops = build_od_preprocessing_step(step_of(
      "ssd_random_crop_fixed_aspect_ratio { aspect_ratio: 2.0 operations { min_object_covered: 0 "
      "min_area: 0.3 max_area: 1 overlap_thresh: 0 random_coef: 0 } }"));
  for (uint64_t key = 0; key < 40; ++key) {
    ParsedRecord a = record_with(60, 80, 3, crop_boxes());
    ParsedRecord b = record_with(60, 80, 3, crop_boxes());
    ExampleRandom ra(key), rb(key);
    built->apply(a, ra, kWhere);
    from_ops->apply(b, rb, kWhere);
    const std::vector<int64_t>& sa = a.features["image"].shape;
    const std::vector<int64_t>& sb = b.features["image"].shape;
    EXPECT_EQ(sa[1], std::max<int64_t>(1, std::lrint(sa[0] * 0.5))) << key;
    EXPECT_LE(std::abs(sb[1] - 2 * sb[0]), 1) << key;
    EXPECT_LT(sb[0] * sb[1], 60 * 80) << key;  // never the whole 4:3 image
  }
  EXPECT_THROW(build_od_preprocessing_step(
                   step_of("ssd_random_crop_fixed_aspect_ratio { aspect_ratio: -1 }")),
               InvalidArgument);
}

TEST(BuildOdPreprocessingStep, OnlyTheResizeIsKeptWhenAnEvaluationReadsTheTrainingInput) {
  const auto type = od_step_type();
  EXPECT_TRUE(type->kept_in_evaluation(
      step_of("resize_image { new_height: 3 new_width: 3 }").SerializeAsString()));
  for (const char* text : {"random_horizontal_flip {}", "ssd_random_crop {}",
                           "normalize_image { original_minval: 0 original_maxval: 255 }"}) {
    EXPECT_FALSE(type->kept_in_evaluation(step_of(text).SerializeAsString())) << text;
  }
  EXPECT_THROW(type->build(std::string("\xff\xff")), ConfigError);  // not a PreprocessingStep
}

}  // namespace
}  // namespace trainyard::detection
