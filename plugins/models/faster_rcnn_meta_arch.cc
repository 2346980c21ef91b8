#include "faster_rcnn_meta_arch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nms_options.h"
#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/detection/balanced_positive_negative_sampler.h"
#include "trainyard/pkg/detection/box_coder.h"
#include "trainyard/pkg/detection/box_ops.h"
#include "trainyard/pkg/detection/matcher.h"
#include "trainyard/pkg/detection/region_similarity_calculator.h"
#include "trainyard/pkg/detection/target_assigner.h"
#include "trainyard/pkg/layers/layers.h"

namespace trainyard::models {
namespace {

constexpr const char* kName = "FasterRCNNMetaArch";

// Seeds of the two samplers' draws, mixed with the step's seed (ModelContext::seed).
constexpr uint64_t kFirstStageSamplerSeed = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kSecondStageSamplerSeed = 0xc2b2ae3d27d4eb4fULL;

// The box coder both target assigners use (target_assigner.create_target_assigner('FasterRCNN',
// ...)), and the meta-architecture decodes with.
std::shared_ptr<const detection::FasterRcnnBoxCoder> frcnn_box_coder() {
  static const auto coder =
      std::make_shared<detection::FasterRcnnBoxCoder>(std::vector<double>{10.0, 10.0, 5.0, 5.0});
  return coder;
}

// create_target_assigner('FasterRCNN', 'proposal'): IoU, ArgMax 0.7 / 0.3 with
// force_match_for_each_row, the anchors between the thresholds ignored.
detection::TargetAssigner proposal_target_assigner() {
  detection::ArgMaxMatcherOptions m;
  m.matched_threshold = 0.7;
  m.unmatched_threshold = 0.3;
  m.force_match_for_each_row = true;
  return detection::TargetAssigner(std::make_shared<detection::IouSimilarity>(),
                                   std::make_shared<detection::ArgMaxMatcher>(m),
                                   frcnn_box_coder());
}

// create_target_assigner('FasterRCNN', 'detection'): IoU, ArgMax 0.5 with every proposal below
// it a negative.
detection::TargetAssigner detector_target_assigner() {
  detection::ArgMaxMatcherOptions m;
  m.matched_threshold = 0.5;
  m.unmatched_threshold = 0.5;
  return detection::TargetAssigner(std::make_shared<detection::IouSimilarity>(),
                                   std::make_shared<detection::ArgMaxMatcher>(m),
                                   frcnn_box_coder());
}

// The index of the largest value of a row (the first on ties), as tf.argmax.
int64_t argmax(std::span<const float> row) {
  return static_cast<int64_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

FasterRcnnMetaArch::FasterRcnnMetaArch(const Options& options)
    : FasterRcnnMetaArch(faster_rcnn_config_from_options(options)) {}

FasterRcnnMetaArch::FasterRcnnMetaArch(FasterRcnnConfig config) : config_(std::move(config)) {
  if (!config_.extractor) {
    throw InvalidArgument(std::string(kName) + ": feature_extractor is required");
  }
  if (!config_.second_stage_classification_loss) {
    throw InvalidArgument(std::string(kName) + ": second_stage_classification_loss is required");
  }
  if (!config_.second_stage_box_predictor) {
    throw InvalidArgument(std::string(kName) + ": second_stage_box_predictor is required");
  }
  if (!config_.score_converter) {
    throw InvalidArgument(std::string(kName) +
                          ": second_stage_post_processing.score_converter is required");
  }
  // Checks the anchor options the way the generator will use them.
  detection::GridAnchorGenerator generator(config_.anchors);
  (void)generator;
}

// FasterRCNNMetaArch.preprocess: the image_resizer (keep_aspect_ratio_resizer here, the input
// pipeline's resize for fixed_shape_resizer), then the feature extractor's preprocess.
PreprocessedImages FasterRcnnMetaArch::preprocess(ModelContext& ctx, const Tensor& images) {
  num_classes_ = ctx.num_classes();
  if (images.shape().rank() != 4 || images.shape()[3] != 3) {
    throw InvalidArgument(std::string(kName) + ": images are " + images.description() +
                          "; expected [batch, height, width, 3]");
  }
  const FasterRcnnConfig& c = config_;
  const int64_t batch = images.shape()[0];
  int64_t height = images.shape()[1];
  int64_t width = images.shape()[2];
  Tensor resized = ops::cast(images, DType::kF32);
  if (c.keep_aspect_ratio) {
    ResizedImages r = resize_images(ctx.backend(), images, c.resizer, kName);
    resized = std::move(r.images);
    height = r.true_size.height;
    width = r.true_size.width;
  }
  PreprocessedImages out;
  out.images = c.extractor->preprocess(resized);
  std::vector<int32_t> shapes;
  for (int64_t i = 0; i < batch; ++i) {
    shapes.insert(shapes.end(), {static_cast<int32_t>(height), static_cast<int32_t>(width), 3});
  }
  out.true_image_shapes = Tensor::from_vector(ctx.backend(), Shape{batch, 3}, shapes);
  return out;
}

// The grid anchors of a feature map, in pixels of the preprocessed image, then: in training
// those not entirely inside the image dropped (_remove_invalid_anchors_and_predictions), or
// clipped to it with clip_anchors_to_image; otherwise clipped to it. Kept normalized.
void FasterRcnnMetaArch::update_anchors(int64_t feature_height, int64_t feature_width,
                                        bool training) {
  if (feature_height == feature_height_ && feature_width == feature_width_ &&
      training == anchors_training_ && !anchors_.empty()) {
    return;
  }
  const detection::GridAnchorGenerator generator(config_.anchors);
  const detection::FeatureMapShape shape{feature_height, feature_width};
  const std::vector<float> all = generator.generate(std::span(&shape, 1));
  const auto h = static_cast<float>(image_height_);
  const auto w = static_cast<float>(image_width_);
  std::vector<float> kept;
  std::vector<int64_t> indices;
  const int64_t count = static_cast<int64_t>(all.size() / 4);
  const bool prune = training && !config_.clip_anchors_to_image;
  for (int64_t i = 0; i < count; ++i) {
    const float* a = all.data() + i * 4;
    if (prune) {
      if (a[0] < 0.0f || a[1] < 0.0f || a[2] > h || a[3] > w) continue;
      kept.insert(kept.end(), {a[0] / h, a[1] / w, a[2] / h, a[3] / w});
    } else {
      kept.insert(kept.end(), {std::clamp(a[0], 0.0f, h) / h, std::clamp(a[1], 0.0f, w) / w,
                               std::clamp(a[2], 0.0f, h) / h, std::clamp(a[3], 0.0f, w) / w});
    }
    indices.push_back(i);
  }
  if (indices.empty()) {
    throw InvalidArgument(std::string(kName) + ": no anchor of the " + std::to_string(count) +
                          " on the " + std::to_string(feature_height) + " x " +
                          std::to_string(feature_width) + " feature map lies inside the " +
                          std::to_string(image_height_) + " x " + std::to_string(image_width_) +
                          " image; use smaller anchor scales or clip_anchors_to_image");
  }
  anchors_ = std::move(kept);
  anchor_indices_ = std::move(indices);
  feature_height_ = feature_height;
  feature_width_ = feature_width;
  anchors_training_ = training;
}

TensorDict FasterRcnnMetaArch::predict(ModelContext& ctx, const PreprocessedImages& inputs,
                                       Mode mode) {
  num_classes_ = ctx.num_classes();
  const FasterRcnnConfig& c = config_;
  const Tensor& images = inputs.images;
  if (images.shape().rank() != 4) {
    throw InvalidArgument(std::string(kName) + ": preprocessed images are " + images.description() +
                          "; expected [batch, height, width, 3]");
  }
  const int64_t batch = images.shape()[0];
  image_height_ = images.shape()[1];
  image_width_ = images.shape()[2];
  {
    NoGradScope no_grad;
    const std::vector<int32_t> shapes =
        inputs.true_image_shapes.dtype() == DType::kI32
            ? inputs.true_image_shapes.to_vector<int32_t>()
            : ops::cast(inputs.true_image_shapes, DType::kI32).to_vector<int32_t>();
    if (static_cast<int64_t>(shapes.size()) != batch * 3) {
      throw InvalidArgument(std::string(kName) + ": true_image_shapes is " +
                            inputs.true_image_shapes.description() + "; expected [" +
                            std::to_string(batch) + ", 3]");
    }
    true_fraction_.clear();
    for (int64_t b = 0; b < batch; ++b) {
      true_fraction_.push_back({static_cast<float>(shapes[static_cast<std::size_t>(b * 3)]) /
                                    static_cast<float>(image_height_),
                                static_cast<float>(shapes[static_cast<std::size_t>(b * 3 + 1)]) /
                                    static_cast<float>(image_width_)});
    }
  }
  const bool training = mode == Mode::kTrain;
  layers::VariableScope root(ctx, mode);

  // First stage: features, anchors, the RPN's 3x3 convolution and box predictor.
  layers::VariableScope first_stage = root.child(detection::kFirstStageFeatureExtractorScope);
  const Tensor features = c.extractor->extract_proposal_features(first_stage, images);
  const int64_t fh = features.shape()[1];
  const int64_t fw = features.shape()[2];
  update_anchors(fh, fw, training);
  const detection::GridAnchorGenerator generator(c.anchors);
  const int64_t per_location = generator.num_anchors_per_location()[0];

  layers::Conv2DOptions rpn = conv_options(c.rpn_hyperparams);
  rpn.activation_fn = layers::ActivationFn::relu6();
  rpn.rate = {c.atrous_rate, c.atrous_rate};
  rpn.scope = "Conv";
  const Tensor rpn_features =
      layers::conv2d(root, features, c.rpn_depth, {c.rpn_kernel_size, c.rpn_kernel_size}, rpn);
  layers::VariableScope predictor = root.child("FirstStageBoxPredictor");
  layers::Conv2DOptions head = conv_options(c.rpn_hyperparams);
  head.activation_fn = layers::ActivationFn::none();
  head.normalizer.reset();
  head.scope = "BoxEncodingPredictor";
  Tensor box_encodings = layers::conv2d(predictor, rpn_features, per_location * 4, {1, 1}, head);
  head.scope = "ClassPredictor";
  Tensor objectness = layers::conv2d(predictor, rpn_features, per_location * 2, {1, 1}, head);
  const int64_t all_anchors = fh * fw * per_location;
  box_encodings = ops::reshape(box_encodings, Shape{batch, all_anchors, 4});
  objectness = ops::reshape(objectness, Shape{batch, all_anchors, 2});
  const auto kept = static_cast<int64_t>(anchor_indices_.size());
  if (kept != all_anchors) {
    const Tensor index = Tensor::from_vector(ctx.backend(), Shape{kept}, anchor_indices_);
    box_encodings = ops::gather(box_encodings, index, 1);
    objectness = ops::gather(objectness, index, 1);
  }
  TensorDict out;
  out["rpn_box_encodings"] = box_encodings;
  out["rpn_objectness_predictions_with_background"] = objectness;
  out["anchors"] = Tensor::from_vector(ctx.backend(), Shape{kept, 4}, anchors_);
  proposals_.clear();
  proposal_scores_.clear();
  host_proposals_read_ = true;
  padded_second_stage_ = !training;
  if (c.number_of_stages == 1) {
    // The RPN alone: its proposals are the detections (and never made in training).
    out["class_predictions_with_background"] = objectness;
    if (!training) {
      compute_proposals(box_encodings, objectness, /*clip_to_true=*/true);
      add_proposals(ctx, out);
    }
    return out;
  }

  // Proposals: decoded, NMS'd, and in training sampled against the groundtruth.
  compute_proposals(box_encodings, objectness, /*clip_to_true=*/false);
  if (training) {
    ensure_host_proposals();
    if (!c.hard_example_miner) sample_proposals(ctx);
  }

  add_proposals(ctx, out);
  // Mask R-CNN's third stage crops the detections from them in inference (add_detection_masks).
  if (c.predicts_instance_masks()) out["rpn_features_to_crop"] = features;

  const int64_t classes = num_classes_;
  if (!training) {
    // As the API's predict in inference: the second stage on every slot of the first stage's
    // NMS, [B * M] rows (an image's zero rows past its num_proposals too, which postprocess and
    // loss leave out), all of it ops on the device, so that a graph capture records it.
    const int64_t m = proposal_boxes_.shape()[1];
    if (c.second_stage_box_predictor->crops_proposals()) {
      layers::VariableScope second_stage = root.child(detection::kSecondStageFeatureExtractorScope);
      layers::VariableScope box_predictor = root.child("SecondStageBoxPredictor");
      const Tensor box_features =
          c.extractor->extract_box_classifier_features(second_stage, features);
      detection::SecondStageBoxPredictions predictions =
          c.second_stage_box_predictor->predict_from_proposals(box_predictor, box_features,
                                                               proposal_boxes_, classes);
      out["refined_box_encodings"] = std::move(predictions.refined_box_encodings);
      out["class_predictions_with_background"] =
          std::move(predictions.class_predictions_with_background);
      return out;
    }
    std::vector<int32_t> box_index;
    for (int64_t b = 0; b < batch; ++b)
      box_index.insert(box_index.end(), m, static_cast<int32_t>(b));
    detection::SecondStageBoxPredictions predictions = predict_box_classifier(
        ctx, mode, features, ops::reshape(proposal_boxes_, Shape{batch * m, 4}),
        Tensor::from_vector(ctx.backend(), Shape{batch * m}, box_index));
    out["refined_box_encodings"] = std::move(predictions.refined_box_encodings);
    out["class_predictions_with_background"] =
        std::move(predictions.class_predictions_with_background);
    return out;
  }

  // Training: crop_and_resize of the sampled proposals from the first stage's features, max
  // pooled, the box classifier's features, the Mask R-CNN box predictor; or R-FCN's predictor,
  // which crops the proposals itself.
  std::vector<float> boxes;
  std::vector<int32_t> box_index;
  for (std::size_t b = 0; b < proposals_.size(); ++b) {
    boxes.insert(boxes.end(), proposals_[b].begin(), proposals_[b].end());
    box_index.insert(box_index.end(), proposals_[b].size() / 4, static_cast<int32_t>(b));
  }
  const auto total = static_cast<int64_t>(box_index.size());
  const int64_t box_sets = c.second_stage_box_predictor->num_box_sets(classes);
  if (total == 0) {
    // No proposal in any image: empty predictions of the right shapes, no second-stage work.
    out["refined_box_encodings"] =
        Tensor::from_vector(ctx.backend(), Shape{0, box_sets, 4}, std::vector<float>{});
    out["class_predictions_with_background"] =
        Tensor::from_vector(ctx.backend(), Shape{0, classes + 1}, std::vector<float>{});
    return out;
  }
  if (c.second_stage_box_predictor->crops_proposals()) {
    // R-FCN (rfcn_meta_arch.py's _predict_second_stage): the box classifier's features of the
    // whole feature maps, the proposals zero-padded to the most of any image as the API pads them
    // to max_num_proposals, and of the predictions those of the real proposals.
    layers::VariableScope second_stage = root.child(detection::kSecondStageFeatureExtractorScope);
    layers::VariableScope box_predictor = root.child("SecondStageBoxPredictor");
    std::size_t most = 0;
    for (const std::vector<float>& p : proposals_) most = std::max(most, p.size() / 4);
    std::vector<float> padded(proposals_.size() * most * 4, 0.0f);
    std::vector<int64_t> real;
    for (std::size_t b = 0; b < proposals_.size(); ++b) {
      std::copy(proposals_[b].begin(), proposals_[b].end(), padded.begin() + b * most * 4);
      for (std::size_t k = 0; k < proposals_[b].size() / 4; ++k) {
        real.push_back(static_cast<int64_t>(b * most + k));
      }
    }
    const Tensor box_features =
        c.extractor->extract_box_classifier_features(second_stage, features);
    detection::SecondStageBoxPredictions predictions =
        c.second_stage_box_predictor->predict_from_proposals(
            box_predictor, box_features,
            Tensor::from_vector(ctx.backend(), Shape{batch, static_cast<int64_t>(most), 4}, padded),
            classes);
    const Tensor rows = Tensor::from_vector(ctx.backend(), Shape{total}, real);
    out["refined_box_encodings"] = ops::gather(predictions.refined_box_encodings, rows, 0);
    out["class_predictions_with_background"] =
        ops::gather(predictions.class_predictions_with_background, rows, 0);
    return out;
  }
  Tensor box_features;
  detection::SecondStageBoxPredictions predictions = predict_box_classifier(
      ctx, mode, features, Tensor::from_vector(ctx.backend(), Shape{total, 4}, boxes),
      Tensor::from_vector(ctx.backend(), Shape{total}, box_index), &box_features);
  out["refined_box_encodings"] = std::move(predictions.refined_box_encodings);
  out["class_predictions_with_background"] =
      std::move(predictions.class_predictions_with_background);
  if (c.predicts_instance_masks()) {
    // Mask R-CNN's third stage on the proposals (in inference on the detections, from
    // postprocess(): add_detection_masks).
    layers::VariableScope box_predictor = root.child("SecondStageBoxPredictor");
    out["mask_predictions"] =
        c.second_stage_box_predictor->predict_instance_masks(box_predictor, box_features, classes);
  }
  return out;
}

// The second stage of _predict_second_stage: crop_and_resize of the boxes from the first stage's
// features, max pooled, the box classifier's features and the box predictor.
detection::SecondStageBoxPredictions FasterRcnnMetaArch::predict_box_classifier(
    ModelContext& ctx, Mode mode, const Tensor& features, const Tensor& boxes,
    const Tensor& box_index, Tensor* box_features_out) {
  const FasterRcnnConfig& c = config_;
  layers::VariableScope root(ctx, mode);
  layers::VariableScope second_stage = root.child(detection::kSecondStageFeatureExtractorScope);
  layers::VariableScope box_predictor = root.child("SecondStageBoxPredictor");
  const Tensor crops =
      ops::crop_and_resize(features, boxes, box_index, {c.initial_crop_size, c.initial_crop_size});
  const Tensor pooled = ops::max_pool2d(crops, {c.maxpool_kernel_size, c.maxpool_kernel_size},
                                        {c.maxpool_stride, c.maxpool_stride});
  Tensor box_features = c.extractor->extract_box_classifier_features(second_stage, pooled);
  detection::SecondStageBoxPredictions predictions =
      c.second_stage_box_predictor->predict(box_predictor, box_features, num_classes_);
  if (box_features_out != nullptr) *box_features_out = std::move(box_features);
  return predictions;
}

// _postprocess_rpn: the RPN's boxes decoded against the anchors, the objectness softmax's
// foreground column, then batch_multiclass_non_max_suppression with the first stage's
// thresholds, max_proposals per class and in all, clipped (see clip_to_true).
void FasterRcnnMetaArch::compute_proposals(const Tensor& box_encodings,
                                           const Tensor& objectness_logits, bool clip_to_true) {
  NoGradScope no_grad;
  const FasterRcnnConfig& c = config_;
  const int64_t batch = box_encodings.shape()[0];
  const int64_t anchors = box_encodings.shape()[1];
  // Decoded and scored as ops, so that a graph capture of inference records them.
  const Tensor decoded = ops::reshape(frcnn_box_coder()->decode_tensor(box_encodings, anchors_),
                                      Shape{batch, anchors, 1, 4});
  const Tensor scores =
      ops::slice(ops::softmax(objectness_logits, -1), {0, 0, 1}, {batch, anchors, 1});
  MultiClassNmsAttrs nms;
  nms.score_threshold = c.first_stage_nms_score_threshold;
  nms.iou_threshold = c.first_stage_nms_iou_threshold;
  nms.max_detections_per_class = c.first_stage_max_proposals;
  nms.max_total_detections = c.first_stage_max_proposals;
  nms.has_clip_window = true;
  // The clip window: the padded image for the second stage's proposals, each image's true extent
  // for the first stage's detections. One op call for the images that share it (all of them
  // unless padded), else one per image.
  const bool same_window =
      !clip_to_true || std::all_of(true_fraction_.begin(), true_fraction_.end(),
                                   [&](const auto& f) { return f == true_fraction_[0]; });
  const int64_t group = same_window ? batch : 1;
  std::vector<Tensor> boxes, kept_scores, counts;
  for (int64_t first = 0; first < batch; first += group) {
    const std::array<float, 2> extent =
        clip_to_true ? true_fraction_[static_cast<std::size_t>(first)] : std::array{1.0f, 1.0f};
    nms.clip_window = {0.0f, 0.0f, extent[0], extent[1]};
    const ops::NmsDetections d = ops::batch_multiclass_non_max_suppression(
        group == batch ? decoded : ops::slice(decoded, {first, 0, 0, 0}, {group, anchors, 1, 4}),
        group == batch ? scores : ops::slice(scores, {first, 0, 0}, {group, anchors, 1}), nms);
    boxes.push_back(d.boxes);
    kept_scores.push_back(d.scores);
    counts.push_back(d.num_detections);
  }
  proposal_boxes_ = boxes.size() == 1 ? boxes[0] : ops::concat(boxes, 0);
  proposal_score_values_ = kept_scores.size() == 1 ? kept_scores[0] : ops::concat(kept_scores, 0);
  num_proposals_ = counts.size() == 1 ? counts[0] : ops::concat(counts, 0);
  host_proposals_read_ = false;
}

void FasterRcnnMetaArch::ensure_host_proposals() const {
  if (host_proposals_read_) return;
  NoGradScope no_grad;
  const int64_t batch = proposal_boxes_.shape()[0];
  const int64_t m = proposal_boxes_.shape()[1];
  const std::vector<float> boxes = host_f32(proposal_boxes_);
  const std::vector<float> scores = host_f32(proposal_score_values_);
  const std::vector<int32_t> counts = num_proposals_.to_vector<int32_t>();
  proposals_.assign(static_cast<std::size_t>(batch), {});
  proposal_scores_.assign(static_cast<std::size_t>(batch), {});
  for (int64_t b = 0; b < batch; ++b) {
    const auto n = static_cast<std::ptrdiff_t>(counts[static_cast<std::size_t>(b)]);
    const auto image = static_cast<std::size_t>(b);
    proposals_[image].assign(boxes.begin() + b * m * 4, boxes.begin() + (b * m + n) * 4);
    proposal_scores_[image].assign(scores.begin() + b * m, scores.begin() + b * m + n);
  }
  host_proposals_read_ = true;
}

// The API's "proposal_boxes_normalized" [B, P, 4] (zero rows after an image's own),
// "proposal_scores" [B, P] and "num_proposals" i32 [B]: in inference the first stage's NMS as it
// is (P = first_stage_max_proposals), in training the sampled proposals (P the most of an image).
void FasterRcnnMetaArch::add_proposals(ModelContext& ctx, TensorDict& out) const {
  if (padded_second_stage_ || !host_proposals_read_) {
    out["proposal_boxes_normalized"] = proposal_boxes_;
    out["proposal_scores"] = proposal_score_values_;
    out["num_proposals"] = num_proposals_;
    return;
  }
  const auto batch = static_cast<int64_t>(proposals_.size());
  int64_t most = 0;
  for (const std::vector<float>& p : proposals_) {
    most = std::max(most, static_cast<int64_t>(p.size() / 4));
  }
  std::vector<float> boxes(static_cast<std::size_t>(batch * most * 4), 0.0f);
  std::vector<float> scores(static_cast<std::size_t>(batch * most), 0.0f);
  std::vector<int32_t> counts;
  for (int64_t b = 0; b < batch; ++b) {
    const auto image = static_cast<std::size_t>(b);
    std::copy(proposals_[image].begin(), proposals_[image].end(), boxes.begin() + b * most * 4);
    std::copy(proposal_scores_[image].begin(), proposal_scores_[image].end(),
              scores.begin() + b * most);
    counts.push_back(static_cast<int32_t>(proposals_[image].size() / 4));
  }
  out["proposal_boxes_normalized"] =
      Tensor::from_vector(ctx.backend(), Shape{batch, most, 4}, boxes);
  out["proposal_scores"] = Tensor::from_vector(ctx.backend(), Shape{batch, most}, scores);
  out["num_proposals"] = Tensor::from_vector(ctx.backend(), Shape{batch}, counts);
}

std::vector<float> FasterRcnnMetaArch::groundtruth_boxes(std::size_t image) const {
  // The groundtruth is normalized to the true image; the model's coordinates to the padded one.
  std::vector<float> boxes = host_f32(groundtruth_.boxes[image]);
  const auto [fy, fx] = true_fraction_[image];
  for (std::size_t i = 0; i < boxes.size(); i += 4) {
    boxes[i] *= fy;
    boxes[i + 1] *= fx;
    boxes[i + 2] *= fy;
    boxes[i + 3] *= fx;
  }
  return boxes;
}

std::vector<float> FasterRcnnMetaArch::groundtruth_weights(std::size_t image) const {
  if (groundtruth_.weights.empty()) return {};
  return host_f32(groundtruth_.weights[image]);
}

// The one-hot classes with the background column in front: [M, num_classes + 1].
std::vector<float> FasterRcnnMetaArch::labels_with_background(std::size_t image) const {
  const std::vector<float> one_hot = host_f32(groundtruth_.classes[image]);
  const int64_t rows = groundtruth_.classes[image].shape()[0];
  const int64_t classes = num_classes_ + 1;
  std::vector<float> labels(static_cast<std::size_t>(rows * classes), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(one_hot.begin() + r * (classes - 1), classes - 1, labels.begin() + r * classes + 1);
  }
  return labels;
}

// _sample_box_classifier_batch: per image, the proposals matched to the groundtruth by the
// detection assigner, then second_stage_batch_size of them with at most
// second_stage_balance_fraction positives, in the order of their scores.
void FasterRcnnMetaArch::sample_proposals(ModelContext& ctx) {
  NoGradScope no_grad;
  const FasterRcnnConfig& c = config_;
  if (groundtruth_.boxes.size() != proposals_.size()) {
    throw InvalidArgument(std::string(kName) + ": predict() in training for a batch of " +
                          std::to_string(proposals_.size()) +
                          " images, but provide_groundtruth() "
                          "gave " +
                          std::to_string(groundtruth_.boxes.size()));
  }
  const detection::TargetAssigner assigner = detector_target_assigner();
  const detection::BalancedPositiveNegativeSampler sampler(c.second_stage_balance_fraction);
  std::mt19937_64 generator(ctx.seed() ^ kSecondStageSamplerSeed);
  const int64_t classes = num_classes_ + 1;
  std::vector<float> unmatched(static_cast<std::size_t>(classes), 0.0f);
  unmatched[0] = 1.0f;
  for (std::size_t b = 0; b < proposals_.size(); ++b) {
    const std::vector<float>& boxes = proposals_[b];
    const auto n = static_cast<int64_t>(boxes.size() / 4);
    if (n == 0) continue;
    const detection::TargetAssignment t = assigner.assign(
        boxes, groundtruth_boxes(b), labels_with_background(b), unmatched, groundtruth_weights(b));
    std::vector<uint8_t> valid(static_cast<std::size_t>(n));
    std::vector<uint8_t> positive(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      valid[static_cast<std::size_t>(i)] = t.cls_weights[static_cast<std::size_t>(i)] > 0.0f;
      positive[static_cast<std::size_t>(i)] =
          argmax(std::span<const float>(t.cls_targets.data() + i * classes,
                                        static_cast<std::size_t>(classes))) > 0;
    }
    const std::vector<uint8_t> selected =
        sampler.subsample(valid, c.second_stage_batch_size, positive, generator);
    std::vector<float> kept;
    std::vector<float> kept_scores;
    for (int64_t i = 0; i < n; ++i) {
      if (selected[static_cast<std::size_t>(i)] == 0) continue;
      kept.insert(kept.end(), boxes.begin() + i * 4, boxes.begin() + i * 4 + 4);
      kept_scores.push_back(proposal_scores_[b][static_cast<std::size_t>(i)]);
    }
    proposals_[b] = std::move(kept);
    proposal_scores_[b] = std::move(kept_scores);
  }
}

void FasterRcnnMetaArch::provide_groundtruth(Groundtruth groundtruth) {
  if (groundtruth.boxes.size() != groundtruth.classes.size() ||
      (!groundtruth.weights.empty() && groundtruth.weights.size() != groundtruth.boxes.size())) {
    throw InvalidArgument(std::string(kName) + ": provide_groundtruth got " +
                          std::to_string(groundtruth.boxes.size()) + " box lists, " +
                          std::to_string(groundtruth.classes.size()) + " class lists and " +
                          std::to_string(groundtruth.weights.size()) + " weight lists");
  }
  groundtruth_ = std::move(groundtruth);
}

Tensor FasterRcnnMetaArch::real_proposal_rows(const Tensor& predictions) const {
  if (!padded_second_stage_) return predictions;
  const int64_t batch = proposal_boxes_.shape()[0];
  const int64_t m = proposal_boxes_.shape()[1];
  if (predictions.shape().rank() < 1 || predictions.shape()[0] != batch * m) {
    throw InvalidArgument(std::string(kName) + ": loss() got box classifier predictions " +
                          predictions.description() + "; the last predict() made " +
                          std::to_string(batch * m) + " rows");
  }
  // Each image's count from the proposals loss() reads anyway (one copy from the device).
  ensure_host_proposals();
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batch; ++b) {
    const auto n = static_cast<int64_t>(proposals_[static_cast<std::size_t>(b)].size() / 4);
    for (int64_t i = 0; i < n; ++i) rows.push_back(b * m + i);
  }
  const auto n = static_cast<int64_t>(rows.size());
  return ops::gather(predictions, Tensor::from_vector(predictions.backend(), Shape{n}, rows), 0);
}

// FasterRCNNMetaArch.loss: _loss_rpn (targets of the proposal assigner on the anchors, a
// minibatch of first_stage_minibatch_size per image, smooth L1 and softmax losses normalized by
// the minibatch's size, averaged over the images) and, with two stages, _loss_box_classifier
// (targets of the detection assigner on the proposals, the box of the target class, normalized
// by the image's proposals times the batch size).
TensorDict FasterRcnnMetaArch::loss(ModelContext& ctx, const TensorDict& prediction_dict,
                                    const Tensor&) {
  const FasterRcnnConfig& c = config_;
  const Tensor& encodings = prediction_entry(prediction_dict, "rpn_box_encodings", "loss", kName);
  const Tensor& objectness = prediction_entry(
      prediction_dict, "rpn_objectness_predictions_with_background", "loss", kName);
  const int64_t batch = encodings.shape()[0];
  const int64_t anchors = encodings.shape()[1];
  if (static_cast<int64_t>(groundtruth_.boxes.size()) != batch) {
    throw InvalidArgument(std::string(kName) + ": loss() for a batch of " + std::to_string(batch) +
                          " images, but provide_groundtruth() gave " +
                          std::to_string(groundtruth_.boxes.size()));
  }
  if (static_cast<int64_t>(anchors_.size() / 4) != anchors) {
    throw InvalidArgument(std::string(kName) + ": loss() got predictions for " +
                          std::to_string(anchors) + " anchors; the last predict() had " +
                          std::to_string(anchors_.size() / 4));
  }
  Backend& backend = ctx.backend();
  TensorDict out;
  {
    const detection::TargetAssigner assigner = proposal_target_assigner();
    const detection::BalancedPositiveNegativeSampler sampler(c.first_stage_positive_fraction);
    std::mt19937_64 generator(ctx.seed() ^ kFirstStageSamplerSeed);
    std::vector<float> reg_targets;
    std::vector<float> reg_weights;
    std::vector<float> cls_targets;
    std::vector<float> cls_weights;
    reg_targets.reserve(static_cast<std::size_t>(batch * anchors * 4));
    for (int64_t b = 0; b < batch; ++b) {
      const auto image = static_cast<std::size_t>(b);
      const detection::TargetAssignment t =
          assigner.assign(anchors_, groundtruth_boxes(image), {}, {}, groundtruth_weights(image));
      std::vector<uint8_t> valid(static_cast<std::size_t>(anchors));
      std::vector<uint8_t> positive(static_cast<std::size_t>(anchors));
      for (int64_t a = 0; a < anchors; ++a) {
        valid[static_cast<std::size_t>(a)] = t.cls_weights[static_cast<std::size_t>(a)] > 0.0f;
        positive[static_cast<std::size_t>(a)] = t.cls_targets[static_cast<std::size_t>(a)] > 0.0f;
      }
      const std::vector<uint8_t> sampled =
          sampler.subsample(valid, c.first_stage_minibatch_size, positive, generator);
      double count = 0.0;
      for (uint8_t s : sampled) count += s;
      // Each image's losses over its minibatch's size, then the mean over the images.
      const double scale = 1.0 / (std::max(count, 1.0) * static_cast<double>(batch));
      reg_targets.insert(reg_targets.end(), t.reg_targets.begin(), t.reg_targets.end());
      for (int64_t a = 0; a < anchors; ++a) {
        const auto i = static_cast<std::size_t>(a);
        const float s = sampled[i] != 0 ? static_cast<float>(scale) : 0.0f;
        reg_weights.push_back(s * t.reg_weights[i]);
        cls_weights.push_back(s);
        const float target = t.cls_targets[i] > 0.0f ? 1.0f : 0.0f;
        cls_targets.insert(cls_targets.end(), {1.0f - target, target});
      }
    }
    const Tensor reg_t = Tensor::from_vector(backend, Shape{batch, anchors, 4}, reg_targets);
    const Tensor reg_w = Tensor::from_vector(backend, Shape{batch, anchors}, reg_weights);
    const Tensor cls_t = Tensor::from_vector(backend, Shape{batch, anchors, 2}, cls_targets);
    const Tensor cls_w = Tensor::from_vector(backend, Shape{batch, anchors}, cls_weights);
    const detection::WeightedSmoothL1LocalizationLoss localization;
    const detection::WeightedSoftmaxClassificationLoss classification;
    out["Loss/RPNLoss/localization_loss"] = ops::mul(
        ops::reduce_sum(localization(encodings, reg_t, reg_w)), c.first_stage_localization_weight);
    out["Loss/RPNLoss/objectness_loss"] = ops::mul(
        ops::reduce_sum(classification(objectness, cls_t, cls_w)), c.first_stage_objectness_weight);
  }
  if (c.number_of_stages == 1) return out;

  const Tensor refined =
      real_proposal_rows(prediction_entry(prediction_dict, "refined_box_encodings", "loss", kName));
  const Tensor logits = real_proposal_rows(
      prediction_entry(prediction_dict, "class_predictions_with_background", "loss", kName));
  ensure_host_proposals();
  const int64_t total = refined.shape()[0];
  const int64_t box_sets = refined.shape()[1];
  const int64_t classes = num_classes_ + 1;
  if (total == 0) {
    // No proposals: the box classifier has nothing to learn from (a zero that keeps the keys).
    const Tensor zero = ops::mul(ops::reduce_sum(refined), 0.0);
    out["Loss/BoxClassifierLoss/localization_loss"] = zero;
    out["Loss/BoxClassifierLoss/classification_loss"] = zero;
    // The mask loss where the normal path has one: where masks were predicted (training).
    if (prediction_dict.count("mask_predictions") != 0) {
      out["Loss/BoxClassifierLoss/mask_loss"] = zero;
    }
    return out;
  }
  const detection::TargetAssigner assigner = detector_target_assigner();
  std::vector<float> unmatched(static_cast<std::size_t>(classes), 0.0f);
  unmatched[0] = 1.0f;
  std::vector<float> reg_targets;
  std::vector<float> reg_weights;
  std::vector<float> cls_targets;
  std::vector<float> cls_weights;
  std::vector<float> class_mask;  // [total, box_sets]: the target class's box
  // Each image's assignment, which the mask loss reuses (its matches, weights and classes).
  std::vector<detection::TargetAssignment> assignments(proposals_.size());
  for (std::size_t b = 0; b < proposals_.size(); ++b) {
    const auto n = static_cast<int64_t>(proposals_[b].size() / 4);
    if (n == 0) continue;
    const detection::TargetAssignment& t = assignments[b] =
        assigner.assign(proposals_[b], groundtruth_boxes(b), labels_with_background(b), unmatched,
                        groundtruth_weights(b));
    const double scale = 1.0 / (static_cast<double>(n) * static_cast<double>(batch));
    reg_targets.insert(reg_targets.end(), t.reg_targets.begin(), t.reg_targets.end());
    cls_targets.insert(cls_targets.end(), t.cls_targets.begin(), t.cls_targets.end());
    for (int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      reg_weights.push_back(static_cast<float>(scale) * t.reg_weights[k]);
      cls_weights.push_back(static_cast<float>(scale) * t.cls_weights[k]);
      const int64_t target = argmax(std::span<const float>(t.cls_targets.data() + i * classes,
                                                           static_cast<std::size_t>(classes)));
      for (int64_t s = 0; s < box_sets; ++s) {
        // The API pads a zero box for the background and picks the target's: a background
        // proposal's box is zeros (and its weight 0).
        class_mask.push_back(box_sets == 1 ? 1.0f : (target > 0 && s == target - 1 ? 1.0f : 0.0f));
      }
    }
  }
  if (static_cast<int64_t>(cls_weights.size()) != total) {
    throw InvalidArgument(std::string(kName) + ": loss() got box classifier predictions for " +
                          std::to_string(total) + " proposals; the last predict() made " +
                          std::to_string(cls_weights.size()));
  }
  Tensor selected = refined;
  if (box_sets > 1) {
    const Tensor mask = Tensor::from_vector(backend, Shape{total, box_sets, 1}, class_mask);
    selected = ops::reduce_sum(ops::mul(refined, mask), {1});
  }
  selected = ops::reshape(selected, Shape{1, total, 4});
  const Tensor reg_t = Tensor::from_vector(backend, Shape{1, total, 4}, reg_targets);
  const Tensor reg_w = Tensor::from_vector(backend, Shape{1, total}, reg_weights);
  const Tensor cls_t = Tensor::from_vector(backend, Shape{1, total, classes}, cls_targets);
  const Tensor cls_w = Tensor::from_vector(backend, Shape{1, total}, cls_weights);
  const detection::WeightedSmoothL1LocalizationLoss localization;
  Tensor location_losses = localization(selected, reg_t, reg_w);
  Tensor cls_losses = c.second_stage_classification_loss->per_anchor(
      ops::reshape(logits, Shape{1, total, classes}), cls_t, cls_w);
  if (c.hard_example_miner) {
    // _unpad_proposals_and_apply_hard_mining: per image, the proposals whose (normalized)
    // losses the miner selects by NMS over the proposal boxes. (The API's loop returns after
    // its first image, so only image 0 counts there; here every image does, which is the same
    // for the sample configs' batch of 1.)
    std::vector<float> loc_values;
    std::vector<float> cls_values;
    {
      NoGradScope no_grad;
      loc_values = host_f32(location_losses);
      cls_values = host_f32(cls_losses);
    }
    const detection::HardExampleMiner miner(*c.hard_example_miner);
    std::vector<float> mask;
    std::size_t first = 0;
    for (const std::vector<float>& boxes : proposals_) {
      const std::size_t n = boxes.size() / 4;
      if (n == 0) continue;
      const detection::HardExampleMiningResult mined = miner.mine(
          std::span<const float>(loc_values).subspan(first, n),
          std::span<const float>(cls_values).subspan(first, n), boxes, 1, static_cast<int64_t>(n));
      mask.insert(mask.end(), mined.selection_mask.begin(), mined.selection_mask.end());
      first += n;
    }
    const Tensor selection = Tensor::from_vector(backend, Shape{1, total}, mask);
    location_losses = ops::mul(location_losses, selection);
    cls_losses = ops::mul(cls_losses, selection);
  }
  out["Loss/BoxClassifierLoss/localization_loss"] =
      ops::mul(ops::reduce_sum(location_losses), c.second_stage_localization_weight);
  out["Loss/BoxClassifierLoss/classification_loss"] =
      ops::mul(ops::reduce_sum(cls_losses), c.second_stage_classification_weight);
  if (prediction_dict.count("mask_predictions") != 0) {
    out["Loss/BoxClassifierLoss/mask_loss"] = mask_loss(ctx, prediction_dict, assignments);
  }
  return out;
}

// The first `num` rows of each image's `m` slots (num i32 [B]) as a bool [B, m, 1] mask.
Tensor leading_slots(const Tensor& num, int64_t m) {
  std::vector<float> slots(static_cast<std::size_t>(m));
  for (int64_t i = 0; i < m; ++i) slots[static_cast<std::size_t>(i)] = static_cast<float>(i);
  const int64_t batch = num.shape()[0];
  return ops::less(Tensor::from_vector(num.backend(), Shape{1, m, 1}, slots),
                   ops::reshape(ops::cast(num, DType::kF32), Shape{batch, 1, 1}));
}

Tensor FasterRcnnMetaArch::true_extent(Backend& backend) const {
  const auto batch = static_cast<int64_t>(true_fraction_.size());
  const bool same = std::all_of(true_fraction_.begin(), true_fraction_.end(),
                                [&](const auto& f) { return f == true_fraction_[0]; });
  std::vector<float> extent;
  for (int64_t b = 0; b < (same ? 1 : batch); ++b) {
    const auto [fy, fx] = true_fraction_[static_cast<std::size_t>(b)];
    extent.insert(extent.end(), {fy, fx, fy, fx});
  }
  return Tensor::from_vector(backend, Shape{same ? 1 : batch, 1, 4}, extent);
}

FasterRcnnMetaArch::SlotPredictions FasterRcnnMetaArch::slot_predictions(
    ModelContext& ctx, const Tensor& refined, const Tensor& logits) const {
  if (padded_second_stage_) return {proposal_boxes_, num_proposals_, refined, logits};
  // After a predict() in training: the sampled proposals, padded to the most of an image (at
  // least 1), and each slot's row of the predictions (row 0 for the padding, which is masked).
  Backend& backend = ctx.backend();
  const auto batch = static_cast<int64_t>(proposals_.size());
  std::size_t most = 1;
  for (const std::vector<float>& p : proposals_) most = std::max(most, p.size() / 4);
  const auto m = static_cast<int64_t>(most);
  std::vector<float> boxes(static_cast<std::size_t>(batch * m * 4), 0.0f);
  std::vector<int32_t> counts;
  std::vector<int64_t> rows(static_cast<std::size_t>(batch * m), 0);
  int64_t row = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<float>& p = proposals_[static_cast<std::size_t>(b)];
    std::copy(p.begin(), p.end(), boxes.begin() + b * m * 4);
    const auto n = static_cast<int64_t>(p.size() / 4);
    for (int64_t i = 0; i < n; ++i) rows[static_cast<std::size_t>(b * m + i)] = row++;
    counts.push_back(static_cast<int32_t>(n));
  }
  SlotPredictions out{Tensor::from_vector(backend, Shape{batch, m, 4}, boxes),
                      Tensor::from_vector(backend, Shape{batch}, counts), refined, logits};
  if (row == 0) {  // no proposal at all: zero rows, all masked
    Shape r = refined.shape();
    r[0] = batch * m;
    out.refined = ops::zeros(backend, r);
    out.logits = ops::zeros(backend, Shape{batch * m, logits.shape()[1]});
    return out;
  }
  const Tensor index = Tensor::from_vector(backend, Shape{batch * m}, rows);
  out.refined = ops::gather(refined, index, 0);
  out.logits = ops::gather(logits, index, 0);
  return out;
}

// One stage: the proposals (clipped to each image's true extent) in the true image's frame, with
// their objectness, class 0.
TensorDict FasterRcnnMetaArch::postprocess_first_stage(ModelContext& ctx) const {
  if (!padded_second_stage_) {
    throw InvalidArgument(std::string(kName) +
                          ": postprocess() of number_of_stages 1 after a predict() in training, "
                          "which makes no proposals; predict in eval or predict mode first");
  }
  TensorDict out;
  // The NMS's zero rows stay zero.
  out["detection_boxes"] = ops::div(proposal_boxes_, true_extent(ctx.backend()));
  out["detection_scores"] = proposal_score_values_;
  out["detection_classes"] = ops::mul(proposal_score_values_, 0.0);
  out["num_detections"] = ops::cast(num_proposals_, DType::kF32);
  return out;
}

// FasterRCNNMetaArch.postprocess. One stage: postprocess_first_stage. Two:
// _postprocess_box_classifier, each proposal's per-class boxes decoded against it, the score
// converter on the logits (times 1 / logit_scale) without the background column, then
// batch_multiclass_non_max_suppression clipped to the true image and in its frame, over each
// image's num_proposals (the slots after them scored -inf, so that no threshold keeps them).
TensorDict FasterRcnnMetaArch::postprocess(ModelContext& ctx, const TensorDict& prediction_dict,
                                           const Tensor&) {
  NoGradScope no_grad;
  const FasterRcnnConfig& c = config_;
  if (c.number_of_stages == 1) return postprocess_first_stage(ctx);

  const int64_t classes = num_classes_ + 1;
  SlotPredictions slots = slot_predictions(
      ctx, prediction_entry(prediction_dict, "refined_box_encodings", "postprocess", kName),
      prediction_entry(prediction_dict, "class_predictions_with_background", "postprocess", kName));
  const int64_t batch = slots.proposals.shape()[0];
  const int64_t m = slots.proposals.shape()[1];
  const int64_t box_sets = slots.refined.shape()[1];
  if (slots.refined.shape().rank() != 3 || slots.refined.shape()[0] != batch * m ||
      slots.logits.shape() != Shape{batch * m, classes}) {
    throw InvalidArgument(std::string(kName) + ": postprocess() got refined_box_encodings " +
                          slots.refined.description() + " and class_predictions_with_background " +
                          slots.logits.description() + "; the last predict() made " +
                          std::to_string(batch * m) + " rows of " + std::to_string(classes) +
                          " classes");
  }
  // Every slot's box codes decoded against its proposal: [B, M, box_sets, 4].
  const Tensor boxes =
      frcnn_box_coder()->decode_tensor(ops::reshape(slots.refined, Shape{batch, m, box_sets, 4}),
                                       ops::reshape(slots.proposals, Shape{batch, m, 1, 4}));
  Tensor scores = ops::reshape(slots.logits, Shape{batch, m, classes});
  if (c.logit_scale != 1.0) scores = scores * (1.0 / c.logit_scale);
  scores = c.score_converter(scores);
  scores = ops::slice(scores, {0, 0, 1}, {batch, m, classes - 1});
  scores = ops::where(leading_slots(slots.num_proposals, m), scores,
                      ops::full(ctx.backend(), Shape{1}, -std::numeric_limits<double>::infinity()));
  MultiClassNmsAttrs nms = c.second_stage_nms;
  nms.has_clip_window = true;
  nms.change_coordinate_frame = true;
  // One window per op call: images with another true extent than the first run on their own.
  const bool same_window = std::all_of(true_fraction_.begin(), true_fraction_.end(),
                                       [&](const auto& f) { return f == true_fraction_[0]; });
  std::vector<ops::NmsDetections> per_image;
  for (int64_t b = 0; b < (same_window ? 1 : batch); ++b) {
    const auto image = static_cast<std::size_t>(b);
    nms.clip_window = {0.0f, 0.0f, true_fraction_[image][0], true_fraction_[image][1]};
    per_image.push_back(ops::batch_multiclass_non_max_suppression(
        same_window ? boxes : ops::slice(boxes, {b, 0, 0, 0}, {1, m, box_sets, 4}),
        same_window ? scores : ops::slice(scores, {b, 0, 0}, {1, m, classes - 1}), nms));
  }
  TensorDict detections = nms_detection_dict(per_image);
  add_detection_masks(ctx, prediction_dict, detections);
  return detections;
}

// The API's restore_map: "detection" restores both feature extractors by their own names, or
// every variable with load_all_detection_checkpoint_vars; "classification" restores them from a
// classification checkpoint whose names lack the extractor scopes (resnet_v1_50/block4/... is
// the second stage's).
std::map<std::string, std::string> FasterRcnnMetaArch::restore_map(
    const std::string& fine_tune_checkpoint_type, bool load_all_detection_checkpoint_vars) {
  const std::string first = detection::kFirstStageFeatureExtractorScope;
  const std::string second = detection::kSecondStageFeatureExtractorScope;
  if (fine_tune_checkpoint_type == "detection") {
    if (load_all_detection_checkpoint_vars) return {{"", ""}};
    return {{first + "/", first + "/"}, {second + "/", second + "/"}};
  }
  if (fine_tune_checkpoint_type == "classification") {
    return config_.extractor->restore_from_classification_checkpoint(first, second);
  }
  throw InvalidArgument(std::string(kName) + ": fine_tune_checkpoint_type '" +
                        fine_tune_checkpoint_type + "' is not detection or classification");
}

}  // namespace trainyard::models
