// Mask R-CNN's detection masks in the detection task: the batch's "detection_masks" (box masks
// beside the packed detections, as the host's DetectionModelAdapter gives them) are reframed into
// the image and thresholded as the API's eval_util does, evaluated by coco_mask_metrics against
// the groundtruth_instance_masks under the API's DetectionMasks_ tags, drawn in the evaluation
// images, and written by predict as COCO compressed RLE ("segmentation", pycocotools' encode).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <filesystem>
#include <span>

#include "test_backends.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/coco_mask.h"
#include "trainyard/pkg/detection/instance_masks.h"
#include "trainyard/pkg/detection/visualization.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/wire/event.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

Backend& cpu() { return *test::backend("cpu"); }

std::shared_ptr<const Task> detection() { return make_task(test::backend_registry(), "detection"); }

config::Pipeline pipeline() {
  config::Pipeline p;
  p.set_task("detection");
  p.set_num_classes(2);
  p.mutable_eval_config()->add_metrics_set("coco_detection_metrics");
  p.mutable_eval_config()->add_metrics_set("coco_mask_metrics");
  return p;
}

constexpr int64_t kHeight = 20, kWidth = 40;

// The image masks (row-major u8 [H, W]) with rows [y0, y1] and columns [x0, x1] on.
std::vector<uint8_t> rectangle(int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
  std::vector<uint8_t> m(static_cast<std::size_t>(kHeight * kWidth), 0);
  for (int64_t y = y0; y <= y1; ++y) {
    for (int64_t x = x0; x <= x1; ++x) m[static_cast<std::size_t>(y * kWidth + x)] = 1;
  }
  return m;
}

// Where a box mask of ones lands in the 20 x 40 image (crop_and_resize of the unit box relative
// to the box: a pixel is inside when y / 19 and x / 39 are within the box). Box 0
// (0.1, 0.1, 0.5, 0.5): y in [1.9, 9.5], x in [3.9, 19.5]. Box 1 (0.6, 0.6, 0.9, 0.9): y in
// [11.4, 17.1], x in [23.4, 35.1].
const std::vector<uint8_t> kMask0 = rectangle(2, 9, 4, 19);
const std::vector<uint8_t> kMask1 = rectangle(12, 17, 24, 35);

// One 20 x 40 image with two groundtruth boxes (classes 1 and 2, 0-based 0 and 1) whose masks
// are `gt0` and `gt1`; detections of the two boxes (0.9 and 0.8) with box masks 3 x 3 of
// probability 0.9, and a padding row.
Batch batch(const std::vector<uint8_t>& gt0, const std::vector<uint8_t>& gt1, bool with_masks) {
  Batch b;
  b.features["image"] = Tensor::from_vector(cpu(), Shape{1, kHeight, kWidth, 3},
                                            std::vector<float>(kHeight * kWidth * 3, 128.0f));
  b.features["groundtruth_boxes"] = Tensor::from_vector(
      cpu(), Shape{1, 2, 4}, std::vector<float>{0.1f, 0.1f, 0.5f, 0.5f, 0.6f, 0.6f, 0.9f, 0.9f});
  b.features["groundtruth_classes"] =
      Tensor::from_vector(cpu(), Shape{1, 2}, std::vector<int32_t>{0, 1});
  b.features["num_groundtruth_boxes"] =
      Tensor::from_vector(cpu(), Shape{1}, std::vector<int32_t>{2});
  b.features["true_image_shape"] =
      Tensor::from_vector(cpu(), Shape{1, 3}, std::vector<int32_t>{kHeight, kWidth, 3});
  std::vector<uint8_t> planes = gt0;
  planes.insert(planes.end(), gt1.begin(), gt1.end());
  b.features["groundtruth_instance_masks"] =
      Tensor::from_vector(cpu(), Shape{1, 2, kHeight, kWidth}, planes);
  if (with_masks) {
    std::vector<float> box_masks(3 * 9, 0.9f);
    std::fill(box_masks.begin() + 18, box_masks.end(), 0.0f);  // the padding row's
    b.features["detection_masks"] = Tensor::from_vector(cpu(), Shape{1, 3, 3, 3}, box_masks);
  }
  b.ids = {"17"};
  return b;
}

