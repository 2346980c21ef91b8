// Step traces in the Chrome trace event format (chrome://tracing, Perfetto), as TF-Slim's
// trace_every_n_steps writes `tf_trace-<step>.json`: one complete event ("ph": "X") per op the
// engine launched while the trace was active, named after the op, with its input and output
// shapes, plus the spans the trainer marks (forward, backward, apply_gradients).
#ifndef TRAINYARD_CORE_TRACE_H_
#define TRAINYARD_CORE_TRACE_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "trainyard/export.h"

namespace trainyard {

class TRAINYARD_API StepTrace {
 public:
  struct Event {
    std::string name;
    std::string category;  // "op" or "step"
    std::string args;      // a JSON object's members, "" for none
    int64_t start_us = 0;  // since the trace began
    int64_t duration_us = 0;
    uint64_t thread = 0;
  };

  // Starts recording every op launched from now on, on any thread. One trace at a time: a
  // second concurrent StepTrace throws Error.
  StepTrace();
  ~StepTrace();  // stops recording
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  // A span of the trainer's own ("forward", "backward"): Span s(trace, "forward");
  class Span {
   public:
    Span(StepTrace* trace, std::string name);
    ~Span();

   private:
    StepTrace* trace_;
    std::string name_;
    std::chrono::steady_clock::time_point start_;
  };

  void add(Event event);
  int64_t now_us() const;
  std::vector<Event> events() const;

  // Writes {"traceEvents": [...]} to `path` through a temporary file and a rename; throws
  // Error naming the file when it cannot be written.
  void write_json(const std::string& path) const;

  // The active trace, or null. Used by the engine for every launch.
  static StepTrace* active();

 private:
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TRACE_H_
