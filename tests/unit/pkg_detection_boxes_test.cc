// pkg/detection's box arithmetic, anchor generators and box coders against the TF Object
// Detection API: goldens made by its own code (tests/fixtures/detection/make_goldens.py), among
// them the 1,917 anchors of SSD MobileNet v1 at 300x300, plus hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "pkg_detection_goldens.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/anchor_generator.h"
#include "trainyard/pkg/detection/box_coder.h"
#include "trainyard/pkg/detection/box_ops.h"
#include "trainyard/pkg/detection/region_similarity_calculator.h"

namespace trainyard {
namespace {

using detection::FeatureMapShape;
using test::Goldens;

// |actual - expected| <= atol + rtol |expected| everywhere; reports the first few misses.
void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, double atol,
                  double rtol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double tol = atol + rtol * std::fabs(expected[i]);
    if (!(std::fabs(actual[i] - expected[i]) <= tol) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "] (row " << i / 4 << ") is " << actual[i]
                    << ", the API gives " << expected[i];
    }
  }
}

TEST(PkgDetectionAnchorsTest, SsdMobileNetV1At300MatchesTheApisAnchors) {
  Goldens goldens("anchors.txt");
  detection::SsdAnchorGeneratorOptions options;
  options.aspect_ratios = {1.0, 2.0, 0.5, 3.0, 0.3333};
  const detection::MultipleGridAnchorGenerator generator = detection::create_ssd_anchors(options);
  const std::vector<FeatureMapShape> maps = {{19, 19}, {10, 10}, {5, 5}, {3, 3}, {2, 2}, {1, 1}};
  EXPECT_EQ(generator.num_anchors_per_location(),
            goldens.get("ssd_mobilenet_v1_300_num_anchors_per_location").i64());
  EXPECT_EQ(generator.num_anchors_per_location(), (std::vector<int64_t>{3, 6, 6, 6, 6, 6}));
  EXPECT_EQ(detection::ssd_num_anchors_per_location(options), generator.num_anchors_per_location());
  const std::vector<float> anchors = generator.generate(maps, 300, 300);
  EXPECT_EQ(anchors.size(), 1917u * 4);
  EXPECT_EQ(generator.num_anchors(maps), 1917);
  expect_close(anchors, goldens.get("ssd_mobilenet_v1_300").f32(), 1e-6, 0.0, "ssd anchors");
  // A square image gives the anchors of "no image size".
  EXPECT_EQ(generator.generate(maps), anchors);
}

TEST(PkgDetectionAnchorsTest, SsdWithScalesStridesOffsetsOnANonSquareImageMatchesTheApi) {
  Goldens goldens("anchors.txt");
  detection::SsdAnchorGeneratorOptions options;
  options.num_layers = 3;
  options.scales = {0.1, 0.35, 0.7};
  options.aspect_ratios = {1.0, 2.0, 0.5};
  options.interpolated_scale_aspect_ratio = 1.5;
  options.base_anchor_size = {1.0, 1.5};
  options.anchor_strides = {{16, 16}, {32, 32}, {64, 64}};
  options.anchor_offsets = {{8, 8}, {16, 16}, {32, 32}};
  options.reduce_boxes_in_lowest_layer = false;
  const auto generator = detection::create_ssd_anchors(options);
  EXPECT_EQ(generator.num_anchors_per_location(),
            goldens.get("ssd_custom_num_anchors_per_location").i64());
  const std::vector<FeatureMapShape> maps = {{8, 12}, {4, 6}, {2, 3}};
  expect_close(generator.generate(maps, 128, 192), goldens.get("ssd_custom").f32(), 1e-6, 1e-6,
               "custom ssd anchors");
}

