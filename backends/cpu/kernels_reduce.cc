// Reductions, argmax and softmax on the CPU (ops/reduce.h): own loops over contiguous runs.
//
// Determinism: every reduction splits its work over output elements (or over fixed-size blocks
// of one long row) and combines each output's values in an order fixed by the shapes alone, so
// a result is bitwise identical run to run and for any number of threads. f32 and integer sums
// accumulate in 64 bits; f64 sums are pairwise. Max and min propagate NaN; argmax ranks NaN
// above every number and returns the first NaN (top_k, in kernels_array.cc, ranks NaN the same).
//
// Softmax over narrow f32 rows (MoeModel's gates) has a vectorized path: the rows are walked
// together with a polynomial exp, compiled for AVX-512, AVX2 and baseline x86-64
// (kernels_common.h); an input with NaN or +infinity falls back to the general loops.
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels_common.h"

namespace trainyard::cpu {
namespace {

// ---- Shared helpers ----

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;  // NaN only; vectorizes where std::isnan may not
  } else {
    (void)v;
    return false;
  }
}

template <class T>
constexpr T lowest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) {
    return -std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::lowest();
  }
}

template <class T>
constexpr T highest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) {
    return std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::max();
  }
}

// ---- Reductions ----

// An exp costs about this many copies: loops of exps go parallel at fewer elements.
constexpr int64_t kExpCost = 8;

template <class T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double,
                                  std::conditional_t<std::is_same_v<T, int64_t>, uint64_t,
                                                     int64_t>>;  // u64: i64 sums wrap

template <class Acc, class T>
Acc lane_sum(const T* x, int64_t n) {
  Acc r[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) r[j] += static_cast<Acc>(x[i + j]);
  }
  Acc s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
  for (; i < n; ++i) s += static_cast<Acc>(x[i]);
  return s;
}

template <class T>
double pairwise_sum(const T* x, int64_t n) {
  if (n <= 128) return lane_sum<double>(x, n);
  const int64_t half = (n / 2) & ~int64_t{7};
  return pairwise_sum(x, half) + pairwise_sum(x + half, n - half);
}

// A reduction: Acc init(); Acc row(x, n, y) reduces a contiguous run; combine(a, b);
// accumulate(acc, x, n, y) folds x[i] into acc[i]; finish(acc, count, y) gives the output.
// `y` points at the output element(s) concerned (read by ExpSumOp, which finds there the
// maximum that the first pass of logsumexp left).
// acc[i] += x[i] in f64: the column sums of f32 (a bias gradient over the batch), at full
// vector width (the plugin's baseline build would convert two floats at a time).
TRAINYARD_MULTIVERSION void accumulate_f32_in_f64(double* acc, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(x[i]);
}

template <class T>
struct SumOp {
  using Acc = SumAcc<T>;
  static constexpr bool kPairwise = std::is_same_v<T, double>;
  static constexpr int64_t kCost = 1;  // per element, relative to a copy
  static Acc init() { return Acc{0}; }
  static Acc row(const T* x, int64_t n, const T*) {
    if constexpr (kPairwise) {
      return pairwise_sum(x, n);
    } else {
      return lane_sum<Acc>(x, n);
    }
  }
  static Acc combine(Acc a, Acc b) { return a + b; }
  static void accumulate(Acc* acc, const T* x, int64_t n, const T*) {
    if constexpr (std::is_same_v<T, float>) {
      accumulate_f32_in_f64(acc, x, n);
    } else {
      for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<Acc>(x[i]);
    }
  }
  static T finish(Acc a, int64_t, const T*) { return static_cast<T>(a); }
};

template <class T>
struct MeanOp : SumOp<T> {
  using Acc = typename SumOp<T>::Acc;
  static T finish(Acc a, int64_t count, const T*) {
    return static_cast<T>(static_cast<double>(a) / static_cast<double>(count));  // 0/0: NaN
  }
};

