// TensorFlow 1.x's optimizers (tf.train.*Optimizer), with TF's names, defaults, slot names
// and update kernels (training_ops.cc):
//
//   GradientDescentOptimizer  var -= lr g
//   MomentumOptimizer         accum = momentum accum + g; var -= lr accum
//                             (Nesterov: var -= lr (g + momentum accum))      slot Momentum
//   AdamOptimizer             m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2);
//                             var -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps)
//                                                                      slots Adam, Adam_1
//   AdagradOptimizer          accum += g^2; var -= lr g / sqrt(accum)             slot Adagrad
//   RMSPropOptimizer          ms += (g^2 - ms)(1 - decay); [mg += (g - mg)(1 - decay)]
//                             mom = momentum mom + lr g / sqrt(ms [- mg^2] + eps); var -= mom
//                             slots RMSProp (ms, starts at ONES as in TF1),
//                             [RMSProp_1 (mg) when centered,] then the momentum slot
//   AdadeltaOptimizer         accum = rho accum + (1 - rho) g^2;
//                             u = sqrt(accum_update + eps) / sqrt(accum + eps) g; var -= lr u;
//                             accum_update = rho accum_update + (1 - rho) u^2
//                                                              slots Adadelta, Adadelta_1
//   FtrlOptimizer             FTRL-Proximal as TF's ApplyFtrl / ApplyFtrlV2     slots Ftrl, Ftrl_1
//
// Slot names are the suffixes TF1 checkpoints use ("<variable>/Adam", "<variable>/Adam_1"), so
// they follow TF's order of slot creation. Adam's t is global_step + 1: TF1 keeps beta1_power
// and beta2_power as variables raised once per update, which equals b^(global_step + 1) when
// every step updates every variable. MomentumOptimizer's momentum, a required argument in TF,
// defaults to 0.9 (the OD API's momentum_optimizer_value default).
//
// GradientDescent, Momentum, Adam and RMSProp run TF's fused update ops (ops/training.h), with
// TF's rounding (RMSProp's 1 - decay in the variable's dtype). The other updates are composed
// of ops under a NoGradScope in the variable's dtype, new values computed first, then written
// back in place with ops::assign. A variable whose gradient is undefined (the loss does not
// depend on it) is left unchanged, as TF's apply_gradients skips a None gradient. apply() throws
// InvalidArgument naming the optimizer and the variable when the slots given are not the ones
// slots() declared.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/optimizer.h"
#include "trainyard/options.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"
#include "trainyard/variable.h"

namespace trainyard::optimizers {
namespace {

Initializer zeros() { return Initializer{}; }

Initializer constant(double value) {
  Initializer init;
  init.kind = Initializer::Kind::kConstant;
  init.value = value;
  return init;
}

[[noreturn]] void bad_option(std::string_view optimizer, const char* name, double value,
                             const char* expected) {
  throw InvalidArgument(std::string(optimizer) + ": " + name + " is " +
                        option_value_to_string(value) + "; expected " + expected);
}

// The slots' values, after checking that there are as many as slots() declares.
std::vector<Tensor> slot_values(std::string_view optimizer, const Variable& variable,
                                std::span<Variable*> slots, const std::vector<SlotSpec>& specs) {
  if (slots.size() != specs.size()) {
    std::string names;
    for (const SlotSpec& s : specs) names += (names.empty() ? "" : ", ") + s.name;
    throw InvalidArgument(std::string(optimizer) + ": variable '" + variable.name() +
                          "' came with " + std::to_string(slots.size()) + " slots; expected " +
                          std::to_string(specs.size()) + (names.empty() ? "" : " (" + names + ")"));
  }
  std::vector<Tensor> values;
  values.reserve(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == nullptr) {
      throw InvalidArgument(std::string(optimizer) + ": variable '" + variable.name() +
                            "' came with no slot '" + specs[i].name + "'");
    }
    values.push_back(slots[i]->value());
  }
  return values;
}

// A scalar of `like`'s dtype on its backend, for elementwise ops that broadcast it.
Tensor scalar_like(const Tensor& like, double value) {
  return ops::scalar(like.backend(), value, like.dtype());
}

// ---------------------------------------------------------------------------------------------

class GradientDescentOptimizer final : public Optimizer {
 public:
  explicit GradientDescentOptimizer(const Options&) {}

  std::vector<SlotSpec> slots() const override { return {}; }

