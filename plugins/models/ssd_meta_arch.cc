#include "ssd_meta_arch.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nms_options.h"
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

// SSDMetaArch.preprocess: the image_resizer (keep_aspect_ratio_resizer here, every image of the
// batch at once, as the API maps it over the batch; the input pipeline's resize for
// fixed_shape_resizer), then the feature extractor's preprocess.
PreprocessedImages SsdMetaArch::preprocess(ModelContext& ctx, const Tensor& images) {
  num_classes_ = ctx.num_classes();
  if (images.shape().rank() != 4 || images.shape()[3] != 3) {
    throw InvalidArgument(std::string(kName) + ": images are " + images.description() +
                          "; expected [batch, height, width, 3]");
  }
  const Shape& s = images.shape();
  int64_t height = s[1];
  int64_t width = s[2];
  PreprocessedImages out;
  if (config_.keep_aspect_ratio_resizer) {
    ResizedImages r =
        resize_images(ctx.backend(), images, *config_.keep_aspect_ratio_resizer, kName);
    out.images = config_.extractor->preprocess(r.images);
    height = r.true_size.height;
    width = r.true_size.width;
  } else {
    out.images = config_.extractor->preprocess(images);
  }
  std::vector<int32_t> shapes;
  for (int64_t i = 0; i < s[0]; ++i) {
    shapes.insert(shapes.end(), {static_cast<int32_t>(height), static_cast<int32_t>(width), 3});
  }
  out.true_image_shapes = Tensor::from_vector(ctx.backend(), Shape{s[0], 3}, shapes);
  return out;
}

std::vector<std::array<int64_t, 2>> SsdMetaArch::true_sizes(const Tensor& true_image_shapes,
                                                            int64_t batch, const char* call) const {
  std::vector<std::array<int64_t, 2>> sizes(static_cast<std::size_t>(batch),
                                            {image_height_, image_width_});
  if (!true_image_shapes.defined()) return sizes;
  if (true_image_shapes.shape() != Shape{batch, 3}) {
    throw InvalidArgument(std::string(kName) + ": " + call + "() got true_image_shapes " +
                          true_image_shapes.description() + "; expected [" + std::to_string(batch) +
                          ", 3]");
  }
  NoGradScope no_grad;
  const std::vector<int32_t> shapes =
      true_image_shapes.dtype() == DType::kI32
          ? true_image_shapes.to_vector<int32_t>()
          : ops::cast(true_image_shapes, DType::kI32).to_vector<int32_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t h = shapes[static_cast<std::size_t>(b * 3)];
    const int32_t w = shapes[static_cast<std::size_t>(b * 3 + 1)];
    if (h < 1 || h > image_height_ || w < 1 || w > image_width_) {
      throw InvalidArgument(std::string(kName) + ": " + call + "() got true_image_shapes " +
                            std::to_string(h) + " x " + std::to_string(w) + " for image " +
                            std::to_string(b) + ", outside the preprocessed images of " +
                            std::to_string(image_height_) + " x " + std::to_string(image_width_));
    }
    sizes[static_cast<std::size_t>(b)] = {h, w};
  }
  return sizes;
}

