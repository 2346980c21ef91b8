// pkg/detection's non-max suppression and score converters: single-class NMS as
// tf.image.non_max_suppression (thresholds, ties by index, max outputs) and
// batch_multiclass_non_max_suppression as the Object Detection API's post-processing (per class,
// class-agnostic, per-class boxes, clip window and coordinate frame, valid boxes, soft and
// combined NMS), against
// goldens of the API (tests/fixtures/detection/make_goldens.py) and hand-computed cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "pkg_detection_goldens.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/non_max_suppression.h"
#include "trainyard/pkg/detection/score_converter.h"

namespace trainyard {
namespace {

using detection::MultiClassNmsOptions;
using test::Goldens;

MultiClassNmsOptions nms_options(float score_threshold, float iou_threshold, int64_t per_class,
                                 int64_t total) {
  MultiClassNmsOptions o;
  o.score_threshold = score_threshold;
  o.iou_threshold = iou_threshold;
  o.max_detections_per_class = per_class;
  o.max_total_detections = total;
  return o;
}

TEST(PkgDetectionNmsTest, SingleClassMatchesTensorFlowWithTiesAndThresholds) {
  Goldens goldens("nms.txt");
  const std::vector<float> boxes = goldens.get("single_boxes").f32();
  const std::vector<float> scores = goldens.get("single_scores").f32();  // rounded: many ties
  EXPECT_EQ(detection::non_max_suppression(boxes, scores, 50, 0.5f, 0.2f),
            goldens.get("single_a").i64());
  EXPECT_EQ(detection::non_max_suppression(boxes, scores, 200, 0.3f, 0.0f),
            goldens.get("single_b").i64());
  EXPECT_EQ(detection::non_max_suppression(boxes, scores, 20, 0.7f, -1.0f),
            goldens.get("single_c").i64());
}

TEST(PkgDetectionNmsTest, HandComputedSuppressionTiesAndThresholds) {
  // Box 1 overlaps box 0 with IoU 0.5 exactly (not suppressed at 0.5, suppressed at 0.49);
  // box 2 is box 0 again; box 3 is elsewhere.
  const std::vector<float> boxes = {0, 0, 1, 1, 0, 0, 1, 0.5f, 0, 0, 1, 1, 2, 2, 3, 3};
  // Equal scores: lower index first.
  const std::vector<float> tied = {0.5f, 0.5f, 0.5f, 0.5f};
  EXPECT_EQ(detection::non_max_suppression(boxes, tied, 10, 0.5f), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(detection::non_max_suppression(boxes, tied, 10, 0.49f), (std::vector<int64_t>{0, 3}));
  const std::vector<float> scores = {0.6f, 0.9f, 0.7f, 0.3f};
  EXPECT_EQ(detection::non_max_suppression(boxes, scores, 10, 0.4f), (std::vector<int64_t>{1, 3}));
  // A score equal to the threshold is not a candidate; max_output cuts.
  EXPECT_EQ(detection::non_max_suppression(boxes, scores, 10, 0.4f, 0.3f),
            (std::vector<int64_t>{1}));
  EXPECT_EQ(detection::non_max_suppression(boxes, scores, 1, 1.0f), (std::vector<int64_t>{1}));
  // Flipped corners are reordered as TensorFlow does.
  const std::vector<float> flipped = {1, 1, 0, 0, 0, 0, 1, 1};
  EXPECT_EQ(detection::non_max_suppression(flipped, std::vector<float>{0.9f, 0.8f}, 10, 0.5f),
            (std::vector<int64_t>{0}));
  EXPECT_THROW(detection::non_max_suppression(boxes, tied, 10, 1.5f), InvalidArgument);
  EXPECT_THROW(detection::non_max_suppression(boxes, std::vector<float>{1.0f}, 10),
               InvalidArgument);
}

// Ties and exact thresholds against TensorFlow (nms_ties.txt: NonMaxSuppressionV3 on dyadic
// boxes and scores): equal scores lower index first, identical and flipped duplicates (the lower
// index survives), IoU equal to the threshold not suppressing (the goldens' comments record that
// the float below the threshold changes the result), scores equal to score_threshold dropped,
// zero-area boxes kept, and max_output cutting inside a run of equal scores.
TEST(PkgDetectionNmsTest, SingleClassTiesAndExactThresholdsMatchTensorFlow) {
  Goldens goldens("nms_ties.txt");
  const std::vector<float> boxes = goldens.get("ties_boxes").f32();
  const std::vector<float> scores = goldens.get("ties_scores").f32();
  const float none = -std::numeric_limits<float>::infinity();
  const int64_t n = static_cast<int64_t>(scores.size());
  struct Case {
    const char* name;
    int64_t max_output;
    float iou_threshold, score_threshold;
  };
  const int64_t cut = goldens.get("ties_cut").shape[0];
  for (const Case& c :
       {Case{"ties_iou_half", n, 0.5f, 0.25f}, Case{"ties_iou_quarter", n, 0.25f, none},
        Case{"ties_no_suppression", n, 1.0f, none}, Case{"ties_iou_zero", n, 0.0f, 0.375f},
        Case{"ties_cut", cut, 0.5f, none}}) {
    EXPECT_EQ(detection::non_max_suppression(boxes, scores, c.max_output, c.iou_threshold,
                                             c.score_threshold),
              goldens.get(c.name).i64())
        << c.name;
  }
}

void expect_outputs(const detection::DetectionOutputs& out, const Goldens& goldens,
                    const std::string& name) {
  SCOPED_TRACE(name);
  EXPECT_EQ(out.num_detections, goldens.get(name + "_num_detections").i32());
  const std::vector<float> boxes = goldens.get(name + "_boxes").f32();
  ASSERT_EQ(out.detection_boxes.size(), boxes.size());
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    ASSERT_NEAR(out.detection_boxes[i], boxes[i], 1e-6) << "box value " << i;
  }
  EXPECT_EQ(out.detection_scores, goldens.get(name + "_scores").f32());
  EXPECT_EQ(out.detection_classes, goldens.get(name + "_classes").f32());
}

TEST(PkgDetectionNmsTest, BatchMulticlassMatchesTheApi) {
  Goldens goldens("nms.txt");
  const std::vector<float> boxes = goldens.get("batch_boxes").f32();
  const std::vector<float> boxes_q = goldens.get("batch_boxes_q").f32();
  const std::vector<float> scores = goldens.get("batch_scores").f32();
  const std::vector<int32_t> valid = goldens.get("batch_num_valid_boxes").i32();
  const int64_t b = 2, n = 120, c = 6;

  MultiClassNmsOptions o = nms_options(0.05f, 0.5f, 12, 40);
  expect_outputs(detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, o),
                 goldens, "multiclass");
  expect_outputs(
      detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, o, valid), goldens,
      "multiclass_valid");
  MultiClassNmsOptions clip = nms_options(0.0f, 0.6f, 20, 50);
  clip.clip_window = detection::BoxWindow{0.1f, 0.2f, 0.8f, 0.7f};
  expect_outputs(detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, clip),
                 goldens, "multiclass_clip");
  MultiClassNmsOptions frame = nms_options(0.1f, 0.4f, 8, 30);
  frame.clip_window = detection::BoxWindow{0.1f, 0.2f, 0.8f, 0.7f};
  frame.change_coordinate_frame = true;
  expect_outputs(detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, frame),
                 goldens, "multiclass_frame");
  MultiClassNmsOptions q = nms_options(0.05f, 0.5f, 10, 35);
  expect_outputs(detection::batch_multiclass_non_max_suppression(boxes_q, scores, b, n, c, c, q),
                 goldens, "multiclass_q");
  MultiClassNmsOptions agnostic = nms_options(0.05f, 0.5f, 100, 25);
  agnostic.use_class_agnostic_nms = true;
  expect_outputs(
      detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, agnostic), goldens,
      "agnostic");
}

