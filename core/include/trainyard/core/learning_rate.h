// Learning-rate schedules: the learning rate as a function of the global step.
//
//   ExponentialDecayExamplesLearningRate  YouTube-8M train.py: decay per examples seen.
//   ConstantLearningRate                  OD API ConstantLearningRate.
//   ExponentialDecayLearningRate          OD API exponential_decay_with_burnin.
//   ManualStepLearningRate                OD API manual_stepping, optionally with warmup.
//   CosineDecayLearningRate               OD API cosine_decay_with_warmup.
//
// The OD API classes follow object_detection/utils/learning_schedules.py and take the fields
// of the LearningRate messages of optimizer.proto, with the proto's defaults. TensorFlow
// evaluates those formulas in float32; these evaluate them in double (so, for example, a
// staircase boundary never moves because step * batch_size rounds in float32).
//
// Constructors check their parameters and throw InvalidArgument naming the schedule, the
// field and its value where TensorFlow raises ValueError, and where a value would make every
// rate meaningless (a decay period that is not positive). at() never throws and is safe to
// call from several threads at once.
#ifndef TRAINYARD_CORE_LEARNING_RATE_H_
#define TRAINYARD_CORE_LEARNING_RATE_H_

#include <cstdint>
#include <vector>

#include "trainyard/export.h"

namespace trainyard {

class TRAINYARD_API LearningRate {
 public:
  virtual ~LearningRate();
  // The learning rate for the update made at `global_step` (the step before that update,
  // 0 for the first).
  virtual double at(int64_t global_step) const = 0;
};

// YouTube-8M: tf.train.exponential_decay(base_learning_rate, global_step * batch_size,
// learning_rate_decay_examples, learning_rate_decay, staircase=True), that is
//   base_learning_rate * learning_rate_decay ^ floor(step * batch_size / decay_examples).
// batch_size is the examples per step over all towers (train.py's batch_size * num_towers).
class TRAINYARD_API ExponentialDecayExamplesLearningRate final : public LearningRate {
 public:
  struct Config {
    double base_learning_rate = 0.01;
    double learning_rate_decay = 0.95;
    int64_t learning_rate_decay_examples = 4000000;
    int64_t batch_size = 1024;
  };
  explicit ExponentialDecayExamplesLearningRate(const Config& config);
  double at(int64_t global_step) const override;

 private:
  Config config_;
};

class TRAINYARD_API ConstantLearningRate final : public LearningRate {
 public:
  explicit ConstantLearningRate(double learning_rate = 0.002) : learning_rate_(learning_rate) {}
  double at(int64_t) const override { return learning_rate_; }

 private:
  double learning_rate_;
};

// OD API exponential_decay_with_burnin:
//   step < burnin_steps:  burnin_learning_rate (initial_learning_rate when it is 0)
//   otherwise:            initial_learning_rate * decay_factor ^ p,
//                         p = (step - burnin_steps) / decay_steps, floored when staircase,
// and never below min_learning_rate.
class TRAINYARD_API ExponentialDecayLearningRate final : public LearningRate {
 public:
  struct Config {
    double initial_learning_rate = 0.002;
    int64_t decay_steps = 4000000;
    double decay_factor = 0.95;
    bool staircase = true;
    double burnin_learning_rate = 0.0;
    int64_t burnin_steps = 0;
    double min_learning_rate = 0.0;
  };
  explicit ExponentialDecayLearningRate(const Config& config);
  double at(int64_t global_step) const override;

 private:
  Config config_;
};

// OD API manual_stepping. `rates` has one more entry than `boundaries` (the pipeline config's
// initial_learning_rate followed by each schedule entry's learning_rate); boundaries are
// strictly increasing and positive. The rate is rates[i] from boundaries[i - 1] (inclusive)
// on, rates[0] before boundaries[0]. With warmup, steps before boundaries[0] instead ramp
// linearly: rates[0] + (rates[1] - rates[0]) * step / boundaries[0].
class TRAINYARD_API ManualStepLearningRate final : public LearningRate {
 public:
  struct Config {
    std::vector<int64_t> boundaries = {};
    std::vector<double> rates = {0.002};
    bool warmup = false;
  };
  explicit ManualStepLearningRate(const Config& config);
  double at(int64_t global_step) const override;

 private:
  Config config_;
};

// OD API cosine_decay_with_warmup:
//   step > total_steps:                       0
//   step < warmup_steps:                      warmup_learning_rate + slope * step, slope =
//                                             (learning_rate_base - warmup_learning_rate) /
//                                             warmup_steps
//   step <= warmup_steps + hold_base_rate_steps
//     (only when hold_base_rate_steps > 0):   learning_rate_base
//   otherwise:                                0.5 * learning_rate_base * (1 + cos(pi *
//                                             (step - warmup - hold) / (total - warmup - hold)))
// Where TensorFlow would divide 0 by 0 (total_steps == warmup_steps, no hold, at step
// total_steps) this returns learning_rate_base, the cosine's value at its start.
class TRAINYARD_API CosineDecayLearningRate final : public LearningRate {
 public:
  struct Config {
    double learning_rate_base = 0.002;
    int64_t total_steps = 4000000;
    double warmup_learning_rate = 0.0002;
    int64_t warmup_steps = 10000;
    int64_t hold_base_rate_steps = 0;
  };
  explicit CosineDecayLearningRate(const Config& config);
  double at(int64_t global_step) const override;

 private:
  Config config_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_LEARNING_RATE_H_
