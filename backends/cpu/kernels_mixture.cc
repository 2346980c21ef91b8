// MoeModel's gated mixture (the core's composites, ops/nn.h), one pass over the rows each way:
//
//   moe_mixture            (gate_logits [N, M + 1], expert_logits [N, M]) -> p [N],
//                          p = sum_{j<M} g_j e_j with g = softmax(gate_logits row),
//                          e = sigmoid(expert_logits row);
//   moe_mixture_grad       (gate_logits, expert_logits, dp [N]) -> (d gate_logits,
//                          d expert_logits): dg_i = dp g_i (e_i - p) with e_M = 0 (the dummy
//                          expert), de_j = dp g_j e_j (1 - e_j); g, e and p recomputed.
//
// The unfused ops make about a dozen passes over [N, M + 1]-sized tensors each way (softmax,
// sigmoid, slice, mul, reduce_sum and their gradients, with pad and sub). f32 rows of M = 1 to 4
// or 8 are walked together (vectorized across rows, fast_exp_nonpositive as the softmax of
// narrow rows uses it); other widths and f64 take a scalar loop with std::exp. NaN propagates
// to the row's results.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels_common.h"

namespace trainyard::cpu {
namespace {

constexpr int64_t kRowsPerChunk = 4096;

template <int kM>
TRAINYARD_MULTIVERSION void mixture_rows_f32(const float* a, const float* b, float* p,
                                             int64_t rows) {
#pragma omp simd
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = a + r * (kM + 1);
    const float* br = b + r * kM;
    float m = ar[0];
#pragma GCC unroll 9
    for (int i = 1; i <= kM; ++i) m = ar[i] > m ? ar[i] : m;
    float sum = 0.0f, mixed = 0.0f;
#pragma GCC unroll 9
    for (int i = 0; i <= kM; ++i) {
      const float g = fast_exp_nonpositive(ar[i] - m);
      sum += g;
      if (i < kM) mixed += g * fast_sigmoid(br[i]);
    }
    p[r] = mixed / sum;
  }
}

template <int kM>
TRAINYARD_MULTIVERSION void mixture_grad_rows_f32(const float* a, const float* b, const float* dp,
                                                  float* da, float* db, int64_t rows) {
#pragma omp simd
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = a + r * (kM + 1);
    const float* br = b + r * kM;
    float m = ar[0];
#pragma GCC unroll 9
    for (int i = 1; i <= kM; ++i) m = ar[i] > m ? ar[i] : m;
    float g[kM + 1], e[kM];
    float sum = 0.0f;
#pragma GCC unroll 9
    for (int i = 0; i <= kM; ++i) {
      g[i] = fast_exp_nonpositive(ar[i] - m);
      sum += g[i];
    }
    const float inv = 1.0f / sum;
    float p = 0.0f;
#pragma GCC unroll 9
    for (int i = 0; i < kM; ++i) {
      g[i] *= inv;
      e[i] = fast_sigmoid(br[i]);
      p += g[i] * e[i];
    }
    g[kM] *= inv;
    const float d = dp[r];
#pragma GCC unroll 9
    for (int i = 0; i < kM; ++i) {
      da[r * (kM + 1) + i] = d * g[i] * (e[i] - p);
      db[r * kM + i] = d * g[i] * e[i] * (1.0f - e[i]);
    }
    da[r * (kM + 1) + kM] = -(d * g[kM] * p);
  }
}

