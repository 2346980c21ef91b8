// glibc malloc settings for a training process, which the host `trainyard` applies at start.
//
// The input pipeline's reader threads allocate each record's features (a frame-level YouTube-8M
// video is 1.4 MB of f32 frames) and the batch thread frees them once copied into the batch.
// With glibc's defaults such blocks sit around its dynamic mmap threshold and each reader's
// arena trims freed pages at its top (the trim threshold follows at twice the mmap threshold),
// so the next record faults and zeroes them again: a frame-level epoch on 2 reader threads took
// 267,000 page faults and ran slower than on one (BENCHMARKS.md, "Input against tf.data").
// tune_malloc_for_training() fixes the mmap threshold at 32 MiB and the trim threshold at
// 256 MiB (mallopt), so such blocks are reused from the heap; the process keeps up to 256 MiB
// of freed heap at the top of each arena instead of returning it at once.
#ifndef TRAINYARD_CORE_HOST_MALLOC_H_
#define TRAINYARD_CORE_HOST_MALLOC_H_

#include <cstddef>

#include "trainyard/export.h"

namespace trainyard {

inline constexpr std::size_t kTrainingMmapThreshold = std::size_t{32} << 20;
inline constexpr std::size_t kTrainingTrimThreshold = std::size_t{256} << 20;

// Applies the settings above and returns true; changes nothing and returns false where the
// user set glibc's own (GLIBC_TUNABLES naming glibc.malloc.mmap_threshold or trim_threshold,
// MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_), or where mallopt refuses them.
TRAINYARD_API bool tune_malloc_for_training();

}  // namespace trainyard

#endif  // TRAINYARD_CORE_HOST_MALLOC_H_
