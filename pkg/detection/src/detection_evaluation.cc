// The API's Pascal VOC and Open Images V2 evaluators and utils/metrics (see
// detection_evaluation.h).
#include "trainyard/pkg/detection/detection_evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "trainyard/error.h"
#include "trainyard/pkg/detection/coco_evaluation.h"

namespace trainyard::detection {

std::string image_id_string(const ImageId& id) {
  if (const int64_t* number = std::get_if<int64_t>(&id)) return std::to_string(*number);
  return "'" + std::get<std::string>(id) + "'";
}

namespace {

// Indices of `scores` by descending score, equal scores the later index first: the API's
// argsort()[::-1] as a stable argsort would give it. numpy's default argsort is not stable
// (on this project's AVX-512 machines [.9, .8, .5, .85, .5, .5, .5] sorts as 2 6 5 4 1 3 0), so
// where a true and a false positive tie, the API's own AP depends on numpy's build; the goldens
// keep ties only where their order cannot change a figure.
std::vector<std::size_t> descending_reversed_order(const std::vector<double>& scores) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  std::reverse(order.begin(), order.end());
  return order;
}

void check_finite(double value, const char* what, const ImageId& image_id) {
  if (!std::isfinite(value)) {
    throw InvalidArgument("image " + image_id_string(image_id) + ": " + what + " is not finite (" +
                          std::to_string(value) + ")");
  }
}

void check_sizes(std::size_t n, std::size_t got, const char* what, const ImageId& image_id,
                 bool may_be_empty) {
  if (got != n && !(may_be_empty && got == 0)) {
    throw InvalidArgument("image " + image_id_string(image_id) + ": " + std::to_string(got) + " " +
                          what + " for " + std::to_string(n) + " boxes");
  }
}

// np_box_ops.intersection of two [ymin, xmin, ymax, xmax] boxes as numpy computes it for the
// API's float32 arrays: each side's extent in float32, clamped at 0 against a float64 zero, so
// their product is float64.
double corner_intersection(const BoxCorners& a, const BoxCorners& b) {
  const double height =
      std::max(0.0, static_cast<double>(std::min(a[2], b[2]) - std::max(a[0], b[0])));
  const double width =
      std::max(0.0, static_cast<double>(std::min(a[3], b[3]) - std::max(a[1], b[1])));
  return height * width;
}

float corner_area(const BoxCorners& a) { return (a[2] - a[0]) * (a[3] - a[1]); }

// np_box_ops.iou: the float32 areas summed in float32, less the float64 intersection.
double corner_iou(const BoxCorners& a, const BoxCorners& b) {
  const double intersection = corner_intersection(a, b);
  const float areas = corner_area(a) + corner_area(b);
  return intersection / (static_cast<double>(areas) - intersection);
}

// np_box_ops.ioa(group_of, detected): the part of the detection's area inside the box.
double corner_ioa(const BoxCorners& group_of, const BoxCorners& detected) {
  return corner_intersection(group_of, detected) / static_cast<double>(corner_area(detected));
}

// np.argmax over `count` values: the first NaN if any, else the first maximum.
template <typename Value>
std::size_t numpy_argmax(std::size_t count, Value value) {
  std::size_t best = 0;
  double best_value = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < count; ++j) {
    const double v = value(j);
    if (std::isnan(v)) return j;
    if (j == 0 || v > best_value) {
      best_value = v;
      best = j;
    }
  }
  return best;
}

// The boxes of a flat [ymin, xmin, ymax, xmax] list; InvalidArgument when its length is not a
// multiple of 4 or a value is not finite.
std::vector<BoxCorners> corners_of(const std::vector<float>& flat, const char* what,
                                   const ImageId& image_id) {
  if (flat.size() % 4 != 0) {
    throw InvalidArgument("image " + image_id_string(image_id) + ": " + what + " has " +
                          std::to_string(flat.size()) + " values, not 4 per box");
  }
  std::vector<BoxCorners> boxes(flat.size() / 4);
  for (std::size_t i = 0; i < flat.size(); ++i) {
    check_finite(flat[i], what, image_id);
    boxes[i / 4][i % 4] = flat[i];
  }
  return boxes;
}

}  // namespace