TensorDict SsdMetaArch::predict(ModelContext& ctx, const PreprocessedImages& inputs, Mode mode) {
  num_classes_ = ctx.num_classes();
  const SsdConfig& c = config_;
  layers::VariableScope root(ctx, mode);
  if (c.quantize) {
    root.set_quantize(c.quantize, layers::counts_quantization_step(quantization_step_seed_,
                                                                   ctx.seed(), is_training(mode)));
  }
  layers::VariableScope extractor_scope = root.child(detection::kSsdFeatureExtractorScope);
  const std::vector<Tensor> maps = c.extractor->extract_features(extractor_scope, inputs.images);

  // Anchors for these feature-map sizes, cached while the sizes stay.
  std::vector<detection::FeatureMapShape> shapes;
  for (const Tensor& m : maps) shapes.push_back({m.shape()[1], m.shape()[2]});
  const int64_t image_height = inputs.images.shape()[1];
  const int64_t image_width = inputs.images.shape()[2];
  const bool same = image_height == image_height_ && image_width == image_width_ &&
                    shapes.size() == anchor_shapes_.size() &&
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
    anchors_ = generator.generate(shapes, image_height, image_width);
    anchor_shapes_ = shapes;
    image_height_ = image_height;
    image_width_ = image_width;
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
TensorDict SsdMetaArch::loss(ModelContext& ctx, const TensorDict& prediction_dict,
                             const Tensor& true_image_shapes) {
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
  const std::vector<std::array<int64_t, 2>> sizes = true_sizes(true_image_shapes, batch, "loss");
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
    std::vector<float> boxes = host_f32(groundtruth_.boxes[i]);
    // Into the padded batch's frame: inputs.py's change_coordinate_frame with the window
    // [0, 0, padded / true], which scales by 1 / (padded / true).
    if (sizes[i] != std::array{image_height_, image_width_}) {
      const float y_scale =
          1.0f / (static_cast<float>(image_height_) / static_cast<float>(sizes[i][0]));
      const float x_scale =
          1.0f / (static_cast<float>(image_width_) / static_cast<float>(sizes[i][1]));
      for (std::size_t k = 0; k < boxes.size(); k += 4) {
        boxes[k] *= y_scale;
        boxes[k + 1] *= x_scale;
        boxes[k + 2] *= y_scale;
        boxes[k + 3] *= x_scale;
      }
    }
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

// SSDMetaArch.postprocess: boxes decoded by the box coder's decode_tensor (its arithmetic as ops,
// so that a graph capture, the ONNX export, records it), scores through the score converter and
// without the background column as ops on the backend, and the batch_multiclass_non_max_suppression
// op.
TensorDict SsdMetaArch::postprocess(ModelContext& /*ctx*/, const TensorDict& prediction_dict,
                                    const Tensor& true_image_shapes) {
  NoGradScope no_grad;
  const SsdConfig& c = config_;
  const Tensor& encodings =
      prediction_entry(prediction_dict, "box_encodings", "postprocess", kName);
  const Tensor& logits =
      prediction_entry(prediction_dict, "class_predictions_with_background", "postprocess", kName);
  const int64_t batch = encodings.shape()[0];
  const int64_t anchors = encodings.shape()[1];
  const int64_t classes = logits.shape()[2];
  const Tensor codes =
      encodings.dtype() == DType::kF32 ? encodings : ops::cast(encodings, DType::kF32);
  const Tensor decoded_boxes =
      ops::reshape(c.box_coder->decode_tensor(codes, anchors_), Shape{batch, anchors, 1, 4});
  Tensor scores = ops::cast(logits, DType::kF32);
  // The API scales by multiplying with 1 / logit_scale (post_processing_builder.py).
  if (c.logit_scale != 1.0) scores = scores * (1.0 / static_cast<double>(c.logit_scale));
  scores = c.score_converter(scores);
  if (c.add_background_class) scores = ops::slice(scores, {0, 0, 1}, {batch, anchors, classes - 1});
  // The clip window of each image (_compute_clip_window): its true extent in the batch's frame.
  // One op call while every image fills the batch (the window [0, 0, 1, 1] of the options);
  // otherwise one per image, clipped to its window and given in its own frame
  // (change_coordinate_frame, as eval_util scales the API's detections to the true image).
  const std::vector<std::array<int64_t, 2>> sizes =
      true_sizes(true_image_shapes, batch, "postprocess");
  const bool padded = std::any_of(sizes.begin(), sizes.end(), [&](const auto& size) {
    return size != std::array{image_height_, image_width_};
  });
  if (!padded) {
    return nms_detection_dict(
        {ops::batch_multiclass_non_max_suppression(decoded_boxes, scores, c.nms)});
  }
  if (c.nms.use_combined_nms) {
    throw InvalidArgument(std::string(kName) +
                          ": post_processing.batch_non_max_suppression.use_combined_nms clips "
                          "boxes to the whole batch, but an image of this batch is padded "
                          "(keep_aspect_ratio_resizer) and needs its own clip window; set "
                          "use_combined_nms false");
  }
  const int64_t score_classes = scores.shape()[2];
  std::vector<ops::NmsDetections> per_image;
  for (int64_t b = 0; b < batch; ++b) {
    const auto image = static_cast<std::size_t>(b);
    MultiClassNmsAttrs nms = c.nms;
    nms.has_clip_window = true;
    nms.change_coordinate_frame = true;
    nms.clip_window = {0.0f, 0.0f,
                       static_cast<float>(sizes[image][0]) / static_cast<float>(image_height_),
                       static_cast<float>(sizes[image][1]) / static_cast<float>(image_width_)};
    per_image.push_back(ops::batch_multiclass_non_max_suppression(
        ops::slice(decoded_boxes, {b, 0, 0, 0}, {1, anchors, 1, 4}),
        ops::slice(scores, {b, 0, 0}, {1, anchors, score_classes}), nms));
  }
  return nms_detection_dict(per_image);
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
