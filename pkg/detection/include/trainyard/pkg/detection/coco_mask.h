// pycocotools' mask API (common/maskApi.c, pycocotools/mask.py) and COCO.annToRLE: instance masks
// as run-length encodings, computed as pycocotools computes them.
//
// An Rle is an h x w binary mask in column-major order (pixel (y, x) is at x * h + y), as
// alternating runs of 0s and 1s: counts[0] zeros (possibly 0 of them), then counts[1] ones, and so
// on. The functions follow maskApi's operations step for step, so a non-canonical encoding (a zero
// run after the first) is treated as pycocotools treats it:
//  - rle_encode / rle_decode: a column-major byte mask (0 or not 0) and back;
//    rle_encode_row_major / rle_decode_row_major the same for a row-major one (an image's own
//    order: pycocotools' mask.encode(np.asfortranarray(m)) and mask.decode);
//  - rle_to_string / rle_from_string: COCO's compressed `counts` string: each count, from the
//    fourth on as its difference from the count two before, in 5-bit groups, least significant
//    first, each group + 48 as a character with bit 0x20 set when more groups follow and the
//    last group's bit 0x10 the sign (ASCII '0'..'o');
//  - rle_from_polygon: maskApi's rleFrPoly: the vertices scaled by 5 and rounded as
//    (int)(5 * v + 0.5), the boundary walked densely, the crossings of pixel columns' centres
//    downsampled back (a point inside a column's rows, ceil of its y) and sorted into runs;
//  - rle_merge (union or intersection), rle_area (the ones), rle_to_bbox ([x, y, w, h] of the
//    ones, [0, 0, 0, 0] when none), rle_iou (intersection over union; against crowd
//    groundtruth over the detection's area; 0 when the boxes do not overlap, -1 when the two
//    masks differ in size and their boxes overlap, as rleIou).
//
// Untrusted input: h and w at most kMaxMaskSide and h * w at most kMaxMaskPixels; counts summing
// to h * w; polygons of at most kMaxPolygonCoordinates coordinates, an even number of them, each
// finite and within +-kMaxPolygonCoordinate; a polygon whose boundary has more than
// kMaxPolygonBoundaryPoints points at 5x is refused. Each violation throws InvalidArgument saying
// what is wrong (callers add the file and annotation).
#ifndef TRAINYARD_PKG_DETECTION_COCO_MASK_H_
#define TRAINYARD_PKG_DETECTION_COCO_MASK_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/pkg/detection/coco_json.h"

namespace trainyard::detection {

inline constexpr int64_t kMaxMaskSide = int64_t{1} << 20;
inline constexpr int64_t kMaxMaskPixels = int64_t{1} << 28;
inline constexpr std::size_t kMaxPolygonCoordinates = std::size_t{1} << 22;
inline constexpr double kMaxPolygonCoordinate = 1e7;
inline constexpr int64_t kMaxPolygonBoundaryPoints = int64_t{1} << 27;

struct Rle {
  int64_t height = 0, width = 0;
  std::vector<uint32_t> counts;
};

// Checks the size and that the counts sum to height * width.
Rle rle_from_counts(int64_t height, int64_t width, std::vector<uint32_t> counts);
// `mask` holds height * width bytes, column-major.
Rle rle_encode(const uint8_t* mask, int64_t height, int64_t width);
std::vector<uint8_t> rle_decode(const Rle& rle);
// The height x width top-left corner of row-major `mask`, whose rows are `stride` bytes apart
// (stride >= width).
Rle rle_encode_row_major(const uint8_t* mask, int64_t height, int64_t width, int64_t stride);
// [height][width], row-major.
std::vector<uint8_t> rle_decode_row_major(const Rle& rle);

std::string rle_to_string(const Rle& rle);
// Throws InvalidArgument for a character outside '0'..'o', a count that is negative or beyond
// 32 bits, or counts that do not sum to height * width.
Rle rle_from_string(std::string_view counts, int64_t height, int64_t width);

// `xy` holds x0, y0, x1, y1, ...: num_coordinates of them (even).
Rle rle_from_polygon(const double* xy, std::size_t num_coordinates, int64_t height, int64_t width);
// maskApi's rleFrBbox: the polygon of the box [x, y, w, h].
Rle rle_from_bbox(const std::array<double, 4>& bbox, int64_t height, int64_t width);

// Union (intersect false) or intersection of masks of the same size (an empty list gives a 0x0
// mask; masks of different sizes give a 0x0 mask with no counts, as rleMerge).
Rle rle_merge(const std::vector<Rle>& masks, bool intersect);
uint64_t rle_area(const Rle& rle);
std::array<double, 4> rle_to_bbox(const Rle& rle);
double rle_iou(const Rle& detection, const Rle& groundtruth, bool groundtruth_is_crowd);

// COCO.annToRLE: polygons (merged into one mask) at the image's size, uncompressed RLE (its
// own `size`) or compressed RLE. As frPyObjects, the first polygon must have more than 4
// coordinates (pycocotools reads 4 as a box and fails). Throws InvalidArgument naming the
// problem; image_height and image_width are needed (non-zero) for polygons only.
Rle coco_segmentation_rle(const CocoSegmentation& segmentation, int64_t image_height,
                          int64_t image_width);

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_COCO_MASK_H_
