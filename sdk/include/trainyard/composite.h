// Composites: differentiable functions made of other ops, declared outside the core, with an
// optional gradient of their own and an optional fused kernel per backend.
//
// A model plugin or a pkg/ library declares a composite once (tf.custom_gradient and
// torch.autograd.Function are the models):
//
//   const Composite& netvlad = Composite::declare({
//       .name = "yt8m.netvlad", .num_inputs = 3, .num_outputs = 1,
//       .compose = [](const CompositeCall& c) { return std::vector{...ops on c.inputs...}; },
//       .infer = [](const CompositeCall& c) { return std::vector{TensorType{...}}; },
//       .gradient = [](const CompositeGrad& g) { return std::vector{...}; }});
//   Tensor y = netvlad({x, clusters, weights})[0];
//
// When the inputs' backend registered a kernel for the composite's name with kFusedComposite
// (op.h), the core allocates the outputs `infer` describes and runs that kernel; otherwise it
// runs `compose`. With `gradient`, the core records one tape node whose backward is
// `gradient` (compose then runs without recording); without it, autodiff goes through the ops
// of `compose`, and the fused kernel is used only when no input needs a gradient.
//
// Names are global: declaring a name the core or another library already declared throws
// InvalidArgument naming it. Declare a composite once (a function-local static) and keep the
// reference; the declaration lives as long as the process.
#ifndef TRAINYARD_COMPOSITE_H_
#define TRAINYARD_COMPOSITE_H_

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

struct TensorType {
  Shape shape;
  DType dtype = DType::kF32;
};

// One call: the inputs (all on one backend, checked by the core) and the attribute struct the
// caller passed (shared by agreement between the composite and its fused kernels).
struct CompositeCall {
  std::span<const Tensor> inputs;
  const void* attrs = nullptr;

  template <class T>
  const T& get_attrs() const {
    return *static_cast<const T*>(attrs);
  }
};

// What `gradient` receives: the call, its outputs (no history) and d loss / d output for each
// output (zeros where the loss does not depend on one). It returns one gradient per input
// (an undefined Tensor for an input that gets none, e.g. integer indices).
struct CompositeGrad {
  CompositeCall call;
  std::span<const Tensor> outputs;
  std::span<const Tensor> grad_outputs;
  // Whether input i needs a gradient (a gradient rule may skip the others).
  std::function<bool(std::size_t)> needs_grad;
};

struct CompositeSpec {
  std::string name;
  int num_inputs = 1;
  int num_outputs = 1;
  // Bytes of the attribute struct calls pass (trivially copyable), copied for the gradient;
  // 0 when calls pass none.
  std::size_t attrs_size = 0;
  std::string summary;
  // Checks the inputs (throw InvalidArgument naming the composite) and composes the outputs.
  std::function<std::vector<Tensor>(const CompositeCall&)> compose;
  // The outputs' shapes and dtypes, for a fused kernel; without it no fused kernel is used.
  std::function<std::vector<TensorType>(const CompositeCall&)> infer;
  // The gradient rule, in ops; optional (see above).
  std::function<std::vector<Tensor>(const CompositeGrad&)> gradient;
};

class TRAINYARD_API Composite {
 public:
  // Registers `spec` with the core and binds the fused kernels of live backends. Throws
  // InvalidArgument when the name is taken or compose is missing.
  static const Composite& declare(CompositeSpec spec);
  // For a static library that several plugins of one process link (each has its own copy):
  // declares `spec` like declare(), or returns nullptr when the name is already declared (by
  // another copy, which runs the same composition); the caller then runs its unfused ops.
  // Throws like declare() otherwise. A plugin unloaded and loaded again gets a new copy, which
  // then finds the name taken: give such a composite's fused kernel the composition's bits, or
  // declare it in the core, whose declarations live as long as the process.
  static const Composite* declare_once(CompositeSpec spec);

  // Runs the composite on `inputs` (checked: count, defined, one backend).
  std::vector<Tensor> operator()(std::span<const Tensor> inputs, const void* attrs = nullptr) const;
  std::vector<Tensor> operator()(std::initializer_list<Tensor> inputs,
                                 const void* attrs = nullptr) const {
    return (*this)(std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
  }

  const std::string& name() const { return spec_.name; }
  // Whether `backend` has a fused kernel for this composite.
  bool has_fused_kernel(Backend& backend) const;

  Composite(CompositeSpec spec, const void* def) : spec_(std::move(spec)), def_(def) {}

 private:
  CompositeSpec spec_;
  const void* def_;  // the core's op declaration
};

}  // namespace trainyard

#endif  // TRAINYARD_COMPOSITE_H_
