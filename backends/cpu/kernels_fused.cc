// Fused kernels for the training step's memory-bound tail: the YouTube-8M cross entropy of
// probabilities and its gradient, tf.nn.l2_loss and tf.clip_by_norm. Each is one pass over its
// inputs (two for clipping: the norm, then the scale) where the composed ops make ten or more.
//
// The loops are compiled for AVX-512, AVX2 and baseline x86-64 (target_clones; the loader
// picks one per machine) and vectorize with `omp simd`, logarithm included (fast_log below).
// Sums accumulate in f64 over fixed chunks combined in a fixed order, so a result does not
// depend on the number of threads.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels.h"

namespace trainyard::cpu {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TRAINYARD_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))

// GCC (12) emits no vzeroupper on leaving a target_clones AVX/AVX-512 clone when the file is
// not itself compiled for AVX. The dirty upper vector state then slows every legacy-SSE
// instruction after it (measured: a baseline softmax loop 13x slower). Each call of a clone is
// followed by clear_upper_vector_state(), which runs vzeroupper where AVX exists.
__attribute__((target("avx"))) void vzeroupper_avx() { __builtin_ia32_vzeroupper(); }
const bool kHasAvx = __builtin_cpu_supports("avx");
inline void clear_upper_vector_state() {
  if (kHasAvx) vzeroupper_avx();
}
#else
#define TRAINYARD_MULTIVERSION
inline void clear_upper_vector_state() {}
#endif

// log(x) for normal, positive, finite floats, with a relative error under 1e-7 (Cephes'
// logf polynomial on [sqrt(1/2), sqrt(2))), written without calls or branches so loops over it
// vectorize. Callers check the domain (log_domain) and use std::log outside it.
inline float fast_log(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  int32_t e = static_cast<int32_t>(bits >> 23) - 127;
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  const bool high = m > 1.41421356f;
  m = high ? m * 0.5f : m;
  e = high ? e + 1 : e;
  const float f = m - 1.0f;
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  const float fe = static_cast<float>(e);
  float r = p * f * z;
  r += -2.12194440e-4f * fe;
  r += -0.5f * z;
  r = f + r;
  r += 0.693359375f * fe;
  return r;
}
inline double fast_log(double x) { return std::log(x); }
// 1 when fast_log(x) is exact enough, 0 for zero, negatives, subnormals, infinity and NaN.
inline int log_domain(float x) {
  return static_cast<int>(x >= std::numeric_limits<float>::min()) &
         static_cast<int>(x <= std::numeric_limits<float>::max());
}

// exp(x) for x <= 0 (softmax after subtracting the row's maximum) within about 1 ulp
// (Cephes' expf polynomial after reducing by multiples of ln 2), without calls, so loops over
// it vectorize; 0 below -87.3, where the float result would be subnormal.
inline float fast_exp_nonpositive(float x) {
  const bool tiny = x < -87.3f;
  const float xc = tiny ? -87.3f : x;
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
  return tiny ? 0.0f : e * scale;
}

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

// Elements per chunk of a sum: chunks, not threads, fix the order of additions.
constexpr int64_t kChunk = 1 << 16;

// ---------------------------------------------------------------------------------------------
// Binary cross entropy of probabilities, per row of `cols` classes.

template <class T, class Log>
inline T bce_term(T p, T y, T eps, Log log) {
  const T positive = y * log(p + eps);
  const T one_minus_p = -p + T(1);
  const T negative = (-y + T(1)) * log(one_minus_p + eps);
  return -(positive + negative);
}

// The multiversioned loops are leaf functions called from the parallel regions: GCC outlines
// an OpenMP region into a function of its own, which target_clones would not cover.
TRAINYARD_MULTIVERSION
float bce_row_f32(const float* p, const float* y, int64_t cols, float eps) {
  double sum = 0.0;
  int outside = 0;
  const auto fast = [](float x) { return fast_log(x); };
#pragma omp simd reduction(+ : sum, outside)
  for (int64_t c = 0; c < cols; ++c) {
    sum += static_cast<double>(bce_term(p[c], y[c], eps, fast));
    outside += 2 - log_domain(p[c] + eps) - log_domain((-p[c] + 1.0f) + eps);
  }
  if (outside != 0) {  // a prediction outside [0, 1] or not finite: std::log's answer
    sum = 0.0;
    const auto exact = [](float x) { return std::log(x); };
    for (int64_t c = 0; c < cols; ++c) sum += static_cast<double>(bce_term(p[c], y[c], eps, exact));
  }
  return static_cast<float>(sum);
}

void bce_rows_f32(const float* p, const float* y, float* out, int64_t rows, int64_t cols,
                  float eps) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelThreshold / 8)
  for (int64_t r = 0; r < rows; ++r) {
    out[r] = bce_row_f32(p + r * cols, y + r * cols, cols, eps);
    clear_upper_vector_state();
  }
}

void bce_rows_f64(const double* p, const double* y, double* out, int64_t rows, int64_t cols,
                  double eps) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelThreshold / 8)
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    const auto log = [](double x) { return std::log(x); };
    for (int64_t c = 0; c < cols; ++c) sum += bce_term(p[r * cols + c], y[r * cols + c], eps, log);
    out[r] = sum;
  }
}

template <class T>
inline T bce_grad_term(T p, T y, T g, T eps) {
  return g * ((-y + T(1)) / ((-p + T(1)) + eps) - y / (p + eps));
}

TRAINYARD_MULTIVERSION
void bce_grad_row_f32(const float* p, const float* y, float g, float* out, int64_t cols,
                      float eps) {
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) out[c] = bce_grad_term(p[c], y[c], g, eps);
}