void compute_precision_recall(const std::vector<double>& scores,
                              const std::vector<uint8_t>& is_true_positive, int64_t num_groundtruth,
                              std::vector<double>* precision, std::vector<double>* recall) {
  if (scores.size() != is_true_positive.size()) {
    throw InvalidArgument("compute_precision_recall: " + std::to_string(scores.size()) +
                          " scores for " + std::to_string(is_true_positive.size()) + " labels");
  }
  const int64_t true_positives =
      std::count_if(is_true_positive.begin(), is_true_positive.end(), [](uint8_t v) { return v; });
  if (num_groundtruth < true_positives) {
    throw InvalidArgument("compute_precision_recall: " + std::to_string(true_positives) +
                          " true positives for " + std::to_string(num_groundtruth) +
                          " groundtruth instances");
  }
  precision->clear();
  recall->clear();
  if (num_groundtruth == 0) return;
  double tp = 0, fp = 0;
  for (std::size_t i : descending_reversed_order(scores)) {
    if (is_true_positive[i]) {
      tp += 1;
    } else {
      fp += 1;
    }
    precision->push_back(tp / (tp + fp));
    recall->push_back(tp / static_cast<double>(num_groundtruth));
  }
}

double compute_average_precision(const std::vector<double>& precision,
                                 const std::vector<double>& recall) {
  if (precision.size() != recall.size()) {
    throw InvalidArgument("compute_average_precision: " + std::to_string(precision.size()) +
                          " precisions for " + std::to_string(recall.size()) + " recalls");
  }
  if (precision.empty()) return 0.0;
  std::vector<double> p(precision.size() + 2, 0.0), r(recall.size() + 2, 0.0);
  std::copy(precision.begin(), precision.end(), p.begin() + 1);
  std::copy(recall.begin(), recall.end(), r.begin() + 1);
  r.back() = 1.0;
  for (std::size_t i = p.size() - 1; i-- > 0;) p[i] = std::max(p[i], p[i + 1]);
  double average_precision = 0;
  for (std::size_t i = 1; i < r.size(); ++i) {
    if (r[i] != r[i - 1]) average_precision += (r[i] - r[i - 1]) * p[i];
  }
  return average_precision;
}

ObjectDetectionEvaluator::ObjectDetectionEvaluator(std::vector<Category> categories,
                                                   std::string metric_prefix, BoxFlags flags,
                                                   double matching_iou_threshold)
    : categories_(std::move(categories)),
      metric_prefix_(std::move(metric_prefix)),
      flags_(flags),
      matching_iou_threshold_(matching_iou_threshold) {
  if (categories_.empty()) {
    throw InvalidArgument(metric_prefix_ + " evaluator needs at least one category");
  }
  for (const Category& category : categories_) {
    if (category.id < 1) {
      throw InvalidArgument(metric_prefix_ + " evaluator: category '" + category.name +
                            "' has id " + std::to_string(category.id) + "; classes are 1-based");
    }
    num_classes_ = std::max(num_classes_, category.id);
  }
  clear();
}

void ObjectDetectionEvaluator::clear() {
  groundtruth_.clear();
  detected_images_.clear();
  num_groundtruth_per_class_.assign(num_classes_, 0);
  scores_per_class_.assign(num_classes_, {});
  true_positive_per_class_.assign(num_classes_, {});
  average_precision_.clear();
}

void ObjectDetectionEvaluator::add_groundtruth(const ImageId& image_id,
                                               const GroundtruthImage& groundtruth) {
  std::vector<BoxCorners> boxes = corners_of(groundtruth.boxes, "groundtruth boxes", image_id);
  const std::size_t n = boxes.size();
  check_sizes(n, groundtruth.classes.size(), "classes", image_id, false);
  check_sizes(n, groundtruth.difficult.size(), "difficult flags", image_id, true);
  check_sizes(n, groundtruth.group_of.size(), "group_of flags", image_id, true);
  if (groundtruth_.count(image_id) != 0) {
    throw InvalidArgument("image " + image_id_string(image_id) +
                          ": its groundtruth was already added");
  }
  StoredGroundtruth stored;
  stored.boxes = std::move(boxes);
  // The flags the protocol ignores are all false, as the API passes None for them.
  if (flags_ == BoxFlags::kDifficult) stored.difficult = groundtruth.difficult;
  if (flags_ == BoxFlags::kGroupOf) stored.group_of = groundtruth.group_of;
  stored.difficult.resize(n, 0);
  stored.group_of.resize(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const int64_t index = groundtruth.classes[i] - 1;
    stored.classes.push_back(index);
    if (index >= 0 && index < num_classes_ && !stored.difficult[i] && !stored.group_of[i]) {
      ++num_groundtruth_per_class_[index];
    }
  }
  groundtruth_.emplace(image_id, std::move(stored));
}