template <class T, bool kMax>
struct ExtremumOp {
  using Acc = T;
  static constexpr bool kPairwise = false;
  static constexpr int64_t kCost = 1;
  // Branch-free (bitwise |) so that the loops below vectorize.
  static T pick(T acc, T x) {
    if constexpr (kMax) {
      return ((x > acc) | is_nan(x)) ? x : acc;
    } else {
      return ((x < acc) | is_nan(x)) ? x : acc;
    }
  }
  static T init() { return kMax ? lowest_value<T>() : highest_value<T>(); }
  // 32 lanes of a plain max (maxps) and a separate NaN flag: short dependency chains.
  static T row(const T* x, int64_t n, const T*) {
    constexpr int kLanes = 32;
    T r[kLanes];
    int32_t nan[kLanes] = {};
    for (T& v : r) v = init();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        const T v = x[i + j];
        if constexpr (kMax) {
          r[j] = v > r[j] ? v : r[j];
        } else {
          r[j] = v < r[j] ? v : r[j];
        }
        nan[j] |= static_cast<int32_t>(is_nan(v));
      }
    }
    T m = init();
    int32_t any_nan = 0;
    for (int j = 0; j < kLanes; ++j) {
      m = pick(m, r[j]);
      any_nan |= nan[j];
    }
    for (; i < n; ++i) m = pick(m, x[i]);
    if constexpr (std::numeric_limits<T>::has_quiet_NaN) {
      if (any_nan != 0) return std::numeric_limits<T>::quiet_NaN();
    }
    return m;
  }
  static T combine(T a, T b) { return pick(a, b); }
  static void accumulate(T* acc, const T* x, int64_t n, const T*) {
    for (int64_t i = 0; i < n; ++i) acc[i] = pick(acc[i], x[i]);
  }
  static T finish(T a, int64_t, const T*) { return a; }
};

template <class T>
using MaxOp = ExtremumOp<T, true>;
template <class T>
using MinOp = ExtremumOp<T, false>;

// The second pass of logsumexp: y holds the maximum m; sums exp(x - m) and gives m + log(sum).
// A non-finite maximum shifts by 0 instead, so all -inf gives -inf and +inf gives +inf.
template <class T>
struct ExpSumOp {
  using Acc = double;
  static constexpr bool kPairwise = false;
  static constexpr int64_t kCost = kExpCost;
  static T shift(T m) { return std::isfinite(m) ? m : T(0); }
  static double init() { return 0.0; }
  static double row(const T* x, int64_t n, const T* y) {
    const T s = shift(*y);
    double r[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += static_cast<double>(std::exp(x[i + j] - s));
    }
    double total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) total += static_cast<double>(std::exp(x[i] - s));
    return total;
  }
  static double combine(double a, double b) { return a + b; }
  static void accumulate(double* acc, const T* x, int64_t n, const T* y) {
    for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(std::exp(x[i] - shift(y[i])));
  }
  static T finish(double sum, int64_t, const T* y) {
    return static_cast<T>(static_cast<double>(shift(*y)) + std::log(sum));
  }
};

// The input after dropping size-1 dims and merging neighbours that are both reduced or both
// kept. When the last group is reduced, each output reduces `inner`-long contiguous runs at
// the offsets of `reduced`; otherwise each `inner`-long run of outputs reduces the
// `inner`-long input runs at the offsets of `reduced`. `kept` walks the outputs (or output
// runs) in order.
struct ReduceLayout {
  Odometer kept;
  Odometer reduced;
  int64_t inner = 1;
  bool last_reduced = true;
};

ReduceLayout plan_reduce(const Shape& shape, uint32_t axis_mask) {
  std::array<int64_t, kMaxRank> size{};
  std::array<bool, kMaxRank> reduced{};
  int n = 0;
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 1) continue;
    const bool r = ((axis_mask >> i) & 1u) != 0;
    if (n > 0 && reduced[n - 1] == r) {
      size[n - 1] *= shape[i];
    } else {
      size[n] = shape[i];
      reduced[n] = r;
      ++n;
    }
  }
  std::array<int64_t, kMaxRank> stride{};
  int64_t s = 1;
  for (int g = n - 1; g >= 0; --g) {
    stride[g] = s;
    s *= size[g];
  }
  ReduceLayout layout;
  if (n == 0) return layout;  // one element
  layout.last_reduced = reduced[n - 1];
  layout.inner = size[n - 1];
  for (int g = 0; g < n - 1; ++g) {
    (reduced[g] ? layout.reduced : layout.kept).add(size[g], stride[g]);
  }
  return layout;
}

