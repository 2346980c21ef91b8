// COCOeval for bounding boxes and instance masks (see coco_evaluation.h).
#include "trainyard/pkg/detection/coco_evaluation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <unordered_map>

#include "trainyard/error.h"

namespace trainyard::detection {
namespace {

constexpr int kIouThresholdCount = 10;
constexpr int kRecallPointCount = 101;
constexpr int kAreaRangeCount = 4;
constexpr int kMaxDetections[3] = {1, 10, 100};

struct AreaRange {
  double low, high;
};
// all, small, medium, large (pycocotools' areaRng: 1e5 ** 2 is 1e10).
constexpr AreaRange kAreaRanges[kAreaRangeCount] = {
    {0.0, 1e10}, {0.0, 32.0 * 32.0}, {32.0 * 32.0, 96.0 * 96.0}, {96.0 * 96.0, 1e10}};

// numpy.linspace(start, stop, num): i * ((stop - start) / (num - 1)) + start, the last one stop.
template <int N>
std::array<double, N> linspace(double start, double stop) {
  std::array<double, N> values;
  const double step = (stop - start) / (N - 1);
  for (int i = 0; i < N; ++i) values[i] = static_cast<double>(i) * step + start;
  values[N - 1] = stop;
  return values;
}

const std::array<double, kIouThresholdCount> kIouThresholds =
    linspace<kIouThresholdCount>(0.5, 0.95);
const std::array<double, kRecallPointCount> kRecallPoints = linspace<kRecallPointCount>(0.0, 1.0);

// One kept detection of an (image, category) at one area range: its score, its rank among the
// image's detections of the category, and per IoU threshold whether it is a true positive or
// ignored (neither: a false positive).
struct Scored {
  double score;
  uint32_t rank;
  uint16_t true_positive;  // bit t
  uint16_t ignored;        // bit t
};

// maskApi's bbIou: [x, y, w, h] boxes; against a crowd region the union is the detection.
double coco_iou(const CocoDetectionBox& d, const CocoGroundtruthBox& g) {
  const double w = std::fmin(d.width + d.x, g.width + g.x) - std::fmax(d.x, g.x);
  if (w <= 0) return 0;
  const double h = std::fmin(d.height + d.y, g.height + g.y) - std::fmax(d.y, g.y);
  if (h <= 0) return 0;
  const double intersection = w * h;
  const double detection_area = d.width * d.height;
  const double union_area =
      g.is_crowd ? detection_area : detection_area + g.width * g.height - intersection;
  return intersection / union_area;
}

double coco_mask_iou(const CocoDetectionBox& d, const CocoGroundtruthBox& g) {
  return rle_iou(d.mask, g.mask, g.is_crowd);
}

using IouFunction = double (*)(const CocoDetectionBox&, const CocoGroundtruthBox&);

struct Accumulator {
  std::vector<Scored> scored;
  int64_t num_not_ignored = 0;  // groundtruth that counts, over all images
};

// The per-image evaluation of one (image, category): COCOeval.evaluateImg at every area range.
void evaluate_image(const std::vector<const CocoGroundtruthBox*>& gt,
                    std::vector<const CocoDetectionBox*> dt, IouFunction iou,
                    Accumulator* accumulators) {
  std::stable_sort(dt.begin(), dt.end(), [](const CocoDetectionBox* a, const CocoDetectionBox* b) {
    return a->score > b->score;
  });
  if (dt.size() > static_cast<std::size_t>(kMaxDetections[2])) dt.resize(kMaxDetections[2]);
  const std::size_t num_dt = dt.size(), num_gt = gt.size();
  std::vector<double> ious(num_dt * num_gt);
  for (std::size_t d = 0; d < num_dt; ++d) {
    for (std::size_t g = 0; g < num_gt; ++g) ious[d * num_gt + g] = iou(*dt[d], *gt[g]);
  }
  std::vector<std::size_t> order(num_gt);
  std::vector<uint8_t> gt_ignored(num_gt), gt_matched(num_gt);
  std::vector<int> match(num_dt);
  for (int a = 0; a < kAreaRangeCount; ++a) {
    const AreaRange range = kAreaRanges[a];
    Accumulator& acc = accumulators[a];
    for (std::size_t g = 0; g < num_gt; ++g) {
      gt_ignored[g] = gt[g]->is_crowd || gt[g]->area < range.low || gt[g]->area > range.high;
      if (!gt_ignored[g]) ++acc.num_not_ignored;
    }
    // Groundtruth that counts first, each part in its order.
    std::iota(order.begin(), order.end(), 0);
    std::stable_partition(order.begin(), order.end(),
                          [&](std::size_t g) { return !gt_ignored[g]; });
    const std::size_t first_scored = acc.scored.size();
    for (std::size_t d = 0; d < num_dt; ++d) {
      acc.scored.push_back({dt[d]->score, static_cast<uint32_t>(d), 0, 0});
    }
    for (int t = 0; t < kIouThresholdCount; ++t) {
      std::fill(gt_matched.begin(), gt_matched.end(), 0);
      for (std::size_t d = 0; d < num_dt; ++d) {
        double best = std::min(kIouThresholds[t], 1 - 1e-10);
        int m = -1;
        for (std::size_t gi : order) {
          if (gt_matched[gi] && !gt[gi]->is_crowd) continue;
          // Matched to groundtruth that counts: ignored groundtruth (all after it) cannot win.
          if (m > -1 && !gt_ignored[m] && gt_ignored[gi]) break;
          const double value = ious[d * num_gt + gi];
          if (value < best) continue;
          best = value;
          m = static_cast<int>(gi);
        }
        match[d] = m;
        if (m != -1) gt_matched[m] = 1;
      }
      const uint16_t bit = static_cast<uint16_t>(1u << t);
      for (std::size_t d = 0; d < num_dt; ++d) {
        Scored& s = acc.scored[first_scored + d];
        const int m = match[d];
        // pycocotools records the matched annotation's id and tests it against 0.
        const bool matched = m != -1 && gt[m]->id != 0;
        bool ignored = m != -1 && gt_ignored[m];
        if (!matched) {
          const double area = dt[d]->area.value_or(dt[d]->width * dt[d]->height);
          if (area < range.low || area > range.high) ignored = true;
        }
        if (ignored) {
          s.ignored |= bit;
        } else if (matched) {
          s.true_positive |= bit;
        }
      }
    }
  }
}

// The mean of the defined values (> -1) a figure averages (pycocotools' summarize), summed in
// the order they come; -1 when there are none. Running sums, so that memory does not grow with
// categories x thresholds x recall points.
class DefinedMean {
 public:
  void add(double v) {
    if (v > -1) {
      sum_ += v;
      ++count_;
    }
  }
  double value() const { return count_ == 0 ? -1.0 : sum_ / static_cast<double>(count_); }

