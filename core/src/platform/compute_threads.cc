#include "trainyard/core/compute_threads.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace trainyard {

ComputeThreadWait bound_compute_thread_spinning() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) {
    return ComputeThreadWait::kUsersChoice;
  }
  // libgomp reads its environment in its constructor: once loaded (linked into the program, or
  // by an earlier plugin), a new GOMP_SPINCOUNT would only mislead the processes it starts.
  if (void* gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD); gomp != nullptr) {
    dlclose(gomp);
    return ComputeThreadWait::kTooLate;
  }
  const std::string count = std::to_string(kComputeThreadSpinCount);
  setenv("GOMP_SPINCOUNT", count.c_str(), /*overwrite=*/0);  // fails only without memory
  return std::getenv("GOMP_SPINCOUNT") != nullptr ? ComputeThreadWait::kBounded
                                                  : ComputeThreadWait::kUsersChoice;
}

}  // namespace trainyard