// The last group is reduced: each output reduces `reps` contiguous runs. One very long run per
// output is split into fixed-size blocks whose partial results combine in block order.
template <class Op, class T>
void reduce_rows(const T* x, T* y, const ReduceLayout& layout, int64_t outputs) {
  using Acc = typename Op::Acc;
  const int64_t len = layout.inner;
  const int64_t reps = layout.reduced.count();
  const int64_t count = len * reps;
  constexpr int64_t kBlock = int64_t{1} << 16;
  if (reps == 1 && len > 2 * kBlock) {
    const int64_t blocks = (len + kBlock - 1) / kBlock;
    std::vector<Acc> partial(static_cast<std::size_t>(outputs * blocks));
    parallel_ranges(outputs * blocks, outputs * len * Op::kCost, [&](int64_t begin, int64_t end) {
      Odometer kept = layout.kept;
      for (int64_t u = begin; u < end; ++u) {
        const int64_t o = u / blocks;
        const int64_t start = (u % blocks) * kBlock;
        kept.seek(o);
        partial[static_cast<std::size_t>(u)] =
            Op::row(x + kept.offset + start, std::min(kBlock, len - start), y + o);
      }
    });
    for (int64_t o = 0; o < outputs; ++o) {
      Acc acc = partial[static_cast<std::size_t>(o * blocks)];
      for (int64_t b = 1; b < blocks; ++b) {
        acc = Op::combine(acc, partial[static_cast<std::size_t>(o * blocks + b)]);
      }
      y[o] = Op::finish(acc, count, y + o);
    }
    return;
  }
  parallel_ranges(outputs, outputs * count * Op::kCost, [&](int64_t begin, int64_t end) {
    Odometer kept = layout.kept;
    Odometer red = layout.reduced;
    kept.seek(begin);
    for (int64_t o = begin; o < end; ++o) {
      Acc acc;
      if (reps == 1) {
        acc = Op::row(x + kept.offset, len, y + o);
      } else {
        acc = Op::init();
        red.seek(0);
        for (int64_t r = 0; r < reps; ++r) {
          acc = Op::combine(acc, Op::row(x + kept.offset + red.offset, len, y + o));
          red.next();
        }
      }
      y[o] = Op::finish(acc, count, y + o);
      kept.next();
    }
  });
}

constexpr int64_t kColumnChunk = 512;
constexpr int64_t kWideColumnChunk = 4096;

// Runs of `inner` outputs, each output reducing a strided column; split into column chunks
// accumulated in a stack buffer (pairwise ops add 128-row partial sums).
template <class Op, class T>
void reduce_columns(const T* x, T* y, const ReduceLayout& layout, int64_t outputs) {
  using Acc = typename Op::Acc;
  const int64_t width = layout.inner;
  const int64_t rows = outputs / width;
  const int64_t reps = layout.reduced.count();
  // Wide chunks read long runs of each row (a bias gradient's 3862 columns: 2 chunks, not 8 of
  // 2 KB at a 15 KB stride), as many as there are threads; each column's sum is the same
  // whatever the chunks.
  const int64_t threads = std::max(1, omp_get_max_threads());
  const int64_t chunk =
      std::clamp<int64_t>((width + threads - 1) / threads, kColumnChunk, kWideColumnChunk);
  const int64_t chunks = (width + chunk - 1) / chunk;
  parallel_ranges(rows * chunks, outputs * reps * Op::kCost, [&](int64_t begin, int64_t end) {
    Odometer kept = layout.kept;
    Odometer red = layout.reduced;
    std::array<Acc, kWideColumnChunk> total;
    std::array<Acc, kWideColumnChunk> part;
    for (int64_t u = begin; u < end; ++u) {
      const int64_t row = u / chunks;
      const int64_t c0 = (u % chunks) * chunk;
      const int64_t n = std::min(chunk, width - c0);
      kept.seek(row);
      const T* xb = x + kept.offset + c0;
      T* yb = y + row * width + c0;
      std::fill_n(total.begin(), n, Op::init());
      red.seek(0);
      if constexpr (Op::kPairwise) {
        constexpr int64_t kRowsPerPart = 128;
        for (int64_t r0 = 0; r0 < reps; r0 += kRowsPerPart) {
          std::fill_n(part.begin(), n, Op::init());
          const int64_t r1 = std::min(reps, r0 + kRowsPerPart);
          for (int64_t r = r0; r < r1; ++r) {
            Op::accumulate(part.data(), xb + red.offset, n, yb);
            red.next();
          }
          for (int64_t i = 0; i < n; ++i) total[i] = Op::combine(total[i], part[i]);
        }
      } else {
        for (int64_t r = 0; r < reps; ++r) {
          Op::accumulate(total.data(), xb + red.offset, n, yb);
          red.next();
        }
      }
      for (int64_t i = 0; i < n; ++i) yb[i] = Op::finish(total[i], reps, yb + i);
    }
  });
}

