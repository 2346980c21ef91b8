// Tasks: what is specific to one family of seeds (YouTube-8M video classification, image
// classification, detection), beside the shared train step, loop, evaluator and exporter,
// which know no task.
//
// A task says which classes a pipeline uses when it names none, how a batch from the input
// pipeline goes to the device for its models, what a training run records in its train_dir
// and checks on resume, which metrics a logged training step and an evaluation report (and
// how the log lines and TensorBoard tags read), how predictions are written, and what an
// export carries besides the checkpoint and config. The pipeline config names the task
// (`task: "yt8m"`, the default); task_of() finds it.
//
// Tasks are stateless and shared; the objects they make (TaskEvaluation, PredictionWriter)
// belong to one run.
#ifndef TRAINYARD_CORE_TASK_H_
#define TRAINYARD_CORE_TASK_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/export.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

// One reported number: its name in log lines, its TensorBoard tag, its value.
struct Metric {
  std::string name;  // "Hit@1"
  std::string tag;   // "model/Training_Hit@1"
  double value = 0.0;
};

// What a logged training step hands the task.
struct TrainStepReport {
  int64_t global_step = 0;  // after the step
  double loss = 0.0;
  double learning_rate = 0.0;
  double examples_per_sec = 0.0;
  const Tensor* predictions = nullptr;
  const Batch* batch = nullptr;
  int64_t batch_size = 0;
};

// Metrics accumulated over the batches of one evaluation.
class TRAINYARD_API TaskEvaluation {
 public:
  virtual ~TaskEvaluation();
  virtual void add(const Tensor& predictions, const Batch& batch, double loss,
                   int64_t batch_size) = 0;
  // In the order they are logged.
  virtual std::vector<Metric> result() const = 0;
  // What an evaluation writes besides its metrics' scalars (the detection task's images with
  // boxes), into the evaluation's event file after report_evaluation(). Nothing by default.
  virtual void write_summaries(int64_t global_step, SummaryWriter& summaries) const;
};

// Writes the predictions of batches to a stream (a file written under a temporary name).
class TRAINYARD_API PredictionWriter {
 public:
  virtual ~PredictionWriter();
  virtual void write(const Tensor& predictions, const Batch& batch) = 0;
};

class TRAINYARD_API Task {
 public:
  virtual ~Task();
  virtual std::string name() const = 0;

  // The classes of a pipeline that names none.
  virtual std::string default_model() const = 0;
  virtual std::string default_loss() const = 0;
  virtual std::string default_optimizer() const = 0;
  virtual std::string default_reader() const = 0;

  // A batch from the input pipeline on `backend`, as this task's models expect it. Moves the
  // ids out of `host`; its buffers stay for InputPipeline::recycle().
  virtual Batch to_device(Backend& backend, HostBatch& host) const = 0;

  // Before training: checks the run against what train_dir records of the run that created
  // it, or records it there. Throws ConfigError naming the file and the disagreement.
  virtual void check_or_record_run(const config::Pipeline& pipeline,
                                   const std::string& train_dir) const = 0;

  // Logs a training step (every log_every_n_steps) and writes its scalars.
  virtual void report_train_step(const config::Pipeline& pipeline, const TrainStepReport& step,
                                 std::ostream& log, SummaryWriter& summaries) const = 0;

  virtual std::unique_ptr<TaskEvaluation> make_evaluation(
      const config::Pipeline& pipeline) const = 0;
  // The metrics an evaluation reports, by name and tag (values 0), in TaskEvaluation::result()'s
  // order: what an exporter or a config may refer to before any evaluation ran.
  virtual std::vector<Metric> evaluation_metrics() const = 0;
  // Logs an evaluation of the checkpoint at `global_step` and writes its scalars.
  virtual void report_evaluation(int64_t global_step, const std::vector<Metric>& metrics,
                                 std::ostream& log, SummaryWriter& summaries) const = 0;

  // A writer of predictions to `out` (which outlives it); top_k >= 1.
  virtual std::unique_ptr<PredictionWriter> make_prediction_writer(const config::Pipeline& pipeline,
                                                                   std::ostream& out,
                                                                   int top_k) const = 0;

  // Files an export carries besides the checkpoint and pipeline.config, written into
  // `export_dir` (the staging directory of the export).
  virtual void write_export_files(const config::Pipeline& pipeline,
                                  const std::string& export_dir) const = 0;
};

// Adds a task the core's own table does not have: one built beside the core because it needs a
// pkg/ library (the detection task), registered by the host that links it before any pipeline
// names it. Registering a name twice keeps the first.
TRAINYARD_API void register_task(const std::string& name, const Task& (*get)());

// The task `pipeline.task` names. Throws ConfigError listing the known tasks.
TRAINYARD_API const Task& task_of(const config::Pipeline& pipeline);
TRAINYARD_API const Task& find_task(const std::string& name);
TRAINYARD_API std::vector<std::string> task_names();

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TASK_H_
