// Variables: named, persistent tensors that training updates and checkpoints save.
//
// Names are hierarchical, slim style ("tower/fc1/weights"); they are the keys of checkpoints,
// restore maps and the regexes of frozen variables and gradient multipliers. A model asks its
// ModelContext (model.h) for variables by VariableSpec; the context creates each name once and
// returns the same variable on later calls.
#ifndef TRAINYARD_VARIABLE_H_
#define TRAINYARD_VARIABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/tensor.h"

namespace trainyard {

struct Initializer {
  enum class Kind {
    kZeros,
    kConstant,         // value
    kUniform,          // [minval, maxval)
    kNormal,           // mean, stddev
    kTruncatedNormal,  // mean, stddev, redrawn beyond two stddev
    kGlorotUniform,    // a.k.a. xavier
    kGlorotNormal,
    kVarianceScaling,  // scale, mode (fan_in/fan_out/fan_avg), distribution
  };
  enum class FanMode { kFanIn, kFanOut, kFanAvg };
  enum class Distribution { kTruncatedNormal, kUntruncatedNormal, kUniform };

  Kind kind = Kind::kZeros;
  double value = 0.0;
  double minval = 0.0, maxval = 1.0;
  double mean = 0.0, stddev = 1.0;
  double scale = 1.0;
  FanMode mode = FanMode::kFanIn;
  Distribution distribution = Distribution::kTruncatedNormal;

  // Factories with TensorFlow's names, argument order and defaults (tf.compat.v1's
  // *_initializer; TF-Slim's xavier_initializer() is glorot_uniform()). The normal ones take
  // their keyword arguments by name or in TensorFlow's order:
  //   Initializer::truncated_normal({.stddev = 0.01}) tf.truncated_normal_initializer(stddev=0.01)
  //   Initializer::random_normal({0.5, 2.0})            mean 0.5, stddev 2
  struct NormalArgs {
    double mean = 0.0;
    double stddev = 1.0;
  };
  static constexpr Initializer zeros() { return {}; }
  static constexpr Initializer ones() { return constant(1.0); }
  static constexpr Initializer constant(double value) {
    Initializer i;
    i.kind = Kind::kConstant;
    i.value = value;
    return i;
  }
  // Uniform in [minval, maxval).
  static constexpr Initializer random_uniform(double minval = 0.0, double maxval = 1.0) {
    Initializer i;
    i.kind = Kind::kUniform;
    i.minval = minval;
    i.maxval = maxval;
    return i;
  }
  static constexpr Initializer random_normal(NormalArgs args) {
    Initializer i;
    i.kind = Kind::kNormal;
    i.mean = args.mean;
    i.stddev = args.stddev;
    return i;
  }
  static constexpr Initializer random_normal() { return random_normal(NormalArgs{}); }
  // Normal, values beyond two stddev from the mean redrawn (so the spread is about 0.88 stddev).
  static constexpr Initializer truncated_normal(NormalArgs args) {
    Initializer i = random_normal(args);
    i.kind = Kind::kTruncatedNormal;
    return i;
  }
  static constexpr Initializer truncated_normal() { return truncated_normal(NormalArgs{}); }
  // Uniform in +-sqrt(6 / (fan_in + fan_out)).
  static constexpr Initializer glorot_uniform() {
    Initializer i;
    i.kind = Kind::kGlorotUniform;
    return i;
  }
  // Truncated normal whose spread is sqrt(2 / (fan_in + fan_out)).
  static constexpr Initializer glorot_normal() {
    Initializer i;
    i.kind = Kind::kGlorotNormal;
    return i;
  }
  // Variance scale / fan (fan_in, fan_out or their mean), drawn from `distribution`.
  static constexpr Initializer variance_scaling(
      double scale = 1.0, FanMode mode = FanMode::kFanIn,
      Distribution distribution = Distribution::kTruncatedNormal) {
    Initializer i;
    i.kind = Kind::kVarianceScaling;
    i.scale = scale;
    i.mode = mode;
    i.distribution = distribution;
    return i;
  }
  // tf.keras' he_normal and he_uniform: variance 2 / fan_in, for layers followed by a ReLU.
  static constexpr Initializer he_normal() { return variance_scaling(2.0); }
  static constexpr Initializer he_uniform() {
    return variance_scaling(2.0, FanMode::kFanIn, Distribution::kUniform);
  }
};

// Collections a variable belongs to, as in TensorFlow: every variable is global; model
// variables are the ones a checkpoint restore map or an export covers.
enum VariableCollection : unsigned {
  kGlobalVariables = 1u << 0,
  kTrainableVariables = 1u << 1,
  kModelVariables = 1u << 2,
};

struct VariableSpec {
  std::string name;  // full hierarchical name
  Shape shape;
  DType dtype = DType::kF32;
  Initializer initializer;
  bool trainable = true;
  double l2_regularization = 0.0;  // adds l2 * sum(w^2) / 2 to the regularization loss
  unsigned collections = kGlobalVariables | kModelVariables;
};

class Backend;
class Generator;

class TRAINYARD_API Variable {
 public:
  Variable(VariableSpec spec, Tensor value);

  const std::string& name() const { return spec_.name; }
  const VariableSpec& spec() const { return spec_; }
  bool trainable() const { return spec_.trainable; }
  const Tensor& value() const { return value_; }
  // Replaces the value; throws InvalidArgument naming the variable and both shapes/dtypes
  // when they differ from the spec.
  void assign(Tensor value);

 private:
  VariableSpec spec_;
  Tensor value_;
};

// A fresh value for `spec` drawn from its initializer, with TensorFlow's formulas: fans as
// tf.keras' _compute_fans (for rank > 2 the receptive field multiplies both), glorot_uniform
// limit sqrt(6 / (fan_in + fan_out)), variance scaling's truncated normal stddev
// sqrt(scale / fan) / 0.87962566103423978.
TRAINYARD_API Tensor initial_value(Backend& backend, const VariableSpec& spec,
                                   Generator& generator);

// The variables of one model, by name, with their collections. Not thread-safe.
class TRAINYARD_API VariableStore {
 public:
  VariableStore(Backend& backend, uint64_t seed);

  // Returns the variable named spec.name, creating it with its initializer on first use.
  // Throws InvalidArgument naming the variable and both shapes/dtypes when it exists with
  // another shape or dtype. Trainable variables require gradients.
  Variable& get_or_create(const VariableSpec& spec);
  Variable* find(const std::string& name);  // null when absent

  // In creation order.
  std::vector<Variable*> collection(VariableCollection which);
  std::vector<Variable*> trainable() { return collection(kTrainableVariables); }

  // Sum over variables with l2_regularization > 0 of l2 * sum(w^2) / 2 (slim's
  // l2_regularizer); an undefined tensor when there are none.
  Tensor regularization_loss();

  Backend& backend() { return backend_; }

 private:
  Backend& backend_;
  uint64_t seed_;
  std::vector<std::unique_ptr<Variable>> variables_;
};

}  // namespace trainyard

#endif  // TRAINYARD_VARIABLE_H_
