// What the kernels of several op families share (kernels_<family>.cc): dtype dispatch, the
// cost thresholds of elementwise loops, parallel ranges and index walks (reductions and data
// movement), and the multiversioned loops of the fused kernels. kernels.h has what every kernel
// needs.
#ifndef TRAINYARD_BACKENDS_CPU_KERNELS_COMMON_H_
#define TRAINYARD_BACKENDS_CPU_KERNELS_COMMON_H_

#include <omp.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels.h"

namespace trainyard::cpu {

// Transcendental loops cost tens of cycles per element; they go parallel sooner.
inline constexpr int64_t kCostlyThreshold = kParallelThreshold / 8;

// ---------------------------------------------------------------------------------------------
// Dtype dispatch: calls f(Tag<T>{}) with the C++ type of `dtype`, or throws Unimplemented
// (trainyard/kernel_utils.h, shared with the CUDA backend).
using kernel_utils::DTypeSet;
using kernel_utils::Tag;

template <DTypeSet kSet, class F>
void visit(const char* op, DType dtype, F&& f) {
  kernel_utils::visit_dtype<kSet>(op, dtype, "cpu", static_cast<F&&>(f));
}

// Sigmoid without overflow (the sigmoid op, and the gradient of sigmoid cross entropy).
template <class T>
T stable_sigmoid(T x) {
  const T e = std::exp(-std::abs(x));
  const T s = T(1) / (T(1) + e);
  return x >= T(0) ? s : e * s;
}

// exp(x) for x <= 0 (softmax after subtracting the row's maximum, sigmoid of -|x|) within about
// 1 ulp (Cephes' expf polynomial after reducing by multiples of ln 2), without calls, so loops
// over it vectorize; 0 below -87.3, where the float result would be subnormal. A NaN comes back
// as itself: the polynomial runs on 0 instead, so that no NaN reaches the integer conversion of
// the exponent (undefined behaviour).
inline float fast_exp_nonpositive(float x) {
  const bool nan = x != x;
  const bool tiny = x < -87.3f;
  const float xc = tiny ? -87.3f : (nan ? 0.0f : x);
  const float n = std::floor(xc * 1.44269504088896341f + 0.5f);
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const float scale =
      std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  return nan ? x : (tiny ? 0.0f : e * scale);
}

// f32 sigmoid: stable_sigmoid's formula with fast_exp_nonpositive. NaN stays NaN; -inf and
// +inf give 0 and 1.
inline float fast_sigmoid(float x) {
  const float e = fast_exp_nonpositive(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

// ---------------------------------------------------------------------------------------------
// Parallel ranges and index walks: reductions (kernels_reduce.cc) and data movement
// (kernels_array.cc).

// Calls fn(begin, end) on disjoint ranges covering [0, count), one per thread when `work`
// (elements touched) is worth it. Ranges depend on the thread count; callers keep results
// independent of them.
template <class F>
void parallel_ranges(int64_t count, int64_t work, const F& fn) {
  if (count <= 0) return;
  if (count > 1 && work > kParallelThreshold) {
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads();
      const int64_t thread = omp_get_thread_num();
      const int64_t begin = count * thread / threads;
      const int64_t end = count * (thread + 1) / threads;
      if (begin < end) fn(begin, end);
    }
  } else {
    fn(int64_t{0}, count);
  }
}

// Walks a row-major index space of up to kMaxRank dims, keeping two linear offsets (one per
// stride set) up to date.
struct Odometer {
  int rank = 0;
  std::array<int64_t, kMaxRank + 1> size{};
  std::array<int64_t, kMaxRank + 1> stride{};
  std::array<int64_t, kMaxRank + 1> stride2{};
  std::array<int64_t, kMaxRank + 1> index{};
  int64_t offset = 0;
  int64_t offset2 = 0;

  void add(int64_t dim_size, int64_t dim_stride, int64_t dim_stride2 = 0) {
    size[rank] = dim_size;
    stride[rank] = dim_stride;
    stride2[rank] = dim_stride2;
    ++rank;
  }
  int64_t count() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= size[d];
    return n;
  }
  void seek(int64_t linear) {
    offset = 0;
    offset2 = 0;
    for (int d = rank - 1; d >= 0; --d) {
      index[d] = linear % size[d];
      linear /= size[d];
      offset += index[d] * stride[d];
      offset2 += index[d] * stride2[d];
    }
  }
  void next() {
    for (int d = rank - 1; d >= 0; --d) {
      offset += stride[d];
      offset2 += stride2[d];
      if (++index[d] < size[d]) return;
      offset -= stride[d] * size[d];
      offset2 -= stride2[d] * size[d];
      index[d] = 0;
    }
  }
};

using kernel_utils::product;

// a > b with NaN above everything (a strict weak order).
template <class T>
bool greater(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

// ---------------------------------------------------------------------------------------------
// Multiversioned loops: the softmax of narrow rows (kernels_reduce.cc) and the fused kernels
// (kernels_loss.cc, kernels_training.cc) compile their innermost loops for AVX-512, AVX2 and
// baseline x86-64 (target_clones; the loader picks one per machine).

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TRAINYARD_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))

// GCC (12) emits no vzeroupper on leaving a target_clones AVX/AVX-512 clone when the file is
// not itself compiled for AVX. The dirty upper vector state then slows every legacy-SSE
// instruction after it (measured: a baseline softmax loop 13x slower). Each call of a clone is
// followed by clear_upper_vector_state(), which runs vzeroupper where AVX exists.
__attribute__((target("avx"))) inline void vzeroupper_avx() { __builtin_ia32_vzeroupper(); }
inline const bool kHasAvx = __builtin_cpu_supports("avx");
inline void clear_upper_vector_state() {
  if (kHasAvx) vzeroupper_avx();
}
#else
#define TRAINYARD_MULTIVERSION
inline void clear_upper_vector_state() {}
#endif

// Elements per chunk of the fused loops' sums (and scales): chunks, not threads, fix the order of
// additions.
inline constexpr int64_t kChunk = 1 << 16;

// The sum of x[i]^2 in f64, over chunks of kChunk added in order (kernels_loss.cc; clip_by_norm
// in kernels_training.cc uses them too).
double sum_of_squares_f32(const float* x, int64_t n);
double sum_of_squares_f64(const double* x, int64_t n);

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_KERNELS_COMMON_H_
