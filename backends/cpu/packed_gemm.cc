// PackedMatrix (packed_gemm.h): packing into 16-column panels and the 6 x 16 AVX2/FMA tile.
#include "packed_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "kernels_common.h"

namespace trainyard::cpu {
namespace {

constexpr int64_t kPanel = 16;  // columns per panel: two 8-float vectors
constexpr int64_t kTileRows = 6;

// c[r, 0..cols) (+)= acc of one tile row; a partial panel goes through a buffer.
__attribute__((target("avx2,fma"))) inline void store_row(float* c, __m256 lo, __m256 hi,
                                                          int64_t cols, bool accumulate) {
  if (cols == kPanel) {
    if (accumulate) {
      lo = _mm256_add_ps(lo, _mm256_loadu_ps(c));
      hi = _mm256_add_ps(hi, _mm256_loadu_ps(c + 8));
    }
    _mm256_storeu_ps(c, lo);
    _mm256_storeu_ps(c + 8, hi);
    return;
  }
  alignas(32) float row[kPanel];
  _mm256_store_ps(row, lo);
  _mm256_store_ps(row + 8, hi);
  for (int64_t j = 0; j < cols; ++j) c[j] = accumulate ? c[j] + row[j] : row[j];
}

// Rows [0, R) of a (leading dimension lda) times one panel (k x 16), into c (leading dimension
// ldc), `cols` of the panel's columns valid. 2R accumulators in named registers (GCC keeps an
// accumulator array on the stack and stores it back every iteration).
template <int R>
__attribute__((target("avx2,fma"))) void tile(const float* a, int64_t lda, const float* panel,
                                              int64_t k, float* c, int64_t ldc, int64_t cols,
                                              bool accumulate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float* a0 = a;
  for (int64_t p = 0; p < k; ++p) {
    const __m256 b0 = _mm256_load_ps(panel + p * kPanel);
    const __m256 b1 = _mm256_load_ps(panel + p * kPanel + 8);
    __m256 x = _mm256_broadcast_ss(a0 + p);
    c00 = _mm256_fmadd_ps(x, b0, c00);
    c01 = _mm256_fmadd_ps(x, b1, c01);
    if constexpr (R > 1) {
      x = _mm256_broadcast_ss(a0 + lda + p);
      c10 = _mm256_fmadd_ps(x, b0, c10);
      c11 = _mm256_fmadd_ps(x, b1, c11);
    }
    if constexpr (R > 2) {
      x = _mm256_broadcast_ss(a0 + 2 * lda + p);
      c20 = _mm256_fmadd_ps(x, b0, c20);
      c21 = _mm256_fmadd_ps(x, b1, c21);
    }
    if constexpr (R > 3) {
      x = _mm256_broadcast_ss(a0 + 3 * lda + p);
      c30 = _mm256_fmadd_ps(x, b0, c30);
      c31 = _mm256_fmadd_ps(x, b1, c31);
    }
    if constexpr (R > 4) {
      x = _mm256_broadcast_ss(a0 + 4 * lda + p);
      c40 = _mm256_fmadd_ps(x, b0, c40);
      c41 = _mm256_fmadd_ps(x, b1, c41);
    }
    if constexpr (R > 5) {
      x = _mm256_broadcast_ss(a0 + 5 * lda + p);
      c50 = _mm256_fmadd_ps(x, b0, c50);
      c51 = _mm256_fmadd_ps(x, b1, c51);
    }
  }
  store_row(c, c00, c01, cols, accumulate);
  if constexpr (R > 1) store_row(c + ldc, c10, c11, cols, accumulate);
  if constexpr (R > 2) store_row(c + 2 * ldc, c20, c21, cols, accumulate);
  if constexpr (R > 3) store_row(c + 3 * ldc, c30, c31, cols, accumulate);
  if constexpr (R > 4) store_row(c + 4 * ldc, c40, c41, cols, accumulate);
  if constexpr (R > 5) store_row(c + 5 * ldc, c50, c51, cols, accumulate);
}

__attribute__((target("avx2,fma"))) void panel_product(const float* a, int64_t m, int64_t k,
                                                       const float* panel, float* c, int64_t ldc,
                                                       int64_t cols, bool accumulate) {
  int64_t r = 0;
  for (; r + kTileRows <= m; r += kTileRows) {
    tile<kTileRows>(a + r * k, k, panel, k, c + r * ldc, ldc, cols, accumulate);
  }
  const float* ar = a + r * k;
  float* cr = c + r * ldc;
  switch (m - r) {
    case 5:
      return tile<5>(ar, k, panel, k, cr, ldc, cols, accumulate);
    case 4:
      return tile<4>(ar, k, panel, k, cr, ldc, cols, accumulate);
    case 3:
      return tile<3>(ar, k, panel, k, cr, ldc, cols, accumulate);
    case 2:
      return tile<2>(ar, k, panel, k, cr, ldc, cols, accumulate);
    case 1:
      return tile<1>(ar, k, panel, k, cr, ldc, cols, accumulate);
    default:
      return;
  }
}

}  // namespace

bool PackedMatrix::available() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

void PackedMatrix::Free::operator()(float* p) const { std::free(p); }

PackedMatrix::PackedMatrix(const float* b, int64_t k, int64_t n, bool transposed)
    : k_(k), n_(n), panels_((n + kPanel - 1) / kPanel) {
  const auto count = static_cast<std::size_t>(std::max<int64_t>(panels_ * k * kPanel, kPanel));
  const std::size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
  if (!data_) throw std::bad_alloc();
  float* out = data_.get();
#pragma omp parallel for schedule(static) if (k * n > kParallelThreshold)
  for (int64_t q = 0; q < panels_; ++q) {
    float* panel = out + q * k * kPanel;
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t col = q * kPanel + j;
        panel[p * kPanel + j] = col >= n ? 0.0f : transposed ? b[col * k + p] : b[p * n + col];
      }
    }
  }
}

void PackedMatrix::multiply(const float* a, int64_t m, float* c, bool accumulate) const {
  if (m == 0 || n_ == 0) return;
  const float* packed = data_.get();
#pragma omp parallel for schedule(static) if (m * n_ * k_ > kParallelThreshold)
  for (int64_t q = 0; q < panels_; ++q) {
    const int64_t cols = std::min(kPanel, n_ - q * kPanel);
    panel_product(a, m, k_, packed + q * k_ * kPanel, c + q * kPanel, n_, cols, accumulate);
    clear_upper_vector_state();
  }
}

}  // namespace trainyard::cpu