Tensor detections() {
  return Tensor::from_vector(cpu(), Shape{1, 3, 6},
                             std::vector<float>{0.1f, 0.1f, 0.5f, 0.5f, 0.9f, 0,  //
                                                0.6f, 0.6f, 0.9f, 0.9f, 0.8f, 1,  //
                                                0, 0, 0, 0, 0, -1});
}

// tests/golden/mask_head/reframe/: the API's own utils/ops.py reframe_box_masks_to_image_masks
// under TensorFlow 2.21 (make_mask_head_golden.py) on 3 box masks [4, 5] into 9 x 11 images.
std::vector<float> golden(const std::string& name, std::size_t count) {
  const std::string path = std::string(TRAINYARD_SOURCE_DIR) + "/tests/golden/mask_head/" + name;
  std::ifstream in(path, std::ios::binary);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  if (bytes.size() != count * sizeof(float)) {
    throw std::runtime_error(path + ": " + std::to_string(bytes.size()) + " bytes, expected " +
                             std::to_string(count * sizeof(float)));
  }
  std::vector<float> values(count);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

// The pasted values equal the API's within float rounding (its crop_and_resize of the unit box
// relative to each box).
TEST(DetectionTaskMasks, ReframedValuesAreTheApis) {
  const std::vector<float> box_masks = golden("reframe/box_masks.f32", 60);
  const std::vector<float> boxes = golden("reframe/boxes.f32", 12);
  const Tensor got = detection::reframe_box_masks_to_image_mask_values(
      Tensor::from_vector(cpu(), Shape{3, 4, 5}, box_masks), boxes, 9, 11);
  ASSERT_EQ(got.shape(), (Shape{3, 9, 11}));
  const std::vector<float> have = got.to_vector<float>();
  const std::vector<float> want = golden("reframe/image_masks.f32", 297);
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(have[i], want[i], 1e-5) << "element " << i;
  }
  EXPECT_THROW(detection::reframe_box_masks_to_image_mask_values(
                   Tensor::from_vector(cpu(), Shape{3, 4, 5}, box_masks), boxes, 9, 0),
               InvalidArgument);
}

// The image masks are the API's reframed masks > 0.5, as eval_util thresholds them.
TEST(DetectionTaskMasks, ReframedMasksAreTheApisThresholded) {
  const std::vector<float> box_masks = golden("reframe/box_masks.f32", 60);
  const std::vector<float> boxes = golden("reframe/boxes.f32", 12);
  const std::vector<float> want = golden("reframe/image_masks.f32", 297);
  const std::vector<uint8_t> got = detection::reframe_box_masks_to_image_masks(
      Tensor::from_vector(cpu(), Shape{3, 4, 5}, box_masks), boxes, 9, 11);
  ASSERT_EQ(got.size(), want.size());
  int64_t on = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::abs(want[i] - 0.5f) < 1e-5f) continue;  // too close to call
    EXPECT_EQ(got[i], want[i] > 0.5f ? 1 : 0) << "pixel " << i << ": " << want[i];
    on += got[i];
  }
  EXPECT_GT(on, 20);
  EXPECT_LT(on, 297 - 20);
  EXPECT_THROW(detection::reframe_box_masks_to_image_masks(
                   Tensor::from_vector(cpu(), Shape{3, 4, 5}, box_masks), boxes, 0, 11),
               InvalidArgument);
}

double metric(const std::vector<Metric>& metrics, const std::string& tag) {
  for (const Metric& m : metrics) {
    if (m.tag == tag) return m.value;
  }
  ADD_FAILURE() << "no metric " << tag;
  return -2;
}

