// YouTube-8M evaluation metrics: Hit@1, PERR, GAP and mAP, with the semantics of the starter
// code's eval_util.py, average_precision_calculator.py and mean_average_precision_calculator.py.
//
// All inputs are host data. A batch is two row-major float matrices [batch x num_classes]:
// `predictions` (scores, any finite values) and `labels` (0 or 1; a value > 0 is a positive).
// Every function throws InvalidArgument naming the function and both sizes when a span does not
// hold batch * num_classes values, or when batch or num_classes is not positive.
//
// Ties. Two places in the original depend on how equal scores are ordered:
//  * Choosing a video's top k (PERR, the GAP/mAP top_k): the original uses numpy.argpartition,
//    whose choice among scores equal to the k-th is unspecified (it depends on the numpy version
//    and on the SIMD sort it dispatches to). Here the lower class index wins such a tie, so
//    the result is deterministic; it can differ from one numpy build's choice only when a tie
//    straddles the k-th score.
//  * Ranking the pooled (score, label) pairs for AP: the original keeps them in a Python heapq,
//    shuffles them with random.seed(0) + random.sample, then stable-sorts by score descending.
//    That is reproduced exactly (same heap layout, the same Mersenne Twister stream and
//    sampling algorithm as CPython 3), so AP, GAP and mAP equal the original's on ties too.
#ifndef TRAINYARD_PKG_YT8M_METRICS_H_
#define TRAINYARD_PKG_YT8M_METRICS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace trainyard::metrics {

// Mean over videos of label[argmax prediction]; the first maximum wins, as numpy.argmax.
double hit_at_one(std::span<const float> predictions, std::span<const float> labels, int64_t batch,
                  int64_t num_classes);

// Precision at equal recall rate: for a video with k positives, the fraction of its k
// top-scored classes that are positives with a score > 0; averaged over all videos. A video
// without positives counts as 0 and still counts in the mean (the original's
// argpartition(p, -0)[-0:] selects the whole row, which holds no positive).
double precision_at_equal_recall_rate(std::span<const float> predictions,
                                      std::span<const float> labels, int64_t batch,
                                      int64_t num_classes);

// Global average precision of one batch (eval_util.calculate_gap): each video's top_k
// predictions (top_k is clamped to num_classes) are pooled into one ranked list and scored by
// non-interpolated AP with N = all positives of the batch, including those outside the top_k.
// Throws InvalidArgument when top_k < 1.
double gap(std::span<const float> predictions, std::span<const float> labels, int64_t batch,
           int64_t num_classes, int64_t top_k = 20);

// The three metrics train.py logs for a training batch, as hit_at_one,
// precision_at_equal_recall_rate and gap(..., top_k) compute them (the same doubles, ties
// included), in one pass over each row: one bounded selection of a row's best
// max(top_k, positives) classes serves all three. Throws as those functions do.
struct TrainingBatchMetrics {
  double hit_at_one = 0.0;
  double perr = 0.0;
  double gap = 0.0;
};
TrainingBatchMetrics training_batch_metrics(std::span<const float> predictions,
                                            std::span<const float> labels, int64_t batch,
                                            int64_t num_classes, int64_t top_k = 20);

// eval_util.top_k_by_class: the top k (clamped to num_classes) (score, label) pairs of every
// video, grouped by class (in video order within a class), and every class's positive count
// over the whole batch.
struct TopKByClass {
  std::vector<std::vector<float>> predictions;  // [num_classes][...]
  std::vector<std::vector<float>> labels;       // same shape as predictions
  std::vector<double> num_positives;            // [num_classes]
};
TopKByClass top_k_by_class(std::span<const float> predictions, std::span<const float> labels,
                           int64_t batch, int64_t num_classes, int64_t k = 20);

// Average precision of one ranked list that arrives in pieces (average_precision_calculator.py).
// Keeps the top_n highest-scored (prediction, actual) pairs seen (all of them when top_n is
// unset) and the number of positives, which may include positives that were never passed in.
class AveragePrecisionCalculator {
 public:
  // Throws InvalidArgument when top_n < 1.
  explicit AveragePrecisionCalculator(std::optional<int64_t> top_n = std::nullopt);

  // Adds pairs; `actuals` > 0 are positives. `num_positives` is added to the positive count
  // when given (for lists that omit some positives), otherwise the positives in `actuals` are.
  // Throws InvalidArgument when the spans differ in size or num_positives < 0.
  void accumulate(std::span<const float> predictions, std::span<const float> actuals,
                  std::optional<double> num_positives = std::nullopt);
  void clear();

  // Non-interpolated AP at n of what was accumulated; 0 when nothing was.
  double peek_ap_at_n() const;
  // Interpolated AP at `inter_points` break points of what was accumulated, with the positive
  // count capped at top_n; 0 when nothing was. Throws InvalidArgument when inter_points < 1.
  double peek_interpolated_ap_at_n(int inter_points = 1000) const;

  int64_t heap_size() const { return static_cast<int64_t>(heap_.size()); }
  double num_accumulated_positives() const { return total_positives_; }

