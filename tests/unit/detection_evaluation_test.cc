// pkg/detection evaluators: the Pascal VOC evaluator against APs computed by hand (difficult
// boxes, duplicate detections, invalid boxes, an image without groundtruth, a category without
// groundtruth), utils/metrics' AP rule, the COCO evaluator's figures on cases small enough to
// check by hand and its summary lines (tests/interop/coco_eval_interop.py compares it with
// pycocotools itself), the metrics_set factory and argument errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "pkg_detection_goldens.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/coco_evaluation.h"
#include "trainyard/pkg/detection/detection_evaluation.h"

// The cases name only the fields they set.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace trainyard::detection {
namespace {

using ::testing::HasSubstr;

const std::vector<Category> kCategories = {{1, "cat"}, {2, "dog"}, {3, "bird"}};

TEST(ComputeAveragePrecisionTest, AreaUnderTheMonotoneEnvelope) {
  // precision 1, .5, 1/3, .5 at recall 1/3, 1/3, 1/3, 2/3: the envelope is 1 up to 1/3, .5 up
  // to 2/3 and 0 beyond.
  EXPECT_NEAR(
      compute_average_precision({1.0, 0.5, 1.0 / 3, 0.5}, {1.0 / 3, 1.0 / 3, 1.0 / 3, 2.0 / 3}),
      0.5, 1e-12);
  EXPECT_EQ(compute_average_precision({}, {}), 0.0);
  std::vector<double> precision, recall;
  // Scores out of order; the equal scores 0.5 take the later one first (a false positive).
  compute_precision_recall({0.5, 0.9, 0.5}, {1, 1, 0}, 4, &precision, &recall);
  EXPECT_THAT(precision, ::testing::ElementsAre(1.0, 0.5, 2.0 / 3));
  EXPECT_THAT(recall, ::testing::ElementsAre(0.25, 0.25, 0.5));
  EXPECT_THROW(compute_precision_recall({0.5}, {1}, 0, &precision, &recall), InvalidArgument);
}

// Image 1: cats G1 [0,0,10,10], G2 (difficult) [20,20,30,30], G3 [50,50,60,60]; a dog
// [0,0,20,20]. Image 2: a cat [0,0,10,10]. Image 3 has no groundtruth.
void add_pascal_case(PascalDetectionEvaluator& evaluator) {
  evaluator.add_groundtruth(int64_t{1},
                            {.boxes = {0, 0, 10, 10, 20, 20, 30, 30, 50, 50, 60, 60, 0, 0, 20, 20},
                             .classes = {1, 1, 1, 2},
                             .difficult = {0, 1, 0, 0}});
  evaluator.add_groundtruth(int64_t{2}, {.boxes = {0, 0, 10, 10}, .classes = {1}});
  evaluator.add_detections(int64_t{1},
                           {.boxes = {0,   0,   10,  10,   // cat 0.9: G1, true positive
                                      0,   0,   10,  10,   // cat 0.8: G1 again, false positive
                                      20,  20,  30,  30,   // cat 0.7: difficult, dropped
                                      100, 100, 110, 110,  // cat 0.6: nothing, false positive
                                      5,   5,   5,   8,    // cat 0.95: empty box, dropped
                                      0,   0,   20,  10,   // dog 0.3: IoU exactly 0.5, true
                                      0,   0,   5,   5},   // bird 0.4: no bird anywhere
                            .scores = {0.9f, 0.8f, 0.7f, 0.6f, 0.95f, 0.3f, 0.4f},
                            .classes = {1, 1, 1, 1, 1, 2, 3}});
  evaluator.add_detections(int64_t{2},
                           {.boxes = {0, 0, 10, 9}, .scores = {0.5f}, .classes = {1}});  // true
  // No groundtruth: a false positive.
  evaluator.add_detections(int64_t{3},
                           {.boxes = {0, 0, 10, 10}, .scores = {0.85f}, .classes = {1}});
}

TEST(PascalDetectionEvaluatorTest, MatchesHandComputedAps) {
  PascalDetectionEvaluator evaluator(kCategories);
  add_pascal_case(evaluator);
  const EvaluationMetrics metrics = evaluator.evaluate();
  ASSERT_EQ(metrics.size(), 4u);
  // cat: 3 instances (the difficult one does not count); by score TP .9, FP .85, FP .8, FP .6,
  // TP .5: precision 1 up to recall 1/3, then 2/5 up to 2/3: AP = 1/3 + 2/15 = 7/15.
  EXPECT_EQ(metrics[1].first, "PascalBoxes_PerformanceByCategory/AP@0.5IOU/cat");
  EXPECT_NEAR(metrics[1].second, 7.0 / 15, 1e-6);
  EXPECT_EQ(metrics[2].first, "PascalBoxes_PerformanceByCategory/AP@0.5IOU/dog");
  EXPECT_NEAR(metrics[2].second, 1.0, 1e-12);
  // bird: no groundtruth, NaN, and left out of the mean.
  EXPECT_EQ(metrics[3].first, "PascalBoxes_PerformanceByCategory/AP@0.5IOU/bird");
  EXPECT_TRUE(std::isnan(metrics[3].second));
  EXPECT_EQ(metrics[0].first, "PascalBoxes_Precision/mAP@0.5IOU");
  EXPECT_NEAR(metrics[0].second, (7.0 / 15 + 1.0) / 2, 1e-6);
  // Evaluating again gives the same; clear() starts over.
  EXPECT_NEAR(evaluator.evaluate()[0].second, (7.0 / 15 + 1.0) / 2, 1e-6);
  evaluator.clear();
  EXPECT_TRUE(std::isnan(evaluator.evaluate()[0].second));
}

TEST(PascalDetectionEvaluatorTest, DuplicatesAndErrors) {
  PascalDetectionEvaluator evaluator(kCategories);
  evaluator.add_groundtruth(int64_t{1}, {.boxes = {0, 0, 10, 10}, .classes = {1}});
  EXPECT_THROW(evaluator.add_groundtruth(int64_t{1}, {.boxes = {0, 0, 10, 10}, .classes = {1}}),
               InvalidArgument);
  evaluator.add_detections(int64_t{1}, {.boxes = {0, 0, 10, 10}, .scores = {0.9f}, .classes = {1}});
  // Detections of an image given again are ignored, as the API's evaluator does.
  evaluator.add_detections(int64_t{1},
                           {.boxes = {50, 50, 60, 60}, .scores = {0.95f}, .classes = {1}});
  EXPECT_NEAR(evaluator.evaluate()[0].second, 1.0, 1e-12);
  try {
    evaluator.add_detections(std::string("img"),
                             {.boxes = {0, 0, 10}, .scores = {0.9f}, .classes = {1}});
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("image 'img': detection boxes has 3 values, not 4 per box"));
  }
  EXPECT_THROW(
      evaluator.add_detections(int64_t{5}, {.boxes = {0, 0, 10, 10}, .scores = {}, .classes = {1}}),
      InvalidArgument);
  EXPECT_THROW(evaluator.add_detections(
                   int64_t{6}, {.boxes = {0, 0, NAN, 10}, .scores = {0.5f}, .classes = {1}}),
               InvalidArgument);
  EXPECT_THROW(PascalDetectionEvaluator({{0, "background"}}), InvalidArgument);
  EXPECT_THROW(PascalDetectionEvaluator({}), InvalidArgument);
}

