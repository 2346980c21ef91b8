// The detection task's evaluation: detections and groundtruth in the batch's layout (packed
// detections, padded groundtruth in normalized coordinates) reach the Object Detection API's
// evaluators in pixels of the decoded image with 1-based classes, the metrics come out under
// the API's tags with the loss, and num_visualizations images with their boxes drawn are
// written to the event file as "Detections_Left_Groundtruth_Right/<i>".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>
#include "test_backends.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/wire/event.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

Backend& cpu() { return *test::backend("cpu"); }

std::shared_ptr<const Task> detection() { return make_task(test::backend_registry(), "detection"); }

config::Pipeline pipeline(int visualizations) {
  config::Pipeline p;
  p.set_task("detection");
  p.set_num_classes(2);
  p.mutable_eval_config()->add_metrics_set("pascal_voc_detection_metrics");
  p.mutable_eval_config()->set_num_visualizations(visualizations);
  return p;
}

// One 20 x 40 gray image of 200 x 400 pixels as decoded: a groundtruth box of class 1 (0-based
// 0) and a second of class 2; detections: the first box found (score 0.9), a false positive
// of class 2 (0.8), one below the drawing threshold (0.3), and padding.
Batch batch() {
  Batch b;
  b.features["image"] =
      Tensor::from_vector(cpu(), Shape{1, 20, 40, 3}, std::vector<float>(20 * 40 * 3, 128.0f));
  b.features["groundtruth_boxes"] = Tensor::from_vector(
      cpu(), Shape{1, 3, 4},
      std::vector<float>{0.1f, 0.1f, 0.5f, 0.5f, 0.6f, 0.6f, 0.9f, 0.9f, 0, 0, 0, 0});
  b.features["groundtruth_classes"] =
      Tensor::from_vector(cpu(), Shape{1, 3}, std::vector<int32_t>{0, 1, 0});
  b.features["num_groundtruth_boxes"] =
      Tensor::from_vector(cpu(), Shape{1}, std::vector<int32_t>{2});
  b.features["true_image_shape"] =
      Tensor::from_vector(cpu(), Shape{1, 3}, std::vector<int32_t>{200, 400, 3});
  b.ids = {"img-1"};
  return b;
}

Tensor detections() {
  return Tensor::from_vector(cpu(), Shape{1, 4, 6},
                             std::vector<float>{0.1f, 0.1f, 0.5f, 0.5f, 0.9f, 0,  //
                                                0.1f, 0.6f, 0.3f, 0.9f, 0.8f, 1,  //
                                                0.6f, 0.6f, 0.9f, 0.9f, 0.3f, 1,  //
                                                0,    0,    0,    0,    0,    -1});
}

double metric(const std::vector<Metric>& metrics, const std::string& tag) {
  for (const Metric& m : metrics) {
    if (m.tag == tag) return m.value;
  }
  ADD_FAILURE() << "no metric " << tag;
  return -1;
}

// The image summaries `evaluation` writes at step 7, read back from its event file (in a fresh
// directory named from `prefix`, removed after).
std::vector<wire::tf::Summary::Value> written_images(const TaskEvaluation& evaluation,
                                                     const std::string& prefix) {
  const fs::path dir = fs::temp_directory_path() / (prefix + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::string path;
  {
    SummaryWriter writer(dir.string());
    evaluation.write_summaries(7, writer);
    path = writer.path();
    writer.close();
  }
  EventFileReader reader(path);
  wire::tf::Event event;
  std::vector<wire::tf::Summary::Value> images;
  while (reader.next(&event)) {
    for (const auto& v : event.summary().value()) {
      if (v.has_image()) images.push_back(v);
    }
  }
  fs::remove_all(dir);
  return images;
}

image::DecodedImage decoded_png(const wire::tf::Summary::Value& value) {
  const std::string& png = value.image().encoded_image_string();
  return image::decode_image(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(png.data()), png.size()), 3,
      "the visualization");
}

