#include "trainyard/core/stop_signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

namespace trainyard {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kNumSignals = sizeof(kSignals) / sizeof(kSignals[0]);

std::atomic<int> g_requested{0};
static_assert(std::atomic<int>::is_always_lock_free, "read and written from a signal handler");

std::mutex g_mutex;  // guards the two below (installing, not the handler)
int g_depth = 0;
struct sigaction g_previous[kNumSignals];

void write_stderr(const char* text) {
  std::size_t n = std::strlen(text);
  while (n > 0) {
    ssize_t written = ::write(STDERR_FILENO, text, n);
    if (written <= 0) return;
    text += written;
    n -= static_cast<std::size_t>(written);
  }
}

// Async-signal-safe: an atomic store, write(2), and for a second signal sigaction and raise.
void on_stop_signal(int signal_number) {
  int expected = 0;
  if (!g_requested.compare_exchange_strong(expected, signal_number)) {
    write_stderr("trainyard: second stop signal: exiting at once\n");
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(signal_number, &dfl, nullptr);
    ::raise(signal_number);
    return;
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
      "stopping cleanly (training saves a checkpoint first); send it again to exit at once\n");
}

}  // namespace

StopSignals::StopSignals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_depth++ > 0) return;
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
}

StopSignals::~StopSignals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_depth > 0) return;
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
