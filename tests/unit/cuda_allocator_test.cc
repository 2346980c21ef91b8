// The CUDA backend's caching allocator (backends/cuda/device_allocator.h), on a fake device:
// size classes, reuse only within a stream, statistics, emptying the cache, and an
// out-of-memory request that empties the cache before it fails with a message naming the
// device and the sizes. Needs no GPU.
#include "device_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "trainyard/error.h"

namespace trainyard::cuda {
namespace {

// Host memory standing in for a device with `capacity` bytes.
class FakeDevice final : public DeviceMemory {
 public:
  explicit FakeDevice(std::size_t capacity) : capacity_(capacity) {}
  ~FakeDevice() override { EXPECT_EQ(live_.size(), 0u) << "blocks leaked to the fake device"; }
  void* allocate(std::size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    void* block = std::malloc(bytes);
    used_ += bytes;
    live_.insert(block);
    sizes_[block] = bytes;
    ++mallocs;
    return block;
  }
  void free(void* block) override {
    ASSERT_EQ(live_.count(block), 1u) << "a block freed twice or never allocated";
    used_ -= sizes_[block];
    live_.erase(block);
    std::free(block);
    ++frees;
  }
  void synchronize() override { ++synchronizations; }
  std::string name() const override { return "fake:0"; }

  int mallocs = 0, frees = 0, synchronizations = 0;

 private:
  std::size_t capacity_;
  std::size_t used_ = 0;
  std::set<void*> live_;
  std::map<void*, std::size_t> sizes_;
};

TEST(CudaAllocatorTest, SizeClassesAre512ByteMultiplesThenEighthsOfAPowerOfTwo) {
  EXPECT_EQ(DeviceCachingAllocator::size_class(0), 512u);
  EXPECT_EQ(DeviceCachingAllocator::size_class(1), 512u);
  EXPECT_EQ(DeviceCachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(DeviceCachingAllocator::size_class(1 << 20), std::size_t{1} << 20);
  // Above 1 MiB: steps of 1/8 of the enclosing power of two, at most 12.5% waste.
  EXPECT_EQ(DeviceCachingAllocator::size_class((1 << 20) + 1), (std::size_t{1} << 20) + (1 << 17));
  EXPECT_EQ(DeviceCachingAllocator::size_class(3'000'000), 3'145'728u);
}

TEST(CudaAllocatorTest, AReleasedBlockIsReusedByItsOwnStreamOnly) {
  FakeDevice device(1 << 24);
  {
    DeviceCachingAllocator allocator(device);
    std::size_t size = 0;
    void* a = allocator.allocate(1000, /*stream=*/1, &size);
    EXPECT_EQ(size, 1024u);
    allocator.release(a, size, 1);
    EXPECT_EQ(allocator.stats().bytes_cached, 1024u);
    EXPECT_EQ(allocator.stats().bytes_in_use, 0u);

    // Another stream may still be running work that reads the block: it gets a new one.
    void* b = allocator.allocate(1000, /*stream=*/2, &size);
    EXPECT_NE(b, a);
    EXPECT_EQ(device.mallocs, 2);
    // The same stream gets the cached block back.
    void* c = allocator.allocate(900, /*stream=*/1, &size);
    EXPECT_EQ(c, a);
    EXPECT_EQ(device.mallocs, 2);
    AllocatorStats stats = allocator.stats();
    EXPECT_EQ(stats.cache_hits, 1u);
    EXPECT_EQ(stats.system_allocations, 2u);
    EXPECT_EQ(stats.bytes_in_use, 2048u);
    EXPECT_EQ(stats.bytes_cached, 0u);
    allocator.release(b, 1024, 2);
    allocator.release(c, 1024, 1);
  }
  EXPECT_EQ(device.frees, 2) << "the destructor returns the cached blocks";
}

TEST(CudaAllocatorTest, EmptyCacheWaitsForTheDeviceThenFreesEveryCachedBlock) {
  FakeDevice device(1 << 24);
  DeviceCachingAllocator allocator(device);
  std::size_t size = 0;
  void* a = allocator.allocate(4096, 1, &size);
  void* b = allocator.allocate(8192, 1, &size);
  allocator.release(a, 4096, 1);
  allocator.empty_cache();
  EXPECT_EQ(device.synchronizations, 1);
  EXPECT_EQ(device.frees, 1);
  EXPECT_EQ(allocator.stats().bytes_cached, 0u);
  EXPECT_EQ(allocator.stats().bytes_in_use, 8192u);
  allocator.empty_cache();  // nothing cached: no wait
  EXPECT_EQ(device.synchronizations, 1);
  allocator.release(b, 8192, 1);
}

TEST(CudaAllocatorTest, OutOfMemoryEmptiesTheCacheAndRetriesBeforeFailing) {
  FakeDevice device(3 * 1024 * 1024);
  DeviceCachingAllocator allocator(device);
  std::size_t size = 0;
  void* a = allocator.allocate(2 * 1024 * 1024, /*stream=*/1, &size);
  allocator.release(a, size, 1);
  // Stream 2 cannot reuse stream 1's block, and the device has room for one such block only:
  // the cache is emptied and the request succeeds.
  void* b = allocator.allocate(2 * 1024 * 1024, /*stream=*/2, &size);
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(device.synchronizations, 1);
  EXPECT_EQ(allocator.stats().bytes_cached, 0u);
  // Nothing left to free: the error names the device and the request.
  try {
    allocator.allocate(2 * 1024 * 1024, 2, &size);
    FAIL() << "expected an out-of-memory Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "fake:0: out of memory allocating 2097152 bytes (2097152 bytes in use by "
                 "tensors; the cache was emptied)");
  }
  allocator.release(b, size, 2);
}

}  // namespace
}  // namespace trainyard::cuda
