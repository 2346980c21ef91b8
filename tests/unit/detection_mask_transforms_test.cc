// Instance masks through the Object Detection API's preprocessing steps
// (trainyard/pkg/detection/transforms.h, the core's RandomHorizontalFlip): each geometric step on
// one image, its boxes and masks gives what the API's preprocessor gives on the same draw
// (tests/fixtures/detection/mask_transforms.txt, written by TensorFlow 2.21 running the API's
// functions; make_mask_transform_goldens.py says which masks come from raw tf ops), and the
// random steps keep every mask inside its box and in the boxes' order.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pkg_detection_goldens.h"
#include "trainyard/error.h"
#include "trainyard/example_transforms.h"
#include "trainyard/pkg/detection/transforms.h"

namespace trainyard::detection {
namespace {

using test::Goldens;
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

const Goldens& goldens() {
  static const Goldens g("mask_transforms.txt");
  return g;
}

// The golden input as DetectionReader lays it out: the masks u8 0/1.
ParsedRecord golden_record() {
  const Goldens& g = goldens();
  ParsedRecord r;
  r.id = "golden";
  const test::GoldenTensor& image = g.get("input_image");
  r.features["image"] = feature_of(DType::kF32, image.shape, image.f32());
  const test::GoldenTensor& boxes = g.get("input_boxes");
  r.features["groundtruth_boxes"] = feature_of(DType::kF32, boxes.shape, boxes.f32());
  const test::GoldenTensor& classes = g.get("input_classes");
  r.features["groundtruth_classes"] = feature_of(DType::kI32, classes.shape, classes.i32());
  const test::GoldenTensor& masks = g.get("input_masks");
  std::vector<uint8_t> bits;
  for (double v : masks.values) bits.push_back(static_cast<uint8_t>(v));
  r.features["groundtruth_instance_masks"] = feature_of(DType::kU8, masks.shape, bits);
  r.features["true_image_shape"] =
      feature_of(DType::kI32, {3},
                 std::vector<int32_t>{static_cast<int32_t>(image.shape[0]),
                                      static_cast<int32_t>(image.shape[1]), 3});
  return r;
}

// The record equals the golden case `name`: image within 1e-3 (values 0..255), boxes within
// 1e-5, classes (where the case has them) and masks exactly, the masks still u8.
void expect_golden(const ParsedRecord& r, const std::string& name) {
  const Goldens& g = goldens();
  SCOPED_TRACE(name);
  const test::GoldenTensor& image = g.get(name + "_image");
  const ParsedFeature& got_image = r.features.at("image");
  ASSERT_EQ(got_image.shape, image.shape);
  const std::vector<float> want_pixels = image.f32();
  const std::vector<float> pixels = values_of<float>(got_image);
  ASSERT_EQ(pixels.size(), want_pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    ASSERT_NEAR(pixels[i], want_pixels[i], 1e-3) << "image value " << i;
  }
  const test::GoldenTensor& boxes = g.get(name + "_boxes");
  const ParsedFeature& got_boxes = r.features.at("groundtruth_boxes");
  EXPECT_EQ(got_boxes.shape, boxes.shape);
  const std::vector<float> want_boxes = boxes.f32();
  const std::vector<float> box_values = values_of<float>(got_boxes);
  ASSERT_EQ(box_values.size(), want_boxes.size());
  for (std::size_t i = 0; i < box_values.size(); ++i) {
    EXPECT_NEAR(box_values[i], want_boxes[i], 1e-5) << "box value " << i;
  }
  if (g.has(name + "_classes")) {
    EXPECT_EQ(values_of<int32_t>(r.features.at("groundtruth_classes")),
              g.get(name + "_classes").i32());
  }
  const test::GoldenTensor& masks = g.get(name + "_masks");
  const ParsedFeature& got_masks = r.features.at("groundtruth_instance_masks");
  EXPECT_EQ(got_masks.dtype, DType::kU8);
  ASSERT_EQ(got_masks.shape, masks.shape);
  const std::vector<uint8_t> bits = values_of<uint8_t>(got_masks);
  const std::vector<int32_t> want_bits = masks.i32();
  for (std::size_t i = 0; i < bits.size(); ++i) {
    ASSERT_EQ(static_cast<int32_t>(bits[i]), want_bits[i]) << "mask value " << i;
  }
  const std::vector<int32_t> shape = values_of<int32_t>(r.features.at("true_image_shape"));
  EXPECT_EQ(shape[0], image.shape[0]);
  EXPECT_EQ(shape[1], image.shape[1]);
}

TEST(MaskTransformsGolden, FlipsAndRotationMoveTheMasksAsTheApi) {
  ExampleRandom random(1);
  ParsedRecord r = golden_record();
  RandomHorizontalFlip({.probability = 1.0f}).apply(r, random, kWhere);
  expect_golden(r, "hflip");
  r = golden_record();
  RandomVerticalFlip({.probability = 1.0f}).apply(r, random, kWhere);
  expect_golden(r, "vflip");
  r = golden_record();
  RandomRotation90({.probability = 1.0f}).apply(r, random, kWhere);
  expect_golden(r, "rot90");
}

TEST(MaskTransformsGolden, ACropCutsTheMasksToTheWindowAndDropsTheRowsOfDroppedBoxes) {
  ParsedRecord r = golden_record();
  RandomCropImage::Options o;
  o.overlap_thresh = 0.5f;  // drops box 0 (a third of it inside the window)
  RandomCropImage::apply_window(o, {}, r, {.top = 1, .left = 2, .height = 4, .width = 5});
  expect_golden(r, "crop");

  r = golden_record();
  RandomCropImage::Window w = RandomCropToAspectRatio::window_size(6, 8, 1.0f);
  EXPECT_EQ(w.height, 6);
  EXPECT_EQ(w.width, 6);
  w.left = 1;  // the offset the golden's cache fixed
  RandomCropImage::Options aspect;
  aspect.overlap_thresh = 0.3f;
  RandomCropImage::apply_window(aspect, {}, r, w);
  expect_golden(r, "crop_to_aspect");
}

TEST(MaskTransformsGolden, ResizesTakeTheNearestMaskPixelAsTheApi) {
  for (const auto& [name, h, w] : {std::tuple{"resize_9x5", 9, 5}, {"resize_4x13", 4, 13}}) {
    ParsedRecord r = golden_record();
    ExampleRandom random(0);
    ResizeImage({.new_height = h, .new_width = w}).apply(r, random, kWhere);
    expect_golden(r, name);
  }
  for (const auto& [name, factor] : {std::tuple{"scale_1_5", 1.5f}, {"scale_0_7", 0.7f}}) {
    ParsedRecord r = golden_record();
    ExampleRandom random(0);
    RandomImageScale({.min_scale_ratio = factor, .max_scale_ratio = factor})
        .apply(r, random, kWhere);
    expect_golden(r, name);
  }
}

TEST(MaskTransformsGolden, APadPutsTheMasksAtTheImagesOffsetInZeros) {
  ParsedRecord r = golden_record();
  RandomPadImage::pad({}, r, 2, 1, 9, 11, {10.0f, 20.0f, 30.0f});
  expect_golden(r, "pad");
}

// ---- Random draws: masks stay with their boxes ----

// Every set pixel of mask k lies within box k (one pixel of slack for the rounding of windows
// and resizes), and each kept row still holds some pixels: rows follow their boxes, in order.
void expect_masks_inside_boxes(const ParsedRecord& r, const std::string& what) {
  const ParsedFeature& masks = r.features.at("groundtruth_instance_masks");
  const ParsedFeature& image = r.features.at("image");
  const std::vector<float> boxes = values_of<float>(r.features.at("groundtruth_boxes"));
  ASSERT_EQ(masks.shape.size(), 3u) << what;
  ASSERT_EQ(masks.shape[0] * 4, static_cast<int64_t>(boxes.size())) << what;
  ASSERT_EQ(masks.shape[1], image.shape[0]) << what;
  ASSERT_EQ(masks.shape[2], image.shape[1]) << what;
  ASSERT_EQ(static_cast<int64_t>(values_of<int32_t>(r.features.at("groundtruth_classes")).size()),
            masks.shape[0])
      << what;
  const int64_t h = masks.shape[1], w = masks.shape[2];
  const std::vector<uint8_t> bits = values_of<uint8_t>(masks);
  for (int64_t k = 0; k < masks.shape[0]; ++k) {
    const float* b = &boxes[static_cast<std::size_t>(4 * k)];
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        if (bits[static_cast<std::size_t>((k * h + y) * w + x)] == 0) continue;
        ASSERT_LE(bits[static_cast<std::size_t>((k * h + y) * w + x)], 1) << what;
        EXPECT_GE(static_cast<float>(y + 1), b[0] * static_cast<float>(h) - 1.0f) << what << k;
        EXPECT_LE(static_cast<float>(y), b[2] * static_cast<float>(h) + 1.0f) << what << k;
        EXPECT_GE(static_cast<float>(x + 1), b[1] * static_cast<float>(w) - 1.0f) << what << k;
        EXPECT_LE(static_cast<float>(x), b[3] * static_cast<float>(w) + 1.0f) << what << k;
      }
    }
  }
}

