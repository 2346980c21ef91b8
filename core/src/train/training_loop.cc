#include "trainyard/core/training_loop.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "registry/pipeline_plugins.h"
#include "train/data_parallel.h"
#include "train/nan_rollback.h"
#include "train/train_hooks.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/stop_signals.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/core/task.h"
#include "trainyard/core/train_dir_lock.h"
#include "trainyard/core/train_step.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/reader.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

// "a, b, c" for the first dozen names (sorted), then how many more.
std::string first_names(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < 12; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 12) text += " (and " + std::to_string(names.size() - 12) + " more)";
  return text;
}

// start_new_model: deletes what train_dir holds when it holds a training run (its `checkpoint`
// state file, model.ckpt-* files or the event files every run writes from its start), saying
// what; the lock file this run holds stays. Refuses, deleting nothing, when train_dir holds
// anything else.
void start_new_model(const std::string& train_dir, std::ostream& log) {
  std::error_code error;
  if (!fs::exists(train_dir, error)) return;
  if (!fs::is_directory(train_dir, error)) {
    throw ConfigError("start_new_model: train_dir " + train_dir +
                      " is not a directory; it is not deleted");
  }
  std::vector<fs::path> entries;
  std::vector<std::string> names;
  bool run = false;
  for (fs::directory_iterator it(train_dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name == TrainDirLock::kFileName) continue;  // held by this run
    run |= name == "checkpoint" || name.starts_with("model.ckpt-") ||
           name.starts_with("events.out.tfevents.");
    entries.push_back(it->path());
    names.push_back(name);
  }
  if (error) {
    throw ConfigError("start_new_model: cannot list " + train_dir + ": " + error.message());
  }
  if (entries.empty()) return;
  if (!run) {
    throw ConfigError("start_new_model: " + train_dir +
                      " holds no training run (no `checkpoint` state file, model.ckpt-* or "
                      "events.out.tfevents.*), so nothing in it is deleted; it holds " +
                      first_names(names) + ". Set --train_dir to the run's directory or a new one");
  }
  log << "start_new_model: deleting the training run in " << train_dir << ": " << first_names(names)
      << "\n";
  for (const fs::path& entry : entries) {
    fs::remove_all(entry, error);
    if (error) {
      throw ConfigError("start_new_model: cannot delete " + entry.string() + ": " +
                        error.message());
    }
  }
}

void prepare_train_dir(config::TrainConfig& tc, std::ostream& log) {
  const std::string& train_dir = tc.train_dir();
  if (tc.start_new_model()) start_new_model(train_dir, log);
  std::error_code ec;
  fs::create_directories(train_dir, ec);
  if (ec || !fs::is_directory(train_dir)) {
    throw ConfigError("cannot create train_dir " + train_dir + ": " + ec.message());
  }
  if (::access(train_dir.c_str(), W_OK) != 0) {
    throw ConfigError("train_dir " + train_dir + " is not writable");
  }
}

// Discards what is written to it: the log of a replica that is not the chief.
class NullLog : public std::ostream {
 public:
  NullLog() : std::ostream(nullptr) {}
};

// The run's state as the chief found it, on every replica: [global_step, input_batches, seed,
// seed given].
void broadcast_start(Collective& collective, Backend& backend, int64_t& global_step,
                     int64_t& input_batches, config::TrainConfig& tc) {
  Tensor start = Tensor::from_vector(
      backend, Shape{4},
      std::vector<int64_t>{global_step, input_batches, static_cast<int64_t>(tc.seed()),
                           tc.has_seed() ? 1 : 0});
  collective.broadcast(start, 0);
  const std::vector<int64_t> values = start.to_vector<int64_t>();
  global_step = values[0];
  input_batches = values[1];
  if (values[3] != 0) tc.set_seed(static_cast<uint64_t>(values[2]));
}

}  // namespace

