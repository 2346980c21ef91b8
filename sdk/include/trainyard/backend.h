// A device and the memory and kernels it provides.
//
// A Backend plugin owns a device ("cpu", "cuda:0"): it allocates Storage for tensors on it,
// copies bytes between that storage and the host, and registers kernels for the ops the core
// declares. It may leave ops out; using one on its device is an Unimplemented error naming the
// op and the device. The CPU backend implements every op and is the reference the others are
// tested against.
//
// Thread safety: allocate, deallocate and the copies may be called from several threads.
#ifndef TRAINYARD_BACKEND_H_
#define TRAINYARD_BACKEND_H_

#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"

namespace trainyard {

struct AllocatorStats {
  std::size_t bytes_in_use = 0;
  std::size_t bytes_cached = 0;        // freed by tensors, kept for reuse
  std::size_t system_allocations = 0;  // calls that went to the system allocator
  std::size_t cache_hits = 0;
};

class TRAINYARD_API Backend : public PluginObject {
 public:
  ~Backend() override;

  // "cpu", "cuda:0", ...
  virtual std::string device_name() const = 0;

  // Returns storage of at least `bytes` bytes (0 is allowed), aligned to 64 bytes. The storage
  // keeps this backend alive. Throws Error when the device is out of memory.
  virtual std::shared_ptr<Storage> allocate(std::size_t bytes) = 0;

  // Copies between host memory and `storage`, which must come from this backend. `offset` and
  // `bytes` must lie within the storage (InvalidArgument otherwise). Returns when the copy is
  // complete.
  virtual void copy_from_host(Storage& storage, std::size_t offset, const void* src,
                              std::size_t bytes) = 0;
  virtual void copy_to_host(const Storage& storage, std::size_t offset, void* dst,
                            std::size_t bytes) = 0;

  // Waits for all work queued on the device.
  virtual void synchronize() = 0;

  // The kernels this backend implements, one per op at most. The table is read once, when the
  // core first dispatches to this backend, and must stay valid as long as the backend lives.
  virtual std::span<const KernelRegistration> kernels() const = 0;

  virtual AllocatorStats allocator_stats() const = 0;

 private:
  // The kernels indexed by OpId, built by the core from kernels() on first dispatch.
  friend struct KernelDispatch;
  std::once_flag dispatch_once_;
  std::array<KernelFn, kOpCount> dispatch_{};
};

}  // namespace trainyard

#endif  // TRAINYARD_BACKEND_H_