// A 40 x 60 record with three boxes whose masks fill them (class k + 1 for box k).
ParsedRecord filled_record() {
  const std::vector<float> boxes = {0.05f, 0.05f, 0.4f, 0.3f, 0.3f,  0.4f,
                                    0.9f,  0.7f,  0.6f, 0.1f, 0.95f, 0.5f};
  ParsedRecord r;
  r.id = "filled";
  r.features["image"] =
      feature_of(DType::kU8, {40, 60, 3}, std::vector<uint8_t>(40 * 60 * 3, uint8_t{7}));
  r.features["groundtruth_boxes"] = feature_of(DType::kF32, {3, 4}, boxes);
  r.features["groundtruth_classes"] = feature_of(DType::kI32, {3}, std::vector<int32_t>{1, 2, 3});
  std::vector<uint8_t> bits(3 * 40 * 60, 0);
  for (int64_t k = 0; k < 3; ++k) {
    const float* b = &boxes[static_cast<std::size_t>(4 * k)];
    for (int64_t y = 0; y < 40; ++y) {
      for (int64_t x = 0; x < 60; ++x) {
        const float cy = (static_cast<float>(y) + 0.5f) / 40.0f;
        const float cx = (static_cast<float>(x) + 0.5f) / 60.0f;
        if (cy > b[0] && cy < b[2] && cx > b[1] && cx < b[3]) {
          bits[static_cast<std::size_t>((k * 40 + y) * 60 + x)] = 1;
        }
      }
    }
  }
  r.features["groundtruth_instance_masks"] = feature_of(DType::kU8, {3, 40, 60}, bits);
  return r;
}

