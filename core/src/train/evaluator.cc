#include "trainyard/core/evaluator.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "engine/model_context.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/atomic_file.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/progress.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/stop_signals.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/error.h"
#include "trainyard/loss.h"
#include "trainyard/proto/event.pb.h"
#include "trainyard/reader.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// What eval and predict share: the model restored from a checkpoint as it creates its
// variables, and one deterministic pass over `input`.
struct Inference {
  std::string prefix;
  std::shared_ptr<Backend> backend;
  std::shared_ptr<BaseModel> model;
  std::shared_ptr<Reader> reader;
  std::unique_ptr<CheckpointReader> restore;
  std::unique_ptr<VariableStore> store;
  std::unique_ptr<StoreContext> ctx;
  std::unique_ptr<InputPipeline> data;

  Inference(const PluginRegistry& registry, const config::Pipeline& pipeline,
            const std::string& checkpoint_prefix, const config::InputReader& input) {
    prefix = checkpoint_or_latest(pipeline, checkpoint_prefix);
    backend = make_inference_backend(registry, pipeline);
    model = make_model(registry, pipeline);
    reader = make_reader(registry, pipeline, input, "eval_input_reader.reader");
    restore = std::make_unique<CheckpointReader>(prefix);
    store = std::make_unique<VariableStore>(*backend, 0);
    ctx =
        std::make_unique<StoreContext>(*backend, *store, pipeline.num_classes(), 0, restore.get());
    ctx->set_use_averages(pipeline.eval_config().use_moving_averages() ||
                          pipeline.train_config().use_moving_average());
    InputOptions options = input_options_from_config(input, pipeline.eval_config().batch_size(), 0,
                                                     "eval_input_reader");
    options.num_epochs = 1;
    options.shuffle = false;
    options.deterministic = true;
    data = std::make_unique<InputPipeline>(*reader, options);
  }
};

constexpr const char* kStagingPrefix = ".evaluating.";

// Removes the staging directories (evaluate) that evaluators no longer running left in `dir`
// when they were killed: ".evaluating.<pid>.<n>" whose process is gone.
void remove_abandoned_staging(const fs::path& dir) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kStagingPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + std::strlen(kStagingPrefix), nullptr, 10);
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
      fs::remove_all(entry.path(), error);
    }
  }
}

// The largest step a checkpoint or an event file may name: 2^53, the largest integer a double
// (TensorFlow's float global_step reads, summary steps) holds exactly.
constexpr int64_t kMaxStep = int64_t{1} << 53;

// The global_step `checkpoint` holds. Throws DataLoss naming the checkpoint when it is not an
// integer in [0, kMaxStep] (a forged or damaged value would be evaluated never, or always).
int64_t checkpoint_step(const CheckpointReader& checkpoint, Backend& backend) {
  const double value = to_double(checkpoint.read("global_step", backend));
  if (!(value >= 0 && value <= static_cast<double>(kMaxStep)) || value != std::floor(value)) {
    std::ostringstream text;
    text << std::setprecision(17) << value;
    throw DataLoss("checkpoint " + checkpoint.prefix() + " holds global_step " + text.str() +
                   ", not an integer in [0, 2^53]; it is not evaluated");
  }
  return static_cast<int64_t>(value);
}

// A step an earlier evaluator recorded in eval_dir, and the event file that records it.
struct RecordedStep {
  int64_t step;
  std::string file;
};

// The steps earlier evaluators recorded in eval_dir: the step of any scalar there, so a
// restarted evaluator does not evaluate a checkpoint again. A step outside [0, kMaxStep] is
// ignored with a warning naming its file. Removes what killed evaluators left
// (remove_abandoned_staging).
std::vector<RecordedStep> recorded_steps(const config::Pipeline& pipeline, std::ostream& log) {
  std::vector<RecordedStep> recorded;
  fs::path dir = eval_dir(pipeline);
  if (!fs::is_directory(dir)) return recorded;
  remove_abandoned_staging(dir);
  for (const std::string& file : EventFileReader::list_event_files(dir.string())) {
    int64_t last = -1;
    try {
      EventFileReader reader(file);
      tf::Event event;
      while (reader.next(&event)) {
        if (event.summary().value_size() == 0) continue;
        if (event.step() < 0 || event.step() > kMaxStep) {
          log << "warning: " << file << " records an evaluation at step " << event.step()
              << ", outside [0, 2^53]; ignored" << std::endl;
          continue;
        }
        last = std::max<int64_t>(last, event.step());
      }
    } catch (const DataLoss&) {
      // A damaged event file only means that step may be evaluated again.
    }
    if (last >= 0) recorded.push_back({last, file});
  }
  return recorded;
}

}  // namespace

