// The Object Detection API's BalancedPositiveNegativeSampler (core/
// balanced_positive_negative_sampler.py, non-static mode): a minibatch of anchors with at most
// positive_fraction positives, for Faster R-CNN's first and second stage.
#ifndef TRAINYARD_PKG_DETECTION_BALANCED_POSITIVE_NEGATIVE_SAMPLER_H_
#define TRAINYARD_PKG_DETECTION_BALANCED_POSITIVE_NEGATIVE_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace trainyard::detection {

class BalancedPositiveNegativeSampler {
 public:
  // positive_fraction in [0, 1] (InvalidArgument otherwise).
  explicit BalancedPositiveNegativeSampler(double positive_fraction = 0.5);

  // indicator: the anchors that may be sampled; labels: which of them are positive (both
  // [N], non-zero is true). With a batch size: up to floor(positive_fraction * batch_size)
  // positives drawn uniformly, then batch_size minus the positives drawn negatives. Without:
  // every positive, and floor((1 - f) / f * positives) negatives. Returns the [N] indicator of
  // the sampled anchors (1 sampled). The draws come from `generator` (a shuffle per kind, as
  // subsample_indicator's tf.random_shuffle), so a seeded generator repeats them.
  std::vector<uint8_t> subsample(std::span<const uint8_t> indicator,
                                 std::optional<int64_t> batch_size, std::span<const uint8_t> labels,
                                 std::mt19937_64& generator) const;

  double positive_fraction() const { return positive_fraction_; }

 private:
  double positive_fraction_;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_BALANCED_POSITIVE_NEGATIVE_SAMPLER_H_
