// Composites: differentiable functions made of other ops, declared outside the core, with an
// optional gradient of their own and an optional fused kernel per backend.
//
// A model plugin or a pkg/ library declares a composite and keeps the declaration it gets back
// in its own static storage (tf.custom_gradient and torch.autograd.Function are the models):
//
//   const CompositeDeclaration& netvlad() {
//     static const CompositeDeclaration d = Composite::declare({
//         .name = "yt8m.netvlad", .num_inputs = 3, .num_outputs = 1,
//         .compose = [](const CompositeCall& c) { return std::vector{...ops on c.inputs...}; },
//         .infer = [](const CompositeCall& c) { return std::vector{TensorType{...}}; },
//         .gradient = [](const CompositeGrad& g) { return std::vector{...}; }});
//     return d;
//   }
//   Tensor y = netvlad()({x, clusters, weights})[0];
//
// When the inputs' backend registered a kernel for the composite's name with kFusedComposite
// (op.h), the core allocates the outputs `infer` describes and runs that kernel; otherwise it
// runs `compose`. With `gradient`, the core records one tape node whose backward is
// `gradient` (compose then runs without recording); without it, autodiff goes through the ops
// of `compose`, and the fused kernel is used only when no input needs a gradient.
//
// Ownership. A CompositeDeclaration is its owner's hold on the name: while it lives the name is
// declared (find_op finds it, backends' fused kernels bind to it); destroying it withdraws the
// declaration, as PyTorch's TORCH_LIBRARY registration handles do. Kept in a plugin's static
// storage, it is destroyed when the plugin's library is closed (static destructors run at
// dlclose, while the library's code is still mapped), so the composite of an unloaded plugin is
// gone and loading the plugin again declares it afresh. The core's own composites are held the
// same way in the core's static storage. Fused kernels need no owner of their own: a backend
// lists them in its kernel table, which lives and dies with the backend (and the backend keeps
// its plugin loaded).
//
// One name, several owners. A static pkg/ library linked into several plugins declares the same
// name once per copy. Declarations of one name that agree (inputs, outputs, attribute size,
// summary, whether infer and gradient are given) share it: each owner runs its own copy of the
// functions, every owner gets the fused kernel, and the name stays declared while any owner
// holds it. Declarations that disagree, or a name the core uses for an op, throw
// InvalidArgument naming the composite and the library that declared it first.
//
// A tape node recorded by a composite keeps its spec (the functions' objects) alive; the code
// they point to is the owner's, so a tape must not outlive the plugin whose composites it ran
// (as any object made by a plugin must not).
#ifndef TRAINYARD_COMPOSITE_H_
#define TRAINYARD_COMPOSITE_H_

#include <functional>
#include <memory>
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

class CompositeDeclaration;

class TRAINYARD_API Composite {
 public:
  // Declares `spec` for the caller, who becomes an owner of its name (see above). Throws
  // InvalidArgument when compose is missing, the counts are wrong, the name is an op's, or the
  // name is declared by another owner with a different signature.
  [[nodiscard]] static CompositeDeclaration declare(CompositeSpec spec);

  // Runs the composite on `inputs` (checked: count, defined, one backend).
  std::vector<Tensor> operator()(std::span<const Tensor> inputs, const void* attrs = nullptr) const;
  std::vector<Tensor> operator()(std::initializer_list<Tensor> inputs,
                                 const void* attrs = nullptr) const {
    return (*this)(std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
  }

  const std::string& name() const { return spec_->name; }
  // Whether `backend` has a fused kernel for this composite.
  bool has_fused_kernel(Backend& backend) const;

 private:
  friend class CompositeDeclaration;
  friend struct CompositeTable;
  Composite(std::shared_ptr<const CompositeSpec> spec, const void* def)
      : spec_(std::move(spec)), def_(def) {}

  std::shared_ptr<const CompositeSpec> spec_;  // shared with the tape nodes it records
  const void* def_;                            // the core's op declaration
};

// An owner's hold on a composite's name (see "Ownership" above). Move-only; an empty one (moved
// from, or default-constructed) holds nothing and must not be called.
class TRAINYARD_API CompositeDeclaration {
 public:
  CompositeDeclaration() = default;
  CompositeDeclaration(CompositeDeclaration&& other) noexcept : composite_(other.composite_) {
    other.composite_ = nullptr;
  }
  CompositeDeclaration& operator=(CompositeDeclaration&& other) noexcept;
  CompositeDeclaration(const CompositeDeclaration&) = delete;
  CompositeDeclaration& operator=(const CompositeDeclaration&) = delete;
  // Withdraws this owner's declaration; the name goes when its last owner does.
  ~CompositeDeclaration();

  explicit operator bool() const { return composite_ != nullptr; }
  const Composite& operator*() const { return *composite_; }
  const Composite* operator->() const { return composite_; }
  const Composite* get() const { return composite_; }

  std::vector<Tensor> operator()(std::span<const Tensor> inputs,
                                 const void* attrs = nullptr) const {
    return (*composite_)(inputs, attrs);
  }
  std::vector<Tensor> operator()(std::initializer_list<Tensor> inputs,
                                 const void* attrs = nullptr) const {
    return (*composite_)(inputs, attrs);
  }

 private:
  friend struct CompositeTable;
  explicit CompositeDeclaration(Composite* composite) : composite_(composite) {}
  void release() noexcept;

  Composite* composite_ = nullptr;
};

}  // namespace trainyard

#endif  // TRAINYARD_COMPOSITE_H_
