#include "trainyard/pkg/detection/non_max_suppression.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <queue>
#include <string>

#include "trainyard/error.h"

namespace trainyard::detection {

namespace {

// A box in min/max order with its area, as TensorFlow's NMS kernel sees it.
struct NormBox {
  float ymin, xmin, ymax, xmax, area;
};

inline NormBox normalize(const float* b) {
  NormBox n{std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3]),
            0.0f};
  n.area = (n.ymax - n.ymin) * (n.xmax - n.xmin);
  return n;
}

// The boxes kept so far, one array per coordinate, so that a candidate is compared with
// eight of them at a time. Boxes of zero area are not stored: their IoU with anything is 0, so
// they never suppress.
struct KeptBoxes {
  std::vector<float> ymin, xmin, ymax, xmax, area;

  void clear() {
    for (std::vector<float>* v : {&ymin, &xmin, &ymax, &xmax, &area}) v->clear();
  }
  void push_back(const NormBox& b) {
    ymin.push_back(b.ymin);
    xmin.push_back(b.xmin);
    ymax.push_back(b.ymax);
    xmax.push_back(b.xmax);
    area.push_back(b.area);
  }
  std::size_t size() const { return area.size(); }
};

// Whether the IoU of `c` (area > 0) with one of the boxes [begin, end) of `kept` exceeds
// `threshold`, with the arithmetic of TensorFlow's NMS kernel, operand for operand:
//   ih = max(min(c.ymax, k.ymax) - max(c.ymin, k.ymin), 0), iw likewise,
//   inter = ih iw, iou = inter / (c.area + k.area - inter),
// where min(a, b) is b < a ? b : a and max(a, b) is a < b ? b : a (std::min/std::max). The
// vector lanes compute exactly what the scalar expression does: IEEE division, no contraction
// into fused multiply-adds (the clones enable AVX2 alone, not FMA).
using Vec8 = float __attribute__((vector_size(32)));
using Mask8 = int32_t __attribute__((vector_size(32)));

__attribute__((target_clones("avx2", "default"))) bool overlaps_any(const KeptBoxes& kept,
                                                                    const NormBox& c,
                                                                    float threshold) {
  const std::size_t n = kept.size();
  std::size_t i = 0;
  const Vec8 zero = {};
  for (; i + 8 <= n; i += 8) {
    Vec8 k_ymin, k_xmin, k_ymax, k_xmax, k_area;
    std::memcpy(&k_ymin, &kept.ymin[i], sizeof(Vec8));
    std::memcpy(&k_xmin, &kept.xmin[i], sizeof(Vec8));
    std::memcpy(&k_ymax, &kept.ymax[i], sizeof(Vec8));
    std::memcpy(&k_xmax, &kept.xmax[i], sizeof(Vec8));
    std::memcpy(&k_area, &kept.area[i], sizeof(Vec8));
    const Vec8 top = k_ymax < c.ymax ? k_ymax : Vec8{} + c.ymax;
    const Vec8 bottom = c.ymin < k_ymin ? k_ymin : Vec8{} + c.ymin;
    const Vec8 right = k_xmax < c.xmax ? k_xmax : Vec8{} + c.xmax;
    const Vec8 left = c.xmin < k_xmin ? k_xmin : Vec8{} + c.xmin;
    Vec8 ih = top - bottom;
    ih = ih < zero ? zero : ih;
    Vec8 iw = right - left;
    iw = iw < zero ? zero : iw;
    const Vec8 inter = ih * iw;
    const Vec8 iou = inter / (c.area + k_area - inter);
    const Mask8 hit = iou > threshold;
    for (int lane = 0; lane < 8; ++lane) {
      if (hit[lane]) return true;
    }
  }
  for (; i < n; ++i) {
    const float ih =
        std::max(std::min(c.ymax, kept.ymax[i]) - std::max(c.ymin, kept.ymin[i]), 0.0f);
    const float iw =
        std::max(std::min(c.xmax, kept.xmax[i]) - std::max(c.xmin, kept.xmin[i]), 0.0f);
    const float inter = ih * iw;
    if (inter / (c.area + kept.area[i] - inter) > threshold) return true;
  }
  return false;
}