TEST(MaskTransforms, RandomStepsKeepEachMaskInsideItsBoxInTheBoxesOrder) {
  std::vector<std::unique_ptr<ExampleTransform>> steps;
  steps.push_back(std::make_unique<RandomHorizontalFlip>(RandomHorizontalFlip::Options{}));
  steps.push_back(std::make_unique<RandomVerticalFlip>(RandomVerticalFlip::Options{}));
  steps.push_back(std::make_unique<RandomRotation90>(RandomRotation90::Options{}));
  steps.push_back(std::make_unique<SsdRandomCrop>(SsdRandomCrop::Options{}));
  steps.push_back(std::make_unique<RandomCropImage>(RandomCropImage::Options{}));
  steps.push_back(std::make_unique<SsdRandomCropPad>(SsdRandomCropPad::Options{}));
  steps.push_back(std::make_unique<RandomCropPadImage>(RandomCropPadImage::Options{}));
  steps.push_back(
      std::make_unique<SsdRandomCropFixedAspectRatio>(SsdRandomCropFixedAspectRatio::Options{}));
  steps.push_back(std::make_unique<RandomCropToAspectRatio>(RandomCropToAspectRatio::Options{}));
  steps.push_back(std::make_unique<RandomPadImage>(RandomPadImage::Options{}));
  steps.push_back(std::make_unique<RandomImageScale>(RandomImageScale::Options{}));
  steps.push_back(
      std::make_unique<ResizeImage>(ResizeImage::Options{.new_height = 33, .new_width = 47}));
  for (const auto& step : steps) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      ParsedRecord r = filled_record();
      ExampleRandom random(seed);
      step->apply(r, random, kWhere);
      expect_masks_inside_boxes(r, step->name() + " seed " + std::to_string(seed));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(MaskTransforms, StepsThatKeepTheGeometryLeaveTheMasksAlone) {
  const ParsedRecord before = filled_record();
  std::vector<std::unique_ptr<ExampleTransform>> steps;
  steps.push_back(std::make_unique<RandomJitterBoxes>(RandomJitterBoxes::Options{.ratio = 0.2f}));
  steps.push_back(std::make_unique<RandomAdjustBrightness>(RandomAdjustBrightness::Options{}));
  steps.push_back(std::make_unique<RandomBlackPatches>(RandomBlackPatches::Options{}));
  steps.push_back(std::make_unique<NormalizeImage>(NormalizeImage::Options{}));
  for (const auto& step : steps) {
    ParsedRecord r = filled_record();
    ExampleRandom random(5);
    step->apply(r, random, kWhere);
    EXPECT_EQ(r.features.at("groundtruth_instance_masks").bytes,
              before.features.at("groundtruth_instance_masks").bytes)
        << step->name();
  }
}

TEST(MaskTransforms, MasksThatDoNotMatchTheImageOrBoxesAreRefusedNamingTheStep) {
  ExampleRandom random(0);
  ParsedRecord r = filled_record();
  r.features["groundtruth_instance_masks"].shape = {2, 40, 90};
  try {
    RandomVerticalFlip({.probability = 1.0f}).apply(r, random, kWhere);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("RandomVerticalFlip"));
    EXPECT_THAT(e.what(), HasSubstr("groundtruth_instance_masks"));
    EXPECT_THAT(e.what(), HasSubstr("[2, 40, 90]"));
  }
  r = filled_record();
  r.features["groundtruth_instance_masks"].shape = {3, 60, 40};
  EXPECT_THROW(RandomHorizontalFlip({.probability = 1.0f}).apply(r, random, kWhere),
               InvalidArgument);
  EXPECT_THROW(ResizeImage({.new_height = 8, .new_width = 8}).apply(r, random, kWhere),
               InvalidArgument);

  // Declared with another rank: refused when the pipeline is built.
  const std::vector<FeatureSpec> specs = {{"image", DType::kU8, {-1, -1, 3}},
                                          {"groundtruth_boxes", DType::kF32, {-1, 4}},
                                          {"groundtruth_instance_masks", DType::kU8, {-1, -1}}};
  EXPECT_THROW(RandomCropImage({}).features(specs), InvalidArgument);
  EXPECT_THROW(RandomHorizontalFlip({}).features(specs), InvalidArgument);
}

TEST(MaskTransforms, AResizeDeclaresTheMasksAtItsSize) {
  const std::vector<FeatureSpec> specs =
      ResizeImage({.new_height = 30, .new_width = 20})
          .features({{"image", DType::kU8, {-1, -1, 3}},
                     {"groundtruth_boxes", DType::kF32, {-1, 4}},
                     {"groundtruth_instance_masks", DType::kU8, {-1, -1, -1}}});
  EXPECT_EQ(specs[2].shape, (std::vector<int64_t>{-1, 30, 20}));
  EXPECT_EQ(specs[2].dtype, DType::kU8);
}

}  // namespace
}  // namespace trainyard::detection
