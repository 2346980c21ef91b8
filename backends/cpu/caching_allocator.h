// A caching allocator for host memory: 64-byte-aligned blocks, rounded up to a size class and
// kept on a free list when released, so a training loop that allocates the same shapes every
// step reaches the system allocator only during its first steps.
#ifndef TRAINYARD_BACKENDS_CPU_CACHING_ALLOCATOR_H_
#define TRAINYARD_BACKENDS_CPU_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "trainyard/backend.h"

namespace trainyard::cpu {

class CachingAllocator {
 public:
  static constexpr std::size_t kAlignment = 64;

  CachingAllocator() = default;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator();  // returns every cached block to the system

  // Returns a block of at least `bytes` bytes (a size class); never null. Throws Error when
  // the system is out of memory.
  void* allocate(std::size_t bytes, std::size_t* block_size);
  // Takes back a block from allocate() with its block size.
  void release(void* block, std::size_t block_size);
  // Frees every cached block.
  void empty_cache();

  AllocatorStats stats() const;

  // The size class for a request: multiples of 64 bytes up to 4 KiB, then 1/8 steps of the
  // enclosing power of two, so at most 12.5% is wasted.
  static std::size_t size_class(std::size_t bytes);

 private:
  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
};

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_CACHING_ALLOCATOR_H_
