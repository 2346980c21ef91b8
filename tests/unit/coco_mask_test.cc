// pkg/detection coco_mask: pycocotools' mask API. The pinned strings, areas, boxes and IoUs are
// pycocotools 2.0.11's (the interop venv), printed by this script:
//   ~/.cache/trainyard/venv-tf/bin/python - <<'EOF'
//   from pycocotools import mask as m; import numpy as np
//   H, W = 23, 31; P = [...]   # kPolygons below, in order
//   for p in P: r = m.frPyObjects([p], H, W)[0]; print(r['counts'], m.area(r), m.toBbox(r))
//   print(m.merge(m.frPyObjects([P[0], P[2]], H, W)))
//   print(m.merge(m.frPyObjects([P[1], P[2]], H, W), intersect=True))
//   a, b = m.frPyObjects([P[1]], H, W)[0], m.frPyObjects([P[2]], H, W)[0]
//   print(m.iou([a], [b], [0]), m.iou([b], [a], [1]))
//   mask = (np.random.RandomState(7).rand(5, 4) > 0.5).astype(np.uint8)
//   print(mask.flatten(order='F').tolist(), m.encode(np.asfortranarray(mask)))
//   print(m.frPyObjects({'size': [300, 400], 'counts': [70000, 5, 40000, 3, 9992]}, 300, 400))
//   EOF
// The COCOeval figures built on these are compared with pycocotools' on generated cases by
// interop.coco_eval_matches_pycocotools.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/pkg/detection/coco_mask.h"