TrainResult train(const PluginRegistry& registry, const config::Pipeline& pipeline_in,
                  std::ostream& chief_log) {
  config::Pipeline pipeline = pipeline_in;
  config::TrainConfig& tc = *pipeline.mutable_train_config();
  const std::shared_ptr<const Task> task_object = task_of(registry, pipeline);
  const Task& task = *task_object;
  const TaskPipeline task_view = task_pipeline_of(task, pipeline);
  // SIGINT, SIGTERM, SIGHUP: the loop finishes its step, the checkpoint hook saves, the loop ends.
  //
  // The order of the locals below is the run's teardown order, one for every way out (the end of
  // the input or max_steps, a stop signal, an error, a NaN rollback that gives up): destroyed in
  // reverse, the hooks go first, then the input pipeline (joining its reader and batch threads),
  // the summary writer (joining its flusher), the reader, the train step (model, variables,
  // optimizer, backend and its allocator), the collective (joining its progress thread), the
  // train_dir lock and this scope. A thread is joined before anything it uses is freed; keep it
  // so when adding a local.
  StopSignals stop_signals;
  // Data parallelism: rank 0 is the chief; it alone writes to train_dir and logs.
  std::shared_ptr<Collective> collective = make_run_collective(registry, pipeline, chief_log);
  const int replicas = collective ? collective->world_size() : 1;
  const int rank = collective ? collective->rank() : 0;
  const bool chief = rank == 0;
  NullLog quiet;
  std::ostream& log = chief ? chief_log : quiet;
  // One writer per train_dir, held from before start_new_model clears it to the last save.
  std::optional<TrainDirLock> lock;
  if (chief) {
    std::error_code made;
    fs::create_directories(tc.train_dir(), made);  // a failure is prepare_train_dir's to report
    if (!made && fs::is_directory(tc.train_dir())) {
      lock.emplace(
          tc.train_dir(),
          pipeline.eval_config().evaluate_during_training() ? "train_and_evaluate" : "train", log);
    }
    prepare_train_dir(tc, log);
  }
  const std::string train_dir = tc.train_dir();
  if (chief) check_or_record_run(task, pipeline, train_dir);
  const config::InputReader& input = pipeline.train_input_reader();
  if (input.data_pattern().empty()) {
    throw ConfigError(
        "no training data: set --train_data_pattern (train_input_reader.data_pattern)");
  }

  // State: the latest checkpoint when there is one, with the step, the seed and the input
  // position it reached. The chief reads it; the other replicas take the step, input position
  // and seed from the chief, and every variable from it after the first forward pass.
  std::optional<CheckpointReader> restore;
  int64_t global_step = 0;
  int64_t input_batches = 0;
  // The newest intact checkpoint; damaged newer ones are moved aside and reported.
  std::optional<std::string> latest;
  if (chief) latest = recover_latest_checkpoint(train_dir, log);
  if (latest) {
    restore.emplace(*latest);
    std::shared_ptr<Backend> reading = make_backend(registry, pipeline);
    auto scalar = [&](const char* name) -> int64_t {
      return ops::cast(restore->read(name, *reading), DType::kI64).to_vector<int64_t>().at(0);
    };
    global_step = scalar("global_step");
    if (restore->contains(CheckpointHook::kInputBatchesName)) {
      input_batches = scalar(CheckpointHook::kInputBatchesName);
    }
    if (!tc.has_seed() && restore->contains(CheckpointHook::kSeedName)) {
      tc.set_seed(static_cast<uint64_t>(scalar(CheckpointHook::kSeedName)));
    }
    log << "restoring from " << *latest << " at step " << global_step << std::endl;
  }
  if (replicas > 1) {
    std::shared_ptr<Backend> backend = make_backend(registry, pipeline);
    broadcast_start(*collective, *backend, global_step, input_batches, tc);
  }
  const uint64_t seed = tc.has_seed() ? tc.seed() : 0;
  TrainStep step(registry, pipeline, restore ? &*restore : nullptr, log);
  Backend& backend = step.backend();
  if (replicas > 1) {
    if (!(tc.gradient_bucket_mb() > 0) || tc.gradient_bucket_mb() > 1e6) {
      throw ConfigError("train_config.gradient_bucket_mb is " +
                        std::to_string(tc.gradient_bucket_mb()) +
                        "; it must be more than 0 and at most 1e6");
    }
    step.set_replicas(
        *collective,
        std::max<int64_t>(1, static_cast<int64_t>(tc.gradient_bucket_mb() * 1048576.0)));
  }
  auto reader = make_reader(registry, pipeline, input, "train_input_reader.reader");
  std::optional<SummaryWriter> summaries;
  if (chief) summaries.emplace(train_dir, event_file_suffix());
  InputOptions input_options = input_options_from_config(
      input, tc.batch_size() * std::max(1, tc.num_clones()), seed, "train_input_reader");
  input_options.shard_count = replicas;
  input_options.shard_index = rank;
  InputPipeline data(*reader, std::move(input_options));
  if (replicas > 1) {
    log << "data parallel: " << replicas << " replicas of batch_size " << tc.batch_size() << " ("
        << static_cast<int64_t>(replicas) * tc.batch_size() << " examples a step), rank " << rank
        << " is the chief; gradients averaged in buckets of " << tc.gradient_bucket_mb()
        << " MiB; input split " << data.stats().sharding << "\n";
  }
  if (tc.num_clones() > 1) {
    log << "towers: " << tc.num_clones() << " clones of batch_size " << tc.batch_size()
        << " a step, their gradients "
        << (tc.clone_gradients() == config::TrainConfig::MEAN ? "averaged (clone_gradients MEAN)"
                                                              : "summed (clone_gradients SUM)")
        << "\n";
  }
  if (input_batches > 0) {
    log << "skipping the " << input_batches << " batches the checkpoint's run already read\n";
    for (int64_t i = 0; i < input_batches; ++i) {
      std::optional<HostBatch> skipped = data.next();
      if (!skipped) break;
      data.recycle(std::move(*skipped));
    }
  }

  TrainResult result;
  result.chief = chief;
  LoopState state{
      registry, pipeline, task, task_view, step, data, summaries ? &*summaries : nullptr,
      log,      result};
  state.replicas = replicas;
  state.global_step = global_step;
  state.input_batches = input_batches;
  state.seed = seed;
  // In the order they run after each step: trace, log line, histograms, checkpoint, export.
  // The restored checkpoint is this step's: a run that ends before its first step (stopped, or
  // max_steps already reached) must not write it again (replacing it opens a window in which
  // a kill leaves it without its .index).
  if (restore) result.last_checkpoint = restore->prefix();
  auto checkpoints = std::make_unique<CheckpointHook>(tc, restore ? global_step : -1);
  CheckpointHook& checkpoint_hook = *checkpoints;
  std::vector<std::unique_ptr<TrainHook>> hooks;
  if (chief) {
    hooks.push_back(std::make_unique<TraceHook>(tc.trace_every_n_steps(), train_dir));
    hooks.push_back(std::make_unique<LoggingHook>(tc.log_every_n_steps()));
    hooks.push_back(
        std::make_unique<HistogramHook>(tc.save_summaries_secs(), tc.summarize_gradients()));
    hooks.push_back(std::move(checkpoints));
    hooks.push_back(
        std::make_unique<ExportHook>(tc.export_model_steps(), checkpoint_hook, global_step));
    // After the checkpoint hook, whose end() writes the final checkpoint it evaluates.
    if (pipeline.eval_config().evaluate_during_training()) {
      hooks.push_back(std::make_unique<EvaluationHook>(pipeline, task, checkpoint_hook));
    }
  }

  NanRollback nan_rollback(tc);
  while (!tc.has_max_steps() || state.global_step < tc.max_steps()) {
    int signal = StopSignals::requested();
    std::optional<HostBatch> host;
    if (signal == 0) host = data.next();
    if (replicas > 1) {
      // Every replica takes the step, or none: a stop signal or the end of the input on one
      // of them ends the loop on all, at the same step.
      Tensor flags =
          Tensor::from_vector(backend, Shape{2}, std::vector<int32_t>{signal, host ? 0 : 1});
      collective->all_reduce(flags, ReduceOp::kMax);
      const std::vector<int32_t> agreed = flags.to_vector<int32_t>();
      if (agreed[0] != 0 && signal == 0) signal = agreed[0];
      if (agreed[1] != 0 && host) {
        data.recycle(std::move(*host));
        host.reset();
      }
    }
    if (signal != 0) {
      state.stop_signal = signal;
      break;
    }
    if (!host) break;
    ++state.input_batches;
    int64_t batch_size = host->size;
    Batch batch = to_device(task, backend, *host);
    data.recycle(std::move(*host));
    bool want_gradients = false;
    for (auto& hook : hooks) want_gradients |= hook->wants_gradients(state);
    for (auto& hook : hooks) hook->before_step(state);
    StepResult r;
    try {
      r = step.run(batch, state.global_step, want_gradients);
    } catch (const NonFiniteError& e) {
      if (nan_rollback.recover(e, state, batch)) {
        step.broadcast_state();  // replicas: the chief's restored values everywhere
        continue;
      }
      throw nan_rollback.final_error(e, state, batch);
    }
    ++state.global_step;
    result.last_loss = r.loss;
    for (auto& hook : hooks) hook->after_step(state, r, batch, batch_size);
  }
  if (state.stop_signal == 0) state.stop_signal = StopSignals::requested();  // while reading
  for (auto& hook : hooks) hook->end(state);
  if (int64_t skipped = data.stats().corrupt_skipped; skipped > 0) {
    log << "skipped " << skipped << " corrupt records in all (skip_corrupt_records)\n";
  }
  if (summaries) summaries->close();
  result.global_step = state.global_step;
  result.stop_signal = state.stop_signal;
  if (state.stop_signal != 0) {
    result.end_reason = "stopped by " + signal_name(state.stop_signal);
  } else if (tc.has_max_steps() && state.global_step >= tc.max_steps()) {
    result.end_reason = "max_steps " + std::to_string(tc.max_steps()) + " reached";
  } else {
    result.end_reason = "the input ended (num_epochs " + std::to_string(input.num_epochs()) + ")";
  }
  return result;
}

}  // namespace trainyard
