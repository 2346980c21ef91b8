// The CUDA kernels of the reduce ops (core/src/ops/reduce.cc): reductions over axes, argmax,
// softmax and log-softmax, with the CPU backend's semantics (backends/cpu/kernels_reduce.cc):
// f32 sums accumulate in f64, i32 sums in i64 and i64 sums wrap (u64); max and min propagate
// NaN; argmax ranks NaN above every number and returns the first maximum; empty sums are 0,
// empty means NaN, empty maxima -inf.
//
// The input's dims are merged into groups (size-1 dims dropped, neighbours that are both
// reduced or both kept merged). When the innermost group is reduced, a group of threads
// reduces each output, its lanes striding over the output's elements; otherwise each block
// covers a tile of neighbouring outputs, its rows of threads striding over the reduced
// elements. Lanes combine in a fixed tree; an output with few neighbours and many elements is
// split into parts, reduced into a scratch buffer and combined in order by a second kernel.
// Every choice depends on the shapes alone, so reruns give the same bits.
#include <math_constants.h>

#include <cstdint>
#include <memory>
#include <type_traits>

#include "kernels.cuh"

namespace trainyard::cuda {
namespace {

// ---- Numeric helpers ----

__device__ float exp_of(float x) { return expf(x); }
__device__ double exp_of(double x) { return exp(x); }

template <class T>
__device__ bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}

// -inf (floats) or the lowest value (integers): the identity of max.
template <class T>
__device__ T lowest_value() {
  if constexpr (std::is_same_v<T, float>) {
    return -CUDART_INF_F;
  } else if constexpr (std::is_same_v<T, double>) {
    return -CUDART_INF;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return INT32_MIN;
  } else {
    return INT64_MIN;
  }
}

// +inf (floats) or the highest value (integers): the identity of min.
template <class T>
__device__ T highest_value() {
  if constexpr (std::is_same_v<T, float>) {
    return CUDART_INF_F;
  } else if constexpr (std::is_same_v<T, double>) {
    return CUDART_INF;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return INT32_MAX;
  } else {
    return INT64_MAX;
  }
}

// ---- Reductions ----
//
// Each reduction of T values gives: Acc init(); Acc element(x, r, m) for the element of
// reduced index r; Acc combine(a, b), where a holds elements before b's when the order matters;
// Out finish(acc, count, m). `m` is the output's value before the kernel runs: the maximum that
// the first pass of logsumexp left, read only where kReadsOutput.

template <class T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double,
                                  std::conditional_t<std::is_same_v<T, int64_t>, uint64_t,
                                                     int64_t>>;  // u64: i64 sums wrap

template <class T>
struct Sum {
  using Acc = SumAcc<T>;
  using Out = T;
  static constexpr bool kReadsOutput = false;
  __device__ static Acc init() { return Acc{0}; }
  __device__ static Acc element(T x, int64_t, T) { return static_cast<Acc>(x); }
  __device__ static Acc combine(Acc a, Acc b) { return a + b; }
  __device__ static T finish(Acc a, int64_t, T) { return static_cast<T>(a); }
};

template <class T>
struct Mean : Sum<T> {
  using Acc = typename Sum<T>::Acc;
  __device__ static T finish(Acc a, int64_t count, T) {
    return static_cast<T>(static_cast<double>(a) / static_cast<double>(count));  // 0/0: NaN
  }
};

template <class T, bool kMax>
struct Extremum {
  using Acc = T;
  using Out = T;
  static constexpr bool kReadsOutput = false;
  __device__ static T init() { return kMax ? lowest_value<T>() : highest_value<T>(); }
  __device__ static T element(T x, int64_t, T) { return x; }
  // b when it is beyond a or NaN: a NaN, once in, stays.
  __device__ static T combine(T a, T b) {
    const bool beyond = kMax ? b > a : b < a;
    return beyond || is_nan(b) ? b : a;
  }
  __device__ static T finish(T a, int64_t, T) { return a; }
};

template <class T>
using Max = Extremum<T, true>;
template <class T>
using Min = Extremum<T, false>;

// The second pass of logsumexp: the f64 sum of exp(x - m), then m + log(sum). A non-finite
// maximum m shifts by 0 instead, so all -inf gives -inf and +inf gives +inf.
template <class T>
struct ExpSum {
  using Acc = double;
  using Out = T;
  static constexpr bool kReadsOutput = true;
  __device__ static T shift(T m) { return isfinite(m) ? m : T(0); }
  __device__ static double init() { return 0.0; }
  __device__ static double element(T x, int64_t, T m) {
    return static_cast<double>(exp_of(x - shift(m)));
  }
  __device__ static double combine(double a, double b) { return a + b; }
  __device__ static T finish(double sum, int64_t, T m) {
    return static_cast<T>(static_cast<double>(shift(m)) + log(sum));
  }
};

// The index of the first maximum; NaN ranks above every number, so the first NaN wins.
template <class T>
struct ArgMax {
  struct Acc {
    T value;
    int64_t index;  // -1: no element yet
  };
  using Out = int64_t;
  static constexpr bool kReadsOutput = false;
  __device__ static bool greater(T a, T b) {
    if (is_nan(a)) return !is_nan(b);
    if (is_nan(b)) return false;
    return a > b;
  }
  __device__ static Acc init() { return {T(0), -1}; }
  __device__ static Acc element(T x, int64_t r, int64_t) { return {x, r}; }
  __device__ static Acc combine(Acc a, Acc b) {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    if (greater(b.value, a.value)) return b;
    if (greater(a.value, b.value)) return a;
    return b.index < a.index ? b : a;  // equal, or both NaN
  }
  __device__ static int64_t finish(Acc a, int64_t, int64_t) { return a.index; }
};

// Merged dims: each group's size and its stride in the input, outermost first.
struct Groups {
  int n = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};