template <template <class> class OpT, class T>
void reduce_typed(const Tensor& input, const Tensor& output, uint32_t axis_mask) {
  using Op = OpT<T>;
  const T* x = data<T>(input);
  T* y = data<T>(output);
  const int64_t outputs = output.num_elements();
  if (outputs == 0) return;
  if (input.num_elements() == 0) {  // a reduced dim of size 0
    for (int64_t o = 0; o < outputs; ++o) y[o] = Op::finish(Op::init(), 0, y + o);
    return;
  }
  const ReduceLayout layout = plan_reduce(input.shape(), axis_mask);
  if (layout.last_reduced) {
    reduce_rows<Op>(x, y, layout, outputs);
  } else {
    reduce_columns<Op>(x, y, layout, outputs);
  }
}

template <class T>
void logsumexp_typed(const Tensor& input, const Tensor& output, uint32_t axis_mask) {
  reduce_typed<MaxOp, T>(input, output, axis_mask);
  reduce_typed<ExpSumOp, T>(input, output, axis_mask);
}

template <OpLabel kOp, template <class> class OpT, bool kIntegers>
void reduce_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& y = args.outputs[0];
  const uint32_t mask = args.get_attrs<ReduceAttrs>().axis_mask;
  switch (x.dtype()) {
    case DType::kF32:
      return reduce_typed<OpT, float>(x, y, mask);
    case DType::kF64:
      return reduce_typed<OpT, double>(x, y, mask);
    case DType::kI32:
      if constexpr (kIntegers) return reduce_typed<OpT, int32_t>(x, y, mask);
      break;
    case DType::kI64:
      if constexpr (kIntegers) return reduce_typed<OpT, int64_t>(x, y, mask);
      break;
    default:
      break;
  }
  unsupported_dtype(kOp.name, x.dtype());
}

void logsumexp_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& y = args.outputs[0];
  const uint32_t mask = args.get_attrs<ReduceAttrs>().axis_mask;
  switch (x.dtype()) {
    case DType::kF32:
      return logsumexp_typed<float>(x, y, mask);
    case DType::kF64:
      return logsumexp_typed<double>(x, y, mask);
    default:
      unsupported_dtype("logsumexp", x.dtype());
  }
}

// ---- ArgMax ----

template <class T>
void argmax_typed(const Tensor& input, const Tensor& output, std::size_t axis) {
  const Shape& shape = input.shape();
  const int64_t outer = product(shape, 0, axis);
  const int64_t n = shape[axis];
  const int64_t inner = product(shape, axis + 1, shape.rank());
  if (output.num_elements() == 0) return;
  if (n == 0) {
    throw InvalidArgument("argmax: cannot take the argmax of an empty axis of " +
                          input.description());
  }
  const T* x = data<T>(input);
  int64_t* y = data<int64_t>(output);
  if (inner == 1) {
    parallel_ranges(outer, outer * n, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T* row = x + o * n;
        int64_t best = 0;
        for (int64_t i = 1; i < n; ++i) {
          if (greater(row[i], row[best])) best = i;
        }
        y[o] = best;
      }
    });
    return;
  }
  const int64_t chunks = (inner + kColumnChunk - 1) / kColumnChunk;
  parallel_ranges(outer * chunks, outer * n * inner, [&](int64_t begin, int64_t end) {
    std::array<T, kColumnChunk> best;
    std::array<int64_t, kColumnChunk> index;
    for (int64_t u = begin; u < end; ++u) {
      const int64_t o = u / chunks;
      const int64_t c0 = (u % chunks) * kColumnChunk;
      const int64_t m = std::min(kColumnChunk, inner - c0);
      const T* xb = x + o * n * inner + c0;
      for (int64_t i = 0; i < m; ++i) {
        best[i] = xb[i];
        index[i] = 0;
      }
      for (int64_t j = 1; j < n; ++j) {
        const T* xr = xb + j * inner;
        for (int64_t i = 0; i < m; ++i) {
          if (greater(xr[i], best[i])) {
            best[i] = xr[i];
            index[i] = j;
          }
        }
      }
      std::copy_n(index.begin(), m, y + o * inner + c0);
    }
  });
}

