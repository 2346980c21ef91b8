// A right-hand matrix packed once for many products with few rows: c [m, n] (+)= a [m, k] b.
//
// The recurrent kernels multiply the same kernel matrix by a [B, U] state at every one of T
// steps (kernels_rnn.cc). A general sgemm packs that matrix again on every call, which at 32
// rows costs as much as the arithmetic (dnnl_sgemm reaches about a fifth of the FMA peak on
// [32, 512] x [512, 2048] here). PackedMatrix packs it once into panels of 16 columns, and each
// product runs an AVX2/FMA micro-kernel of 6 rows x 16 columns over whole panels, the panels
// split between the threads.
//
// Only on machines with AVX2 and FMA (available()); elsewhere callers use dnnl_sgemm.
#ifndef TRAINYARD_BACKENDS_CPU_PACKED_GEMM_H_
#define TRAINYARD_BACKENDS_CPU_PACKED_GEMM_H_

#include <cstdint>
#include <memory>

namespace trainyard::cpu {

class PackedMatrix {
 public:
  // Whether this machine runs the micro-kernel (AVX2 and FMA).
  static bool available();

  // Packs b [k, n] (row-major), or, with `transposed`, the transpose of b given as [n, k].
  PackedMatrix(const float* b, int64_t k, int64_t n, bool transposed);

  // c [m, n] = a [m, k] times the packed matrix, plus c's values when `accumulate`; a and c
  // row-major with leading dimensions k and n. Runs on the OpenMP threads.
  void multiply(const float* a, int64_t m, float* c, bool accumulate) const;

  int64_t rows() const { return k_; }
  int64_t cols() const { return n_; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  int64_t k_, n_, panels_;
  std::unique_ptr<float, Free> data_;  // panels_ x k_ x 16, 64-byte aligned, zero-padded
};

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_PACKED_GEMM_H_
