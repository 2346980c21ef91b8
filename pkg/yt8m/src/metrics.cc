#include "trainyard/pkg/yt8m/metrics.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <system_error>
#include <thread>

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

// ------------------------------------------------------------------ training_batch_metrics

namespace {

// One class of a row in a bounded selection, ordered as select_top_k orders them: the higher
// score is better and the lower class index wins a tie.
struct Candidate {
  float score;
  int32_t index;
};

struct Better {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score > b.score || (a.score == b.score && a.index < b.index);
  }
};

// Four lanes of one SSE / NEON register (GCC and Clang vector extensions), so that the scans
// below compare four values per instruction at the baseline ISA.
using Float4 = float __attribute__((vector_size(16)));
using Int4 = int32_t __attribute__((vector_size(16)));
constexpr int64_t kBlock = 16;  // values per step of a scan: four registers

Float4 load4(const float* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The number of values > 0 among the n at p (count_positives on one row).
int64_t count_positive(const float* p, int64_t n) {
  const Float4 zero = {0.0f, 0.0f, 0.0f, 0.0f};
  Int4 counts = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    // A true comparison is a lane of -1.
    counts -= (load4(p + i) > zero) + (load4(p + i + 4) > zero) + (load4(p + i + 8) > zero) +
              (load4(p + i + 12) > zero);
  }
  int64_t total = static_cast<int64_t>(counts[0]) + counts[1] + counts[2] + counts[3];
  for (; i < n; ++i) {
    if (p[i] > 0) ++total;
  }
  return total;
}

Float4 max4(Float4 a, Float4 b) { return a > b ? a : b; }