void argmax_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& y = args.outputs[0];
  const auto axis = static_cast<std::size_t>(args.get_attrs<AxisAttrs>().axis);
  switch (x.dtype()) {
    case DType::kF32:
      return argmax_typed<float>(x, y, axis);
    case DType::kF64:
      return argmax_typed<double>(x, y, axis);
    case DType::kI32:
      return argmax_typed<int32_t>(x, y, axis);
    case DType::kI64:
      return argmax_typed<int64_t>(x, y, axis);
    case DType::kU8:
      return argmax_typed<uint8_t>(x, y, axis);
    default:
      unsupported_dtype("argmax", x.dtype());
  }
}

// ---- Softmax of narrow f32 rows, vectorized across rows ----

// Softmax over rows of a compile-time width: vectorized across rows. Returns how many inputs
// were NaN or +infinity (the caller then uses the general kernel, whose results those are).
template <int kN>
TRAINYARD_MULTIVERSION int softmax_rows_fixed(const float* x, float* y, int64_t rows) {
  int unusual = 0;
  const float inf = std::numeric_limits<float>::infinity();
#pragma omp simd reduction(+ : unusual)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * kN;
    float m = xr[0];
#pragma GCC unroll 8
    for (int i = 1; i < kN; ++i) m = xr[i] > m ? xr[i] : m;
#pragma GCC unroll 8
    for (int i = 0; i < kN; ++i) {
      unusual += static_cast<int>(xr[i] != xr[i]) + static_cast<int>(xr[i] == inf);
    }
    float e[kN];
    float sum = 0.0f;
#pragma GCC unroll 8
    for (int i = 0; i < kN; ++i) {
      e[i] = fast_exp_nonpositive(xr[i] - m);
      sum += e[i];
    }
    const float scale = 1.0f / sum;
#pragma GCC unroll 8
    for (int i = 0; i < kN; ++i) y[r * kN + i] = e[i] * scale;
  }
  return unusual;
}

template <int kN>
bool softmax_rows_parallel(const float* x, float* y, int64_t rows) {
  constexpr int64_t kRowsPerChunk = 4096;
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  int unusual = 0;
#pragma omp parallel for schedule(static) reduction(+ : unusual) if (rows * kN > \
                                                                        kParallelThreshold / 8)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kRowsPerChunk;
    unusual += softmax_rows_fixed<kN>(x + begin * kN, y + begin * kN,
                                      std::min(kRowsPerChunk, rows - begin));
    clear_upper_vector_state();
  }
  return unusual == 0;
}

// Softmax of f32 rows of 2 to 5 or 8 values (MoeModel's gates), vectorized across rows; false
// when it did not handle the input (another width, NaN or +inf).
bool softmax_small_rows_f32(const float* x, float* y, int64_t rows, int64_t n) {
  // False (nothing promised about y) for other widths, and when an input is NaN or +infinity:
  // the general kernel then gives those rows their exact results.
  switch (n) {
    case 2:
      return softmax_rows_parallel<2>(x, y, rows);
    case 3:
      return softmax_rows_parallel<3>(x, y, rows);
    case 4:
      return softmax_rows_parallel<4>(x, y, rows);
    case 5:
      return softmax_rows_parallel<5>(x, y, rows);
    case 8:
      return softmax_rows_parallel<8>(x, y, rows);
    default:
      return false;
  }
}

// ---- Softmax ----

