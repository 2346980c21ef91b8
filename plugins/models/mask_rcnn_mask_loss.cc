#include "mask_rcnn_mask_loss.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard::models {

std::vector<float> to_mask_frame(std::vector<float> boxes, float true_fraction_y,
                                 float true_fraction_x, int64_t height, int64_t width) {
  auto scale = [](float fraction, int64_t size) {
    const double full = static_cast<double>(size) - 1.0;
    const double part = static_cast<double>(fraction) * static_cast<double>(size) - 1.0;
    return part > 0.0 ? static_cast<float>(full / part) : 1.0f;
  };
  const float sy = scale(true_fraction_y, height);
  const float sx = scale(true_fraction_x, width);
  for (std::size_t i = 0; i < boxes.size(); i += 4) {
    boxes[i] *= sy;
    boxes[i + 1] *= sx;
    boxes[i + 2] *= sy;
    boxes[i + 3] *= sx;
  }
  return boxes;
}

Tensor mask_rcnn_mask_targets(Backend& backend, std::span<const MaskTargetImage> images,
                              int64_t mask_height, int64_t mask_width) {
  NoGradScope no_grad;
  const int64_t pixels = mask_height * mask_width;
  std::vector<float> targets;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const MaskTargetImage& image = images[i];
    const auto n = static_cast<int64_t>(image.matches.size());
    if (static_cast<int64_t>(image.proposals.size()) != n * 4) {
      throw InvalidArgument("mask targets: image " + std::to_string(i) + " has " +
                            std::to_string(image.proposals.size()) + " proposal coordinates for " +
                            std::to_string(n) + " matches");
    }
    const std::size_t first = targets.size();
    targets.resize(first + static_cast<std::size_t>(n * pixels), 0.0f);
    std::vector<float> boxes;
    std::vector<int32_t> rows;
    std::vector<int64_t> at;
    for (int64_t k = 0; k < n; ++k) {
      if (image.matches[static_cast<std::size_t>(k)] < 0) continue;
      boxes.insert(boxes.end(), image.proposals.begin() + k * 4,
                   image.proposals.begin() + k * 4 + 4);
      rows.push_back(image.matches[static_cast<std::size_t>(k)]);
      at.push_back(k);
    }
    if (at.empty()) continue;
    const Tensor& masks = image.groundtruth_masks;
    if (!masks.defined() || masks.shape().rank() != 3) {
      throw InvalidArgument("mask targets: image " + std::to_string(i) +
                            "'s groundtruth instance masks are " +
                            (masks.defined() ? masks.description() : std::string("missing")) +
                            "; expected [boxes, height, width]");
    }
    const int64_t count = masks.shape()[0];
    for (int32_t r : rows) {
      if (r >= count) {
        throw InvalidArgument("mask targets: image " + std::to_string(i) +
                              " has a proposal matched to groundtruth box " + std::to_string(r) +
                              " but " + std::to_string(count) + " instance masks " +
                              masks.description());
      }
    }
    const Shape& s = masks.shape();
    const Tensor planes = ops::reshape(ops::cast(masks, DType::kF32), Shape{s[0], s[1], s[2], 1});
    const auto m = static_cast<int64_t>(at.size());
    const std::vector<float> crops =
        ops::crop_and_resize(planes, Tensor::from_vector(backend, Shape{m, 4}, boxes),
                             Tensor::from_vector(backend, Shape{m}, rows),
                             {mask_height, mask_width})
            .to_vector<float>();
    for (int64_t j = 0; j < m; ++j) {
      std::copy_n(crops.begin() + j * pixels, pixels,
                  targets.begin() + static_cast<std::ptrdiff_t>(first) + at[j] * pixels);
    }
  }
  const auto total = static_cast<int64_t>(targets.size()) / std::max<int64_t>(pixels, 1);
  return Tensor::from_vector(backend, Shape{total, mask_height, mask_width}, targets);
}

Tensor mask_rcnn_mask_loss(const Tensor& prediction_masks, const Tensor& targets,
                           std::span<const float> weights,
                           std::span<const int64_t> target_classes) {
  const Shape& s = prediction_masks.shape();
  if (s.rank() != 4 || targets.shape() != Shape{s[0], s[2], s[3]} ||
      static_cast<int64_t>(weights.size()) != s[0] ||
      (s[1] > 1 && static_cast<int64_t>(target_classes.size()) != s[0])) {
    throw InvalidArgument("mask loss: prediction masks " + prediction_masks.description() +
                          ", targets " + targets.description() + ", " +
                          std::to_string(weights.size()) + " weights and " +
                          std::to_string(target_classes.size()) +
                          " target classes do not agree; expected [P, K, h, w], [P, h, w], P "
                          "and P");
  }
  Backend& backend = prediction_masks.backend();
  const int64_t proposals = s[0];
  const int64_t classes = s[1];
  const int64_t pixels = s[2] * s[3];
  Tensor selected = ops::reshape(prediction_masks, Shape{proposals, classes, pixels});
  if (classes > 1) {
    // The target class's mask; the background's is the API's zero padding.
    std::vector<float> pick(static_cast<std::size_t>(proposals * classes), 0.0f);
    for (int64_t p = 0; p < proposals; ++p) {
      const int64_t c = target_classes[static_cast<std::size_t>(p)];
      if (c < 0 || c > classes) {
        throw InvalidArgument("mask loss: proposal " + std::to_string(p) + " has target class " +
                              std::to_string(c) + ", outside [0, " + std::to_string(classes) + "]");
      }
      if (c > 0) pick[static_cast<std::size_t>(p * classes + c - 1)] = 1.0f;
    }
    selected = ops::reduce_sum(
        ops::mul(selected, Tensor::from_vector(backend, Shape{proposals, classes, 1}, pick)), {1});
  }
  selected = ops::reshape(selected, Shape{proposals, pixels});
  const Tensor w = Tensor::from_vector(backend, Shape{proposals, 1},
                                       std::vector<float>(weights.begin(), weights.end()));
  const Tensor losses = ops::mul(
      ops::sigmoid_cross_entropy_with_logits(
          ops::reshape(ops::cast(targets, selected.dtype()), Shape{proposals, pixels}), selected),
      w);
  double weight_sum = 0.0;
  for (float v : weights) weight_sum += v;
  const double normalizer = std::max(weight_sum * static_cast<double>(pixels), 1.0);
  return ops::mul(ops::reduce_sum(losses), 1.0 / normalizer);
}

}  // namespace trainyard::models
