// Label losses, as in the YouTube-8M losses.py: a per-example sum over classes, averaged over
// the batch. The result is a scalar tensor composed of ops, so the core differentiates it.
#ifndef TRAINYARD_LOSS_H_
#define TRAINYARD_LOSS_H_

#include <optional>

#include "trainyard/export.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"

namespace trainyard {

class TRAINYARD_API Loss : public PluginObject {
 public:
  ~Loss() override;
  // predictions and labels are [B, C] on the same device; label_weights, when given, [B, C].
  // Throws InvalidArgument naming both shapes when they differ.
  virtual Tensor calculate_loss(const Tensor& predictions, const Tensor& labels,
                                const std::optional<Tensor>& label_weights) = 0;
};

}  // namespace trainyard

#endif  // TRAINYARD_LOSS_H_
