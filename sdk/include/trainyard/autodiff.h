// Reverse-mode autodiff over the ops recorded while they run (define by run).
//
// Every op whose input requires a gradient records a node that holds what its gradient rule
// needs; the nodes form a graph owned by the tensors that came out of them, so a graph nobody
// can reach is freed with its tensors. gradients() walks that graph backwards from the loss,
// adding up the gradient of a value used several times, and releases each node's saved tensors
// as soon as its gradient has been computed. Gradient rules are ops, so any backend that runs
// the forward ops runs the backward ones.
#ifndef TRAINYARD_AUTODIFF_H_
#define TRAINYARD_AUTODIFF_H_

#include <span>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/tensor.h"

namespace trainyard {

// d loss / d source for each source (leaves marked with set_requires_grad). A source the loss
// does not depend on gets an undefined Tensor. `loss` must be a scalar unless `grad_loss`
// (d final / d loss, loss's shape) is given. The recorded graph is consumed: call once per
// forward pass. Throws InvalidArgument when loss does not require a gradient.
TRAINYARD_API std::vector<Tensor> gradients(const Tensor& loss, std::span<const Tensor> sources,
                                            const Tensor& grad_loss = Tensor());

// While one lives on this thread, ops record nothing.
class TRAINYARD_API NoGradScope {
 public:
  NoGradScope();
  ~NoGradScope();
  NoGradScope(const NoGradScope&) = delete;
  NoGradScope& operator=(const NoGradScope&) = delete;

 private:
  bool previous_;
};

TRAINYARD_API bool grad_recording_enabled();

}  // namespace trainyard

#endif  // TRAINYARD_AUTODIFF_H_
