// Loss kernels (ops/loss.h): sigmoid cross entropy with logits and its gradient, elementwise;
// and fused kernels for the training step's memory-bound tail: the YouTube-8M cross entropy of
// probabilities and its gradient, and tf.nn.l2_loss. Each fused kernel is one pass over its
// inputs where the composed ops make ten or more.
//
// The f32 loops are compiled for AVX-512, AVX2 and baseline x86-64 (target_clones,
// kernels_common.h) and vectorize with `omp simd`, logarithm and exponential included (fast_log
// below, fast_exp_nonpositive in kernels_common.h). Sums accumulate in f64 over fixed chunks
// combined in a fixed order, so a result does not depend on the number of threads.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels_common.h"

namespace trainyard::cpu {
namespace {

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

// log(1 + e) for e in [0, 1] within a few ulp, vectorizable: the logarithm of u = 1 + e as
// rounded, times e / (u - 1), which corrects for that rounding (Goldberg's log1p); e itself
// where e is too small to change u.
inline float log1p_unit(float e) {
  const float u = 1.0f + e;
  const float d = u - 1.0f;
  return d == 0.0f ? e : fast_log(u) * (e / d);
}

// ---------------------------------------------------------------------------------------------
// Sigmoid cross entropy, (logits x, labels z[, dloss]) elementwise: max(x, 0) - x z +
// log(1 + exp(-|x|)), and dloss (sigmoid(x) - z). In f32 the exponential and logarithm are the
// vectorizable ones above (each within a few ulp of std::exp and std::log1p; exp(-|x|) is 0
// below -87.3, where it would be subnormal), over chunks of kChunk in parallel; in f64 std::'s.

TRAINYARD_MULTIVERSION
void sigmoid_cross_entropy_chunk_f32(const float* x, const float* z, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float e = fast_exp_nonpositive(-std::abs(x[i]));
    out[i] = (x[i] > 0.0f ? x[i] : 0.0f) - x[i] * z[i] + log1p_unit(e);
  }
}

TRAINYARD_MULTIVERSION
void sigmoid_cross_entropy_grad_chunk_f32(const float* x, const float* z, const float* dloss,
                                          float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float e = fast_exp_nonpositive(-std::abs(x[i]));
    const float s = 1.0f / (1.0f + e);
    out[i] = dloss[i] * ((x[i] >= 0.0f ? s : e * s) - z[i]);
  }
}

// Calls chunk(begin, size) over chunks of kChunk elements, in parallel when n is worth it.
template <class F>
void for_each_chunk(int64_t n, const F& chunk) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kCostlyThreshold)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk;
    chunk(begin, std::min(kChunk, n - begin));
    clear_upper_vector_state();
  }
}

void sigmoid_cross_entropy_kernel(Backend&, const KernelArgs& args) {
  const Tensor& logits = args.inputs[0];
  const int64_t n = logits.num_elements();
  switch (logits.dtype()) {
    case DType::kF32: {
      const float* x = data<float>(logits);
      const float* z = data<float>(args.inputs[1]);
      float* out = data<float>(args.outputs[0]);
      return for_each_chunk(n, [&](int64_t begin, int64_t size) {
        sigmoid_cross_entropy_chunk_f32(x + begin, z + begin, out + begin, size);
      });
    }
    case DType::kF64: {
      const double* x = data<double>(logits);
      const double* z = data<double>(args.inputs[1]);
      double* out = data<double>(args.outputs[0]);
#pragma omp parallel for if (n > kCostlyThreshold)
      for (int64_t i = 0; i < n; ++i) {
        out[i] = (x[i] > 0.0 ? x[i] : 0.0) - x[i] * z[i] + std::log1p(std::exp(-std::abs(x[i])));
      }
      return;
    }
    default:
      unsupported_dtype("sigmoid_cross_entropy_with_logits", logits.dtype());
  }
}

