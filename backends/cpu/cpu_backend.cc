// The CPU backend: host memory from a caching, 64-byte-aligned allocator.
#include <cstring>
#include <memory>
#include <thread>

#include "caching_allocator.h"
#include "trainyard/backend.h"
#include "trainyard/error.h"
#include "trainyard/plugin.h"

namespace trainyard::cpu {
namespace {

class CpuBackend;

class CpuStorage final : public Storage {
 public:
  CpuStorage(std::shared_ptr<CpuBackend> backend, void* data, std::size_t bytes,
             std::size_t block_size)
      : backend_(std::move(backend)), data_(data), bytes_(bytes), block_size_(block_size) {}
  ~CpuStorage() override;

  std::size_t size_bytes() const override { return bytes_; }
  Backend& backend() const override;
  std::byte* data() const { return static_cast<std::byte*>(data_); }

 private:
  std::shared_ptr<CpuBackend> backend_;
  void* data_;
  std::size_t bytes_;
  std::size_t block_size_;
};

class CpuBackend final : public Backend {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"num_threads", OptionType::kInt, "0",
       "compute threads; 0 uses OMP_NUM_THREADS, else every core"},
  };

  explicit CpuBackend(const Options& options) {
    int64_t requested = options.get_int("num_threads");
    if (requested < 0) {
      throw InvalidArgument("cpu: num_threads must be >= 0, got " + std::to_string(requested));
    }
    if (requested == 0) {
      const char* omp = std::getenv("OMP_NUM_THREADS");
      requested = omp != nullptr ? std::atoi(omp) : 0;
      if (requested <= 0) requested = static_cast<int64_t>(std::thread::hardware_concurrency());
    }
    num_threads_ = requested > 0 ? static_cast<int>(requested) : 1;
  }

  std::string device_name() const override { return "cpu"; }

  std::shared_ptr<Storage> allocate(std::size_t bytes) override {
    std::size_t block_size = 0;
    void* data = allocator_.allocate(bytes, &block_size);
    auto self = std::static_pointer_cast<CpuBackend>(shared_from_this());
    return std::make_shared<CpuStorage>(std::move(self), data, bytes, block_size);
  }

  void copy_from_host(Storage& storage, std::size_t offset, const void* src,
                      std::size_t bytes) override {
    std::memcpy(checked(storage, offset, bytes, "copy_from_host").data() + offset, src, bytes);
  }

  void copy_to_host(const Storage& storage, std::size_t offset, void* dst,
                    std::size_t bytes) override {
    std::memcpy(dst, checked(storage, offset, bytes, "copy_to_host").data() + offset, bytes);
  }

  void synchronize() override {}

  std::vector<std::string> kernel_names() const override { return {}; }

  AllocatorStats allocator_stats() const override { return allocator_.stats(); }

  void release(void* data, std::size_t block_size) { allocator_.release(data, block_size); }
  int num_threads() const { return num_threads_; }

 private:
  const CpuStorage& checked(const Storage& storage, std::size_t offset, std::size_t bytes,
                            const char* what) const {
    const auto* cpu = dynamic_cast<const CpuStorage*>(&storage);
    if (cpu == nullptr || &cpu->backend() != this) {
      throw InvalidArgument(std::string("cpu: ") + what + " was given storage of device " +
                            storage.backend().device_name() + ", not of this cpu backend");
    }
    if (offset > cpu->size_bytes() || bytes > cpu->size_bytes() - offset) {
      throw InvalidArgument(std::string("cpu: ") + what + " of " + std::to_string(bytes) +
                            " bytes at offset " + std::to_string(offset) + " overruns storage of " +
                            std::to_string(cpu->size_bytes()) + " bytes");
    }
    return *cpu;
  }

  CachingAllocator allocator_;
  int num_threads_ = 1;
};

CpuStorage::~CpuStorage() { backend_->release(data_, block_size_); }
Backend& CpuStorage::backend() const { return *backend_; }

}  // namespace
}  // namespace trainyard::cpu

#define TRAINYARD_CPU_CLASSES(X)              \
  X(backend, cpu, trainyard::cpu::CpuBackend, \
    "Host memory from a caching, 64-byte-aligned allocator; the reference device")
TRAINYARD_PLUGIN(cpu_backend, 0, 1, 0, TRAINYARD_CPU_CLASSES)
