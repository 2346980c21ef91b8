#include "caching_allocator.h"

#include <bit>
#include <cstdlib>

#include "trainyard/error.h"

namespace trainyard::cpu {

std::size_t CachingAllocator::size_class(std::size_t bytes) {
  if (bytes <= 4096)
    return bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  std::size_t power = std::bit_floor(bytes);
  std::size_t step = power / 8;
  return (bytes + step - 1) / step * step;
}

CachingAllocator::~CachingAllocator() { empty_cache(); }

void* CachingAllocator::allocate(std::size_t bytes, std::size_t* block_size) {
  const std::size_t size = size_class(bytes);
  *block_size = size;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      stats_.bytes_cached -= size;
      stats_.bytes_in_use += size;
      ++stats_.cache_hits;
      return block;
    }
  }
  void* block = std::aligned_alloc(kAlignment, size);
  if (block == nullptr) {
    empty_cache();
    block = std::aligned_alloc(kAlignment, size);
  }
  if (block == nullptr) {
    throw Error("cpu: out of memory allocating " + std::to_string(size) + " bytes");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.bytes_in_use += size;
  ++stats_.system_allocations;
  return block;
}

void CachingAllocator::release(void* block, std::size_t block_size) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_[block_size].push_back(block);
  stats_.bytes_in_use -= block_size;
  stats_.bytes_cached += block_size;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, blocks] : free_) {
    for (void* block : blocks) std::free(block);
    stats_.bytes_cached -= size * blocks.size();
  }
  free_.clear();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace trainyard::cpu
