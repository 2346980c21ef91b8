#include "trainyard/core/metrics.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <numeric>
#include <string>

#include "trainyard/error.h"

namespace trainyard::metrics {
namespace {

// CPython's random.Random: MT19937 seeded by init_by_array, and the getrandbits / _randbelow /
// sample algorithms of CPython 3, so that a shuffle here is the permutation the original's
// `random.seed(0); random.sample(range(n), n)` produced.
class PythonRandom {
 public:
  explicit PythonRandom(uint32_t seed) {
    const std::array<uint32_t, 1> key = {seed};  // random.seed(int) for 0 <= int < 2**32
    init_by_array(key.data(), key.size());
  }

  uint32_t genrand_uint32() {
    constexpr uint32_t kUpperMask = 0x80000000u;
    constexpr uint32_t kLowerMask = 0x7fffffffu;
    constexpr std::array<uint32_t, 2> kMag01 = {0u, 0x9908b0dfu};
    if (index_ >= kN) {
      int kk = 0;
      for (; kk < kN - kM; ++kk) {
        const uint32_t y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
        mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ kMag01[y & 1u];
      }
      for (; kk < kN - 1; ++kk) {
        const uint32_t y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
        mt_[kk] = mt_[kk + (kM - kN)] ^ (y >> 1) ^ kMag01[y & 1u];
      }
      const uint32_t y = (mt_[kN - 1] & kUpperMask) | (mt_[0] & kLowerMask);
      mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ kMag01[y & 1u];
      index_ = 0;
    }
    uint32_t y = mt_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }

  // random.getrandbits(k) for 1 <= k <= 64: 32-bit words, least significant first, the last
  // one keeping its top bits.
  uint64_t getrandbits(int k) {
    uint64_t result = 0;
    for (int shift = 0; k > 0; shift += 32, k -= 32) {
      uint32_t word = genrand_uint32();
      if (k < 32) word >>= (32 - k);
      result |= static_cast<uint64_t>(word) << shift;
    }
    return result;
  }

  // Random._randbelow_with_getrandbits(n), n >= 1.
  uint64_t randbelow(uint64_t n) {
    const int k = std::bit_width(n);
    uint64_t r = getrandbits(k);
    while (r >= n) r = getrandbits(k);
    return r;
  }

 private:
  static constexpr int kN = 624;
  static constexpr int kM = 397;

  void init_genrand(uint32_t s) {
    mt_[0] = s;
    for (int i = 1; i < kN; ++i) {
      mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
    }
    index_ = kN;
  }

  void init_by_array(const uint32_t* key, std::size_t key_length) {
    init_genrand(19650218u);
    std::size_t i = 1;
    std::size_t j = 0;
    for (std::size_t k = std::max<std::size_t>(kN, key_length); k > 0; --k) {
      mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] +
               static_cast<uint32_t>(j);
      ++i;
      ++j;
      if (i >= kN) {
        mt_[0] = mt_[kN - 1];
        i = 1;
      }
      if (j >= key_length) j = 0;
    }
    for (std::size_t k = kN - 1; k > 0; --k) {
      mt_[i] =
          (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
      ++i;
      if (i >= kN) {
        mt_[0] = mt_[kN - 1];
        i = 1;
      }
    }
    mt_[0] = 0x80000000u;
  }

  std::array<uint32_t, kN> mt_{};
  int index_ = kN;
};

// `random.seed(0); random.sample(range(n), n)` (the pool branch, which CPython always takes
// when k == n).
std::vector<std::size_t> python_shuffle_indices(std::size_t n) {
  PythonRandom random(0);
  std::vector<std::size_t> pool(n);
  std::iota(pool.begin(), pool.end(), std::size_t{0});
  std::vector<std::size_t> result(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t j = random.randbelow(n - i);
    result[i] = pool[j];
    pool[j] = pool[n - i - 1];
  }
  return result;
}

// The original's ranking: shuffle with seed 0, then a stable sort by score descending
// (Python's sorted(..., reverse=True) keeps equal keys in their current order). Returns the
// shuffled scores and labels in ranked order.
void rank_like_original(std::span<const float> predictions, std::span<const float> actuals,
                        std::vector<float>* ranked_predictions,
                        std::vector<float>* ranked_actuals) {
  const std::size_t n = predictions.size();
  const std::vector<std::size_t> shuffle = python_shuffle_indices(n);
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = shuffle[i];
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return predictions[a] > predictions[b]; });
  ranked_predictions->resize(n);
  ranked_actuals->resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    (*ranked_predictions)[i] = predictions[order[i]];
    (*ranked_actuals)[i] = actuals[order[i]];
  }
}