void ObjectDetectionEvaluator::add_detections(const ImageId& image_id,
                                              const DetectionsImage& detections) {
  const std::vector<BoxCorners> detected =
      corners_of(detections.boxes, "detection boxes", image_id);
  const std::size_t n = detected.size();
  check_sizes(n, detections.scores.size(), "scores", image_id, false);
  check_sizes(n, detections.classes.size(), "classes", image_id, false);
  for (std::size_t i = 0; i < n; ++i) {
    check_finite(detections.scores[i], "a detection score", image_id);
  }
  if (!detected_images_.insert(image_id).second) return;
  static const StoredGroundtruth kNone;
  const auto found = groundtruth_.find(image_id);
  const StoredGroundtruth& gt = found == groundtruth_.end() ? kNone : found->second;

  for (int64_t c = 0; c < num_classes_; ++c) {
    // This class's valid detections, taken by descending score.
    std::vector<BoxCorners> boxes;
    std::vector<double> scores;
    for (std::size_t i = 0; i < n; ++i) {
      const BoxCorners& b = detected[i];
      if (detections.classes[i] - 1 != c || !(b[0] < b[2] && b[1] < b[3]) ||
          !(detections.scores[i] > -10.0)) {
        continue;
      }
      boxes.push_back(b);
      scores.push_back(detections.scores[i]);
    }
    if (boxes.empty()) continue;
    const std::vector<std::size_t> order = descending_reversed_order(scores);
    std::vector<std::size_t> single, group_of;  // this class's boxes
    for (std::size_t g = 0; g < gt.boxes.size(); ++g) {
      if (gt.classes[g] == c) (gt.group_of[g] ? group_of : single).push_back(g);
    }
    std::vector<uint8_t> true_positive(boxes.size(), 0), ignored(boxes.size(), 0);
    // 1. Each detection against the box it overlaps most (IoU) of the single-object boxes.
    if (!single.empty()) {
      std::vector<uint8_t> gt_detected(single.size(), 0);
      for (std::size_t i : order) {
        const std::size_t best = numpy_argmax(single.size(), [&](std::size_t j) {
          return corner_iou(boxes[i], gt.boxes[single[j]]);
        });
        if (!(corner_iou(boxes[i], gt.boxes[single[best]]) >= matching_iou_threshold_)) continue;
        if (gt.difficult[single[best]]) {
          ignored[i] = 1;
        } else if (!gt_detected[best]) {
          true_positive[i] = 1;
          gt_detected[best] = 1;
        }
      }
    }
    // 2. The others against the group-of box holding most of them (IoA): ignored when it holds
    // at least the threshold (group_of_weight 0 adds no true positive for the group).
    if (!group_of.empty()) {
      for (std::size_t i : order) {
        if (true_positive[i] || ignored[i]) continue;
        const std::size_t best = numpy_argmax(group_of.size(), [&](std::size_t j) {
          return corner_ioa(gt.boxes[group_of[j]], boxes[i]);
        });
        if (corner_ioa(gt.boxes[group_of[best]], boxes[i]) >= matching_iou_threshold_) {
          ignored[i] = 1;
        }
      }
    }
    for (std::size_t i : order) {
      if (ignored[i]) continue;
      scores_per_class_[c].push_back(scores[i]);
      true_positive_per_class_[c].push_back(true_positive[i]);
    }
  }
}

