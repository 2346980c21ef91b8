// The training loop (train.py's, with TF-Slim's supervisor duties as hooks): restore or start,
// read batches, run the train step, log, summarize, checkpoint, export. It knows no task: the
// pipeline's Task (task.h) moves batches to the device, records the run in train_dir and
// reports the logged steps.
#ifndef TRAINYARD_CORE_TRAINING_LOOP_H_
#define TRAINYARD_CORE_TRAINING_LOOP_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "trainyard/core/evaluator.h"
#include "trainyard/core/registry.h"
#include "trainyard/export.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

struct TrainResult {
  int64_t global_step = 0;
  double last_loss = 0.0;
  double examples_per_sec = 0.0;
  std::string last_checkpoint;  // prefix, "" when none was written
  // Why the loop ended: "max_steps N reached", "the input ended (num_epochs N)", "stopped by
  // SIGTERM" (a checkpoint of the last step was written first).
  std::string end_reason;
  int stop_signal = 0;  // the signal that stopped the run (stop_signals.h), 0 when none did
  // With eval_config.evaluate_during_training: each evaluation, in order.
  std::vector<EvalResult> evaluations;
  // Data parallelism: whether this replica is the chief (rank 0), which reports the run.
  bool chief = true;
};

// Trains: restores the latest checkpoint in train_config.train_dir unless start_new_model,
// lets the task check and record the run, runs until max_steps or the end of num_epochs, logs
// every log_every_n_steps, writes summaries, checkpoints and exports. Holds the train_dir's lock
// (train_dir_lock.h) and stops cleanly on SIGINT, SIGTERM and SIGHUP (stop_signals.h), skipping
// the final evaluation of train_and_evaluate then. Throws Error with a
// one-line message naming what is wrong (class, flag, file, variable); a checkpoint is never
// left half-written.
//
// Data parallelism: with a collective of several replicas (distributed.collective, or
// MpiCollective when mpirun started several ranks), every replica runs this on its shard of the
// input (InputOptions::shard_index) with batch_size examples a step and the gradients averaged
// over the replicas; rank 0 is the chief, which alone locks train_dir, reads and writes its
// checkpoints, summaries, exports and evaluations, and logs to `log`. The others take the
// chief's step, input position, seed and variables when they start and after a rollback.
TRAINYARD_API TrainResult train(const PluginRegistry& registry, const config::Pipeline& pipeline,
                                std::ostream& log);

// The number of ranks an MPI launcher (mpirun, mpiexec, srun) gave this process, from its
// environment; 0 when no launcher started it. Throws ConfigError on a malformed value.
TRAINYARD_API int launcher_world_size();

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TRAINING_LOOP_H_
