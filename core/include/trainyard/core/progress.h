// How far a long command got: the one progress reporter every command that can run for more
// than a few seconds uses (eval, predict, export, the data tools, coco-eval, plugins check).
//
// Not on a terminal (a log file, a pipe, a scheduler's capture) it writes nothing until the
// interval has passed (so a command that ends within it prints no progress at all), then one
// whole line per interval, and a last one from finish() once it has written any:
//
//   progress: 0:00:10 elapsed, eval: 120 of 500 batches (24%), 12.0 batches/s, about 0:00:32 left
//   progress: 0:00:10 elapsed, data inspect: 1200 records, 120.0 records/s
//
// (the second with no total known). The times have the H:MM:SS form of training's own
// "progress: 0:00:10 elapsed, step N of M, about 0:00:32 left" line (clock_time below).
// On a terminal it draws a bar, as tqdm does, redrawn in place with '\r' at most ten times a
// second, and finish() ends it with a newline:
//
//   predict  24%|#####               | 1200/5000 examples [0:00:10<0:00:32, 120.0 examples/s]
//
// The interval is 10 seconds unless the environment variable TRAINYARD_PROGRESS_SECS sets
// another (0: a line at every advance; tests use it). The reporter draws only when advance(),
// set() or finish() is called, from the thread that owns it; it starts no thread of its own.
#ifndef TRAINYARD_CORE_PROGRESS_H_
#define TRAINYARD_CORE_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "trainyard/export.h"

namespace trainyard {

// 0:00:07, 1:02:03, 26:40:00 (rounded to the second; negative counts as 0).
TRAINYARD_API std::string clock_time(double seconds);

// The interval TRAINYARD_PROGRESS_SECS names, 10 seconds when it is unset or empty. Throws
// InvalidArgument naming the variable when it is not a number >= 0.
TRAINYARD_API double progress_interval_secs();

// Whether `out` writes to a terminal: std::cout when standard output is one, std::cerr and
// std::clog when standard error is one; any other stream is not.
TRAINYARD_API bool writes_to_terminal(const std::ostream& out);

struct TRAINYARD_API ProgressSettings {
  bool terminal = false;
  double interval_secs = 10;  // between lines when not on a terminal
  std::function<std::chrono::steady_clock::time_point()> now = std::chrono::steady_clock::now;

  // For `out`: a terminal as writes_to_terminal says, the interval progress_interval_secs().
  static ProgressSettings for_stream(const std::ostream& out);
};

class TRAINYARD_API Progress {
 public:
  // `label` says what runs ("predict", "evaluating step 200"), `unit` what is counted
  // ("examples", "records", "files"); `total` is std::nullopt when it cannot be known. `out`
  // must outlive the reporter. The clock starts here.
  Progress(std::string label, std::string unit, std::optional<int64_t> total, std::ostream& out);
  Progress(std::string label, std::string unit, std::optional<int64_t> total, std::ostream& out,
           ProgressSettings settings);
  // Ends a bar left on the terminal with a newline (an exception left the loop); writes no
  // last line otherwise.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(int64_t n = 1) { set(done_ + n); }
  // `done` units so far (also past the total: the total was an estimate).
  void set(int64_t done);
  // The last line (only when one was written before, and not when it showed this count already)
  // or the bar's last drawing and its newline. Later calls do nothing.
  void finish();

  int64_t done() const { return done_; }

  // The stream, for a whole line of the caller's own (ended with '\n') among the progress: on a
  // terminal the bar is blanked first, and the next advance() draws it again below that line.
  std::ostream& above();

 private:
  double elapsed_secs() const;
  std::string line() const;  // without "progress: " and without an end of line
  std::string bar() const;
  void draw();

  std::string label_;
  std::string unit_;
  std::optional<int64_t> total_;
  std::ostream& out_;
  ProgressSettings settings_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  int64_t done_ = 0;
  bool drawn_ = false;      // a line or the bar was written
  int64_t drawn_done_ = 0;  // the count it showed
  bool finished_ = false;
  bool blanked_ = false;       // above() blanked the bar: draw it at the next count
  std::size_t bar_width_ = 0;  // of the bar last drawn, to blank what a shorter one leaves
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_PROGRESS_H_
