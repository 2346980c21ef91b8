// The detection ops (ops/detection.h) on every test backend: batch_multiclass_non_max_suppression
// against the Object Detection API's own outputs (tests/fixtures/detection/nms.txt and, for ties
// and exact thresholds, nms_ties.txt, made by tests/fixtures/detection/make_goldens.py), a
// hand-computed case of its ordering and padding, and its refusals.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ops_test_util.h"
#include "pkg_detection_goldens.h"
#include "test_backends.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

using test::Goldens;

TRAINYARD_BACKEND_SUITE(NonMaxSuppressionTest);

MultiClassNmsAttrs nms_attrs(float score_threshold, float iou_threshold, int64_t per_class,
                             int64_t total) {
  MultiClassNmsAttrs a;
  a.score_threshold = score_threshold;
  a.iou_threshold = iou_threshold;
  a.max_detections_per_class = per_class;
  a.max_total_detections = total;
  return a;
}

void expect_api_outputs(const ops::NmsDetections& d, const Goldens& goldens,
                        const std::string& name) {
  SCOPED_TRACE(name);
  EXPECT_EQ(d.num_detections.to_vector<int32_t>(), goldens.get(name + "_num_detections").i32());
  const std::vector<float> boxes = d.boxes.to_vector<float>();
  const std::vector<float> expected = goldens.get(name + "_boxes").f32();
  ASSERT_EQ(boxes.size(), expected.size());
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    ASSERT_NEAR(boxes[i], expected[i], 1e-6) << "box value " << i;
  }
  EXPECT_EQ(d.scores.to_vector<float>(), goldens.get(name + "_scores").f32());
  EXPECT_EQ(d.classes.to_vector<float>(), goldens.get(name + "_classes").f32());
}

TEST_P(NonMaxSuppressionTest, BatchMulticlassMatchesTheApi) {
  Goldens goldens("nms.txt");
  const int64_t b = 2, n = 120, c = 6;
  const Tensor boxes =
      Tensor::from_vector(backend(), Shape{b, n, 1, 4}, goldens.get("batch_boxes").f32());
  const Tensor boxes_q =
      Tensor::from_vector(backend(), Shape{b, n, c, 4}, goldens.get("batch_boxes_q").f32());
  const Tensor scores =
      Tensor::from_vector(backend(), Shape{b, n, c}, goldens.get("batch_scores").f32());
  const Tensor valid =
      Tensor::from_vector(backend(), Shape{b}, goldens.get("batch_num_valid_boxes").i32());

  const MultiClassNmsAttrs o = nms_attrs(0.05f, 0.5f, 12, 40);
  expect_api_outputs(ops::batch_multiclass_non_max_suppression(boxes, scores, o), goldens,
                     "multiclass");
  expect_api_outputs(ops::batch_multiclass_non_max_suppression(boxes, scores, o, &valid), goldens,
                     "multiclass_valid");
  MultiClassNmsAttrs clip = nms_attrs(0.0f, 0.6f, 20, 50);
  clip.has_clip_window = true;
  clip.clip_window = {0.1f, 0.2f, 0.8f, 0.7f};
  expect_api_outputs(ops::batch_multiclass_non_max_suppression(boxes, scores, clip), goldens,
                     "multiclass_clip");
  MultiClassNmsAttrs frame = nms_attrs(0.1f, 0.4f, 8, 30);
  frame.has_clip_window = true;
  frame.clip_window = {0.1f, 0.2f, 0.8f, 0.7f};
  frame.change_coordinate_frame = true;
  expect_api_outputs(ops::batch_multiclass_non_max_suppression(boxes, scores, frame), goldens,
                     "multiclass_frame");
  expect_api_outputs(
      ops::batch_multiclass_non_max_suppression(boxes_q, scores, nms_attrs(0.05f, 0.5f, 10, 35)),
      goldens, "multiclass_q");
  MultiClassNmsAttrs agnostic = nms_attrs(0.05f, 0.5f, 100, 25);
  agnostic.use_class_agnostic_nms = true;
  expect_api_outputs(ops::batch_multiclass_non_max_suppression(boxes, scores, agnostic), goldens,
                     "agnostic");
}