EvaluationMetrics ObjectDetectionEvaluator::evaluate() {
  average_precision_.assign(num_classes_, std::numeric_limits<double>::quiet_NaN());
  double sum = 0;
  int64_t count = 0;
  for (int64_t c = 0; c < num_classes_; ++c) {
    if (num_groundtruth_per_class_[c] == 0) continue;
    std::vector<double> precision, recall;
    compute_precision_recall(scores_per_class_[c], true_positive_per_class_[c],
                             num_groundtruth_per_class_[c], &precision, &recall);
    average_precision_[c] = compute_average_precision(precision, recall);
    sum += average_precision_[c];
    ++count;
  }
  const std::string iou = [&] {
    // Python's str() of the threshold, as the API's format() writes it ("0.5", "0.75").
    std::string s = std::to_string(matching_iou_threshold_);
    while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
    return s;
  }();
  EvaluationMetrics metrics;
  metrics.emplace_back(
      metric_prefix_ + "_Precision/mAP@" + iou + "IOU",
      count == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(count));
  for (const Category& category : categories_) {
    metrics.emplace_back(
        metric_prefix_ + "_PerformanceByCategory/AP@" + iou + "IOU/" + category.name,
        average_precision_[category.id - 1]);
  }
  return metrics;
}

namespace {

[[noreturn]] void unknown_metrics_set(const std::string& metrics_set) {
  throw ConfigError("eval_config metrics_set '" + metrics_set +
                    "' is not supported (supported: coco_detection_metrics, coco_mask_metrics, "
                    "pascal_voc_detection_metrics, open_images_V2_detection_metrics, "
                    "oid_V2_detection_metrics)");
}

bool is_open_images_v2(const std::string& metrics_set) {
  return metrics_set == "open_images_V2_detection_metrics" ||
         metrics_set == "oid_V2_detection_metrics";
}

}  // namespace

std::unique_ptr<DetectionEvaluator> make_detection_evaluator(
    const std::string& metrics_set, const std::vector<Category>& categories,
    bool include_metrics_per_category) {
  if (metrics_set == "coco_detection_metrics") {
    return std::make_unique<CocoDetectionEvaluator>(categories, include_metrics_per_category);
  }
  if (metrics_set == "coco_mask_metrics") {
    return std::make_unique<CocoDetectionEvaluator>(categories, include_metrics_per_category,
                                                    CocoIouType::kSegm);
  }
  if (metrics_set == "pascal_voc_detection_metrics") {
    return std::make_unique<PascalDetectionEvaluator>(categories);
  }
  if (is_open_images_v2(metrics_set)) {
    return std::make_unique<OpenImagesDetectionEvaluator>(categories);
  }
  unknown_metrics_set(metrics_set);
}

std::vector<std::string> detection_evaluator_tags(const std::string& metrics_set,
                                                  const std::vector<Category>& categories,
                                                  bool include_metrics_per_category) {
  std::vector<std::string> tags;
  if (metrics_set == "coco_detection_metrics" || metrics_set == "coco_mask_metrics") {
    const CocoIouType type =
        metrics_set == "coco_mask_metrics" ? CocoIouType::kSegm : CocoIouType::kBbox;
    for (int i = 0; i < kCocoSummaryCount; ++i) tags.emplace_back(coco_metric_tag(i, type));
    if (include_metrics_per_category) {
      std::vector<Category> by_id = categories;
      std::sort(by_id.begin(), by_id.end(),
                [](const Category& a, const Category& b) { return a.id < b.id; });
      for (const Category& category : by_id) {
        tags.push_back(coco_per_category_tag(category.name, type));
      }
    }
    return tags;
  }
  std::string prefix;
  if (metrics_set == "pascal_voc_detection_metrics") {
    prefix = "PascalBoxes";
  } else if (is_open_images_v2(metrics_set)) {
    prefix = "OpenImagesV2";
  } else {
    unknown_metrics_set(metrics_set);
  }
  tags.push_back(prefix + "_Precision/mAP@0.5IOU");
  for (const Category& category : categories) {
    tags.push_back(prefix + "_PerformanceByCategory/AP@0.5IOU/" + category.name);
  }
  return tags;
}

}  // namespace trainyard::detection
