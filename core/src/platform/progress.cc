#include "trainyard/core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "trainyard/error.h"

namespace trainyard {
namespace {

// The most a terminal's bar is redrawn: ten times a second.
constexpr double kRedrawSecs = 0.1;
constexpr int kBarCells = 20;
constexpr double kDefaultIntervalSecs = 10;

std::string rate_text(double per_sec) {
  char text[48];
  std::snprintf(text, sizeof text, "%.1f", per_sec);
  return text;
}

// An English plural's singular, for the units counted here: batches, classes, images, records.
std::string_view singular(std::string_view unit) {
  for (std::string_view suffix : {"ches", "shes", "sses", "xes"}) {
    if (unit.size() > suffix.size() && unit.ends_with(suffix)) {
      return unit.substr(0, unit.size() - 2);
    }
  }
  return unit.size() > 1 && unit.back() == 's' ? unit.substr(0, unit.size() - 1) : unit;
}

}  // namespace

std::string clock_time(double seconds) {
  const auto total = static_cast<int64_t>(std::max(seconds, 0.0) + 0.5);
  char text[48];
  std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  return text;
}

double progress_interval_secs() {
  const char* text = std::getenv("TRAINYARD_PROGRESS_SECS");
  if (text == nullptr || *text == '\0') return kDefaultIntervalSecs;
  char* end = nullptr;
  const double secs = std::strtod(text, &end);
  if (*end != '\0' || !std::isfinite(secs) || secs < 0) {
    throw InvalidArgument("TRAINYARD_PROGRESS_SECS is '" + std::string(text) +
                          "'; expected the seconds between progress lines, a number >= 0");
  }
  return secs;
}

bool writes_to_terminal(const std::ostream& out) {
  if (out.rdbuf() == std::cout.rdbuf()) return ::isatty(STDOUT_FILENO) == 1;
  if (out.rdbuf() == std::cerr.rdbuf() || out.rdbuf() == std::clog.rdbuf()) {
    return ::isatty(STDERR_FILENO) == 1;
  }
  return false;
}

ProgressSettings ProgressSettings::for_stream(const std::ostream& out) {
  ProgressSettings settings;
  settings.terminal = writes_to_terminal(out);
  settings.interval_secs = progress_interval_secs();
  return settings;
}

Progress::Progress(std::string label, std::string unit, std::optional<int64_t> total,
                   std::ostream& out)
    : Progress(std::move(label), std::move(unit), total, out, ProgressSettings::for_stream(out)) {}

Progress::Progress(std::string label, std::string unit, std::optional<int64_t> total,
                   std::ostream& out, ProgressSettings settings)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      out_(out),
      settings_(std::move(settings)),
      start_(settings_.now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (settings_.terminal && drawn_ && !finished_ && !blanked_) out_ << std::endl;
}

double Progress::elapsed_secs() const {
  return std::chrono::duration<double>(settings_.now() - start_).count();
}

void Progress::set(int64_t done) {
  done_ = done;
  if (finished_) return;
  const double since_draw = std::chrono::duration<double>(settings_.now() - last_draw_).count();
  if (blanked_ || since_draw >= (settings_.terminal ? kRedrawSecs : settings_.interval_secs)) {
    draw();
  }
}

std::ostream& Progress::above() {
  if (settings_.terminal && drawn_ && !finished_ && bar_width_ > 0) {
    out_ << '\r' << std::string(bar_width_, ' ') << '\r';
    bar_width_ = 0;
    blanked_ = true;
  }
  return out_;
}

void Progress::finish() {
  if (finished_) return;
  if (drawn_) {
    if (done_ != drawn_done_ || blanked_) draw();
    if (settings_.terminal) out_ << std::endl;
  }
  finished_ = true;
}

void Progress::draw() {
  last_draw_ = settings_.now();
  drawn_ = true;
  blanked_ = false;
  drawn_done_ = done_;
  if (!settings_.terminal) {
    // A log file shows the line when it is written, not when a buffer fills.
    out_ << "progress: " << line() << std::endl;
    return;
  }
  std::string text = bar();
  const std::size_t width = text.size();
  if (width < bar_width_) text.append(bar_width_ - width, ' ');
  bar_width_ = width;
  out_ << '\r' << text << std::flush;
}

std::string Progress::line() const {
  const double elapsed = elapsed_secs();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  std::ostringstream text;
  text << clock_time(elapsed) << " elapsed, " << label_ << ": " << done_;
  if (total_) {
    text << " of " << *total_ << " " << unit_ << " ("
         << (*total_ > 0 ? std::min<int64_t>(done_ * 100 / *total_, 100) : 100) << "%)";
  } else if (done_ == 1) {
    text << " " << singular(unit_);  // "1 batch"
  } else {
    text << " " << unit_;
  }
  text << ", " << rate_text(rate) << " " << unit_ << "/s";
  if (total_ && done_ < *total_ && rate > 0) {
    text << ", about " << clock_time(static_cast<double>(*total_ - done_) / rate) << " left";
  }
  return text.str();
}

std::string Progress::bar() const {
  const double elapsed = elapsed_secs();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  std::ostringstream text;
  text << label_;
  if (total_) {
    const double fraction =
        *total_ > 0 ? std::clamp(static_cast<double>(done_) / *total_, 0.0, 1.0) : 1.0;
    const int filled = static_cast<int>(fraction * kBarCells);
    char percent[8];
    std::snprintf(percent, sizeof percent, "%3d%%", static_cast<int>(fraction * 100));
    text << " " << percent << "|" << std::string(filled, '#')
         << std::string(kBarCells - filled, ' ') << "| " << done_ << "/" << *total_ << " " << unit_
         << " [" << clock_time(elapsed);
    if (done_ < *total_ && rate > 0) {
      text << "<" << clock_time(static_cast<double>(*total_ - done_) / rate);
    }
  } else {
    text << " " << done_ << " " << unit_ << " [" << clock_time(elapsed);
  }
  text << ", " << rate_text(rate) << " " << unit_ << "/s]";
  return text.str();
}

}  // namespace trainyard
