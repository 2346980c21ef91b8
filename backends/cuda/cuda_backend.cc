// The CUDA backend: device memory, streams, events and transfers on one GPU through the CUDA
// runtime, and the kernel table of kernels_<family>.cu. The library asks never to be unloaded,
// since unloading the CUDA runtime while the process lives is unsafe.
#include "cuda_backend.h"

#include <map>
#include <utility>

#include "kernels.cuh"
#include "trainyard/error.h"
#include "trainyard/plugin.h"

namespace trainyard::cuda {

void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw Error("cuda: " + what + ": " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ")");
  }
}

void check_cublas(cublasStatus_t status, const std::string& what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error("cuda: " + what + ": cuBLAS " + cublasGetStatusName(status) + " (" +
                cublasGetStatusString(status) + ")");
  }
}

void check_cudnn(cudnnStatus_t status, const std::string& what) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw Error("cuda: " + what + ": cuDNN " + cudnnGetErrorString(status));
  }
}

namespace {

// The device each thread last made current, so kernels set it only when it changes.
thread_local int t_current_device = -1;

class CudaEvent final : public Event {
 public:
  CudaEvent(std::shared_ptr<CudaBackend> backend) : backend_(std::move(backend)) {
    check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  void record(Stream& stream) override {
    check_cuda(cudaEventRecord(event_, backend_->cuda_stream(stream, "Event::record").handle()),
               "cudaEventRecord");
  }
  void wait(Stream& stream) override {
    check_cuda(
        cudaStreamWaitEvent(backend_->cuda_stream(stream, "Event::wait").handle(), event_, 0),
        "cudaStreamWaitEvent");
  }
  void synchronize() override {
    check_cuda(cudaEventSynchronize(event_), "cudaEventSynchronize on " + backend_->device_name());
  }
  bool query() override {
    cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) return false;
    check_cuda(status, "cudaEventQuery on " + backend_->device_name());
    return true;
  }

 private:
  std::shared_ptr<CudaBackend> backend_;
  cudaEvent_t event_ = nullptr;
};

class PinnedBuffer final : public HostBuffer {
 public:
  PinnedBuffer(std::shared_ptr<CudaBackend> backend, std::size_t bytes)
      : backend_(std::move(backend)), bytes_(bytes) {
    check_cuda(cudaHostAlloc(&data_, bytes == 0 ? 1 : bytes, cudaHostAllocDefault),
               "cudaHostAlloc of " + std::to_string(bytes) + " pinned bytes");
  }
  ~PinnedBuffer() override { cudaFreeHost(data_); }
  void* data() const override { return data_; }
  std::size_t size_bytes() const override { return bytes_; }

 private:
  std::shared_ptr<CudaBackend> backend_;
  void* data_ = nullptr;
  std::size_t bytes_;
};

// Per-thread library handles, one per device; never destroyed (the library is never unloaded,
// and destroying handles at thread exit races with the runtime's own teardown).
struct Handles {
  std::map<int, cublasHandle_t> cublas;
  std::map<int, cudnnHandle_t> cudnn;
};
thread_local Handles t_handles;

}  // namespace

// Raw device memory for the caching allocator.
class CudaBackend::Memory final : public DeviceMemory {
 public:
  explicit Memory(CudaBackend& backend) : backend_(backend) {}
  void* allocate(std::size_t bytes) override {
    void* block = nullptr;
    cudaError_t status = cudaMalloc(&block, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clears the error, which is not sticky
      return nullptr;
    }
    check_cuda(status, "cudaMalloc of " + std::to_string(bytes) + " bytes");
    return block;
  }
  void free(void* block) override { cudaFree(block); }
  void synchronize() override { cudaDeviceSynchronize(); }
  std::string name() const override { return "cuda: " + backend_.device_name(); }

 private:
  CudaBackend& backend_;
};

CudaStream::CudaStream(CudaBackend& backend, std::shared_ptr<CudaBackend> keep_alive)
    : backend_(&backend), keep_alive_(std::move(keep_alive)) {
  backend.require_device();
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}

