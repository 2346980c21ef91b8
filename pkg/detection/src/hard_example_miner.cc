#include "trainyard/pkg/detection/hard_example_miner.h"

#include <algorithm>
#include <string>

#include "trainyard/error.h"
#include "trainyard/pkg/detection/non_max_suppression.h"

namespace trainyard::detection {

HardExampleMiner::HardExampleMiner(HardExampleMinerOptions options) : options_(options) {
  if (options_.num_hard_examples < 0 || options_.max_negatives_per_positive < 0 ||
      options_.min_negatives_per_image < 0) {
    throw InvalidArgument(
        "HardExampleMiner: num_hard_examples " + std::to_string(options_.num_hard_examples) +
        ", max_negatives_per_positive " + std::to_string(options_.max_negatives_per_positive) +
        " and min_negatives_per_image " + std::to_string(options_.min_negatives_per_image) +
        " must not be negative");
  }
  if (!(options_.iou_threshold >= 0.0f && options_.iou_threshold <= 1.0f)) {
    throw InvalidArgument("HardExampleMiner: iou_threshold " +
                          std::to_string(options_.iou_threshold) + " is outside [0, 1]");
  }
}

std::vector<int64_t> subsample_selection_to_desired_neg_pos_ratio(
    std::span<const int64_t> indices, const Match& match, double max_negatives_per_positive,
    int64_t min_negatives_per_image, int64_t* num_positives, int64_t* num_negatives) {
  int64_t positives = 0;
  for (int64_t i : indices) positives += match.is_matched(i) ? 1 : 0;
  // tf.to_int32(max_negatives_per_positive * tf.to_float(num_positives)), in f32.
  const int64_t max_negatives = std::max<int64_t>(
      min_negatives_per_image, static_cast<int64_t>(static_cast<float>(max_negatives_per_positive) *
                                                    static_cast<float>(positives)));
  std::vector<int64_t> kept;
  int64_t negatives_so_far = 0;
  for (int64_t i : indices) {
    if (match.is_unmatched(i)) ++negatives_so_far;
    if (match.is_matched(i) || negatives_so_far <= max_negatives) kept.push_back(i);
  }
  if (num_positives != nullptr) *num_positives = positives;
  if (num_negatives != nullptr) *num_negatives = static_cast<int64_t>(kept.size()) - positives;
  return kept;
}

HardExampleMiningResult HardExampleMiner::mine(std::span<const float> location_losses,
                                               std::span<const float> cls_losses,
                                               std::span<const float> decoded_boxes,
                                               int64_t batch_size, int64_t num_anchors,
                                               std::span<const Match> matches) const {
  const std::size_t per_batch = static_cast<std::size_t>(batch_size * num_anchors);
  if (batch_size < 0 || num_anchors < 0 || location_losses.size() != per_batch ||
      cls_losses.size() != per_batch || decoded_boxes.size() != per_batch * 4) {
    throw InvalidArgument(
        "HardExampleMiner: location_losses (" + std::to_string(location_losses.size()) +
        "), cls_losses (" + std::to_string(cls_losses.size()) + ") and decoded_boxes (" +
        std::to_string(decoded_boxes.size()) + ") must be [" + std::to_string(batch_size) + ", " +
        std::to_string(num_anchors) + "] and [" + std::to_string(batch_size) + ", " +
        std::to_string(num_anchors) + ", 4]");
  }
  if (!matches.empty() && matches.size() != static_cast<std::size_t>(batch_size)) {
    throw InvalidArgument("HardExampleMiner: " + std::to_string(matches.size()) +
                          " matches for a batch of " + std::to_string(batch_size));
  }
  for (const Match& m : matches) {
    if (m.num_columns() != num_anchors) {
      throw InvalidArgument("HardExampleMiner: a match has " + std::to_string(m.num_columns()) +
                            " columns for " + std::to_string(num_anchors) + " anchors");
    }
  }
  using LossType = HardExampleMinerOptions::LossType;
  const int64_t num_hard =
      options_.num_hard_examples > 0 ? options_.num_hard_examples : num_anchors;
  const bool subsample = options_.max_negatives_per_positive > 0 && !matches.empty();

  HardExampleMiningResult result;
  result.selection_mask.assign(per_batch, 0.0f);
  std::vector<float> image_losses(static_cast<std::size_t>(num_anchors));
  for (int64_t b = 0; b < batch_size; ++b) {
    const float* loc = location_losses.data() + b * num_anchors;
    const float* cls = cls_losses.data() + b * num_anchors;
    for (int64_t a = 0; a < num_anchors; ++a) {
      switch (options_.loss_type) {
        case LossType::kClassification:
          image_losses[a] = cls[a];
          break;
        case LossType::kLocalization:
          image_losses[a] = loc[a];
          break;
        case LossType::kBoth:
          image_losses[a] = cls[a] * static_cast<float>(options_.cls_loss_weight) +
                            loc[a] * static_cast<float>(options_.loc_loss_weight);
          break;
      }
    }
    std::vector<int64_t> selected =
        non_max_suppression(decoded_boxes.subspan(static_cast<std::size_t>(b * num_anchors * 4),
                                                  static_cast<std::size_t>(num_anchors * 4)),
                            image_losses, num_hard, options_.iou_threshold);
    if (subsample) {
      int64_t positives = 0, negatives = 0;
      selected = subsample_selection_to_desired_neg_pos_ratio(
          selected, matches[b], static_cast<double>(options_.max_negatives_per_positive),
          options_.min_negatives_per_image, &positives, &negatives);
      result.num_positives.push_back(positives);
      result.num_negatives.push_back(negatives);
    }
    for (int64_t a : selected) {
      result.selection_mask[static_cast<std::size_t>(b * num_anchors + a)] = 1.0f;
      result.location_loss += loc[a];
      result.classification_loss += cls[a];
    }
    result.selected_indices.push_back(std::move(selected));
  }
  return result;
}

}  // namespace trainyard::detection
