#include "trainyard/pkg/detection/losses.h"

#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard::detection {

namespace {

std::string describe(const Tensor& t) {
  return t.defined() ? t.description() : std::string("undefined");
}

// `t` in `like`'s dtype.
Tensor as_dtype_of(const Tensor& t, const Tensor& like) {
  return t.dtype() == like.dtype() ? t : ops::cast(t, like.dtype());
}

// Checks prediction and target [B, A, K] of one shape (K == 4 when `boxes`), weights [B, A];
// returns the weights in the prediction's dtype.
Tensor check_localization(const char* loss, const Tensor& prediction, const Tensor& target,
                          const Tensor& weights, bool boxes) {
  const bool ok = prediction.defined() && target.defined() && weights.defined() &&
                  prediction.shape().rank() == 3 && target.shape() == prediction.shape() &&
                  (!boxes || prediction.shape()[2] == 4) && weights.shape().rank() == 2 &&
                  weights.shape()[0] == prediction.shape()[0] &&
                  weights.shape()[1] == prediction.shape()[1];
  if (!ok) {
    throw InvalidArgument(std::string(loss) + ": prediction " + describe(prediction) + ", target " +
                          describe(target) + ", weights " + describe(weights) +
                          "; they must be [B, A, " + (boxes ? "4" : "code_size") +
                          "] twice and [B, A]");
  }
  return as_dtype_of(weights, prediction);
}

// Checks prediction and target [B, A, C] of one shape and weights [B, A], [B, A, 1] or
// [B, A, C]; returns the weights as [B, A, 1] or [B, A, C] in the prediction's dtype.
Tensor check_classification(const char* loss, const Tensor& prediction, const Tensor& target,
                            const Tensor& weights) {
  bool ok = prediction.defined() && target.defined() && weights.defined() &&
            prediction.shape().rank() == 3 && target.shape() == prediction.shape();
  if (ok) {
    const Shape& p = prediction.shape();
    const Shape& w = weights.shape();
    ok = (w.rank() == 2 || w.rank() == 3) && w[0] == p[0] && w[1] == p[1] &&
         (w.rank() == 2 || w[2] == 1 || w[2] == p[2]);
  }
  if (!ok) {
    throw InvalidArgument(std::string(loss) + ": prediction " + describe(prediction) + ", target " +
                          describe(target) + ", weights " + describe(weights) +
                          "; they must be [B, A, C] twice and [B, A], [B, A, 1] or [B, A, C]");
  }
  Tensor w = as_dtype_of(weights, prediction);
  if (w.shape().rank() == 2) w = ops::reshape(w, Shape{w.shape()[0], w.shape()[1], 1});
  return w;
}

// The last axis' k-th entry of x [B, A, 4] as [B, A].
Tensor coordinate(const Tensor& x, int64_t k) {
  const int64_t b = x.shape()[0], a = x.shape()[1];
  return ops::reshape(ops::slice(x, {0, 0, k}, {b, a, 1}), Shape{b, a});
}

}  // namespace

Tensor WeightedL2LocalizationLoss::operator()(const Tensor& prediction, const Tensor& target,
                                              const Tensor& weights) const {
  Tensor w = check_localization("WeightedL2LocalizationLoss", prediction, target, weights, false);
  w = ops::reshape(w, Shape{w.shape()[0], w.shape()[1], 1});
  Tensor diff = (prediction - as_dtype_of(target, prediction)) * w;
  return ops::reduce_sum(0.5 * ops::square(diff), {2});
}

WeightedSmoothL1LocalizationLoss::WeightedSmoothL1LocalizationLoss(double delta) : delta_(delta) {
  if (!(delta > 0.0)) {
    throw InvalidArgument("WeightedSmoothL1LocalizationLoss: delta " + std::to_string(delta) +
                          " is not positive");
  }
}

Tensor WeightedSmoothL1LocalizationLoss::operator()(const Tensor& prediction, const Tensor& target,
                                                    const Tensor& weights) const {
  Tensor w =
      check_localization("WeightedSmoothL1LocalizationLoss", prediction, target, weights, false);
  w = ops::reshape(w, Shape{w.shape()[0], w.shape()[1], 1});
  // tf.losses.huber_loss: quadratic = min(|x|, delta), linear = |x| - quadratic,
  // 0.5 quadratic^2 + delta linear.
  Tensor abs_error = ops::abs(prediction - as_dtype_of(target, prediction));
  Tensor quadratic =
      ops::minimum(abs_error, ops::scalar(prediction.backend(), delta_, prediction.dtype()));
  Tensor linear = abs_error - quadratic;
  Tensor huber = 0.5 * ops::square(quadratic) + delta_ * linear;
  return ops::reduce_sum(huber * w, {2});
}

