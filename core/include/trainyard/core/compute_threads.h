// How the CPU backend's compute threads wait between parallel regions, which the host
// `trainyard` sets at start.
//
// The cpu backend's kernels and oneDNN run on libgomp's OpenMP threads. With neither
// OMP_WAIT_POLICY nor GOMP_SPINCOUNT set, libgomp lets a thread that reaches a barrier or waits
// for the next parallel region spin 300,000 times (about 10 ms on the 2-core Xeon, 32 ns a
// pause) before it sleeps. A training step of small ops (a GruModel or LstmModel time step) goes
// through hundreds of such waits, so on a machine where another process holds a core the
// spinning threads take the slices the thread they wait for needs, and the step rate swung by
// 100x (issue 41; BENCHMARKS.md, "A shared machine").
//
// bound_compute_thread_spinning() sets GOMP_SPINCOUNT to kComputeThreadSpinCount (a few
// microseconds of spinning, then a futex sleep; processes the host starts inherit it) in the
// process environment, which libgomp reads once, when it is loaded. The host calls it in main,
// before the cpu backend plugin (the first library that needs libgomp) is loaded. It changes
// nothing where the user chose: OMP_WAIT_POLICY or GOMP_SPINCOUNT set, even to an empty value. Only
// libgomp reads GOMP_SPINCOUNT; an OpenMP runtime of another kind keeps its own default.
#ifndef TRAINYARD_CORE_COMPUTE_THREADS_H_
#define TRAINYARD_CORE_COMPUTE_THREADS_H_

#include "trainyard/export.h"

namespace trainyard {

// Spins before a waiting compute thread sleeps: about 3 us at 32 ns a pause, the count libgomp
// itself takes when it finds more threads than CPUs. On the shared 2-core machine 100 ran the
// small recurrent steps as fast as no spinning at all (OMP_WAIT_POLICY=passive) and faster
// than 300 or 1,000 (BENCHMARKS.md, "A shared machine").
inline constexpr unsigned long kComputeThreadSpinCount = 100;

enum class ComputeThreadWait {
  kBounded,      // GOMP_SPINCOUNT is now kComputeThreadSpinCount; libgomp will read it
  kUsersChoice,  // OMP_WAIT_POLICY or GOMP_SPINCOUNT was set; nothing changed
  kTooLate,      // libgomp was already loaded (and has read its environment); nothing changed
};

// Call before any other thread starts (setenv) and before libgomp is loaded.
TRAINYARD_API ComputeThreadWait bound_compute_thread_spinning();

}  // namespace trainyard

#endif  // TRAINYARD_CORE_COMPUTE_THREADS_H_