  void add(int64_t s, int64_t st) {
    size[n] = s;
    stride[n] = st;
    ++n;
  }
};

// The input offset of element i (row-major) of the groups.
__device__ int64_t offset_of(const Groups& groups, int64_t i) {
  if (groups.n == 0) return 0;
  int64_t offset = 0;
  for (int g = groups.n - 1; g > 0; --g) {
    offset += (i % groups.size[g]) * groups.stride[g];
    i /= groups.size[g];
  }
  return offset + i * groups.stride[0];
}

// The input seen as kept and reduced groups. When the innermost group is reduced
// (last_reduced), output o reduces the `inner`-long contiguous runs at the offsets of
// `reduced`, from offset_of(kept, o). Otherwise the innermost group is kept: output
// row * inner + c reduces the elements at offset_of(kept, row) + offset_of(reduced, r) + c.
struct ReduceLayout {
  Groups kept;
  Groups reduced;
  int64_t inner = 1;
  bool last_reduced = true;
  int64_t count = 1;  // elements reduced into each output
};

ReduceLayout plan_reduce(const Shape& shape, uint32_t axis_mask) {
  int64_t size[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
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
  ReduceLayout layout;
  if (n == 0) return layout;  // one element
  int64_t stride[kMaxRank] = {};
  int64_t s = 1;
  for (int g = n - 1; g >= 0; --g) {
    stride[g] = s;
    s *= size[g];
    if (reduced[g]) layout.count *= size[g];
  }
  layout.last_reduced = reduced[n - 1];
  layout.inner = size[n - 1];
  for (int g = 0; g < n - 1; ++g) {
    (reduced[g] ? layout.reduced : layout.kept).add(size[g], stride[g]);
  }
  return layout;
}

// Combines the values in s of each set of `lanes` threads (a power of two) spaced `spacing`
// apart, in a fixed tree order; the set's first thread (lane 0) ends with the result in its
// slot. Every thread of the block calls it; it begins and ends with a barrier.
template <class Op>
__device__ void tree_combine(typename Op::Acc* s, int lane, int lanes, int spacing) {
  __syncthreads();
  for (int w = lanes / 2; w > 0; w /= 2) {
    if (lane < w) s[threadIdx.x] = Op::combine(s[threadIdx.x], s[threadIdx.x + w * spacing]);
    __syncthreads();
  }
}

// The innermost group is reduced. A group of `group` threads (a power of two dividing
// kThreads) takes unit u: part u % splits of output o = u / splits, the `chunk` reduced
// elements from (u % splits) * chunk; its lanes stride over them and combine in a tree. With
// one part the group writes y[o], else partial[u]. kContiguous: one run per output.
template <class Op, class T, bool kContiguous>
__global__ void reduce_rows_kernel(const T* x, typename Op::Out* y, typename Op::Acc* partial,
                                   Groups kept, Groups reduced, int64_t inner, int64_t count,
                                   int64_t outputs, int64_t splits, int64_t chunk, int group) {
  using Acc = typename Op::Acc;
  using Out = typename Op::Out;
  __shared__ Acc s[kThreads];
  const int lane = static_cast<int>(threadIdx.x) & (group - 1);
  const int64_t per_block = kThreads / group;
  const int64_t units = outputs * splits;
  const int64_t blocks = (units + per_block - 1) / per_block;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t u = b * per_block + threadIdx.x / group;
    const int64_t o = u / splits;
    Acc acc = Op::init();
    Out m{};
    if (u < units) {
      if constexpr (Op::kReadsOutput) m = y[o];
      const T* xo = x + offset_of(kept, o);
      const int64_t begin = (u % splits) * chunk;
      const int64_t end = min(count, begin + chunk);
      for (int64_t r = begin + lane; r < end; r += group) {
        const int64_t at = kContiguous ? r : offset_of(reduced, r / inner) + r % inner;
        acc = Op::combine(acc, Op::element(xo[at], r, m));
      }
    }
    s[threadIdx.x] = acc;
    tree_combine<Op>(s, lane, group, 1);
    if (u < units && lane == 0) {
      if (splits == 1) {
        y[o] = Op::finish(s[threadIdx.x], count, m);
      } else {
        partial[u] = s[threadIdx.x];
      }
    }
  }
}