void check_batch(const char* function, std::span<const float> predictions,
                 std::span<const float> labels, int64_t batch, int64_t num_classes) {
  if (batch < 1 || num_classes < 1) {
    throw InvalidArgument(std::string("metrics::") + function +
                          ": batch and num_classes must be positive, got batch " +
                          std::to_string(batch) + " and num_classes " +
                          std::to_string(num_classes));
  }
  const auto expected = static_cast<std::size_t>(batch) * static_cast<std::size_t>(num_classes);
  if (predictions.size() != expected || labels.size() != expected) {
    throw InvalidArgument(std::string("metrics::") + function + ": predictions hold " +
                          std::to_string(predictions.size()) + " values and labels hold " +
                          std::to_string(labels.size()) + ", expected batch " +
                          std::to_string(batch) + " x num_classes " + std::to_string(num_classes) +
                          " = " + std::to_string(expected));
  }
}

void check_same_size(const char* function, std::span<const float> predictions,
                     std::span<const float> actuals) {
  if (predictions.size() != actuals.size()) {
    throw InvalidArgument(std::string(function) + ": the shape of predictions (" +
                          std::to_string(predictions.size()) + ") and actuals (" +
                          std::to_string(actuals.size()) + ") does not match");
  }
}

void check_top_n(const char* function, std::optional<int64_t> top_n) {
  if (top_n && *top_n < 1) {
    throw InvalidArgument(std::string(function) +
                          ": top_n must be unset or a positive integer, got " +
                          std::to_string(*top_n));
  }
}

// Puts the indices of a row's k best scores first in *indices, in no particular order; a
// higher score wins, and the lower class index wins a tie. For the small k of the metrics
// (top 20, a video's few labels) one pass keeps the k best in a heap whose root is the worst
// kept, so most classes cost one comparison; a large k falls back to nth_element.
void select_top_k(const float* row, int64_t num_classes, int64_t k, std::vector<int32_t>* indices) {
  auto better = [row](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  };
  if (k >= num_classes || k * 8 > num_classes) {
    indices->resize(static_cast<std::size_t>(num_classes));
    std::iota(indices->begin(), indices->end(), 0);
    if (k < num_classes) {
      std::nth_element(indices->begin(), indices->begin() + (k - 1), indices->end(), better);
    }
    return;
  }
  indices->resize(static_cast<std::size_t>(k));
  std::iota(indices->begin(), indices->end(), 0);
  std::make_heap(indices->begin(), indices->end(), better);  // root: the worst kept
  for (auto c = static_cast<int32_t>(k); c < num_classes; ++c) {
    // A later class never wins a tie against a kept one, so a strict > decides.
    if (row[c] > row[indices->front()]) {
      std::pop_heap(indices->begin(), indices->end(), better);
      indices->back() = c;
      std::push_heap(indices->begin(), indices->end(), better);
    }
  }
}

// Python tuple order on (prediction, actual), which heapq uses.
struct EntryLess {
  template <typename Entry>
  bool operator()(const Entry& a, const Entry& b) const {
    if (a.prediction != b.prediction) return a.prediction < b.prediction;
    return a.actual < b.actual;
  }
};

// heapq._siftdown: moves heap[pos] up towards start_pos.
template <typename Entry>
void heap_sift_down(std::vector<Entry>& heap, std::size_t start_pos, std::size_t pos) {
  const Entry new_item = heap[pos];
  while (pos > start_pos) {
    const std::size_t parent_pos = (pos - 1) >> 1;
    if (EntryLess()(new_item, heap[parent_pos])) {
      heap[pos] = heap[parent_pos];
      pos = parent_pos;
      continue;
    }
    break;
  }
  heap[pos] = new_item;
}

// heapq._siftup: moves the smaller child up until a leaf, then sifts the item back.
template <typename Entry>
void heap_sift_up(std::vector<Entry>& heap, std::size_t pos) {
  const std::size_t end_pos = heap.size();
  const std::size_t start_pos = pos;
  const Entry new_item = heap[pos];
  std::size_t child_pos = 2 * pos + 1;
  while (child_pos < end_pos) {
    const std::size_t right_pos = child_pos + 1;
    if (right_pos < end_pos && !EntryLess()(heap[child_pos], heap[right_pos])) {
      child_pos = right_pos;
    }
    heap[pos] = heap[child_pos];
    pos = child_pos;
    child_pos = 2 * pos + 1;
  }
  heap[pos] = new_item;
  heap_sift_down(heap, start_pos, pos);
}

