// The Object Detection API's CocoDetectionEvaluator (`coco_detection_metrics`,
// metrics/coco_evaluation.py): pycocotools' COCOeval for iouType 'bbox', computed natively; with
// CocoIouType::kSegm the same evaluation on instance masks (iouType 'segm', the API's
// CocoMaskEvaluator's figures under DetectionMasks_ tags).
//
// The semantics are COCOeval's evaluate(), accumulate() and summarize() with their default
// parameters, so the numbers equal pycocotools' (tests/interop/coco_eval_interop.py):
//  - images are ordered by id (ImageId's order), categories by id; only the categories given
//    are evaluated, groundtruth and detections of other classes are dropped;
//  - per image and category the detections are sorted by descending score (a stable sort:
//    equal scores keep their order of arrival) and only the first 100 are kept;
//  - IoU on [x, y, width, height] boxes in double precision; against a crowd region the union
//    is the detection's area; for segm, maskApi's rleIou on the masks (coco_mask.h), the same
//    rule for crowds;
//  - per area range (all [0, 1e10], small [0, 32^2], medium [32^2, 96^2], large [96^2, 1e10],
//    bounds inclusive, on the groundtruth's `area` and the detection's area: its `area` when
//    given, else width * height; pycocotools' loadRes gives every result its box's area when
//    the first result has a bbox, else each its mask's) the
//    groundtruth outside the range and every crowd region are ignored and sorted after the
//    others; at each IoU threshold (0.50:0.05:0.95, numpy's linspace values) each detection
//    in score order takes the unmatched (or crowd) groundtruth of highest IoU >= threshold,
//    preferring one that is not ignored; a detection matched to ignored groundtruth, or
//    unmatched and outside the area range, is ignored;
//  - precision at the 101 recall points (0:0.01:1) from the monotone envelope, recall at
//    maxDets 1, 10, 100 (the first maxDets detections of each image), over all images;
//    a category without groundtruth that is not ignored has -1 and is left out of the means;
//    a figure with no category is -1.
// A groundtruth annotation whose id is 0 never counts as matched, as in pycocotools (it stores
// the matched annotation's id and tests it against 0); the API's evaluator numbers its
// annotations from 1.
//
// Metrics, in summarize()'s order:
//   DetectionBoxes_Precision/mAP, mAP@.50IOU, mAP@.75IOU, mAP (small), mAP (medium),
//   mAP (large); DetectionBoxes_Recall/AR@1, AR@10, AR@100, AR@100 (small), AR@100 (medium),
//   AR@100 (large).
// With include_metrics_per_category, then DetectionBoxes_PerformanceByCategory/mAP/<name> for
// each category in id order, the API's key (coco_tools.ComputeMetrics). Its value is that
// category's mAP: summarize()'s first figure on that category alone, which is what COCOeval
// gives with params.catIds = [id] (-1 for a category without groundtruth). The API reads it
// from a COCOeval.category_stats that pycocotools never computes, so the API itself fails
// there ("Category stats do not exist", tensorflow/models#5010); this is the figure its users
// patch pycocotools to get.
// Cost: O(sum over images and categories of detections x groundtruth) for matching plus a sort
// of each category's detections; a COCO val2017-size evaluation takes a few seconds.
#ifndef TRAINYARD_PKG_DETECTION_COCO_EVALUATION_H_
#define TRAINYARD_PKG_DETECTION_COCO_EVALUATION_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/pkg/detection/coco_mask.h"
#include "trainyard/pkg/detection/detection_evaluation.h"

