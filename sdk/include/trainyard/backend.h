// A device and the memory and kernels it provides.
//
// A Backend plugin owns a device ("cpu", "cuda:0"): it allocates Storage for tensors on it,
// copies bytes between that storage and the host and within the device, runs work on streams
// (stream.h), and registers kernels by op name for the ops the core declares (op.h). It may
// leave ops out; using one on its device is an Unimplemented error naming the op and the
// device. The CPU backend implements every op and is the reference the others are tested
// against.
//
// A host-synchronous backend implements only the pure virtual functions: the defaults below
// give it one synchronous stream, synchronous events, device copies through the host and
// plain host staging memory. An asynchronous backend (CUDA) overrides them all.
//
// Thread safety: allocate, deallocate and the copies may be called from several threads.
#ifndef TRAINYARD_BACKEND_H_
#define TRAINYARD_BACKEND_H_

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/plugin.h"
#include "trainyard/stream.h"
#include "trainyard/tensor.h"

namespace trainyard {

struct AllocatorStats {
  std::size_t bytes_in_use = 0;
  std::size_t bytes_cached = 0;        // freed by tensors, kept for reuse
  std::size_t system_allocations = 0;  // calls that went to the system allocator
  std::size_t cache_hits = 0;
};

struct BackendCoreState;  // the core's per-backend state (kernel table, default stream)

class TRAINYARD_API Backend : public PluginObject {
 public:
  Backend();
  ~Backend() override;

  // "cpu", "cuda:0", ...
  virtual std::string device_name() const = 0;

  // Returns storage of at least `bytes` bytes (0 is allowed), aligned to 64 bytes. The storage
  // keeps this backend alive. Throws Error when the device is out of memory.
  virtual std::shared_ptr<Storage> allocate(std::size_t bytes) = 0;

  // Copies between host memory and `storage`, which must come from this backend. `offset` and
  // `bytes` must lie within the storage (InvalidArgument otherwise). Returns when the copy is
  // complete: copy_to_host first waits for the work queued on every stream of this backend
  // that writes the storage (simplest: on all of them).
  virtual void copy_from_host(Storage& storage, std::size_t offset, const void* src,
                              std::size_t bytes) = 0;
  virtual void copy_to_host(const Storage& storage, std::size_t offset, void* dst,
                            std::size_t bytes) = 0;

  // Waits for all work queued on the device, on every stream.
  virtual void synchronize() = 0;

  // The kernels this backend implements, one per op at most (op.h). Read by the core when the
  // backend is created and when a composite is declared; must stay valid as long as the
  // backend lives.
  virtual std::span<const KernelRegistration> kernels() const = 0;

  virtual AllocatorStats allocator_stats() const = 0;

  // ---- Streams, events, device copies (defaults: host-synchronous) ----

  // Where work goes when the calling thread has selected no other stream of this backend
  // (StreamGuard). Owned by the backend.
  virtual Stream& default_stream();
  // A new stream, owned by the caller.
  virtual std::shared_ptr<Stream> create_stream();
  virtual std::shared_ptr<Event> create_event();

  // Copies `bytes` from `src` at `src_offset` to `dst` at `dst_offset`, both storage of this
  // backend, queued on `stream` (InvalidArgument when a range overruns its storage). The
  // default goes through host memory and is complete when it returns.
  virtual void copy_device_to_device(const Storage& src, std::size_t src_offset, Storage& dst,
                                     std::size_t dst_offset, std::size_t bytes, Stream& stream);
  // Host copies queued on `stream`: the host memory must stay valid and unchanged until the
  // stream has reached the copy (Event or Stream::synchronize). Defaults: the synchronous
  // copies above.
  virtual void copy_from_host_async(Storage& storage, std::size_t offset, const void* src,
                                    std::size_t bytes, Stream& stream);
  virtual void copy_to_host_async(const Storage& storage, std::size_t offset, void* dst,
                                  std::size_t bytes, Stream& stream);
  // Host memory suited to transfers with this device (pinned on CUDA), at least `bytes` long
  // and 64-byte aligned. The default is ordinary aligned host memory.
  virtual std::unique_ptr<HostBuffer> allocate_host_staging(std::size_t bytes);

  // The stream work from the calling thread goes to: the innermost StreamGuard's for this
  // backend, else default_stream().
  Stream& current_stream();

 private:
  friend struct BackendCore;
  std::unique_ptr<BackendCoreState, void (*)(BackendCoreState*)> core_;
};

// Selects `stream` as its backend's current stream on the calling thread while it lives.
class TRAINYARD_API StreamGuard {
 public:
  explicit StreamGuard(Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Backend* backend_;
  Stream* stream_;
};

}  // namespace trainyard

#endif  // TRAINYARD_BACKEND_H_
