// TF-Slim's train op (learning.create_train_op) for a pipeline's model, label loss and
// optimizer: the step the training loop, the benchmarks and the tests share. It knows no task.
#ifndef TRAINYARD_CORE_TRAIN_STEP_H_
#define TRAINYARD_CORE_TRAIN_STEP_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/collective.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/export.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"
#include "trainyard/variable.h"

namespace trainyard {

struct StepResult {
  double loss = 0.0;        // the label loss
  double total_loss = 0.0;  // with regularization_penalty x the regularization loss
  double learning_rate = 0.0;
  Tensor predictions;
  // With want_gradients: each trained variable's gradient as the optimizer received it
  // (multiplied, clipped), for summarize_gradients.
  std::vector<std::pair<std::string, Tensor>> gradients;
};

// A step met an inf or nan: the label loss, the regularization loss (times
// regularization_penalty, added to the label loss), or the gradient of a trained variable as the
// gradient multipliers leave it (TF-Slim's check_numerics on the total loss, extended to the
// gradients). Thrown before any variable changes, so the variables still hold the last good
// step's values.
class TRAINYARD_API NonFiniteError : public Error {
 public:
  enum class Source { kLabelLoss, kRegularizationLoss, kGradient };
  NonFiniteError(const std::string& message, int64_t step, Source source, std::string variable);
  ~NonFiniteError() override;
  int64_t step() const { return step_; }
  Source source() const { return source_; }
  // kGradient: the first trained variable, in creation order, whose gradient is inf or nan.
  const std::string& variable() const { return variable_; }

 private:
  int64_t step_;
  Source source_;
  std::string variable_;
};

// TF-Slim's train op for the pipeline's model, label loss and optimizer (create_train_op):
// forward, total loss, gradients of the variables to train (update_trainable_variables less
// freeze_variables), gradient multipliers and bias_grad_multiplier, clipping by norm per
// tensor, the optimizer's update, and the moving averages of the weights with
// use_moving_average. The train loop, benchmarks and tests share it.
class TRAINYARD_API TrainStep {
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
  // it). Throws NonFiniteError before any variable changes: "loss is inf or nan at step N: the
  // label loss is nan", "... the regularization loss (inf) times regularization_penalty (1) is
  // inf; the label loss, 0.69, is finite", or "a gradient is inf or nan at step N: first that of
  // variable 'V' (K of the M trained variables; the loss, 0.69, is finite)". The gradient check
  // reduces each (multiplied) gradient to its sum on the device, inf or nan exactly when an
  // element is or the sum overflows, and reads the sums back at once: one small read a step.
  StepResult run(const Batch& batch, int64_t global_step, bool want_gradients = false);

  // Replaces every global variable (weights, optimizer slots, moving averages) with its value
  // in `checkpoint`, under the names state() writes. The optimizer's non-slot values follow the
  // global_step the caller resumes from. Throws NotFound or ConfigError naming the checkpoint and
  // the variable when one is absent or has another shape.
  void restore(const CheckpointReader& checkpoint);

  // Data parallelism: from the next run(), this step is one replica of `collective` (which must
  // outlive it). Its first run creates the variables, takes rank 0's values of every global
  // variable (broadcast) and computes its forward pass again with them; every run averages its
  // losses and gradients over the replicas (gradients in buckets of about `bucket_bytes`,
  // reduced while the backward pass goes on), so the replicas apply the same update.
  void set_replicas(Collective& collective, int64_t bucket_bytes);
  // Rank `root`'s values of every global variable on every replica (after a restore).
  void broadcast_state(int root = 0);

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

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TRAIN_STEP_H_