std::string eval_dir(const config::Pipeline& pipeline) {
  const std::string& name = pipeline.eval_config().name();
  if (name.find('/') != std::string::npos || name == "." || name == "..") {
    throw ConfigError("eval_config.name '" + name + "' is not a plain directory name");
  }
  return (fs::path(pipeline.train_config().train_dir()) / (name.empty() ? "eval" : "eval_" + name))
      .string();
}

double EvalResult::metric(const std::string& name) const {
  std::string known;
  for (const Metric& m : metrics) {
    if (m.name == name) return m.value;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  throw NotFound("no metric '" + name + "' in the evaluation; it has: " + known);
}

EvalResult evaluate(const PluginRegistry& registry, const config::Pipeline& pipeline,
                    const std::string& checkpoint_prefix, std::ostream& log) {
  const config::TrainConfig& tc = pipeline.train_config();
  const std::shared_ptr<const Task> task_object = task_of(registry, pipeline);
  const Task& task = *task_object;
  const config::InputReader& input = pipeline.eval_input_reader().has_data_pattern()
                                         ? pipeline.eval_input_reader()
                                         : pipeline.train_input_reader();
  Inference run(registry, pipeline, checkpoint_prefix, input);
  auto loss_fn = create_plugin<Loss>(registry, ClassKind::kLoss, loss_class(registry, pipeline),
                                     tc.has_label_loss() ? &tc.label_loss() : nullptr,
                                     "train_config.label_loss");
  std::unique_ptr<TaskEvaluation> evaluation =
      task.make_evaluation(task_pipeline_of(task, pipeline));
  EvalResult result;
  result.global_step = checkpoint_step(*run.restore, *run.backend);
  NoGradScope no_grad;
  int64_t batches = 0;
  const bool limited = pipeline.eval_config().has_steps();
  const int64_t steps = pipeline.eval_config().steps();
  if (limited && steps <= 0) {
    throw ConfigError("eval_config.steps is " + std::to_string(steps) +
                      "; expected > 0 (leave it unset to evaluate the whole input)");
  }
  Progress progress("evaluating step " + std::to_string(result.global_step), "batches",
                    limited ? std::optional<int64_t>(steps) : std::nullopt, log);
  while (!limited || batches < steps) {
    if (int signal = StopSignals::requested()) {
      throw Stopped(signal, "stopped by " + signal_name(signal) + " during the evaluation of " +
                                checkpoint_prefix + " (after " + std::to_string(batches) +
                                " batches); nothing was written for it");
    }
    std::optional<HostBatch> host = run.data->next();
    if (!host) break;
    ++batches;
    int64_t batch_size = host->size;
    Batch batch = to_device(task, *run.backend, *host);
    run.data->recycle(std::move(*host));
    ModelOutput out = guard_plugin_call(
        *run.model, "forward", [&] { return run.model->forward(*run.ctx, batch, Mode::kEval); });
    Tensor loss = out.loss ? *out.loss : guard_plugin_call(*loss_fn, "calculate_loss", [&] {
      return loss_fn->calculate_loss(out.predictions, batch.labels, std::nullopt);
    });
    add_model_outputs(*run.model, batch);
    evaluation->add(out.predictions, batch, to_double(loss), batch_size);
    result.examples += batch_size;
    progress.advance();
  }
  progress.finish();
  result.metrics = evaluation->result();
  // The event files in eval_dir are the record of the steps evaluated (last_evaluated_step):
  // this evaluation's file is written in a hidden staging directory and linked into eval_dir
  // only once closed and fsynced, so a killed evaluator leaves no part of an evaluation there
  // and the next one evaluates that checkpoint again.
  const fs::path dir = eval_dir(pipeline);
  fs::create_directories(dir);
  remove_abandoned_staging(dir);
  static std::atomic<int> evaluations{0};
  const fs::path staging = dir / (std::string(kStagingPrefix) + std::to_string(::getpid()) + "." +
                                  std::to_string(evaluations++));
  fs::remove_all(staging);  // left by a killed process that had this pid
  struct RemoveStaging {
    const fs::path& dir;
    ~RemoveStaging() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{staging};
  SummaryWriter summaries(staging.string(), event_file_suffix());
  task.report_evaluation(result.global_step, result.metrics, log, summaries);
  evaluation->write_summaries(result.global_step, summaries);
  summaries.close();
  const fs::path written(summaries.path());
  const fs::path published = dir / written.filename();
  if (::link(written.c_str(), published.c_str()) != 0) {
    throw Error("cannot move the evaluation's event file " + written.string() + " to " +
                published.string() + ": " + std::strerror(errno));
  }
  sync_directory(dir.string());
  return result;
}

std::vector<EvalResult> evaluate_checkpoints(const PluginRegistry& registry,
                                             const config::Pipeline& pipeline, std::ostream& log) {
  const config::EvalConfig& ec = pipeline.eval_config();
  const std::string& train_dir = pipeline.train_config().train_dir();
  StopSignals stop_signals;  // evaluate() abandons its evaluation; waiting ends between naps
  std::vector<EvalResult> results;
  std::vector<RecordedStep> recorded;
  if (!ec.run_once()) recorded = recorded_steps(pipeline, log);
  int64_t last_step = -1;
  auto last_new = Clock::now();
  bool waiting_logged = false;
  std::shared_ptr<Backend> backend;  // for reading global_step, made once
  while (true) {
    std::optional<std::string> latest = latest_checkpoint(train_dir);
    if (!latest && ec.run_once()) throw NotFound("no checkpoint in train_dir " + train_dir);
    if (latest) {
      if (!backend) backend = make_backend(registry, pipeline);
      const int64_t step = checkpoint_step(CheckpointReader(*latest), *backend);
      if (!recorded.empty()) {
        // A record above the newest checkpoint's step describes no checkpoint there is: it
        // would keep every checkpoint up to that step from being evaluated.
        for (const RecordedStep& r : recorded) {
          if (r.step > step) {
            log << "warning: " << r.file << " records an evaluation at step " << r.step
                << ", above the newest checkpoint's step " << step << " (" << *latest
                << "); ignored" << std::endl;
          } else {
            last_step = std::max(last_step, r.step);
          }
        }
        recorded.clear();
        if (last_step >= 0) {
          log << "step " << last_step << " was evaluated by an earlier run (" << eval_dir(pipeline)
              << "); waiting for newer checkpoints\n";
        }
      }
      if (step > last_step) {
        results.push_back(evaluate(registry, pipeline, *latest, log));
        log.flush();  // a log file shows each evaluation when it ends
        last_step = step;
        last_new = Clock::now();
        waiting_logged = false;
      } else if (!waiting_logged) {
        log << "step " << step << " is evaluated; waiting for a newer checkpoint in " << train_dir
            << std::endl;
        waiting_logged = true;
      }
    }
    if (ec.run_once()) {
      if (results.empty()) {
        throw Error("eval --run_once evaluated nothing: the newest checkpoint " + *latest +
                    " is not after step " + std::to_string(last_step) + ", evaluated already");
      }
      return results;
    }
    double waited = std::chrono::duration<double>(Clock::now() - last_new).count();
    if (ec.timeout_secs() > 0 && waited >= ec.timeout_secs()) {
      log << std::defaultfloat << "no new checkpoint for " << ec.timeout_secs() << " s; stopping\n";
      return results;
    }
    double pause = ec.eval_interval_secs();
    if (ec.timeout_secs() > 0) pause = std::min(pause, ec.timeout_secs() - waited);
    const auto wake = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(std::max(pause, 0.01)));
    while (Clock::now() < wake) {
      if (int signal = StopSignals::requested()) {
        throw Stopped(signal, "stopped by " + signal_name(signal) +
                                  " while waiting for a new checkpoint in " + train_dir);
      }
      std::this_thread::sleep_until(std::min(wake, Clock::now() + std::chrono::milliseconds(200)));
    }
  }
}

int64_t predict(const PluginRegistry& registry, const config::Pipeline& pipeline,
                const std::string& checkpoint_prefix, const std::string& output_file, int top_k,
                std::ostream& log) {
  if (top_k < 1) throw InvalidArgument("--top_k must be >= 1, got " + std::to_string(top_k));
  const config::InputReader& input = pipeline.eval_input_reader();
  if (input.data_pattern().empty()) throw ConfigError("no input data: set --input_data_pattern");
  const std::shared_ptr<const Task> task_object = task_of(registry, pipeline);
  const Task& task = *task_object;
  Inference run(registry, pipeline, checkpoint_prefix, input);
  AtomicFile file(output_file);
  const std::string& temporary = file.temporary_path();
  std::ofstream out(temporary, std::ios::trunc);
  if (!out) throw Error("cannot write " + temporary);
  int64_t examples = 0;
  {
    std::unique_ptr<PredictionWriter> writer =
        task.make_prediction_writer(task_pipeline_of(task, pipeline), out, top_k);
    NoGradScope no_grad;
    Progress progress("predict", "examples", std::nullopt, log);
    while (std::optional<HostBatch> host = run.data->next()) {
      Batch batch = to_device(task, *run.backend, *host);
      run.data->recycle(std::move(*host));
      ModelOutput result = guard_plugin_call(*run.model, "forward", [&] {
        return run.model->forward(*run.ctx, batch, Mode::kPredict);
      });
      add_model_outputs(*run.model, batch);
      writer->write(result.predictions, batch);
      examples += static_cast<int64_t>(batch.ids.size());
      progress.set(examples);
    }
    progress.finish();
  }
  out.close();
  if (!out) throw Error("cannot write " + temporary);
  file.commit();
  log << "wrote predictions for " << examples << " examples to " << output_file << " (from "
      << run.prefix << ")\n";
  return examples;
}

}  // namespace trainyard
