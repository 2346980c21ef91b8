// The environment the host `trainyard` gives its compute threads (compute_threads.h), for the
// training benchmarks, so that they measure what `trainyard train` runs.
//
// A benchmark links oneDNN and OpenMP itself, so libgomp has read its environment before main
// and bound_compute_thread_spinning() comes too late (kTooLate). Where the user set neither
// OMP_WAIT_POLICY nor GOMP_SPINCOUNT, apply_host_compute_thread_wait() then sets GOMP_SPINCOUNT
// as the host would and runs the program again (execv of /proc/self/exe with the same
// arguments), so libgomp reads it at load; the second run finds it set and goes on.
#ifndef TRAINYARD_TESTS_BENCH_BENCH_HOST_ENV_H_
#define TRAINYARD_TESTS_BENCH_BENCH_HOST_ENV_H_

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "trainyard/core/compute_threads.h"

namespace trainyard::bench {

inline void apply_host_compute_thread_wait(char** argv) {
  if (bound_compute_thread_spinning() != ComputeThreadWait::kTooLate) return;
  const std::string count = std::to_string(kComputeThreadSpinCount);
  setenv("GOMP_SPINCOUNT", count.c_str(), /*overwrite=*/0);
  execv("/proc/self/exe", argv);
  std::cerr << "warning: could not run again with GOMP_SPINCOUNT=" << count << " ("
            << std::strerror(errno) << "); libgomp keeps its default wait\n";
}

}  // namespace trainyard::bench

#endif  // TRAINYARD_TESTS_BENCH_BENCH_HOST_ENV_H_
