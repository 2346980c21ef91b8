// Stopping cleanly on the signals that ask a process to end: SIGINT (Ctrl-C), SIGTERM (what
// cluster schedulers, Kubernetes and systemd send before they kill) and SIGHUP (the terminal
// went away). While a StopSignals is alive, the first such signal only records its number:
// `train` finishes the step it is in, writes a checkpoint and ends; `eval` abandons the
// evaluation it is in (writing nothing for it) and ends. A second signal ends the process at
// once, with the default action of that signal. A signal ignored when the scope begins stays
// ignored (`nohup trainyard train ...` outlives its terminal's SIGHUP). The commands then exit with status 128 + the
// signal's number, what a shell reports for a process that signal ended, so a scheduler sees an
// interrupted run, not a finished one; the log's last line says the checkpoint was written.
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
