// tune_malloc_for_training (host_malloc.h): after it, glibc serves a block between its default
// mmap threshold and 32 MiB from the heap (mallinfo2 counts no new mmapped block) and a larger
// one still by mmap; it leaves the settings alone where the user set glibc's malloc tunables.
#include "trainyard/core/host_malloc.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace trainyard {
namespace {

// Mapped blocks after allocating (and touching) `bytes`, minus those before; frees the block.
long new_mapped_blocks(std::size_t bytes) {
  const std::size_t before = mallinfo2().hblks;
  void* p = std::malloc(bytes);
  std::memset(p, 1, bytes);
  asm volatile("" : : "r"(p) : "memory");  // keeps the compiler from eliding the block
  const std::size_t after = mallinfo2().hblks;
  std::free(p);
  return static_cast<long>(after) - static_cast<long>(before);
}

TEST(HostMalloc, TrainingSettingsKeepRecordSizedBlocksOnTheHeap) {
  ::unsetenv("MALLOC_MMAP_THRESHOLD_");
  ::unsetenv("MALLOC_TRIM_THRESHOLD_");
  ::unsetenv("GLIBC_TUNABLES");
  ASSERT_TRUE(tune_malloc_for_training());
  // A frame-level record's frames (1.4 MB) and a block just under the threshold: the heap.
  EXPECT_EQ(new_mapped_blocks(1382400), 0);
  EXPECT_EQ(new_mapped_blocks(kTrainingMmapThreshold - 4096), 0);
  // Past the threshold: still a mapping of its own.
  EXPECT_EQ(new_mapped_blocks(kTrainingMmapThreshold + (std::size_t{8} << 20)), 1);
}

TEST(HostMalloc, TheUsersOwnMallocSettingsWin) {
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1048576", 1);
  EXPECT_FALSE(tune_malloc_for_training());
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536:glibc.malloc.arena_max=2", 1);
  EXPECT_FALSE(tune_malloc_for_training());
  ::unsetenv("GLIBC_TUNABLES");
  ::setenv("MALLOC_MMAP_THRESHOLD_", "65536", 1);
  EXPECT_FALSE(tune_malloc_for_training());
  ::unsetenv("MALLOC_MMAP_THRESHOLD_");
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2", 1);
  EXPECT_TRUE(tune_malloc_for_training());
  ::unsetenv("GLIBC_TUNABLES");
}

}  // namespace
}  // namespace trainyard
