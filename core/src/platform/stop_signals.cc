#include "trainyard/core/stop_signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

namespace trainyard {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kNumSignals = sizeof(kSignals) / sizeof(kSignals[0]);

// Read and written by the signal thread and by the fallback handler: lock-free atomics only.
std::atomic<int> g_requested{0};
std::atomic<int> g_scopes{0};  // live StopSignals scopes
static_assert(std::atomic<int>::is_always_lock_free, "read and written from a signal handler");

std::mutex g_mutex;  // guards installing and restoring the handlers (never taken by a signal)
struct sigaction g_previous[kNumSignals];
bool g_routed = false;  // route_stop_signals_to_a_thread ran (under g_mutex)

// write(2) only: async-signal-safe.
void write_stderr(const char* text) {
  std::size_t n = std::strlen(text);
  while (n > 0) {
    ssize_t written = ::write(STDERR_FILENO, text, n);
    if (written <= 0) return;
    text += written;
    n -= static_cast<std::size_t>(written);
  }
}

// Puts the signal's default action back and raises it in this thread. Async-signal-safe
// (sigaction, raise). In a handler the signal stays blocked until the handler returns and is
// delivered then.
void raise_with_default_action(int signal_number) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(signal_number, &dfl, nullptr);
  ::raise(signal_number);
}

// Ends the process with the signal's default action, from the signal thread (which blocks the
// signal outside sigwait, so it is unblocked first).
[[noreturn]] void end_with_default_action(int signal_number) {
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal_number);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise_with_default_action(signal_number);
  ::_exit(128 + signal_number);  // not reached: the default action of these signals ends it
}

// The first stop signal inside a scope records its number; a second ends the process. Only an
// atomic exchange and write(2): safe in a handler and in the signal thread alike.
void note_stop_signal(int signal_number, bool in_handler) {
  int expected = 0;
  if (!g_requested.compare_exchange_strong(expected, signal_number)) {
    write_stderr("trainyard: second stop signal: exiting at once\n");
    if (in_handler) {
      raise_with_default_action(signal_number);  // delivered when the handler returns
      return;
    }
    end_with_default_action(signal_number);
  }
  switch (signal_number) {
    case SIGINT:
      write_stderr("trainyard: SIGINT received: ");
      break;
    case SIGTERM:
      write_stderr("trainyard: SIGTERM received: ");
      break;
    default:
      write_stderr("trainyard: SIGHUP received: ");
      break;
  }
  write_stderr(
      "stopping cleanly at the end of the step (training saves a checkpoint first); send it "
      "again to exit at once\n");
}

// The fallback for a thread that does not block the signals (an application that embeds the
// core without route_stop_signals_to_a_thread): the flag, nothing else.
void on_stop_signal(int signal_number) { note_stop_signal(signal_number, /*in_handler=*/true); }

// The one thread that receives the stop signals once they are routed. Every other thread
// blocks them, so none is ever interrupted by them: no handler runs inside malloc, a lock, a
// kernel call or a oneDNN primitive of the trainer's threads.
void receive_stop_signals(sigset_t routed) {
  ::pthread_setname_np(::pthread_self(), "ty-signals");
  for (;;) {
    int signal_number = 0;
    if (::sigwait(&routed, &signal_number) != 0) continue;
    if (g_scopes.load() > 0) {
      note_stop_signal(signal_number, /*in_handler=*/false);
    } else {
      end_with_default_action(signal_number);  // as if nothing had blocked it
    }
  }
}

}  // namespace

void route_stop_signals_to_a_thread() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_routed) return;
  sigset_t routed;
  sigemptyset(&routed);
  for (int s : kSignals) {
    struct sigaction current {};
    ::sigaction(s, nullptr, &current);
    // An ignored signal stays ignored (nohup): blocked, Linux would keep it pending instead of
    // discarding it, and the thread would receive it.
    if (current.sa_handler != SIG_IGN) sigaddset(&routed, s);
  }
  sigset_t previous_mask;
  if (int e = ::pthread_sigmask(SIG_BLOCK, &routed, &previous_mask); e != 0) {
    throw Error("cannot block the stop signals: " + std::system_category().message(e));
  }
  try {
    std::thread(receive_stop_signals, routed).detach();
  } catch (const std::system_error& e) {
    ::pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
    throw Error(std::string("cannot start the thread that receives the stop signals: ") + e.what());
  }
  g_routed = true;
}

StopSignals::StopSignals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_scopes.load() > 0) {
    g_scopes.fetch_add(1);
    return;
  }
  g_requested.store(0);  // a request made before this scope was for an earlier run
  struct sigaction action {};
  action.sa_handler = &on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int s : kSignals) sigaddset(&action.sa_mask, s);
  action.sa_flags = SA_RESTART;
  for (int i = 0; i < kNumSignals; ++i) {
    ::sigaction(kSignals[i], nullptr, &g_previous[i]);
    // An ignored signal stays ignored: `nohup` asks a run to outlive its terminal's SIGHUP, and
    // a shell starts background jobs with SIGINT ignored.
    if (g_previous[i].sa_handler == SIG_IGN) continue;
    ::sigaction(kSignals[i], &action, nullptr);
  }
  g_scopes.store(1);
}

StopSignals::~StopSignals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_scopes.load() > 1) {
    g_scopes.fetch_sub(1);
    return;
  }
  g_scopes.store(0);
  for (int i = 0; i < kNumSignals; ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
  g_requested.store(0);  // handled by the scope that ends: outside every scope, none is pending
}

int StopSignals::requested() { return g_requested.load(); }

void StopSignals::clear() { g_requested.store(0); }

std::string signal_name(int signal_number) {
  switch (signal_number) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(signal_number);
  }
}

}  // namespace trainyard
