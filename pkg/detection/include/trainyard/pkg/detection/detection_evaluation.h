// The Object Detection API's DetectionEvaluator (utils/object_detection_evaluation.py) and its
// Pascal VOC (`pascal_voc_detection_metrics`) and Open Images V2
// (`open_images_V2_detection_metrics`, formerly `oid_V2_detection_metrics`) evaluators.
//
// An evaluator collects the groundtruth and the detections of images one image at a time and
// computes its metrics over all of them in evaluate(). Boxes are [ymin, xmin, ymax, xmax] in
// absolute pixel coordinates, classes are the label map's ids (1-based), as the API's
// evaluators take them. Not thread-safe; evaluate() may be called several times.
//
// ObjectDetectionEvaluator, as the API's (matching_iou_threshold=0.5, group_of_weight=0): on
// each image, per class, the detections are taken by descending score (equal scores: the later
// one first, as the API's reversed argsort). Each is matched to the single-object box of its
// class it overlaps most (IoU, the first of equal ones); it is a true positive when that IoU is
// >= 0.5 and the box was not matched before, a false positive otherwise; one whose best box is
// `difficult` (IoU >= 0.5) is neither and is dropped. Then each detection that is not a true
// positive is set against the group-of box of its class that holds the largest part of it
// (IoA: intersection over the detection's area); when that part is >= 0.5 it is dropped too
// (per_image_evaluation's two stages). Detections with ymin >= ymax or xmin >= xmax or a score
// <= -10 are dropped first (_remove_invalid_boxes and its NMS's score filter). IoU and IoA are
// computed as np_box_ops computes them on float32 boxes (areas in float32, intersection in
// float64). Difficult and group-of boxes do not count in a class's number of groundtruth
// instances. Per class, AP is the area under the monotone precision envelope
// (utils/metrics.compute_average_precision, the VOC 2010+ rule, not VOC 2007's 11 points) over
// the detections of all images sorted by descending score; a class without groundtruth
// instances (none, or only group-of or difficult boxes) has AP NaN and is left out of the mean
// (np.nanmean). The classes are 1..max category id, all in the mean; those in `categories` are
// reported by name:
//   <prefix>_Precision/mAP@0.5IOU
//   <prefix>_PerformanceByCategory/AP@0.5IOU/<name>   (one per category, in its order)
// PascalDetectionEvaluator: prefix PascalBoxes, `difficult` used, `group_of` ignored.
// OpenImagesDetectionEvaluator (the V2 one, not the Challenge's: no image-level labels):
// prefix OpenImagesV2, `group_of` used, `difficult` ignored (the API passes None for it).
// Category names are reported as given (the API also NFKD-normalizes them).
#ifndef TRAINYARD_PKG_DETECTION_DETECTION_EVALUATION_H_
#define TRAINYARD_PKG_DETECTION_DETECTION_EVALUATION_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "trainyard/pkg/detection/coco_mask.h"
#include "trainyard/pkg/detection/label_map.h"