// The groundtruth masks given back as the detections' (the box masks land exactly on them):
// every mask figure with groundtruth is 1, beside the box figures; masks that miss by a row
// score lower at IoU 0.95, and masks elsewhere in the boxes score 0 while the boxes score 1.
TEST(DetectionTaskMasks, CocoMaskMetricsCompareTheReframedDetectionMasks) {
  const std::shared_ptr<const Task> task = detection();
  auto exact = task->make_evaluation(task_pipeline_of(*task, pipeline()));
  exact->add(detections(), batch(kMask0, kMask1, true), 1.0, 1);
  const std::vector<Metric> m = exact->result();
  EXPECT_NEAR(metric(m, "DetectionMasks_Precision/mAP"), 1.0, 1e-12);
  EXPECT_NEAR(metric(m, "DetectionMasks_Precision/mAP@.50IOU"), 1.0, 1e-12);
  EXPECT_NEAR(metric(m, "DetectionMasks_Precision/mAP@.75IOU"), 1.0, 1e-12);
  EXPECT_NEAR(metric(m, "DetectionMasks_Recall/AR@100"), 1.0, 1e-12);
  EXPECT_EQ(metric(m, "DetectionMasks_Precision/mAP (large)"), -1.0);
  EXPECT_NEAR(metric(m, "DetectionBoxes_Precision/mAP"), 1.0, 1e-12);

  // Groundtruth one row taller than the detection's mask (IoU 8/9 and 6/7 < 0.9).
  auto taller = task->make_evaluation(task_pipeline_of(*task, pipeline()));
  taller->add(detections(), batch(rectangle(2, 10, 4, 19), rectangle(12, 18, 24, 35), true), 1.0,
              1);
  const double ap = metric(taller->result(), "DetectionMasks_Precision/mAP");
  EXPECT_GT(ap, 0.5);
  EXPECT_LT(ap, 1.0);

  auto elsewhere = task->make_evaluation(task_pipeline_of(*task, pipeline()));
  elsewhere->add(detections(), batch(rectangle(0, 1, 0, 3), rectangle(18, 19, 36, 39), true), 1.0,
                 1);
  const std::vector<Metric> e = elsewhere->result();
  EXPECT_EQ(metric(e, "DetectionMasks_Precision/mAP"), 0.0);
  EXPECT_NEAR(metric(e, "DetectionBoxes_Precision/mAP"), 1.0, 1e-12);
}

TEST(DetectionTaskMasks, CocoMaskMetricsWithoutMasksSayWhatIsMissing) {
  const std::shared_ptr<const Task> task = detection();
  auto evaluation = task->make_evaluation(task_pipeline_of(*task, pipeline()));
  try {
    evaluation->add(detections(), batch(kMask0, kMask1, false), 1.0, 1);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("detection_masks"), std::string::npos) << e.what();
  }
  Batch no_groundtruth = batch(kMask0, kMask1, true);
  no_groundtruth.features.erase("groundtruth_instance_masks");
  auto again = task->make_evaluation(task_pipeline_of(*task, pipeline()));
  try {
    again->add(detections(), no_groundtruth, 1.0, 1);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("load_instance_masks"), std::string::npos) << e.what();
  }
}