TEST(DetectionTask, EvaluationFeedsTheApisEvaluatorsAndReportsItsTags) {
  const std::shared_ptr<const Task> task_object = detection();
  const Task& task = *task_object;
  auto evaluation = task.make_evaluation(task_pipeline_of(task, pipeline(0)));
  evaluation->add(detections(), batch(), /*loss=*/2.5, /*batch_size=*/1);
  const std::vector<Metric> m = evaluation->result();
  // Class 1: its one box found first: AP 1. Class 2: the false positive (0.8) ranks above the
  // true one (0.3): precision 1/2 at recall 1, AP 0.5.
  EXPECT_DOUBLE_EQ(metric(m, "PascalBoxes_PerformanceByCategory/AP@0.5IOU/1"), 1.0);
  EXPECT_DOUBLE_EQ(metric(m, "PascalBoxes_PerformanceByCategory/AP@0.5IOU/2"), 0.5);
  EXPECT_DOUBLE_EQ(metric(m, "PascalBoxes_Precision/mAP@0.5IOU"), 0.75);
  EXPECT_DOUBLE_EQ(metric(m, "loss"), 2.5);
}

TEST(DetectionTask, IncludeMetricsPerCategoryAddsEachCategorysCocoMap) {
  // eval_config.include_metrics_per_category reaches the COCO evaluator through the pipeline.
  const std::shared_ptr<const Task> task = detection();
  config::Pipeline p = pipeline(0);
  p.mutable_eval_config()->clear_metrics_set();
  p.mutable_eval_config()->add_metrics_set("coco_detection_metrics");
  p.mutable_eval_config()->set_include_metrics_per_category(true);
  auto evaluation = task->make_evaluation(task_pipeline_of(*task, p));
  evaluation->add(detections(), batch(), /*loss=*/2.5, /*batch_size=*/1);
  const std::vector<Metric> m = evaluation->result();
  // Class 1: found exactly, ranked first: 1 at every IoU threshold. Class 2: the false positive
  // (0.8) ranks above the true one (0.3): 0.5 at every threshold (pycocotools' envelope).
  EXPECT_NEAR(metric(m, "DetectionBoxes_PerformanceByCategory/mAP/1"), 1.0, 1e-12);
  EXPECT_NEAR(metric(m, "DetectionBoxes_PerformanceByCategory/mAP/2"), 0.5, 1e-12);
  EXPECT_NEAR(metric(m, "DetectionBoxes_Precision/mAP"), 0.75, 1e-12);

  p.mutable_eval_config()->set_include_metrics_per_category(false);
  auto plain = task->make_evaluation(task_pipeline_of(*task, p));
  plain->add(detections(), batch(), 2.5, 1);
  for (const Metric& metric : plain->result()) {
    EXPECT_EQ(metric.tag.find("PerformanceByCategory"), std::string::npos) << metric.tag;
  }
}

// open_images_V2_detection_metrics (and its former name) on the same image with the second
// box (class 2) a group-of box: the detection inside it (0.3) is ignored, the one outside (0.8)
// has no single-object box to match, and class 2, with no instance left, is NaN and out of the
// mean. Without the groundtruth_group_of feature the box counts as one object (as Pascal).
TEST(DetectionTask, OpenImagesEvaluationReadsTheGroupOfFeature) {
  const std::shared_ptr<const Task> task = detection();
  for (const char* name : {"open_images_V2_detection_metrics", "oid_V2_detection_metrics"}) {
    SCOPED_TRACE(name);
    config::Pipeline p = pipeline(0);
    p.mutable_eval_config()->clear_metrics_set();
    p.mutable_eval_config()->add_metrics_set(name);
    Batch with_group_of = batch();
    with_group_of.features["groundtruth_group_of"] =
        Tensor::from_vector(cpu(), Shape{1, 3}, std::vector<int32_t>{0, 1, 0});
    auto evaluation = task->make_evaluation(task_pipeline_of(*task, p));
    evaluation->add(detections(), with_group_of, 1.0, 1);
    std::vector<Metric> m = evaluation->result();
    EXPECT_DOUBLE_EQ(metric(m, "OpenImagesV2_PerformanceByCategory/AP@0.5IOU/1"), 1.0);
    EXPECT_TRUE(std::isnan(metric(m, "OpenImagesV2_PerformanceByCategory/AP@0.5IOU/2")));
    EXPECT_DOUBLE_EQ(metric(m, "OpenImagesV2_Precision/mAP@0.5IOU"), 1.0);

    auto without = task->make_evaluation(task_pipeline_of(*task, p));
    without->add(detections(), batch(), 1.0, 1);
    m = without->result();
    EXPECT_DOUBLE_EQ(metric(m, "OpenImagesV2_PerformanceByCategory/AP@0.5IOU/2"), 0.5);
    EXPECT_DOUBLE_EQ(metric(m, "OpenImagesV2_Precision/mAP@0.5IOU"), 0.75);
  }
}