template <typename Entry>
void heappush(std::vector<Entry>& heap, const Entry& item) {
  heap.push_back(item);
  heap_sift_down(heap, 0, heap.size() - 1);
}

template <typename Entry>
void heappop(std::vector<Entry>& heap) {
  const Entry last = heap.back();
  heap.pop_back();
  if (!heap.empty()) {
    heap[0] = last;
    heap_sift_up(heap, 0);
  }
}

double count_positives(std::span<const float> actuals) {
  double count = 0.0;
  for (float a : actuals) {
    if (a > 0) count += 1.0;
  }
  return count;
}

}  // namespace

double hit_at_one(std::span<const float> predictions, std::span<const float> labels, int64_t batch,
                  int64_t num_classes) {
  check_batch("hit_at_one", predictions, labels, batch, num_classes);
  int64_t hits = 0;
  for (int64_t v = 0; v < batch; ++v) {
    const float* row = predictions.data() + v * num_classes;
    int64_t top = 0;  // the first maximum
    float best = row[0];
    for (int64_t c = 1; c < num_classes; ++c) {
      if (row[c] > best) {
        best = row[c];
        top = c;
      }
    }
    if (labels[static_cast<std::size_t>(v * num_classes + top)] > 0) ++hits;
  }
  return static_cast<double>(hits) / static_cast<double>(batch);
}

double precision_at_equal_recall_rate(std::span<const float> predictions,
                                      std::span<const float> labels, int64_t batch,
                                      int64_t num_classes) {
  check_batch("precision_at_equal_recall_rate", predictions, labels, batch, num_classes);
  std::vector<int32_t> indices;
  double aggregated_precision = 0.0;
  for (int64_t v = 0; v < batch; ++v) {
    const float* row = predictions.data() + v * num_classes;
    const float* row_labels = labels.data() + v * num_classes;
    int64_t num_labels = 0;
    for (int64_t c = 0; c < num_classes; ++c) {
      if (row_labels[c] > 0) ++num_labels;
    }
    if (num_labels == 0) continue;  // precision 0, still one video of the mean
    select_top_k(row, num_classes, num_labels, &indices);
    int64_t hits = 0;
    for (int64_t i = 0; i < num_labels; ++i) {
      const int32_t c = indices[static_cast<std::size_t>(i)];
      if (row[c] > 0 && row_labels[c] > 0) ++hits;
    }
    aggregated_precision += static_cast<double>(hits) / static_cast<double>(num_labels);
  }
  return aggregated_precision / static_cast<double>(batch);
}

TopKByClass top_k_by_class(std::span<const float> predictions, std::span<const float> labels,
                           int64_t batch, int64_t num_classes, int64_t k) {
  check_batch("top_k_by_class", predictions, labels, batch, num_classes);
  if (k < 1) {
    throw InvalidArgument("metrics::top_k_by_class: k must be a positive integer, got " +
                          std::to_string(k));
  }
  k = std::min(k, num_classes);
  TopKByClass out;
  out.predictions.resize(static_cast<std::size_t>(num_classes));
  out.labels.resize(static_cast<std::size_t>(num_classes));
  out.num_positives.assign(static_cast<std::size_t>(num_classes), 0.0);
  std::vector<int32_t> indices;
  for (int64_t v = 0; v < batch; ++v) {
    const float* row = predictions.data() + v * num_classes;
    const float* row_labels = labels.data() + v * num_classes;
    for (int64_t c = 0; c < num_classes; ++c) {
      if (row_labels[c] > 0) out.num_positives[static_cast<std::size_t>(c)] += 1.0;
    }
    select_top_k(row, num_classes, k, &indices);
    for (int64_t i = 0; i < k; ++i) {
      const int32_t c = indices[static_cast<std::size_t>(i)];
      out.predictions[static_cast<std::size_t>(c)].push_back(row[c]);
      out.labels[static_cast<std::size_t>(c)].push_back(row_labels[c]);
    }
  }
  return out;
}

namespace {

// eval_util.flatten over the classes of a TopKByClass.
void flatten(const std::vector<std::vector<float>>& lists, std::vector<float>* out) {
  std::size_t total = 0;
  for (const auto& list : lists) total += list.size();
  out->clear();
  out->reserve(total);
  for (const auto& list : lists) out->insert(out->end(), list.begin(), list.end());
}

}  // namespace

