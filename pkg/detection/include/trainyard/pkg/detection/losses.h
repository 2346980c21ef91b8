// The Object Detection API's per-anchor losses (core/losses.py) on SDK Tensors, composed of
// SDK ops so that every backend runs them and autodiff differentiates them. Each returns the
// loss before any reduction, as the API's _compute_loss does; the model sums and normalizes.
//
// Shapes: predictions and targets [B, A, code_size] (localization) or [B, A, C]
// (classification, C including the background column). Localization weights are [B, A].
// Classification weights are [B, A], [B, A, 1] or [B, A, C] (broadcast over the classes).
// Targets and weights of another float dtype than the predictions are cast to it. Other shapes
// throw InvalidArgument naming the loss and the shapes.
#ifndef TRAINYARD_PKG_DETECTION_LOSSES_H_
#define TRAINYARD_PKG_DETECTION_LOSSES_H_

#include <optional>
#include <string>

#include "trainyard/tensor.h"

namespace trainyard::detection {

class LocalizationLoss {
 public:
  virtual ~LocalizationLoss() = default;
  // [B, A].
  virtual Tensor operator()(const Tensor& prediction, const Tensor& target,
                            const Tensor& weights) const = 0;
};

// 0.5 * sum_k (weights[b, a] * (prediction - target))^2, [B, A].
class WeightedL2LocalizationLoss final : public LocalizationLoss {
 public:
  Tensor operator()(const Tensor& prediction, const Tensor& target,
                    const Tensor& weights) const override;
};

// sum_k weights[b, a] * huber(prediction - target) with huber(x) = 0.5 x^2 for |x| <= delta,
// else delta (|x| - 0.5 delta) (tf.losses.huber_loss), [B, A].
class WeightedSmoothL1LocalizationLoss final : public LocalizationLoss {
 public:
  explicit WeightedSmoothL1LocalizationLoss(double delta = 1.0);
  Tensor operator()(const Tensor& prediction, const Tensor& target,
                    const Tensor& weights) const override;
  double delta() const { return delta_; }

 private:
  double delta_;
};

// weights[b, a] * (1 - IoU(prediction[b, a], target[b, a])) on decoded boxes [B, A, 4]
// (IoU 0 where the boxes do not intersect), [B, A]. The API returns it flattened to [B * A].
class WeightedIOULocalizationLoss final : public LocalizationLoss {
 public:
  Tensor operator()(const Tensor& prediction, const Tensor& target,
                    const Tensor& weights) const override;
};

class ClassificationLoss {
 public:
  virtual ~ClassificationLoss() = default;
  // [B, A, C] for the sigmoid losses, [B, A] for the softmax loss (as the API's).
  virtual Tensor operator()(const Tensor& prediction, const Tensor& target,
                            const Tensor& weights) const = 0;
  // operator() summed over the classes when it has them: [B, A] (what SSD hands the hard
  // example miner and sums).
  Tensor per_anchor(const Tensor& prediction, const Tensor& target, const Tensor& weights) const;
};

// sigmoid_cross_entropy_with_logits(target, prediction) * weights, [B, A, C].
class WeightedSigmoidClassificationLoss final : public ClassificationLoss {
 public:
  Tensor operator()(const Tensor& prediction, const Tensor& target,
                    const Tensor& weights) const override;
};

// Focal loss (Lin et al.): (1 - p_t)^gamma * alpha_t * sigmoid cross entropy * weights with
// p = sigmoid(prediction), p_t = t p + (1 - t)(1 - p), alpha_t = t alpha + (1 - t)(1 - alpha);
// gamma 0 drops the modulating factor, no alpha drops alpha_t. [B, A, C].
class SigmoidFocalClassificationLoss final : public ClassificationLoss {
 public:
  explicit SigmoidFocalClassificationLoss(double gamma = 2.0, std::optional<double> alpha = 0.25);
  Tensor operator()(const Tensor& prediction, const Tensor& target,
                    const Tensor& weights) const override;
  double gamma() const { return gamma_; }
  std::optional<double> alpha() const { return alpha_; }

 private:
  double gamma_;
  std::optional<double> alpha_;
};

// softmax_cross_entropy_with_logits(target, prediction / logit_scale) * w, with w the weights
// averaged over the classes (the API's reduce_mean over the last axis), [B, A].
class WeightedSoftmaxClassificationLoss final : public ClassificationLoss {
 public:
  // logit_scale must not be 0 (InvalidArgument).
  explicit WeightedSoftmaxClassificationLoss(double logit_scale = 1.0);
  Tensor operator()(const Tensor& prediction, const Tensor& target,
                    const Tensor& weights) const override;
  double logit_scale() const { return logit_scale_; }

 private:
  double logit_scale_;
};

// Bootstrapped sigmoid cross entropy (Reed et al.): the target replaced by alpha * target +
// (1 - alpha) * q with q = sigmoid(prediction) ("soft") or [sigmoid(prediction) > 0.5]
// ("hard"); the soft target is differentiated as the API's graph does. [B, A, C].
class BootstrappedSigmoidClassificationLoss final : public ClassificationLoss {
 public:
  // bootstrap_type "soft" or "hard" (InvalidArgument otherwise).
  explicit BootstrappedSigmoidClassificationLoss(double alpha,
                                                 const std::string& bootstrap_type = "soft");
  Tensor operator()(const Tensor& prediction, const Tensor& target,
                    const Tensor& weights) const override;
  double alpha() const { return alpha_; }
  bool hard() const { return hard_; }

 private:
  double alpha_;
  bool hard_;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_LOSSES_H_
