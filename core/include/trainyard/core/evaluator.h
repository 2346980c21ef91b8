// Evaluation and inference from checkpoints (eval.py, inference.py), task-neutral: the
// pipeline's Task accumulates and reports the metrics and writes the predictions.
#ifndef TRAINYARD_CORE_EVALUATOR_H_
#define TRAINYARD_CORE_EVALUATOR_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "trainyard/core/registry.h"
#include "trainyard/core/task.h"
#include "trainyard/export.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

struct EvalResult {
  int64_t global_step = 0;
  int64_t examples = 0;
  std::vector<Metric> metrics;  // the task's, in the order it logs them
  // The value of the metric called `name` ("GAP"); NotFound listing the names otherwise.
  TRAINYARD_API double metric(const std::string& name) const;
};

// Where evaluations write their scalars: train_dir/eval, or train_dir/eval_<name> when
// eval_config.name is set (EvalSpec's name). Throws ConfigError for a name with a '/'.
TRAINYARD_API std::string eval_dir(const config::Pipeline& pipeline);

// Evaluates the checkpoint `checkpoint_prefix` (or the latest in train_dir when empty) on
// eval_input_reader's data (train_input_reader's when it has no data_pattern), or its first
// eval_config.steps batches, writing the task's scalars to eval_dir(pipeline). With
// eval_config.use_moving_averages or train_config.use_moving_average the model runs with the moving
// averages of its weights where the checkpoint has them.
TRAINYARD_API EvalResult evaluate(const PluginRegistry& registry, const config::Pipeline& pipeline,
                                  const std::string& checkpoint_prefix, std::ostream& log);

// eval.py's loop: evaluates the latest checkpoint in train_dir whenever it is newer than the
// last one evaluated (steps an earlier evaluator recorded in eval_dir are skipped),
// checking every eval_interval_secs; with eval_config.run_once, once. Returns when run_once,
// or after eval_config.timeout_secs (> 0) without a new checkpoint. A recorded step outside
// [0, 2^53] or above the newest checkpoint's step is ignored with a warning naming its event
// file. Throws NotFound with run_once and no checkpoint, and DataLoss naming the checkpoint when
// its global_step is not an integer in [0, 2^53].
TRAINYARD_API std::vector<EvalResult> evaluate_checkpoints(const PluginRegistry& registry,
                                                           const config::Pipeline& pipeline,
                                                           std::ostream& log);

// Writes the task's predictions (the YouTube-8M task: inference.py's CSV of the top_k classes)
// for every example of eval_input_reader's data, from the checkpoint `checkpoint_prefix` (or
// the latest in train_dir). Returns the number of examples. Written to a temporary file and
// renamed, so a failed run leaves no partial file.
TRAINYARD_API int64_t predict(const PluginRegistry& registry, const config::Pipeline& pipeline,
                              const std::string& checkpoint_prefix, const std::string& output_file,
                              int top_k, std::ostream& log);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_EVALUATOR_H_