// Soft-NMS as TensorFlow's NonMaxSuppressionV5 (nms_soft.txt): the kept indices in order and
// their decayed scores, for a small and a large sigma, a score threshold that drops decayed
// boxes, and a max_output that cuts.
TEST(PkgDetectionNmsTest, SoftNmsMatchesTensorFlow) {
  Goldens goldens("nms_soft.txt");
  const std::vector<float> boxes = goldens.get("single_boxes").f32();
  const std::vector<float> scores = goldens.get("single_scores").f32();
  struct Case {
    const char* name;
    int64_t max_output;
    float sigma, score_threshold;
  };
  for (const Case& c : {Case{"soft_a", 40, 0.5f, 0.05f}, Case{"soft_b", 150, 0.1f, 0.0f},
                        Case{"soft_c", 10, 1.0f, 0.3f}}) {
    SCOPED_TRACE(c.name);
    const std::vector<detection::SoftNmsSelection> kept = detection::soft_non_max_suppression(
        boxes, scores, c.max_output, c.sigma, c.score_threshold);
    std::vector<int64_t> indices;
    std::vector<float> kept_scores;
    for (const detection::SoftNmsSelection& k : kept) {
      indices.push_back(k.index);
      kept_scores.push_back(k.score);
    }
    EXPECT_EQ(indices, goldens.get(std::string(c.name) + "_indices").i64());
    const std::vector<float> theirs = goldens.get(std::string(c.name) + "_scores").f32();
    ASSERT_EQ(kept_scores.size(), theirs.size());
    for (std::size_t i = 0; i < theirs.size(); ++i) {
      EXPECT_NEAR(kept_scores[i], theirs[i], 1e-6f * std::max(1.0f, theirs[i])) << i;
    }
  }
  EXPECT_THROW(detection::soft_non_max_suppression(boxes, scores, 10, 0.0f), InvalidArgument);
}

