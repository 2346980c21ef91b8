#include "device_allocator.h"

#include <bit>

#include "trainyard/error.h"

namespace trainyard::cuda {

std::size_t DeviceCachingAllocator::size_class(std::size_t bytes) {
  if (bytes <= (std::size_t{1} << 20)) {
    return bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  const std::size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

DeviceCachingAllocator::~DeviceCachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  free_cached_locked();
}

void* DeviceCachingAllocator::allocate(std::size_t bytes, uintptr_t stream,
                                       std::size_t* block_size) {
  const std::size_t size = size_class(bytes);
  *block_size = size;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = free_.find({stream, size});
  if (it != free_.end() && !it->second.empty()) {
    void* block = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= size;
    stats_.bytes_in_use += size;
    ++stats_.cache_hits;
    return block;
  }
  void* block = memory_.allocate(size);
  if (block == nullptr && stats_.bytes_cached > 0) {
    memory_.synchronize();
    free_cached_locked();
    block = memory_.allocate(size);
  }
  if (block == nullptr) {
    throw Error(memory_.name() + ": out of memory allocating " + std::to_string(bytes) +
                " bytes (" + std::to_string(stats_.bytes_in_use) +
                " bytes in use by tensors; the cache was emptied)");
  }
  stats_.bytes_in_use += size;
  ++stats_.system_allocations;
  return block;
}

void DeviceCachingAllocator::release(void* block, std::size_t block_size, uintptr_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_[{stream, block_size}].push_back(block);
  stats_.bytes_in_use -= block_size;
  stats_.bytes_cached += block_size;
}

void DeviceCachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stats_.bytes_cached == 0) return;
  memory_.synchronize();
  free_cached_locked();
}

void DeviceCachingAllocator::free_cached_locked() {
  for (auto& [key, blocks] : free_) {
    for (void* block : blocks) memory_.free(block);
    stats_.bytes_cached -= key.second * blocks.size();
  }
  free_.clear();
}

AllocatorStats DeviceCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace trainyard::cuda