  // Non-interpolated AP of a whole list (ap_at_n with n unset).
  static double ap(std::span<const float> predictions, std::span<const float> actuals);
  // Non-interpolated AP over the n best-ranked items (all when n is unset), with
  // min(total_num_positives, n) as the number of positives; total_num_positives defaults to
  // the positives in `actuals`. 0 when there are no positives. Throws InvalidArgument when the
  // spans differ in size or n < 1.
  static double ap_at_n(std::span<const float> predictions, std::span<const float> actuals,
                        std::optional<int64_t> n = 20,
                        std::optional<double> total_num_positives = std::nullopt);
  // Interpolated AP (the 2017 average_precision_calculator.interpolated_ap): scores outside
  // [0, 1] are first min-max normalized (denominator at least 1e-7); 0 for an empty list or no
  // positives. Throws InvalidArgument when the spans differ in size or inter_points < 1.
  static double interpolated_ap(std::span<const float> predictions, std::span<const float> actuals,
                                int inter_points = 1000,
                                std::optional<double> total_num_positives = std::nullopt);

 private:
  struct Entry {
    float prediction;
    float actual;
  };
  std::optional<int64_t> top_n_;
  double total_positives_ = 0.0;
  std::vector<Entry> heap_;  // min-heap laid out exactly as Python's heapq would
};

// Per-class AP over class-grouped lists (mean_average_precision_calculator.py).
class MeanAveragePrecisionCalculator {
 public:
  // Throws InvalidArgument when num_class < 2 (as the original) or top_n < 1.
  explicit MeanAveragePrecisionCalculator(int64_t num_class, bool filter_empty_classes = true,
                                          std::optional<int64_t> top_n = std::nullopt);

  // predictions[c] and actuals[c] are class c's pairs (top_k_by_class's output);
  // num_positives[c], when non-empty, is class c's positive count. Throws InvalidArgument when
  // an outer size is not num_class or a class's two lists differ in size.
  void accumulate(const std::vector<std::vector<float>>& predictions,
                  const std::vector<std::vector<float>>& actuals,
                  std::span<const double> num_positives = {});
  void clear();
  bool is_empty() const;  // no pair accumulated in any class

  // The non-interpolated AP of every class, in class order; with filter_empty_classes, classes
  // that have accumulated no positive are left out (so the list can be shorter than
  // num_class; peek_map_classes() names the class of each entry).
  std::vector<double> peek_map_at_n() const;
  std::vector<int64_t> peek_map_classes() const;

  int64_t num_class() const { return static_cast<int64_t>(calculators_.size()); }

 private:
  bool reported(const AveragePrecisionCalculator& calculator) const;

  bool filter_empty_classes_;
  std::vector<AveragePrecisionCalculator> calculators_;
};

struct BatchMetrics {
  double hit_at_one = 0.0;
  double perr = 0.0;
  double loss = 0.0;
};

struct EpochMetrics {
  double avg_hit_at_one = 0.0;  // the batch means, weighted by batch size
  double avg_perr = 0.0;
  double avg_loss = 0.0;
  std::vector<double> aps;          // per class with positives (peek_map_at_n)
  std::vector<int64_t> ap_classes;  // the class of each entry of aps
  double mean_ap = 0.0;             // mean of aps; NaN when no class had a positive
  double gap = 0.0;                 // over every video's top_k, pooled across all batches
};

// Accumulates the metrics of an evaluation epoch (eval_util.EvaluationMetrics).
class EvaluationMetrics {
 public:
  // top_k: predictions kept per video for GAP and mAP; top_n: AP at n of each class's
  // calculator (unset: all). Throws InvalidArgument when num_class < 2, top_k < 1 or top_n < 1.
  EvaluationMetrics(int64_t num_class, int64_t top_k, std::optional<int64_t> top_n = std::nullopt);

  // Adds one batch [batch x num_class] and returns its Hit@1, PERR and `loss` (the batch's
  // mean loss, as eval.py passes it). Throws InvalidArgument on a size mismatch.
  BatchMetrics accumulate(std::span<const float> predictions, std::span<const float> labels,
                          double loss, int64_t batch);
  // Same with one loss per example; the batch loss is their mean.
  BatchMetrics accumulate(std::span<const float> predictions, std::span<const float> labels,
                          std::span<const float> losses, int64_t batch);

  // Throws InvalidArgument when no example has been accumulated since construction or clear().
  EpochMetrics get() const;
  void clear();

  int64_t num_examples() const { return num_examples_; }

 private:
  int64_t num_class_;
  int64_t top_k_;
  double sum_hit_at_one_ = 0.0;
  double sum_perr_ = 0.0;
  double sum_loss_ = 0.0;
  int64_t num_examples_ = 0;
  MeanAveragePrecisionCalculator map_calculator_;
  AveragePrecisionCalculator global_ap_calculator_;
};

}  // namespace trainyard::metrics

#endif  // TRAINYARD_PKG_YT8M_METRICS_H_
