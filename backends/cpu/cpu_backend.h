// The CPU backend's device types, shared by its kernels.
#ifndef TRAINYARD_BACKENDS_CPU_CPU_BACKEND_H_
#define TRAINYARD_BACKENDS_CPU_CPU_BACKEND_H_

#include <memory>
#include <vector>

#include "caching_allocator.h"
#include "compute_precision.h"
#include "prepacked_filters.h"
#include "trainyard/backend.h"
#include "trainyard/options.h"

namespace trainyard::cpu {

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
  // Host memory (the SDK's native-memory accessor, tensor.h).
  NativeMemory native_memory() const override { return {DeviceKind::kHost, 0, data_}; }

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
      {"precision", OptionType::kString, "f32",
       "f32; bf16: matmuls and convolutions in bf16 with f32 inputs, results and accumulation "
       "(needs AVX-512 BF16 or AMX); bf16_or_f32: bf16 where the CPU has it, else f32"},
      {"prepack_filters", OptionType::kBool, "false",
       "for inference, where weights never change: each convolution keeps its filter in the "
       "layout it computes with instead of converting it on every call (the inference library "
       "sets it); a filter changed in place afterwards is not seen"},
  };

  explicit CpuBackend(const Options& options);

  std::string device_name() const override { return "cpu"; }
  std::shared_ptr<Storage> allocate(std::size_t bytes) override;
  void copy_from_host(Storage& storage, std::size_t offset, const void* src,
                      std::size_t bytes) override;
  void copy_to_host(const Storage& storage, std::size_t offset, void* dst,
                    std::size_t bytes) override;
  void synchronize() override {}
  std::span<const KernelRegistration> kernels() const override { return kernels_; }
  AllocatorStats allocator_stats() const override { return allocator_.stats(); }

  void release(void* data, std::size_t block_size) { allocator_.release(data, block_size); }
  int num_threads() const { return num_threads_; }
  // The policy the matmul and convolution kernels follow (compute_precision.h).
  ComputePrecision precision() const { return precision_; }
  // The packed filters when the option prepack_filters is on, else null.
  PrepackedFilters* prepacked_filters() { return prepacked_.get(); }

 private:
  const CpuStorage& checked(const Storage& storage, std::size_t offset, std::size_t bytes,
                            const char* what) const;

  CachingAllocator allocator_;
  int num_threads_ = 1;
  ComputePrecision precision_ = ComputePrecision::kF32;
  std::unique_ptr<PrepackedFilters> prepacked_;
  std::vector<KernelRegistration> kernels_;
};

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_CPU_BACKEND_H_
