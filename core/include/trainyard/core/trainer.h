// The training and evaluation loops of the YouTube-8M starter code (train.py, eval.py) with
// TF-Slim's train op, driven by a pipeline config (pipeline.proto) and plugins found by class.
#ifndef TRAINYARD_CORE_TRAINER_H_
#define TRAINYARD_CORE_TRAINER_H_

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/core/checkpoint.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"
#include "trainyard/core/registry.h"

namespace trainyard {

struct TrainResult {
  int64_t global_step = 0;
  double last_loss = 0.0;
  double examples_per_sec = 0.0;
  std::string last_checkpoint;  // prefix, "" when none was written
};

// A batch from the input pipeline on `backend`, with "features" L2-normalized along the last
// axis (per frame for frame features), as the starter code does in training, evaluation and
// inference. Moves the ids out of `host`; its buffers stay for InputPipeline::recycle().
Batch to_device_batch(Backend& backend, HostBatch& host);

struct StepResult {
  double loss = 0.0;        // the label loss
  double total_loss = 0.0;  // with regularization_penalty x the regularization loss
  double learning_rate = 0.0;
  Tensor predictions;
  // With want_gradients: each trained variable's gradient as the optimizer received it
  // (multiplied, clipped), for summarize_gradients.
  std::vector<std::pair<std::string, Tensor>> gradients;
};

// TF-Slim's train op for the pipeline's model, label loss and optimizer (create_train_op):
// forward, total loss, gradients of the variables to train (update_trainable_variables less
// freeze_variables), gradient multipliers and bias_grad_multiplier, clipping by norm per
// tensor, the optimizer's update, and the moving averages of the weights with
// use_moving_average. The train loop, benchmarks and tests share it.
class TrainStep {
 public:
  // Creates the pipeline's backend, model, loss and optimizer. With `restore` (which must
  // outlive this) each variable, slot and average is restored from it as it is created;
  // otherwise, with train_config.fine_tune_checkpoint, the model variables found there with
  // their shape are (the report is logged after the first step).
  TrainStep(const PluginRegistry& registry, const config::Pipeline& pipeline,
            const CheckpointReader* restore, std::ostream& log);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // One step at `global_step` (the value before it; Adam's t and the learning rate follow
  // it). Throws Error "loss is inf or nan at step N" before any variable changes.
  StepResult run(const Batch& batch, int64_t global_step, bool want_gradients = false);

  Backend& backend();
  // The variables the step updates, in creation order; empty before the first run().
  const std::vector<Variable*>& trained() const;
  // What a checkpoint at `global_step` holds: every global variable (weights, slots, moving
  // averages), "global_step", and the optimizer's non-slot values (Adam's beta1_power).
  std::vector<std::pair<std::string, Tensor>> state(int64_t global_step);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Trains as train.py does: restores the latest checkpoint in train_config.train_dir unless
// start_new_model, checks and writes model_flags.json, runs until max_steps or the end of
// num_epochs, logs every log_every_n_steps, writes summaries and checkpoints. Throws Error
// with a one-line message naming what is wrong (class, flag, file, variable); a checkpoint is
// never left half-written.
TrainResult train(const PluginRegistry& registry, const config::Pipeline& pipeline,
                  std::ostream& log);

struct EvalResult {
  int64_t global_step = 0;
  int64_t examples = 0;
  double avg_hit_at_one = 0.0;
  double avg_perr = 0.0;
  double mean_ap = 0.0;
  double gap = 0.0;
  double avg_loss = 0.0;
};

// Evaluates the checkpoint `checkpoint_prefix` (or the latest in train_dir when empty) on
// eval_input_reader's data, as eval.py: Hit@1, PERR, mAP and GAP (top_k from eval_config).
// With eval_config.use_moving_averages or train_config.use_moving_average the model runs with
// the moving averages of its weights where the checkpoint has them.
EvalResult evaluate(const PluginRegistry& registry, const config::Pipeline& pipeline,
                    const std::string& checkpoint_prefix, std::ostream& log);

// eval.py's loop: evaluates the latest checkpoint in train_dir whenever it is newer than the
// last one evaluated (steps already evaluated are skipped), checking every eval_interval_secs;
// with eval_config.run_once, once. Returns when run_once, or after eval_config.timeout_secs
// (> 0) without a new checkpoint. Throws NotFound with run_once and no checkpoint.
std::vector<EvalResult> evaluate_checkpoints(const PluginRegistry& registry,
                                             const config::Pipeline& pipeline, std::ostream& log);

// inference.py: writes `VideoId,LabelConfidencePairs` CSV lines ("id c1 s1 c2 s2 ...", the
// top_k classes by descending score) for every video of eval_input_reader's data, from the
// checkpoint `checkpoint_prefix` (or the latest in train_dir). Returns the number of videos.
// The CSV is written to a temporary file and renamed, so a failed run leaves no partial file.
int64_t predict(const PluginRegistry& registry, const config::Pipeline& pipeline,
                const std::string& checkpoint_prefix, const std::string& output_csv, int top_k,
                std::ostream& log);

// Writes an export directory that `predict` (and `eval`) load without the training run: the
// checkpoint's files, model_flags.json, the effective pipeline config (pipeline.config), a
// `checkpoint` state file, and model.safetensors with the model's weights (the moving
// averages in place of the weights with use_moving_average; no optimizer slots, no step).
// Written under a temporary name and renamed. Returns the checkpoint
// prefix inside the export.
std::string export_model(const PluginRegistry& registry, const config::Pipeline& pipeline,
                         const std::string& checkpoint_prefix, const std::string& export_dir);

// model_flags.json of train.py: the flags a later run, eval or predict must agree with.
struct ModelFlags {
  std::string model;
  std::string feature_names;
  std::string feature_sizes;
  bool frame_features = false;
  std::string label_loss;
};
ModelFlags model_flags_of(const config::Pipeline& pipeline);
std::string model_flags_to_json(const ModelFlags& flags);
// Throws ConfigError naming the file when it cannot be read or parsed.
ModelFlags read_model_flags(const std::string& path);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TRAINER_H_
