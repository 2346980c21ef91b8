// FasterRCNNMetaArch's Mask R-CNN parts (meta_architectures/faster_rcnn_meta_arch.py with a
// mask_rcnn_box_predictor that predicts instance masks): the mask loss of _loss_box_classifier
// and the third stage of inference (_predict_third_stage: detection_masks).
//
// The groundtruth masks reach loss() in its prediction dict as "groundtruth_instance_masks/<b>"
// [N_b, h_b, w_b] (the host's DetectionModelAdapter puts there each image's masks cut to its box
// count and true extent, when the batch has groundtruth_instance_masks). The API crops its masks
// resized and padded to the preprocessed image, with the proposals normalized to that image:
// row y (H - 1) of the padded image. Here the masks keep the size the input gave them and the
// proposal's y becomes y (H - 1) / (h_true - 1), h_true the image's true height in the
// preprocessed image (so y = 1 is the last row of the true image, as the resize maps corners);
// without a resize or padding the two are the same crop.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "faster_rcnn_meta_arch.h"
#include "mask_rcnn_mask_loss.h"
#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/detection/target_assigner.h"

namespace trainyard::models {
namespace {

constexpr const char* kName = "FasterRCNNMetaArch";

}  // namespace

// _loss_box_classifier's mask loss: each proposal matched to the groundtruth by the detector
// target assigner of loss() (`assignments`, its batch_assign_targets: the same matches as the box
// classifier's targets), its matched box's mask cropped to it, the target class's predicted mask
// (mask_rcnn_mask_loss.h), times second_stage_mask_prediction_loss_weight.
Tensor FasterRcnnMetaArch::mask_loss(
    ModelContext& ctx, const TensorDict& prediction_dict,
    std::span<const detection::TargetAssignment> assignments) const {
  const Tensor& predicted = prediction_entry(prediction_dict, "mask_predictions", "loss", kName);
  const Shape& s = predicted.shape();
  if (assignments.size() != proposals_.size()) {
    throw InvalidArgument(std::string(kName) + ": mask_loss got " +
                          std::to_string(assignments.size()) + " target assignments for " +
                          std::to_string(proposals_.size()) + " images");
  }
  std::vector<std::vector<float>> proposals(proposals_.size());
  std::vector<MaskTargetImage> images;
  std::vector<float> weights;
  std::vector<int64_t> classes;
  for (std::size_t b = 0; b < proposals_.size(); ++b) {
    const auto n = static_cast<int64_t>(proposals_[b].size() / 4);
    const auto count = static_cast<int64_t>(groundtruth_boxes(b).size() / 4);
    const std::string key = "groundtruth_instance_masks/" + std::to_string(b);
    auto it = prediction_dict.find(key);
    if (it == prediction_dict.end()) {
      throw InvalidArgument(std::string(kName) +
                            ": the box predictor predicts instance masks (predict_instance_masks) "
                            "but the batch has no groundtruth_instance_masks ('" +
                            key + "'); set load_instance_masks in the input reader");
    }
    const Tensor& masks = it->second;
    if (masks.shape().rank() != 3 || masks.shape()[0] != count) {
      throw InvalidArgument(std::string(kName) + ": image " + std::to_string(b) + " has " +
                            std::to_string(count) + " groundtruth boxes but instance masks " +
                            masks.description());
    }
    const detection::TargetAssignment& t = assignments[b];
    const std::vector<int32_t>& match = t.match.match_results();
    if (static_cast<int64_t>(match.size()) != n ||
        static_cast<int64_t>(t.cls_targets.size()) != n * t.label_size ||
        static_cast<int64_t>(t.reg_weights.size()) != n || (n > 0 && t.label_size < 1)) {
      throw InvalidArgument(std::string(kName) + ": image " + std::to_string(b) + " has " +
                            std::to_string(n) + " proposals but a target assignment of " +
                            std::to_string(match.size()));
    }
    for (int64_t k = 0; k < n; ++k) {
      // The regression weight (the matched box's groundtruth weight; 0 unmatched or ignored) and
      // argmax of the class targets, whose column 0 is the background.
      weights.push_back(t.reg_weights[static_cast<std::size_t>(k)]);
      const auto row = t.cls_targets.begin() + static_cast<std::ptrdiff_t>(k * t.label_size);
      classes.push_back(std::max_element(row, row + t.label_size) - row);
    }
    const auto [fy, fx] = true_fraction_[b];
    proposals[b] = to_mask_frame(proposals_[b], fy, fx, image_height_, image_width_);
    images.push_back({proposals[b], match, masks});
  }
  if (static_cast<int64_t>(weights.size()) != s[0]) {
    throw InvalidArgument(std::string(kName) + ": loss() got mask predictions " +
                          predicted.description() + " for " + std::to_string(weights.size()) +
                          " proposals");
  }
  const Tensor targets = mask_rcnn_mask_targets(ctx.backend(), images, s[2], s[3]);
  return ops::mul(mask_rcnn_mask_loss(predicted, targets, weights, classes),
                  config_.second_stage_mask_prediction_loss_weight);
}

// _predict_third_stage in inference: the detections' boxes cropped from the first stage's
// features (as the proposals are), the box classifier's features, the mask head, each
// detection's class's mask (or the one mask) through a sigmoid: "detection_masks" [B,
// max_detections, mask_height, mask_width]. As the API's, every slot is cropped, the padding
// rows too; their masks are zeros here. The API crops the boxes normalized to the true image as
// if to the padded one; here they are scaled to the padded one first (the same where the image
// is not padded). All of it ops, as the rest of inference, so a graph capture records it.
void FasterRcnnMetaArch::add_detection_masks(ModelContext& ctx, const TensorDict& prediction_dict,
                                             TensorDict& detections) const {
  const FasterRcnnConfig& c = config_;
  if (!c.predicts_instance_masks()) return;
  NoGradScope no_grad;
  const Tensor& features =
      prediction_entry(prediction_dict, "rpn_features_to_crop", "postprocess", kName);
  const Tensor& boxes = detections.at("detection_boxes");
  const int64_t batch = boxes.shape()[0];
  const int64_t most = boxes.shape()[1];
  const int64_t rows = batch * most;
  Backend& backend = ctx.backend();
  std::vector<int32_t> index;
  for (int64_t b = 0; b < batch; ++b) index.insert(index.end(), most, static_cast<int32_t>(b));
  const Tensor crops = ops::crop_and_resize(
      features, ops::reshape(ops::mul(boxes, true_extent(backend)), Shape{rows, 4}),
      Tensor::from_vector(backend, Shape{rows}, index), {c.initial_crop_size, c.initial_crop_size});
  const Tensor pooled = ops::max_pool2d(crops, {c.maxpool_kernel_size, c.maxpool_kernel_size},
                                        {c.maxpool_stride, c.maxpool_stride});
  layers::VariableScope root(ctx, Mode::kEval);
  layers::VariableScope second_stage = root.child(detection::kSecondStageFeatureExtractorScope);
  layers::VariableScope predictor = root.child("SecondStageBoxPredictor");
  const Tensor box_features = c.extractor->extract_box_classifier_features(second_stage, pooled);
  const Tensor logits =
      c.second_stage_box_predictor->predict_instance_masks(predictor, box_features, num_classes_);
  const Shape& s = logits.shape();  // [rows, masks, height, width]
  Tensor chosen = ops::reshape(ops::slice(logits, {0, 0, 0, 0}, {rows, 1, s[2], s[3]}),
                               Shape{rows, s[2], s[3]});
  if (s[1] > 1) {
    // _gather_instance_masks: each detection's class's mask (0-based classes), picked by a one-hot
    // of its class made of comparisons (k - 0.5 < class < k + 0.5), exact: the other masks add
    // zeros.
    std::vector<float> below, above;
    for (int64_t k = 0; k < s[1]; ++k) {
      below.push_back(static_cast<float>(k) - 0.5f);
      above.push_back(static_cast<float>(k) + 0.5f);
    }
    const Tensor classes = ops::reshape(detections.at("detection_classes"), Shape{rows, 1});
    const Tensor one_hot =
        ops::mul(ops::cast(ops::less(Tensor::from_vector(backend, Shape{1, s[1]}, below), classes),
                           DType::kF32),
                 ops::cast(ops::less(classes, Tensor::from_vector(backend, Shape{1, s[1]}, above)),
                           DType::kF32));
    chosen = ops::reduce_sum(ops::mul(logits, ops::reshape(one_hot, Shape{rows, s[1], 1, 1})), {1});
  }
  const Tensor masks = ops::reshape(ops::sigmoid(chosen), Shape{batch, most, s[2], s[3]});
  const Tensor valid =
      ops::reshape(leading_slots(ops::cast(detections.at("num_detections"), DType::kI32), most),
                   Shape{batch, most, 1, 1});
  detections["detection_masks"] = ops::where(valid, masks, ops::zeros(backend, Shape{1}));
}

}  // namespace trainyard::models