TEST(CocoDetectionEvaluatorTest, OnePerfectSmallDetection) {
  CocoDetectionEvaluator evaluator(kCategories);
  evaluator.add_groundtruth(int64_t{7}, {.boxes = {0, 0, 10, 10}, .classes = {1}});
  evaluator.add_detections(int64_t{7}, {.boxes = {0, 0, 10, 10}, .scores = {0.9f}, .classes = {1}});
  const CocoSummary s = evaluator.summarize();
  // Area 100 is small: medium and large have no groundtruth (-1).
  const CocoSummary want = {1, 1, 1, 1, -1, -1, 1, 1, 1, 1, -1, -1};
  // Precision is tp / (tp + fp + eps) as in pycocotools: 1 - 2e-16, not 1.
  for (int i = 0; i < kCocoSummaryCount; ++i) {
    EXPECT_NEAR(s[i], want[i], 1e-12) << coco_metric_tag(i);
  }
  EXPECT_EQ(coco_summary_line(0, s[0]),
            " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000");
  EXPECT_EQ(coco_summary_line(4, s[4]),
            " Average Precision  (AP) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = -1.000");
  EXPECT_EQ(coco_summary_line(1, 0.5),
            " Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 0.500");
  EXPECT_EQ(coco_summary_line(7, 0.25),
            " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets= 10 ] = 0.250");
  const EvaluationMetrics metrics = evaluator.evaluate();
  ASSERT_EQ(metrics.size(), 12u);
  EXPECT_EQ(metrics[0].first, "DetectionBoxes_Precision/mAP");
  EXPECT_EQ(metrics[11].first, "DetectionBoxes_Recall/AR@100 (large)");
}