// The API's multiclass NMS with soft_nms_sigma (the decayed scores sorted, clipped, cut) and
// tf.image.combined_non_max_suppression (boxes clipped to [0, 1], none dropped), on boxes that
// reach outside the unit square.
TEST(PkgDetectionNmsTest, SoftAndCombinedMulticlassMatchTensorFlow) {
  Goldens goldens("nms_soft.txt");
  const std::vector<float> boxes = goldens.get("batch_boxes").f32();
  const std::vector<float> scores = goldens.get("batch_scores").f32();
  const int64_t b = 2, n = 90, c = 4;
  MultiClassNmsOptions soft = nms_options(0.05f, 0.6f, 15, 30);
  soft.soft_nms_sigma = 0.3f;
  expect_outputs(detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, soft),
                 goldens, "multiclass_soft");
  MultiClassNmsOptions combined = nms_options(0.05f, 0.5f, 12, 25);
  combined.use_combined_nms = true;
  expect_outputs(
      detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, combined), goldens,
      "combined");
  // What the API refuses with use_combined_nms, and a negative sigma.
  MultiClassNmsOptions windowed = combined;
  windowed.clip_window = detection::BoxWindow{0.0f, 0.0f, 1.0f, 1.0f};
  MultiClassNmsOptions combined_soft = combined;
  combined_soft.soft_nms_sigma = 0.5f;
  MultiClassNmsOptions negative = soft;
  negative.soft_nms_sigma = -1.0f;
  for (const MultiClassNmsOptions& o : {windowed, combined_soft, negative}) {
    EXPECT_THROW(detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, o),
                 InvalidArgument);
  }
  const std::vector<int32_t> valid = {90, 10};
  EXPECT_THROW(
      detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, combined, valid),
      InvalidArgument);
}

