// TF-Slim's variable scopes for one forward pass: the name prefix of the variables a layer
// creates, the uniquified default names of layers called without a scope ("fully_connected",
// "fully_connected_1", ...), and the training/inference switch that slim models pass to
// batch_norm and dropout through arg_scope(is_training=...).
//
// A model makes one root scope at the top of each forward() call:
//
//   ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
//     layers::VariableScope root(ctx, mode);    // is_training() == (mode == Mode::kTrain)
//     layers::VariableScope tower = root.child("tower");
//     Tensor h = layers::fully_connected(tower, x, 1024);  // tower/fully_connected/weights
//     ...
//
// Default names are counted per scope object and per forward call, exactly as TensorFlow
// counts them per graph: calling the same layers in the same order on every call gives the same
// names, so later calls find the variables the first one created. That is why layers take the
// scope by non-const reference: a temporary scope would forget the names it handed out, and two
// default-named layers would silently share variables. The scope refers to the ModelContext,
// which must outlive it; it is not thread-safe.
#ifndef TRAINYARD_PKG_LAYERS_VARIABLE_SCOPE_H_
#define TRAINYARD_PKG_LAYERS_VARIABLE_SCOPE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "trainyard/model.h"
#include "trainyard/pkg/layers/quantize.h"
#include "trainyard/variable.h"

namespace trainyard::layers {

class VariableScope {
 public:
  // The root scope of one forward pass: no prefix; is_training() is is_training(mode).
  VariableScope(ModelContext& ctx, Mode mode);

  // The child scope `name` ("<this>/<name>"); an empty name or one containing "//" throws
  // InvalidArgument naming it. Explicit names are not uniquified: two layers given the same
  // scope share their variables, as tf.variable_scope(name, reuse=True) would.
  VariableScope child(std::string_view name) const;
  // child(name) when `name` is not empty; otherwise `default_name`, made unique among the
  // default names this scope object handed out ("BatchNorm", "BatchNorm_1", ...), as
  // tf.variable_scope(scope, default_name=...) does.
  VariableScope child_or_default(std::string_view name, std::string_view default_name);

  // The scope's full name ("" for the root), and `name` under it.
  const std::string& name() const { return prefix_; }
  std::string full_name(std::string_view name) const;

  // ctx.variable() with spec.name taken relative to this scope.
  Variable& variable(VariableSpec spec) const;

  ModelContext& context() const { return *ctx_; }
  Backend& backend() const { return ctx_->backend(); }
  Mode mode() const { return mode_; }
  // slim's is_training for batch_norm and dropout when a layer's options leave it unset.
  bool is_training() const { return trainyard::is_training(mode_); }

  // A seed for the random op `name` under this scope: a function of the context's seed (per
  // step) and the op's full name, so two dropout layers draw different masks and a layer's
  // mask does not depend on how many random ops ran before it.
  uint64_t op_seed(std::string_view name) const;

  // Quantization-aware training (quantize.h) for every layer built under this scope and the
  // scopes made from it afterwards; nullopt turns it off. A model sets it on its root scope at
  // the top of each forward pass (the state, such as whether the delay has passed, is per pass);
  // count_step false for a training step's later clones (QuantizeState).
  void set_quantize(const std::optional<QuantizeOptions>& options, bool count_step = true);
  // The state set_quantize made for this scope's pass, or null.
  QuantizeState* quantize() const { return quantize_.get(); }

 private:
  VariableScope(ModelContext* ctx, Mode mode, std::string prefix);

  ModelContext* ctx_;
  Mode mode_;
  std::string prefix_;
  std::map<std::string, int, std::less<>> default_name_counts_;
  std::shared_ptr<QuantizeState> quantize_;
};

}  // namespace trainyard::layers

#endif  // TRAINYARD_PKG_LAYERS_VARIABLE_SCOPE_H_