TEST(PkgDetectionAnchorsTest, GridAnchorsMatchTheApi) {
  Goldens goldens("anchors.txt");
  detection::GridAnchorGeneratorOptions options;
  options.scales = {0.25, 0.5, 1.0, 2.0};
  options.aspect_ratios = {0.5, 1.0, 2.0};
  const detection::GridAnchorGenerator generator(options);
  EXPECT_EQ(generator.num_anchors_per_location(), (std::vector<int64_t>{12}));
  const std::vector<FeatureMapShape> maps = {{6, 5}};
  expect_close(generator.generate(maps), goldens.get("grid").f32(), 1e-4, 1e-6, "grid anchors");
}

TEST(PkgDetectionAnchorsTest, MultiscaleAnchorsMatchTheApi) {
  Goldens goldens("anchors.txt");
  const detection::MultiscaleGridAnchorGenerator retinanet({3, 7, 4.0, {1.0, 2.0, 0.5}, 2, true});
  EXPECT_EQ(retinanet.num_anchors_per_location(), (std::vector<int64_t>(5, 6)));
  const std::vector<FeatureMapShape> maps = {{8, 8}, {4, 4}, {2, 2}, {1, 1}, {1, 1}};
  expect_close(retinanet.generate(maps, 64, 64), goldens.get("multiscale_64").f32(), 1e-6, 1e-6,
               "multiscale 64x64");
  // An image size that the strides do not divide: no half-stride offset there, and the
  // feature maps of a SAME-padded pyramid.
  const detection::MultiscaleGridAnchorGenerator odd({3, 5, 3.0, {1.0, 2.0}, 3, true});
  const std::vector<FeatureMapShape> odd_maps = odd.feature_map_shapes(100, 72);
  ASSERT_EQ(odd_maps.size(), 3u);
  EXPECT_EQ(odd_maps[0].height, 13);
  EXPECT_EQ(odd_maps[0].width, 9);
  EXPECT_EQ(odd_maps[2].height, 4);
  EXPECT_EQ(odd_maps[2].width, 3);
  expect_close(odd.generate_for_image(100, 72), goldens.get("multiscale_100x72").f32(), 1e-6, 1e-6,
               "multiscale 100x72");
  EXPECT_THROW(odd.generate(odd_maps), InvalidArgument);  // normalized needs the image size
}

TEST(PkgDetectionAnchorsTest, SsdBoxSpecsFollowTheApisScaleRule) {
  detection::SsdAnchorGeneratorOptions options;
  options.aspect_ratios = {1.0, 2.0};
  const auto specs = detection::ssd_box_specs(options);
  ASSERT_EQ(specs.size(), 6u);
  // Layer 0 reduced: (0.1, 1), (0.2, 2), (0.2, 0.5).
  ASSERT_EQ(specs[0].size(), 3u);
  EXPECT_DOUBLE_EQ(specs[0][0].scale, 0.1);
  EXPECT_DOUBLE_EQ(specs[0][1].scale, 0.2);
  EXPECT_DOUBLE_EQ(specs[0][2].aspect_ratio, 0.5);
  // Layer 1: scale 0.35, then the interpolated sqrt(0.35 * 0.5) box; the last layer
  // interpolates towards 1.
  ASSERT_EQ(specs[1].size(), 3u);
  EXPECT_DOUBLE_EQ(specs[1][0].scale, 0.35);
  EXPECT_DOUBLE_EQ(specs[1][2].scale, std::sqrt(0.35 * 0.5));
  EXPECT_DOUBLE_EQ(specs[5][2].scale, std::sqrt(0.95 * 1.0));
  options.interpolated_scale_aspect_ratio = 0.0;
  EXPECT_EQ(detection::ssd_num_anchors_per_location(options),
            (std::vector<int64_t>{3, 2, 2, 2, 2, 2}));
  // One box per location at the center of a 2x2 map: stride 1/2, offset 1/4.
  const detection::MultipleGridAnchorGenerator one({{{0.5, 1.0}}});
  const std::vector<FeatureMapShape> maps = {{2, 2}};
  const std::vector<float> anchors = one.generate(maps);
  const std::vector<float> expected = {0.0f, 0.0f, 0.5f, 0.5f, 0.0f, 0.5f, 0.5f, 1.0f,
                                       0.5f, 0.0f, 1.0f, 0.5f, 0.5f, 0.5f, 1.0f, 1.0f};
  expect_close(anchors, expected, 1e-7, 0.0, "2x2 anchors");
  const std::vector<FeatureMapShape> wrong = {{2, 2}, {1, 1}};
  EXPECT_THROW(one.generate(wrong), InvalidArgument);
}

