// What every CPU kernel needs: typed access to tensor memory, op names as template arguments,
// the registration of a kernel, and the registration function each kernel file provides
// (collected by cpu_backend.cc). Helpers that only some families share are in
// kernels_common.h (and kernels_dnnl.h for the oneDNN kernels).
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
#include "trainyard/kernel_utils.h"
#include "trainyard/op.h"
#include "trainyard/ops.h"  // the families' attribute structs
#include "trainyard/ops/families.h"
#include "trainyard/tensor.h"

namespace trainyard::cpu {

// The first element of `t`, typed. `t` must be on a CPU backend (the core guarantees it).
template <class T>
T* data(const Tensor& t) {
  return reinterpret_cast<T*>(static_cast<CpuStorage*>(t.storage().get())->data() +
                              t.byte_offset());
}

[[noreturn]] inline void unsupported_dtype(const char* op, DType dtype) {
  kernel_utils::unsupported_dtype(op, dtype, "cpu");
}

// An op's name as a template argument, so one kernel template serves several ops:
// unary_kernel<"exp", ExpOp>. Converts to the name; compares with a name at compile time.
template <std::size_t N>
struct OpLabel {
  consteval OpLabel(const char (&s)[N]) {  // NOLINT: implicit from a literal, by design
    for (std::size_t i = 0; i < N; ++i) name[i] = s[i];
  }
  constexpr operator const char*() const { return name; }  // NOLINT
  template <std::size_t M>
  constexpr bool operator==(const char (&other)[M]) const {
    if (M != N) return false;
    for (std::size_t i = 0; i < N; ++i) {
      if (name[i] != other[i]) return false;
    }
    return true;
  }
  char name[N];
};

// Runs a kernel with OpenMP sized to the backend's num_threads (cpu_backend.cc).
void set_omp_threads(const CpuBackend& backend);
template <KernelFn F>
void threaded(Backend& backend, const KernelArgs& args) {
  set_omp_threads(static_cast<const CpuBackend&>(backend));
  F(backend, args);
}

// A registration of kernel F for `op`, run with the backend's thread count.
template <KernelFn F>
constexpr KernelRegistration cpu_kernel(const char* op, uint32_t flags = 0) {
  return {op, &threaded<F>, flags};
}

// Below this many elements a loop runs on one thread.
inline constexpr int64_t kParallelThreshold = 1 << 15;

// Registration functions, one per op family whose row in TRAINYARD_OP_FAMILIES
// (trainyard/ops/families.h) says the cpu has kernels: kernels_<family>.cc defines
// add_<family>_kernels, registering the kernels of the ops that core/src/engine/ops/<family>.cc
// declares (and of the composites it fuses). cpu_backend.cc calls them all.
#define TRAINYARD_CPU_ADD_KERNELS_DECL_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF(cpu, void add_##family##_kernels(std::vector<KernelRegistration>& table);)
TRAINYARD_OP_FAMILIES(TRAINYARD_CPU_ADD_KERNELS_DECL_)
#undef TRAINYARD_CPU_ADD_KERNELS_DECL_
// The batch norm ops (part of the nn family, registered by add_nn_kernels) and the fused
// kernels of pkg/layers' batch norm + activation composites.
void add_batch_norm_kernels(std::vector<KernelRegistration>& table);

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_KERNELS_H_
