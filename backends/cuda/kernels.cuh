// What every CUDA kernel file (kernels_<family>.cu) shares: typed device pointers, the stream a
// kernel queues on, dtype dispatch, launch configuration, launch checks and the registration
// of a kernel. The semantics of each op are the core's (core/src/ops/<family>.cc, op.h); the
// CPU backend (backends/cpu) is the reference they are checked against in the conformance
// suite.
//
// Every kernel queues its work on the stream it is given and returns; it never synchronises.
// Results do not depend on timing: no floating-point atomics (reductions are one block per
// output, or two passes), so a rerun reproduces every bit.
#ifndef TRAINYARD_BACKENDS_CUDA_KERNELS_CUH_
#define TRAINYARD_BACKENDS_CUDA_KERNELS_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_backend.h"
#include "trainyard/error.h"
#include "trainyard/kernel_utils.h"
#include "trainyard/op.h"
#include "trainyard/ops.h"  // the families' attribute structs
#include "trainyard/ops/families.h"
#include "trainyard/tensor.h"

namespace trainyard::cuda {

// The first element of `t` on the device, typed. `t` lives on this backend (the core checks).
template <class T>
T* data(const Tensor& t) {
  return reinterpret_cast<T*>(static_cast<CudaStorage*>(t.storage().get())->data() +
                              t.byte_offset());
}

inline CudaBackend& cuda_backend(Backend& backend) { return static_cast<CudaBackend&>(backend); }

// The CUDA stream the kernel's work goes on.
inline cudaStream_t stream_of(const KernelArgs& args) {
  return static_cast<CudaStream*>(args.stream)->handle();
}

[[noreturn]] inline void unsupported_dtype(const char* op, DType dtype) {
  kernel_utils::unsupported_dtype(op, dtype, "cuda");
}

// Throws Error naming the op when the last launch on this thread failed to start (bad
// configuration, no kernel image for this GPU). Errors inside a running kernel surface at the
// next synchronisation (CudaStream::synchronize).
inline void check_launch(const char* op) {
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw Error(std::string("cuda: op ") + op + ": kernel launch failed: " +
                cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

// ---------------------------------------------------------------------------------------------
// Dtype dispatch: calls f(Tag<T>{}) with the C++ type of `dtype`, or throws Unimplemented
// (trainyard/kernel_utils.h, shared with the CPU backend).
using kernel_utils::DTypeSet;
using kernel_utils::Tag;

template <DTypeSet kSet, class F>
void visit(const char* op, DType dtype, F&& f) {
  kernel_utils::visit_dtype<kSet>(op, dtype, "cuda", static_cast<F&&>(f));
}

// ---------------------------------------------------------------------------------------------
// Launch configuration.

inline constexpr int kThreads = 256;
// Grid-stride loops cover any count with at most this many blocks.
inline constexpr int64_t kMaxBlocks = 65535;

// Blocks of kThreads for `n` elements of a grid-stride loop (at least 1).
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, kMaxBlocks));
}

// for (i = ...; i < n; i += stride) over the whole grid.
#define TRAINYARD_GRID_LOOP(i, n)                                                        \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Device memory for one kernel's work, from the backend's caching allocator (none for 0
// bytes). Backend::allocate takes a block of the current stream, the one the kernel queues on
// (the core passes it as KernelArgs::stream), so the scratch may be dropped once its work is
// queued: the allocator hands the block only to work queued after that work on the same stream.
class Scratch {
 public:
  Scratch(Backend& backend, std::size_t bytes)
      : storage_(bytes == 0 ? nullptr : backend.allocate(bytes)) {}
  void* get() const {
    return storage_ ? static_cast<CudaStorage*>(storage_.get())->data() : nullptr;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(get());
  }

 private:
  std::shared_ptr<Storage> storage_;
};

// A shape's dims and row-major strides, by value into a kernel (up to kMaxRank dims).
struct Dims {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};
};

inline Dims dims_of(const Shape& shape) {
  Dims d;
  d.rank = static_cast<int>(shape.rank());
  int64_t s = 1;
  for (int i = d.rank - 1; i >= 0; --i) {
    d.size[i] = shape[static_cast<std::size_t>(i)];
    d.stride[i] = s;
    s *= d.size[i];
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// Indices out of range (cuda_backend.h's IndexFault): a kernel that finds one calls
// note_bad_index; the op then queues record_index_fault, and the next synchronisation throws.

#ifdef __CUDACC__
__device__ inline void note_bad_index(IndexFault* fault, int64_t position) {
  atomicMin(&fault->pending, static_cast<unsigned long long>(position));
}

template <class I>
__global__ void record_index_fault_kernel(IndexFault* fault, const I* indices, const char* op,
                                          int64_t axis, int64_t dim) {
  if (fault->pending == IndexFault::kNone) return;
  if (fault->op == nullptr) {
    fault->position = static_cast<long long>(fault->pending);
    fault->index = static_cast<long long>(indices[fault->pending]);
    fault->axis = axis;
    fault->dim = dim;
    fault->op = op;
  }
  fault->pending = IndexFault::kNone;
}

// Queued after a kernel that called note_bad_index for these indices.
template <class I>
void record_index_fault(Backend& backend, const KernelArgs& args, const I* indices, int64_t axis,
                        int64_t dim) {
  record_index_fault_kernel<I><<<1, 1, 0, stream_of(args)>>>(
      static_cast<CudaBackend&>(backend).index_fault(), indices, args.op, axis, dim);
  check_launch(args.op);
}
#endif

// ---------------------------------------------------------------------------------------------
// Registration.

// Runs kernel F on the backend's device, remembering the op on its stream for error messages.
template <KernelFn F>
void on_device(Backend& backend, const KernelArgs& args) {
  cuda_backend(backend).require_device();
  static_cast<CudaStream*>(args.stream)->set_last_op(args.op);
  F(backend, args);
}

template <KernelFn F>
constexpr KernelRegistration cuda_kernel(const char* op, uint32_t flags = 0) {
  return {op, &on_device<F>, flags};
}

// Registration functions, one per op family whose row in TRAINYARD_OP_FAMILIES
// (trainyard/ops/families.h) says cuda has kernels: kernels_<family>.cu (kernels_detection.cc:
// non-max suppression, on the host, as that file says) defines add_<family>_kernels,
// registering the kernels of the ops that core/src/engine/ops/<family>.cc declares.
// cuda_backend.cc calls them all.
#define TRAINYARD_CUDA_ADD_KERNELS_DECL_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF(cuda, void add_##family##_kernels(std::vector<KernelRegistration>& table);)
TRAINYARD_OP_FAMILIES(TRAINYARD_CUDA_ADD_KERNELS_DECL_)
#undef TRAINYARD_CUDA_ADD_KERNELS_DECL_
// The convolutions of the nn family (kernels_conv.cu), registered by add_nn_kernels.
void add_conv_kernels(std::vector<KernelRegistration>& table);

}  // namespace trainyard::cuda

#endif  // TRAINYARD_BACKENDS_CUDA_KERNELS_CUH_
