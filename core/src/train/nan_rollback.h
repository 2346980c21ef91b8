// train_config.max_nan_rollbacks (pipeline.proto), dlib's trainer's recovery from a diverged
// step: what the training loop does when a step throws NonFiniteError. Internal.
#ifndef TRAINYARD_CORE_SRC_NAN_ROLLBACK_H_
#define TRAINYARD_CORE_SRC_NAN_ROLLBACK_H_

#include <cstdint>
#include <string>

#include "train/train_hooks.h"
#include "trainyard/core/train_step.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

class NanRollback {
 public:
  explicit NanRollback(const config::TrainConfig& tc);

  // After `error` from the step the loop ran on `batch`, the s.input_batches-th batch the input
  // delivered. While fewer than max_nan_rollbacks rollbacks were made: restores the variables,
  // optimizer slots and moving averages from the newest checkpoint in train_dir and sets
  // s.global_step to its step (without a checkpoint the variables stay as the step left them,
  // the last good step's), logs a warning naming the step, the batch and the checkpoint, and
  // returns true: the loop skips the batch and goes on. Otherwise returns false.
  bool recover(const NonFiniteError& error, LoopState& s, const Batch& batch);

  // The error that ends the run: `error`'s message, the batch, the last good checkpoint (which
  // is kept) and, with max_nan_rollbacks, that they are used up.
  NonFiniteError final_error(const NonFiniteError& error, const LoopState& s,
                             const Batch& batch) const;

 private:
  int64_t max_;
  int64_t used_ = 0;
  std::string train_dir_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_NAN_ROLLBACK_H_
