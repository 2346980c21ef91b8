// The CUDA backend's device types, shared by its kernels (kernels.cuh).
//
// A CudaBackend owns one GPU: device memory from a caching allocator (device_allocator.h),
// non-blocking streams and events, pinned host staging, and per-thread cuBLAS and cuDNN
// handles. Kernels are queued on KernelArgs::stream and return at once; a failure inside a
// kernel surfaces at the next synchronisation, naming the last op queued on that stream.
//
// Every kernel is deterministic (no floating-point atomics; convolutions as cuBLAS GEMMs or
// cuDNN's deterministic algorithms), so a rerun reproduces every bit, as on the CPU; with
// `autotune` off each convolution's method is the same in every process, so a resumed run
// does too.
//
// Created on a machine without a usable GPU it still lists its kernels (`trainyard plugins
// describe cuda`); everything that touches the device then throws Unimplemented saying why.
#ifndef TRAINYARD_BACKENDS_CUDA_CUDA_BACKEND_H_
#define TRAINYARD_BACKENDS_CUDA_CUDA_BACKEND_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device_allocator.h"
#include "trainyard/backend.h"
#include "trainyard/options.h"

namespace trainyard::cuda {

// Throws Error("cuda: <what>: <name> (<description>)") unless `status` is cudaSuccess.
void check_cuda(cudaError_t status, const std::string& what);
void check_cublas(cublasStatus_t status, const std::string& what);
void check_cudnn(cudnnStatus_t status, const std::string& what);

class CudaBackend;

class CudaStorage final : public Storage {
 public:
  CudaStorage(std::shared_ptr<CudaBackend> backend, void* data, std::size_t bytes,
              std::size_t block_size, uintptr_t stream)
      : backend_(std::move(backend)),
        data_(data),
        bytes_(bytes),
        block_size_(block_size),
        stream_(stream) {}
  ~CudaStorage() override;
  std::size_t size_bytes() const override { return bytes_; }
  Backend& backend() const override;
  std::byte* data() const { return static_cast<std::byte*>(data_); }
  // Device memory of the backend's GPU (the SDK's native-memory accessor, tensor.h).
  NativeMemory native_memory() const override;

 private:
  std::shared_ptr<CudaBackend> backend_;
  void* data_;
  std::size_t bytes_;
  std::size_t block_size_;
  uintptr_t stream_;
};

// An index out of range found by a kernel (gather, scatter_add), which cannot throw: the
// kernel notes the lowest bad position in `pending`, a one-thread kernel queued after it on the
// same stream records that index with the op, and the next synchronisation reads the record
// back and throws InvalidArgument naming them. Lives in device memory (atomics on host memory
// mapped into the device are not supported everywhere).
struct IndexFault {
  static constexpr unsigned long long kNone = ~0ull;
  unsigned long long pending = kNone;  // lowest bad position of the kernel running now
  long long position = 0;              // recorded: the position, its index, the axis
  long long index = 0;
  long long axis = 0;
  long long dim = 0;
  const char* op = nullptr;  // the op's name (host memory); null: nothing recorded
};

class CudaStream final : public Stream {
 public:
  CudaStream(CudaBackend& backend, std::shared_ptr<CudaBackend> keep_alive);
  ~CudaStream() override;
  Backend& backend() const override;
  void synchronize() override;
  cudaStream_t handle() const { return stream_; }
  // The cudaStream_t, for NCCL and other libraries that queue their own work (stream.h).
  NativeStream native_stream() const override { return {DeviceKind::kCuda, stream_}; }
  // The op whose work was queued last, named when a later synchronisation finds an error.
  void set_last_op(const char* op) { last_op_.store(op, std::memory_order_relaxed); }
  const char* last_op() const { return last_op_.load(std::memory_order_relaxed); }

 private:
  CudaBackend* backend_;
  std::shared_ptr<CudaBackend> keep_alive_;  // null for the backend's own default stream
  cudaStream_t stream_ = nullptr;
  std::atomic<const char*> last_op_{"(none)"};
};

class CudaBackend final : public Backend {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"device_index", OptionType::kInt, "0", "which GPU (cuda:N)"},
      {"autotune", OptionType::kBool, "true",
       "choose each convolution's method on first use by timing the GEMM path against cuDNN's "
       "fastest deterministic algorithm (as TF_CUDNN_USE_AUTOTUNE); false: GEMMs for filter "
       "gradients and cuDNN's heuristic choice elsewhere, the same in every process, so a "
       "resumed run reproduces every bit"},
  };

  explicit CudaBackend(const Options& options);
  ~CudaBackend() override;

  std::string device_name() const override { return "cuda:" + std::to_string(device_); }
  std::shared_ptr<Storage> allocate(std::size_t bytes) override;
  void copy_from_host(Storage& storage, std::size_t offset, const void* src,
                      std::size_t bytes) override;
  void copy_to_host(const Storage& storage, std::size_t offset, void* dst,
                    std::size_t bytes) override;
  void synchronize() override;
  std::span<const KernelRegistration> kernels() const override { return kernels_; }
  AllocatorStats allocator_stats() const override;

  Stream& default_stream() override;
  std::shared_ptr<Stream> create_stream() override;
  std::shared_ptr<Event> create_event() override;
  void copy_device_to_device(const Storage& src, std::size_t src_offset, Storage& dst,
                             std::size_t dst_offset, std::size_t bytes, Stream& stream) override;
  void copy_from_host_async(Storage& storage, std::size_t offset, const void* src,
                            std::size_t bytes, Stream& stream) override;
  void copy_to_host_async(const Storage& storage, std::size_t offset, void* dst, std::size_t bytes,
                          Stream& stream) override;
  std::unique_ptr<HostBuffer> allocate_host_staging(std::size_t bytes) override;

  // Returns every cached block to the device.
  void empty_cache();

  // Throws Unimplemented naming why when there is no usable device; makes it current.
  void require_device() const;
  int device() const { return device_; }
  bool autotune() const { return autotune_; }
  void release(void* data, std::size_t block_size, uintptr_t stream);

  // The calling thread's cuBLAS and cuDNN handles for this device, bound to `stream`.
  cublasHandle_t cublas(cudaStream_t stream);
  cudnnHandle_t cudnn(cudaStream_t stream);

  // The fault record for a kernel about to be queued (marking that the next synchronisation
  // must read it back), and that check after a synchronisation: throws InvalidArgument for a
  // recorded fault, then clears it.
  IndexFault* index_fault() {
    fault_check_ = true;
    return fault_;
  }
  void throw_recorded_fault();

  // The stream `stream` is, checked to be one of this backend's.
  CudaStream& cuda_stream(Stream& stream, const char* what) const;

 private:
  class Memory;
  std::shared_ptr<CudaBackend> self();

  int device_;
  bool autotune_;
  std::string no_device_;  // why there is no usable device; empty when there is one
  std::unique_ptr<Memory> memory_;
  std::unique_ptr<DeviceCachingAllocator> allocator_;
  IndexFault* fault_ = nullptr;
  std::atomic<bool> fault_check_{false};  // a kernel that may record a fault was queued
  std::once_flag default_stream_once_;
  std::unique_ptr<CudaStream> default_stream_;
  std::vector<KernelRegistration> kernels_;
};

}  // namespace trainyard::cuda

#endif  // TRAINYARD_BACKENDS_CUDA_CUDA_BACKEND_H_
