// COCO's JSON files: the instances annotations (images, annotations, categories) that
// pycocotools' COCO() loads, the detection results list that COCO.loadRes() reads, and a
// writer of such a list.
//
// Instances: {"images": [{"id", ...}], "annotations": [{"id", "image_id", "category_id",
// "bbox": [x, y, w, h], "area", "iscrowd", ...}], "categories": [{"id", "name", ...}], ...}.
// Ids are integers (a number with a fraction or exponent that is integral, 3.0, is taken as
// pycocotools' Python would compare it); `area` defaults to w * h and `iscrowd` to 0 when
// absent; other members (info, licenses, ...) are skipped unread, and so is `segmentation`
// unless asked for (read_segmentations).
// Two images, annotations or categories with the same id are an error (pycocotools would
// silently keep one). Annotations of image ids that `images` lacks are kept here; pycocotools'
// evaluation, and `trainyard coco-eval`, leave them out.
//
// Results: [{"image_id", "category_id", "bbox": [x, y, w, h], "score"}, ...], members in any
// order, others skipped. read_coco_results() checks every image_id against the groundtruth's
// images, as loadRes asserts ("Results do not correspond to current coco set"); an empty list is
// allowed (pycocotools fails on it).
//
// Untrusted files: sizes are bounded (kMaxCocoJsonBytes, nesting depth 64, strings of 1 MiB);
// every number must be finite. Every problem throws trainyard::DataLoss
// "<file>: <JSON path>: <what>" (the path as `annotations[17].bbox[2]`); a file that cannot be
// opened throws NotFound naming it.
#ifndef TRAINYARD_PKG_DETECTION_COCO_JSON_H_
#define TRAINYARD_PKG_DETECTION_COCO_JSON_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainyard::detection {

inline constexpr std::size_t kMaxCocoJsonBytes = std::size_t{4} << 30;

struct CocoImageInfo {
  int64_t id = 0;
  int64_t width = 0;   // 0 when absent
  int64_t height = 0;  // 0 when absent
  std::string file_name;
};

// An annotation's or result's `segmentation` as written (read only when asked for): polygons
// [[x0, y0, x1, y1, ...], ...], uncompressed RLE {"size": [h, w], "counts": [n0, n1, ...]} or
// compressed RLE {"size": [h, w], "counts": "string"}. coco_mask.h turns it into a mask.
struct CocoSegmentation {
  enum class Kind { kNone, kPolygons, kUncompressedRle, kCompressedRle };
  Kind kind = Kind::kNone;
  std::vector<std::vector<double>> polygons;
  int64_t height = 0, width = 0;  // the RLE's size
  std::vector<uint32_t> counts;   // uncompressed RLE
  std::string compressed;         // compressed RLE
};

struct CocoAnnotation {
  int64_t id = 0;
  int64_t image_id = 0;
  int64_t category_id = 0;
  std::array<double, 4> bbox{};  // [x, y, width, height]
  double area = 0;
  bool iscrowd = false;
  CocoSegmentation segmentation{};  // with read_segmentations only
};

struct CocoCategory {
  int64_t id = 0;
  std::string name;
  std::string supercategory;
};

struct CocoInstances {
  std::vector<CocoImageInfo> images;
  std::vector<CocoAnnotation> annotations;
  std::vector<CocoCategory> categories;
};

struct CocoResult {
  int64_t image_id = 0;
  int64_t category_id = 0;
  std::array<double, 4> bbox{};  // [x, y, width, height]
  double score = 0;
  bool has_bbox = true;             // false only for a result with a segmentation and no bbox
  CocoSegmentation segmentation{};  // with read_segmentations only
};

// With read_segmentations, each annotation's `segmentation` is read into CocoAnnotation's
// (polygons of at most 2^22 numbers each, RLE counts lists of at most 2^28 counts, each count a
// non-negative 32-bit integer, size [h, w] of non-negative integers); a result may then have a
// segmentation instead of a bbox. Without it they are skipped unread.
CocoInstances parse_coco_instances(std::string_view text, const std::string& source,
                                   bool read_segmentations = false);
CocoInstances read_coco_instances(const std::string& path, bool read_segmentations = false);

// `groundtruth` may be null: the image ids are then not checked.
std::vector<CocoResult> parse_coco_results(std::string_view text, const std::string& source,
                                           const CocoInstances* groundtruth,
                                           bool read_segmentations = false);
std::vector<CocoResult> read_coco_results(const std::string& path, const CocoInstances* groundtruth,
                                          bool read_segmentations = false);

// The results list as JSON, one detection per line, numbers with the digits that read back
// to the same double.
std::string coco_results_json(const std::vector<CocoResult>& results);
// Writes coco_results_json() to `path` atomically; throws Error naming the file.
void write_coco_results(const std::string& path, const std::vector<CocoResult>& results);

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_COCO_JSON_H_
