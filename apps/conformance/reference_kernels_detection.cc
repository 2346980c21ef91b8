// The reference kernels of the detection family (reference_backend.h): batched multi-class
// non-max suppression written from the op's declaration (ops/detection.h), in double precision,
// with every candidate compared against every kept box and plain sorts; soft NMS decays every
// remaining score after each box it keeps.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "reference_kernels.h"
#include "trainyard/error.h"
#include "trainyard/op.h"

namespace trainyard::conformance::reference {
namespace {

struct Box {
  double ymin, xmin, ymax, xmax;
};

Box box_at(const Values& v, int64_t first) {
  const auto i = static_cast<std::size_t>(first);
  return {v[i], v[i + 1], v[i + 2], v[i + 3]};
}

// TensorFlow's NMS overlap: corners put in min/max order, 0 when either box has no area.
double iou(const Box& a, const Box& b) {
  const Box p{std::min(a.ymin, a.ymax), std::min(a.xmin, a.xmax), std::max(a.ymin, a.ymax),
              std::max(a.xmin, a.xmax)};
  const Box r{std::min(b.ymin, b.ymax), std::min(b.xmin, b.xmax), std::max(b.ymin, b.ymax),
              std::max(b.xmin, b.xmax)};
  const double area_p = (p.ymax - p.ymin) * (p.xmax - p.xmin);
  const double area_r = (r.ymax - r.ymin) * (r.xmax - r.xmin);
  if (area_p <= 0 || area_r <= 0) return 0.0;
  const double ih = std::max(std::min(p.ymax, r.ymax) - std::max(p.ymin, r.ymin), 0.0);
  const double iw = std::max(std::min(p.xmax, r.xmax) - std::max(p.xmin, r.xmin), 0.0);
  const double inter = ih * iw;
  return inter / (area_p + area_r - inter);
}

// Greedy NMS: indices of the kept boxes, by decreasing score (ties: lower index).
std::vector<int64_t> greedy(const std::vector<Box>& boxes, const std::vector<double>& scores,
                            int64_t max_output, double iou_threshold, double score_threshold) {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < static_cast<int64_t>(scores.size()); ++i) {
    if (scores[static_cast<std::size_t>(i)] > score_threshold) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return scores[static_cast<std::size_t>(x)] > scores[static_cast<std::size_t>(y)];
  });
  std::vector<int64_t> kept;
  for (int64_t i : order) {
    if (static_cast<int64_t>(kept.size()) >= max_output) break;
    bool suppressed = false;
    for (int64_t k : kept) {
      if (iou(boxes[static_cast<std::size_t>(i)], boxes[static_cast<std::size_t>(k)]) >
          iou_threshold) {
        suppressed = true;
        break;
      }
    }
    if (!suppressed) kept.push_back(i);
  }
  return kept;
}

struct Selected {
  int64_t index;
  double score;
};

// Soft-NMS written eagerly: while boxes remain above score_threshold, keep the one of highest
// current score (ties: lower index) and multiply every other remaining score by
// exp(-0.5 iou^2 / sigma), dropping those that fall to score_threshold or below.
std::vector<Selected> soft(const std::vector<Box>& boxes, std::vector<double> scores,
                           int64_t max_output, double sigma, double score_threshold) {
  std::vector<bool> alive(scores.size());
  for (std::size_t i = 0; i < scores.size(); ++i) alive[i] = scores[i] > score_threshold;
  std::vector<Selected> kept;
  while (static_cast<int64_t>(kept.size()) < max_output) {
    std::size_t best = scores.size();
    for (std::size_t i = 0; i < scores.size(); ++i) {
      if (alive[i] && (best == scores.size() || scores[i] > scores[best])) best = i;
    }
    if (best == scores.size()) break;
    alive[best] = false;
    kept.push_back({static_cast<int64_t>(best), scores[best]});
    for (std::size_t i = 0; i < scores.size(); ++i) {
      if (!alive[i]) continue;
      const double overlap = iou(boxes[i], boxes[best]);
      scores[i] *= std::exp(-0.5 * overlap * overlap / sigma);
      alive[i] = scores[i] > score_threshold;
    }
  }
  return kept;
}

// Greedy or soft NMS as the attributes say.
std::vector<Selected> select(const std::vector<Box>& boxes, const std::vector<double>& scores,
                             int64_t max_output, const MultiClassNmsAttrs& o) {
  if (o.soft_nms_sigma > 0) {
    return soft(boxes, scores, max_output, o.soft_nms_sigma, o.score_threshold);
  }
  std::vector<Selected> kept;
  for (int64_t i : greedy(boxes, scores, max_output, o.iou_threshold, o.score_threshold)) {
    kept.push_back({i, scores[static_cast<std::size_t>(i)]});
  }
  return kept;
}