CudaStream::~CudaStream() {
  // Blocks cached for this stream may be handed to a later stream with the same address:
  // its work must be over first.
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

Backend& CudaStream::backend() const { return *backend_; }

void CudaStream::synchronize() {
  cudaError_t status = cudaStreamSynchronize(stream_);
  if (status != cudaSuccess) {
    throw Error("cuda: work queued on a stream of " + backend_->device_name() +
                " failed (the last op queued there: " + last_op() +
                "): " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
  backend_->throw_recorded_fault();
}

CudaBackend::CudaBackend(const Options& options)
    : device_(static_cast<int>(options.get_int("device_index"))),
      autotune_(options.get_bool("autotune")) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    no_device_ = "cuda: no usable CUDA device (" +
                 std::string(status == cudaSuccess ? "0 devices" : cudaGetErrorString(status)) +
                 ")";
  } else if (device_ < 0 || device_ >= count) {
    throw InvalidArgument("cuda: device_index " + std::to_string(device_) + " is out of range; " +
                          std::to_string(count) + " device(s) present");
  }
  if (no_device_.empty()) {
    require_device();
    void* fault = nullptr;
    check_cuda(cudaMalloc(&fault, sizeof(IndexFault)), "cudaMalloc of the index fault record");
    const IndexFault none;
    check_cuda(cudaMemcpy(fault, &none, sizeof(IndexFault), cudaMemcpyHostToDevice),
               "clearing the index fault record");
    fault_ = static_cast<IndexFault*>(fault);
  }
  memory_ = std::make_unique<Memory>(*this);
  allocator_ = std::make_unique<DeviceCachingAllocator>(*memory_);
  // Every family's kernels (kernels.cuh), in the order of TRAINYARD_OP_FAMILIES.
#define TRAINYARD_CUDA_ADD_KERNELS_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF(cuda, add_##family##_kernels(kernels_);)
  TRAINYARD_OP_FAMILIES(TRAINYARD_CUDA_ADD_KERNELS_)
#undef TRAINYARD_CUDA_ADD_KERNELS_
}

CudaBackend::~CudaBackend() {
  if (no_device_.empty()) {
    default_stream_.reset();
    allocator_.reset();
    cudaFree(fault_);
  }
}

void CudaBackend::throw_recorded_fault() {
  if (!fault_check_.exchange(false)) return;
  IndexFault f;
  check_cuda(cudaMemcpy(&f, fault_, sizeof(IndexFault), cudaMemcpyDeviceToHost),
             "reading the index fault record");
  if (f.op == nullptr) return;
  const IndexFault none;
  check_cuda(cudaMemcpy(fault_, &none, sizeof(IndexFault), cudaMemcpyHostToDevice),
             "clearing the index fault record");
  throw InvalidArgument(std::string(f.op) + ": index " + std::to_string(f.index) + " (position " +
                        std::to_string(f.position) + " of the indices) is out of range for axis " +
                        std::to_string(f.axis) + " of dimension " + std::to_string(f.dim) +
                        "; valid indices are 0 to " + std::to_string(f.dim - 1) + " (on " +
                        device_name() + ")");
}

void CudaBackend::require_device() const {
  if (!no_device_.empty()) throw Unimplemented(no_device_);
  if (t_current_device != device_) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
    t_current_device = device_;
  }
}

std::shared_ptr<CudaBackend> CudaBackend::self() {
  return std::static_pointer_cast<CudaBackend>(shared_from_this());
}

Stream& CudaBackend::default_stream() {
  require_device();
  std::call_once(default_stream_once_,
                 [this] { default_stream_ = std::make_unique<CudaStream>(*this, nullptr); });
  return *default_stream_;
}

std::shared_ptr<Stream> CudaBackend::create_stream() {
  return std::make_shared<CudaStream>(*this, self());
}

std::shared_ptr<Event> CudaBackend::create_event() {
  require_device();
  return std::make_shared<CudaEvent>(self());
}

CudaStream& CudaBackend::cuda_stream(Stream& stream, const char* what) const {
  auto* s = dynamic_cast<CudaStream*>(&stream);
  if (s == nullptr || &s->backend() != this) {
    throw InvalidArgument(std::string("cuda: ") + what + " was given a stream of " +
                          stream.backend().device_name() + ", not of " + device_name());
  }
  return *s;
}

std::shared_ptr<Storage> CudaBackend::allocate(std::size_t bytes) {
  require_device();
  const auto stream =
      reinterpret_cast<uintptr_t>(static_cast<CudaStream&>(current_stream()).handle());
  std::size_t block_size = 0;
  void* data = allocator_->allocate(bytes, stream, &block_size);
  return std::make_shared<CudaStorage>(self(), data, bytes, block_size, stream);
}

void CudaBackend::release(void* data, std::size_t block_size, uintptr_t stream) {
  allocator_->release(data, block_size, stream);
}

void CudaBackend::empty_cache() {
  if (no_device_.empty()) allocator_->empty_cache();
}

AllocatorStats CudaBackend::allocator_stats() const { return allocator_->stats(); }

namespace {

const CudaStorage& checked(const CudaBackend& backend, const Storage& storage, std::size_t offset,
                           std::size_t bytes, const char* what) {
  const auto* s = dynamic_cast<const CudaStorage*>(&storage);
  if (s == nullptr || &s->backend() != &backend) {
    throw InvalidArgument(std::string("cuda: ") + what + " was given storage of device " +
                          storage.backend().device_name() + ", not " + backend.device_name());
  }
  if (offset > s->size_bytes() || bytes > s->size_bytes() - offset) {
    throw InvalidArgument(std::string("cuda: ") + what + " of " + std::to_string(bytes) +
                          " bytes at offset " + std::to_string(offset) + " overruns storage of " +
                          std::to_string(s->size_bytes()) + " bytes");
  }
  return *s;
}

}  // namespace

