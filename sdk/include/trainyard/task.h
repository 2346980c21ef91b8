// Tasks: what is specific to one family of seeds (YouTube-8M video classification, image
// classification, object detection), beside the shared train step, loop, evaluator and
// exporter, which know no task. A task is a plugin class of kind `task`, found by the name a
// pipeline config gives it (`task: "yt8m"`), as models and readers are: its class name is the
// task's name. A pipeline that names none is the task's whose defaults say it runs unnamed
// pipelines.
//
// A task says which classes a pipeline uses when it names none, what a batch needs on the
// device before its model sees it, what a training run records in its train_dir and checks on
// resume (and how eval, predict and export read that record back), which metrics a logged
// training step and an evaluation report (and how the log lines and TensorBoard tags read), how
// predictions are written, and what an export carries besides the checkpoint and config.
//
// A task reads the pipeline through TaskPipeline, plain data the host fills from the config;
// it never sees the config's Protocol Buffers. Task objects are stateless; the objects they make
// (TaskEvaluation, PredictionWriter) belong to one run and keep the task's library loaded
// through the task object they came from, which the host holds while they live.
#ifndef TRAINYARD_TASK_H_
#define TRAINYARD_TASK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/model.h"
#include "trainyard/plugin.h"
#include "trainyard/summaries.h"
#include "trainyard/tensor.h"

namespace trainyard {

// One reported number: its name in log lines, its TensorBoard tag (empty: logged only), its
// value.
struct Metric {
  std::string name;  // "Hit@1"
  std::string tag;   // "model/Training_Hit@1"
  double value = 0.0;
};

// A plugin class as the pipeline configures it: the class (the task's default where the config
// names none) and the params the config sets, each as text ("4", "true", "rgb,audio"), sorted
// by name.
struct ConfiguredClass {
  std::string class_name;
  std::vector<std::pair<std::string, std::string>> params;

  // The text of param `key`, or `fallback` when the config does not set it.
  std::string param(std::string_view key, const std::string& fallback) const {
    for (const auto& [k, v] : params) {
      if (k == key) return v;
    }
    return fallback;
  }
};

// What a task reads of a run's pipeline config.
struct TaskPipeline {
  std::string task;
  int64_t num_classes = 0;
  std::string train_dir;
  ConfiguredClass model;
  ConfiguredClass label_loss;
  ConfiguredClass train_reader;
  ConfiguredClass eval_reader;
  // eval_config
  int32_t eval_top_k = 20;
  int32_t num_visualizations = 0;
  float min_score_threshold = 0.5f;
  int32_t max_num_boxes_to_visualize = 20;
  std::vector<std::string> metrics_set;
  bool include_metrics_per_category = false;
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
  virtual void write_summaries(int64_t global_step, Summaries& summaries) const;
};

// Writes the predictions of batches to a stream (a file the host writes under a temporary
// name).
class TRAINYARD_API PredictionWriter {
 public:
  virtual ~PredictionWriter();
  virtual void write(const Tensor& predictions, const Batch& batch) = 0;
};

// Services the core offers a task that checks or records a run in its train_dir.
class TRAINYARD_API RunRecorder {
 public:
  virtual ~RunRecorder();
  // The record of runs described by their pipeline config alone: train_dir/pipeline.config,
  // written by the first run (the whole config, with defaults); a later run must keep its model,
  // the model's options, num_classes and task, or gets a ConfigError naming the file and both.
  virtual void check_or_record_pipeline_config() = 0;
};

// What a task's own record in train_dir says of the run that trained there, for eval, predict
// and export, which take no training flag again. Params are text, as ConfiguredClass's.
struct RecordedRun {
  std::string source;  // the file, named in errors ("run/model_flags.json")
  ConfiguredClass model;
  ConfiguredClass label_loss;
  // The reader's class and the params of its input layout (the host sets them on the evaluation
  // reader; a flag of the same name given to eval must agree with them).
  ConfiguredClass reader;
  int64_t num_classes = 0;  // 0: not recorded
};

// The task's defaults for a pipeline that names no class, and for a run that names no
// train_dir.
struct TaskDefaults {
  std::string model;
  std::string loss;
  std::string optimizer;
  std::string reader;
  std::string train_dir;  // "/tmp/yt8m_model/", the starter code's
  // Whether a pipeline that names no task is this task's. At most one task among the plugins
  // says so (the one whose original trains from flags alone, without a config); the host names
  // every claimant in its error when several do.
  bool runs_unnamed_pipelines = false;
};

// How the host's command-line flags meet this task's pipelines in `trainyard train` and
// `predict`. The host's flags are the originals' (one table per command); the task says which
// of their defaults are its own, so the host never asks which task it runs.
struct TaskFlagDialect {
  // Whether the starter-code flags of `trainyard train` apply to this task's pipelines with
  // their defaults, given or not: the learning rate (--base_learning_rate, --learning_rate_decay,
  // --learning_rate_decay_examples) and the input layout (--feature_names, --feature_sizes,
  // --frame_features), as the YouTube-8M starter code's train.py reads them. Without it a
  // pipeline takes the learning-rate flags only where given, and refuses the layout flags.
  bool starter_flags = false;
  // With starter_flags: --feature_names and --feature_sizes when they are not given (train.py's
  // "mean_rgb" and "1024"); the reader --frame_features selects (TaskDefaults::reader without
  // it) and the feature_names that reader reads when --feature_names is not given.
  std::string feature_names;
  std::string feature_sizes;
  std::string frame_reader;
  std::string frame_feature_names;
  // predict's batch size when --batch_size is not given; 0 keeps the run's.
  int64_t predict_batch_size = 0;
  // Whether predict may run from --checkpoint and --pipeline_config_path alone; false where the
  // task's models need the record of their training run (read_run_record), which only
  // --train_dir holds.
  bool predicts_from_pipeline_config = true;
};

// What predict reads for a checkpoint it is given without its training run or a pipeline
// config, by model name (TF-Slim's eval_image_classifier.py: --model and --checkpoint_path), as
// the task's original chooses it for that model (slim's preprocessing_factory and the nets'
// default_image_size). The host makes the evaluation input of it: the task's default reader
// with `channels`, and an image-classification preprocessing step.
struct CheckpointInput {
  std::string normalization;  // the step's normalization by name: "vgg", "inception", ...
  int64_t image_size = 0;     // the square central crop the model sees
  int64_t resize_side = 0;    // the shorter side is resized to this before the crop; 0: none
  int64_t channels = 3;
};

class TRAINYARD_API Task : public PluginObject {
 public:
  ~Task() override;

