// Optimizers, named as TensorFlow's (GradientDescentOptimizer, AdamOptimizer, ...).
//
// For each trainable variable the trainer first asks for its slots (momentum, Adam's moments)
// and creates them as non-trainable global variables named "<variable>/<slot name>" (e.g.
// "fc/weights/Adam", "fc/weights/Adam_1"), so they are checkpointed with the model. Each step
// it calls apply() once per variable with that variable's slots, in the order slots() gave.
#ifndef TRAINYARD_OPTIMIZER_H_
#define TRAINYARD_OPTIMIZER_H_

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"
#include "trainyard/variable.h"

namespace trainyard {

struct SlotSpec {
  std::string name;         // appended to the variable name: "Adam", "Adam_1", "Momentum"
  Initializer initializer;  // shape and dtype are the variable's
};

class TRAINYARD_API Optimizer : public PluginObject {
 public:
  ~Optimizer() override;
  virtual std::vector<SlotSpec> slots() const = 0;
  // Updates `variable` in place: it writes into the storage of variable.value() and of the
  // slots' values (the fused ops::apply_* kernels, or ops::assign), never replacing the
  // tensors. `step` is the global step before this update (0 first). An undefined gradient
  // leaves the variable and its slots unchanged.
  virtual void apply(Variable& variable, const Tensor& gradient, std::span<Variable*> slots,
                     double learning_rate, int64_t step) = 0;
  // The scalars TensorFlow 1's optimizer keeps beside the slots, as they stand after `steps`
  // updates: AdamOptimizer's "beta1_power" and "beta2_power". The trainer writes them into
  // checkpoints so that TensorFlow 1 can restore its optimizer from one; Trainyard derives
  // them from the global step and never reads them back. None by default.
  virtual std::vector<std::pair<std::string, double>> non_slot_values(int64_t steps) const;
};

}  // namespace trainyard

#endif  // TRAINYARD_OPTIMIZER_H_