// A candidate of the NMS heap.
struct ScoredIndex {
  float score;
  int64_t index;
};

// Greedy NMS over the boxes box_stride floats apart (4 for [N, 4], 4 q for [N, q, 4]) whose
// score (scores[i * score_stride]) is > score_threshold. Appends the kept indices in decreasing
// score order (ties: lower index first) to `kept`. `order` and `kept_boxes` are scratch buffers
// reused across calls. O(N + P (log S + K / 8)) for S candidates of which P are examined and K
// kept: the hard example miner keeps nearly every box (IoU 0.99), so the comparisons with the
// kept boxes dominate, eight at a time.
void greedy_nms(const float* boxes, std::size_t box_stride, const float* scores,
                std::size_t score_stride, int64_t n, int64_t max_output, float iou_threshold,
                float score_threshold, std::vector<ScoredIndex>& order, KeptBoxes& kept_boxes,
                std::vector<int64_t>& kept) {
  order.clear();
  for (int64_t i = 0; i < n; ++i) {
    const float score = scores[i * score_stride];
    if (score > score_threshold) order.push_back({score, i});
  }
  // A max-heap on (score, -index): building it is O(S) and each candidate taken costs O(log S),
  // so a class whose first few boxes fill max_output never pays for sorting the rest.
  auto lower_priority = [](const ScoredIndex& a, const ScoredIndex& b) {
    return a.score != b.score ? a.score < b.score : a.index > b.index;
  };
  std::make_heap(order.begin(), order.end(), lower_priority);
  kept_boxes.clear();
  int64_t num_kept = 0;
  auto heap_end = order.end();
  while (heap_end != order.begin() && num_kept < max_output) {
    std::pop_heap(order.begin(), heap_end, lower_priority);
    --heap_end;
    const int64_t i = heap_end->index;
    const NormBox candidate = normalize(boxes + i * box_stride);
    // A box of zero area has IoU 0 with every box: it is never suppressed and suppresses none.
    const bool has_area = candidate.area > 0.0f;
    if (has_area && overlaps_any(kept_boxes, candidate, iou_threshold)) continue;
    if (has_area) kept_boxes.push_back(candidate);
    kept.push_back(i);
    ++num_kept;
  }
}

// TensorFlow's NMS kernel's IoU of a candidate and a kept box, operand for operand as
// overlaps_any's scalar tail: 0 when either has no area.
float iou_of(const NormBox& c, const NormBox& k) {
  if (!(c.area > 0.0f) || !(k.area > 0.0f)) return 0.0f;
  const float ih = std::max(std::min(c.ymax, k.ymax) - std::max(c.ymin, k.ymin), 0.0f);
  const float iw = std::max(std::min(c.xmax, k.xmax) - std::max(c.xmin, k.xmin), 0.0f);
  const float inter = ih * iw;
  return inter / (c.area + k.area - inter);
}

