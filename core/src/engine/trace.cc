#include "trainyard/core/trace.h"

#include <atomic>
#include <cstdio>
#include <functional>
#include <sstream>
#include <thread>

#include "trainyard/core/atomic_file.h"
#include "trainyard/error.h"
#include "trainyard/json.h"

namespace trainyard {
namespace {

std::atomic<StepTrace*> g_active{nullptr};

}  // namespace

StepTrace::StepTrace() : origin_(std::chrono::steady_clock::now()) {
  StepTrace* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, this)) {
    throw Error("a step trace is already being recorded");
  }
}

StepTrace::~StepTrace() {
  StepTrace* expected = this;
  g_active.compare_exchange_strong(expected, nullptr);
}

StepTrace* StepTrace::active() { return g_active.load(std::memory_order_relaxed); }

int64_t StepTrace::now_us() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               origin_)
      .count();
}

void StepTrace::add(Event event) {
  event.thread = std::hash<std::thread::id>()(std::this_thread::get_id()) % 100000;
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
}

std::vector<StepTrace::Event> StepTrace::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

StepTrace::Span::Span(StepTrace* trace, std::string name)
    : trace_(trace), name_(std::move(name)), start_(std::chrono::steady_clock::now()) {}

StepTrace::Span::~Span() {
  if (trace_ == nullptr) return;
  Event e;
  e.name = name_;
  e.category = "step";
  e.start_us =
      std::chrono::duration_cast<std::chrono::microseconds>(start_ - trace_->origin_).count();
  e.duration_us = trace_->now_us() - e.start_us;
  trace_->add(std::move(e));
}

void StepTrace::write_json(const std::string& path) const {
  std::vector<Event> all = events();
  std::ostringstream out;
  out << "{\"traceEvents\": [\n";
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Event& e = all[i];
    out << "  {\"name\": " << json_quoted(e.name) << ", \"cat\": " << json_quoted(e.category)
        << ", \"ph\": \"X\", \"pid\": 1, \"tid\": " << e.thread << ", \"ts\": " << e.start_us
        << ", \"dur\": " << e.duration_us;
    if (!e.args.empty()) out << ", \"args\": {" << e.args << "}";
    out << "}" << (i + 1 < all.size() ? ",\n" : "\n");
  }
  out << "], \"displayTimeUnit\": \"ms\"}\n";
  write_file_atomically(path, out.str());
}

}  // namespace trainyard