namespace trainyard::detection {

// An image's key: a number (COCO's image ids) or a string (the API's source_id). Images are
// ordered as pycocotools sorts them: numbers by value, strings by their bytes (all numbers
// before all strings).
using ImageId = std::variant<int64_t, std::string>;
std::string image_id_string(const ImageId& id);

// The groundtruth of one image, in float32 as the API's evaluators receive it from the graph.
// `boxes` holds 4 values per box, [ymin, xmin, ymax, xmax] in absolute pixels. `difficult`,
// `is_crowd` and `area` are either empty (none given: not difficult, not a crowd, the box's
// area) or one per box; so is `group_of` (none given: no group-of box).
struct GroundtruthImage {
  std::vector<float> boxes;
  std::vector<int64_t> classes;
  std::vector<uint8_t> difficult;  // Pascal: ignored boxes
  std::vector<uint8_t> is_crowd;   // COCO: crowd regions
  std::vector<float> area;         // COCO: the object's area; <= 0 means the box's
  std::vector<uint8_t> group_of;   // Open Images: a box around a group of objects
  std::vector<Rle> masks;          // coco_mask_metrics: each box's instance mask in the image
};

struct DetectionsImage {
  std::vector<float> boxes;  // 4 per detection, as GroundtruthImage::boxes
  std::vector<float> scores;
  std::vector<int64_t> classes;
  std::vector<Rle> masks;  // coco_mask_metrics: each detection's mask in the image
};

// (tag, value), in the evaluator's order.
using EvaluationMetrics = std::vector<std::pair<std::string, double>>;

// The API's DetectionEvaluator. add_groundtruth() and add_detections() throw InvalidArgument
// for arrays of different lengths, a NaN or infinite coordinate or score; evaluate() throws
// nothing for any data it accepted.
class DetectionEvaluator {
 public:
  virtual ~DetectionEvaluator() = default;
  virtual void add_groundtruth(const ImageId& image_id, const GroundtruthImage& groundtruth) = 0;
  virtual void add_detections(const ImageId& image_id, const DetectionsImage& detections) = 0;
  virtual EvaluationMetrics evaluate() = 0;
  virtual void clear() = 0;
};

// The evaluator of an eval_config metrics_set: "coco_detection_metrics", "coco_mask_metrics"
// (CocoDetectionEvaluator with CocoIouType::kSegm: the images' `masks` are evaluated),
// "pascal_voc_detection_metrics", "open_images_V2_detection_metrics" or its former name
// "oid_V2_detection_metrics" (eval_util's EVAL_METRICS_CLASS_DICT maps both); throws ConfigError
// naming the set and the known ones.
// `include_metrics_per_category` is eval_config's: COCO adds each category's mAP (Pascal and
// Open Images report each category's AP whatever it says, as the API's do).
std::unique_ptr<DetectionEvaluator> make_detection_evaluator(
    const std::string& metrics_set, const std::vector<Category>& categories,
    bool include_metrics_per_category = false);

// The tags evaluate() returns for `metrics_set`, in order; the per-category tags for
// `categories` (none when empty). Throws as make_detection_evaluator.
std::vector<std::string> detection_evaluator_tags(const std::string& metrics_set,
                                                  const std::vector<Category>& categories = {},
                                                  bool include_metrics_per_category = false);

// utils/metrics.compute_precision_recall: detections sorted by descending score (equal scores:
// the later one first), cumulative precision and recall against `num_groundtruth`.
void compute_precision_recall(const std::vector<double>& scores,
                              const std::vector<uint8_t>& is_true_positive, int64_t num_groundtruth,
                              std::vector<double>* precision, std::vector<double>* recall);

// utils/metrics.compute_average_precision: the area under the monotone envelope of precision
// over recall; 0 for no detections.
double compute_average_precision(const std::vector<double>& precision,
                                 const std::vector<double>& recall);

// [ymin, xmin, ymax, xmax], absolute pixels.
using BoxCorners = std::array<float, 4>;

class ObjectDetectionEvaluator : public DetectionEvaluator {
 public:
  // Which groundtruth flag removes boxes from the count and their detections from the figures.
  enum class BoxFlags { kDifficult, kGroupOf };

  // Throws InvalidArgument for no categories or an id < 1.
  ObjectDetectionEvaluator(std::vector<Category> categories, std::string metric_prefix,
                           BoxFlags flags, double matching_iou_threshold = 0.5);

  // The same image twice: InvalidArgument (the API raises "Image with id ... already added").
  void add_groundtruth(const ImageId& image_id, const GroundtruthImage& groundtruth) override;
  // Detections of an image given twice are ignored after the first (the API warns); an image
  // without groundtruth has none (all its detections are false positives).
  void add_detections(const ImageId& image_id, const DetectionsImage& detections) override;
  EvaluationMetrics evaluate() override;
  void clear() override;

  // The AP of each class from the last evaluate(), indexed by id - 1; NaN without groundtruth.
  const std::vector<double>& average_precision_per_class() const { return average_precision_; }

 private:
  struct StoredGroundtruth {
    std::vector<BoxCorners> boxes;
    std::vector<int64_t> classes;  // 0-based
    std::vector<uint8_t> difficult;
    std::vector<uint8_t> group_of;
  };

  std::vector<Category> categories_;
  std::string metric_prefix_;
  BoxFlags flags_;
  double matching_iou_threshold_;
  int64_t num_classes_ = 0;
  std::map<ImageId, StoredGroundtruth> groundtruth_;
  std::set<ImageId> detected_images_;
  std::vector<int64_t> num_groundtruth_per_class_;
  std::vector<std::vector<double>> scores_per_class_;
  std::vector<std::vector<uint8_t>> true_positive_per_class_;
  std::vector<double> average_precision_;
};

class PascalDetectionEvaluator : public ObjectDetectionEvaluator {
 public:
  explicit PascalDetectionEvaluator(std::vector<Category> categories,
                                    double matching_iou_threshold = 0.5)
      : ObjectDetectionEvaluator(std::move(categories), "PascalBoxes", BoxFlags::kDifficult,
                                 matching_iou_threshold) {}
};

class OpenImagesDetectionEvaluator : public ObjectDetectionEvaluator {
 public:
  explicit OpenImagesDetectionEvaluator(std::vector<Category> categories,
                                        double matching_iou_threshold = 0.5)
      : ObjectDetectionEvaluator(std::move(categories), "OpenImagesV2", BoxFlags::kGroupOf,
                                 matching_iou_threshold) {}
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_DETECTION_EVALUATION_H_