// Soft-NMS over the boxes box_stride floats apart with scores score_stride apart, as
// soft_non_max_suppression (the header) describes; appends the kept boxes to `kept`.
void soft_nms(const float* boxes, std::size_t box_stride, const float* scores,
              std::size_t score_stride, int64_t n, int64_t max_output, float sigma,
              float score_threshold, std::vector<SoftNmsSelection>& kept) {
  struct Candidate {
    float score;
    int64_t index;
    std::size_t suppress_begin;  // the kept boxes before it have decayed this score already
  };
  auto lower_priority = [](const Candidate& a, const Candidate& b) {
    return a.score != b.score ? a.score < b.score : a.index > b.index;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(lower_priority)> queue(
      lower_priority);
  for (int64_t i = 0; i < n; ++i) {
    const float score = scores[i * score_stride];
    if (score > score_threshold) queue.push({score, i, 0});
  }
  const float scale = -0.5f / sigma;
  std::vector<NormBox> kept_boxes;
  const std::size_t first = kept.size();
  while (static_cast<int64_t>(kept.size() - first) < max_output && !queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    const float original = c.score;
    const NormBox box = normalize(boxes + c.index * box_stride);
    for (std::size_t j = kept_boxes.size(); j > c.suppress_begin; --j) {
      const float iou = iou_of(box, kept_boxes[j - 1]);
      c.score *= std::exp(scale * iou * iou);
      if (c.score <= score_threshold) break;
    }
    c.suppress_begin = kept_boxes.size();
    if (c.score == original) {
      kept.push_back({c.index, c.score});
      kept_boxes.push_back(box);
    } else if (c.score > score_threshold) {
      queue.push(c);
    }
  }
}

// The smallest window holding every box of `boxes` (a non-empty multiple of 4 floats): where
// the API clips when no window is given.
BoxWindow extent_of(std::span<const float> boxes) {
  BoxWindow w{boxes[0], boxes[1], boxes[2], boxes[3]};
  for (std::size_t i = 0; i < boxes.size(); i += 4) {
    w[0] = std::min(w[0], boxes[i]);
    w[1] = std::min(w[1], boxes[i + 1]);
    w[2] = std::max(w[2], boxes[i + 2]);
    w[3] = std::max(w[3], boxes[i + 3]);
  }
  return w;
}

void check_iou_threshold(const char* op, float iou_threshold) {
  if (!(iou_threshold >= 0.0f && iou_threshold <= 1.0f)) {
    throw InvalidArgument(std::string(op) + ": iou_threshold " + std::to_string(iou_threshold) +
                          " is outside [0, 1]");
  }
}

}  // namespace

std::vector<int64_t> non_max_suppression(std::span<const float> boxes,
                                         std::span<const float> scores, int64_t max_output_size,
                                         float iou_threshold, float score_threshold) {
  const int64_t n = num_boxes(boxes);
  if (scores.size() != static_cast<std::size_t>(n)) {
    throw InvalidArgument("non_max_suppression: " + std::to_string(scores.size()) + " scores for " +
                          std::to_string(n) + " boxes");
  }
  if (max_output_size < 0) {
    throw InvalidArgument("non_max_suppression: max_output_size " +
                          std::to_string(max_output_size) + " is negative");
  }
  check_iou_threshold("non_max_suppression", iou_threshold);
  std::vector<ScoredIndex> order;
  std::vector<int64_t> kept;
  KeptBoxes kept_boxes;
  greedy_nms(boxes.data(), 4, scores.data(), 1, n, max_output_size, iou_threshold, score_threshold,
             order, kept_boxes, kept);
  return kept;
}

std::vector<SoftNmsSelection> soft_non_max_suppression(std::span<const float> boxes,
                                                       std::span<const float> scores,
                                                       int64_t max_output_size,
                                                       float soft_nms_sigma,
                                                       float score_threshold) {
  const int64_t n = num_boxes(boxes);
  if (scores.size() != static_cast<std::size_t>(n)) {
    throw InvalidArgument("soft_non_max_suppression: " + std::to_string(scores.size()) +
                          " scores for " + std::to_string(n) + " boxes");
  }
  if (max_output_size < 0) {
    throw InvalidArgument("soft_non_max_suppression: max_output_size " +
                          std::to_string(max_output_size) + " is negative");
  }
  if (!(soft_nms_sigma > 0.0f)) {
    throw InvalidArgument("soft_non_max_suppression: soft_nms_sigma " +
                          std::to_string(soft_nms_sigma) + " must be positive");
  }
  std::vector<SoftNmsSelection> kept;
  soft_nms(boxes.data(), 4, scores.data(), 1, n, max_output_size, soft_nms_sigma, score_threshold,
           kept);
  return kept;
}

