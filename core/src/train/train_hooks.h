// The training loop's hooks (TF's SessionRunHooks, TF-Slim's supervisor duties): what runs
// around each step besides the step itself. The loop (training_loop.cc) calls every hook in
// order; none knows the task (logging goes through Task::report_train_step). Internal.
#ifndef TRAINYARD_CORE_SRC_TRAIN_HOOKS_H_
#define TRAINYARD_CORE_SRC_TRAIN_HOOKS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "train/eval_exporters.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/core/task.h"
#include "trainyard/core/trace.h"
#include "trainyard/core/train_step.h"
#include "trainyard/core/training_loop.h"

namespace trainyard {

// What the loop shares with its hooks.
struct LoopState {
  const PluginRegistry& registry;
  const config::Pipeline& pipeline;
  const Task& task;
  const TaskPipeline& task_pipeline;  // what the task reads of `pipeline`
  TrainStep& step;
  InputPipeline& data;
  SummaryWriter* summaries;  // the chief's (only rank 0 runs hooks); null on the others
  std::ostream& log;
  TrainResult& result;
  int64_t global_step = 0;    // steps done
  int64_t input_batches = 0;  // batches the input pipeline delivered, skipped ones included
  uint64_t seed = 0;
  int replicas = 1;     // data-parallel replicas: the log's rate counts all of their examples
  int stop_signal = 0;  // set when a stop signal ended the loop, before the hooks' end()
};

class TrainHook {
 public:
  virtual ~TrainHook() = default;
  // Whether the next step should hand back its gradients (StepResult::gradients).
  virtual bool wants_gradients(const LoopState&) { return false; }
  virtual void before_step(LoopState&) {}
  // After the step that made global_step what it is now.
  virtual void after_step(LoopState&, const StepResult&, const Batch&, int64_t /*batch_size*/) {}
  // When the loop ends normally.
  virtual void end(LoopState&) {}
};

// Saves checkpoints every save_interval_secs and at the end (with the trainer's own state:
// input position and seed). Other hooks ask it for a checkpoint of the current step.
class CheckpointHook final : public TrainHook {
 public:
  static constexpr const char* kInputBatchesName = "trainyard/input_batches";
  static constexpr const char* kSeedName = "trainyard/seed";

  // `restored_step`: the step of the checkpoint the run restored (already saved), -1 if none.
  CheckpointHook(const config::TrainConfig& tc, int64_t restored_step);
  void after_step(LoopState& s, const StepResult&, const Batch&, int64_t) override;
  void end(LoopState& s) override;
  // A checkpoint of the current step, written unless the last one is of it; its prefix.
  const std::string& ensure_saved(LoopState& s);
  // The step of the last checkpoint written (-1 before the first).
  int64_t saved_step() const { return saved_step_; }

 private:
  void save(LoopState& s);
  CheckpointManager checkpoints_;
  double interval_secs_;
  std::chrono::steady_clock::time_point last_save_;
  int64_t saved_step_ = -1;
};

// train.py's log line and scalars every log_every_n_steps (through the task), then a progress
// line (the time since the run started and, when max_steps or num_epochs bounds the run, an
// estimate of the time left, from this run's pace), and the corrupt-record count when records
// were skipped.
class LoggingHook final : public TrainHook {
 public:
  explicit LoggingHook(int64_t every_n_steps);
  void before_step(LoopState& s) override;
  void after_step(LoopState& s, const StepResult& r, const Batch& batch,
                  int64_t batch_size) override;

 private:
  void log_progress(LoopState& s);
  int64_t every_;
  std::chrono::steady_clock::time_point start_;  // the hook's creation: the run's setup done
  std::chrono::steady_clock::time_point last_log_;
  bool buffer_limit_reported_ = false;  // the shuffle buffer's memory limit, said once
  int64_t examples_since_log_ = 0;
  // The pace: from the first step of this run (a resumed run has its own).
  std::optional<std::chrono::steady_clock::time_point> first_step_time_;
  int64_t first_step_ = 0;
  int64_t examples_ = 0;             // delivered to this run's steps
  int64_t examples_per_epoch_ = -1;  // known once the input finished its first epoch
};

// Histograms of the trained variables (TF-Slim's model_variables summaries) and, with
// summarize_gradients, of their gradients and their norms, every save_summaries_secs and at
// the end.
class HistogramHook final : public TrainHook {
 public:
  HistogramHook(double every_secs, bool gradients);
  bool wants_gradients(const LoopState& s) override;
  void after_step(LoopState& s, const StepResult& r, const Batch&, int64_t) override;
  void end(LoopState& s) override;

 private:
  bool due() const;
  void write(LoopState& s, const StepResult* last);
  double every_secs_;
  bool gradients_;
  bool due_ = false;  // decided before each step, as the step's gradients depend on it
  std::chrono::steady_clock::time_point last_;
};

// A Chrome trace of every op of each step that is a multiple of trace_every_n_steps, as
// train_dir/tf_trace-N.json.
class TraceHook final : public TrainHook {
 public:
  TraceHook(int64_t every_n_steps, std::string train_dir);
  void before_step(LoopState& s) override;
  void after_step(LoopState& s, const StepResult&, const Batch&, int64_t) override;

 private:
  int64_t every_;
  std::string train_dir_;
  std::optional<StepTrace> trace_;
  int64_t traced_step_ = 0;
};

// train.py's export every export_model_steps, from a checkpoint of that step: train_dir/export/
// step_N holds Trainyard's export (exporter.h) and, for a pipeline whose reader parses examples
// (YouTube-8M), the starter's SavedModel (saved_model.pb, variables/; starter_saved_model).
class ExportHook final : public TrainHook {
 public:
  ExportHook(int64_t every_n_steps, CheckpointHook& checkpoints, int64_t first_step);
  void after_step(LoopState& s, const StepResult&, const Batch&, int64_t) override;

 private:
  int64_t every_;
  CheckpointHook& checkpoints_;
  int64_t last_export_;
};

// train_and_evaluate's evaluation (eval_config.evaluate_during_training): a checkpoint the
// CheckpointHook has just saved is evaluated when throttle_secs have passed since the last
// evaluation (or the start), and the final step at the end unless it was just evaluated; the
// exporters run after each evaluation, the FINAL ones at the end. Runs after the
// CheckpointHook.
class EvaluationHook final : public TrainHook {
 public:
  EvaluationHook(const config::Pipeline& pipeline, const Task& task, CheckpointHook& checkpoints);
  void after_step(LoopState& s, const StepResult&, const Batch&, int64_t) override;
  void end(LoopState& s) override;

 private:
  void evaluate_now(LoopState& s, bool final);
  double throttle_secs_;
  CheckpointHook& checkpoints_;
  EvalExporters exporters_;
  std::chrono::steady_clock::time_point last_;
  int64_t evaluated_step_ = -1;
  std::string evaluated_checkpoint_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_TRAIN_HOOKS_H_