void CudaBackend::copy_from_host(Storage& storage, std::size_t offset, const void* src,
                                 std::size_t bytes) {
  require_device();
  const CudaStorage& s = checked(*this, storage, offset, bytes, "copy_from_host");
  if (bytes == 0) return;
  auto& stream = static_cast<CudaStream&>(current_stream());
  check_cuda(
      cudaMemcpyAsync(s.data() + offset, src, bytes, cudaMemcpyHostToDevice, stream.handle()),
      "cudaMemcpyAsync to " + device_name());
  stream.set_last_op("copy_from_host");
  stream.synchronize();
}

void CudaBackend::copy_to_host(const Storage& storage, std::size_t offset, void* dst,
                               std::size_t bytes) {
  require_device();
  const CudaStorage& s = checked(*this, storage, offset, bytes, "copy_to_host");
  if (bytes == 0) return;
  synchronize();  // whatever stream writes the storage
  auto& stream = static_cast<CudaStream&>(current_stream());
  check_cuda(
      cudaMemcpyAsync(dst, s.data() + offset, bytes, cudaMemcpyDeviceToHost, stream.handle()),
      "cudaMemcpyAsync from " + device_name());
  stream.set_last_op("copy_to_host");
  stream.synchronize();
}

void CudaBackend::synchronize() {
  require_device();
  cudaError_t status = cudaDeviceSynchronize();
  if (status != cudaSuccess) {
    const char* last = default_stream_ ? default_stream_->last_op() : "(none)";
    throw Error("cuda: work queued on " + device_name() +
                " failed (the last op queued on its default stream: " + last +
                "): " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
  throw_recorded_fault();
}

void CudaBackend::copy_device_to_device(const Storage& src, std::size_t src_offset, Storage& dst,
                                        std::size_t dst_offset, std::size_t bytes, Stream& stream) {
  require_device();
  const CudaStorage& s = checked(*this, src, src_offset, bytes, "copy_device_to_device");
  const CudaStorage& d = checked(*this, dst, dst_offset, bytes, "copy_device_to_device");
  CudaStream& cs = cuda_stream(stream, "copy_device_to_device");
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(d.data() + dst_offset, s.data() + src_offset, bytes,
                             cudaMemcpyDeviceToDevice, cs.handle()),
             "cudaMemcpyAsync on " + device_name());
  cs.set_last_op("copy_device_to_device");
}

void CudaBackend::copy_from_host_async(Storage& storage, std::size_t offset, const void* src,
                                       std::size_t bytes, Stream& stream) {
  require_device();
  const CudaStorage& s = checked(*this, storage, offset, bytes, "copy_from_host_async");
  CudaStream& cs = cuda_stream(stream, "copy_from_host_async");
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(s.data() + offset, src, bytes, cudaMemcpyHostToDevice, cs.handle()),
             "cudaMemcpyAsync to " + device_name());
  cs.set_last_op("copy_from_host_async");
}

void CudaBackend::copy_to_host_async(const Storage& storage, std::size_t offset, void* dst,
                                     std::size_t bytes, Stream& stream) {
  require_device();
  const CudaStorage& s = checked(*this, storage, offset, bytes, "copy_to_host_async");
  CudaStream& cs = cuda_stream(stream, "copy_to_host_async");
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(dst, s.data() + offset, bytes, cudaMemcpyDeviceToHost, cs.handle()),
             "cudaMemcpyAsync from " + device_name());
  cs.set_last_op("copy_to_host_async");
}

std::unique_ptr<HostBuffer> CudaBackend::allocate_host_staging(std::size_t bytes) {
  require_device();
  return std::make_unique<PinnedBuffer>(self(), bytes);
}

cublasHandle_t CudaBackend::cublas(cudaStream_t stream) {
  cublasHandle_t& handle = t_handles.cublas[device_];
  if (handle == nullptr) {
    check_cublas(cublasCreate(&handle), "cublasCreate on " + device_name());
    // Tensor-core math only where it keeps f32 results (no TF32 unless asked for).
    check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  return handle;
}

cudnnHandle_t CudaBackend::cudnn(cudaStream_t stream) {
  cudnnHandle_t& handle = t_handles.cudnn[device_];
  if (handle == nullptr) check_cudnn(cudnnCreate(&handle), "cudnnCreate on " + device_name());
  check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream");
  return handle;
}

CudaStorage::~CudaStorage() { backend_->release(data_, block_size_, stream_); }
Backend& CudaStorage::backend() const { return *backend_; }

// ---- The SDK's native-memory accessor (tensor.h) ----
NativeMemory CudaStorage::native_memory() const {
  return {DeviceKind::kCuda, backend_->device(), data_};
}

}  // namespace trainyard::cuda

#define TRAINYARD_CUDA_CLASSES(X)                \
  X(backend, cuda, trainyard::cuda::CudaBackend, \
    "One NVIDIA GPU: cuBLAS, cuDNN and own kernels, a caching device allocator, streams")
TRAINYARD_PLUGIN_WITH_FLAGS(cuda_backend, 0, 1, 0, trainyard::kPluginNeverUnload,
                            TRAINYARD_CUDA_CLASSES)