TEST(CocoDetectionEvaluatorTest, CrowdRegionsAndIouThresholds) {
  CocoDetectionEvaluator evaluator({{1, "person"}});
  // A person [0,0,100,100] and a crowd region [200,0,400,200].
  evaluator.add_groundtruth(
      int64_t{1},
      {.boxes = {0, 0, 100, 100, 200, 0, 400, 200}, .classes = {1, 1}, .is_crowd = {0, 1}});
  // IoU 0.7 with the person (matches at thresholds .50-.70: 5 of 10); two detections inside the
  // crowd (ignored, not false positives).
  evaluator.add_detections(int64_t{1},
                           {.boxes = {0, 0, 70, 100, 210, 10, 260, 60, 300, 100, 350, 150},
                            .scores = {0.9f, 0.8f, 0.95f},
                            .classes = {1, 1, 1}});
  const CocoSummary s = evaluator.summarize();
  EXPECT_NEAR(s[0], 0.5, 1e-12);  // AP 1 at 5 thresholds, 0 at 5
  EXPECT_NEAR(s[1], 1.0, 1e-12);
  EXPECT_NEAR(s[2], 0.0, 1e-12);
  EXPECT_NEAR(s[8], 0.5, 1e-12);
  // The person (area 10000) is large: small and medium have none. Above IoU .70 the detection
  // (area 7000, medium) matches nothing and is outside the range: ignored, not a false positive.
  EXPECT_EQ(s[3], -1);
  EXPECT_EQ(s[4], -1);
  EXPECT_NEAR(s[5], 0.5, 1e-12);
}

TEST(CocoDetectionEvaluatorTest, PerCategoryMapIsEachCategoryAlone) {
  // include_metrics_per_category: after the 12 figures, each category's mAP in id order under
  // the API's key. cat: one exact detection (AP 1 at every threshold); dog: IoU 0.7 (AP 1 at
  // .50-.70, 0 above: 0.5); bird: no groundtruth (-1, left out of the overall mean).
  CocoDetectionEvaluator evaluator({{3, "bird"}, {1, "cat"}, {2, "dog"}},
                                   /*include_metrics_per_category=*/true);
  evaluator.add_groundtruth(int64_t{1},
                            {.boxes = {0, 0, 100, 100, 0, 200, 100, 300}, .classes = {1, 2}});
  evaluator.add_detections(int64_t{1}, {.boxes = {0, 0, 100, 100, 0, 200, 100, 270, 5, 5, 50, 50},
                                        .scores = {0.9f, 0.8f, 0.7f},
                                        .classes = {1, 2, 3}});
  std::vector<CocoSummary> per_category;
  const CocoSummary s = evaluator.summarize({}, &per_category);
  ASSERT_EQ(per_category.size(), 3u);
  EXPECT_NEAR(per_category[0][0], 1.0, 1e-12);        // cat
  EXPECT_NEAR(per_category[1][0], 0.5, 1e-12);        // dog
  EXPECT_NEAR(per_category[1][1], 1.0, 1e-12);        // dog at IoU .50
  EXPECT_NEAR(per_category[1][2], 0.0, 1e-12);        // dog at IoU .75
  for (double v : per_category[2]) EXPECT_EQ(v, -1);  // bird
  EXPECT_NEAR(s[0], 0.75, 1e-12);

  const EvaluationMetrics metrics = evaluator.evaluate();
  ASSERT_EQ(metrics.size(), 15u);
  EXPECT_EQ(metrics[12].first, "DetectionBoxes_PerformanceByCategory/mAP/cat");
  EXPECT_NEAR(metrics[12].second, 1.0, 1e-12);
  EXPECT_EQ(metrics[13].first, "DetectionBoxes_PerformanceByCategory/mAP/dog");
  EXPECT_NEAR(metrics[13].second, 0.5, 1e-12);
  EXPECT_EQ(metrics[14].first, "DetectionBoxes_PerformanceByCategory/mAP/bird");
  EXPECT_EQ(metrics[14].second, -1);
  // The factory passes the flag; the tags list the same keys in the same order.
  const std::vector<Category> categories = {{3, "bird"}, {1, "cat"}, {2, "dog"}};
  std::vector<std::string> tags;
  for (const auto& [tag, value] : metrics) tags.push_back(tag);
  EXPECT_EQ(detection_evaluator_tags("coco_detection_metrics", categories, true), tags);
  EXPECT_EQ(detection_evaluator_tags("coco_detection_metrics", categories, false).size(), 12u);
  auto made = make_detection_evaluator("coco_detection_metrics", categories, true);
  made->add_groundtruth(int64_t{1}, {.boxes = {0, 0, 1, 1}, .classes = {1}});
  EXPECT_EQ(made->evaluate().size(), 15u);
}