Tensor WeightedIOULocalizationLoss::operator()(const Tensor& prediction, const Tensor& target,
                                               const Tensor& weights) const {
  Tensor w = check_localization("WeightedIOULocalizationLoss", prediction, target, weights, true);
  Tensor t = as_dtype_of(target, prediction);
  Tensor py0 = coordinate(prediction, 0), px0 = coordinate(prediction, 1);
  Tensor py1 = coordinate(prediction, 2), px1 = coordinate(prediction, 3);
  Tensor ty0 = coordinate(t, 0), tx0 = coordinate(t, 1);
  Tensor ty1 = coordinate(t, 2), tx1 = coordinate(t, 3);
  Tensor zero = ops::zeros_like(py0);
  Tensor ih = ops::maximum(zero, ops::minimum(py1, ty1) - ops::maximum(py0, ty0));
  Tensor iw = ops::maximum(zero, ops::minimum(px1, tx1) - ops::maximum(px0, tx0));
  Tensor inter = ih * iw;
  Tensor unions = (py1 - py0) * (px1 - px0) + (ty1 - ty0) * (tx1 - tx0) - inter;
  // IoU 0 where the boxes do not intersect (the union may be 0 there too: divide by 1 instead).
  Tensor no_overlap = ops::equal(inter, zero);
  Tensor safe_union = ops::where(no_overlap, ops::ones_like(unions), unions);
  Tensor iou = ops::where(no_overlap, zero, inter / safe_union);
  return w * (1.0 - iou);
}

Tensor ClassificationLoss::per_anchor(const Tensor& prediction, const Tensor& target,
                                      const Tensor& weights) const {
  Tensor loss = (*this)(prediction, target, weights);
  return loss.shape().rank() == 3 ? ops::reduce_sum(loss, {2}) : loss;
}

Tensor WeightedSigmoidClassificationLoss::operator()(const Tensor& prediction, const Tensor& target,
                                                     const Tensor& weights) const {
  Tensor w = check_classification("WeightedSigmoidClassificationLoss", prediction, target, weights);
  return ops::sigmoid_cross_entropy_with_logits(as_dtype_of(target, prediction), prediction) * w;
}

SigmoidFocalClassificationLoss::SigmoidFocalClassificationLoss(double gamma,
                                                               std::optional<double> alpha)
    : gamma_(gamma), alpha_(alpha) {}

Tensor SigmoidFocalClassificationLoss::operator()(const Tensor& prediction, const Tensor& target,
                                                  const Tensor& weights) const {
  Tensor w = check_classification("SigmoidFocalClassificationLoss", prediction, target, weights);
  Tensor t = as_dtype_of(target, prediction);
  Tensor cross_entropy = ops::sigmoid_cross_entropy_with_logits(t, prediction);
  Tensor p = ops::sigmoid(prediction);
  Tensor p_t = t * p + (1.0 - t) * (1.0 - p);
  Tensor loss = cross_entropy;
  if (gamma_ != 0.0) loss = ops::pow(1.0 - p_t, gamma_) * loss;
  if (alpha_) loss = (t * *alpha_ + (1.0 - t) * (1.0 - *alpha_)) * loss;
  return loss * w;
}

WeightedSoftmaxClassificationLoss::WeightedSoftmaxClassificationLoss(double logit_scale)
    : logit_scale_(logit_scale) {
  if (logit_scale == 0.0) {
    throw InvalidArgument("WeightedSoftmaxClassificationLoss: logit_scale is 0");
  }
}

Tensor WeightedSoftmaxClassificationLoss::operator()(const Tensor& prediction, const Tensor& target,
                                                     const Tensor& weights) const {
  Tensor w = check_classification("WeightedSoftmaxClassificationLoss", prediction, target, weights);
  w = ops::reduce_mean(w, {2});
  Tensor logits = prediction / logit_scale_;
  return ops::softmax_cross_entropy_with_logits(as_dtype_of(target, prediction), logits, -1) * w;
}

BootstrappedSigmoidClassificationLoss::BootstrappedSigmoidClassificationLoss(
    double alpha, const std::string& bootstrap_type)
    : alpha_(alpha), hard_(bootstrap_type == "hard") {
  if (bootstrap_type != "hard" && bootstrap_type != "soft") {
    throw InvalidArgument("BootstrappedSigmoidClassificationLoss: bootstrap_type '" +
                          bootstrap_type + "' is not 'hard' or 'soft'");
  }
}

Tensor BootstrappedSigmoidClassificationLoss::operator()(const Tensor& prediction,
                                                         const Tensor& target,
                                                         const Tensor& weights) const {
  Tensor w =
      check_classification("BootstrappedSigmoidClassificationLoss", prediction, target, weights);
  Tensor t = as_dtype_of(target, prediction);
  Tensor p = ops::sigmoid(prediction);
  Tensor q = hard_ ? ops::cast(ops::greater(p, ops::scalar(p.backend(), 0.5, p.dtype())),
                               prediction.dtype())
                   : p;
  Tensor bootstrap_target = alpha_ * t + (1.0 - alpha_) * q;
  return ops::sigmoid_cross_entropy_with_logits(bootstrap_target, prediction) * w;
}

}  // namespace trainyard::detection