double gap(std::span<const float> predictions, std::span<const float> labels, int64_t batch,
           int64_t num_classes, int64_t top_k) {
  check_batch("gap", predictions, labels, batch, num_classes);
  if (top_k < 1) {
    throw InvalidArgument("metrics::gap: top_k must be a positive integer, got " +
                          std::to_string(top_k));
  }
  const TopKByClass sparse = top_k_by_class(predictions, labels, batch, num_classes, top_k);
  std::vector<float> flat_predictions;
  std::vector<float> flat_labels;
  flatten(sparse.predictions, &flat_predictions);
  flatten(sparse.labels, &flat_labels);
  AveragePrecisionCalculator calculator;
  calculator.accumulate(
      flat_predictions, flat_labels,
      std::accumulate(sparse.num_positives.begin(), sparse.num_positives.end(), 0.0));
  return calculator.peek_ap_at_n();
}

// ---------------------------------------------------------------- AveragePrecisionCalculator

AveragePrecisionCalculator::AveragePrecisionCalculator(std::optional<int64_t> top_n)
    : top_n_(top_n) {
  check_top_n("AveragePrecisionCalculator", top_n);
}

void AveragePrecisionCalculator::accumulate(std::span<const float> predictions,
                                            std::span<const float> actuals,
                                            std::optional<double> num_positives) {
  check_same_size("AveragePrecisionCalculator::accumulate", predictions, actuals);
  if (num_positives && !(*num_positives >= 0)) {
    throw InvalidArgument(
        "AveragePrecisionCalculator::accumulate: num_positives must be a non-negative number, "
        "got " +
        std::to_string(*num_positives));
  }
  total_positives_ += num_positives ? *num_positives : count_positives(actuals);
  for (std::size_t i = 0; i < predictions.size(); ++i) {
    const Entry entry{predictions[i], actuals[i]};
    if (!top_n_ || heap_size() < *top_n_) {
      heappush(heap_, entry);
    } else if (entry.prediction > heap_[0].prediction) {
      heappop(heap_);
      heappush(heap_, entry);
    }
  }
}

void AveragePrecisionCalculator::clear() {
  heap_.clear();
  total_positives_ = 0.0;
}

double AveragePrecisionCalculator::peek_ap_at_n() const {
  if (heap_.empty()) return 0.0;
  std::vector<float> predictions(heap_.size());
  std::vector<float> actuals(heap_.size());
  for (std::size_t i = 0; i < heap_.size(); ++i) {
    predictions[i] = heap_[i].prediction;
    actuals[i] = heap_[i].actual;
  }
  return ap_at_n(predictions, actuals, top_n_, total_positives_);
}

double AveragePrecisionCalculator::peek_interpolated_ap_at_n(int inter_points) const {
  if (heap_.empty()) return 0.0;
  std::vector<float> predictions(heap_.size());
  std::vector<float> actuals(heap_.size());
  for (std::size_t i = 0; i < heap_.size(); ++i) {
    predictions[i] = heap_[i].prediction;
    actuals[i] = heap_[i].actual;
  }
  const double positives =
      top_n_ ? std::min(total_positives_, static_cast<double>(*top_n_)) : total_positives_;
  return interpolated_ap(predictions, actuals, inter_points, positives);
}

double AveragePrecisionCalculator::ap(std::span<const float> predictions,
                                      std::span<const float> actuals) {
  return ap_at_n(predictions, actuals, std::nullopt);
}

double AveragePrecisionCalculator::ap_at_n(std::span<const float> predictions,
                                           std::span<const float> actuals, std::optional<int64_t> n,
                                           std::optional<double> total_num_positives) {
  check_same_size("AveragePrecisionCalculator::ap_at_n", predictions, actuals);
  if (n && *n < 1) {
    throw InvalidArgument(
        "AveragePrecisionCalculator::ap_at_n: n must be unset or a positive integer, got " +
        std::to_string(*n));
  }
  std::vector<float> ranked_predictions;
  std::vector<float> ranked_actuals;
  rank_like_original(predictions, actuals, &ranked_predictions, &ranked_actuals);

  double num_positives = total_num_positives ? *total_num_positives : count_positives(actuals);
  if (num_positives == 0) return 0.0;
  if (n) num_positives = std::min(num_positives, static_cast<double>(*n));
  const double delta_recall = 1.0 / num_positives;

  std::size_t r = ranked_predictions.size();
  if (n) r = std::min(r, static_cast<std::size_t>(*n));
  double ap = 0.0;
  double positive_count = 0.0;
  for (std::size_t i = 0; i < r; ++i) {
    if (ranked_actuals[i] > 0) {
      positive_count += 1.0;
      ap += positive_count / static_cast<double>(i + 1) * delta_recall;
    }
  }
  return ap;
}