TEST(DetectionTask, VisualizationsDrawDetectionsLeftAndGroundtruthRight) {
  const std::shared_ptr<const Task> task = detection();
  auto evaluation = task->make_evaluation(task_pipeline_of(*task, pipeline(1)));
  evaluation->add(detections(), batch(), 1.0, 1);
  Batch second = batch();
  second.ids = {"img-2"};
  evaluation->add(detections(), second, 1.0, 1);  // past num_visualizations: not drawn
  const std::vector<wire::tf::Summary::Value> images =
      written_images(*evaluation, "detection_task_test_");
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].tag(), "Detections_Left_Groundtruth_Right/0");
  const image::DecodedImage decoded = decoded_png(images[0]);
  ASSERT_EQ(decoded.height, 20);
  ASSERT_EQ(decoded.width, 80);
  auto pixel = [&](int64_t y, int64_t x) {
    const auto at = static_cast<std::size_t>((y * 80 + x) * 3);
    return std::vector<int>{int{decoded.pixels[at]}, int{decoded.pixels[at + 1]},
                            int{decoded.pixels[at + 2]}};
  };
  // The first detection's top-left corner (row 2, column 4) is coloured on the left; the
  // groundtruth box's corner on the right is black; the 0.3 detection is not drawn.
  EXPECT_NE(pixel(2, 4), (std::vector<int>{128, 128, 128}));
  EXPECT_EQ(pixel(2, 40 + 4), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(pixel(12, 24 + 4), (std::vector<int>{128, 128, 128}))
      << "a detection below min_score_threshold was drawn";
}

// An image that its batch padded to the largest (true_image_shape 10 x 20 in a 20 x 40 batch)
// is drawn at its own size, with its boxes (normalized to that size) where they belong.
TEST(DetectionTask, VisualizationOfAPaddedImageShowsItAtItsTrueShape) {
  const std::shared_ptr<const Task> task = detection();
  auto evaluation = task->make_evaluation(task_pipeline_of(*task, pipeline(1)));
  Batch padded = batch();
  std::vector<float> pixels(20 * 40 * 3, 0.0f);
  for (int y = 0; y < 10; ++y) {
    for (int x = 0; x < 20 * 3; ++x) pixels[static_cast<std::size_t>(y * 40 * 3 + x)] = 128.0f;
  }
  padded.features["image"] = Tensor::from_vector(cpu(), Shape{1, 20, 40, 3}, pixels);
  padded.features["true_image_shape"] =
      Tensor::from_vector(cpu(), Shape{1, 3}, std::vector<int32_t>{10, 20, 3});
  evaluation->add(detections(), padded, 1.0, 1);
  const std::vector<wire::tf::Summary::Value> images =
      written_images(*evaluation, "detection_task_padded_");
  ASSERT_EQ(images.size(), 1u);
  const image::DecodedImage decoded = decoded_png(images[0]);
  ASSERT_EQ(decoded.height, 10);
  ASSERT_EQ(decoded.width, 40);
  auto pixel = [&](int64_t y, int64_t x) {
    const auto at = static_cast<std::size_t>((y * 40 + x) * 3);
    return std::vector<int>{int{decoded.pixels[at]}, int{decoded.pixels[at + 1]},
                            int{decoded.pixels[at + 2]}};
  };
  EXPECT_NE(pixel(1, 2), (std::vector<int>{128, 128, 128}));   // the detection's corner
  EXPECT_EQ(pixel(1, 20 + 2), (std::vector<int>{0, 0, 0}));    // the groundtruth's
  EXPECT_EQ(pixel(9, 19), (std::vector<int>{128, 128, 128}));  // the image, not its padding
  EXPECT_EQ(pixel(9, 39), (std::vector<int>{128, 128, 128}));
}