// Any width, f32 or f64: one row at a time.
template <class T>
void mixture_rows_generic(const T* a, const T* b, const T* dp, T* p, T* da, T* db, int64_t m,
                          int64_t begin, int64_t end) {
  std::vector<T> g(static_cast<std::size_t>(m + 1)), e(static_cast<std::size_t>(m));
  for (int64_t r = begin; r < end; ++r) {
    const T* ar = a + r * (m + 1);
    const T* br = b + r * m;
    T top = ar[0];
    for (int64_t i = 1; i <= m; ++i) top = ar[i] > top ? ar[i] : top;
    T sum = 0;
    for (int64_t i = 0; i <= m; ++i) {
      g[static_cast<std::size_t>(i)] = std::exp(ar[i] - top);
      sum += g[static_cast<std::size_t>(i)];
    }
    T mixed = 0;
    for (int64_t i = 0; i <= m; ++i) {
      g[static_cast<std::size_t>(i)] /= sum;
      if (i < m) {
        e[static_cast<std::size_t>(i)] = stable_sigmoid(br[i]);
        mixed += g[static_cast<std::size_t>(i)] * e[static_cast<std::size_t>(i)];
      }
    }
    if (p != nullptr) {
      p[r] = mixed;
      continue;
    }
    const T d = dp[r];
    for (int64_t i = 0; i < m; ++i) {
      const T gi = g[static_cast<std::size_t>(i)], ei = e[static_cast<std::size_t>(i)];
      da[r * (m + 1) + i] = d * gi * (ei - mixed);
      db[r * m + i] = d * gi * ei * (T(1) - ei);
    }
    da[r * (m + 1) + m] = -(d * g[static_cast<std::size_t>(m)] * mixed);
  }
}

template <int kM>
void mixture_f32(const float* a, const float* b, const float* dp, float* p, float* da, float* db,
                 int64_t rows) {
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
#pragma omp parallel for schedule(static) if (rows * (kM + 1) > kCostlyThreshold)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kRowsPerChunk;
    const int64_t count = std::min(kRowsPerChunk, rows - begin);
    if (p != nullptr) {
      mixture_rows_f32<kM>(a + begin * (kM + 1), b + begin * kM, p + begin, count);
    } else {
      mixture_grad_rows_f32<kM>(a + begin * (kM + 1), b + begin * kM, dp + begin,
                                da + begin * (kM + 1), db + begin * kM, count);
    }
    clear_upper_vector_state();
  }
}

// p is set for the mixture, da and db for its gradient.
template <class T>
void mixture(const T* a, const T* b, const T* dp, T* p, T* da, T* db, int64_t rows, int64_t m) {
  if constexpr (std::is_same_v<T, float>) {
    switch (m) {
      case 1:
        return mixture_f32<1>(a, b, dp, p, da, db, rows);
      case 2:
        return mixture_f32<2>(a, b, dp, p, da, db, rows);
      case 3:
        return mixture_f32<3>(a, b, dp, p, da, db, rows);
      case 4:
        return mixture_f32<4>(a, b, dp, p, da, db, rows);
      case 8:
        return mixture_f32<8>(a, b, dp, p, da, db, rows);
      default:
        break;
    }
  }
  parallel_ranges(rows, rows * (m + 1) * 8, [&](int64_t begin, int64_t end) {
    mixture_rows_generic<T>(a, b, dp, p, da, db, m, begin, end);
  });
}

// Inputs as the composites' infer checked them: a [N, M + 1], b [N, M], one float dtype.
template <bool kGrad>
void mixture_kernel(Backend&, const KernelArgs& args) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const int64_t rows = a.shape()[0];
  const int64_t m = b.shape()[1];
  visit<DTypeSet::kFloat>(kGrad ? "moe_mixture_grad" : "moe_mixture", a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kGrad) {
      mixture<T>(data<T>(a), data<T>(b), data<T>(args.inputs[2]), nullptr, data<T>(args.outputs[0]),
                 data<T>(args.outputs[1]), rows, m);
    } else {
      mixture<T>(data<T>(a), data<T>(b), nullptr, data<T>(args.outputs[0]), nullptr, nullptr, rows,
                 m);
    }
  });
}

}  // namespace

void add_mixture_kernels(std::vector<KernelRegistration>& table) {
  const KernelRegistration kernels[] = {
      cpu_kernel<&mixture_kernel<false>>("moe_mixture", kFusedComposite),
      cpu_kernel<&mixture_kernel<true>>("moe_mixture_grad", kFusedComposite),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cpu
