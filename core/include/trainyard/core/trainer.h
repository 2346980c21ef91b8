// The training stack of a host application, in one include: the train step (train_step.h),
// the training loop (training_loop.h), evaluation and inference (evaluator.h), exports
// (exporter.h) and tasks (task.h), driven by a pipeline config and plugins found by class.
#ifndef TRAINYARD_CORE_TRAINER_H_
#define TRAINYARD_CORE_TRAINER_H_

#include "trainyard/core/evaluator.h"
#include "trainyard/core/exporter.h"
#include "trainyard/core/task.h"
#include "trainyard/core/train_step.h"
#include "trainyard/core/training_loop.h"

#endif  // TRAINYARD_CORE_TRAINER_H_
