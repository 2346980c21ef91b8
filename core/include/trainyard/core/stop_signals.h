// Stopping cleanly on the signals that ask a process to end: SIGINT (Ctrl-C), SIGTERM (what
// cluster schedulers, Kubernetes and systemd send before they kill) and SIGHUP (the terminal
// went away). While a StopSignals is alive, the first such signal only records its number:
// `train` finishes the step it is in, writes a checkpoint and ends; `eval` abandons the
// evaluation it is in (writing nothing for it) and ends. A second signal ends the process at
// once, with the default action of that signal. A signal ignored when the scope begins stays
// ignored (`nohup trainyard train ...` outlives its terminal's SIGHUP). The commands then exit
// with status 128 + the signal's number, what a shell reports for a process that signal ended, so a
// scheduler sees an interrupted run, not a finished one; the log's last line says the checkpoint
// was written.
#ifndef TRAINYARD_CORE_STOP_SIGNALS_H_
#define TRAINYARD_CORE_STOP_SIGNALS_H_

#include <string>

#include "trainyard/error.h"
#include "trainyard/export.h"

namespace trainyard {

class TRAINYARD_API StopSignals {
 public:
  // Installs the handlers (the first of nested scopes does; the last restores what was there).
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal that asked to stop, 0 while none has (always 0 outside every scope).
  static int requested();
  // Forgets a request (a new run in the same process starts afresh). Not for signal handlers.
  static void clear();
};

// Routes the stop signals of the whole process to one thread of their own. Why: a signal
// handler runs on the stack of whichever thread the kernel picks, and oneDNN's JIT f32 GEMM
// (jit_avx512_common_gemm_f32, in Debian 12's libdnnl) points rsp into a heap workspace while it
// runs; a signal delivered to a thread inside it writes its signal frame into the heap (oneDNN
// issue 4845, fixed upstream in 2026). MoeModel's matmuls take that kernel: 9 of 33 early stops
// aborted with "corrupted size vs. prev_size while consolidating". Call it first in main(),
// before any other thread starts: it blocks SIGINT, SIGTERM and SIGHUP in the calling
// thread, so in every thread started after it (threads inherit the mask: the input pipeline's,
// OpenMP's and oneDNN's, the summary flusher), and starts a detached thread that alone receives
// them with sigwait. No thread of the run is then ever interrupted by these signals: nothing runs
// inside malloc, a lock or a kernel call it was in. Inside a StopSignals scope the first signal
// is the scope's request and a second ends the process with the signal's default action;
// outside every scope a signal ends the process at once, as if nothing had blocked it. A
// signal ignored when this is called (nohup) stays ignored. Signals sent with raise() go to the
// calling thread and stay blocked there: send them to the process (kill). Idempotent; throws
// Error when the thread cannot start (the mask is then as it was).
//
// Without it (an application that embeds the core and does not call it), a StopSignals scope
// installs a handler that only records the signal with an atomic exchange (and writes its line
// with write(2)): async-signal-safe, but run on whichever thread the kernel picks, so exposed to
// the oneDNN hazard above; such applications should call this before they start threads.
TRAINYARD_API void route_stop_signals_to_a_thread();

// "SIGTERM", "SIGINT", "SIGHUP", else "signal N".
TRAINYARD_API std::string signal_name(int signal_number);

// Thrown by work that a stop request ended before it finished (an evaluation): nothing it would
// have written was written. The commands exit with 128 + signal_number().
class TRAINYARD_API Stopped : public Error {
 public:
  Stopped(int signal_number, const std::string& what) : Error(what), signal_(signal_number) {}
  int signal_number() const { return signal_; }

 private:
  int signal_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_STOP_SIGNALS_H_
