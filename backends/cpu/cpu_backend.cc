// The CPU backend: host memory from a caching, 64-byte-aligned allocator and the reference
// kernels (oneDNN primitives where oneDNN has them, own loops elsewhere).
#include "cpu_backend.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "kernels.h"
#include "trainyard/error.h"
#include "trainyard/plugin.h"

namespace trainyard::cpu {
namespace {

// OpenMP's thread count is a property of the calling thread, and kernels run on whatever
// thread calls them (trainer, input pipeline, tests): each kernel sets it, once per thread
// and backend setting, before it runs (kernels.h's cpu_kernel).
thread_local int t_omp_threads = 0;

}  // namespace

void set_omp_threads(const CpuBackend& backend) {
  int wanted = backend.num_threads();
  if (t_omp_threads != wanted) {
    omp_set_num_threads(wanted);
    t_omp_threads = wanted;
  }
}

CpuBackend::CpuBackend(const Options& options) {
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
  precision_ = resolve_compute_precision(options.get_string("precision"));
  if (options.get_bool("prepack_filters")) prepacked_ = std::make_unique<PrepackedFilters>();
    // Every family's kernels (kernels.h), in the order of TRAINYARD_OP_FAMILIES.
#define TRAINYARD_CPU_ADD_KERNELS_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF(cpu, add_##family##_kernels(kernels_);)
  TRAINYARD_OP_FAMILIES(TRAINYARD_CPU_ADD_KERNELS_)
#undef TRAINYARD_CPU_ADD_KERNELS_
}

std::shared_ptr<Storage> CpuBackend::allocate(std::size_t bytes) {
  std::size_t block_size = 0;
  void* data = allocator_.allocate(bytes, &block_size);
  auto self = std::static_pointer_cast<CpuBackend>(shared_from_this());
  return std::make_shared<CpuStorage>(std::move(self), data, bytes, block_size);
}

void CpuBackend::copy_from_host(Storage& storage, std::size_t offset, const void* src,
                                std::size_t bytes) {
  std::memcpy(checked(storage, offset, bytes, "copy_from_host").data() + offset, src, bytes);
}

void CpuBackend::copy_to_host(const Storage& storage, std::size_t offset, void* dst,
                              std::size_t bytes) {
  std::memcpy(dst, checked(storage, offset, bytes, "copy_to_host").data() + offset, bytes);
}

const CpuStorage& CpuBackend::checked(const Storage& storage, std::size_t offset, std::size_t bytes,
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

CpuStorage::~CpuStorage() { backend_->release(data_, block_size_); }
Backend& CpuStorage::backend() const { return *backend_; }

}  // namespace trainyard::cpu

#define TRAINYARD_CPU_CLASSES(X)                              \
  X(backend, cpu, trainyard::cpu::CpuBackend,                 \
    "Host memory from a caching, 64-byte-aligned allocator; " \
    "the reference kernels (oneDNN and own loops)")
// Never unloaded: the OpenMP runtime this library brings in keeps worker threads alive, and
// unloading it under them would crash the process.
TRAINYARD_PLUGIN_WITH_FLAGS(cpu_backend, 0, 1, 0, trainyard::kPluginNeverUnload,
                            TRAINYARD_CPU_CLASSES)
