// The CUDA backend's caching allocator, written against an abstract device (DeviceMemory) so
// its bookkeeping is tested on a machine without a GPU (tests/unit/cuda_allocator_test.cc).
//
// Blocks are rounded up to a size class (multiples of 512 bytes up to 1 MiB, then 1/8 steps of
// the enclosing power of two) and, when a tensor releases one, kept on a free list of the
// stream it was allocated for. A request reuses a cached block of its own stream only: work on
// one stream runs in order, so a block freed by the host while a kernel on that stream still
// reads it is rewritten only by work queued after that kernel. A request the device cannot
// satisfy empties the cache (waiting for the device first) and tries once more before it fails.
#ifndef TRAINYARD_BACKENDS_CUDA_DEVICE_ALLOCATOR_H_
#define TRAINYARD_BACKENDS_CUDA_DEVICE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/backend.h"

namespace trainyard::cuda {

// Raw device memory: what the allocator asks the system for.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // `bytes` of device memory, or null when the device has no more.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void free(void* block) = 0;
  // Waits until no queued work can still use a cached block (before blocks go back).
  virtual void synchronize() = 0;
  // "cuda:0", for error messages.
  virtual std::string name() const = 0;
};

class DeviceCachingAllocator {
 public:
  static constexpr std::size_t kAlignment = 512;

  explicit DeviceCachingAllocator(DeviceMemory& memory) : memory_(memory) {}
  DeviceCachingAllocator(const DeviceCachingAllocator&) = delete;
  DeviceCachingAllocator& operator=(const DeviceCachingAllocator&) = delete;
  ~DeviceCachingAllocator();  // returns every cached block to the device

  // A block of at least `bytes` bytes for work on `stream` (an opaque id); never null. Sets
  // *block_size to its size class. Throws Error naming the device and the sizes when the
  // device is out of memory even after the cache was emptied.
  void* allocate(std::size_t bytes, uintptr_t stream, std::size_t* block_size);
  // Takes back a block from allocate() with its block size and stream.
  void release(void* block, std::size_t block_size, uintptr_t stream);
  // Returns every cached block to the device (after waiting for it).
  void empty_cache();

  AllocatorStats stats() const;

  static std::size_t size_class(std::size_t bytes);

 private:
  void free_cached_locked();

  DeviceMemory& memory_;
  mutable std::mutex mutex_;
  // (stream, size class) -> blocks
  std::map<std::pair<uintptr_t, std::size_t>, std::vector<void*>> free_;
  AllocatorStats stats_;
};

}  // namespace trainyard::cuda

#endif  // TRAINYARD_BACKENDS_CUDA_DEVICE_ALLOCATOR_H_
