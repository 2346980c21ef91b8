// The progress reporter every long command uses (progress.h): quiet until its interval has
// passed, then one line per interval off a terminal, a bar redrawn in place on one, and the
// H:MM:SS times training's progress line has. A fake clock drives it; nothing sleeps.
#include "trainyard/core/progress.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <sstream>

#include "trainyard/error.h"

namespace trainyard {
namespace {

using Clock = std::chrono::steady_clock;

class ProgressTest : public ::testing::Test {
 protected:
  ProgressSettings settings(bool terminal, double interval_secs = 10) {
    ProgressSettings s;
    s.terminal = terminal;
    s.interval_secs = interval_secs;
    s.now = [this] { return now_; };
    return s;
  }
  void wait(double seconds) {
    now_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }

  Clock::time_point now_{};
  std::ostringstream out_;
};

TEST_F(ProgressTest, ClockTimeIsTrainingsHoursMinutesSeconds) {
  EXPECT_EQ(clock_time(0), "0:00:00");
  EXPECT_EQ(clock_time(7.4), "0:00:07");
  EXPECT_EQ(clock_time(7.5), "0:00:08");
  EXPECT_EQ(clock_time(3723), "1:02:03");
  EXPECT_EQ(clock_time(96000), "26:40:00");
  EXPECT_EQ(clock_time(-5), "0:00:00");
}

TEST_F(ProgressTest, PrintsNothingWhenTheCommandEndsWithinTheInterval) {
  Progress progress("predict", "examples", 100, out_, settings(false));
  for (int i = 0; i < 100; ++i) {
    wait(0.09);
    progress.advance();
  }
  progress.finish();
  EXPECT_EQ(out_.str(), "");
}

TEST_F(ProgressTest, WritesOneLinePerIntervalWithCountPercentRateAndTimeLeft) {
  Progress progress("predict", "examples", 5000, out_, settings(false));
  wait(9);
  progress.set(1080);
  EXPECT_EQ(out_.str(), "");
  wait(1);
  progress.set(1200);  // 10 s, 120 a second, 3800 to go: 31.7 s
  EXPECT_EQ(out_.str(),
            "progress: 0:00:10 elapsed, predict: 1200 of 5000 examples (24%), 120.0 examples/s, "
            "about 0:00:32 left\n");
  wait(5);
  progress.set(1800);  // within the next interval: no line
  EXPECT_EQ(out_.str().find('\n'), out_.str().size() - 1);
  wait(5);
  progress.set(2000);  // 20 s, 100 a second, 3000 to go
  EXPECT_NE(out_.str().find("\nprogress: 0:00:20 elapsed, predict: 2000 of 5000 examples (40%), "
                            "100.0 examples/s, about 0:00:30 left\n"),
            std::string::npos)
      << out_.str();
}

TEST_F(ProgressTest, FinishWritesTheLastLineOnlyAfterAnEarlierOne) {
  Progress progress("data synth-yt8m", "videos", 60, out_, settings(false));
  wait(10);
  progress.set(40);
  wait(5);
  progress.set(60);
  progress.finish();
  progress.finish();  // once
  EXPECT_EQ(out_.str(),
            "progress: 0:00:10 elapsed, data synth-yt8m: 40 of 60 videos (66%), 4.0 videos/s, "
            "about 0:00:05 left\n"
            "progress: 0:00:15 elapsed, data synth-yt8m: 60 of 60 videos (100%), 4.0 videos/s\n");
}

TEST_F(ProgressTest, WithoutATotalCountsAndRates) {
  Progress progress("data inspect", "records", std::nullopt, out_, settings(false, 2));
  wait(4);
  progress.advance(10);
  EXPECT_EQ(out_.str(), "progress: 0:00:04 elapsed, data inspect: 10 records, 2.5 records/s\n");
}

TEST_F(ProgressTest, WithoutATotalOneOfAUnitIsSingular) {
  Progress progress("evaluating step 2", "batches", std::nullopt, out_, settings(false, 1));
  wait(2);
  progress.advance();
  EXPECT_EQ(out_.str(), "progress: 0:00:02 elapsed, evaluating step 2: 1 batch, 0.5 batches/s\n");
  std::ostringstream classes;
  Progress check("plugins check", "classes", std::nullopt, classes, settings(false, 1));
  wait(2);
  check.advance();
  EXPECT_EQ(classes.str(), "progress: 0:00:02 elapsed, plugins check: 1 class, 0.5 classes/s\n");
  std::ostringstream records;
  Progress inspect("data inspect", "records", std::nullopt, records, settings(false, 1));
  wait(2);
  inspect.advance();
  EXPECT_EQ(records.str(), "progress: 0:00:02 elapsed, data inspect: 1 record, 0.5 records/s\n");
}

TEST_F(ProgressTest, ZeroIntervalWritesALineAtEveryAdvance) {
  Progress progress("eval", "batches", 3, out_, settings(false, 0));
  progress.advance();
  progress.advance();
  progress.advance();
  std::istringstream lines(out_.str());
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line.rfind("progress: 0:00:00 elapsed, eval: ", 0), 0u) << line;
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST_F(ProgressTest, TerminalBarIsRedrawnInPlaceAtMostTenTimesASecond) {
  Progress progress("predict", "examples", 200, out_, settings(true));
  wait(0.05);
  progress.set(10);
  EXPECT_EQ(out_.str(), "");  // within a tenth of a second of the start
  wait(0.05);
  progress.set(20);  // 0.1 s, 200 a second
  EXPECT_EQ(out_.str(),
            "\rpredict  10%|##                  | 20/200 examples [0:00:00<0:00:01, 200.0 "
            "examples/s]");
  const std::size_t first = out_.str().size();
  wait(0.05);
  progress.set(30);
  EXPECT_EQ(out_.str().size(), first);  // not yet redrawn
  wait(0.95);
  progress.set(200);
  progress.finish();
  EXPECT_EQ(out_.str().substr(first),
            "\rpredict 100%|####################| 200/200 examples [0:00:01, 181.8 examples/s]" +
                std::string(7, ' ') + "\n");  // blanking the end of the longer first bar
  EXPECT_EQ(out_.str().find('\n'), out_.str().size() - 1);  // one line, ended by finish()
}

TEST_F(ProgressTest, TerminalBarBlanksWhatALongerOneLeft) {
  Progress progress("inspect", "records", std::nullopt, out_, settings(true));
  wait(1);
  progress.set(1000);  // "[0:00:01, 1000.0 records/s]"
  const std::size_t first = out_.str().size();
  wait(1);
  progress.set(1001);  // "[0:00:02, 500.5 records/s]": a character shorter
  const std::string second = out_.str().substr(first);
  EXPECT_EQ(second, "\rinspect 1001 records [0:00:02, 500.5 records/s] ");
}

TEST_F(ProgressTest, ALineOfTheCallersOwnTakesTheBarsPlaceAndTheBarComesBackBelowIt) {
  Progress progress("plugins check", "classes", 2, out_, settings(true));
  wait(1);
  progress.advance();
  const std::string bar = out_.str();  // "\rplugins check  50%|..."
  progress.above() << "ok    Backend cpu\n";
  EXPECT_EQ(out_.str().substr(bar.size()),
            "\r" + std::string(bar.size() - 1, ' ') + "\rok    Backend cpu\n");
  const std::size_t before = out_.str().size();
  progress.advance();  // at once, though within a tenth of a second of the last drawing
  EXPECT_EQ(out_.str().substr(before, 19), "\rplugins check 100%");
  progress.finish();
  EXPECT_EQ(out_.str().back(), '\n');
}

TEST_F(ProgressTest, ALineOfTheCallersOwnOffATerminalIsJustWritten) {
  Progress progress("plugins check", "classes", 2, out_, settings(false));
  progress.above() << "ok    Backend cpu\n";
  EXPECT_EQ(out_.str(), "ok    Backend cpu\n");
}

TEST_F(ProgressTest, AnAbandonedBarEndsItsLine) {
  {
    Progress progress("eval", "batches", std::nullopt, out_, settings(true));
    wait(1);
    progress.advance();
  }
  ASSERT_FALSE(out_.str().empty());
  EXPECT_EQ(out_.str().back(), '\n');
}

TEST_F(ProgressTest, IntervalComesFromTheEnvironment) {
  ::unsetenv("TRAINYARD_PROGRESS_SECS");
  EXPECT_EQ(progress_interval_secs(), 10);
  ::setenv("TRAINYARD_PROGRESS_SECS", "0.5", 1);
  EXPECT_EQ(progress_interval_secs(), 0.5);
  ::setenv("TRAINYARD_PROGRESS_SECS", "soon", 1);
  try {
    progress_interval_secs();
    ADD_FAILURE() << "no error for TRAINYARD_PROGRESS_SECS=soon";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("TRAINYARD_PROGRESS_SECS is 'soon'"), std::string::npos)
        << e.what();
  }
  ::setenv("TRAINYARD_PROGRESS_SECS", "-1", 1);
  EXPECT_THROW(progress_interval_secs(), InvalidArgument);
  ::unsetenv("TRAINYARD_PROGRESS_SECS");
}

TEST_F(ProgressTest, AStringStreamIsNoTerminal) { EXPECT_FALSE(writes_to_terminal(out_)); }

}  // namespace
}  // namespace trainyard