  void apply(Variable& variable, const Tensor& gradient, std::span<Variable*> slots,
             double learning_rate, int64_t) override {
    slot_values("GradientDescentOptimizer", variable, slots, {});
    if (!gradient.defined()) return;
    Tensor var = variable.value();
    ops::apply_gradient_descent(var, gradient, learning_rate);
  }
};

class MomentumOptimizer final : public Optimizer {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"momentum", OptionType::kFloat, "0.9", "Momentum (a required argument in TensorFlow)"},
      {"use_nesterov", OptionType::kBool, "false", "Use Nesterov momentum"},
  };

  explicit MomentumOptimizer(const Options& options)
      : momentum_(options.get_float("momentum")), use_nesterov_(options.get_bool("use_nesterov")) {}

  std::vector<SlotSpec> slots() const override { return {{"Momentum", zeros()}}; }

  void apply(Variable& variable, const Tensor& gradient, std::span<Variable*> slots,
             double learning_rate, int64_t) override {
    std::vector<Tensor> s = slot_values("MomentumOptimizer", variable, slots, this->slots());
    if (!gradient.defined()) return;
    Tensor var = variable.value();
    ops::apply_momentum(var, s[0], gradient, learning_rate, momentum_, use_nesterov_);
  }

 private:
  double momentum_;
  bool use_nesterov_;
};

class AdamOptimizer final : public Optimizer {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"beta1", OptionType::kFloat, "0.9", "Exponential decay rate of the first moment"},
      {"beta2", OptionType::kFloat, "0.999", "Exponential decay rate of the second moment"},
      {"epsilon", OptionType::kFloat, "1e-8", "Added to sqrt(v) (TF's 'epsilon hat')"},
  };

  explicit AdamOptimizer(const Options& options)
      : beta1_(options.get_float("beta1")),
        beta2_(options.get_float("beta2")),
        epsilon_(options.get_float("epsilon")) {
    if (!(beta1_ >= 0.0 && beta1_ < 1.0)) bad_option("AdamOptimizer", "beta1", beta1_, "[0, 1)");
    if (!(beta2_ >= 0.0 && beta2_ < 1.0)) bad_option("AdamOptimizer", "beta2", beta2_, "[0, 1)");
  }

  std::vector<SlotSpec> slots() const override { return {{"Adam", zeros()}, {"Adam_1", zeros()}}; }

  void apply(Variable& variable, const Tensor& gradient, std::span<Variable*> slots,
             double learning_rate, int64_t step) override {
    std::vector<Tensor> s = slot_values("AdamOptimizer", variable, slots, this->slots());
    if (!gradient.defined()) return;
    if (step < 0) {
      throw InvalidArgument("AdamOptimizer: global step " + std::to_string(step) +
                            " for variable '" + variable.name() + "'; expected a step >= 0");
    }
    Tensor var = variable.value();
    ops::apply_adam(var, s[0], s[1], gradient, learning_rate, beta1_, beta2_, epsilon_, step + 1);
  }

  // TF1's AdamOptimizer starts beta1_power at beta1 and multiplies it by beta1 after each
  // update.
  std::vector<std::pair<std::string, double>> non_slot_values(int64_t steps) const override {
    double t = static_cast<double>(steps + 1);
    return {{"beta1_power", std::pow(beta1_, t)}, {"beta2_power", std::pow(beta2_, t)}};
  }

 private:
  double beta1_, beta2_, epsilon_;
};

class AdagradOptimizer final : public Optimizer {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"initial_accumulator_value", OptionType::kFloat, "0.1",
       "Starting value of the accumulators; must be positive"},
  };

  explicit AdagradOptimizer(const Options& options)
      : initial_accumulator_value_(options.get_float("initial_accumulator_value")) {
    if (!(initial_accumulator_value_ > 0.0)) {
      bad_option("AdagradOptimizer", "initial_accumulator_value", initial_accumulator_value_,
                 "a positive value");
    }
  }

  std::vector<SlotSpec> slots() const override {
    return {{"Adagrad", constant(initial_accumulator_value_)}};
  }

  void apply(Variable& variable, const Tensor& gradient, std::span<Variable*> slots,
             double learning_rate, int64_t) override {
    std::vector<Tensor> s = slot_values("AdagradOptimizer", variable, slots, this->slots());
    if (!gradient.defined()) return;
    NoGradScope no_grad;
    Tensor var = variable.value();
    Tensor& accum = s[0];
    // accum += g^2; var -= g * lr * rsqrt(accum)
    Tensor new_accum = ops::add(accum, ops::square(gradient));
    Tensor new_var =
        ops::sub(var, ops::mul(ops::mul(gradient, learning_rate), ops::rsqrt(new_accum)));
    ops::assign(accum, new_accum);
    ops::assign(var, new_var);
  }

 private:
  double initial_accumulator_value_;
};

