#include "train/train_hooks.h"

#include <cmath>
#include <filesystem>
#include <optional>

#include "trainyard/autodiff.h"
#include "trainyard/core/evaluator.h"
#include "trainyard/core/exporter.h"
#include "trainyard/core/progress.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/core/stop_signals.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

// ---- CheckpointHook ----

CheckpointHook::CheckpointHook(const config::TrainConfig& tc, int64_t restored_step)
    : checkpoints_(tc.train_dir(), tc.max_to_keep(), tc.keep_checkpoint_every_n_hours()),
      interval_secs_(tc.save_interval_secs()),
      last_save_(Clock::now()),
      saved_step_(restored_step) {}

void CheckpointHook::save(LoopState& s) {
  Backend& backend = s.step.backend();
  std::vector<std::pair<std::string, Tensor>> tensors = s.step.state(s.global_step);
  tensors.emplace_back(
      kInputBatchesName,
      Tensor::from_vector(backend, Shape{}, std::vector<int64_t>{s.input_batches}));
  tensors.emplace_back(
      kSeedName,
      Tensor::from_vector(backend, Shape{}, std::vector<int64_t>{static_cast<int64_t>(s.seed)}));
  s.result.last_checkpoint = checkpoints_.save(s.global_step, tensors);
  saved_step_ = s.global_step;
  s.log << "saved checkpoint " << s.result.last_checkpoint << std::endl;
}

const std::string& CheckpointHook::ensure_saved(LoopState& s) {
  if (saved_step_ != s.global_step) save(s);
  return s.result.last_checkpoint;
}

void CheckpointHook::after_step(LoopState& s, const StepResult&, const Batch&, int64_t) {
  if (seconds_since(last_save_) >= interval_secs_) {
    save(s);
    last_save_ = Clock::now();
  }
}

void CheckpointHook::end(LoopState& s) {
  if (s.global_step > 0 && !s.step.trained().empty()) ensure_saved(s);
}

// ---- LoggingHook ----

LoggingHook::LoggingHook(int64_t every_n_steps)
    : every_(std::max<int64_t>(1, every_n_steps)), start_(Clock::now()), last_log_(start_) {}

void LoggingHook::before_step(LoopState& s) {
  if (first_step_time_) return;
  first_step_time_ = Clock::now();
  first_step_ = s.global_step;
}

void LoggingHook::after_step(LoopState& s, const StepResult& r, const Batch& batch,
                             int64_t batch_size) {
  examples_since_log_ += batch_size * s.replicas;
  examples_ += batch_size * s.replicas;
  if (s.global_step % every_ != 0) return;
  double eps = static_cast<double>(examples_since_log_) / std::max(seconds_since(last_log_), 1e-9);
  s.result.examples_per_sec = eps;
  TrainStepReport report;
  report.global_step = s.global_step;
  report.loss = r.loss;
  report.learning_rate = r.learning_rate;
  report.examples_per_sec = eps;
  report.predictions = &r.predictions;
  report.batch = &batch;
  report.batch_size = batch_size;
  s.task.report_train_step(s.task_pipeline, report, s.log, *s.summaries);
  log_progress(s);
  InputStats input_stats = s.data.stats();
  if (input_stats.corrupt_skipped > 0) {
    s.log << "skipped " << input_stats.corrupt_skipped
          << " corrupt records so far (skip_corrupt_records)\n";
    s.summaries->add_scalar("input/corrupt_records_skipped",
                            static_cast<double>(input_stats.corrupt_skipped), s.global_step);
  }
  if (input_stats.shuffle_buffer_limited_to > 0 && !buffer_limit_reported_) {
    buffer_limit_reported_ = true;
    s.log << "the shuffle buffer holds as few as " << input_stats.shuffle_buffer_limited_to
          << " records, fewer than its capacity, to keep its records within half the input "
             "memory budget (memory_budget_mb; by default a quarter of this machine's memory, so "
             "set it for an order that is the same on every machine)\n";
  }
  last_log_ = Clock::now();
  examples_since_log_ = 0;
}

void LoggingHook::log_progress(LoopState& s) {
  const config::TrainConfig& tc = s.pipeline.train_config();
  const int64_t num_epochs = s.pipeline.train_input_reader().num_epochs();
  const double pace_secs =
      first_step_time_ ? std::chrono::duration<double>(Clock::now() - *first_step_time_).count()
                       : 0.0;
  const int64_t steps = s.global_step - first_step_;
  s.log << "progress: " << clock_time(seconds_since(start_)) << " elapsed";
  // The fraction of the run still to go, when something bounds it and it can be known.
  double left_fraction = -1;  // of the work done so far in this run
  if (tc.has_max_steps()) {
    s.log << ", step " << s.global_step << " of " << tc.max_steps();
    if (steps > 0) left_fraction = static_cast<double>(tc.max_steps() - s.global_step) / steps;
  }
  if (num_epochs > 0) {
    const InputStats stats = s.data.stats();
    // The pipeline reads ahead, so its count at the first epoch's end overstates the epoch by
    // the batches in flight at most: an estimate, as the line says.
    if (examples_per_epoch_ < 0 && stats.epochs_completed > 0) {
      examples_per_epoch_ = std::max<int64_t>(stats.records * s.replicas, 1);
    }
    s.log << ", epoch " << std::min(stats.epochs_completed + 1, num_epochs) << " of " << num_epochs;
    if (examples_per_epoch_ > 0 && examples_ > 0) {
      // Examples of the whole run still to train, over those this run trained.
      const double epoch_left =
          static_cast<double>(num_epochs * examples_per_epoch_ -
                              s.input_batches * s.pipeline.train_config().batch_size());
      const double by_epochs = std::max(epoch_left, 0.0) / static_cast<double>(examples_);
      left_fraction = left_fraction < 0 ? by_epochs : std::min(left_fraction, by_epochs);
    }
  }
  if (left_fraction >= 0 && pace_secs > 0) {
    s.log << ", about " << clock_time(left_fraction * pace_secs) << " left";
  }
  s.log << std::endl;  // a log file shows the window when it is written, not when a buffer fills
}

