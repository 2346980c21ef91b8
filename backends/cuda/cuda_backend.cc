// The CUDA backend: device memory on one GPU through the CUDA runtime. The library asks never
// to be unloaded, since unloading the CUDA runtime while the process lives is unsafe.
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>

#include "trainyard/backend.h"
#include "trainyard/error.h"
#include "trainyard/plugin.h"

namespace trainyard::cuda {
namespace {

void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw Error("cuda: " + what + ": " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ")");
  }
}

class CudaBackend;

class CudaStorage final : public Storage {
 public:
  CudaStorage(std::shared_ptr<CudaBackend> backend, void* data, std::size_t bytes)
      : backend_(std::move(backend)), data_(data), bytes_(bytes) {}
  ~CudaStorage() override;
  std::size_t size_bytes() const override { return bytes_; }
  Backend& backend() const override;
  std::byte* data() const { return static_cast<std::byte*>(data_); }

 private:
  std::shared_ptr<CudaBackend> backend_;
  void* data_;
  std::size_t bytes_;
};

class CudaBackend final : public Backend {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"device_index", OptionType::kInt, "0", "which GPU (cuda:N)"},
  };

  explicit CudaBackend(const Options& options)
      : device_(static_cast<int>(options.get_int("device_index"))) {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
      throw Unimplemented(
          "cuda: no usable CUDA device (" +
          std::string(status == cudaSuccess ? "0 devices" : cudaGetErrorString(status)) + ")");
    }
    if (device_ < 0 || device_ >= count) {
      throw InvalidArgument("cuda: device_index " + std::to_string(device_) + " is out of range; " +
                            std::to_string(count) + " device(s) present");
    }
  }

  std::string device_name() const override { return "cuda:" + std::to_string(device_); }

  std::shared_ptr<Storage> allocate(std::size_t bytes) override {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    void* data = nullptr;
    if (bytes > 0) check_cuda(cudaMalloc(&data, bytes), "cudaMalloc of " + std::to_string(bytes));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.bytes_in_use += bytes;
      ++stats_.system_allocations;
    }
    return std::make_shared<CudaStorage>(std::static_pointer_cast<CudaBackend>(shared_from_this()),
                                         data, bytes);
  }

  void release(void* data, std::size_t bytes) {
    if (data != nullptr) cudaFree(data);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.bytes_in_use -= bytes;
  }

  void copy_from_host(Storage& storage, std::size_t offset, const void* src,
                      std::size_t bytes) override {
    const CudaStorage& s = checked(storage, offset, bytes, "copy_from_host");
    check_cuda(cudaMemcpy(s.data() + offset, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }

  void copy_to_host(const Storage& storage, std::size_t offset, void* dst,
                    std::size_t bytes) override {
    const CudaStorage& s = checked(storage, offset, bytes, "copy_to_host");
    check_cuda(cudaMemcpy(dst, s.data() + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

  void synchronize() override { check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
  std::span<const KernelRegistration> kernels() const override { return {}; }
  AllocatorStats allocator_stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  const CudaStorage& checked(const Storage& storage, std::size_t offset, std::size_t bytes,
                             const char* what) const {
    const auto* s = dynamic_cast<const CudaStorage*>(&storage);
    if (s == nullptr || &s->backend() != this) {
      throw InvalidArgument(std::string("cuda: ") + what + " was given storage of device " +
                            storage.backend().device_name() + ", not " + device_name());
    }
    if (offset > s->size_bytes() || bytes > s->size_bytes() - offset) {
      throw InvalidArgument(std::string("cuda: ") + what + " of " + std::to_string(bytes) +
                            " bytes at offset " + std::to_string(offset) + " overruns storage of " +
                            std::to_string(s->size_bytes()) + " bytes");
    }
    return *s;
  }

  int device_;
  mutable std::mutex mutex_;
  AllocatorStats stats_;
};

CudaStorage::~CudaStorage() { backend_->release(data_, bytes_); }
Backend& CudaStorage::backend() const { return *backend_; }

}  // namespace
}  // namespace trainyard::cuda

#define TRAINYARD_CUDA_CLASSES(X) \
  X(backend, cuda, trainyard::cuda::CudaBackend, "Device memory on one NVIDIA GPU (CUDA runtime)")
TRAINYARD_PLUGIN_WITH_FLAGS(cuda_backend, 0, 1, 0, trainyard::kPluginNeverUnload,
                            TRAINYARD_CUDA_CLASSES)