namespace trainyard::detection {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kH = 23, kW = 31;

const std::vector<std::vector<double>> kPolygons = {
    {1.2, 2.0, 8.7, 3.1, 5.0, 9.0},
    {-3.4, -2.0, 40.0, 5.5, 12.25, 30.0, 2.0, 18.0},  // beyond the image on three sides
    {10.5, 10.5, 20.5, 10.5, 20.5, 20.5, 10.5, 20.5},
    {0, 0, 30.9, 0, 30.9, 22.9, 0, 22.9},
    {15.0, 3.0, 15.0, 3.0, 22.4, 8.6, 15.0, 3.0, 9.1, 14.7},  // retraces itself: empty
    {5.0, 5.0, 5.0, 5.0, 5.0, 5.0},                           // one point
};

struct Expected {
  const char* counts;
  uint64_t area;
  std::array<double, 4> bbox;
};
const Expected kExpected[] = {
    {"`12e02O1N00O1N2Oh?", 23, {2, 2, 7, 6}},
    {"0<;4L2N2N1O1OV20jM00000000001O000000000O2N1O1O1O1O1O2O0O1OM", 584, {0, 0, 31, 23}},
    {"X8:=00000000000000000k6", 100, {11, 11, 10, 10}},
    {"0Yf0", 713, {0, 0, 31, 23}},
    {"Yf0", 0, {0, 0, 0, 0}},
    {"Yf0", 0, {0, 0, 0, 0}},
};

Rle polygon(std::size_t i) {
  return rle_from_polygon(kPolygons[i].data(), kPolygons[i].size(), kH, kW);
}

TEST(CocoMaskTest, PolygonsRasterizeAsPycocotoolsFrPoly) {
  for (std::size_t i = 0; i < kPolygons.size(); ++i) {
    SCOPED_TRACE("polygon " + std::to_string(i));
    const Rle rle = polygon(i);
    EXPECT_EQ(rle_to_string(rle), kExpected[i].counts);
    EXPECT_EQ(rle_area(rle), kExpected[i].area);
    EXPECT_EQ(rle_to_bbox(rle), kExpected[i].bbox);
  }
}

TEST(CocoMaskTest, MergeUnionAndIntersectionAsPycocotools) {
  const Rle merged = rle_merge({polygon(0), polygon(2)}, false);
  EXPECT_EQ(rle_to_string(merged), "`12e02O1N00O1N2Og19QN00000000000000000k6");
  EXPECT_EQ(rle_area(merged), 123u);
  const Rle both = rle_merge({polygon(1), polygon(2)}, true);
  EXPECT_EQ(rle_to_string(both), "X8:=00000000000000000k6");
  EXPECT_EQ(rle_area(both), 100u);
  // annToRLE: a list of polygons is their union.
  CocoSegmentation segmentation;
  segmentation.kind = CocoSegmentation::Kind::kPolygons;
  segmentation.polygons = {kPolygons[0], kPolygons[2]};
  EXPECT_EQ(rle_to_string(coco_segmentation_rle(segmentation, kH, kW)), rle_to_string(merged));
}

TEST(CocoMaskTest, IouOverTheUnionOrOverTheDetectionAgainstACrowd) {
  const Rle a = polygon(1), b = polygon(2);
  EXPECT_DOUBLE_EQ(rle_iou(a, b, false), 0.17123287671232876);  // 100 / 584
  EXPECT_DOUBLE_EQ(rle_iou(b, a, true), 1.0);                   // b inside the crowd a
  EXPECT_DOUBLE_EQ(rle_iou(b, a, false), 100.0 / 584.0);
  EXPECT_EQ(rle_iou(polygon(4), a, false), 0.0);  // an empty mask
  // Masks of different sizes whose boxes overlap: -1, as rleIou.
  const Rle other = rle_from_polygon(kPolygons[2].data(), kPolygons[2].size(), kH + 1, kW);
  EXPECT_EQ(rle_iou(other, a, false), -1.0);
}

TEST(CocoMaskTest, EncodesColumnMajorMasksAsPycocotools) {
  // Column-major (Fortran order) pixels of a 5 x 4 mask.
  const std::vector<uint8_t> mask = {0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0};
  const Rle rle = rle_encode(mask.data(), 5, 4);
  EXPECT_EQ(rle.counts, (std::vector<uint32_t>{1, 1, 3, 2, 4, 2, 1, 2, 1, 2, 1}));
  EXPECT_EQ(rle_to_string(rle), "113110M0000");
  EXPECT_EQ(rle_decode(rle), mask);
  EXPECT_EQ(rle_from_string("113110M0000", 5, 4).counts, rle.counts);
  // A mask starting with a one has a zero run first.
  const std::vector<uint8_t> ones(6, 1);
  EXPECT_EQ(rle_encode(ones.data(), 2, 3).counts, (std::vector<uint32_t>{0, 6}));
}

// The same 5 x 4 mask in an image's own row-major order, its rows `stride` bytes apart (the
// bytes past the width hold another image's values): pycocotools' mask.encode of
// np.asfortranarray of it, and mask.decode back.
TEST(CocoMaskTest, EncodesRowMajorMasksWithAStrideAsPycocotools) {
  const std::vector<uint8_t> column_major = {0, 1, 0, 0, 0, 1, 1, 0, 0, 0,
                                             0, 1, 1, 0, 1, 1, 0, 1, 1, 0};
  std::vector<uint8_t> row_major(5 * 4), strided(5 * 6, 7);
  for (int y = 0; y < 5; ++y) {
    for (int x = 0; x < 4; ++x) {
      row_major[static_cast<std::size_t>(y * 4 + x)] =
          column_major[static_cast<std::size_t>(x * 5 + y)];
      strided[static_cast<std::size_t>(y * 6 + x)] =
          column_major[static_cast<std::size_t>(x * 5 + y)];
    }
  }
  EXPECT_EQ(rle_to_string(rle_encode_row_major(row_major.data(), 5, 4, 4)), "113110M0000");
  EXPECT_EQ(rle_to_string(rle_encode_row_major(strided.data(), 5, 4, 6)), "113110M0000");
  EXPECT_EQ(rle_decode_row_major(rle_from_string("113110M0000", 5, 4)), row_major);
  EXPECT_THROW(rle_encode_row_major(row_major.data(), 5, 4, 3), InvalidArgument);
}

TEST(CocoMaskTest, CompressedStringsRoundTripWithLargeAndNegativeDifferences) {
  const Rle big = rle_from_counts(300, 400, {70000, 5, 40000, 3, 9992});
  EXPECT_EQ(rle_to_string(big), "`[T25PRW1NXfRO");  // pycocotools' frPyObjects
  EXPECT_EQ(rle_from_string("`[T25PRW1NXfRO", 300, 400).counts, big.counts);
  // Every count pattern round-trips, deltas of both signs and the zero first run included.
  const Rle mixed = rle_from_counts(1000, 1000, {0, 1, 999990, 2, 3, 4});
  EXPECT_EQ(rle_from_string(rle_to_string(mixed), 1000, 1000).counts, mixed.counts);
  EXPECT_EQ(rle_decode(rle_from_string(rle_to_string(polygon(1)), kH, kW)), rle_decode(polygon(1)));
}

TEST(CocoMaskTest, UntrustedInputIsRefusedWithTheReason) {
  const auto throws = [](const auto& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "no exception; expected " << what;
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  };
  throws([] { rle_from_counts(2, 2, {1, 2}); }, "RLE counts sum to 3, not height x width");
  throws([] { rle_from_string("11", 2, 2); }, "sum to 2");
  throws([] { rle_from_string("1 1", 2, 2); }, "the character ' '");
  throws([] { rle_from_string("1o", 2, 2); }, "end inside a count");
  throws([] { rle_from_string("O", 2, 2); }, "is -1, not in 0..2^32-1");  // a negative count
  throws([] { rle_from_counts(int64_t{1} << 21, 1, {}); }, "mask size 2097152 x 1");
  throws([] { rle_from_counts(1 << 15, 1 << 14, {}); }, "2^28 pixels");
  const double odd[] = {1, 2, 3, 4, 5};
  throws([&] { rle_from_polygon(odd, 5, kH, kW); }, "5 coordinates, not an even number");
  const double far[] = {1, 2, 3e9, 4, 5, 6};
  throws([&] { rle_from_polygon(far, 6, kH, kW); }, "coordinate 2 is 3000000000");
  const double long_edges[] = {-1e7, -1e7, 1e7, 1e7, -1e7, 1e7};
  throws([&] { rle_from_polygon(long_edges, 6, kH, kW); }, "more than 2^27");
  CocoSegmentation box_like;
  box_like.kind = CocoSegmentation::Kind::kPolygons;
  box_like.polygons = {{1, 2, 3, 4}};
  throws([&] { coco_segmentation_rle(box_like, kH, kW); }, "the first polygon has 4");
  CocoSegmentation polygons;
  polygons.kind = CocoSegmentation::Kind::kPolygons;
  polygons.polygons = {kPolygons[0]};
  throws([&] { coco_segmentation_rle(polygons, 0, 0); }, "image's height and width");
  polygons.polygons.push_back({1, 2, 3});
  throws([&] { coco_segmentation_rle(polygons, kH, kW); }, "polygon 1: polygon has 3");
}

}  // namespace
}  // namespace trainyard::detection
