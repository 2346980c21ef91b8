#include "trainyard/core/learning_rate_config.h"

#include <string>

#include "trainyard/error.h"

namespace trainyard {
namespace {

std::unique_ptr<LearningRate> build(const config::TrainConfig& train) {
  const config::LearningRate& lr = train.learning_rate();
  switch (lr.schedule_case()) {
    case config::LearningRate::kConstant:
      return std::make_unique<ConstantLearningRate>(lr.constant().learning_rate());
    case config::LearningRate::kExponentialDecayLearningRate: {
      const auto& d = lr.exponential_decay_learning_rate();
      ExponentialDecayLearningRate::Config c;
      c.initial_learning_rate = d.initial_learning_rate();
      c.decay_steps = d.decay_steps();
      c.decay_factor = d.decay_factor();
      c.staircase = d.staircase();
      c.burnin_learning_rate = d.burnin_learning_rate();
      c.burnin_steps = d.burnin_steps();
      c.min_learning_rate = d.min_learning_rate();
      return std::make_unique<ExponentialDecayLearningRate>(c);
    }
    case config::LearningRate::kManualStepLearningRate: {
      const auto& m = lr.manual_step_learning_rate();
      ManualStepLearningRate::Config c;
      c.rates = {m.initial_learning_rate()};
      for (const auto& s : m.schedule()) {
        c.boundaries.push_back(s.step());
        c.rates.push_back(s.learning_rate());
      }
      c.warmup = m.warmup();
      return std::make_unique<ManualStepLearningRate>(c);
    }
    case config::LearningRate::kCosineDecayLearningRate: {
      const auto& d = lr.cosine_decay_learning_rate();
      CosineDecayLearningRate::Config c;
      c.learning_rate_base = d.learning_rate_base();
      c.total_steps = d.total_steps();
      c.warmup_learning_rate = d.warmup_learning_rate();
      c.warmup_steps = d.warmup_steps();
      c.hold_base_rate_steps = d.hold_base_rate_steps();
      return std::make_unique<CosineDecayLearningRate>(c);
    }
    case config::LearningRate::kExponentialDecayExamples:
    case config::LearningRate::SCHEDULE_NOT_SET:
      break;
  }
  const config::ExponentialDecayExamples& d = lr.exponential_decay_examples();
  ExponentialDecayExamplesLearningRate::Config c;
  c.base_learning_rate = d.base_learning_rate();
  c.learning_rate_decay = d.learning_rate_decay();
  c.learning_rate_decay_examples = d.learning_rate_decay_examples();
  c.batch_size = train.batch_size();
  return std::make_unique<ExponentialDecayExamplesLearningRate>(c);
}

}  // namespace

std::unique_ptr<LearningRate> learning_rate_from_config(const config::TrainConfig& train) {
  try {
    return build(train);
  } catch (const InvalidArgument& e) {
    throw ConfigError(std::string("train_config.learning_rate: ") + e.what());
  }
}

}  // namespace trainyard
