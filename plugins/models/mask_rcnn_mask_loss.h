// Mask R-CNN's mask targets and loss, as the Object Detection API's
// FasterRCNNMetaArch._loss_box_classifier computes them when the box predictor predicts masks:
// each proposal's target is the groundtruth mask of the box the detector target assigner matched
// it to (zeros when unmatched), cropped with crop_and_resize on the proposal to the predicted
// masks' size; its weight is the assigner's regression weight (the matched box's groundtruth
// weight, 0 when unmatched, so only positives count); the prediction is the mask of the
// proposal's target class (argmax of its class targets; the API pads a zero background mask in
// front), or the one mask when there is one; the loss is WeightedSigmoidClassificationLoss summed
// over every pixel of every proposal of the batch and divided by max(sum of weights x mask
// pixels, 1).
#ifndef TRAINYARD_PLUGINS_MODELS_MASK_RCNN_MASK_LOSS_H_
#define TRAINYARD_PLUGINS_MODELS_MASK_RCNN_MASK_LOSS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "trainyard/tensor.h"

namespace trainyard::models {

// One image's proposals and what the detector target assigner gave them.
struct MaskTargetImage {
  // [n, 4] (y1, x1, y2, x2) normalized as crop_and_resize reads `groundtruth_masks`: y = 0 is
  // the masks' row 0, y = 1 their last row.
  std::span<const float> proposals;
  std::span<const int32_t> matches;  // [n] the matched groundtruth row, negative when none
  Tensor groundtruth_masks;          // [N, H, W] u8 or f32 in [0, 1]; unused when N is 0
};

// Boxes (y1, x1, y2, x2) normalized to a preprocessed image of height x width, in which the
// image's true extent is the fraction true_fraction_y x true_fraction_x (the rest padding),
// scaled so that they crop the image's own masks (MaskTargetImage::proposals): y (H - 1) of the
// preprocessed image becomes y' (h_true - 1) of the masks, h_true = true_fraction_y * H, so
// y' = y (H - 1) / (h_true - 1); x alike. Where the masks are the image's size in the
// preprocessed image (padded, not resized), a box inside the true image crops the same values as
// the API's crop of the masks zero-padded to height x width with the unscaled box.
std::vector<float> to_mask_frame(std::vector<float> boxes, float true_fraction_y,
                                 float true_fraction_x, int64_t height, int64_t width);

// The cropped targets [sum of n, mask_height, mask_width] f32, image after image, without
// gradient. Throws InvalidArgument naming the image for a match outside [0, N) or masks that are
// not [N, H, W].
Tensor mask_rcnn_mask_targets(Backend& backend, std::span<const MaskTargetImage> images,
                              int64_t mask_height, int64_t mask_width);

// The normalized mask loss (before second_stage_mask_prediction_loss_weight), a scalar:
// `prediction_masks` [P, K, h, w] logits (K 1 for class-agnostic masks, else num_classes),
// `targets` [P, h, w], `weights` [P] and `target_classes` [P] (1-based, 0 the background, whose
// prediction is the API's zero padding; only read when K > 1).
Tensor mask_rcnn_mask_loss(const Tensor& prediction_masks, const Tensor& targets,
                           std::span<const float> weights, std::span<const int64_t> target_classes);

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_MASK_RCNN_MASK_LOSS_H_