// groundtruth_instance_masks (u8 [B, rows, H, W], padded as the boxes) are tinted black, the
// groundtruth boxes' colour, on the right, as draw_mask_on_image_array blends at alpha 0.4:
// gray 128 becomes 77 (tests/unit/detection_visualization_test.cc pins the blend to the API's).
// The padding row's mask (all ones) is not drawn, nor is any mask on the left.
TEST(DetectionTask, VisualizationTintsTheGroundtruthMasks) {
  const std::shared_ptr<const Task> task = detection();
  auto evaluation = task->make_evaluation(task_pipeline_of(*task, pipeline(1)));
  Batch with_masks = batch();
  std::vector<uint8_t> masks(3 * 20 * 40, 0);
  for (int y = 5; y <= 7; ++y) {
    for (int x = 10; x <= 12; ++x) masks[static_cast<std::size_t>(y * 40 + x)] = 1;
  }
  masks[static_cast<std::size_t>(20 * 40 + 15 * 40 + 30)] = 255;  // any value but 0 is on
  std::fill(masks.begin() + 2 * 20 * 40, masks.end(), uint8_t{1});
  with_masks.features["groundtruth_instance_masks"] =
      Tensor::from_vector(cpu(), Shape{1, 3, 20, 40}, masks);
  evaluation->add(detections(), with_masks, 1.0, 1);
  const std::vector<wire::tf::Summary::Value> images =
      written_images(*evaluation, "detection_task_masks_");
  ASSERT_EQ(images.size(), 1u);
  const image::DecodedImage decoded = decoded_png(images[0]);
  ASSERT_EQ(decoded.height, 20);
  ASSERT_EQ(decoded.width, 80);
  auto pixel = [&](int64_t y, int64_t x) {
    const auto at = static_cast<std::size_t>((y * 80 + x) * 3);
    return std::vector<int>{int{decoded.pixels[at]}, int{decoded.pixels[at + 1]},
                            int{decoded.pixels[at + 2]}};
  };
  const std::vector<int> gray{128, 128, 128}, tinted{77, 77, 77};
  for (int y = 5; y <= 7; ++y) {
    for (int x = 10; x <= 12; ++x) {
      EXPECT_EQ(pixel(y, 40 + x), tinted) << y << ", " << x;
      EXPECT_EQ(pixel(y, x), gray) << "the left panel was tinted at " << y << ", " << x;
    }
  }
  EXPECT_EQ(pixel(15, 40 + 30), tinted);
  EXPECT_EQ(pixel(15, 40 + 31), gray);
  EXPECT_EQ(pixel(8, 40 + 12), gray);
  EXPECT_EQ(pixel(19, 40 + 1), gray) << "the padding row's mask was drawn";

  // Masks that are not [B, rows, H, W] are an error naming the feature.
  Batch bad = batch();
  bad.features["groundtruth_instance_masks"] =
      Tensor::from_vector(cpu(), Shape{1, 20, 40}, std::vector<uint8_t>(20 * 40, 0));
  auto again = task->make_evaluation(task_pipeline_of(*task, pipeline(1)));
  try {
    again->add(detections(), bad, 1.0, 1);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'groundtruth_instance_masks' is [1, 20, 40]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trainyard
