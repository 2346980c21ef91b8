// DetectionModelAdapter (internal to the core; the test builds a copy) with a batch that the
// input padded to its largest image (pad_to_largest, keep_aspect_ratio_resizer): the model's
// preprocess() sees each image alone at its true_image_shape, as the Object Detection API's
// trainer preprocesses image by image; what it makes is stacked, zero-padded to the largest,
// and loss() and postprocess() get each image's own true_image_shapes. A batch of images of
// one size still takes one preprocess() call, and a true_image_shape outside the batch's images
// is an error naming the image.
#include "registry/detection_model_adapter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using ::testing::HasSubstr;

Backend& cpu() { return *test::backend("cpu"); }

// A model whose preprocess() doubles each side (nearest neighbour), so images of different
// sizes stay different, and records what each call got; predict() passes the images on and
// postprocess() gives one detection per image whose score is the sum of its pixels.
class RecordingModel final : public DetectionModel {
 public:
  std::vector<std::vector<float>> preprocess_inputs;  // per call, its pixels
  std::vector<Shape> preprocess_shapes;
  std::vector<int32_t> loss_shapes, postprocess_shapes;
  std::vector<float> postprocess_images;
  Shape postprocess_images_shape;

  int64_t num_classes() const override { return 2; }

  PreprocessedImages preprocess(ModelContext& ctx, const Tensor& images) override {
    preprocess_shapes.push_back(images.shape());
    preprocess_inputs.push_back(ops::cast(images, DType::kF32).to_vector<float>());
    const Shape& s = images.shape();
    const std::vector<float> in = preprocess_inputs.back();
    std::vector<float> out(static_cast<std::size_t>(s[0] * 4 * s[1] * s[2] * s[3]));
    for (int64_t b = 0; b < s[0]; ++b) {
      for (int64_t y = 0; y < 2 * s[1]; ++y) {
        for (int64_t x = 0; x < 2 * s[2]; ++x) {
          for (int64_t c = 0; c < s[3]; ++c) {
            out[static_cast<std::size_t>(((b * 2 * s[1] + y) * 2 * s[2] + x) * s[3] + c)] =
                in[static_cast<std::size_t>(((b * s[1] + y / 2) * s[2] + x / 2) * s[3] + c)];
          }
        }
      }
    }
    PreprocessedImages pre;
    pre.images = Tensor::from_vector(ctx.backend(), Shape{s[0], 2 * s[1], 2 * s[2], s[3]}, out);
    std::vector<int32_t> shapes;
    for (int64_t b = 0; b < s[0]; ++b) {
      shapes.insert(shapes.end(), {static_cast<int32_t>(2 * s[1]), static_cast<int32_t>(2 * s[2]),
                                   static_cast<int32_t>(s[3])});
    }
    pre.true_image_shapes = Tensor::from_vector(ctx.backend(), Shape{s[0], 3}, shapes);
    return pre;
  }

  // A Mask R-CNN stand-in: "mask_predictions" from predict(), "detection_masks" [B, 1, 2, 2]
  // (values 0.25 each) from postprocess().
  bool predicts_masks = false;

  TensorDict predict(ModelContext&, const PreprocessedImages& inputs, Mode) override {
    TensorDict out{{"images", inputs.images}, {"class_predictions_with_background", inputs.images}};
    if (predicts_masks) out["mask_predictions"] = inputs.images;
    return out;
  }