double AveragePrecisionCalculator::interpolated_ap(std::span<const float> predictions,
                                                   std::span<const float> actuals, int inter_points,
                                                   std::optional<double> total_num_positives) {
  check_same_size("AveragePrecisionCalculator::interpolated_ap", predictions, actuals);
  if (inter_points < 1) {
    throw InvalidArgument(
        "AveragePrecisionCalculator::interpolated_ap: inter_points must be a positive integer, "
        "got " +
        std::to_string(inter_points));
  }
  if (predictions.empty()) return 0.0;

  // _zero_one_normalize, in float32 as numpy computes it on a float32 array.
  std::vector<float> normalized(predictions.begin(), predictions.end());
  const auto [min_it, max_it] = std::minmax_element(normalized.begin(), normalized.end());
  const float min_value = *min_it;
  const float max_value = *max_it;
  if (min_value < 0 || max_value > 1) {
    const float denominator = std::max(max_value - min_value, 1e-7f);
    for (float& p : normalized) p = (p - min_value) / denominator;
  }

  std::vector<float> ranked_predictions;
  std::vector<float> ranked_actuals;
  rank_like_original(normalized, actuals, &ranked_predictions, &ranked_actuals);

  const double num_positives =
      total_num_positives ? *total_num_positives : count_positives(actuals);
  if (num_positives == 0) return 0.0;

  // taus[pt] = (inter_points - pt) / inter_points, from 1 down to 0.
  auto tau = [inter_points](int pt) {
    return static_cast<double>(inter_points - pt) / static_cast<double>(inter_points);
  };
  double ap = 0.0;
  double last_recall = 0.0;
  double positive_count = 0.0;
  int pt = 0;
  while (static_cast<double>(ranked_predictions[0]) < tau(pt)) ++pt;
  for (std::size_t i = 0; i < ranked_predictions.size(); ++i) {
    const double p = ranked_predictions[i];
    if (p < tau(pt)) {
      const double current_recall = positive_count / num_positives;
      const double precision = positive_count / static_cast<double>(i);
      ap += precision * (current_recall - last_recall);
      last_recall = current_recall;
      while (p < tau(pt)) ++pt;
    }
    if (ranked_actuals[i] > 0) positive_count += 1.0;
  }
  const double current_recall = positive_count / num_positives;
  ap += positive_count / static_cast<double>(ranked_predictions.size()) *
        (current_recall - last_recall);
  return ap;
}

// ------------------------------------------------------------ MeanAveragePrecisionCalculator

MeanAveragePrecisionCalculator::MeanAveragePrecisionCalculator(int64_t num_class,
                                                               bool filter_empty_classes,
                                                               std::optional<int64_t> top_n)
    : filter_empty_classes_(filter_empty_classes) {
  if (num_class < 2) {
    throw InvalidArgument(
        "MeanAveragePrecisionCalculator: num_class must be an integer greater than 1, got " +
        std::to_string(num_class));
  }
  check_top_n("MeanAveragePrecisionCalculator", top_n);
  calculators_.assign(static_cast<std::size_t>(num_class), AveragePrecisionCalculator(top_n));
}

void MeanAveragePrecisionCalculator::accumulate(const std::vector<std::vector<float>>& predictions,
                                                const std::vector<std::vector<float>>& actuals,
                                                std::span<const double> num_positives) {
  const std::size_t n = calculators_.size();
  if (predictions.size() != n || actuals.size() != n ||
      (!num_positives.empty() && num_positives.size() != n)) {
    throw InvalidArgument("MeanAveragePrecisionCalculator::accumulate: expected " +
                          std::to_string(n) + " class lists, got " +
                          std::to_string(predictions.size()) + " predictions, " +
                          std::to_string(actuals.size()) + " actuals and " +
                          std::to_string(num_positives.size()) + " num_positives");
  }
  for (std::size_t c = 0; c < n; ++c) {
    calculators_[c].accumulate(
        predictions[c], actuals[c],
        num_positives.empty() ? std::nullopt : std::optional<double>(num_positives[c]));
  }
}

void MeanAveragePrecisionCalculator::clear() {
  for (auto& calculator : calculators_) calculator.clear();
}