TEST(CocoDetectionEvaluatorTest, ApiPathErrors) {
  CocoDetectionEvaluator evaluator(kCategories);
  try {
    evaluator.add_detections(int64_t{4}, {.boxes = {0, 0, 1, 1}, .scores = {0.5f}, .classes = {1}});
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing groundtruth for image id 4"));
  }
  EXPECT_THROW(evaluator.add_groundtruth(int64_t{1}, {.boxes = {0, 0, 1, 1}, .classes = {}}),
               InvalidArgument);
  EXPECT_THROW(CocoDetectionEvaluator({{1, "a"}, {1, "b"}}), InvalidArgument);
  // No groundtruth at all: every figure is -1.
  for (double v : evaluator.summarize()) EXPECT_EQ(v, -1);
}

// A w x h mask (column-major, as rle_encode takes it) with the pixels of [x0, x1) x [y0, y1) on.
Rle rectangle_mask(int64_t h, int64_t w, int64_t y0, int64_t x0, int64_t y1, int64_t x1) {
  std::vector<uint8_t> m(static_cast<std::size_t>(h * w), 0);
  for (int64_t x = x0; x < x1; ++x) {
    for (int64_t y = y0; y < y1; ++y) m[static_cast<std::size_t>(x * h + y)] = 1;
  }
  return rle_encode(m.data(), h, w);
}

// coco_mask_metrics (the API's CocoMaskEvaluator) through the API's path: the groundtruth fed
// back as detections scores 1 on every figure with groundtruth in its area range, under the
// DetectionMasks_ tags; the same boxes with masks that miss the groundtruth's score 0 (the
// masks are what is compared), while the box metrics of those detections are 1.
TEST(CocoMaskEvaluatorTest, GroundtruthMasksAsDetectionsScoreOne) {
  const Rle a = rectangle_mask(80, 100, 2, 3, 50, 40);    // box 48 x 37: medium (1776)
  const Rle b = rectangle_mask(80, 100, 10, 60, 14, 64);  // 4 x 4: small
  const GroundtruthImage gt{
      .boxes = {2, 3, 50, 40, 10, 60, 14, 64}, .classes = {1, 2}, .masks = {a, b}};
  auto masks = make_detection_evaluator("coco_mask_metrics", kCategories);
  masks->add_groundtruth(int64_t{3}, gt);
  masks->add_detections(
      int64_t{3}, {.boxes = gt.boxes, .scores = {0.9f, 0.8f}, .classes = {1, 2}, .masks = {a, b}});
  const EvaluationMetrics got = masks->evaluate();
  ASSERT_EQ(got.size(), 12u);
  EXPECT_EQ(got[0].first, "DetectionMasks_Precision/mAP");
  EXPECT_EQ(got[1].first, "DetectionMasks_Precision/mAP@.50IOU");
  EXPECT_EQ(got[11].first, "DetectionMasks_Recall/AR@100 (large)");
  const CocoSummary want = {1, 1, 1, 1, 1, -1, 1, 1, 1, 1, 1, -1};
  for (int i = 0; i < kCocoSummaryCount; ++i) EXPECT_NEAR(got[i].second, want[i], 1e-12) << i;
  EXPECT_EQ(detection_evaluator_tags("coco_mask_metrics")[0], "DetectionMasks_Precision/mAP");

  // The same boxes, masks shifted off the groundtruth's: mask mAP 0, box mAP 1.
  const Rle a_off = rectangle_mask(80, 100, 55, 3, 75, 40);
  const Rle b_off = rectangle_mask(80, 100, 20, 70, 24, 74);
  auto shifted = make_detection_evaluator("coco_mask_metrics", kCategories);
  auto boxes = make_detection_evaluator("coco_detection_metrics", kCategories);
  const DetectionsImage dt{
      .boxes = gt.boxes, .scores = {0.9f, 0.8f}, .classes = {1, 2}, .masks = {a_off, b_off}};
  for (auto* e : {shifted.get(), boxes.get()}) {
    e->add_groundtruth(int64_t{3}, gt);
    e->add_detections(int64_t{3}, dt);
  }
  EXPECT_EQ(shifted->evaluate()[0].second, 0.0);
  EXPECT_NEAR(boxes->evaluate()[0].second, 1.0, 1e-12);
}