class RMSPropOptimizer final : public Optimizer {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"decay", OptionType::kFloat, "0.9", "Discounting factor of the mean square (rho)"},
      {"momentum", OptionType::kFloat, "0.0", "Momentum"},
      {"epsilon", OptionType::kFloat, "1e-10", "Added to the mean square before the sqrt"},
      {"centered", OptionType::kBool, "false",
       "Normalize by the estimated variance (mean square minus squared mean)"},
  };

  explicit RMSPropOptimizer(const Options& options)
      : decay_(options.get_float("decay")),
        momentum_(options.get_float("momentum")),
        epsilon_(options.get_float("epsilon")),
        centered_(options.get_bool("centered")) {}

  std::vector<SlotSpec> slots() const override {
    // TF1 creates "rms" (ones), then "mg" when centered, then "momentum", each under the
    // optimizer's name, uniquified: RMSProp, RMSProp_1[, RMSProp_2].
    if (centered_) {
      return {{"RMSProp", constant(1.0)}, {"RMSProp_1", zeros()}, {"RMSProp_2", zeros()}};
    }
    return {{"RMSProp", constant(1.0)}, {"RMSProp_1", zeros()}};
  }

  void apply(Variable& variable, const Tensor& gradient, std::span<Variable*> slots,
             double learning_rate, int64_t) override {
    std::vector<Tensor> s = slot_values("RMSPropOptimizer", variable, slots, this->slots());
    if (!gradient.defined()) return;
    Tensor var = variable.value();
    // Slots: ms, [mg,] mom (TF1's creation order).
    if (centered_) {
      ops::apply_centered_rms_prop(var, s[1], s[0], s[2], gradient, learning_rate, decay_,
                                   momentum_, epsilon_);
    } else {
      ops::apply_rms_prop(var, s[0], s[1], gradient, learning_rate, decay_, momentum_, epsilon_);
    }
  }

 private:
  double decay_, momentum_, epsilon_;
  bool centered_;
};

class AdadeltaOptimizer final : public Optimizer {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"rho", OptionType::kFloat, "0.95", "Decay rate of the accumulators"},
      {"epsilon", OptionType::kFloat, "1e-8", "Added inside both square roots"},
  };

  explicit AdadeltaOptimizer(const Options& options)
      : rho_(options.get_float("rho")), epsilon_(options.get_float("epsilon")) {}

  std::vector<SlotSpec> slots() const override {
    return {{"Adadelta", zeros()}, {"Adadelta_1", zeros()}};
  }

  void apply(Variable& variable, const Tensor& gradient, std::span<Variable*> slots,
             double learning_rate, int64_t) override {
    std::vector<Tensor> s = slot_values("AdadeltaOptimizer", variable, slots, this->slots());
    if (!gradient.defined()) return;
    NoGradScope no_grad;
    Tensor var = variable.value();
    Tensor& accum = s[0];
    Tensor& accum_update = s[1];
    const double one_minus_rho = 1.0 - rho_;
    // accum = accum * rho + g^2 * (1 - rho)
    Tensor new_accum =
        ops::add(ops::mul(accum, rho_), ops::mul(ops::square(gradient), one_minus_rho));
    // update = sqrt(accum_update + eps) * rsqrt(accum + eps) * g
    Tensor update = ops::mul(ops::mul(ops::sqrt(ops::add(accum_update, epsilon_)),
                                      ops::rsqrt(ops::add(new_accum, epsilon_))),
                             gradient);
    Tensor new_var = ops::sub(var, ops::mul(update, learning_rate));
    // accum_update = accum_update * rho + update^2 * (1 - rho)
    Tensor new_accum_update =
        ops::add(ops::mul(accum_update, rho_), ops::mul(ops::square(update), one_minus_rho));
    ops::assign(accum, new_accum);
    ops::assign(var, new_var);
    ops::assign(accum_update, new_accum_update);
  }

 private:
  double rho_, epsilon_;
};