template <class T, bool kLog>
void softmax_typed(const Tensor& input, const Tensor& output, std::size_t axis) {
  const Shape& shape = input.shape();
  const int64_t outer = product(shape, 0, axis);
  const int64_t n = shape[axis];
  const int64_t inner = product(shape, axis + 1, shape.rank());
  const int64_t total = input.num_elements();
  if (total == 0) return;
  const T* x = data<T>(input);
  T* y = data<T>(output);
  if constexpr (std::is_same_v<T, float> && !kLog) {
    if (inner == 1 && softmax_small_rows_f32(x, y, outer, n)) return;
  }
  if (inner == 1) {
    parallel_ranges(outer, total * kExpCost, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T* xr = x + o * n;
        T* yr = y + o * n;
        const T m = MaxOp<T>::row(xr, n, nullptr);
        double sum = 0.0;
        if constexpr (kLog) {
          for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(std::exp(xr[i] - m));
          const auto log_sum = static_cast<T>(std::log(sum));
          for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) - log_sum;
        } else {
          for (int64_t i = 0; i < n; ++i) {
            const T e = std::exp(xr[i] - m);
            yr[i] = e;
            sum += static_cast<double>(e);
          }
          const auto scale = static_cast<T>(1.0 / sum);
          for (int64_t i = 0; i < n; ++i) yr[i] *= scale;
        }
      }
    });
    return;
  }
  const int64_t chunks = (inner + kColumnChunk - 1) / kColumnChunk;
  parallel_ranges(outer * chunks, total * kExpCost, [&](int64_t begin, int64_t end) {
    std::array<T, kColumnChunk> m;
    std::array<double, kColumnChunk> sum;
    std::array<T, kColumnChunk> f;
    for (int64_t u = begin; u < end; ++u) {
      const int64_t o = u / chunks;
      const int64_t c0 = (u % chunks) * kColumnChunk;
      const int64_t w = std::min(kColumnChunk, inner - c0);
      const T* xb = x + o * n * inner + c0;
      T* yb = y + o * n * inner + c0;
      std::fill_n(m.begin(), w, lowest_value<T>());
      for (int64_t j = 0; j < n; ++j) MaxOp<T>::accumulate(m.data(), xb + j * inner, w, nullptr);
      std::fill_n(sum.begin(), w, 0.0);
      for (int64_t j = 0; j < n; ++j) {
        const T* xr = xb + j * inner;
        T* yr = yb + j * inner;
        for (int64_t i = 0; i < w; ++i) {
          const T e = std::exp(xr[i] - m[i]);
          if constexpr (!kLog) yr[i] = e;
          sum[i] += static_cast<double>(e);
        }
      }
      for (int64_t i = 0; i < w; ++i) {
        f[i] = kLog ? static_cast<T>(std::log(sum[i])) : static_cast<T>(1.0 / sum[i]);
      }
      for (int64_t j = 0; j < n; ++j) {
        const T* xr = xb + j * inner;
        T* yr = yb + j * inner;
        for (int64_t i = 0; i < w; ++i) {
          if constexpr (kLog) {
            yr[i] = (xr[i] - m[i]) - f[i];
          } else {
            yr[i] *= f[i];
          }
        }
      }
    }
  });
}

template <OpLabel kOp, bool kLog>
void softmax_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& y = args.outputs[0];
  const auto axis = static_cast<std::size_t>(args.get_attrs<AxisAttrs>().axis);
  switch (x.dtype()) {
    case DType::kF32:
      return softmax_typed<float, kLog>(x, y, axis);
    case DType::kF64:
      return softmax_typed<double, kLog>(x, y, axis);
    default:
      unsupported_dtype(kOp.name, x.dtype());
  }
}

}  // namespace

void add_reduce_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cpu_kernel<&reduce_kernel<"reduce_sum", SumOp, true>>("reduce_sum"));
  table.push_back(cpu_kernel<&reduce_kernel<"reduce_mean", MeanOp, false>>("reduce_mean"));
  table.push_back(cpu_kernel<&reduce_kernel<"reduce_max", MaxOp, true>>("reduce_max"));
  table.push_back(cpu_kernel<&reduce_kernel<"reduce_min", MinOp, true>>("reduce_min"));
  table.push_back(cpu_kernel<&logsumexp_kernel>("logsumexp"));
  table.push_back(cpu_kernel<&argmax_kernel>("argmax"));
  table.push_back(cpu_kernel<&softmax_kernel<"softmax", false>>("softmax"));
  table.push_back(cpu_kernel<&softmax_kernel<"log_softmax", true>>("log_softmax"));
}

}  // namespace trainyard::cpu
