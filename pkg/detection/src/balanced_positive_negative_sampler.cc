#include "trainyard/pkg/detection/balanced_positive_negative_sampler.h"

#include <algorithm>
#include <string>

#include "trainyard/error.h"

namespace trainyard::detection {

BalancedPositiveNegativeSampler::BalancedPositiveNegativeSampler(double positive_fraction)
    : positive_fraction_(positive_fraction) {
  if (!(positive_fraction >= 0.0 && positive_fraction <= 1.0)) {
    throw InvalidArgument("BalancedPositiveNegativeSampler: positive_fraction " +
                          std::to_string(positive_fraction) + " is outside [0, 1]");
  }
}

namespace {

// subsample_indicator: up to `count` of the indices drawn uniformly (a shuffle, then the head).
void draw(std::vector<int64_t>& indices, int64_t count, std::mt19937_64& generator,
          std::vector<uint8_t>& sampled) {
  std::shuffle(indices.begin(), indices.end(), generator);
  const int64_t n =
      std::min<int64_t>(std::max<int64_t>(count, 0), static_cast<int64_t>(indices.size()));
  for (int64_t i = 0; i < n; ++i) sampled[indices[i]] = 1;
}

}  // namespace

std::vector<uint8_t> BalancedPositiveNegativeSampler::subsample(std::span<const uint8_t> indicator,
                                                                std::optional<int64_t> batch_size,
                                                                std::span<const uint8_t> labels,
                                                                std::mt19937_64& generator) const {
  if (indicator.size() != labels.size()) {
    throw InvalidArgument("BalancedPositiveNegativeSampler: indicator has " +
                          std::to_string(indicator.size()) + " entries but labels " +
                          std::to_string(labels.size()));
  }
  if (batch_size && *batch_size < 0) {
    throw InvalidArgument("BalancedPositiveNegativeSampler: batch_size " +
                          std::to_string(*batch_size) + " is negative");
  }
  std::vector<int64_t> positives, negatives;
  for (std::size_t i = 0; i < indicator.size(); ++i) {
    if (!indicator[i]) continue;
    (labels[i] ? positives : negatives).push_back(static_cast<int64_t>(i));
  }
  std::vector<uint8_t> sampled(indicator.size(), 0);
  const int64_t max_pos =
      batch_size ? static_cast<int64_t>(positive_fraction_ * static_cast<double>(*batch_size))
                 : static_cast<int64_t>(positives.size());
  draw(positives, max_pos, generator, sampled);
  const int64_t num_pos = std::min<int64_t>(max_pos, static_cast<int64_t>(positives.size()));
  int64_t max_neg;
  if (batch_size) {
    max_neg = *batch_size - num_pos;
  } else {
    // tf.to_int32 of a float32 product truncates.
    const float ratio = static_cast<float>((1.0 - positive_fraction_) / positive_fraction_);
    max_neg = static_cast<int64_t>(ratio * static_cast<float>(num_pos));
  }
  draw(negatives, max_neg, generator, sampled);
  return sampled;
}

}  // namespace trainyard::detection
