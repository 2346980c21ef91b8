// The flag tables of the host's commands: one row per flag that sets a field of the pipeline
// config (flag_table.h), by the --help section it is listed in. The names are the originals':
// YouTube-8M's train.py and eval.py, TF-Slim's train_image_classifier.py, the Object Detection
// API's model_main.py and tf.estimator's RunConfig/TrainSpec/EvalSpec. Types and defaults come
// from pipeline.proto. Internal to apps/trainyard.
#ifndef TRAINYARD_APPS_TRAINYARD_FLAG_TABLES_H_
#define TRAINYARD_APPS_TRAINYARD_FLAG_TABLES_H_

#include <utility>

#include "flag_table.h"

namespace trainyard::app {

inline constexpr const char* kModelGroup = "Model";
inline constexpr const char* kTrainingGroup = "Training";
inline constexpr const char* kOutputsGroup = "Checkpoints and summaries";
inline constexpr const char* kDistributedGroup =
    "Distributed training (mpirun -np N trainyard train ...)";
inline constexpr const char* kInputGroup = "Input";
inline constexpr const char* kEvaluationGroup =
    "Evaluation during training (tf.estimator's EvalSpec)";
inline constexpr const char* kEvalGroup = "Evaluation";

using Apply = ConfigFlag::Apply;

// trainyard train and train_and_evaluate.
inline constexpr ConfigFlag kTrainFlags[] = {
    {"regularization_penalty", "train_config.regularization_penalty", kModelGroup,
     "weight of the regularization loss"},
    // YouTube-8M's schedule; the command applies it (a config's other schedule stays).
    {"base_learning_rate",
     "train_config.learning_rate.exponential_decay_examples.base_learning_rate", kTrainingGroup,
     "initial learning rate", Apply::kCommand},
    {"learning_rate_decay",
     "train_config.learning_rate.exponential_decay_examples.learning_rate_decay", kTrainingGroup,
     "staircase decay factor", Apply::kCommand},
    {"learning_rate_decay_examples",
     "train_config.learning_rate.exponential_decay_examples.learning_rate_decay_examples",
     kTrainingGroup, "examples per decay period", Apply::kCommand},
    {"num_epochs", "train_input_reader.num_epochs", kTrainingGroup,
     "passes over the data (0: forever)"},
    {"max_steps", "train_config.max_steps", kTrainingGroup, "stop after this many steps"},
    {"clip_gradient_norm", "train_config.clip_gradient_norm", kTrainingGroup,
     "clip each gradient to this norm; 0 disables"},
    {"seed", "train_config.seed", kTrainingGroup, "random seed (default 0, or the checkpoint's)"},
    {"deterministic", "train_input_reader.deterministic", kTrainingGroup,
     "the order of examples depends only on the seed (bitwise-reproducible runs and resumes)"},
    {"fine_tune_checkpoint", "train_config.fine_tune_checkpoint", kTrainingGroup,
     "a checkpoint to initialize the model variables from (on a new train_dir)"},
    {"use_moving_average", "train_config.use_moving_average", kTrainingGroup,
     "keep moving averages of the weights (evaluated and exported in their place)"},
    {"moving_average_decay", "train_config.moving_average_decay", kTrainingGroup,
     "decay of the moving averages"},
    {"bias_grad_multiplier", "train_config.bias_grad_multiplier", kTrainingGroup,
     "when > 0, scales the gradients of variables matching .*/biases"},
    {"skip_corrupt_records", "train_input_reader.skip_corrupt_records", kTrainingGroup,
     "skip (and count) corrupt or truncated records instead of stopping"},
    {"max_nan_rollbacks", "train_config.max_nan_rollbacks", kTrainingGroup,
     "on an inf or nan loss or gradient, restore the last checkpoint and skip the batch, at "
     "most this many times (0: stop the run)"},
    {"train_dir", "train_config.train_dir", kOutputsGroup,
     "checkpoints, summaries and the record of the run (default: the config's, else the "
     "task's)"},
    {"start_new_model", "train_config.start_new_model", kOutputsGroup,
     "delete train_dir and start over"},
    {"export_model_steps", "train_config.export_model_steps", kOutputsGroup,
     "export period in steps"},
    {"log_every_n_steps", "train_config.log_every_n_steps", kOutputsGroup, "log period in steps"},
    {"save_interval_secs", "train_config.save_interval_secs", kOutputsGroup, "checkpoint period"},
    {"save_summaries_secs", "train_config.save_summaries_secs", kOutputsGroup, "histogram period"},
    {"max_to_keep", "train_config.max_to_keep", kOutputsGroup, "checkpoints kept (0: all)"},
    {"keep_checkpoint_every_n_hours", "train_config.keep_checkpoint_every_n_hours", kOutputsGroup,
     "also keep one checkpoint per this many hours"},
    {"summarize_gradients", "train_config.summarize_gradients", kOutputsGroup,
     "histograms and norms of the gradients with the summaries"},
    {"trace_every_n_steps", "train_config.trace_every_n_steps", kOutputsGroup,
     "write train_dir/tf_trace-<step>.json (Chrome trace) every n steps; 0: never"},
    {"gradient_bucket_mb", "train_config.gradient_bucket_mb", kDistributedGroup,
     "replicas average their gradients in buckets of about this many MB, reduced while the "
     "backward pass goes on"},
    {"train_data_pattern", "train_input_reader.data_pattern", kInputGroup,
     "comma-separated globs of training TFRecords", Apply::kFill},
    {"eval_data_pattern", "eval_input_reader.data_pattern", kEvaluationGroup,
     "comma-separated globs of evaluation TFRecords (default: the config's "
     "eval_input_reader)"},
    {"eval_steps", "eval_config.steps", kEvaluationGroup,
     "batches per evaluation (default: the config's, else all)"},
    {"throttle_secs", "eval_config.throttle_secs", kEvaluationGroup,
     "at least this long between evaluations"},
    {"eval_name", "eval_config.name", kEvaluationGroup, "evaluations go to train_dir/eval_<name>"},
    {"export_format", "eval_config.export_format", kEvaluationGroup,
     "what the exporters write: trainyard (Trainyard's own export) or saved_model (also a "
     "TensorFlow SavedModel, saved_model.pb and variables/, in each export directory)"},
};

// The input flags every command takes (add_input_flags), declared with their field's type and
// default; each command applies them in code to its own section (train's train_input_reader
// and train_config, eval's eval_input_reader and eval_config), the same defaults for both.
inline constexpr ConfigFlag kInputFlags[] = {
    {"num_classes", "num_classes", kInputGroup, "label vocabulary size", Apply::kCommand},
    {"num_readers", "train_input_reader.num_readers", kInputGroup, "input reader threads",
     Apply::kCommand},
    {"batch_size", "train_config.batch_size", kInputGroup, "examples per batch", Apply::kCommand},
};

// The flags train and train_and_evaluate apply in code, by the field each sets.
inline constexpr std::pair<const char*, const char*> kTrainCodeFlagFields[] = {
    {"batch_size", "train_config.batch_size"},
    {"num_train_steps", "train_config.max_steps"},
    {"num_readers", "train_input_reader.num_readers"},
    {"num_classes", "num_classes"},
    {"num_threads", "backend.num_threads"},
    {"device_index", "backend.device_index"},
    {"precision", "backend.precision"},
};

// trainyard eval (YouTube-8M's eval.py).
inline constexpr ConfigFlag kEvalFlags[] = {
    {"top_k", "eval_config.top_k", kEvalGroup, "predictions per video for GAP", Apply::kFill},
    {"run_once", "eval_config.run_once", kEvalGroup,
     "evaluate the latest checkpoint once, instead of each new one as it appears"},
    {"eval_interval_secs", "eval_config.eval_interval_secs", kEvalGroup,
     "how often to look for a new checkpoint"},
    {"timeout_secs", "eval_config.timeout_secs", kEvalGroup,
     "stop after waiting this long for a new checkpoint (0: wait forever)"},
    {"use_moving_averages", "eval_config.use_moving_averages", kEvalGroup,
     "evaluate the moving averages of the weights"},
};

// The flags eval, predict and export apply in code, by the field each sets.
inline constexpr std::pair<const char*, const char*> kEvalCodeFlagFields[] = {
    {"batch_size", "eval_config.batch_size"}, {"num_readers", "eval_input_reader.num_readers"},
    {"num_classes", "num_classes"},           {"num_threads", "backend.num_threads"},
    {"device_index", "backend.device_index"}, {"precision", "backend.precision"},
};

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_FLAG_TABLES_H_