// The innermost group (`width` outputs) is kept. A block of kThreads = bx * (kThreads / bx)
// threads takes unit u: part u % splits of the bx outputs from column tile * bx of output row
// `row`; thread (tx, ty) covers column tile * bx + tx and strides over the part's reduced
// elements from ty; each column's values combine in a tree over ty. With one part the block
// writes y, else partial[o * splits + part].
template <class Op, class T>
__global__ void reduce_columns_kernel(const T* x, typename Op::Out* y, typename Op::Acc* partial,
                                      Groups kept, Groups reduced, int64_t width, int64_t rows,
                                      int64_t count, int64_t splits, int64_t chunk, int bx) {
  using Acc = typename Op::Acc;
  using Out = typename Op::Out;
  __shared__ Acc s[kThreads];
  const int tx = static_cast<int>(threadIdx.x) % bx;
  const int ty = static_cast<int>(threadIdx.x) / bx;
  const int by = kThreads / bx;
  const int64_t tiles = (width + bx - 1) / bx;
  const int64_t units = rows * tiles * splits;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const int64_t part = u % splits;
    const int64_t tile = (u / splits) % tiles;
    const int64_t row = u / splits / tiles;
    const int64_t c = tile * bx + tx;
    const int64_t o = row * width + c;
    Acc acc = Op::init();
    Out m{};
    if (c < width) {
      if constexpr (Op::kReadsOutput) m = y[o];
      const T* xo = x + offset_of(kept, row) + c;
      const int64_t begin = part * chunk;
      const int64_t end = min(count, begin + chunk);
      for (int64_t r = begin + ty; r < end; r += by) {
        acc = Op::combine(acc, Op::element(xo[offset_of(reduced, r)], r, m));
      }
    }
    s[threadIdx.x] = acc;
    tree_combine<Op>(s, ty, by, bx);
    if (ty == 0 && c < width) {
      if (splits == 1) {
        y[o] = Op::finish(s[threadIdx.x], count, m);
      } else {
        partial[o * splits + part] = s[threadIdx.x];
      }
    }
  }
}

// The second pass of a split reduction: y[o] = finish(o's parts combined in order).
template <class Op>
__global__ void finish_parts_kernel(const typename Op::Acc* partial, typename Op::Out* y,
                                    int64_t outputs, int64_t splits, int64_t count) {
  TRAINYARD_GRID_LOOP(o, outputs) {
    typename Op::Acc acc = partial[o * splits];
    for (int64_t p = 1; p < splits; ++p) acc = Op::combine(acc, partial[o * splits + p]);
    typename Op::Out m{};
    if constexpr (Op::kReadsOutput) m = y[o];
    y[o] = Op::finish(acc, count, m);
  }
}

// Threads the GPU should have busy before a reduction splits its outputs (about 132 SMs of 2048
// threads), and the fewest elements a thread takes in one part.
constexpr int64_t kBusyThreads = int64_t{1} << 18;
constexpr int64_t kMinPerThread = 16;

// The smallest power of two, up to kThreads, with at least a quarter of `count` in it: the
// lanes of a group that reduces `count` elements.
int group_for(int64_t count) {
  int group = 1;
  while (group < kThreads && int64_t{group} * 4 < count) group *= 2;
  return group;
}

// Parts per output when `threads` threads (`lanes` of them per output) would run unsplit.
int64_t splits_for(int64_t threads, int64_t lanes, int64_t count) {
  if (threads >= kBusyThreads) return 1;
  return std::max<int64_t>(1, std::min(count / (lanes * kMinPerThread), kBusyThreads / threads));
}