TEST(PkgDetectionBoxCoderTest, FasterRcnnAndMeanStddevMatchTheApi) {
  Goldens goldens("box_coders.txt");
  const std::vector<float> boxes = goldens.get("boxes").f32();
  const std::vector<float> anchors = goldens.get("anchors").f32();
  const std::vector<float> codes = goldens.get("codes").f32();
  const detection::FasterRcnnBoxCoder scaled({10.0, 10.0, 5.0, 5.0});
  const detection::FasterRcnnBoxCoder unscaled;
  const detection::MeanStddevBoxCoder mean_stddev(0.01);
  // Row 3 is a zero-size box: EPSILON keeps log(h / ha) finite (about log(1e-8 / ha)).
  expect_close(scaled.encode(boxes, anchors), goldens.get("faster_rcnn_10_10_5_5_encoded").f32(),
               1e-4, 1e-5, "faster_rcnn encode");
  expect_close(scaled.decode(codes, anchors), goldens.get("faster_rcnn_10_10_5_5_decoded").f32(),
               1e-6, 1e-5, "faster_rcnn decode");
  expect_close(unscaled.encode(boxes, anchors), goldens.get("faster_rcnn_unscaled_encoded").f32(),
               1e-5, 1e-5, "unscaled encode");
  expect_close(unscaled.decode(codes, anchors), goldens.get("faster_rcnn_unscaled_decoded").f32(),
               1e-5, 1e-5, "unscaled decode");
  expect_close(mean_stddev.encode(boxes, anchors), goldens.get("mean_stddev_0.01_encoded").f32(),
               1e-4, 1e-5, "mean_stddev encode");
  expect_close(mean_stddev.decode(codes, anchors), goldens.get("mean_stddev_0.01_decoded").f32(),
               1e-6, 1e-5, "mean_stddev decode");
}

TEST(PkgDetectionBoxCoderTest, DecodeInvertsEncodeAndTilesABatch) {
  const std::vector<float> anchors = {0.1f, 0.2f, 0.5f, 0.4f, 0.0f, 0.0f, 1.0f, 1.0f};
  const std::vector<float> boxes = {0.15f, 0.25f, 0.45f, 0.5f, 0.2f, 0.1f, 0.7f, 0.9f};
  const detection::FasterRcnnBoxCoder coder({10.0, 10.0, 5.0, 5.0});
  const std::vector<float> codes = coder.encode(boxes, anchors);
  // The box equal to its anchor encodes to ~0 (up to EPSILON).
  const std::vector<float> self = coder.encode(anchors, anchors);
  for (float c : self) EXPECT_NEAR(c, 0.0f, 1e-5f);
  expect_close(coder.decode(codes, anchors), boxes, 1e-6, 1e-6, "round trip");
  // Two images of codes decode against the same anchors.
  std::vector<float> batch = codes;
  batch.insert(batch.end(), codes.begin(), codes.end());
  std::vector<float> twice = boxes;
  twice.insert(twice.end(), boxes.begin(), boxes.end());
  expect_close(coder.decode(batch, anchors), twice, 1e-6, 1e-6, "batch decode");
  EXPECT_THROW(coder.encode(boxes, std::vector<float>(anchors.begin(), anchors.begin() + 4)),
               InvalidArgument);
  EXPECT_THROW(coder.decode(std::vector<float>(12, 0.0f), anchors), InvalidArgument);
  EXPECT_THROW(detection::FasterRcnnBoxCoder({10.0, 10.0, 5.0}), InvalidArgument);
  EXPECT_THROW(detection::MeanStddevBoxCoder(0.0), InvalidArgument);
}

