// The learning-rate schedule a train_config describes (pipeline.proto's LearningRate oneof:
// the YouTube-8M exponential decay by examples, constant, and the Object Detection API's
// exponential_decay_learning_rate, manual_step_learning_rate, cosine_decay_learning_rate),
// built from learning_rate.h's one implementation of each.
#ifndef TRAINYARD_CORE_LEARNING_RATE_CONFIG_H_
#define TRAINYARD_CORE_LEARNING_RATE_CONFIG_H_

#include <memory>

#include "trainyard/core/learning_rate.h"
#include "trainyard/export.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

// `train.learning_rate()`; the YouTube-8M schedule (with train.batch_size()) when none is
// set. Throws ConfigError naming the field for parameters the schedule refuses.
TRAINYARD_API std::unique_ptr<LearningRate> learning_rate_from_config(
    const config::TrainConfig& train);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_LEARNING_RATE_CONFIG_H_