 private:
  double sum_ = 0;
  int64_t count_ = 0;
};

void check_finite(double value, const char* what, const ImageId& image_id) {
  if (!std::isfinite(value)) {
    throw InvalidArgument("image " + image_id_string(image_id) + ": " + what + " is not finite (" +
                          std::to_string(value) + ")");
  }
}

}  // namespace

const char* coco_metric_tag(int i, CocoIouType iou_type) {
  static const char* const kMaskTags[kCocoSummaryCount] = {
      "DetectionMasks_Precision/mAP",
      "DetectionMasks_Precision/mAP@.50IOU",
      "DetectionMasks_Precision/mAP@.75IOU",
      "DetectionMasks_Precision/mAP (small)",
      "DetectionMasks_Precision/mAP (medium)",
      "DetectionMasks_Precision/mAP (large)",
      "DetectionMasks_Recall/AR@1",
      "DetectionMasks_Recall/AR@10",
      "DetectionMasks_Recall/AR@100",
      "DetectionMasks_Recall/AR@100 (small)",
      "DetectionMasks_Recall/AR@100 (medium)",
      "DetectionMasks_Recall/AR@100 (large)",
  };
  static const char* const kTags[kCocoSummaryCount] = {
      "DetectionBoxes_Precision/mAP",
      "DetectionBoxes_Precision/mAP@.50IOU",
      "DetectionBoxes_Precision/mAP@.75IOU",
      "DetectionBoxes_Precision/mAP (small)",
      "DetectionBoxes_Precision/mAP (medium)",
      "DetectionBoxes_Precision/mAP (large)",
      "DetectionBoxes_Recall/AR@1",
      "DetectionBoxes_Recall/AR@10",
      "DetectionBoxes_Recall/AR@100",
      "DetectionBoxes_Recall/AR@100 (small)",
      "DetectionBoxes_Recall/AR@100 (medium)",
      "DetectionBoxes_Recall/AR@100 (large)",
  };
  if (i < 0 || i >= kCocoSummaryCount) {
    throw InvalidArgument("COCO summary figure " + std::to_string(i) + " is not in 0..11");
  }
  return iou_type == CocoIouType::kSegm ? kMaskTags[i] : kTags[i];
}

std::string coco_per_category_tag(const std::string& category_name, CocoIouType iou_type) {
  return (iou_type == CocoIouType::kSegm ? "DetectionMasks" : "DetectionBoxes") +
         std::string("_PerformanceByCategory/mAP/") + category_name;
}

std::string coco_summary_line(int i, double value) {
  coco_metric_tag(i);  // checks i
  static const char* const kIou[kCocoSummaryCount] = {
      "0.50:0.95", "0.50",      "0.75",      "0.50:0.95", "0.50:0.95", "0.50:0.95",
      "0.50:0.95", "0.50:0.95", "0.50:0.95", "0.50:0.95", "0.50:0.95", "0.50:0.95"};
  static const char* const kArea[kCocoSummaryCount] = {"all",    "all",   "all",    "small",
                                                       "medium", "large", "all",    "all",
                                                       "all",    "small", "medium", "large"};
  static const int kMaxDets[kCocoSummaryCount] = {100, 100, 100, 100, 100, 100,
                                                  1,   10,  100, 100, 100, 100};
  const bool precision = i < 6;
  char line[160];
  std::snprintf(line, sizeof line, " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f",
                precision ? "Average Precision" : "Average Recall", precision ? "(AP)" : "(AR)",
                kIou[i], kArea[i], kMaxDets[i], value);
  return line;
}

CocoDetectionEvaluator::CocoDetectionEvaluator(std::vector<Category> categories,
                                               bool include_metrics_per_category,
                                               CocoIouType iou_type)
    : categories_(std::move(categories)),
      include_metrics_per_category_(include_metrics_per_category),
      iou_type_(iou_type) {
  std::sort(categories_.begin(), categories_.end(),
            [](const Category& a, const Category& b) { return a.id < b.id; });
  for (std::size_t i = 1; i < categories_.size(); ++i) {
    if (categories_[i].id == categories_[i - 1].id) {
      throw InvalidArgument("CocoDetectionEvaluator: categories '" + categories_[i - 1].name +
                            "' and '" + categories_[i].name + "' have the same id " +
                            std::to_string(categories_[i].id));
    }
  }
}

void CocoDetectionEvaluator::clear() {
  images_.clear();
  next_annotation_id_ = 1;
}

void CocoDetectionEvaluator::add_groundtruth(const ImageId& image_id,
                                             const GroundtruthImage& groundtruth) {
  if (groundtruth.boxes.size() % 4 != 0) {
    throw InvalidArgument("image " + image_id_string(image_id) + ": groundtruth boxes have " +
                          std::to_string(groundtruth.boxes.size()) + " values, not 4 per box");
  }
  const std::size_t n = groundtruth.boxes.size() / 4;
  const auto check = [&](std::size_t got, const char* what, bool may_be_empty) {
    if (got != n && !(may_be_empty && got == 0)) {
      throw InvalidArgument("image " + image_id_string(image_id) + ": " + std::to_string(got) +
                            " " + what + " for " + std::to_string(n) + " groundtruth boxes");
    }
  };
  check(groundtruth.classes.size(), "classes", false);
  check(groundtruth.is_crowd.size(), "is_crowd flags", true);
  check(groundtruth.area.size(), "areas", true);
  if (iou_type_ == CocoIouType::kSegm && groundtruth.masks.size() != n) {
    throw InvalidArgument(
        "image " + image_id_string(image_id) + ": " + std::to_string(groundtruth.masks.size()) +
        " groundtruth instance masks for " + std::to_string(n) +
        " groundtruth boxes; mask evaluation (coco_mask_metrics) needs one per box "
        "(groundtruth_instance_masks: load_instance_masks in the input reader)");
  }
  if (images_.count(image_id) != 0) return;
  std::vector<CocoGroundtruthBox> boxes;
  for (std::size_t i = 0; i < n; ++i) {
    const float* b = groundtruth.boxes.data() + 4 * i;
    for (int j = 0; j < 4; ++j) check_finite(b[j], "a groundtruth coordinate", image_id);
    CocoGroundtruthBox box;
    box.x = b[1];
    box.y = b[0];
    box.width = b[3] - b[1];  // float32, as the API's numpy arrays
    box.height = b[2] - b[0];
    box.category_id = groundtruth.classes[i];
    box.is_crowd = !groundtruth.is_crowd.empty() && groundtruth.is_crowd[i];
    const float given = groundtruth.area.empty() ? 0.0f : groundtruth.area[i];
    check_finite(given, "a groundtruth area", image_id);
    box.area = given > 0 ? given : (b[2] - b[0]) * (b[3] - b[1]);
    box.id = next_annotation_id_++;
    if (iou_type_ == CocoIouType::kSegm) box.mask = groundtruth.masks[i];
    boxes.push_back(box);
  }
  images_[image_id].groundtruth = std::move(boxes);
}

void CocoDetectionEvaluator::add_detections(const ImageId& image_id,
                                            const DetectionsImage& detections) {
  const std::size_t n = detections.boxes.size() / 4;
  if (detections.boxes.size() % 4 != 0 || detections.scores.size() != n ||
      detections.classes.size() != n) {
    throw InvalidArgument("image " + image_id_string(image_id) + ": " +
                          std::to_string(detections.boxes.size()) + " detection box values, " +
                          std::to_string(detections.scores.size()) + " scores and " +
                          std::to_string(detections.classes.size()) + " classes");
  }
  if (iou_type_ == CocoIouType::kSegm && detections.masks.size() != n) {
    throw InvalidArgument("image " + image_id_string(image_id) + ": " +
                          std::to_string(detections.masks.size()) + " detection masks for " +
                          std::to_string(n) +
                          " detections; mask evaluation (coco_mask_metrics) needs the model's "
                          "detection_masks (a box predictor with predict_instance_masks)");
  }
  const auto found = images_.find(image_id);
  if (found == images_.end()) {
    throw InvalidArgument("missing groundtruth for image id " + image_id_string(image_id) +
                          " (add its groundtruth before its detections)");
  }
  if (found->second.has_detections) return;
  std::vector<CocoDetectionBox> boxes;
  for (std::size_t i = 0; i < n; ++i) {
    const float* b = detections.boxes.data() + 4 * i;
    CocoDetectionBox box;
    box.x = b[1];
    box.y = b[0];
    box.width = b[3] - b[1];
    box.height = b[2] - b[0];
    box.category_id = detections.classes[i];
    box.score = detections.scores[i];
    if (iou_type_ == CocoIouType::kSegm) {
      // coco_tools.COCOWrapper.LoadAnnotations of segmentation results: the mask's area and box.
      box.mask = detections.masks[i];
      box.area = static_cast<double>(rle_area(box.mask));
      const std::array<double, 4> bbox = rle_to_bbox(box.mask);
      box.x = bbox[0];
      box.y = bbox[1];
      box.width = bbox[2];
      box.height = bbox[3];
    }
    boxes.push_back(box);
  }
  add_coco_detections(image_id, boxes);
}

void CocoDetectionEvaluator::add_coco_groundtruth(const ImageId& image_id,
                                                  const std::vector<CocoGroundtruthBox>& boxes) {
  for (const CocoGroundtruthBox& box : boxes) {
    for (double v : {box.x, box.y, box.width, box.height, box.area}) {
      check_finite(v, "a groundtruth value", image_id);
    }
  }
  std::vector<CocoGroundtruthBox>& stored = images_[image_id].groundtruth;
  stored.insert(stored.end(), boxes.begin(), boxes.end());
}

void CocoDetectionEvaluator::add_coco_detections(const ImageId& image_id,
                                                 const std::vector<CocoDetectionBox>& boxes) {
  for (const CocoDetectionBox& box : boxes) {
    for (double v : {box.x, box.y, box.width, box.height, box.score, box.area.value_or(0.0)}) {
      check_finite(v, "a detection value", image_id);
    }
  }
  Image& image = images_[image_id];
  image.has_detections = true;
  image.detections.insert(image.detections.end(), boxes.begin(), boxes.end());
}

CocoSummary CocoDetectionEvaluator::summarize(const ImagesDone& on_image,
                                              std::vector<CocoSummary>* per_category) const {
  const std::size_t num_categories = categories_.size();
  std::unordered_map<int64_t, std::size_t> category_index;
  for (std::size_t k = 0; k < num_categories; ++k) category_index[categories_[k].id] = k;

  const IouFunction iou = iou_type_ == CocoIouType::kSegm ? coco_mask_iou : coco_iou;
  // Per (category, area range), over the images in their order.
  std::vector<Accumulator> accumulators(num_categories * kAreaRangeCount);
  std::vector<std::vector<const CocoGroundtruthBox*>> gt_by_category(num_categories);
  std::vector<std::vector<const CocoDetectionBox*>> dt_by_category(num_categories);
  // The categories an image has boxes of: its work is proportional to its boxes, not to the
  // number of categories.
  std::vector<std::size_t> present;
  const auto note_present = [&](std::size_t k) {
    if (gt_by_category[k].empty() && dt_by_category[k].empty()) present.push_back(k);
  };
  std::size_t images_done = 0;
  for (const auto& [image_id, image] : images_) {
    present.clear();
    for (const CocoGroundtruthBox& box : image.groundtruth) {
      const auto it = category_index.find(box.category_id);
      if (it == category_index.end()) continue;
      note_present(it->second);
      gt_by_category[it->second].push_back(&box);
    }
    for (const CocoDetectionBox& box : image.detections) {
      const auto it = category_index.find(box.category_id);
      if (it == category_index.end()) continue;
      note_present(it->second);
      dt_by_category[it->second].push_back(&box);
    }
    for (std::size_t k : present) {
      evaluate_image(gt_by_category[k], dt_by_category[k], iou, &accumulators[k * kAreaRangeCount]);
      gt_by_category[k].clear();
      dt_by_category[k].clear();
    }
    if (on_image) on_image(++images_done, images_.size());
  }

  // COCOeval.accumulate, for the settings summarize() reads: precision at maxDets 100 for every
  // area range, recall at every maxDets for 'all' and at 100 for the others.
  // means[figure] averages the defined entries of that figure; category_means[k][figure] those
  // of category k alone, when asked for.
  std::array<DefinedMean, kCocoSummaryCount> means;
  std::vector<std::array<DefinedMean, kCocoSummaryCount>> category_means(
      per_category != nullptr ? num_categories : 0);
  std::vector<double> precision, recall;
  std::vector<Scored> kept;
  for (std::size_t k = 0; k < num_categories; ++k) {
    const auto add = [&](int figure, double value) {
      means[figure].add(value);
      if (per_category != nullptr) category_means[k][figure].add(value);
    };
    for (int a = 0; a < kAreaRangeCount; ++a) {
      Accumulator& acc = accumulators[k * kAreaRangeCount + a];
      if (acc.num_not_ignored == 0) continue;  // -1: left out of every mean
      std::stable_sort(acc.scored.begin(), acc.scored.end(),
                       [](const Scored& x, const Scored& y) { return x.score > y.score; });
      for (int m = 0; m < 3; ++m) {
        const bool wants_precision = m == 2;
        const bool wants_recall = a == 0 || m == 2;
        if (!wants_precision && !wants_recall) continue;
        kept.clear();
        for (const Scored& s : acc.scored) {
          if (s.rank < static_cast<uint32_t>(kMaxDetections[m])) kept.push_back(s);
        }
        const std::size_t nd = kept.size();
        for (int t = 0; t < kIouThresholdCount; ++t) {
          const uint16_t bit = static_cast<uint16_t>(1u << t);
          precision.resize(nd);
          recall.resize(nd);
          double tp = 0, fp = 0;
          for (std::size_t i = 0; i < nd; ++i) {
            if (!(kept[i].ignored & bit)) {
              if (kept[i].true_positive & bit) {
                tp += 1;
              } else {
                fp += 1;
              }
            }
            recall[i] = tp / static_cast<double>(acc.num_not_ignored);
            precision[i] = tp / (fp + tp + 2.220446049250313e-16);  // np.spacing(1)
          }
          const double final_recall = nd == 0 ? 0.0 : recall[nd - 1];
          if (wants_recall) {
            if (a == 0) add(6 + m, final_recall);
            if (m == 2 && a > 0) add(8 + a, final_recall);
          }
          if (!wants_precision) continue;
          for (std::size_t i = nd; i-- > 1;) {
            if (precision[i] > precision[i - 1]) precision[i - 1] = precision[i];
          }
          for (int r = 0; r < kRecallPointCount; ++r) {
            const std::size_t i =
                std::lower_bound(recall.begin(), recall.end(), kRecallPoints[r]) - recall.begin();
            const double q = i < nd ? precision[i] : 0.0;
            if (a == 0) {
              add(0, q);
              if (t == 0) add(1, q);
              if (t == 5) add(2, q);
            } else {
              add(2 + a, q);
            }
          }
        }
      }
    }
  }
  const auto values = [](const std::array<DefinedMean, kCocoSummaryCount>& figures) {
    CocoSummary summary;
    for (int i = 0; i < kCocoSummaryCount; ++i) summary[i] = figures[i].value();
    return summary;
  };
  if (per_category != nullptr) {
    per_category->clear();
    for (const auto& figures : category_means) per_category->push_back(values(figures));
  }
  return values(means);
}

EvaluationMetrics CocoDetectionEvaluator::evaluate() {
  std::vector<CocoSummary> per_category;
  const CocoSummary summary =
      summarize({}, include_metrics_per_category_ ? &per_category : nullptr);
  EvaluationMetrics metrics;
  for (int i = 0; i < kCocoSummaryCount; ++i) {
    metrics.emplace_back(coco_metric_tag(i, iou_type_), summary[i]);
  }
  for (std::size_t k = 0; k < per_category.size(); ++k) {
    metrics.emplace_back(coco_per_category_tag(categories_[k].name, iou_type_), per_category[k][0]);
  }
  return metrics;
}

}  // namespace trainyard::detection