// Ties and exact thresholds against the API (nms_ties.txt, dyadic boxes and scores): equal
// scores by anchor within a class and by class across classes, per class and total cuts inside
// runs of ties, an IoU equal to the threshold not suppressing, scores equal to score_threshold
// dropped, zero-area and identical boxes, per-class boxes, valid boxes, a clip window and the
// class-agnostic variant. The anchors are compared too: identical boxes with equal scores differ
// only there.
TEST_P(NonMaxSuppressionTest, BatchMulticlassTiesMatchTheApi) {
  Goldens goldens("nms_ties.txt");
  const int64_t b = 2, n = 40, c = 3;
  const Tensor boxes =
      Tensor::from_vector(backend(), Shape{b, n, 1, 4}, goldens.get("mc_boxes").f32());
  const Tensor boxes_q =
      Tensor::from_vector(backend(), Shape{b, n, c, 4}, goldens.get("mc_boxes_q").f32());
  const Tensor scores =
      Tensor::from_vector(backend(), Shape{b, n, c}, goldens.get("mc_scores").f32());
  const Tensor valid =
      Tensor::from_vector(backend(), Shape{b}, goldens.get("mc_num_valid_boxes").i32());
  auto expect = [&](const ops::NmsDetections& d, const std::string& name) {
    expect_api_outputs(d, goldens, name);
    EXPECT_EQ(d.anchor_indices.to_vector<int64_t>(), goldens.get(name + "_anchors").i64()) << name;
  };
  const MultiClassNmsAttrs cut = nms_attrs(0.25f, 0.5f, 5, 7);
  expect(ops::batch_multiclass_non_max_suppression(boxes, scores, cut), "mc_ties");
  expect(ops::batch_multiclass_non_max_suppression(boxes, scores, nms_attrs(0.0f, 1.0f, 100, 150)),
         "mc_ties_order");
  expect(ops::batch_multiclass_non_max_suppression(boxes_q, scores, nms_attrs(0.25f, 0.25f, 5, 7)),
         "mc_ties_q");
  expect(ops::batch_multiclass_non_max_suppression(boxes, scores, cut, &valid), "mc_ties_valid");
  MultiClassNmsAttrs window = nms_attrs(0.0f, 0.5f, 100, 100);
  window.has_clip_window = true;
  window.clip_window = {0.0f, 0.0f, 4.0f, 2.0f};
  expect(ops::batch_multiclass_non_max_suppression(boxes, scores, window), "mc_ties_window");
  MultiClassNmsAttrs agnostic = nms_attrs(0.25f, 0.5f, 100, 12);
  agnostic.use_class_agnostic_nms = true;
  expect(ops::batch_multiclass_non_max_suppression(boxes, scores, agnostic), "agnostic_ties");
  expect(ops::batch_multiclass_non_max_suppression(boxes_q, scores, agnostic), "agnostic_ties_q");
}

