// The recorded graph behind autodiff.h: nodes created by ops, edges to their inputs.
#ifndef TRAINYARD_CORE_SRC_AUTODIFF_INTERNAL_H_
#define TRAINYARD_CORE_SRC_AUTODIFF_INTERNAL_H_

#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "trainyard/op.h"
#include "trainyard/ops/linalg.h"
#include "trainyard/tensor.h"

namespace trainyard {

struct Node;

// Where the gradient of one input goes: the node that produced it, or a leaf.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t output_nr = 0;
  std::shared_ptr<AutogradMeta> leaf;
  bool connected() const { return node != nullptr || leaf != nullptr; }
};

// Given the gradients of the op's outputs (undefined ones replaced by zeros), returns one
// gradient per recorded input (undefined: none).
using BackwardFn = std::function<std::vector<Tensor>(std::span<const Tensor> grad_outputs)>;

// The gradient of a consumer's input 0 with respect to the pre-activation of the op that made
// it: given the consumer's grad_outputs, d loss / d z where input 0 is activation(z).
using PreactivationGradFn = std::function<Tensor(std::span<const Tensor> grad_outputs)>;

struct Node {
  const char* op = "";  // the op or composite that made the outputs
  std::vector<Edge> inputs;
  std::vector<Shape> output_shapes;
  std::vector<DType> output_dtypes;
  Backend* backend = nullptr;
  BackwardFn backward;  // released once run

  // Fusing an activation's gradient into its consumer's (a loss over a sigmoid's output: one
  // pass instead of the loss's gradient, then the activation's). A producer whose one output is
  // activation(z) may give `backward_from_preactivation`, its backward given d loss / d z in
  // place of d loss / d output; a consumer may give `input0_preactivation_grad`, d loss / d z
  // for an input 0 made by `input0_activation`. gradients() uses the pair when the consumer is
  // the output's only use in the walk and none of the consumer's other inputs needs a
  // gradient; otherwise each node runs its own backward.
  Activation output_activation = Activation::kNone;
  BackwardFn backward_from_preactivation;
  Activation input0_activation = Activation::kNone;
  PreactivationGradFn input0_preactivation_grad;
};

struct AutogradMeta {
  std::shared_ptr<Node> grad_fn;  // null for a leaf
  uint32_t output_nr = 0;
  bool is_leaf = false;
};

// True when recording is on and one of `inputs` requires a gradient.
bool should_record(std::initializer_list<const Tensor*> inputs);
bool should_record(std::span<const Tensor> inputs);

// Attaches a node for `op` to `outputs` (which must not yet have autodiff history).
void record(const char* op, std::initializer_list<const Tensor*> inputs, std::span<Tensor> outputs,
            BackwardFn backward);
void record(const char* op, std::span<const Tensor> inputs, std::span<Tensor> outputs,
            BackwardFn backward);

// Called by gradients_as_ready with a source's index and its final gradient (undefined when
// the loss reached it only through edges that carried none), as soon as the backward walk has
// passed every use of that source, while the walk goes on.
using GradientReadyFn = std::function<void(std::size_t source, const Tensor& gradient)>;

// gradients() (autodiff.h), telling `on_ready` of each source's gradient as soon as it is final
// (a data-parallel reducer starts reducing it while the rest of the backward pass runs). A
// source the walk never reaches is not reported; its entry in the result is undefined.
std::vector<Tensor> gradients_as_ready(const Tensor& loss, std::span<const Tensor> sources,
                                       const GradientReadyFn& on_ready,
                                       const Tensor& grad_loss = Tensor());

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_AUTODIFF_INTERNAL_H_
