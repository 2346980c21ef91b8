// What the CPU kernels share: typed access to tensor memory, dtype dispatch, and the
// registration functions each kernel file provides (collected by cpu_backend.cc).
//
// Kernels receive tensors that the core has checked and allocated (op.h); they may assume the
// documented shapes and dtypes, and throw Unimplemented for a dtype they do not support.
// Loops over many elements are parallelised with OpenMP, which oneDNN also uses here, so both
// share one thread pool sized by the backend's num_threads.
#ifndef TRAINYARD_BACKENDS_CPU_KERNELS_H_
#define TRAINYARD_BACKENDS_CPU_KERNELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cpu_backend.h"
#include "trainyard/error.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard::cpu {

// The first element of `t`, typed. `t` must be on a CPU backend (the core guarantees it).
template <class T>
T* data(const Tensor& t) {
  return reinterpret_cast<T*>(static_cast<CpuStorage*>(t.storage().get())->data() +
                              t.byte_offset());
}

[[noreturn]] inline void unsupported_dtype(OpId op, DType dtype) {
  throw Unimplemented(std::string("op ") + op_name(op) + " has no " + dtype_name(dtype) +
                      " kernel on cpu");
}

// Below this many elements a loop runs on one thread.
inline constexpr int64_t kParallelThreshold = 1 << 15;

// Registration functions, one per kernel file.
void add_elementwise_kernels(std::vector<KernelRegistration>& table);  // kernels_elementwise.cc
void add_reduce_and_shape_kernels(std::vector<KernelRegistration>& table);  // kernels_shape.cc
void add_nn_kernels(std::vector<KernelRegistration>& table);
void add_fused_kernels(std::vector<KernelRegistration>& table);  // kernels_fused.cc
// Softmax of f32 rows of 2 to 5 or 8 values (MoeModel's gates), vectorized across rows
// (kernels_fused.cc); false when it did not handle the input (another width, NaN or +inf).
bool softmax_small_rows_f32(const float* x, float* y, int64_t rows, int64_t n);  // kernels_nn.cc (oneDNN)

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_KERNELS_H_