// Reduces x (args.inputs[0]) over the axes of axis_mask into args.outputs[0] with Op.
template <class Op, class T>
void reduce_with(Backend& backend, const KernelArgs& args, uint32_t axis_mask) {
  using Acc = typename Op::Acc;
  using Out = typename Op::Out;
  const Tensor& input = args.inputs[0];
  const int64_t outputs = args.outputs[0].num_elements();
  if (outputs == 0) return;
  const ReduceLayout layout = plan_reduce(input.shape(), axis_mask);
  const int64_t count = layout.count;
  const T* x = data<T>(input);
  Out* y = data<Out>(args.outputs[0]);
  cudaStream_t stream = stream_of(args);

  int64_t splits;
  int lanes;  // rows: the group size; columns: the block's width in columns
  if (layout.last_reduced) {
    lanes = group_for(count);
    splits = splits_for(outputs * lanes, lanes, count);
  } else {
    lanes = 1;
    while (lanes < 32 && lanes < layout.inner) lanes *= 2;
    const int64_t tiles = (layout.inner + lanes - 1) / lanes;
    splits = splits_for(outputs / layout.inner * tiles * kThreads, kThreads / lanes, count);
  }
  const int64_t chunk = (count + splits - 1) / splits;
  if (chunk > 0) splits = (count + chunk - 1) / chunk;  // no empty parts

  std::shared_ptr<Storage> scratch;
  Acc* partial = nullptr;
  if (splits > 1) {
    scratch = backend.allocate(static_cast<std::size_t>(outputs * splits) * sizeof(Acc));
    partial = reinterpret_cast<Acc*>(static_cast<CudaStorage*>(scratch.get())->data());
  }
  if (layout.last_reduced) {
    const unsigned grid = blocks_for(outputs * splits, kThreads / lanes);
    if (layout.reduced.n == 0) {
      reduce_rows_kernel<Op, T, true>
          <<<grid, kThreads, 0, stream>>>(x, y, partial, layout.kept, layout.reduced, layout.inner,
                                          count, outputs, splits, chunk, lanes);
    } else {
      reduce_rows_kernel<Op, T, false>
          <<<grid, kThreads, 0, stream>>>(x, y, partial, layout.kept, layout.reduced, layout.inner,
                                          count, outputs, splits, chunk, lanes);
    }
  } else {
    const int64_t rows = outputs / layout.inner;
    const int64_t tiles = (layout.inner + lanes - 1) / lanes;
    reduce_columns_kernel<Op, T><<<blocks_for(rows * tiles * splits, 1), kThreads, 0, stream>>>(
        x, y, partial, layout.kept, layout.reduced, layout.inner, rows, count, splits, chunk,
        lanes);
  }
  check_launch(args.op);
  if (splits > 1) {
    finish_parts_kernel<Op>
        <<<blocks_for(outputs), kThreads, 0, stream>>>(partial, y, outputs, splits, count);
    check_launch(args.op);
  }
}

template <template <class> class OpT, DTypeSet kSet>
void reduce_kernel(Backend& backend, const KernelArgs& args) {
  const uint32_t mask = args.get_attrs<ReduceAttrs>().axis_mask;
  visit<kSet>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_with<OpT<T>, T>(backend, args, mask);
  });
}

// logsumexp: the maximum into the output, then the shifted sum of exponentials over it.
void logsumexp_kernel(Backend& backend, const KernelArgs& args) {
  const uint32_t mask = args.get_attrs<ReduceAttrs>().axis_mask;
  visit<DTypeSet::kFloat>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_with<Max<T>, T>(backend, args, mask);
    reduce_with<ExpSum<T>, T>(backend, args, mask);
  });
}

void argmax_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const auto axis = static_cast<std::size_t>(args.get_attrs<AxisAttrs>().axis);
  if (x.dtype() == DType::kBool) unsupported_dtype(args.op, x.dtype());
  visit<DTypeSet::kAll>(args.op, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (args.outputs[0].num_elements() == 0) return;
    if (x.shape()[axis] == 0) {
      throw InvalidArgument("argmax: cannot take the argmax of an empty axis of " +
                            x.description());
    }
    reduce_with<ArgMax<T>, T>(backend, args, 1u << axis);
  });
}

// ---- Softmax ----

