#include "trainyard/core/host_malloc.h"

#include <malloc.h>

#include <cstdlib>
#include <string_view>

namespace trainyard {

bool tune_malloc_for_training() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr) {
    const std::string_view t(tunables);
    if (t.find("glibc.malloc.mmap_threshold") != std::string_view::npos ||
        t.find("glibc.malloc.trim_threshold") != std::string_view::npos) {
      return false;
    }
  }
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
      std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) {
    return false;
  }
  // Either setting turns off glibc's dynamic adjustment of both.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kTrainingMmapThreshold)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, static_cast<int>(kTrainingTrimThreshold)) == 1;
}

}  // namespace trainyard