  TensorDict postprocess(ModelContext& ctx, const TensorDict& prediction,
                         const Tensor& true_image_shapes) override {
    postprocess_shapes = true_image_shapes.to_vector<int32_t>();
    const Tensor& images = prediction.at("images");
    postprocess_images = images.to_vector<float>();
    postprocess_images_shape = images.shape();
    const int64_t n = images.shape()[0];
    std::vector<float> boxes, scores, classes(static_cast<std::size_t>(n), 0.0f),
        counts(static_cast<std::size_t>(n), 1.0f);
    const auto per_image = postprocess_images.size() / static_cast<std::size_t>(n);
    for (int64_t b = 0; b < n; ++b) {
      boxes.insert(boxes.end(), {0.0f, 0.0f, 1.0f, 1.0f});
      float sum = 0.0f;
      for (std::size_t i = 0; i < per_image; ++i) {
        sum += postprocess_images[static_cast<std::size_t>(b) * per_image + i];
      }
      scores.push_back(sum);
    }
    Backend& backend = ctx.backend();
    TensorDict out{{"detection_boxes", Tensor::from_vector(backend, Shape{n, 1, 4}, boxes)},
                   {"detection_scores", Tensor::from_vector(backend, Shape{n, 1}, scores)},
                   {"detection_classes", Tensor::from_vector(backend, Shape{n, 1}, classes)},
                   {"num_detections", Tensor::from_vector(backend, Shape{n}, counts)}};
    if (predicts_masks) {
      out["detection_masks"] = Tensor::from_vector(
          backend, Shape{n, 1, 2, 2}, std::vector<float>(static_cast<std::size_t>(n * 4), 0.25f));
    }
    return out;
  }

  std::map<std::string, Tensor> loss_masks;  // loss()'s groundtruth_instance_masks/<b>

  TensorDict loss(ModelContext& ctx, const TensorDict& dict,
                  const Tensor& true_image_shapes) override {
    loss_shapes = true_image_shapes.to_vector<int32_t>();
    for (const auto& [key, value] : dict) {
      if (key.rfind("groundtruth_instance_masks/", 0) == 0) loss_masks[key] = value;
    }
    return {{"Loss/total", Tensor::from_vector(ctx.backend(), Shape{}, std::vector<float>{1.0f})}};
  }

  void provide_groundtruth(Groundtruth) override {}
  std::map<std::string, std::string> restore_map(const std::string&, bool) override { return {}; }
};

float pixel(int64_t image, int64_t y, int64_t x, int64_t c) {
  return static_cast<float>(1 + (image * 31 + y * 7 + x * 3 + c) % 200);
}

// Images of sizes `sizes` ({h, w}) at the top left of the batch's largest, zeros around them,
// with their true_image_shape and one groundtruth box each.
Batch padded_batch(const std::vector<std::pair<int64_t, int64_t>>& sizes) {
  int64_t height = 0, width = 0;
  for (const auto& [h, w] : sizes) {
    height = std::max(height, h);
    width = std::max(width, w);
  }
  const auto n = static_cast<int64_t>(sizes.size());
  std::vector<float> pixels(static_cast<std::size_t>(n * height * width * 3), 0.0f);
  std::vector<int32_t> shapes;
  for (int64_t b = 0; b < n; ++b) {
    const auto [h, w] = sizes[static_cast<std::size_t>(b)];
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t c = 0; c < 3; ++c) {
          pixels[static_cast<std::size_t>(((b * height + y) * width + x) * 3 + c)] =
              pixel(b, y, x, c);
        }
      }
    }
    shapes.insert(shapes.end(), {static_cast<int32_t>(h), static_cast<int32_t>(w), 3});
  }
  Batch batch;
  batch.features.emplace("image", Tensor::from_vector(cpu(), Shape{n, height, width, 3}, pixels));
  batch.features.emplace("true_image_shape", Tensor::from_vector(cpu(), Shape{n, 3}, shapes));
  std::vector<float> boxes;
  for (int64_t b = 0; b < n; ++b) boxes.insert(boxes.end(), {0.1f, 0.1f, 0.5f, 0.5f});
  batch.features.emplace("groundtruth_boxes", Tensor::from_vector(cpu(), Shape{n, 1, 4}, boxes));
  batch.features.emplace("groundtruth_classes",
                         Tensor::from_vector(cpu(), Shape{n, 1}, std::vector<int32_t>(n, 0)));
  batch.features.emplace("num_groundtruth_boxes",
                         Tensor::from_vector(cpu(), Shape{n}, std::vector<int32_t>(n, 1)));
  return batch;
}