// Two anchors share a box; per class one of them survives; a zero-area box is kept by NMS and
// dropped by the clip; the padding is zeros with anchor index -1; each output has its shape and
// dtype on the inputs' backend.
TEST_P(NonMaxSuppressionTest, OrdersPadsAndReportsAnchors) {
  const Tensor boxes =
      Tensor::from_vector(backend(), Shape{1, 3, 1, 4},
                          std::vector<float>{0, 0, 1, 1, 0, 0, 1, 1, 0.5f, 0.5f, 0.5f, 0.9f});
  const Tensor scores = Tensor::from_vector(
      backend(), Shape{1, 3, 2}, std::vector<float>{0.9f, 0.8f, 0.8f, 0.95f, 0.99f, 0.99f});
  const ops::NmsDetections d =
      ops::batch_multiclass_non_max_suppression(boxes, scores, nms_attrs(0.0f, 0.5f, 10, 4));
  EXPECT_EQ(d.boxes.shape(), (Shape{1, 4, 4}));
  EXPECT_EQ(d.num_detections.dtype(), DType::kI32);
  EXPECT_EQ(d.anchor_indices.dtype(), DType::kI64);
  EXPECT_EQ(&d.scores.storage()->backend(), &backend());
  EXPECT_EQ(d.num_detections.to_vector<int32_t>(), std::vector<int32_t>{2});
  EXPECT_EQ(d.scores.to_vector<float>(), (std::vector<float>{0.95f, 0.9f, 0, 0}));
  EXPECT_EQ(d.classes.to_vector<float>(), (std::vector<float>{1, 0, 0, 0}));
  EXPECT_EQ(d.anchor_indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, -1, -1}));
  EXPECT_EQ(d.boxes.to_vector<float>(),
            (std::vector<float>{0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST_P(NonMaxSuppressionTest, RefusesBadInputsNamingTheOp) {
  const Tensor boxes =
      Tensor::from_vector(backend(), Shape{1, 2, 1, 4}, std::vector<float>{0, 0, 1, 1, 0, 0, 1, 1});
  const Tensor scores = Tensor::from_vector(backend(), Shape{1, 2, 3}, std::vector<float>(6, 0.5f));
  auto refused = [&](const Tensor& b, const Tensor& s, const MultiClassNmsAttrs& a,
                     const Tensor* valid, const std::string& what) {
    try {
      // Reading the result waits for the kernel: an asynchronous backend raises a kernel's
      // error (the values of num_valid_boxes) at that synchronisation.
      ops::batch_multiclass_non_max_suppression(b, s, a, valid).num_detections.to_vector<int32_t>();
      ADD_FAILURE() << "accepted: " << what;
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("batch_multiclass_non_max_suppression"), std::string::npos) << message;
      EXPECT_NE(message.find(what), std::string::npos) << message;
    }
  };
  const MultiClassNmsAttrs ok = nms_attrs(0.0f, 0.5f, 10, 5);
  refused(ops::cast(boxes, DType::kF64), scores, ok, nullptr, "must be f32");
  refused(ops::reshape(boxes, Shape{1, 2, 4}), scores, ok, nullptr, "[batch, anchors, q, 4]");
  const Tensor q2 =
      Tensor::from_vector(backend(), Shape{1, 1, 2, 4}, std::vector<float>{0, 0, 1, 1, 0, 0, 1, 1});
  refused(q2, ops::slice(scores, {0, 0, 0}, {1, 1, 3}), ok, nullptr, "q 1 or the number");
  const Tensor valid = Tensor::from_vector(backend(), Shape{2}, std::vector<int32_t>{1, 1});
  refused(boxes, scores, ok, &valid, "num_valid_boxes must be i32 [1]");
  // -1 is every anchor (the API's slice size); other values outside [0, anchors] are refused.
  const Tensor all = Tensor::from_vector(backend(), Shape{1}, std::vector<int32_t>{-1});
  EXPECT_EQ(ops::batch_multiclass_non_max_suppression(boxes, scores, ok, &all)
                .num_detections.to_vector<int32_t>(),
            ops::batch_multiclass_non_max_suppression(boxes, scores, ok)
                .num_detections.to_vector<int32_t>());
  const Tensor negative = Tensor::from_vector(backend(), Shape{1}, std::vector<int32_t>{-2});
  refused(boxes, scores, ok, &negative, "num_valid_boxes[0] is -2");
  const Tensor too_many = Tensor::from_vector(backend(), Shape{1}, std::vector<int32_t>{3});
  refused(boxes, scores, ok, &too_many, "num_valid_boxes[0] is 3");
  refused(boxes, scores, nms_attrs(0.0f, 1.5f, 10, 5), nullptr, "iou_threshold");
  refused(boxes, scores, nms_attrs(0.0f, 0.5f, 10, 0), nullptr, "max_total_detections");
  MultiClassNmsAttrs frame = ok;
  frame.change_coordinate_frame = true;
  refused(boxes, scores, frame, nullptr, "change_coordinate_frame");
  MultiClassNmsAttrs flat = ok;
  flat.has_clip_window = true;
  flat.clip_window = {0.5f, 0.0f, 0.5f, 1.0f};
  refused(boxes, scores, flat, nullptr, "has no area");
}

}  // namespace
}  // namespace trainyard
