// The label losses of the YouTube-8M starter code (losses.py). Each is the batch mean of a
// per-example sum over classes:
//
//   CrossEntropyLoss  -sum_c [y log(p + 1e-5) + (1 - y) log(1 - p + 1e-5)], each term times
//                     label_weights when given. p are probabilities, not logits.
//   HingeLoss         sum_c max(0, b - (2y - 1) p), b = 1 by default.
//   SoftmaxLoss       -sum_c y_c / max(sum_c y_c, 1e-7) * log softmax(p)_c. The original writes
//                     log(softmax(p)); log_softmax is the same value without its underflow.
//
// Labels of another dtype than the predictions are cast to it, as the original's
// tf.cast(labels, tf.float32). As in the original, only CrossEntropyLoss uses label_weights;
// the others ignore them.
#include <optional>
#include <string>
#include <string_view>

#include "trainyard/error.h"
#include "trainyard/loss.h"
#include "trainyard/ops.h"
#include "trainyard/options.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"

namespace trainyard::losses {
namespace {

// Checks that predictions are a float [B, C] and `other` has their shape; returns `other` in
// the predictions' dtype.
Tensor checked_like_predictions(std::string_view loss, const Tensor& predictions,
                                const Tensor& other, const char* what) {
  if (!other.defined()) {
    throw InvalidArgument(std::string(loss) + ": " + what + " are missing; expected " +
                          predictions.shape().to_string() + " like the predictions");
  }
  if (other.shape() != predictions.shape()) {
    throw InvalidArgument(std::string(loss) + ": predictions are " + predictions.description() +
                          " but " + what + " are " + other.description() +
                          "; they must have the same shape");
  }
  return other.dtype() == predictions.dtype() ? other : ops::cast(other, predictions.dtype());
}

void check_predictions(std::string_view loss, const Tensor& predictions) {
  if (!predictions.defined() || predictions.shape().rank() != 2) {
    throw InvalidArgument(std::string(loss) + ": predictions are " +
                          (predictions.defined() ? predictions.description() : "undefined") +
                          "; expected [batch, num_classes]");
  }
  if (predictions.dtype() != DType::kF32 && predictions.dtype() != DType::kF64) {
    throw InvalidArgument(std::string(loss) + ": predictions are " + predictions.description() +
                          "; expected f32 or f64");
  }
}

// reduce_mean over the batch of the per-example sum over classes.
Tensor batch_mean_of_class_sum(const Tensor& per_class) {
  return ops::reduce_mean(ops::reduce_sum(per_class, {1}));
}

// ---------------------------------------------------------------------------------------------

class CrossEntropyLoss final : public Loss {
 public:
  explicit CrossEntropyLoss(const Options&) {}

  Tensor calculate_loss(const Tensor& predictions, const Tensor& labels,
                        const std::optional<Tensor>& label_weights) override {
    constexpr const char* kName = "CrossEntropyLoss";
    constexpr double kEpsilon = 1e-5;
    check_predictions(kName, predictions);
    Tensor y = checked_like_predictions(kName, predictions, labels, "labels");
    if (!label_weights.has_value()) {
      // The same sum of terms per example, fused: one pass forward, one backward.
      return ops::reduce_mean(ops::binary_cross_entropy(predictions, y, kEpsilon));
    }
    // y log(p + eps) + (1 - y) log(1 - p + eps), negated; 1 - p is computed before eps is
    // added, as the original's left-to-right float arithmetic does.
    Tensor positive = ops::mul(y, ops::log(ops::add(predictions, kEpsilon)));
    Tensor one_minus_p = ops::add(ops::neg(predictions), 1.0);
    Tensor negative =
        ops::mul(ops::add(ops::neg(y), 1.0), ops::log(ops::add(one_minus_p, kEpsilon)));
    Tensor cross_entropy = ops::neg(ops::add(positive, negative));
    if (label_weights.has_value()) {
      cross_entropy =
          ops::mul(cross_entropy,
                   checked_like_predictions(kName, predictions, *label_weights, "label_weights"));
    }
    return batch_mean_of_class_sum(cross_entropy);
  }
};

class HingeLoss final : public Loss {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"b", OptionType::kFloat, "1.0", "Margin: the loss is max(0, b - (2y - 1) p) per class"},
  };

  explicit HingeLoss(const Options& options) : b_(options.get_float("b")) {}

  Tensor calculate_loss(const Tensor& predictions, const Tensor& labels,
                        const std::optional<Tensor>&) override {
    constexpr const char* kName = "HingeLoss";
    check_predictions(kName, predictions);
    Tensor y = checked_like_predictions(kName, predictions, labels, "labels");
    Tensor sign_labels = ops::add(ops::mul(y, 2.0), -1.0);
    Tensor margin = ops::add(ops::neg(ops::mul(sign_labels, predictions)), b_);
    return batch_mean_of_class_sum(ops::maximum(ops::zeros_like(margin), margin));
  }

 private:
  double b_;
};

class SoftmaxLoss final : public Loss {
 public:
  explicit SoftmaxLoss(const Options&) {}

  Tensor calculate_loss(const Tensor& predictions, const Tensor& labels,
                        const std::optional<Tensor>&) override {
    constexpr const char* kName = "SoftmaxLoss";
    constexpr double kEpsilon = 1e-7;  // the original's 10e-8
    check_predictions(kName, predictions);
    Tensor y = checked_like_predictions(kName, predictions, labels, "labels");
    // L1 normalization of the labels (they are >= 0).
    Tensor row_sum = ops::reduce_sum(y, {1}, /*keepdims=*/true);
    Tensor label_rowsum =
        ops::maximum(row_sum, ops::full(y.backend(), row_sum.shape(), kEpsilon, y.dtype()));
    Tensor normalized = ops::div(y, label_rowsum);
    Tensor per_class = ops::neg(ops::mul(normalized, ops::log_softmax(predictions, 1)));
    return batch_mean_of_class_sum(per_class);
  }
};

}  // namespace
}  // namespace trainyard::losses

#define TRAINYARD_YT8M_LOSS_CLASSES(X)                                                    \
  X(loss, CrossEntropyLoss, trainyard::losses::CrossEntropyLoss,                          \
    "YouTube-8M: binary cross-entropy on probabilities (epsilon 1e-5), optional weights") \
  X(loss, HingeLoss, trainyard::losses::HingeLoss,                                        \
    "YouTube-8M: hinge loss max(0, b - (2y - 1) p) summed over classes")                  \
  X(loss, SoftmaxLoss, trainyard::losses::SoftmaxLoss,                                    \
    "YouTube-8M: softmax cross-entropy against L1-normalized labels (epsilon 1e-7)")
TRAINYARD_PLUGIN(yt8m_losses, 0, 1, 0, TRAINYARD_YT8M_LOSS_CLASSES)