// The largest of the kBlock values at p.
float block_max(const float* p) {
  const Float4 m = max4(max4(load4(p), load4(p + 4)), max4(load4(p + 8), load4(p + 12)));
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

// Scratch space of select_best, reused from row to row.
struct Selection {
  std::vector<Candidate> best;  // the result
  std::vector<float> maxima;    // each full block's largest score
  std::vector<float> kth;       // a min-heap of the k largest maxima seen
};

// The row's k best classes (1 <= k <= num_classes), best first, in selection->best: the set
// select_top_k chooses, sorted. When the row has at least k full blocks, the k-th largest block
// maximum t is a lower bound of the k-th best score (k distinct classes score at least t), so
// only classes scoring >= t are candidates, and only blocks whose maximum is >= t hold any:
// the row is read once, and a few blocks twice. Otherwise one pass keeps the k best in a heap
// whose root is the worst kept.
void select_best(const float* row, int64_t num_classes, int64_t k, Selection* selection) {
  std::vector<Candidate>& best = selection->best;
  best.clear();
  const int64_t blocks = num_classes / kBlock;
  if (blocks >= k) {
    std::vector<float>& maxima = selection->maxima;
    maxima.resize(static_cast<std::size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b) {
      maxima[static_cast<std::size_t>(b)] = block_max(row + b * kBlock);
    }
    // The k-th largest maximum: a heap of the k largest seen, whose root is the smallest.
    std::vector<float>& kth = selection->kth;
    kth.assign(maxima.begin(), maxima.begin() + k);
    std::make_heap(kth.begin(), kth.end(), std::greater<float>());
    for (int64_t b = k; b < blocks; ++b) {
      const float m = maxima[static_cast<std::size_t>(b)];
      if (m > kth.front()) {
        std::pop_heap(kth.begin(), kth.end(), std::greater<float>());
        kth.back() = m;
        std::push_heap(kth.begin(), kth.end(), std::greater<float>());
      }
    }
    const float threshold = kth.front();
    for (int64_t b = 0; b < blocks; ++b) {
      if (maxima[static_cast<std::size_t>(b)] < threshold) continue;
      for (int64_t c = b * kBlock; c < (b + 1) * kBlock; ++c) {
        if (row[c] >= threshold) best.push_back({row[c], static_cast<int32_t>(c)});
      }
    }
    for (int64_t c = blocks * kBlock; c < num_classes; ++c) {
      if (row[c] >= threshold) best.push_back({row[c], static_cast<int32_t>(c)});
    }
    std::partial_sort(best.begin(), best.begin() + k, best.end(), Better());
    best.resize(static_cast<std::size_t>(k));
    return;
  }
  for (int64_t c = 0; c < k; ++c) best.push_back({row[c], static_cast<int32_t>(c)});
  std::make_heap(best.begin(), best.end(), Better());  // root: the worst kept
  // A later class never wins a tie against a kept one, so a strict > decides.
  for (int64_t c = k; c < num_classes; ++c) {
    if (row[c] > best.front().score) {
      std::pop_heap(best.begin(), best.end(), Better());
      best.back() = {row[c], static_cast<int32_t>(c)};
      std::push_heap(best.begin(), best.end(), Better());
    }
  }
  std::sort(best.begin(), best.end(), Better());
}

// What one row contributes to the three metrics.
struct RowMetrics {
  bool hit = false;        // its best class is a positive
  int64_t positives = 0;   // its labels > 0
  double precision = 0.0;  // PERR's term; unused when positives == 0
};

// One of a row's GAP top k.
struct TopEntry {
  int32_t index;
  float prediction;
  float label;
};

// Rows [begin, end): their RowMetrics and their GAP top k (k per row, best first, at
// top[row * k]).
void rows_metrics(const float* predictions, const float* labels, int64_t begin, int64_t end,
                  int64_t num_classes, int64_t k, RowMetrics* rows, TopEntry* top) {
  Selection selection;
  const std::vector<Candidate>& selected = selection.best;
  for (int64_t v = begin; v < end; ++v) {
    const float* row = predictions + v * num_classes;
    const float* row_labels = labels + v * num_classes;
    RowMetrics& out = rows[v];
    out.positives = count_positive(row_labels, num_classes);
    // PERR's top (positives) and GAP's top k are both prefixes of the row's best
    // max(k, positives) classes in select_top_k's order.
    select_best(row, num_classes, std::min(num_classes, std::max(k, out.positives)), &selection);
    out.hit = row_labels[selected[0].index] > 0;
    if (out.positives > 0) {
      int64_t hits = 0;
      for (int64_t i = 0; i < out.positives; ++i) {
        const int32_t c = selected[static_cast<std::size_t>(i)].index;
        if (row[c] > 0 && row_labels[c] > 0) ++hits;
      }
      out.precision = static_cast<double>(hits) / static_cast<double>(out.positives);
    }
    for (int64_t i = 0; i < k; ++i) {
      const Candidate& best = selected[static_cast<std::size_t>(i)];
      top[v * k + i] = {best.index, best.score, row_labels[best.index]};
    }
  }
}

constexpr int64_t kMaxThreads = 4;  // training_batch_metrics's chunks of rows

// A key whose ascending order is the descending order of the scores, equal scores (0 and -0
// included) equal keys.
uint32_t descending_key(float score) {
  const auto bits = std::bit_cast<uint32_t>(score == 0.0f ? 0.0f : score);
  const uint32_t ascending = (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
  return ~ascending;
}

// Sorts `items` by their upper 32 bits, stably (an LSD radix sort, a byte per pass; a pass
// whose byte is the same in every item is skipped).
void radix_sort_upper(std::vector<uint64_t>* items, std::vector<uint64_t>* scratch) {
  scratch->resize(items->size());
  for (int shift = 32; shift < 64; shift += 8) {
    std::array<std::size_t, 257> offsets{};
    for (uint64_t item : *items) ++offsets[((item >> shift) & 0xffu) + 1];
    if (std::find(offsets.begin() + 1, offsets.end(), items->size()) != offsets.end()) continue;
    for (std::size_t b = 1; b < offsets.size(); ++b) offsets[b] += offsets[b - 1];
    for (uint64_t item : *items) (*scratch)[offsets[(item >> shift) & 0xffu]++] = item;
    items->swap(*scratch);
  }
}

// python_shuffle_indices(n), kept for the next call of this thread (a training run logs
// batches of one size).
const std::vector<std::size_t>& cached_shuffle_indices(std::size_t n) {
  thread_local std::vector<std::size_t> indices;
  thread_local std::size_t cached_n = 0;
  if (cached_n != n || indices.size() != n) {
    indices = python_shuffle_indices(n);
    cached_n = n;
  }
  return indices;
}

}  // namespace

TrainingBatchMetrics training_batch_metrics(std::span<const float> predictions,
                                            std::span<const float> labels, int64_t batch,
                                            int64_t num_classes, int64_t top_k) {
  check_batch("training_batch_metrics", predictions, labels, batch, num_classes);
  if (top_k < 1) {
    throw InvalidArgument(
        "metrics::training_batch_metrics: top_k must be a positive integer, got " +
        std::to_string(top_k));
  }
  const int64_t k = std::min(top_k, num_classes);
  const auto n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(k);
  if (n > std::numeric_limits<uint32_t>::max()) {  // beyond the sort keys' index field
    return {hit_at_one(predictions, labels, batch, num_classes),
            precision_at_equal_recall_rate(predictions, labels, batch, num_classes),
            gap(predictions, labels, batch, num_classes, top_k)};
  }

  std::vector<RowMetrics> rows(static_cast<std::size_t>(batch));
  std::vector<TopEntry> top(n);
  // Rows in parallel chunks when the batch is large (each row's results have their own slot,
  // so the values do not depend on the chunking).
  const auto work = static_cast<std::size_t>(batch) * static_cast<std::size_t>(num_classes);
  const int64_t chunks = std::clamp<int64_t>(
      std::min<int64_t>(std::thread::hardware_concurrency(), static_cast<int64_t>(work >> 20)), 1,
      std::min<int64_t>(batch, kMaxThreads));
  auto run_chunk = [&](int64_t chunk) {
    rows_metrics(predictions.data(), labels.data(), batch * chunk / chunks,
                 batch * (chunk + 1) / chunks, num_classes, k, rows.data(), top.data());
  };
  std::vector<std::thread> helpers;
  int64_t started = 1;
  try {
    for (; started < chunks; ++started) helpers.emplace_back(run_chunk, started);
  } catch (const std::system_error&) {
    // No thread to be had: this one runs the chunks left without one.
  }
  for (int64_t chunk = started; chunk < chunks; ++chunk) run_chunk(chunk);
  run_chunk(0);
  for (std::thread& helper : helpers) helper.join();

  // Hit@1 and PERR: the row terms summed in row order, as the two functions do.
  TrainingBatchMetrics out;
  int64_t hits = 0;
  int64_t total_positives = 0;
  double aggregated_precision = 0.0;
  for (const RowMetrics& row : rows) {
    if (row.hit) ++hits;
    total_positives += row.positives;
    if (row.positives > 0) aggregated_precision += row.precision;
  }
  out.hit_at_one = static_cast<double>(hits) / static_cast<double>(batch);
  out.perr = aggregated_precision / static_cast<double>(batch);

  // GAP: top_k_by_class's lists flattened (class by class, videos in order within a class),
  // pushed one by one into a heap laid out as heapq's, then ranked as rank_like_original does.
  std::vector<uint32_t> class_offsets(static_cast<std::size_t>(num_classes) + 1, 0);
  for (const TopEntry& entry : top) ++class_offsets[static_cast<std::size_t>(entry.index) + 1];
  for (std::size_t c = 1; c < class_offsets.size(); ++c) class_offsets[c] += class_offsets[c - 1];
  struct PooledEntry {
    float prediction;
    float actual;
  };
  std::vector<PooledEntry> heap(n);
  for (const TopEntry& entry : top) {  // video order
    heap[class_offsets[static_cast<std::size_t>(entry.index)]++] = {entry.prediction, entry.label};
  }
  // Pushing heap[i] onto the heap heap[0, i) is sifting it towards the root in place.
  for (std::size_t i = 1; i < n; ++i) heap_sift_down(heap, 0, i);

  // The shuffle puts heap[shuffle[i]] at position i; the stable sort by descending score then
  // orders equal scores by that position: sort keys (score key, i).
  const std::vector<std::size_t>& shuffle = cached_shuffle_indices(n);
  std::vector<uint64_t> keys(n);
  for (std::size_t i = 0; i < n; ++i) {
    keys[i] = (static_cast<uint64_t>(descending_key(heap[shuffle[i]].prediction)) << 32) | i;
  }
  std::vector<uint64_t> scratch;
  radix_sort_upper(&keys, &scratch);

  if (total_positives == 0) return out;  // ap_at_n's "no positives"
  const double delta_recall = 1.0 / static_cast<double>(total_positives);
  double ap = 0.0;
  double positive_count = 0.0;
  for (std::size_t r = 0; r < n; ++r) {
    if (heap[shuffle[keys[r] & 0xffffffffu]].actual > 0) {
      positive_count += 1.0;
      ap += positive_count / static_cast<double>(r + 1) * delta_recall;
    }
  }
  out.gap = ap;
  return out;
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