  virtual TaskDefaults defaults() const = 0;
  // The flags this task's pipelines take (above). Nothing of the starter code's by default.
  virtual TaskFlagDialect flag_dialect() const;
  // The input of a checkpoint of `model` that predict is given without its run (above);
  // `preprocessing` and `image_size` are the flags' choices where given (empty, 0: the
  // model's). Nothing where this task's predict takes no model name alone (the default).
  // Throws ConfigError naming the flag for a choice the task does not know.
  virtual std::optional<CheckpointInput> checkpoint_input(const std::string& model,
                                                          const std::string& preprocessing,
                                                          int64_t image_size) const;

  // The batch from the input pipeline on its device ("labels" and "num_frames" already taken
  // out of its features), changed as this task's models expect it (YouTube-8M normalizes its
  // features). Nothing by default.
  virtual void prepare_batch(Batch& batch) const;

  // Before training: checks the run against what train_dir records of the run that created it,
  // or records it there. Throws ConfigError naming the file and the disagreement. By default
  // the pipeline.config record (RunRecorder::check_or_record_pipeline_config).
  virtual void check_or_record_run(const TaskPipeline& pipeline, RunRecorder& recorder) const;

  // The task's own record of the run in `train_dir`, or nothing when it keeps none there (the
  // host then reads train_dir/pipeline.config). Throws ConfigError naming the file when it is
  // there but cannot be read. Nothing by default.
  virtual std::optional<RecordedRun> read_run_record(const std::string& train_dir) const;

  // Logs a training step (every log_every_n_steps) and writes its scalars.
  virtual void report_train_step(const TaskPipeline& pipeline, const TrainStepReport& step,
                                 std::ostream& log, Summaries& summaries) const = 0;

  virtual std::unique_ptr<TaskEvaluation> make_evaluation(const TaskPipeline& pipeline) const = 0;
  // The metrics an evaluation reports, by name and tag (values 0), in TaskEvaluation::result()'s
  // order: what an exporter or a config may refer to before any evaluation ran.
  virtual std::vector<Metric> evaluation_metrics() const = 0;
  // Logs an evaluation of the checkpoint at `global_step` and writes its scalars.
  virtual void report_evaluation(int64_t global_step, const std::vector<Metric>& metrics,
                                 std::ostream& log, Summaries& summaries) const = 0;

  // A writer of predictions to `out` (which outlives it); top_k >= 1.
  virtual std::unique_ptr<PredictionWriter> make_prediction_writer(const TaskPipeline& pipeline,
                                                                   std::ostream& out,
                                                                   int top_k) const = 0;

  // Files an export carries besides the checkpoint and pipeline.config, written into
  // `export_dir` (the staging directory of the export). None by default.
  virtual void write_export_files(const TaskPipeline& pipeline,
                                  const std::string& export_dir) const;
};

}  // namespace trainyard

#endif  // TRAINYARD_TASK_H_