DetectionOutputs batch_multiclass_non_max_suppression(std::span<const float> boxes,
                                                      std::span<const float> scores,
                                                      int64_t batch_size, int64_t num_anchors,
                                                      int64_t q, int64_t num_classes,
                                                      const MultiClassNmsOptions& options,
                                                      std::span<const int32_t> num_valid_boxes) {
  const char* op = "batch_multiclass_non_max_suppression";
  if (batch_size < 0 || num_anchors < 0 || num_classes <= 0 || (q != 1 && q != num_classes)) {
    throw InvalidArgument(std::string(op) + ": batch " + std::to_string(batch_size) + ", anchors " +
                          std::to_string(num_anchors) + ", q " + std::to_string(q) + ", classes " +
                          std::to_string(num_classes) +
                          "; q must be 1 or the number of classes (> 0)");
  }
  if (boxes.size() != static_cast<std::size_t>(batch_size * num_anchors * q * 4) ||
      scores.size() != static_cast<std::size_t>(batch_size * num_anchors * num_classes)) {
    throw InvalidArgument(std::string(op) + ": boxes hold " + std::to_string(boxes.size()) +
                          " and scores " + std::to_string(scores.size()) +
                          " values; they must be [" + std::to_string(batch_size) + ", " +
                          std::to_string(num_anchors) + ", " + std::to_string(q) + ", 4] and [" +
                          std::to_string(batch_size) + ", " + std::to_string(num_anchors) + ", " +
                          std::to_string(num_classes) + "]");
  }
  if (!num_valid_boxes.empty() && num_valid_boxes.size() != static_cast<std::size_t>(batch_size)) {
    throw InvalidArgument(std::string(op) + ": " + std::to_string(num_valid_boxes.size()) +
                          " num_valid_boxes for a batch of " + std::to_string(batch_size));
  }
  if (options.max_total_detections <= 0 || options.max_detections_per_class < 0) {
    throw InvalidArgument(std::string(op) + ": max_total_detections " +
                          std::to_string(options.max_total_detections) +
                          " must be positive and max_detections_per_class " +
                          std::to_string(options.max_detections_per_class) + " not negative");
  }
  check_iou_threshold(op, options.iou_threshold);
  if (options.change_coordinate_frame && !options.clip_window) {
    throw InvalidArgument(std::string(op) + ": change_coordinate_frame needs a clip_window");
  }
  if (!(options.soft_nms_sigma >= 0.0f)) {
    throw InvalidArgument(std::string(op) + ": soft_nms_sigma " +
                          std::to_string(options.soft_nms_sigma) + " is negative");
  }
  if (options.use_combined_nms &&
      (options.clip_window || options.change_coordinate_frame || options.use_class_agnostic_nms ||
       options.soft_nms_sigma != 0.0f || !num_valid_boxes.empty())) {
    throw InvalidArgument(std::string(op) +
                          ": combined NMS takes no clip window, change_coordinate_frame, "
                          "class-agnostic NMS, soft NMS or num_valid_boxes");
  }
  const bool soft = options.soft_nms_sigma > 0.0f;

  // Without a window the API clips to the extent of all the batch's boxes; combined NMS clips
  // to [0, 1] (tf.image.combined_non_max_suppression's clip_boxes).
  BoxWindow window{};
  if (options.use_combined_nms) {
    window = {0.0f, 0.0f, 1.0f, 1.0f};
  } else if (options.clip_window) {
    window = *options.clip_window;
  } else if (!boxes.empty()) {
    window = extent_of(boxes);
  }

  const int64_t max_total = options.max_total_detections;
  DetectionOutputs out;
  out.batch_size = batch_size;
  out.max_detections = max_total;
  out.detection_boxes.assign(static_cast<std::size_t>(batch_size * max_total * 4), 0.0f);
  out.detection_scores.assign(static_cast<std::size_t>(batch_size * max_total), 0.0f);
  out.detection_classes.assign(static_cast<std::size_t>(batch_size * max_total), 0.0f);
  out.detection_anchor_indices.assign(static_cast<std::size_t>(batch_size * max_total), -1);
  out.num_detections.assign(static_cast<std::size_t>(batch_size), 0);

  struct Candidate {
    float score;
    int32_t cls;
    int64_t anchor;
  };
  std::vector<ScoredIndex> order;
  std::vector<int64_t> kept;
  std::vector<SoftNmsSelection> soft_kept;
  KeptBoxes kept_boxes;
  std::vector<Candidate> candidates;
  std::vector<float> class_major;  // one image's scores as [num_classes, n]
  std::vector<float> best_scores;
  std::vector<int32_t> best_classes;
  for (int64_t b = 0; b < batch_size; ++b) {
    int64_t n = num_anchors;
    if (!num_valid_boxes.empty()) n = std::clamp<int64_t>(num_valid_boxes[b], 0, num_anchors);
    const float* image_boxes = boxes.data() + b * num_anchors * q * 4;
    const float* image_scores = scores.data() + b * num_anchors * num_classes;
    candidates.clear();
    if (options.use_class_agnostic_nms) {
      // Each anchor scored by its best class (first on ties), boxes of that class when q > 1.
      best_scores.resize(static_cast<std::size_t>(n));
      best_classes.resize(static_cast<std::size_t>(n));
      std::vector<float> chosen_boxes(static_cast<std::size_t>(n) * 4);
      for (int64_t i = 0; i < n; ++i) {
        const float* s = image_scores + i * num_classes;
        int32_t arg = 0;
        for (int64_t c = 1; c < num_classes; ++c) {
          if (s[c] > s[arg]) arg = static_cast<int32_t>(c);
        }
        best_scores[i] = s[arg];
        best_classes[i] = arg;
        const float* box = image_boxes + (i * q + (q > 1 ? arg : 0)) * 4;
        std::copy(box, box + 4, &chosen_boxes[static_cast<std::size_t>(i) * 4]);
      }
      if (soft) {
        soft_kept.clear();
        soft_nms(chosen_boxes.data(), 4, best_scores.data(), 1, n, max_total,
                 options.soft_nms_sigma, options.score_threshold, soft_kept);
        for (const SoftNmsSelection& k : soft_kept) {
          candidates.push_back({k.score, best_classes[k.index], k.index});
        }
        // Decayed scores may leave the kept order: sorted as the API's sort_by_field.
        std::stable_sort(candidates.begin(), candidates.end(),
                         [](const Candidate& x, const Candidate& y) { return x.score > y.score; });
      } else {
        kept.clear();
        greedy_nms(chosen_boxes.data(), 4, best_scores.data(), 1, n, max_total,
                   options.iou_threshold, options.score_threshold, order, kept_boxes, kept);
        for (int64_t i : kept) candidates.push_back({best_scores[i], best_classes[i], i});
      }
    } else {
      // Class-major scores, so that each class's scan reads contiguous memory (a column of
      // [n, num_classes] touches a cache line per anchor); transposed in blocks of anchors.
      class_major.resize(static_cast<std::size_t>(num_classes * n));
      constexpr int64_t kBlock = 64;
      for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
        const int64_t i1 = std::min(n, i0 + kBlock);
        for (int64_t c = 0; c < num_classes; ++c) {
          float* dst = &class_major[static_cast<std::size_t>(c * n)];
          for (int64_t i = i0; i < i1; ++i) dst[i] = image_scores[i * num_classes + c];
        }
      }
      for (int64_t c = 0; c < num_classes; ++c) {
        const float* class_boxes = image_boxes + (q > 1 ? c * 4 : 0);
        const float* class_scores = &class_major[static_cast<std::size_t>(c * n)];
        if (soft) {
          soft_kept.clear();
          soft_nms(class_boxes, static_cast<std::size_t>(q * 4), class_scores, 1, n,
                   options.max_detections_per_class, options.soft_nms_sigma,
                   options.score_threshold, soft_kept);
          for (const SoftNmsSelection& k : soft_kept) {
            candidates.push_back({k.score, static_cast<int32_t>(c), k.index});
          }
          continue;
        }
        kept.clear();
        greedy_nms(class_boxes, static_cast<std::size_t>(q * 4), class_scores, 1, n,
                   options.max_detections_per_class, options.iou_threshold, options.score_threshold,
                   order, kept_boxes, kept);
        for (int64_t i : kept) {
          candidates.push_back({image_scores[i * num_classes + c], static_cast<int32_t>(c), i});
        }
      }
      // Classes in order, each in decreasing score: a stable sort by score keeps equal scores
      // in class order, as the API's top_k over the concatenation does.
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const Candidate& x, const Candidate& y) { return x.score > y.score; });
    }
    // Clip to the window, drop boxes of zero area, keep the first max_total.
    int64_t count = 0;
    for (const Candidate& cand : candidates) {
      if (count >= max_total) break;
      const int64_t box_class = q > 1 ? cand.cls : 0;
      const float* box = image_boxes + (cand.anchor * q + box_class) * 4;
      float clipped[4] = {std::max(std::min(box[0], window[2]), window[0]),
                          std::max(std::min(box[1], window[3]), window[1]),
                          std::max(std::min(box[2], window[2]), window[0]),
                          std::max(std::min(box[3], window[3]), window[1])};
      if (!options.use_combined_nms &&
          !((clipped[2] - clipped[0]) * (clipped[3] - clipped[1]) > 0.0f)) {
        continue;
      }
      if (options.change_coordinate_frame) {
        const float ys = 1.0f / (window[2] - window[0]), xs = 1.0f / (window[3] - window[1]);
        clipped[0] = (clipped[0] - window[0]) * ys;
        clipped[1] = (clipped[1] - window[1]) * xs;
        clipped[2] = (clipped[2] - window[0]) * ys;
        clipped[3] = (clipped[3] - window[1]) * xs;
      }
      const std::size_t slot = static_cast<std::size_t>(b * max_total + count);
      std::copy(clipped, clipped + 4, &out.detection_boxes[slot * 4]);
      out.detection_scores[slot] = cand.score;
      out.detection_classes[slot] = static_cast<float>(cand.cls);
      out.detection_anchor_indices[slot] = cand.anchor;
      ++count;
    }
    out.num_detections[b] = static_cast<int32_t>(count);
  }
  return out;
}