TEST(CocoMaskEvaluatorTest, MissingMasksAreRefusedNamingTheInput) {
  auto masks = make_detection_evaluator("coco_mask_metrics", kCategories);
  try {
    masks->add_groundtruth(int64_t{1}, {.boxes = {0, 0, 1, 1}, .classes = {1}});
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("0 groundtruth instance masks for 1 groundtruth boxes"));
    EXPECT_THAT(e.what(), HasSubstr("load_instance_masks"));
  }
  masks->add_groundtruth(
      int64_t{1},
      {.boxes = {0, 0, 1, 1}, .classes = {1}, .masks = {rectangle_mask(2, 2, 0, 0, 1, 1)}});
  try {
    masks->add_detections(int64_t{1}, {.boxes = {0, 0, 1, 1}, .scores = {0.5f}, .classes = {1}});
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("0 detection masks for 1 detections"));
    EXPECT_THAT(e.what(), HasSubstr("predict_instance_masks"));
  }
}

TEST(DetectionEvaluatorFactoryTest, MetricsSets) {
  EXPECT_NE(dynamic_cast<CocoDetectionEvaluator*>(
                make_detection_evaluator("coco_detection_metrics", kCategories).get()),
            nullptr);
  EXPECT_NE(dynamic_cast<PascalDetectionEvaluator*>(
                make_detection_evaluator("pascal_voc_detection_metrics", kCategories).get()),
            nullptr);
  // eval_util's EVAL_METRICS_CLASS_DICT maps the name and its former one to one class.
  for (const char* name : {"open_images_V2_detection_metrics", "oid_V2_detection_metrics"}) {
    EXPECT_NE(dynamic_cast<OpenImagesDetectionEvaluator*>(
                  make_detection_evaluator(name, kCategories).get()),
              nullptr)
        << name;
    EXPECT_THAT(detection_evaluator_tags(name, {{1, "cat"}}),
                ::testing::ElementsAre("OpenImagesV2_Precision/mAP@0.5IOU",
                                       "OpenImagesV2_PerformanceByCategory/AP@0.5IOU/cat"));
  }
  try {
    make_detection_evaluator("oid_challenge_detection_metrics", kCategories);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("metrics_set 'oid_challenge_detection_metrics' is not supported"));
  }
  EXPECT_EQ(detection_evaluator_tags("coco_detection_metrics").size(), 12u);
  EXPECT_THAT(detection_evaluator_tags("pascal_voc_detection_metrics", kCategories),
              ::testing::ElementsAre("PascalBoxes_Precision/mAP@0.5IOU",
                                     "PascalBoxes_PerformanceByCategory/AP@0.5IOU/cat",
                                     "PascalBoxes_PerformanceByCategory/AP@0.5IOU/dog",
                                     "PascalBoxes_PerformanceByCategory/AP@0.5IOU/bird"));
}

