// Label losses on logits, for a model that has them: it returns sigmoid(logits) or
// softmax(logits) as ModelOutput::predictions and one of these as ModelOutput::loss, which the
// trainer then uses instead of the --label_loss class (model.h). On logits the loss stays
// finite and its gradient exact where the probabilities have saturated to 0 or 1, which a Loss
// class (it sees only the probabilities) cannot do.
//
// Composed of the SDK's ops (the fused sigmoid_cross_entropy_with_logits, log_softmax), so
// they run on every backend and the core differentiates them. Labels of another dtype than the
// logits are cast to it. Errors as ops.h says; labels of another shape than the logits throw
// InvalidArgument naming both.
#ifndef TRAINYARD_LOGIT_LOSSES_H_
#define TRAINYARD_LOGIT_LOSSES_H_

#include <cstdint>
#include <string>

#include "trainyard/error.h"
#include "trainyard/ops/array.h"
#include "trainyard/ops/loss.h"
#include "trainyard/ops/math.h"
#include "trainyard/ops/reduce.h"
#include "trainyard/tensor.h"

namespace trainyard::ops {

namespace logit_losses_internal {
// `labels` in the logits' dtype, after checking that the shapes agree.
inline Tensor labels_like(const char* loss, const Tensor& labels, const Tensor& logits) {
  if (!labels.defined() || !logits.defined() || labels.shape() != logits.shape()) {
    throw InvalidArgument(std::string(loss) + ": labels are " +
                          (labels.defined() ? labels.description() : std::string("undefined")) +
                          " but logits are " +
                          (logits.defined() ? logits.description() : std::string("undefined")) +
                          "; they must have the same shape");
  }
  return labels.dtype() == logits.dtype() ? labels : cast(labels, logits.dtype());
}
}  // namespace logit_losses_internal

// tf.nn.softmax_cross_entropy_with_logits: -sum(labels * log_softmax(logits)) along `axis`, one
// value per row (the logits' shape without `axis`). Each row of labels is a distribution (one-hot
// for single-label data); the gradient with respect to the logits is softmax(logits) - labels.
inline Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits,
                                                int64_t axis = -1) {
  Tensor y =
      logit_losses_internal::labels_like("softmax_cross_entropy_with_logits", labels, logits);
  return neg(reduce_sum(mul(y, log_softmax(logits, axis)), {axis}));
}

// The label loss (loss.h's convention: a per-example sum over classes, averaged over the batch)
// of independent sigmoids on logits [B, C] with multi-hot labels [B, C]: the YouTube-8M
// CrossEntropyLoss of sigmoid(logits) without its epsilon. tf.losses.sigmoid_cross_entropy
// averages over every element instead, which is this divided by C.
inline Tensor sigmoid_cross_entropy_label_loss(const Tensor& labels, const Tensor& logits) {
  Tensor y = logit_losses_internal::labels_like("sigmoid_cross_entropy_label_loss", labels, logits);
  return reduce_mean(reduce_sum(sigmoid_cross_entropy_with_logits(y, logits), {-1}));
}

// The label loss of a softmax over classes on logits [B, C] with one-hot (or distribution)
// labels [B, C]: the batch mean of softmax_cross_entropy_with_logits, as
// tf.losses.softmax_cross_entropy with unit weights and the image classifiers compute it.
inline Tensor softmax_cross_entropy_label_loss(const Tensor& labels, const Tensor& logits) {
  return reduce_mean(softmax_cross_entropy_with_logits(labels, logits, -1));
}

}  // namespace trainyard::ops

#endif  // TRAINYARD_LOGIT_LOSSES_H_