void k_batch_multiclass_nms(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const MultiClassNmsAttrs& o = a.get_attrs<MultiClassNmsAttrs>();
  const Dims bd = dims_of(a.inputs[0]);
  const int64_t batch = bd[0], anchors = bd[1], q = bd[2];
  const int64_t classes = dims_of(a.inputs[1])[2];
  const int64_t m = o.max_total_detections;
  const Values boxes = read(a.inputs[0]);
  const Values scores = read(a.inputs[1]);
  const Values valid = a.inputs.size() > 2 ? read(a.inputs[2]) : Values();

  Box window{o.clip_window[0], o.clip_window[1], o.clip_window[2], o.clip_window[3]};
  if (o.use_combined_nms) {
    window = {0.0, 0.0, 1.0, 1.0};  // combined NMS clips to [0, 1] and drops nothing
  } else if (!o.has_clip_window && !boxes.empty()) {
    window = box_at(boxes, 0);
    for (std::size_t i = 0; i < boxes.size(); i += 4) {
      window.ymin = std::min(window.ymin, boxes[i]);
      window.xmin = std::min(window.xmin, boxes[i + 1]);
      window.ymax = std::max(window.ymax, boxes[i + 2]);
      window.xmax = std::max(window.xmax, boxes[i + 3]);
    }
  }
  Values out_boxes(static_cast<std::size_t>(batch * m * 4), 0.0);
  Values out_scores(static_cast<std::size_t>(batch * m), 0.0);
  Values out_classes(static_cast<std::size_t>(batch * m), 0.0);
  Values out_counts(static_cast<std::size_t>(batch), 0.0);
  Values out_anchors(static_cast<std::size_t>(batch * m), -1.0);
  struct Detection {
    double score;
    int64_t cls, anchor;
  };
  for (int64_t b = 0; b < batch; ++b) {
    int64_t n = anchors;
    if (!valid.empty() && valid[static_cast<std::size_t>(b)] != -1) {
      n = static_cast<int64_t>(valid[static_cast<std::size_t>(b)]);
      if (n < 0 || n > anchors) {
        throw InvalidArgument("reference batch_multiclass_non_max_suppression: num_valid_boxes[" +
                              std::to_string(b) + "] is " + std::to_string(n));
      }
    }
    auto box = [&](int64_t anchor, int64_t cls) {
      return box_at(boxes, ((b * anchors + anchor) * q + (q > 1 ? cls : 0)) * 4);
    };
    auto score = [&](int64_t anchor, int64_t cls) {
      return scores[static_cast<std::size_t>((b * anchors + anchor) * classes + cls)];
    };
    std::vector<Detection> found;
    if (o.use_class_agnostic_nms) {
      std::vector<Box> candidates;
      std::vector<double> best;
      std::vector<int64_t> best_class;
      for (int64_t i = 0; i < n; ++i) {
        int64_t arg = 0;
        for (int64_t c = 1; c < classes; ++c) {
          if (score(i, c) > score(i, arg)) arg = c;
        }
        best.push_back(score(i, arg));
        best_class.push_back(arg);
        candidates.push_back(box(i, arg));
      }
      for (const Selected& k : select(candidates, best, m, o)) {
        found.push_back({k.score, best_class[static_cast<std::size_t>(k.index)], k.index});
      }
      std::stable_sort(found.begin(), found.end(),
                       [](const Detection& x, const Detection& y) { return x.score > y.score; });
    } else {
      for (int64_t c = 0; c < classes; ++c) {
        std::vector<Box> candidates;
        std::vector<double> class_scores;
        for (int64_t i = 0; i < n; ++i) {
          candidates.push_back(box(i, c));
          class_scores.push_back(score(i, c));
        }
        for (const Selected& k : select(candidates, class_scores, o.max_detections_per_class, o)) {
          found.push_back({k.score, c, k.index});
        }
      }
      std::stable_sort(found.begin(), found.end(),
                       [](const Detection& x, const Detection& y) { return x.score > y.score; });
    }
    int64_t count = 0;
    for (const Detection& d : found) {
      if (count >= m) break;
      const Box raw = box(d.anchor, d.cls);
      Box c{std::clamp(raw.ymin, window.ymin, window.ymax),
            std::clamp(raw.xmin, window.xmin, window.xmax),
            std::clamp(raw.ymax, window.ymin, window.ymax),
            std::clamp(raw.xmax, window.xmin, window.xmax)};
      if (!o.use_combined_nms && !((c.ymax - c.ymin) * (c.xmax - c.xmin) > 0)) continue;
      if (o.change_coordinate_frame) {
        const double h = window.ymax - window.ymin, w = window.xmax - window.xmin;
        c = {(c.ymin - window.ymin) / h, (c.xmin - window.xmin) / w, (c.ymax - window.ymin) / h,
             (c.xmax - window.xmin) / w};
      }
      const auto slot = static_cast<std::size_t>(b * m + count);
      out_boxes[slot * 4] = c.ymin;
      out_boxes[slot * 4 + 1] = c.xmin;
      out_boxes[slot * 4 + 2] = c.ymax;
      out_boxes[slot * 4 + 3] = c.xmax;
      out_scores[slot] = d.score;
      out_classes[slot] = static_cast<double>(d.cls);
      out_anchors[slot] = static_cast<double>(d.anchor);
      ++count;
    }
    out_counts[static_cast<std::size_t>(b)] = static_cast<double>(count);
  }
  write(a.outputs[0], out_boxes);
  write(a.outputs[1], out_scores);
  write(a.outputs[2], out_classes);
  write(a.outputs[3], out_counts);
  write(a.outputs[4], out_anchors);
}

constexpr KernelRegistration kDetectionKernels[] = {
    {"batch_multiclass_non_max_suppression", &k_batch_multiclass_nms},
};

}  // namespace

std::span<const KernelRegistration> detection_kernels() { return kDetectionKernels; }

}  // namespace trainyard::conformance::reference