// Softmax (kLog: log-softmax) of `rows` contiguous rows of n values: a group of `group`
// threads per row finds the maximum m and the f64 sum of exp(x - m) in fixed trees, then
// writes exp(x - m) * (1 / sum) (kLog: (x - m) - log(sum)).
template <class T, bool kLog>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t n, int group) {
  __shared__ T max_of[kThreads];
  __shared__ double sum_of[kThreads];
  const int lane = static_cast<int>(threadIdx.x) & (group - 1);
  const int base = static_cast<int>(threadIdx.x) - lane;
  const int64_t per_block = kThreads / group;
  const int64_t blocks = (rows + per_block - 1) / per_block;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t row = b * per_block + threadIdx.x / group;
    const bool active = row < rows;
    const T* xr = x + row * n;
    T* yr = y + row * n;
    T m = lowest_value<T>();
    if (active) {
      for (int64_t i = lane; i < n; i += group) m = Max<T>::combine(m, xr[i]);
    }
    max_of[threadIdx.x] = m;
    tree_combine<Max<T>>(max_of, lane, group, 1);
    m = max_of[base];
    double sum = 0.0;
    if (active) {
      for (int64_t i = lane; i < n; i += group) sum += static_cast<double>(exp_of(xr[i] - m));
    }
    sum_of[threadIdx.x] = sum;
    tree_combine<Sum<T>>(sum_of, lane, group, 1);
    sum = sum_of[base];
    if (active) {
      if constexpr (kLog) {
        const auto log_sum = static_cast<T>(log(sum));
        for (int64_t i = lane; i < n; i += group) yr[i] = (xr[i] - m) - log_sum;
      } else {
        const auto scale = static_cast<T>(1.0 / sum);
        for (int64_t i = lane; i < n; i += group) yr[i] = exp_of(xr[i] - m) * scale;
      }
    }
  }
}

// Softmax (kLog: log-softmax) along an axis of stride `inner`: one thread per (outer, inner)
// column walks its n values for the maximum, the f64 sum of exponentials and the outputs.
template <class T, bool kLog>
__global__ void softmax_columns_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  TRAINYARD_GRID_LOOP(k, outer * inner) {
    const int64_t start = (k / inner) * n * inner + k % inner;
    const T* xc = x + start;
    T* yc = y + start;
    T m = lowest_value<T>();
    for (int64_t j = 0; j < n; ++j) m = Max<T>::combine(m, xc[j * inner]);
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const T e = exp_of(xc[j * inner] - m);
      if constexpr (!kLog) yc[j * inner] = e;
      sum += static_cast<double>(e);
    }
    if constexpr (kLog) {
      const auto log_sum = static_cast<T>(log(sum));
      for (int64_t j = 0; j < n; ++j) yc[j * inner] = (xc[j * inner] - m) - log_sum;
    } else {
      const auto scale = static_cast<T>(1.0 / sum);
      for (int64_t j = 0; j < n; ++j) yc[j * inner] *= scale;
    }
  }
}

template <bool kLog>
void softmax_kernel(Backend&, const KernelArgs& args) {
  const Tensor& input = args.inputs[0];
  const auto axis = static_cast<std::size_t>(args.get_attrs<AxisAttrs>().axis);
  visit<DTypeSet::kFloat>(args.op, input.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (input.num_elements() == 0) return;
    const Shape& shape = input.shape();
    int64_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < axis; ++i) outer *= shape[i];
    for (std::size_t i = axis + 1; i < shape.rank(); ++i) inner *= shape[i];
    const int64_t n = shape[axis];
    const T* x = data<T>(input);
    T* y = data<T>(args.outputs[0]);
    cudaStream_t stream = stream_of(args);
    if (inner == 1) {
      const int group = group_for(n);
      softmax_rows_kernel<T, kLog>
          <<<blocks_for(outer, kThreads / group), kThreads, 0, stream>>>(x, y, outer, n, group);
    } else {
      softmax_columns_kernel<T, kLog>
          <<<blocks_for(outer * inner), kThreads, 0, stream>>>(x, y, outer, n, inner);
    }
    check_launch(args.op);
  });
}

}  // namespace

void add_reduce_kernels(std::vector<KernelRegistration>& table) {
  const KernelRegistration kernels[] = {
      cuda_kernel<&reduce_kernel<Sum, DTypeSet::kNumeric>>("reduce_sum"),
      cuda_kernel<&reduce_kernel<Mean, DTypeSet::kFloat>>("reduce_mean"),
      cuda_kernel<&reduce_kernel<Max, DTypeSet::kNumeric>>("reduce_max"),
      cuda_kernel<&reduce_kernel<Min, DTypeSet::kNumeric>>("reduce_min"),
      cuda_kernel<&logsumexp_kernel>("logsumexp"),
      cuda_kernel<&argmax_kernel>("argmax"),
      cuda_kernel<&softmax_kernel<false>>("softmax"),
      cuda_kernel<&softmax_kernel<true>>("log_softmax"),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cuda