MultiClassNmsOptions nms_options_from_attrs(const MultiClassNmsAttrs& attrs,
                                            std::span<const float> batch_boxes) {
  MultiClassNmsOptions options;
  options.score_threshold = attrs.score_threshold;
  options.iou_threshold = attrs.iou_threshold;
  options.max_detections_per_class = attrs.max_detections_per_class;
  options.max_total_detections = attrs.max_total_detections;
  options.use_class_agnostic_nms = attrs.use_class_agnostic_nms;
  options.change_coordinate_frame = attrs.change_coordinate_frame;
  options.soft_nms_sigma = attrs.soft_nms_sigma;
  options.use_combined_nms = attrs.use_combined_nms;
  if (attrs.use_combined_nms) return options;  // it clips to [0, 1] whatever the window
  if (attrs.has_clip_window) {
    options.clip_window = BoxWindow{attrs.clip_window[0], attrs.clip_window[1],
                                    attrs.clip_window[2], attrs.clip_window[3]};
  } else if (!batch_boxes.empty()) {
    options.clip_window = extent_of(batch_boxes);
  }
  return options;
}

void multiclass_nms_image(int64_t image, std::span<const float> boxes,
                          std::span<const float> scores, int64_t num_anchors, int64_t q,
                          int64_t num_classes, int32_t num_valid_boxes,
                          const MultiClassNmsOptions& options, const NmsImageOutputs& out) {
  if (num_valid_boxes < -1 || num_valid_boxes > num_anchors) {
    throw InvalidArgument("batch_multiclass_non_max_suppression: num_valid_boxes[" +
                          std::to_string(image) + "] is " + std::to_string(num_valid_boxes) +
                          ", outside [0, " + std::to_string(num_anchors) +
                          "] (or -1 for all anchors)");
  }
  const std::span<const int32_t> valid = num_valid_boxes >= 0
                                             ? std::span<const int32_t>(&num_valid_boxes, 1)
                                             : std::span<const int32_t>();
  const DetectionOutputs d = batch_multiclass_non_max_suppression(boxes, scores, 1, num_anchors, q,
                                                                  num_classes, options, valid);
  std::copy(d.detection_boxes.begin(), d.detection_boxes.end(), out.boxes);
  std::copy(d.detection_scores.begin(), d.detection_scores.end(), out.scores);
  std::copy(d.detection_classes.begin(), d.detection_classes.end(), out.classes);
  std::copy(d.detection_anchor_indices.begin(), d.detection_anchor_indices.end(),
            out.anchor_indices);
  *out.num_detections = d.num_detections[0];
}

}  // namespace trainyard::detection