// Ties within and across classes against the API (nms_ties.txt): per class equal scores by
// anchor, merged equal scores by class (tf.nn.top_k over the classes' concatenation), per class
// and total cuts inside runs of ties, per-class boxes, valid boxes, an exact-IoU pair kept, a
// clip that leaves boxes without area, and the class-agnostic variant (argmax: first class on
// ties). The anchors of the detections are compared too: identical boxes with equal scores
// differ only there.
TEST(PkgDetectionNmsTest, BatchMulticlassTiesMatchTheApi) {
  Goldens goldens("nms_ties.txt");
  const std::vector<float> boxes = goldens.get("mc_boxes").f32();
  const std::vector<float> boxes_q = goldens.get("mc_boxes_q").f32();
  const std::vector<float> scores = goldens.get("mc_scores").f32();
  const std::vector<int32_t> valid = goldens.get("mc_num_valid_boxes").i32();
  const int64_t b = 2, n = 40, c = 3;
  auto expect = [&](const detection::DetectionOutputs& out, const std::string& name) {
    expect_outputs(out, goldens, name);
    EXPECT_EQ(out.detection_anchor_indices, goldens.get(name + "_anchors").i64()) << name;
  };
  const MultiClassNmsOptions cut = nms_options(0.25f, 0.5f, 5, 7);
  expect(detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, cut),
         "mc_ties");
  expect(detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c,
                                                         nms_options(0.0f, 1.0f, 100, 150)),
         "mc_ties_order");
  expect(detection::batch_multiclass_non_max_suppression(boxes_q, scores, b, n, c, c,
                                                         nms_options(0.25f, 0.25f, 5, 7)),
         "mc_ties_q");
  expect(detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, cut, valid),
         "mc_ties_valid");
  MultiClassNmsOptions window = nms_options(0.0f, 0.5f, 100, 100);
  window.clip_window = detection::BoxWindow{0.0f, 0.0f, 4.0f, 2.0f};
  expect(detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, window),
         "mc_ties_window");
  MultiClassNmsOptions agnostic = nms_options(0.25f, 0.5f, 100, 12);
  agnostic.use_class_agnostic_nms = true;
  expect(detection::batch_multiclass_non_max_suppression(boxes, scores, b, n, 1, c, agnostic),
         "agnostic_ties");
  expect(detection::batch_multiclass_non_max_suppression(boxes_q, scores, b, n, c, c, agnostic),
         "agnostic_ties_q");
}

TEST(PkgDetectionNmsTest, MulticlassHandComputedOrderPaddingAndAgnostic) {
  // Two anchors with the same box; class scores per anchor.
  const std::vector<float> boxes = {0, 0, 1, 1, 0, 0, 1, 1, 0.5f, 0.5f, 0.5f, 0.9f};
  const std::vector<float> scores = {0.9f,  0.8f,    // anchor 0
                                     0.8f,  0.95f,   // anchor 1
                                     0.99f, 0.99f};  // anchor 2: zero area, dropped
  MultiClassNmsOptions o = nms_options(0.0f, 0.5f, 10, 4);
  const auto out = detection::batch_multiclass_non_max_suppression(boxes, scores, 1, 3, 1, 2, o);
  // Per class NMS keeps one of the two identical boxes per class: class 0 anchor 0 (0.9),
  // class 1 anchor 1 (0.95). The zero-area box is kept by NMS and dropped by the clip.
  EXPECT_EQ(out.num_detections, std::vector<int32_t>{2});
  EXPECT_EQ(out.detection_scores, (std::vector<float>{0.95f, 0.9f, 0.0f, 0.0f}));
  EXPECT_EQ(out.detection_classes, (std::vector<float>{1, 0, 0, 0}));
  EXPECT_EQ(out.detection_anchor_indices, (std::vector<int64_t>{1, 0, -1, -1}));
  EXPECT_EQ(std::vector<float>(out.detection_boxes.begin() + 8, out.detection_boxes.end()),
            std::vector<float>(8, 0.0f));
  // Class-agnostic: one NMS over anchors scored by their best class: anchor 1 (0.95, class 1)
  // suppresses anchor 0.
  o.use_class_agnostic_nms = true;
  const auto ag = detection::batch_multiclass_non_max_suppression(boxes, scores, 1, 3, 1, 2, o);
  EXPECT_EQ(ag.num_detections, std::vector<int32_t>{1});
  EXPECT_EQ(ag.detection_scores[0], 0.95f);
  EXPECT_EQ(ag.detection_classes[0], 1.0f);
  // Equal scores across classes: the lower class first.
  const std::vector<float> one_box = {0, 0, 1, 1};
  const std::vector<float> equal = {0.5f, 0.5f, 0.5f};
  MultiClassNmsOptions e = nms_options(0.0f, 0.5f, 10, 3);
  const auto eq = detection::batch_multiclass_non_max_suppression(one_box, equal, 1, 1, 1, 3, e);
  EXPECT_EQ(eq.detection_classes, (std::vector<float>{0, 1, 2}));
  // max_total_detections cuts after the sort.
  e.max_total_detections = 2;
  EXPECT_EQ(
      detection::batch_multiclass_non_max_suppression(one_box, equal, 1, 1, 1, 3, e).num_detections,
      std::vector<int32_t>{2});
  MultiClassNmsOptions bad;
  bad.change_coordinate_frame = true;
  EXPECT_THROW(detection::batch_multiclass_non_max_suppression(one_box, equal, 1, 1, 1, 3, bad),
               InvalidArgument);
  EXPECT_THROW(detection::batch_multiclass_non_max_suppression(one_box, equal, 1, 1, 2, 3, e),
               InvalidArgument);
}

