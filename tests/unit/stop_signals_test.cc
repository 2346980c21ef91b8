// The stop signals: the first SIGINT, SIGTERM or SIGHUP is a request the run reads, a second
// one ends the process; outside every scope the default actions are back.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

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

TEST(StopSignalsTest, NamesTheSignals) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(SIGHUP), "SIGHUP");
  EXPECT_EQ(signal_name(SIGUSR1), "signal " + std::to_string(SIGUSR1));
}

}  // namespace
}  // namespace trainyard
