#include "top_k_counts.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "trainyard/error.h"

namespace trainyard::tasks {

TopKCounts count_correct(std::span<const float> predictions, std::span<const float> labels,
                         int64_t rows, int64_t num_classes, int64_t k) {
  const auto n = static_cast<std::size_t>(rows * num_classes);
  if (rows < 0 || num_classes <= 0 || predictions.size() < n || labels.size() < n) {
    throw InvalidArgument("classification metrics: " + std::to_string(rows) + " rows of " +
                          std::to_string(num_classes) + " classes, but " +
                          std::to_string(predictions.size()) + " predictions and " +
                          std::to_string(labels.size()) + " labels");
  }
  TopKCounts counts;
  const auto width = static_cast<std::size_t>(num_classes);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const float* p = predictions.data() + r * width;
    const float* l = labels.data() + r * width;
    const std::size_t label = static_cast<std::size_t>(std::max_element(l, l + width) - l);
    if (static_cast<std::size_t>(std::max_element(p, p + width) - p) == label) ++counts.top1;
    int64_t higher = 0;
    for (std::size_t c = 0; c < width; ++c) higher += p[c] > p[label] ? 1 : 0;
    if (std::isfinite(p[label]) && higher < k) ++counts.topk;
  }
  return counts;
}

}  // namespace trainyard::tasks
