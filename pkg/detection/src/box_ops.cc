#include "trainyard/pkg/detection/box_ops.h"

#include <algorithm>
#include <string>

#include "trainyard/error.h"

namespace trainyard::detection {

int64_t num_boxes(std::span<const float> boxes, const char* what) {
  if (boxes.size() % 4 != 0) {
    throw InvalidArgument(std::string(what) + " hold " + std::to_string(boxes.size()) +
                          " floats, not a multiple of 4 ([N, 4] boxes of ymin, xmin, ymax, xmax)");
  }
  return static_cast<int64_t>(boxes.size() / 4);
}

std::vector<float> area(std::span<const float> boxes) {
  const int64_t n = num_boxes(boxes);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float* b = &boxes[4 * i];
    out[i] = (b[2] - b[0]) * (b[3] - b[1]);
  }
  return out;
}

namespace {

inline float pair_intersection(const float* a, const float* b) {
  const float h = std::max(0.0f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
  const float w = std::max(0.0f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
  return h * w;
}

}  // namespace

std::vector<float> intersection(std::span<const float> boxes1, std::span<const float> boxes2) {
  const int64_t n = num_boxes(boxes1, "boxes1"), m = num_boxes(boxes2, "boxes2");
  std::vector<float> out(static_cast<std::size_t>(n * m));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j)
      out[i * m + j] = pair_intersection(&boxes1[4 * i], &boxes2[4 * j]);
  }
  return out;
}

std::vector<float> iou(std::span<const float> boxes1, std::span<const float> boxes2) {
  const int64_t n = num_boxes(boxes1, "boxes1"), m = num_boxes(boxes2, "boxes2");
  const std::vector<float> areas1 = area(boxes1), areas2 = area(boxes2);
  std::vector<float> out(static_cast<std::size_t>(n * m));
  for (int64_t i = 0; i < n; ++i) {
    const float* a = &boxes1[4 * i];
    float* row = &out[static_cast<std::size_t>(i * m)];
    for (int64_t j = 0; j < m; ++j) {
      const float inter = pair_intersection(a, &boxes2[4 * j]);
      row[j] = inter == 0.0f ? 0.0f : inter / (areas1[i] + areas2[j] - inter);
    }
  }
  return out;
}

std::vector<float> ioa(std::span<const float> boxes1, std::span<const float> boxes2) {
  const int64_t n = num_boxes(boxes1, "boxes1"), m = num_boxes(boxes2, "boxes2");
  const std::vector<float> areas2 = area(boxes2);
  std::vector<float> out(static_cast<std::size_t>(n * m));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      out[i * m + j] = pair_intersection(&boxes1[4 * i], &boxes2[4 * j]) / areas2[j];
    }
  }
  return out;
}

std::vector<float> matched_iou(std::span<const float> boxes1, std::span<const float> boxes2) {
  const int64_t n = num_boxes(boxes1, "boxes1"), m = num_boxes(boxes2, "boxes2");
  if (n != m) {
    throw InvalidArgument("matched_iou: boxes1 holds " + std::to_string(n) + " boxes but boxes2 " +
                          std::to_string(m) + "; they must pair up");
  }
  std::vector<float> out(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float* a = &boxes1[4 * i];
    const float* b = &boxes2[4 * i];
    const float inter = pair_intersection(a, b);
    const float union_area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    out[i] = inter == 0.0f ? 0.0f : inter / union_area;
  }
  return out;
}

std::vector<float> clip_to_window(std::span<const float> boxes, const BoxWindow& window,
                                  bool filter_nonoverlapping, std::vector<int64_t>* kept_indices) {
  const int64_t n = num_boxes(boxes);
  std::vector<float> out;
  out.reserve(boxes.size());
  if (kept_indices != nullptr) kept_indices->clear();
  auto clamp = [](float v, float lo, float hi) { return std::max(std::min(v, hi), lo); };
  for (int64_t i = 0; i < n; ++i) {
    const float* b = &boxes[4 * i];
    const float c[4] = {clamp(b[0], window[0], window[2]), clamp(b[1], window[1], window[3]),
                        clamp(b[2], window[0], window[2]), clamp(b[3], window[1], window[3])};
    if (filter_nonoverlapping && !((c[2] - c[0]) * (c[3] - c[1]) > 0.0f)) continue;
    out.insert(out.end(), c, c + 4);
    if (kept_indices != nullptr) kept_indices->push_back(i);
  }
  return out;
}

std::vector<float> scale(std::span<const float> boxes, float y_scale, float x_scale) {
  num_boxes(boxes);
  std::vector<float> out(boxes.begin(), boxes.end());
  for (std::size_t i = 0; i < out.size(); i += 4) {
    out[i] *= y_scale;
    out[i + 1] *= x_scale;
    out[i + 2] *= y_scale;
    out[i + 3] *= x_scale;
  }
  return out;
}

std::vector<float> to_normalized_coordinates(std::span<const float> boxes, float height,
                                             float width) {
  // The API scales by the reciprocals.
  return scale(boxes, 1.0f / height, 1.0f / width);
}

std::vector<float> to_absolute_coordinates(std::span<const float> boxes, float height,
                                           float width) {
  return scale(boxes, height, width);
}

std::vector<float> change_coordinate_frame(std::span<const float> boxes, const BoxWindow& window) {
  num_boxes(boxes);
  const float y_scale = 1.0f / (window[2] - window[0]), x_scale = 1.0f / (window[3] - window[1]);
  std::vector<float> out(boxes.begin(), boxes.end());
  for (std::size_t i = 0; i < out.size(); i += 4) {
    out[i] = (out[i] - window[0]) * y_scale;
    out[i + 1] = (out[i + 1] - window[1]) * x_scale;
    out[i + 2] = (out[i + 2] - window[0]) * y_scale;
    out[i + 3] = (out[i + 3] - window[1]) * x_scale;
  }
  return out;
}

}  // namespace trainyard::detection