// SSD on COCO: ~2k anchors x 90 classes with sigmoid scores and a 1e-8 threshold (almost every
// box a candidate): the heap takes only the candidates it examines. Bounded generously so a
// loaded machine does not flake; a quadratic or sort-everything implementation is still far
// inside it, so this pins only that the large case runs and gives consistent results.
TEST(PkgDetectionNmsTest, LargeBatchIsConsistent) {
  const int64_t n = 1917, c = 90;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> boxes(static_cast<std::size_t>(n) * 4),
      scores(static_cast<std::size_t>(n * c));
  for (int64_t i = 0; i < n; ++i) {
    const float y = u(rng) * 0.8f, x = u(rng) * 0.8f;
    boxes[4 * i] = y;
    boxes[4 * i + 1] = x;
    boxes[4 * i + 2] = y + 0.05f + 0.15f * u(rng);
    boxes[4 * i + 3] = x + 0.05f + 0.15f * u(rng);
  }
  for (float& s : scores) s = u(rng) * u(rng) * u(rng);
  const MultiClassNmsOptions o = nms_options(1e-8f, 0.6f, 100, 100);
  const auto out = detection::batch_multiclass_non_max_suppression(boxes, scores, 1, n, 1, c, o);
  ASSERT_EQ(out.num_detections, std::vector<int32_t>{100});
  for (int i = 1; i < 100; ++i) EXPECT_GE(out.detection_scores[i - 1], out.detection_scores[i]);
  // Each detection is a per-class NMS survivor: rerunning its class alone keeps its anchor.
  const int cls = static_cast<int>(out.detection_classes[0]);
  std::vector<float> column(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) column[i] = scores[i * c + cls];
  const auto kept = detection::non_max_suppression(boxes, column, 100, 0.6f, 1e-8f);
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept[0], out.detection_anchor_indices[0]);
}

// The greedy NMS of TensorFlow's kernel written plainly: candidates sorted by score (ties by
// index), each compared with every kept box, one scalar IoU at a time.
std::vector<int64_t> reference_nms(const std::vector<float>& boxes,
                                   const std::vector<float>& scores, int64_t max_output,
                                   float iou_threshold, float score_threshold) {
  const int64_t n = static_cast<int64_t>(scores.size());
  std::vector<int64_t> order;
  for (int64_t i = 0; i < n; ++i) {
    if (scores[i] > score_threshold) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  auto corners = [&](int64_t i) {
    const float* b = &boxes[static_cast<std::size_t>(4 * i)];
    return std::array<float, 4>{std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]),
                                std::max(b[1], b[3])};
  };
  auto iou = [&](int64_t i, int64_t j) {
    const auto a = corners(i), b = corners(j);
    const float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    if (area_a <= 0.0f || area_b <= 0.0f) return 0.0f;
    const float ih = std::max(std::min(a[2], b[2]) - std::max(a[0], b[0]), 0.0f);
    const float iw = std::max(std::min(a[3], b[3]) - std::max(a[1], b[1]), 0.0f);
    const float inter = ih * iw;
    return inter / (area_a + area_b - inter);
  };
  std::vector<int64_t> kept;
  for (int64_t i : order) {
    if (static_cast<int64_t>(kept.size()) >= max_output) break;
    bool suppressed = false;
    for (int64_t k : kept) suppressed = suppressed || iou(i, k) > iou_threshold;
    if (!suppressed) kept.push_back(i);
  }
  return kept;
}