TEST(DetectionModelAdapter, PaddedImagesArePreprocessedEachAtItsTrueShapeAndStacked) {
  auto model = std::make_shared<RecordingModel>();
  DetectionModelAdapter adapter(model);
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  NoGradScope no_grad;
  const ModelOutput out = adapter.forward(ctx, padded_batch({{3, 5}, {4, 2}}), Mode::kEval);

  // One preprocess() per image, each cut to its own size with its own pixels.
  ASSERT_EQ(model->preprocess_shapes.size(), 2u);
  EXPECT_EQ(model->preprocess_shapes[0], (Shape{1, 3, 5, 3}));
  EXPECT_EQ(model->preprocess_shapes[1], (Shape{1, 4, 2, 3}));
  for (int64_t b = 0; b < 2; ++b) {
    const Shape& s = model->preprocess_shapes[static_cast<std::size_t>(b)];
    for (int64_t y = 0; y < s[1]; ++y) {
      for (int64_t x = 0; x < s[2]; ++x) {
        for (int64_t c = 0; c < 3; ++c) {
          ASSERT_EQ(model->preprocess_inputs[static_cast<std::size_t>(b)]
                                            [static_cast<std::size_t>((y * s[2] + x) * 3 + c)],
                    pixel(b, y, x, c));
        }
      }
    }
  }
  // Stacked at the largest preprocessed size (8 x 10), zeros around each image.
  EXPECT_EQ(model->postprocess_images_shape, (Shape{2, 8, 10, 3}));
  const std::vector<int32_t> true_shapes = {6, 10, 3, 8, 4, 3};
  EXPECT_EQ(model->loss_shapes, true_shapes);
  EXPECT_EQ(model->postprocess_shapes, true_shapes);
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t h = true_shapes[static_cast<std::size_t>(b * 3)];
    const int64_t w = true_shapes[static_cast<std::size_t>(b * 3 + 1)];
    for (int64_t y = 0; y < 8; ++y) {
      for (int64_t x = 0; x < 10; ++x) {
        const float got =
            model->postprocess_images[static_cast<std::size_t>(((b * 8 + y) * 10 + x) * 3)];
        ASSERT_EQ(got, y < h && x < w ? pixel(b, y / 2, x / 2, 0) : 0.0f)
            << "image " << b << " y " << y << " x " << x;
      }
    }
  }
  EXPECT_EQ(out.predictions.shape(), (Shape{2, 1, kPackedDetectionWidth}));
}

TEST(DetectionModelAdapter, ImagesOfOneSizeTakeOnePreprocessCall) {
  auto model = std::make_shared<RecordingModel>();
  DetectionModelAdapter adapter(model);
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  NoGradScope no_grad;
  adapter.forward(ctx, padded_batch({{3, 5}, {3, 5}}), Mode::kEval);
  ASSERT_EQ(model->preprocess_shapes.size(), 1u);
  EXPECT_EQ(model->preprocess_shapes[0], (Shape{2, 3, 5, 3}));
  EXPECT_EQ(model->postprocess_shapes, (std::vector<int32_t>{6, 10, 3, 6, 10, 3}));
}

TEST(DetectionModelAdapter, TrueImageShapeOutsideTheBatchIsAnErrorNamingTheImage) {
  auto model = std::make_shared<RecordingModel>();
  DetectionModelAdapter adapter(model);
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  Batch batch = padded_batch({{3, 5}, {4, 2}});
  batch.features.at("true_image_shape") =
      Tensor::from_vector(cpu(), Shape{2, 3}, std::vector<int32_t>{3, 5, 3, 4, 6, 3});
  NoGradScope no_grad;
  try {
    adapter.forward(ctx, batch, Mode::kEval);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("image 1 of the batch has true_image_shape 4 x 6"));
  }
}