// predict's COCO results: each detection's "segmentation" is the compressed RLE of its image
// mask at the image's size; decoded it is the reframed mask, inside the detection's bbox.
TEST(DetectionTaskMasks, PredictionsCarryEachDetectionsMaskAsCocoRle) {
  const std::shared_ptr<const Task> task = detection();
  std::ostringstream out;
  {
    auto writer = task->make_prediction_writer(task_pipeline_of(*task, pipeline()), out, 1);
    writer->write(detections(), batch(kMask0, kMask1, true));
  }
  const std::string json = out.str();
  const std::regex entry(
      R"re(\{"image_id": 17, "category_id": (\d), "bbox": \[([^\]]*)\], "score": [0-9.]+, )re"
      R"re("segmentation": \{"size": \[(\d+), (\d+)\], "counts": "([^"]*)"\}\})re");
  std::vector<std::smatch> found;
  for (auto it = std::sregex_iterator(json.begin(), json.end(), entry);
       it != std::sregex_iterator(); ++it) {
    found.push_back(*it);
  }
  ASSERT_EQ(found.size(), 2u) << json;
  for (std::size_t k = 0; k < 2; ++k) {
    const std::smatch& m = found[k];
    EXPECT_EQ(m[1].str(), std::to_string(k + 1));
    EXPECT_EQ(m[3].str(), "20");
    EXPECT_EQ(m[4].str(), "40");
    // JSON escapes the one backslash the compressed counts may hold.
    const std::string counts = std::regex_replace(m[5].str(), std::regex(R"(\\\\)"), "\\");
    const detection::Rle rle = detection::rle_from_string(counts, kHeight, kWidth);
    const std::vector<uint8_t> column_major = detection::rle_decode(rle);
    const std::vector<uint8_t>& want = k == 0 ? kMask0 : kMask1;
    std::istringstream bbox(m[2].str());
    double x = 0, y = 0, w = 0, h = 0;
    char comma = 0;
    bbox >> x >> comma >> y >> comma >> w >> comma >> h;
    for (int64_t py = 0; py < kHeight; ++py) {
      for (int64_t px = 0; px < kWidth; ++px) {
        const uint8_t on = column_major[static_cast<std::size_t>(px * kHeight + py)];
        ASSERT_EQ(on, want[static_cast<std::size_t>(py * kWidth + px)])
            << k << ": " << py << ", " << px;
        if (on != 0) {
          EXPECT_GE(px + 1, x);
          EXPECT_LE(px, x + w);
          EXPECT_GE(py + 1, y);
          EXPECT_LE(py, y + h);
        }
      }
    }
    // The string round-trips.
    EXPECT_EQ(detection::rle_to_string(rle), counts);
  }
}

// The evaluation image tints each detected mask in its class's colour on the left panel
// (draw_mask_on_image_array's blend), inside the mask only.
TEST(DetectionTaskMasks, VisualizationTintsTheDetectionMasks) {
  const std::shared_ptr<const Task> task = detection();
  config::Pipeline p = pipeline();
  p.mutable_eval_config()->set_num_visualizations(1);
  auto evaluation = task->make_evaluation(task_pipeline_of(*task, p));
  evaluation->add(detections(), batch(kMask0, kMask1, true), 1.0, 1);
  const fs::path dir =
      fs::temp_directory_path() / ("detection_masks_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::string path;
  {
    SummaryWriter writer(dir.string());
    evaluation->write_summaries(1, writer);
    path = writer.path();
    writer.close();
  }
  EventFileReader reader(path);
  wire::tf::Event event;
  std::string png;
  while (reader.next(&event)) {
    for (const auto& v : event.summary().value()) {
      if (v.has_image()) png = v.image().encoded_image_string();
    }
  }
  fs::remove_all(dir);
  ASSERT_FALSE(png.empty());
  const image::DecodedImage decoded = image::decode_image(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(png.data()), png.size()), 3,
      "the visualization");
  ASSERT_EQ(decoded.width, 2 * kWidth);
  auto red = [&](int64_t y, int64_t x) {
    return int{decoded.pixels[static_cast<std::size_t>((y * 2 * kWidth + x) * 3)]};
  };
  // Inside mask 0 (rows 2..9, columns 4..19), away from the box's outline: tinted red.
  EXPECT_EQ(red(6, 10), int{detection::blend_mask_channel(128, 255)});
  EXPECT_NE(red(6, 10), 128);
  // Outside every mask and box: the image.
  EXPECT_EQ(red(0, 30), 128);
  EXPECT_EQ(red(6, 22), 128);
  // The right panel (groundtruth) is not tinted in red.
  EXPECT_NE(red(6, kWidth + 10), int{detection::blend_mask_channel(128, 255)});
}

}  // namespace
}  // namespace trainyard