// The kept boxes are compared with a candidate eight at a time (vector lanes, a scalar tail):
// the result must be the plain algorithm's, box for box, for near-duplicates at the miner's
// IoU 0.99 (IoUs a rounding away from the threshold), zero-area and inverted boxes, tied
// scores and kept-box counts that are not multiples of eight.
TEST(PkgDetectionNmsTest, VectorizedComparisonsKeepWhatThePlainAlgorithmKeeps) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  int64_t total_kept = 0, total_suppressed = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(u(rng) * 700);
    std::vector<float> boxes, scores;
    for (int64_t i = 0; i < n; ++i) {
      float y = u(rng) * 0.8f, x = u(rng) * 0.8f, h = 0.02f + 0.2f * u(rng),
            w = 0.02f + 0.2f * u(rng);
      const float kind = u(rng);
      if (kind < 0.3f && i > 0) {  // a near-duplicate of an earlier box
        const std::size_t j = static_cast<std::size_t>(u(rng) * static_cast<float>(i)) * 4;
        const float jitter = (u(rng) - 0.5f) * 0.004f;
        y = std::min(boxes[j], boxes[j + 2]) + jitter;
        x = std::min(boxes[j + 1], boxes[j + 3]);
        h = std::abs(boxes[j + 2] - boxes[j]);
        w = std::abs(boxes[j + 3] - boxes[j + 1]) * (1.0f + jitter);
      } else if (kind < 0.35f) {
        h = 0.0f;  // zero area
      }
      if (u(rng) < 0.1f) {
        boxes.insert(boxes.end(), {y + h, x + w, y, x});  // inverted corners
      } else {
        boxes.insert(boxes.end(), {y, x, y + h, x + w});
      }
      scores.push_back(u(rng) < 0.2f ? 0.5f : u(rng));  // many ties
    }
    for (float threshold : {0.0f, 0.3f, 0.6f, 0.99f, 1.0f}) {
      const int64_t max_output = trial % 3 == 0 ? n / 2 : n;
      const auto want = reference_nms(boxes, scores, max_output, threshold, 0.1f);
      const auto got = detection::non_max_suppression(boxes, scores, max_output, threshold, 0.1f);
      ASSERT_EQ(got, want) << "trial " << trial << ", " << n << " boxes, IoU threshold "
                           << threshold;
      total_kept += static_cast<int64_t>(got.size());
      total_suppressed += n - static_cast<int64_t>(got.size());
    }
  }
  // Both outcomes happen often: the comparison is not vacuous.
  EXPECT_GT(total_kept, 1000);
  EXPECT_GT(total_suppressed, 1000);
}

TEST(PkgDetectionScoreConverterTest, IdentitySigmoidSoftmaxWithLogitScale) {
  const std::vector<float> logits = {0.0f, 2.0f, -2.0f, 1.0f, 1.0f, 1.0f};
  EXPECT_EQ(detection::convert_scores(logits, 3, detection::ScoreConverter::kIdentity, 2.0),
            (std::vector<float>{0.0f, 1.0f, -1.0f, 0.5f, 0.5f, 0.5f}));
  const auto s = detection::convert_scores(logits, 3, detection::ScoreConverter::kSigmoid);
  EXPECT_FLOAT_EQ(s[0], 0.5f);
  EXPECT_FLOAT_EQ(s[1], 1.0f / (1.0f + std::exp(-2.0f)));
  const auto m = detection::convert_scores(logits, 3, detection::ScoreConverter::kSoftmax, 2.0);
  const float z = 1.0f + std::exp(1.0f) + std::exp(-1.0f);
  EXPECT_NEAR(m[0], 1.0f / z, 1e-7);
  EXPECT_NEAR(m[1], std::exp(1.0f) / z, 1e-7);
  EXPECT_NEAR(m[3], 1.0f / 3.0f, 1e-7);
  EXPECT_EQ(detection::score_converter_from_name("SIGMOID"), detection::ScoreConverter::kSigmoid);
  EXPECT_THROW(detection::score_converter_from_name("sigmoid"), InvalidArgument);
  EXPECT_THROW(detection::convert_scores(logits, 4, detection::ScoreConverter::kIdentity),
               InvalidArgument);
}

}  // namespace
}  // namespace trainyard