class FtrlOptimizer final : public Optimizer {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"learning_rate_power", OptionType::kFloat, "-0.5",
       "How the learning rate decreases with the accumulator; <= 0 (0 is a fixed rate)"},
      {"initial_accumulator_value", OptionType::kFloat, "0.1",
       "Starting value of the accumulators; >= 0"},
      {"l1_regularization_strength", OptionType::kFloat, "0.0", "L1 regularization; >= 0"},
      {"l2_regularization_strength", OptionType::kFloat, "0.0", "L2 regularization; >= 0"},
      {"l2_shrinkage_regularization_strength", OptionType::kFloat, "0.0",
       "L2 shrinkage applied to the gradient in the linear term (TF's FtrlV2); >= 0"},
  };

  explicit FtrlOptimizer(const Options& options)
      : lr_power_(options.get_float("learning_rate_power")),
        initial_accumulator_value_(options.get_float("initial_accumulator_value")),
        l1_(options.get_float("l1_regularization_strength")),
        l2_(options.get_float("l2_regularization_strength")),
        l2_shrinkage_(options.get_float("l2_shrinkage_regularization_strength")) {
    constexpr const char* kName = "FtrlOptimizer";
    if (!(lr_power_ <= 0.0)) bad_option(kName, "learning_rate_power", lr_power_, "a value <= 0");
    if (!(initial_accumulator_value_ >= 0.0)) {
      bad_option(kName, "initial_accumulator_value", initial_accumulator_value_, "a value >= 0");
    }
    if (!(l1_ >= 0.0)) bad_option(kName, "l1_regularization_strength", l1_, "a value >= 0");
    if (!(l2_ >= 0.0)) bad_option(kName, "l2_regularization_strength", l2_, "a value >= 0");
    if (!(l2_shrinkage_ >= 0.0)) {
      bad_option(kName, "l2_shrinkage_regularization_strength", l2_shrinkage_, "a value >= 0");
    }
  }

  std::vector<SlotSpec> slots() const override {
    return {{"Ftrl", constant(initial_accumulator_value_)}, {"Ftrl_1", zeros()}};
  }

  void apply(Variable& variable, const Tensor& gradient, std::span<Variable*> slots,
             double learning_rate, int64_t) override {
    std::vector<Tensor> s = slot_values("FtrlOptimizer", variable, slots, this->slots());
    if (!gradient.defined()) return;
    NoGradScope no_grad;
    Tensor var = variable.value();
    Tensor& accum = s[0];
    Tensor& linear = s[1];
    const Tensor lr = scalar_like(var, learning_rate);
    // accum^(-lr_power), with TF's special case sqrt for -0.5.
    auto accum_power = [&](const Tensor& a) {
      return lr_power_ == -0.5 ? ops::sqrt(a) : ops::pow(a, -lr_power_);
    };
    Tensor new_accum = ops::add(accum, ops::square(gradient));
    Tensor shrunk_gradient =
        l2_shrinkage_ > 0.0 ? ops::add(gradient, ops::mul(var, 2.0 * l2_shrinkage_)) : gradient;
    // linear += g' - (new_accum^-p - accum^-p) / lr * var
    Tensor sigma = ops::div(ops::sub(accum_power(new_accum), accum_power(accum)), lr);
    Tensor new_linear = ops::add(linear, ops::sub(shrunk_gradient, ops::mul(sigma, var)));
    // var = |linear| > l1 ? (l1 sign(linear) - linear) / (new_accum^-p / lr + 2 l2) : 0
    Tensor x = ops::sub(ops::mul(ops::sign(new_linear), l1_), new_linear);
    Tensor y = ops::add(ops::div(accum_power(new_accum), lr), 2.0 * l2_);
    Tensor new_var = ops::where(ops::greater(ops::abs(new_linear), scalar_like(var, l1_)),
                                ops::div(x, y), ops::zeros_like(var));
    ops::assign(linear, new_linear);
    ops::assign(var, new_var);
    ops::assign(accum, new_accum);
  }

 private:
  double lr_power_, initial_accumulator_value_, l1_, l2_, l2_shrinkage_;
};

}  // namespace
}  // namespace trainyard::optimizers

#define TRAINYARD_TF_OPTIMIZER_CLASSES(X)                                                    \
  X(optimizer, GradientDescentOptimizer, trainyard::optimizers::GradientDescentOptimizer,    \
    "tf.train.GradientDescentOptimizer: var -= lr * g")                                      \
  X(optimizer, MomentumOptimizer, trainyard::optimizers::MomentumOptimizer,                  \
    "tf.train.MomentumOptimizer: heavy-ball or Nesterov momentum (slot Momentum)")           \
  X(optimizer, AdamOptimizer, trainyard::optimizers::AdamOptimizer,                          \
    "tf.train.AdamOptimizer: bias-corrected Adam (slots Adam, Adam_1)")                      \
  X(optimizer, AdagradOptimizer, trainyard::optimizers::AdagradOptimizer,                    \
    "tf.train.AdagradOptimizer: per-element rates from summed squared gradients")            \
  X(optimizer, RMSPropOptimizer, trainyard::optimizers::RMSPropOptimizer,                    \
    "tf.train.RMSPropOptimizer: TF1 RMSProp, mean square starting at 1, optional centering") \
  X(optimizer, AdadeltaOptimizer, trainyard::optimizers::AdadeltaOptimizer,                  \
    "tf.train.AdadeltaOptimizer: Adadelta (slots Adadelta, Adadelta_1)")                     \
  X(optimizer, FtrlOptimizer, trainyard::optimizers::FtrlOptimizer,                          \
    "tf.train.FtrlOptimizer: FTRL-Proximal with L1/L2 (slots Ftrl, Ftrl_1)")
TRAINYARD_PLUGIN(tf_optimizers, 0, 1, 0, TRAINYARD_TF_OPTIMIZER_CLASSES)