// The API's OpenImagesDetectionEvaluator on the cases of tests/fixtures/detection/
// make_oid_goldens.py (group-of boxes several detections fall in and none does, duplicates,
// IoU and IoA exactly 0.5, a class with only group-of boxes, a class without a category, a
// category without groundtruth, images without detections or groundtruth, equal scores):
// every metric, names and values, within 1e-6.
TEST(OpenImagesDetectionEvaluatorTest, ReproducesTheApiMetrics) {
  const std::string path = std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/detection/";
  const test::Goldens goldens("oid_metrics.txt");
  // The metric names, from the file's '# metric CASE INDEX NAME' lines.
  std::map<std::string, std::vector<std::string>> names;
  std::ifstream in(path + "oid_metrics.txt");
  ASSERT_TRUE(in) << path;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string hash, metric, name, tag;
    std::size_t index = 0;
    if (!(words >> hash >> metric >> name >> index >> tag) || metric != "metric") continue;
    ASSERT_EQ(index, names[name].size()) << line;
    names[name].push_back(tag);
  }
  const std::vector<Category> categories = {
      {1, "cat"}, {2, "dog"}, {3, "bird"}, {5, "car"}, {6, "fish"}};
  ASSERT_EQ(names.size(), 4u);
  for (const auto& [name, tags] : names) {
    SCOPED_TRACE(name);
    OpenImagesDetectionEvaluator evaluator(categories);
    const int64_t images = goldens.get(name + "_num_images").i64()[0];
    auto u8 = [](const std::vector<int64_t>& v) {
      return std::vector<uint8_t>(v.begin(), v.end());
    };
    for (int64_t i = 0; i < images; ++i) {
      const std::string p = name + "_" + std::to_string(i) + "_";
      const ImageId id = "image" + std::to_string(i);
      const std::vector<int64_t> has = goldens.get(p + "has").i64();
      if (has[0]) {
        evaluator.add_groundtruth(id, {.boxes = goldens.get(p + "gt_boxes").f32(),
                                       .classes = goldens.get(p + "gt_classes").i64(),
                                       .group_of = u8(goldens.get(p + "gt_group_of").i64())});
      }
      if (has[1]) {
        evaluator.add_detections(id, {.boxes = goldens.get(p + "det_boxes").f32(),
                                      .scores = goldens.get(p + "det_scores").f32(),
                                      .classes = goldens.get(p + "det_classes").i64()});
      }
    }
    const std::vector<double> expected = goldens.get(name + "_metrics").values;
    const EvaluationMetrics metrics = evaluator.evaluate();
    ASSERT_EQ(metrics.size(), tags.size());
    ASSERT_EQ(expected.size(), tags.size());
    for (std::size_t k = 0; k < tags.size(); ++k) {
      EXPECT_EQ(metrics[k].first, tags[k]);
      if (std::isnan(expected[k])) {
        EXPECT_TRUE(std::isnan(metrics[k].second)) << tags[k] << " = " << metrics[k].second;
      } else {
        EXPECT_NEAR(metrics[k].second, expected[k], 1e-6) << tags[k];
      }
    }
  }
}

// The same case read by a Pascal evaluator: group_of is ignored (its boxes are plain boxes) and
// the prefix is PascalBoxes; difficult is ignored by Open Images V2.
TEST(OpenImagesDetectionEvaluatorTest, GroupOfAndDifficultBelongToOneProtocolEach) {
  const GroundtruthImage gt = {.boxes = {0, 0, 10, 10, 20, 20, 60, 60},
                               .classes = {1, 1},
                               .difficult = {1, 0},
                               .group_of = {0, 1}};
  // 0.9: the first box (IoU 1); 0.8: inside the second (IoA 1, IoU 1/16).
  const DetectionsImage dt = {
      .boxes = {0, 0, 10, 10, 30, 30, 40, 40}, .scores = {0.9f, 0.8f}, .classes = {1, 1}};
  OpenImagesDetectionEvaluator oid(kCategories);
  oid.add_groundtruth(int64_t{1}, gt);
  oid.add_detections(int64_t{1}, dt);
  const EvaluationMetrics m = oid.evaluate();
  EXPECT_EQ(m[0].first, "OpenImagesV2_Precision/mAP@0.5IOU");
  EXPECT_EQ(m[1].second, 1.0);  // one instance (the group-of box does not count), found
  PascalDetectionEvaluator pascal(kCategories);
  pascal.add_groundtruth(int64_t{1}, gt);
  pascal.add_detections(int64_t{1}, dt);
  const EvaluationMetrics p = pascal.evaluate();
  EXPECT_EQ(p[0].first, "PascalBoxes_Precision/mAP@0.5IOU");
  EXPECT_EQ(p[1].second, 0.0);  // the difficult box drops 0.9; 0.8 is a false positive
}

}  // namespace
}  // namespace trainyard::detection
