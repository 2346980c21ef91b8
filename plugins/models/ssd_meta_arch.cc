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
#include "trainyard/pkg/detection/region_similarity_calculator.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/pkg/nets/nets.h"

namespace trainyard::models {
namespace {

constexpr const char* kName = "SSDMetaArch";

// ssd_mobilenet_v1's feature_map_layout: two maps of the base net, then four new ones.
struct FeatureMapLayer {
  const char* from_layer;  // "" for a new layer
  int64_t layer_depth;     // -1 for a base layer
};
constexpr FeatureMapLayer kMobilenetV1Layout[] = {
    {"Conv2d_11_pointwise", -1},
    {"Conv2d_13_pointwise", -1},
    {"", 512},
    {"", 256},
    {"", 256},
    {"", 128},
};

// `x` zero-padded at the bottom and right to multiples of `multiple` (ops.pad_to_multiple).
Tensor pad_to_multiple(const Tensor& x, int64_t multiple) {
  if (multiple <= 1) return x;
  const int64_t h = x.shape()[1];
  const int64_t w = x.shape()[2];
  const int64_t ph = (h + multiple - 1) / multiple * multiple - h;
  const int64_t pw = (w + multiple - 1) / multiple * multiple - w;
  if (ph == 0 && pw == 0) return x;
  return ops::pad(x, {{0, 0}, {0, ph}, {0, pw}, {0, 0}});
}

// ops.fixed_padding: pads so that a VALID convolution of `kernel` gives SAME's output size.
Tensor fixed_padding(const Tensor& x, int64_t kernel) {
  const int64_t total = kernel - 1;
  const int64_t begin = total / 2;
  return ops::pad(x, {{0, 0}, {begin, total - begin}, {begin, total - begin}, {0, 0}});
}

}  // namespace

SsdMetaArch::SsdMetaArch(const Options& options) : SsdMetaArch(ssd_config_from_options(options)) {}

SsdMetaArch::SsdMetaArch(SsdConfig config) : config_(std::move(config)) {
  if (config_.feature_extractor_type != "ssd_mobilenet_v1") {
    throw InvalidArgument(std::string(kName) + ": feature_extractor.type '" +
                          config_.feature_extractor_type +
                          "' is not supported; supported: ssd_mobilenet_v1");
  }
  if (!config_.box_coder || !config_.matcher || !config_.similarity || !config_.localization_loss ||
      !config_.classification_loss) {
    throw InvalidArgument(std::string(kName) +
                          ": box_coder, matcher, similarity_calculator and both losses are "
                          "required");
  }
  if (config_.box_code_size != config_.box_coder->code_size()) {
    throw InvalidArgument(std::string(kName) + ": box_predictor's box_code_size " +
                          std::to_string(config_.box_code_size) + " differs from the box coder's " +
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
  // SSDMobileNetV1FeatureExtractor.preprocess: [0, 255] to [-1, 1].
  out.images = ops::add(ops::mul(ops::cast(images, DType::kF32), 2.0 / 255.0), -1.0);
  const Shape& s = images.shape();
  std::vector<int32_t> shapes;
  for (int64_t i = 0; i < s[0]; ++i) {
    shapes.insert(shapes.end(), {static_cast<int32_t>(s[1]), static_cast<int32_t>(s[2]), 3});
  }
  out.true_image_shapes = Tensor::from_vector(ctx.backend(), Shape{s[0], 3}, shapes);
  return out;
}

// SSDMobileNetV1FeatureExtractor._extract_features: MobilenetV1 to Conv2d_13_pointwise under
// its own arg scope, then multi_resolution_feature_maps with insert_1x1_conv under the
// config's conv_hyperparams, all in the MobilenetV1 scope.
std::vector<Tensor> SsdMetaArch::feature_maps(layers::VariableScope& root, const Tensor& images) {
  const SsdConfig& c = config_;
  if (images.shape()[1] < 33 || images.shape()[2] < 33) {
    throw InvalidArgument(std::string(kName) + ": images are " + images.description() +
                          "; ssd_mobilenet_v1 needs at least 33 x 33 (check_min_image_dim)");
  }
  layers::VariableScope extractor = root.child("FeatureExtractor");
  nets::MobilenetV1Options base;
  base.num_classes = 0;
  base.depth_multiplier = c.depth_multiplier;
  base.min_depth = c.min_depth;
  base.final_endpoint = "Conv2d_13_pointwise";
  base.use_explicit_padding = c.use_explicit_padding;
  base.scope = "MobilenetV1";
  // freeze_batchnorm is SSDMetaArch.predict's arg_scope([batch_norm], is_training=is_training and
  // not freeze_batchnorm). It reaches the base net (mobilenet_v1_arg_scope(is_training=None) keeps
  // it) but nothing built under a conv_hyperparams scope, which replaces the whole arg scope and
  // sets is_training = is_training and batch_norm.train (hyperparams_builder): the extra feature
  // maps, the predictor's layers and, with override_base_feature_extractor_hyperparams, the base.
  if (c.freeze_batchnorm) base.batch_norm_is_training = false;
  if (c.override_base_feature_extractor_hyperparams) {
    base.batch_norm_is_training.reset();
    if (c.extractor_hyperparams.batch_norm) {
      base.batch_norm_is_training = c.extractor_hyperparams.batch_norm->is_training;
    }
    // The base net takes conv_hyperparams instead of mobilenet_v1_arg_scope's defaults: its
    // weight decay, its batch norm's decay and epsilon, its truncated normal's stddev.
    const ConvHyperparams& h = c.extractor_hyperparams;
    base.weight_decay = h.l2_weight;
    if (h.batch_norm) {
      base.batch_norm_decay = h.batch_norm->decay;
      base.batch_norm_epsilon = h.batch_norm->epsilon;
    }
    if (h.initializer.kind == Initializer::Kind::kTruncatedNormal) {
      base.stddev = h.initializer.stddev;
    }
  }
  nets::NetOutput net =
      nets::mobilenet_v1_base(extractor, pad_to_multiple(images, c.pad_to_multiple), base);

  auto depth = [&](double d) {
    return std::max(static_cast<int64_t>(d * c.depth_multiplier), c.min_depth);
  };
  layers::VariableScope scope = extractor.child("MobilenetV1");
  std::vector<Tensor> maps;
  std::string base_from_layer;
  int64_t index = 0;
  for (const FeatureMapLayer& layer : kMobilenetV1Layout) {
    if (layer.from_layer[0] != '\0') {
      maps.push_back(net.end_points.at(layer.from_layer));
      base_from_layer = layer.from_layer;
      ++index;
      continue;
    }
    layers::Conv2DOptions one = conv_options(c.extractor_hyperparams, true);
    const int64_t half = depth(static_cast<double>(layer.layer_depth) / 2.0);
    one.scope =
        base_from_layer + "_1_Conv2d_" + std::to_string(index) + "_1x1_" + std::to_string(half);
    Tensor intermediate = layers::conv2d(scope, maps.back(), half, {1, 1}, one);
    const std::string name = base_from_layer + "_2_Conv2d_" + std::to_string(index) + "_3x3_s2_" +
                             std::to_string(depth(layer.layer_depth));
    layers::Conv2DOptions three = conv_options(c.extractor_hyperparams, true);
    three.stride = {2, 2};
    if (c.use_explicit_padding) {
      intermediate = fixed_padding(intermediate, 3);
      three.padding = Padding2D::valid();
    }
    if (c.use_depthwise) {
      layers::SeparableConv2DOptions d;
      d.stride = {2, 2};
      d.padding = three.padding;
      d.activation_fn = three.activation_fn;
      d.normalizer = three.normalizer;
      d.weights_initializer = three.weights_initializer;
      d.weights_l2 = three.weights_l2;
      d.scope = name + "_depthwise";
      Tensor dw = layers::separable_conv2d(scope, intermediate, std::nullopt, {3, 3}, d);
      layers::Conv2DOptions p = conv_options(c.extractor_hyperparams, true);
      p.scope = name;
      maps.push_back(layers::conv2d(scope, dw, depth(layer.layer_depth), {1, 1}, p));
    } else {
      three.scope = name;
      maps.push_back(layers::conv2d(scope, intermediate, depth(layer.layer_depth), {3, 3}, three));
    }
    ++index;
  }
  return maps;
}

TensorDict SsdMetaArch::predict(ModelContext& ctx, const PreprocessedImages& inputs, Mode mode) {
  num_classes_ = ctx.num_classes();
  const SsdConfig& c = config_;
  layers::VariableScope root(ctx, mode);
  const std::vector<Tensor> maps = feature_maps(root, inputs.images);

  // Anchors for these feature-map sizes, cached while the sizes stay.
  std::vector<detection::FeatureMapShape> shapes;
  for (const Tensor& m : maps) shapes.push_back({m.shape()[1], m.shape()[2]});
  const bool same = shapes.size() == anchor_shapes_.size() &&
                    std::equal(shapes.begin(), shapes.end(), anchor_shapes_.begin(),
                               [](const auto& a, const auto& b) {
                                 return a.height == b.height && a.width == b.width;
                               });
  const detection::MultipleGridAnchorGenerator generator = detection::create_ssd_anchors(c.anchors);
  const std::vector<int64_t> per_location = generator.num_anchors_per_location();
  if (per_location.size() != maps.size()) {
    throw InvalidArgument(std::string(kName) + ": anchor_generator.ssd_anchor_generator has " +
                          std::to_string(per_location.size()) + " layers but the feature " +
                          "extractor gives " + std::to_string(maps.size()) + " feature maps");
  }
  if (!same) {
    anchors_ = generator.generate(shapes, inputs.images.shape()[1], inputs.images.shape()[2]);
    anchor_shapes_ = shapes;
  }

  // ConvolutionalBoxPredictor, one BoxPredictor_<i> scope per feature map.
  const int64_t batch = inputs.images.shape()[0];
  const int64_t classes = num_classes_ + 1;
  std::vector<Tensor> encodings;
  std::vector<Tensor> class_predictions;
  for (std::size_t i = 0; i < maps.size(); ++i) {
    layers::VariableScope sc = root.child("BoxPredictor_" + std::to_string(i));
    Tensor net = maps[i];
    const int64_t depth_in = net.shape()[3];
    const int64_t na = per_location[i];
    if (c.num_layers_before_predictor > 0) {
      const int64_t d = std::max(std::min(depth_in, c.predictor_max_depth), c.predictor_min_depth);
      for (int64_t k = 0; k < c.num_layers_before_predictor; ++k) {
        layers::Conv2DOptions o = conv_options(c.predictor_hyperparams, true);
        o.scope = "Conv2d_" + std::to_string(k) + "_1x1_" + std::to_string(d);
        net = layers::conv2d(sc, net, d, {1, 1}, o);
      }
    }
    layers::Conv2DOptions box = conv_options(c.predictor_hyperparams, true);
    box.activation_fn = layers::ActivationFn::none();
    box.normalizer.reset();
    box.scope = "BoxEncodingPredictor";
    Tensor codes =
        layers::conv2d(sc, net, na * c.box_code_size, {c.kernel_size, c.kernel_size}, box);
    Tensor cls_in = net;
    if (c.use_dropout) {
      layers::DropoutOptions d;
      d.keep_prob = c.dropout_keep_probability;
      cls_in = layers::dropout(sc, cls_in, d);
    }
    layers::Conv2DOptions cls = box;
    cls.scope = "ClassPredictor";
    cls.biases_initializer = layers::constant_initializer(c.class_prediction_bias_init);
    Tensor logits = layers::conv2d(sc, cls_in, na * classes, {c.kernel_size, c.kernel_size}, cls);
    if (c.apply_sigmoid_to_scores) logits = ops::sigmoid(logits);
    const int64_t cells = maps[i].shape()[1] * maps[i].shape()[2];
    encodings.push_back(ops::reshape(codes, Shape{batch, cells * na, c.box_code_size}));
    class_predictions.push_back(ops::reshape(logits, Shape{batch, cells * na, classes}));
  }
  TensorDict out;
  out["box_encodings"] = ops::concat(encodings, 1);
  out["class_predictions_with_background"] = ops::concat(class_predictions, 1);
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
  const int64_t code = c.box_code_size;
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
    // The API adds the background column in front of the one-hot classes.
    std::vector<float> labels(static_cast<std::size_t>(rows * classes), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(one_hot.begin() + r * (classes - 1), classes - 1,
                  labels.begin() + r * classes + 1);
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
  const int64_t code = c.box_code_size;
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
  switch (c.score_converter) {
    case detection::ScoreConverter::kIdentity:
      break;
    case detection::ScoreConverter::kSigmoid:
      scores = ops::sigmoid(scores);
      break;
    case detection::ScoreConverter::kSoftmax:
      scores = ops::softmax(scores, -1);
      break;
  }
  scores = ops::slice(scores, {0, 0, 1}, {batch, anchors, classes - 1});
  const ops::NmsDetections d =
      ops::batch_multiclass_non_max_suppression(decoded_boxes, scores, c.nms);
  TensorDict out;
  out["detection_boxes"] = d.boxes;
  out["detection_scores"] = d.scores;
  out["detection_classes"] = d.classes;
  out["num_detections"] = ops::cast(d.num_detections, DType::kF32);
  return out;
}

// The API's restore_map (without load_all_detection_checkpoint_vars, which the trainer applies):
// "detection" restores the feature extractor's variables by their own names, not the box
// predictor's (whose shapes follow num_classes); "classification" restores the feature
// extractor from a classification checkpoint whose names lack the "FeatureExtractor/" scope
// (its extra layers are not in such a checkpoint and stay as initialized).
std::map<std::string, std::string> SsdMetaArch::restore_map(
    const std::string& fine_tune_checkpoint_type) {
  if (fine_tune_checkpoint_type == "detection") {
    return {{"FeatureExtractor/", "FeatureExtractor/"}};
  }
  if (fine_tune_checkpoint_type == "classification") return {{"FeatureExtractor/", ""}};
  throw InvalidArgument(std::string(kName) + ": fine_tune_checkpoint_type '" +
                        fine_tune_checkpoint_type + "' is not detection or classification");
}

}  // namespace trainyard::models