// The batch's groundtruth_instance_masks [B, boxes, H, W] reach loss() as each image's
// "groundtruth_instance_masks/<b>", cut to its box count and true extent.
TEST(DetectionModelAdapter, LossGetsEachImagesInstanceMasksCutToItsBoxesAndExtent) {
  auto model = std::make_shared<RecordingModel>();
  model->predicts_masks = true;
  DetectionModelAdapter adapter(model);
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  NoGradScope no_grad;
  Batch batch = padded_batch({{3, 5}, {4, 2}});
  // Two mask rows per image (the second is padding: one box each), planes of the batch's 4 x 5.
  std::vector<uint8_t> masks(2 * 2 * 4 * 5);
  for (std::size_t i = 0; i < masks.size(); ++i) masks[i] = static_cast<uint8_t>(i % 251);
  batch.features.emplace("groundtruth_instance_masks",
                         Tensor::from_vector(cpu(), Shape{2, 2, 4, 5}, masks));
  adapter.forward(ctx, batch, Mode::kEval);
  ASSERT_EQ(model->loss_masks.size(), 2u);
  const Tensor& first = model->loss_masks.at("groundtruth_instance_masks/0");
  const Tensor& second = model->loss_masks.at("groundtruth_instance_masks/1");
  ASSERT_EQ(first.shape(), (Shape{1, 3, 5}));
  ASSERT_EQ(second.shape(), (Shape{1, 4, 2}));
  const std::vector<uint8_t> a = first.to_vector<uint8_t>();
  const std::vector<uint8_t> b = second.to_vector<uint8_t>();
  for (int64_t y = 0; y < 3; ++y) {
    for (int64_t x = 0; x < 5; ++x) {
      EXPECT_EQ(a[static_cast<std::size_t>(y * 5 + x)], masks[static_cast<std::size_t>(y * 5 + x)]);
    }
  }
  for (int64_t y = 0; y < 4; ++y) {
    for (int64_t x = 0; x < 2; ++x) {
      EXPECT_EQ(b[static_cast<std::size_t>(y * 2 + x)],
                masks[static_cast<std::size_t>(40 + y * 5 + x)]);
    }
  }
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

Batch batch_with_masks() {
  Batch batch = padded_batch({{3, 5}, {4, 2}});
  batch.features.emplace(
      "groundtruth_instance_masks",
      Tensor::from_vector(cpu(), Shape{2, 2, 4, 5}, std::vector<uint8_t>(80, 1)));
  return batch;
}

// A model without a mask head (no "mask_predictions") gets no groundtruth_instance_masks/<b>,
// even when the batch carries masks, and gives no detection_masks.
TEST(DetectionModelAdapter, InstanceMasksAreSlicedOnlyForAModelThatPredictsMasks) {
  auto model = std::make_shared<RecordingModel>();
  DetectionModelAdapter adapter(model);
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  NoGradScope no_grad;
  const Batch batch = batch_with_masks();
  adapter.forward(ctx, batch, Mode::kEval);
  EXPECT_TRUE(model->loss_masks.empty());
  EXPECT_TRUE(adapter.last_outputs().empty());
}

// A postprocess() with detection_masks has them kept beside the packed detections, as given;
// a later forward in kTrain leaves none.
TEST(DetectionModelAdapter, DetectionMasksAreKeptBesideThePackedDetections) {
  auto model = std::make_shared<RecordingModel>();
  model->predicts_masks = true;
  DetectionModelAdapter adapter(model);
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  NoGradScope no_grad;
  const Batch batch = batch_with_masks();
  const ModelOutput out = adapter.forward(ctx, batch, Mode::kPredict);
  EXPECT_EQ(out.predictions.shape(), (Shape{2, 1, kPackedDetectionWidth}));
  ASSERT_EQ(adapter.last_outputs().count("detection_masks"), 1u);
  const Tensor& masks = adapter.last_outputs().at("detection_masks");
  EXPECT_EQ(masks.shape(), (Shape{2, 1, 2, 2}));
  EXPECT_EQ(masks.to_vector<float>(), std::vector<float>(8, 0.25f));
  adapter.forward(ctx, batch, Mode::kTrain);
  EXPECT_TRUE(adapter.last_outputs().empty());
}

}  // namespace
}  // namespace trainyard