// ---- HistogramHook ----

HistogramHook::HistogramHook(double every_secs, bool gradients)
    : every_secs_(every_secs), gradients_(gradients), last_(Clock::now()) {}

bool HistogramHook::due() const { return seconds_since(last_) >= every_secs_; }

bool HistogramHook::wants_gradients(const LoopState&) {
  due_ = due();
  return due_ && gradients_;
}

void HistogramHook::after_step(LoopState& s, const StepResult& r, const Batch&, int64_t) {
  if (!due_) return;
  write(s, &r);
  last_ = Clock::now();
}

void HistogramHook::end(LoopState& s) {
  if (s.global_step > 0 && !s.step.trained().empty()) write(s, nullptr);
}

void HistogramHook::write(LoopState& s, const StepResult* last) {
  NoGradScope no_grad;
  for (Variable* v : s.step.trained()) {
    s.summaries->add_histogram(v->name(), ops::cast(v->value(), DType::kF64).to_vector<double>(),
                               s.global_step);
  }
  if (last == nullptr) return;
  for (const auto& [name, g] : last->gradients) {
    std::vector<double> values = ops::cast(g, DType::kF64).to_vector<double>();
    double norm = 0.0;
    for (double x : values) norm += x * x;
    s.summaries->add_histogram(name + "/gradient", values, s.global_step);
    s.summaries->add_scalar(name + "/gradient_norm", std::sqrt(norm), s.global_step);
  }
}

// ---- TraceHook ----

TraceHook::TraceHook(int64_t every_n_steps, std::string train_dir)
    : every_(every_n_steps), train_dir_(std::move(train_dir)) {}

void TraceHook::before_step(LoopState& s) {
  if (every_ > 0 && s.global_step % every_ == 0) {
    trace_.emplace();
    traced_step_ = s.global_step;
  }
}

void TraceHook::after_step(LoopState&, const StepResult&, const Batch&, int64_t) {
  if (!trace_) return;
  trace_->write_json(
      (fs::path(train_dir_) / ("tf_trace-" + std::to_string(traced_step_) + ".json")).string());
  trace_.reset();
}

// ---- ExportHook ----

ExportHook::ExportHook(int64_t every_n_steps, CheckpointHook& checkpoints, int64_t first_step)
    : every_(every_n_steps), checkpoints_(checkpoints), last_export_(first_step) {}

void ExportHook::after_step(LoopState& s, const StepResult&, const Batch&, int64_t) {
  if (every_ <= 0 || s.global_step - last_export_ < every_) return;
  const std::string& checkpoint = checkpoints_.ensure_saved(s);
  std::string dir = (fs::path(s.pipeline.train_config().train_dir()) / "export" /
                     ("step_" + std::to_string(s.global_step)))
                        .string();
  // train.py's export is a SavedModel (export_model.ModelExporter); Trainyard's own files, which
  // predict and eval read, stay beside it.
  const std::optional<SavedModelContents> saved =
      starter_saved_model(s.registry, s.pipeline, checkpoint, s.log);
  export_model(s.registry, s.pipeline, checkpoint, dir, [&](const std::string& staging) {
    if (saved) write_saved_model_files(*saved, staging);
  });
  s.log << "exported the model at step " << s.global_step << " to " << dir << "\n";
  last_export_ = s.global_step;
}

EvaluationHook::EvaluationHook(const config::Pipeline& pipeline, const Task& task,
                               CheckpointHook& checkpoints)
    : throttle_secs_(pipeline.eval_config().throttle_secs()),
      checkpoints_(checkpoints),
      exporters_(pipeline, task),
      last_(Clock::now()) {
  eval_dir(pipeline);  // refuses a bad eval_config.name before the first step
}

void EvaluationHook::after_step(LoopState& s, const StepResult&, const Batch&, int64_t) {
  if (checkpoints_.saved_step() != s.global_step || seconds_since(last_) < throttle_secs_) return;
  evaluate_now(s, /*final=*/false);
}

void EvaluationHook::end(LoopState& s) {
  if (s.stop_signal != 0) {
    // A scheduler's grace period is too short for an evaluation; the resumed run makes it.
    s.log << "final evaluation skipped: stopped by " << signal_name(s.stop_signal) << "\n";
    return;
  }
  if (evaluated_step_ != s.global_step) {
    evaluate_now(s, /*final=*/true);
    return;
  }
  // The last step was evaluated by after_step: only the FINAL exporters are left to run.
  exporters_.after_evaluation(s.registry, s.pipeline, evaluated_checkpoint_,
                              s.result.evaluations.back(), /*final=*/true, s.log, true);
}

void EvaluationHook::evaluate_now(LoopState& s, bool final) {
  const std::string checkpoint = checkpoints_.ensure_saved(s);
  s.result.evaluations.push_back(evaluate(s.registry, s.pipeline, checkpoint, s.log));
  evaluated_step_ = s.global_step;
  evaluated_checkpoint_ = checkpoint;
  last_ = Clock::now();
  exporters_.after_evaluation(s.registry, s.pipeline, checkpoint, s.result.evaluations.back(),
                              final, s.log, false);
}

}  // namespace trainyard