void bce_grad_rows_f32(const float* p, const float* y, const float* g, float* out, int64_t rows,
                       int64_t cols, float eps) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    bce_grad_row_f32(p + r * cols, y + r * cols, g[r], out + r * cols, cols, eps);
    clear_upper_vector_state();
  }
}

void bce_grad_rows_f64(const double* p, const double* y, const double* g, double* out, int64_t rows,
                       int64_t cols, double eps) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      out[r * cols + c] = bce_grad_term(p[r * cols + c], y[r * cols + c], g[r], eps);
    }
  }
}

// Rows and classes of a [..., C] tensor.
void rows_and_cols(const Tensor& t, int64_t* rows, int64_t* cols) {
  *cols = t.shape()[t.shape().rank() - 1];
  *rows = 1;
  for (std::size_t d = 0; d + 1 < t.shape().rank(); ++d) *rows *= t.shape()[d];
}

void binary_cross_entropy_kernel(Backend&, const KernelArgs& args) {
  const Tensor& p = args.inputs[0];
  const double eps = static_cast<const ScalarAttrs*>(args.attrs)->a;
  int64_t rows, cols;
  rows_and_cols(p, &rows, &cols);
  switch (p.dtype()) {
    case DType::kF32:
      return bce_rows_f32(data<float>(p), data<float>(args.inputs[1]), data<float>(args.outputs[0]),
                          rows, cols, static_cast<float>(eps));
    case DType::kF64:
      return bce_rows_f64(data<double>(p), data<double>(args.inputs[1]),
                          data<double>(args.outputs[0]), rows, cols, eps);
    default:
      unsupported_dtype("binary_cross_entropy", p.dtype());
  }
}

void binary_cross_entropy_grad_kernel(Backend&, const KernelArgs& args) {
  const Tensor& p = args.inputs[0];
  const double eps = static_cast<const ScalarAttrs*>(args.attrs)->a;
  int64_t rows, cols;
  rows_and_cols(p, &rows, &cols);
  switch (p.dtype()) {
    case DType::kF32:
      return bce_grad_rows_f32(data<float>(p), data<float>(args.inputs[1]),
                               data<float>(args.inputs[2]), data<float>(args.outputs[0]), rows,
                               cols, static_cast<float>(eps));
    case DType::kF64:
      return bce_grad_rows_f64(data<double>(p), data<double>(args.inputs[1]),
                               data<double>(args.inputs[2]), data<double>(args.outputs[0]), rows,
                               cols, eps);
    default:
      unsupported_dtype("binary_cross_entropy_grad", p.dtype());
  }
}

// ---------------------------------------------------------------------------------------------
// Sums of squares, and clipping by the norm.

TRAINYARD_MULTIVERSION
double sum_of_squares_chunk_f32(const float* x, int64_t n) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(x[i]);
    sum += v * v;
  }
  return sum;
}

double sum_of_squares_f32(const float* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk, end = std::min(n, begin + kChunk);
    partial[static_cast<std::size_t>(k)] = sum_of_squares_chunk_f32(x + begin, end - begin);
    clear_upper_vector_state();
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

double sum_of_squares_f64(const double* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk, end = std::min(n, begin + kChunk);
    double sum = 0.0;
    for (int64_t i = begin; i < end; ++i) sum += x[i] * x[i];
    partial[static_cast<std::size_t>(k)] = sum;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

void l2_loss_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const int64_t n = x.num_elements();
  switch (x.dtype()) {
    case DType::kF32:
      *data<float>(args.outputs[0]) = static_cast<float>(sum_of_squares_f32(data<float>(x), n) / 2);
      return;
    case DType::kF64:
      *data<double>(args.outputs[0]) = sum_of_squares_f64(data<double>(x), n) / 2;
      return;
    default:
      unsupported_dtype("l2_loss", x.dtype());
  }
}

TRAINYARD_MULTIVERSION
void scale_chunk_f32(const float* x, float* out, int64_t n, float s) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

void scale_f32(const float* x, float* out, int64_t n, float s) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk;
    scale_chunk_f32(x + begin, out + begin, std::min(kChunk, n - begin), s);
    clear_upper_vector_state();
  }
}

void clip_by_norm_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const double clip = static_cast<const ScalarAttrs*>(args.attrs)->a;
  const int64_t n = x.num_elements();
  switch (x.dtype()) {
    case DType::kF32: {
      // tf.clip_by_norm in x's type: clip / max(norm, clip), the norm rounded to f32 first.
      const float norm = static_cast<float>(std::sqrt(sum_of_squares_f32(data<float>(x), n)));
      const float c = static_cast<float>(clip);
      return scale_f32(data<float>(x), data<float>(args.outputs[0]), n, c / std::max(norm, c));
    }
    case DType::kF64: {
      const double norm = std::sqrt(sum_of_squares_f64(data<double>(x), n));
      const double s = clip / std::max(norm, clip);
      const double* in = data<double>(x);
      double* out = data<double>(args.outputs[0]);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) out[i] = in[i] * s;
      return;
    }
    default:
      unsupported_dtype("clip_by_norm", x.dtype());
  }
}

}  // namespace

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

void add_fused_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(
      cpu_kernel<&binary_cross_entropy_kernel>("binary_cross_entropy", kFusedComposite));
  table.push_back(
      cpu_kernel<&binary_cross_entropy_grad_kernel>("binary_cross_entropy_grad", kFusedComposite));
  table.push_back(cpu_kernel<&l2_loss_kernel>("l2_loss", kFusedComposite));
  table.push_back(cpu_kernel<&clip_by_norm_kernel>("clip_by_norm", kFusedComposite));
}

}  // namespace trainyard::cpu
