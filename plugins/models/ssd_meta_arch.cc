#include "ssd_meta_arch.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/variable_scope.h"

namespace trainyard::models {
namespace {

constexpr const char* kName = "SSDMetaArch";

}  // namespace

SsdMetaArch::SsdMetaArch(const Options& options) : SsdMetaArch(ssd_config_from_options(options)) {}

SsdMetaArch::SsdMetaArch(SsdConfig config) : config_(std::move(config)) {
  if (!config_.extractor || !config_.box_predictor || !config_.anchor_generator ||
      !config_.box_coder || !config_.matcher || !config_.similarity || !config_.localization_loss ||
      !config_.classification_loss || !config_.score_converter) {
    throw InvalidArgument(std::string(kName) +
                          ": feature_extractor, box_predictor, anchor_generator, box_coder, "
                          "matcher, similarity_calculator, both losses and the score converter "
                          "are required");
  }
  if (config_.box_predictor->box_code_size() != config_.box_coder->code_size()) {
    throw InvalidArgument(
        std::string(kName) + ": " + config_.box_predictor_type + "'s box_code_size " +
        std::to_string(config_.box_predictor->box_code_size()) + " differs from the box coder's " +
        std::to_string(config_.box_coder->code_size()));
  }
}

PreprocessedImages SsdMetaArch::preprocess(ModelContext& ctx, const Tensor& images) {
  num_classes_ = ctx.num_classes();
  if (images.shape().rank() != 4 || images.shape()[3] != 3) {
    throw InvalidArgument(std::string(kName) + ": images are " + images.description() +
                          "; expected [batch, height, width, 3] resized by the image_resizer");
  }
  PreprocessedImages out;
  out.images = config_.extractor->preprocess(images);
  const Shape& s = images.shape();
  std::vector<int32_t> shapes;
  for (int64_t i = 0; i < s[0]; ++i) {
    shapes.insert(shapes.end(), {static_cast<int32_t>(s[1]), static_cast<int32_t>(s[2]), 3});
  }
  out.true_image_shapes = Tensor::from_vector(ctx.backend(), Shape{s[0], 3}, shapes);
  return out;
}

TensorDict SsdMetaArch::predict(ModelContext& ctx, const PreprocessedImages& inputs, Mode mode) {
  num_classes_ = ctx.num_classes();
  const SsdConfig& c = config_;
  layers::VariableScope root(ctx, mode);
  layers::VariableScope extractor_scope = root.child(detection::kSsdFeatureExtractorScope);
  const std::vector<Tensor> maps = c.extractor->extract_features(extractor_scope, inputs.images);

  // Anchors for these feature-map sizes, cached while the sizes stay.
  std::vector<detection::FeatureMapShape> shapes;
  for (const Tensor& m : maps) shapes.push_back({m.shape()[1], m.shape()[2]});
  const bool same = shapes.size() == anchor_shapes_.size() &&
                    std::equal(shapes.begin(), shapes.end(), anchor_shapes_.begin(),
                               [](const auto& a, const auto& b) {
                                 return a.height == b.height && a.width == b.width;
                               });
  const detection::AnchorGenerator& generator = *c.anchor_generator;
  const std::vector<int64_t> per_location = generator.num_anchors_per_location();
  if (per_location.size() != maps.size()) {
    throw InvalidArgument(std::string(kName) + ": anchor_generator." + c.anchor_generator_type +
                          " has " + std::to_string(per_location.size()) +
                          " layers but the feature " + "extractor gives " +
                          std::to_string(maps.size()) + " feature maps");
  }
  if (!same) {
    anchors_ = generator.generate(shapes, inputs.images.shape()[1], inputs.images.shape()[2]);
    anchor_shapes_ = shapes;
  }

  // The predictors give num_classes + 1 slots, the first the background's; without it
  // (add_background_class false, box_predictor_builder's num_class_slots) the slots are the
  // num_classes classes.
  const detection::BoxPredictions predictions = c.box_predictor->predict(
      root, maps, per_location, c.add_background_class ? num_classes_ : num_classes_ - 1);
  TensorDict out;
  out["box_encodings"] = ops::concat(predictions.box_encodings, 1);
  out["class_predictions_with_background"] =
      ops::concat(predictions.class_predictions_with_background, 1);
  const auto num_anchors = static_cast<int64_t>(anchors_.size() / 4);
  if (out["box_encodings"].shape()[1] != num_anchors) {
    throw InvalidArgument(std::string(kName) + ": the box predictor gives " +
                          std::to_string(out["box_encodings"].shape()[1]) +
                          " box encodings per image but the anchor generator " +
                          std::to_string(num_anchors) + " anchors");
  }
  out["anchors"] = Tensor::from_vector(ctx.backend(), Shape{num_anchors, 4}, anchors_);
  return out;
}

void SsdMetaArch::provide_groundtruth(Groundtruth groundtruth) {
  if (groundtruth.boxes.size() != groundtruth.classes.size() ||
      (!groundtruth.weights.empty() && groundtruth.weights.size() != groundtruth.boxes.size())) {
    throw InvalidArgument(std::string(kName) + ": provide_groundtruth got " +
                          std::to_string(groundtruth.boxes.size()) + " box lists, " +
                          std::to_string(groundtruth.classes.size()) + " class lists and " +
                          std::to_string(groundtruth.weights.size()) + " weight lists");
  }
  groundtruth_ = std::move(groundtruth);
}

// SSDMetaArch.loss: targets per image (target_assigner.batch_assign_targets), the per-anchor
// localization and classification losses, hard example mining, normalization by the number of
// matches, the two weights.
TensorDict SsdMetaArch::loss(ModelContext& ctx, const TensorDict& prediction_dict, const Tensor&) {
  const SsdConfig& c = config_;
  const Tensor& encodings = prediction_entry(prediction_dict, "box_encodings", "loss", kName);
  const Tensor& logits =
      prediction_entry(prediction_dict, "class_predictions_with_background", "loss", kName);
  const int64_t batch = encodings.shape()[0];
  const int64_t anchors = encodings.shape()[1];
  const int64_t code = c.box_predictor->box_code_size();
  const int64_t classes = logits.shape()[2];
  if (static_cast<int64_t>(groundtruth_.boxes.size()) != batch) {
    throw InvalidArgument(std::string(kName) + ": loss() for a batch of " + std::to_string(batch) +
                          " images, but provide_groundtruth() gave " +
                          std::to_string(groundtruth_.boxes.size()));
  }
  const detection::TargetAssigner assigner(c.similarity, c.matcher, c.box_coder,
                                           c.negative_class_weight);
  const std::vector<float> unmatched =
      detection::background_class_label(classes - 1, c.encode_background_as_zeros);
  std::vector<float> cls_targets;
  std::vector<float> cls_weights;
  std::vector<float> reg_targets;
  std::vector<float> reg_weights;
  std::vector<detection::Match> matches;
  cls_targets.reserve(static_cast<std::size_t>(batch * anchors * classes));
  for (int64_t b = 0; b < batch; ++b) {
    const auto i = static_cast<std::size_t>(b);
    const std::vector<float> boxes = host_f32(groundtruth_.boxes[i]);
    const std::vector<float> one_hot = host_f32(groundtruth_.classes[i]);
    const int64_t rows = groundtruth_.boxes[i].shape()[0];
    // The API adds the background column in front of the one-hot classes (add_background_class).
    const int64_t column = c.add_background_class ? 1 : 0;
    std::vector<float> labels(static_cast<std::size_t>(rows * classes), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(one_hot.begin() + r * (classes - column), classes - column,
                  labels.begin() + r * classes + column);
    }
    std::vector<float> weights;
    if (!groundtruth_.weights.empty()) weights = host_f32(groundtruth_.weights[i]);
    detection::TargetAssignment t = assigner.assign(anchors_, boxes, labels, unmatched, weights);
    cls_targets.insert(cls_targets.end(), t.cls_targets.begin(), t.cls_targets.end());
    cls_weights.insert(cls_weights.end(), t.cls_weights.begin(), t.cls_weights.end());
    reg_targets.insert(reg_targets.end(), t.reg_targets.begin(), t.reg_targets.end());
    reg_weights.insert(reg_weights.end(), t.reg_weights.begin(), t.reg_weights.end());
    matches.push_back(std::move(t.match));
  }
  Backend& backend = ctx.backend();
  const Tensor cls_t = Tensor::from_vector(backend, Shape{batch, anchors, classes}, cls_targets);
  const Tensor cls_w = Tensor::from_vector(backend, Shape{batch, anchors}, cls_weights);
  const Tensor reg_t = Tensor::from_vector(backend, Shape{batch, anchors, code}, reg_targets);
  const Tensor reg_w = Tensor::from_vector(backend, Shape{batch, anchors}, reg_weights);

  const Tensor location_losses = (*c.localization_loss)(encodings, reg_t, reg_w);
  const Tensor cls_losses = c.classification_loss->per_anchor(logits, cls_t, cls_w);
  Tensor localization;
  Tensor classification;
  if (c.hard_example_miner) {
    std::vector<float> loc_values;
    std::vector<float> cls_values;
    std::vector<float> decoded;
    {
      NoGradScope no_grad;
      loc_values = host_f32(location_losses);
      cls_values = host_f32(cls_losses);
      const std::vector<float> codes = host_f32(encodings);
      decoded.reserve(codes.size());
      for (int64_t b = 0; b < batch; ++b) {
        const auto first = static_cast<std::ptrdiff_t>(b * anchors * code);
        const std::vector<float> boxes = c.box_coder->decode(
            std::span<const float>(codes.data() + first, static_cast<std::size_t>(anchors * code)),
            anchors_);
        decoded.insert(decoded.end(), boxes.begin(), boxes.end());
      }
    }
    const detection::HardExampleMiner miner(*c.hard_example_miner);
    const detection::HardExampleMiningResult mined =
        miner.mine(loc_values, cls_values, decoded, batch, anchors, matches);
    const Tensor mask = Tensor::from_vector(backend, Shape{batch, anchors}, mined.selection_mask);
    localization = ops::reduce_sum(ops::mul(location_losses, mask));
    classification = ops::reduce_sum(ops::mul(cls_losses, mask));
  } else {
    localization = ops::reduce_sum(location_losses);
    classification = ops::reduce_sum(cls_losses);
  }
  double normalizer = 1.0;
  if (c.normalize_loss_by_num_matches) {
    double matched = 0.0;
    for (float w : reg_weights) matched += w;
    normalizer = std::max(matched, 1.0);
  }
  double loc_scale = c.localization_weight / normalizer;
  if (c.normalize_loc_loss_by_codesize) loc_scale /= static_cast<double>(code);
  TensorDict out;
  out["Loss/localization_loss"] = ops::mul(localization, loc_scale);
  out["Loss/classification_loss"] = ops::mul(classification, c.classification_weight / normalizer);
  return out;
}

// SSDMetaArch.postprocess: boxes decoded on the host (the box coder's arithmetic), scores
// through the score converter and without the background column as ops on the backend, and the
// batch_multiclass_non_max_suppression op.
TensorDict SsdMetaArch::postprocess(ModelContext& ctx, const TensorDict& prediction_dict,
                                    const Tensor&) {
  NoGradScope no_grad;
  const SsdConfig& c = config_;
  const Tensor& encodings =
      prediction_entry(prediction_dict, "box_encodings", "postprocess", kName);
  const Tensor& logits =
      prediction_entry(prediction_dict, "class_predictions_with_background", "postprocess", kName);
  const int64_t batch = encodings.shape()[0];
  const int64_t anchors = encodings.shape()[1];
  const int64_t code = c.box_predictor->box_code_size();
  const int64_t classes = logits.shape()[2];
  const std::vector<float> codes = host_f32(encodings);
  std::vector<float> boxes;
  boxes.reserve(static_cast<std::size_t>(batch * anchors * 4));
  for (int64_t b = 0; b < batch; ++b) {
    const auto first = static_cast<std::ptrdiff_t>(b * anchors * code);
    const std::vector<float> decoded = c.box_coder->decode(
        std::span<const float>(codes.data() + first, static_cast<std::size_t>(anchors * code)),
        anchors_);
    boxes.insert(boxes.end(), decoded.begin(), decoded.end());
  }
  Backend& backend = ctx.backend();
  const Tensor decoded_boxes = Tensor::from_vector(backend, Shape{batch, anchors, 1, 4}, boxes);
  Tensor scores = ops::cast(logits, DType::kF32);
  // The API scales by multiplying with 1 / logit_scale (post_processing_builder.py).
  if (c.logit_scale != 1.0) scores = scores * (1.0 / static_cast<double>(c.logit_scale));
  scores = c.score_converter(scores);
  if (c.add_background_class) scores = ops::slice(scores, {0, 0, 1}, {batch, anchors, classes - 1});
  const ops::NmsDetections d =
      ops::batch_multiclass_non_max_suppression(decoded_boxes, scores, c.nms);
  TensorDict out;
  out["detection_boxes"] = d.boxes;
  out["detection_scores"] = d.scores;
  out["detection_classes"] = d.classes;
  out["num_detections"] = ops::cast(d.num_detections, DType::kF32);
  return out;
}

// The API's restore_map: "detection" restores the feature extractor's variables by their own
// names, not the box predictor's (whose shapes follow num_classes), or every variable with
// load_all_detection_checkpoint_vars; "classification" restores the feature extractor from a
// classification checkpoint whose names lack the "FeatureExtractor/" scope (its extra layers are
// not in such a checkpoint and stay as initialized).
std::map<std::string, std::string> SsdMetaArch::restore_map(
    const std::string& fine_tune_checkpoint_type, bool load_all_detection_checkpoint_vars) {
  if (fine_tune_checkpoint_type == "detection") {
    if (load_all_detection_checkpoint_vars) return {{"", ""}};
    const std::string scope = std::string(detection::kSsdFeatureExtractorScope) + "/";
    return {{scope, scope}};
  }
  if (fine_tune_checkpoint_type == "classification") {
    return config_.extractor->restore_from_classification_checkpoint(
        detection::kSsdFeatureExtractorScope);
  }
  throw InvalidArgument(std::string(kName) + ": fine_tune_checkpoint_type '" +
                        fine_tune_checkpoint_type + "' is not detection or classification");
}

}  // namespace trainyard::models