bool MeanAveragePrecisionCalculator::is_empty() const {
  return std::all_of(calculators_.begin(), calculators_.end(),
                     [](const AveragePrecisionCalculator& c) { return c.heap_size() == 0; });
}

bool MeanAveragePrecisionCalculator::reported(const AveragePrecisionCalculator& calculator) const {
  return !filter_empty_classes_ || calculator.num_accumulated_positives() > 0;
}

std::vector<double> MeanAveragePrecisionCalculator::peek_map_at_n() const {
  std::vector<double> aps;
  for (const auto& calculator : calculators_) {
    if (reported(calculator)) aps.push_back(calculator.peek_ap_at_n());
  }
  return aps;
}

std::vector<int64_t> MeanAveragePrecisionCalculator::peek_map_classes() const {
  std::vector<int64_t> classes;
  for (std::size_t c = 0; c < calculators_.size(); ++c) {
    if (reported(calculators_[c])) classes.push_back(static_cast<int64_t>(c));
  }
  return classes;
}

// ------------------------------------------------------------------------- EvaluationMetrics

EvaluationMetrics::EvaluationMetrics(int64_t num_class, int64_t top_k, std::optional<int64_t> top_n)
    : num_class_(num_class),
      top_k_(top_k),
      map_calculator_(num_class, /*filter_empty_classes=*/true, top_n) {
  if (top_k < 1) {
    throw InvalidArgument("EvaluationMetrics: top_k must be a positive integer, got " +
                          std::to_string(top_k));
  }
}

BatchMetrics EvaluationMetrics::accumulate(std::span<const float> predictions,
                                           std::span<const float> labels, double loss,
                                           int64_t batch) {
  check_batch("EvaluationMetrics::accumulate", predictions, labels, batch, num_class_);
  BatchMetrics metrics;
  metrics.hit_at_one = hit_at_one(predictions, labels, batch, num_class_);
  metrics.perr = precision_at_equal_recall_rate(predictions, labels, batch, num_class_);
  metrics.loss = loss;

  const TopKByClass sparse = top_k_by_class(predictions, labels, batch, num_class_, top_k_);
  map_calculator_.accumulate(sparse.predictions, sparse.labels, sparse.num_positives);
  std::vector<float> flat_predictions;
  std::vector<float> flat_labels;
  flatten(sparse.predictions, &flat_predictions);
  flatten(sparse.labels, &flat_labels);
  global_ap_calculator_.accumulate(
      flat_predictions, flat_labels,
      std::accumulate(sparse.num_positives.begin(), sparse.num_positives.end(), 0.0));

  num_examples_ += batch;
  const auto size = static_cast<double>(batch);
  sum_hit_at_one_ += metrics.hit_at_one * size;
  sum_perr_ += metrics.perr * size;
  sum_loss_ += metrics.loss * size;
  return metrics;
}

BatchMetrics EvaluationMetrics::accumulate(std::span<const float> predictions,
                                           std::span<const float> labels,
                                           std::span<const float> losses, int64_t batch) {
  if (losses.empty()) {
    throw InvalidArgument("EvaluationMetrics::accumulate: losses is empty");
  }
  const double mean_loss =
      std::accumulate(losses.begin(), losses.end(), 0.0) / static_cast<double>(losses.size());
  return accumulate(predictions, labels, mean_loss, batch);
}

EpochMetrics EvaluationMetrics::get() const {
  if (num_examples_ <= 0) {
    throw InvalidArgument(
        "EvaluationMetrics::get: no examples accumulated (total_sample must be positive)");
  }
  EpochMetrics epoch;
  const auto total = static_cast<double>(num_examples_);
  epoch.avg_hit_at_one = sum_hit_at_one_ / total;
  epoch.avg_perr = sum_perr_ / total;
  epoch.avg_loss = sum_loss_ / total;
  epoch.aps = map_calculator_.peek_map_at_n();
  epoch.ap_classes = map_calculator_.peek_map_classes();
  epoch.mean_ap = epoch.aps.empty() ? std::numeric_limits<double>::quiet_NaN()
                                    : std::accumulate(epoch.aps.begin(), epoch.aps.end(), 0.0) /
                                          static_cast<double>(epoch.aps.size());
  epoch.gap = global_ap_calculator_.peek_ap_at_n();
  return epoch;
}

void EvaluationMetrics::clear() {
  sum_hit_at_one_ = 0.0;
  sum_perr_ = 0.0;
  sum_loss_ = 0.0;
  num_examples_ = 0;
  map_calculator_.clear();
  global_ap_calculator_.clear();
}

}  // namespace trainyard::metrics
