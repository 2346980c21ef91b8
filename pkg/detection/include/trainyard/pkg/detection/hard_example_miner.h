// The Object Detection API's HardExampleMiner (core/losses.py): per image, the anchors with the
// highest losses that do not overlap each other much (NMS over the decoded predicted boxes,
// scored by loss), then optionally at most max_negatives_per_positive negatives per positive
// (_subsample_selection_to_desired_neg_pos_ratio). SSD sums its per-anchor losses over the
// selected anchors only.
#ifndef TRAINYARD_PKG_DETECTION_HARD_EXAMPLE_MINER_H_
#define TRAINYARD_PKG_DETECTION_HARD_EXAMPLE_MINER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "trainyard/pkg/detection/matcher.h"

namespace trainyard::detection {

// hard_example_miner.proto's fields and defaults. 0 for num_hard_examples means every anchor
// (the builder's None); 0 for max_negatives_per_positive means no ratio (no subsampling). The
// loss weights are what the builder passes (the loss config's classification_weight and
// localization_weight, 1.0 by default; the Python class defaults to 0.05 and 0.06).
struct HardExampleMinerOptions {
  enum class LossType { kBoth, kClassification, kLocalization };
  int64_t num_hard_examples = 64;
  float iou_threshold = 0.7f;
  LossType loss_type = LossType::kBoth;
  double cls_loss_weight = 1.0;
  double loc_loss_weight = 1.0;
  int64_t max_negatives_per_positive = 0;
  int64_t min_negatives_per_image = 0;
};

struct HardExampleMiningResult {
  // Per image, the selected anchor indices in the order NMS selected them (decreasing loss;
  // with a ratio, the positives and the first allowed negatives of that order).
  std::vector<std::vector<int64_t>> selected_indices;
  // [batch, num_anchors]: 1 for a selected anchor, else 0 (to multiply per-anchor losses by).
  std::vector<float> selection_mask;
  // Per image, the positives and the rest of the selection (negatives, and ignored anchors the
  // ratio let through, as the API counts them); filled only when a ratio applies and matches
  // are given, as the API's summaries.
  std::vector<int64_t> num_positives;
  std::vector<int64_t> num_negatives;
  // The sums over the selected anchors of all images (the API's return values).
  double location_loss = 0.0;
  double classification_loss = 0.0;
};

class HardExampleMiner {
 public:
  // InvalidArgument for negative counts or an iou_threshold outside [0, 1].
  explicit HardExampleMiner(HardExampleMinerOptions options = {});

  // location_losses, cls_losses: [batch, num_anchors] per-anchor losses (classification summed
  // over classes); decoded_boxes: [batch, num_anchors, 4] the predicted boxes; matches: one per
  // image (its columns the anchors) or empty (no ratio subsampling then). InvalidArgument on
  // size mismatches.
  HardExampleMiningResult mine(std::span<const float> location_losses,
                               std::span<const float> cls_losses,
                               std::span<const float> decoded_boxes, int64_t batch_size,
                               int64_t num_anchors, std::span<const Match> matches = {}) const;

  const HardExampleMinerOptions& options() const { return options_; }

 private:
  HardExampleMinerOptions options_;
};

// _subsample_selection_to_desired_neg_pos_ratio: of `indices` (a selection of anchors), every
// positive (matched) one and the leading ones while the count of negatives (unmatched) so far
// is <= max(min_negatives_per_image, floor(max_negatives_per_positive * positives)); ignored
// anchors pass by the same running count, as the API's. Returns the kept indices in their
// order and sets the counts (negatives = kept - positives).
std::vector<int64_t> subsample_selection_to_desired_neg_pos_ratio(
    std::span<const int64_t> indices, const Match& match, double max_negatives_per_positive,
    int64_t min_negatives_per_image, int64_t* num_positives, int64_t* num_negatives);

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_HARD_EXAMPLE_MINER_H_
