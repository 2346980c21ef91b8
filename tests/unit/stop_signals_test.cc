// The stop signals: the first SIGINT, SIGTERM or SIGHUP is a request the run reads, a second
// one ends the process; outside every scope the default actions are back.
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "trainyard/core/stop_signals.h"

namespace trainyard {
namespace {

// Runs `body` in a child process; its wait status.
template <typename Body>
int in_child(Body body) {
  pid_t child = ::fork();
  if (child == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}

TEST(StopSignalsTest, TheFirstSignalIsARequestTheSecondEndsTheProcess) {
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
    int status = in_child([&] {
      StopSignals scope;
      if (StopSignals::requested() != 0) ::_exit(10);
      ::raise(signal_number);
      if (StopSignals::requested() != signal_number) ::_exit(11);
      ::raise(signal_number);  // ends the process with the signal's default action
      ::_exit(12);
    });
    ASSERT_TRUE(WIFSIGNALED(status))
        << signal_name(signal_number) << " exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    EXPECT_EQ(WTERMSIG(status), signal_number);
  }
}

TEST(StopSignalsTest, ARequestEndsWithItsScopeAndNestedScopesShareIt) {
  int status = in_child([] {
    {
      StopSignals outer;
      {
        StopSignals inner;
        ::raise(SIGTERM);
      }
      if (StopSignals::requested() != SIGTERM) ::_exit(10);  // the outer scope still has it
    }
    if (StopSignals::requested() != 0) ::_exit(11);
    // Outside every scope the default action is back.
    ::raise(SIGTERM);
    ::_exit(12);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(StopSignalsTest, ASignalIgnoredBeforeTheScopeStaysIgnored) {
  int status = in_child([] {
    ::signal(SIGHUP, SIG_IGN);  // as nohup leaves it
    StopSignals scope;
    ::raise(SIGHUP);
    if (StopSignals::requested() != 0) ::_exit(10);
    ::raise(SIGTERM);
    if (StopSignals::requested() != SIGTERM) ::_exit(11);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Waits (bounded) until the signal thread has recorded a request; the request.
int requested_within_5s() {
  for (int i = 0; i < 5000 && StopSignals::requested() == 0; ++i) ::usleep(1000);
  return StopSignals::requested();
}

// The signal set blocked in the calling thread, as a bit per stop signal.
int blocked_stop_signals() {
  sigset_t mask;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return (sigismember(&mask, SIGINT) ? 1 : 0) | (sigismember(&mask, SIGTERM) ? 2 : 0) |
         (sigismember(&mask, SIGHUP) ? 4 : 0);
}

// Routed, the stop signals interrupt no thread of the run: every thread started after the call
// blocks them (the input pipeline's, OpenMP's), and a signal sent to the process becomes the
// scope's request through the signal thread; a second ends the process.
TEST(StopSignalsTest, RoutedSignalsReachOnlyTheSignalThread) {
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
    int status = in_child([&] {
      route_stop_signals_to_a_thread();
      int in_worker = 0;
      std::thread([&] { in_worker = blocked_stop_signals(); }).join();
      if (in_worker != 7 || blocked_stop_signals() != 7) ::_exit(10);
      StopSignals scope;
      ::kill(::getpid(), signal_number);
      if (requested_within_5s() != signal_number) ::_exit(11);
      ::kill(::getpid(), signal_number);  // ends the process with the signal's default action
      ::sleep(5);
      ::_exit(12);
    });
    ASSERT_TRUE(WIFSIGNALED(status))
        << signal_name(signal_number) << " exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    EXPECT_EQ(WTERMSIG(status), signal_number);
  }
}

// Outside every scope a routed signal ends the process at once, as it would unblocked (the data
// commands, Ctrl-C before training starts); an ignored one (nohup) stays ignored.
TEST(StopSignalsTest, RoutedSignalsOutsideAScopeEndTheProcessAndIgnoredOnesStayIgnored) {
  int status = in_child([] {
    ::signal(SIGHUP, SIG_IGN);
    route_stop_signals_to_a_thread();
    if (blocked_stop_signals() != 3) ::_exit(10);  // SIGHUP stays ignored, not blocked
    {
      StopSignals scope;
      ::kill(::getpid(), SIGHUP);
      ::usleep(100000);
      if (StopSignals::requested() != 0) ::_exit(11);
    }
    ::kill(::getpid(), SIGINT);
    ::sleep(5);
    ::_exit(12);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

TEST(StopSignalsTest, NamesTheSignals) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(SIGHUP), "SIGHUP");
  EXPECT_EQ(signal_name(SIGUSR1), "signal " + std::to_string(SIGUSR1));
}

}  // namespace
}  // namespace trainyard
