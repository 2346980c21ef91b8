// The classification task's counts over a batch of `rows` examples, the label of a row being the
// index of its largest entry (the first on ties): top1, rows whose label is the argmax of the
// predictions (the first on ties, as tf.metrics.accuracy over tf.argmax); topk, rows whose label
// has a finite prediction with fewer than k classes scoring strictly higher (tf.nn.in_top_k,
// which counts ties at the boundary in, as slim's Recall_5 does).
#ifndef TRAINYARD_PLUGINS_TASKS_TOP_K_COUNTS_H_
#define TRAINYARD_PLUGINS_TASKS_TOP_K_COUNTS_H_

#include <cstdint>
#include <span>

namespace trainyard::tasks {

struct TopKCounts {
  int64_t top1 = 0;
  int64_t topk = 0;
};
// Throws InvalidArgument when the spans hold fewer than rows * num_classes values.
TopKCounts count_correct(std::span<const float> predictions, std::span<const float> labels,
                         int64_t rows, int64_t num_classes, int64_t k);

}  // namespace trainyard::tasks

#endif  // TRAINYARD_PLUGINS_TASKS_TOP_K_COUNTS_H_