namespace trainyard::detection {

// A groundtruth annotation in COCO's layout.
struct CocoGroundtruthBox {
  double x = 0, y = 0, width = 0, height = 0;  // bbox [x, y, w, h]
  int64_t category_id = 0;
  bool is_crowd = false;
  double area = 0;  // the annotation's area (for segmentations, not the box's)
  int64_t id = 0;   // the annotation id
  Rle mask{};       // segm: the annotation's mask (COCO.annToRLE)
};

// A detection in COCO's results layout.
struct CocoDetectionBox {
  double x = 0, y = 0, width = 0, height = 0;
  int64_t category_id = 0;
  double score = 0;
  std::optional<double> area{};  // the area ranges' area; width * height when not given
  Rle mask{};                    // segm: the detection's mask
};

// COCOeval's iouType: boxes, or instance masks (each annotation's and detection's `mask`).
enum class CocoIouType { kBbox, kSegm };

// The 12 figures of COCOeval.summarize().
inline constexpr int kCocoSummaryCount = 12;
using CocoSummary = std::array<double, kCocoSummaryCount>;

// The API's tag of figure i ("DetectionBoxes_Precision/mAP", ...; "DetectionMasks_..." for
// segm).
const char* coco_metric_tag(int i, CocoIouType iou_type = CocoIouType::kBbox);
// The API's tag of a category's mAP with include_metrics_per_category
// ("DetectionBoxes_PerformanceByCategory/mAP/<name>", "DetectionMasks_..." for segm).
std::string coco_per_category_tag(const std::string& category_name,
                                  CocoIouType iou_type = CocoIouType::kBbox);
// pycocotools' printed line of figure i with its value:
// " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.xxx".
std::string coco_summary_line(int i, double value);

class CocoDetectionEvaluator : public DetectionEvaluator {
 public:
  // Throws InvalidArgument for two categories with the same id.
  explicit CocoDetectionEvaluator(std::vector<Category> categories,
                                  bool include_metrics_per_category = false,
                                  CocoIouType iou_type = CocoIouType::kBbox);

  // The API's path: boxes [ymin, xmin, ymax, xmax] become [xmin, ymin, xmax - xmin, ymax - ymin]
  // (the differences in float32, as the API's numpy arrays); a missing or non-positive area is
  // the box's; annotations are numbered from 1. With kSegm (CocoMaskEvaluator) each groundtruth
  // box and each detection brings its mask (`masks`, rle_encode() of its image mask; else
  // InvalidArgument): the groundtruth keeps the box's area (ExportSingleImageGroundtruthToCoco),
  // a detection takes its mask's area and box (COCOWrapper.LoadAnnotations). Groundtruth of an
  // image given twice is ignored after the first (the API warns).
  void add_groundtruth(const ImageId& image_id, const GroundtruthImage& groundtruth) override;
  // Detections need the image's groundtruth first (else InvalidArgument, as the API's
  // "Missing groundtruth for image id"); given twice they are ignored after the first.
  void add_detections(const ImageId& image_id, const DetectionsImage& detections) override;

  // COCO's path, as loadRes reads results: for an image that has no groundtruth yet this adds
  // it (with none); detections may arrive in several calls and add up, in order. For segm each
  // annotation and detection carries its mask.
  void add_coco_groundtruth(const ImageId& image_id, const std::vector<CocoGroundtruthBox>& boxes);
  void add_coco_detections(const ImageId& image_id, const std::vector<CocoDetectionBox>& boxes);

  // The 12 figures (see above). `on_image`, when given, is called after each image is evaluated
  // with the images done and their number (for a command's progress). `per_category`, when
  // given, receives the 12 figures of each category alone, in categories() order.
  using ImagesDone = std::function<void(std::size_t done, std::size_t images)>;
  CocoSummary summarize(const ImagesDone& on_image = {},
                        std::vector<CocoSummary>* per_category = nullptr) const;
  // The categories evaluated, in id order.
  const std::vector<Category>& categories() const { return categories_; }
  CocoIouType iou_type() const { return iou_type_; }
  EvaluationMetrics evaluate() override;
  void clear() override;

 private:
  struct Image {
    std::vector<CocoGroundtruthBox> groundtruth;
    std::vector<CocoDetectionBox> detections;
    bool has_detections = false;
  };

  std::vector<Category> categories_;
  bool include_metrics_per_category_ = false;
  CocoIouType iou_type_ = CocoIouType::kBbox;
  std::map<ImageId, Image> images_;
  int64_t next_annotation_id_ = 1;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_COCO_EVALUATION_H_