void sigmoid_cross_entropy_grad_kernel(Backend&, const KernelArgs& args) {
  const Tensor& logits = args.inputs[0];
  const int64_t n = logits.num_elements();
  switch (logits.dtype()) {
    case DType::kF32: {
      const float* x = data<float>(logits);
      const float* z = data<float>(args.inputs[1]);
      const float* dloss = data<float>(args.inputs[2]);
      float* out = data<float>(args.outputs[0]);
      return for_each_chunk(n, [&](int64_t begin, int64_t size) {
        sigmoid_cross_entropy_grad_chunk_f32(x + begin, z + begin, dloss + begin, out + begin,
                                             size);
      });
    }
    case DType::kF64: {
      const double* x = data<double>(logits);
      const double* z = data<double>(args.inputs[1]);
      const double* dloss = data<double>(args.inputs[2]);
      double* out = data<double>(args.outputs[0]);
#pragma omp parallel for if (n > kCostlyThreshold)
      for (int64_t i = 0; i < n; ++i) out[i] = dloss[i] * (stable_sigmoid(x[i]) - z[i]);
      return;
    }
    default:
      unsupported_dtype("sigmoid_cross_entropy_with_logits_grad", logits.dtype());
  }
}

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

// binary_cross_entropy_grad's term, and with kThroughSigmoid that term times sigmoid_grad's
// p (1 - p), in sigmoid_grad's order: the bits of the two kernels one after the other.
template <bool kThroughSigmoid, class T>
inline T bce_grad_of(T p, T y, T g, T eps) {
  const T dp = bce_grad_term(p, y, g, eps);
  if constexpr (kThroughSigmoid) {
    return dp * p * (T(1) - p);
  } else {
    return dp;
  }
}

TRAINYARD_MULTIVERSION
void bce_grad_row_f32(const float* p, const float* y, float g, float* out, int64_t cols,
                      float eps) {
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) out[c] = bce_grad_of<false>(p[c], y[c], g, eps);
}

TRAINYARD_MULTIVERSION
void bce_sigmoid_grad_row_f32(const float* p, const float* y, float g, float* out, int64_t cols,
                              float eps) {
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) out[c] = bce_grad_of<true>(p[c], y[c], g, eps);
}

template <bool kThroughSigmoid, class T>
void bce_grad_rows(const T* p, const T* y, const T* g, T* out, int64_t rows, int64_t cols, T eps) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    if constexpr (std::is_same_v<T, float>) {
      (kThroughSigmoid ? bce_sigmoid_grad_row_f32 : bce_grad_row_f32)(
          p + r * cols, y + r * cols, g[r], out + r * cols, cols, eps);
      clear_upper_vector_state();
    } else {
      for (int64_t c = 0; c < cols; ++c) {
        out[r * cols + c] =
            bce_grad_of<kThroughSigmoid>(p[r * cols + c], y[r * cols + c], g[r], eps);
      }
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

// binary_cross_entropy_grad, and with kThroughSigmoid binary_cross_entropy_sigmoid_grad.
template <bool kThroughSigmoid>
void binary_cross_entropy_grad_kernel(Backend&, const KernelArgs& args) {
  const Tensor& p = args.inputs[0];
  const double eps = static_cast<const ScalarAttrs*>(args.attrs)->a;
  int64_t rows, cols;
  rows_and_cols(p, &rows, &cols);
  switch (p.dtype()) {
    case DType::kF32:
      return bce_grad_rows<kThroughSigmoid, float>(
          data<float>(p), data<float>(args.inputs[1]), data<float>(args.inputs[2]),
          data<float>(args.outputs[0]), rows, cols, static_cast<float>(eps));
    case DType::kF64:
      return bce_grad_rows<kThroughSigmoid, double>(data<double>(p), data<double>(args.inputs[1]),
                                                    data<double>(args.inputs[2]),
                                                    data<double>(args.outputs[0]), rows, cols, eps);
    default:
      unsupported_dtype(args.op, p.dtype());
  }
}

// ---------------------------------------------------------------------------------------------
// Sums of squares (clip_by_norm in kernels_training.cc uses them too).

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

}  // namespace

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

namespace {

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

}  // namespace

void add_loss_kernels(std::vector<KernelRegistration>& table) {
  const KernelRegistration kernels[] = {
      cpu_kernel<&sigmoid_cross_entropy_kernel>("sigmoid_cross_entropy_with_logits"),
      cpu_kernel<&sigmoid_cross_entropy_grad_kernel>("sigmoid_cross_entropy_with_logits_grad"),
      cpu_kernel<&binary_cross_entropy_kernel>("binary_cross_entropy", kFusedComposite),
      cpu_kernel<&binary_cross_entropy_grad_kernel<false>>("binary_cross_entropy_grad",
                                                           kFusedComposite),
      cpu_kernel<&binary_cross_entropy_grad_kernel<true>>("binary_cross_entropy_sigmoid_grad",
                                                          kFusedComposite),
      cpu_kernel<&l2_loss_kernel>("l2_loss", kFusedComposite),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cpu