TEST(PkgDetectionBoxOpsTest, IouAndIoaMatchTheApi) {
  Goldens goldens("box_coders.txt");
  const std::vector<float> b1 = goldens.get("boxes1").f32();
  const std::vector<float> b2 = goldens.get("boxes2").f32();
  expect_close(detection::iou(b1, b2), goldens.get("iou").f32(), 1e-6, 1e-6, "iou");
  expect_close(detection::ioa(b1, b2), goldens.get("ioa").f32(), 1e-6, 1e-6, "ioa");
  expect_close(detection::IouSimilarity().compare(b1, b2), goldens.get("iou").f32(), 1e-6, 1e-6,
               "IouSimilarity");
  expect_close(detection::IoaSimilarity().compare(b1, b2), goldens.get("ioa").f32(), 1e-6, 1e-6,
               "IoaSimilarity");
}

TEST(PkgDetectionBoxOpsTest, HandComputedAreasOverlapsClipsAndFrames) {
  const std::vector<float> a = {0.0f, 0.0f, 2.0f, 2.0f};  // area 4
  const std::vector<float> b = {1.0f, 1.0f, 3.0f, 4.0f};  // area 6, overlap 1 x 1
  EXPECT_EQ(detection::area(b), std::vector<float>{6.0f});
  EXPECT_EQ(detection::intersection(a, b), std::vector<float>{1.0f});
  EXPECT_FLOAT_EQ(detection::iou(a, b)[0], 1.0f / 9.0f);
  EXPECT_FLOAT_EQ(detection::ioa(a, b)[0], 1.0f / 6.0f);  // of b inside a
  EXPECT_FLOAT_EQ(detection::ioa(b, a)[0], 1.0f / 4.0f);  // of a inside b
  EXPECT_FLOAT_EQ(detection::matched_iou(a, b)[0], 1.0f / 9.0f);
  // Two empty boxes: IoU 0, not NaN.
  const std::vector<float> empty = {0.5f, 0.5f, 0.5f, 0.5f};
  EXPECT_EQ(detection::iou(empty, empty), std::vector<float>{0.0f});
  const std::vector<float> neg = {-3.0f, -3.0f, 3.0f, 3.0f, -3.0f, -3.0f, -2.0f, -2.0f};
  EXPECT_EQ(detection::NegSqDistSimilarity().compare(a, b),
            std::vector<float>{-(1.0f + 1.0f + 1.0f + 4.0f)});
  // Clip to [0, 0, 1, 1]: the second box lies outside and is dropped unless kept.
  std::vector<int64_t> kept;
  const detection::BoxWindow unit = {0.0f, 0.0f, 1.0f, 1.0f};
  EXPECT_EQ(detection::clip_to_window(neg, unit, true, &kept),
            (std::vector<float>{0.0f, 0.0f, 1.0f, 1.0f}));
  EXPECT_EQ(kept, std::vector<int64_t>{0});
  EXPECT_EQ(detection::clip_to_window(neg, unit, false).size(), 8u);
  EXPECT_EQ(detection::scale(a, 0.5f, 2.0f), (std::vector<float>{0.0f, 0.0f, 1.0f, 4.0f}));
  EXPECT_EQ(detection::to_normalized_coordinates(b, 4.0f, 8.0f),
            (std::vector<float>{0.25f, 0.125f, 0.75f, 0.5f}));
  EXPECT_EQ(detection::change_coordinate_frame(b, {1.0f, 0.0f, 3.0f, 4.0f}),
            (std::vector<float>{0.0f, 0.25f, 1.0f, 1.0f}));
  EXPECT_THROW(detection::area(std::vector<float>(5, 0.0f)), InvalidArgument);
}

}  // namespace
}  // namespace trainyard
