// Image classifiers with TF-Slim's names (nets_factory's --model_name), on pkg/nets:
//
//   lenet                       slim's LeNet for 28x28 images (MNIST, Fashion-MNIST).
//   resnet_v1_50, _101, _152    slim's ResNet v1 for ImageNet-sized images.
//   resnet_v1                   the same family with its blocks given as options.
//   resnet_20                   He et al.'s CIFAR ResNet-20 (basic units, 16/32/64 channels)
//                               for 32x32 images, in resnet_v1's naming scheme.
//   mobilenet_v1                slim's MobileNet v1, with depth_multiplier.
//   mobilenet_v2                slim's MobileNet v2 (nets/mobilenet/mobilenet_v2.py), with
//                               depth_multiplier and finegrain_classification_mode.
//   mobilenet_v3_large, _small  slim's MobileNet v3 (nets/mobilenet/mobilenet_v3.py's V3_LARGE,
//                               V3_SMALL), with depth_multiplier and
//                               finegrain_classification_mode.
//   inception_v2                slim's Inception v2 (nets/inception_v2.py), with depth_multiplier
//                               and use_separable_conv.
//   inception_v3                slim's Inception v3 (nets/inception_v3.py) with its AuxLogits
//                               head on Mixed_6e, whose loss train_image_classifier.py adds to
//                               the training loss with weight 0.4 (create_aux_logits false
//                               leaves it out).
//   inception_resnet_v2         slim's Inception-ResNet v2 (nets/inception_resnet_v2.py) with its
//                               AuxLogits head on PreAuxLogits, weighted 0.4 the same way.
//
// Input: batch.features["image"], f32 NHWC [B, H, W, C], preprocessed as the net expects
// (ImageClassificationPreprocessing); the number of classes comes from the context and sizes
// the logits, so a checkpoint's head of another size is left out of a fine-tuning restore as
// the walkthrough's num_classes does. head "fully_connected" replaces slim's 1x1 logits
// convolution with the walkthrough's fully_connected(..., scope='Predict/logits') on the pooled
// features.
//
// Output: predictions = softmax(logits) [B, num_classes]; in training and evaluation, the loss
// of train_image_classifier.py: tf.losses.softmax_cross_entropy of the one-hot labels with
// label_smoothing, averaged over the batch. Weight decay is slim's l2_regularizer on the
// weights (VariableSpec::l2_regularization), summed by the trainer with regularization_penalty.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/options.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/quantize.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/pkg/nets/nets.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"

namespace trainyard::models {
namespace {

const Tensor& image_input(std::string_view model, const Batch& batch) {
  auto it = batch.features.find("image");
  if (it == batch.features.end()) {
    throw InvalidArgument(std::string(model) +
                          ": the batch has no 'image'; an image classifier needs images f32 "
                          "[batch, height, width, channels] (ImageClassificationReader with "
                          "image_classification_preprocessing)");
  }
  if (it->second.shape().rank() != 4 || it->second.dtype() != DType::kF32) {
    throw InvalidArgument(std::string(model) + ": 'image' is " + it->second.description() +
                          "; expected f32 [batch, height, width, channels]");
  }
  return it->second;
}

int64_t checked_num_classes(std::string_view model, const ModelContext& ctx) {
  if (ctx.num_classes() <= 0) {
    throw InvalidArgument(std::string(model) + ": num_classes is " +
                          std::to_string(ctx.num_classes()) + "; expected > 0");
  }
  return ctx.num_classes();
}

double non_negative(std::string_view model, const Options& options, const char* name) {
  const double v = options.get_float(name);
  if (!(v >= 0.0)) {
    throw InvalidArgument(std::string(model) + ": " + name + " is " + option_value_to_string(v) +
                          "; expected >= 0");
  }
  return v;
}

double probability(std::string_view model, const Options& options, const char* name) {
  const double v = options.get_float(name);
  if (!(v > 0.0 && v <= 1.0)) {
    throw InvalidArgument(std::string(model) + ": " + name + " is " + option_value_to_string(v) +
                          "; expected (0, 1]");
  }
  return v;
}

constexpr std::array<OptionSpec, 2> kLossOptions{{
    {"label_smoothing", OptionType::kFloat, "0.0",
     "train_image_classifier's --label_smoothing: labels * (1 - s) + s / num_classes"},
    {"quantize_delay", OptionType::kInt, "-1",
     "train_image_classifier's --quantize_delay: quantization-aware training from this step on "
     "(contrib.quantize's quant_delay), and quantized evaluation and export; -1: none"},
}};

// train_image_classifier.py's --quantize_delay: with a delay >= 0 it calls
// contrib.quantize.create_training_graph(quant_delay=delay) (8 bits), and eval_image_classifier.py
// with --quantize create_eval_graph(). Here the net's layers are fake-quantized as
// trainyard/pkg/layers/quantize.h places it in every pass: in training from the delay-th step
// on, out of training (evaluation, prediction, export) with the learned ranges.
class ClassifierQuantization {
 public:
  ClassifierQuantization(std::string_view model, const Options& options) {
    const int64_t delay = options.get_int("quantize_delay");
    if (delay < -1) {
      throw InvalidArgument(std::string(model) + ": quantize_delay is " + std::to_string(delay) +
                            "; expected -1 (no quantization) or a step >= 0");
    }
    if (delay >= 0) {
      layers::QuantizeOptions q;
      q.delay = delay;
      options_ = q;
    }
  }

  // Turns the quantization on for `root`'s pass, fake_quantization_step counted once a step.
  void apply(layers::VariableScope& root, const ModelContext& ctx, Mode mode) {
    if (!options_) return;
    root.set_quantize(options_,
                      layers::counts_quantization_step(step_seed_, ctx.seed(), is_training(mode)));
  }

 private:
  std::optional<layers::QuantizeOptions> options_;
  std::optional<uint64_t> step_seed_;
};

// The predictions and, with labels, the loss of `logits` [B, num_classes].
ModelOutput classifier_output(const Tensor& logits, const Batch& batch, Mode mode,
                              double label_smoothing) {
  ModelOutput out;
  out.predictions = ops::softmax(logits, 1);
  if (mode == Mode::kPredict || !batch.labels.defined()) return out;
  if (batch.labels.shape() != logits.shape()) {
    throw InvalidArgument("image classifier: the labels are " + batch.labels.description() +
                          " but the logits are " + logits.description() +
                          "; one-hot labels over num_classes are expected");
  }
  Tensor labels = batch.labels;
  if (label_smoothing > 0.0) {
    const double classes = static_cast<double>(logits.shape()[1]);
    labels = ops::add(ops::mul(labels, 1.0 - label_smoothing), label_smoothing / classes);
  }
  Tensor per_example =
      ops::neg(ops::reduce_sum(ops::mul(labels, ops::log_softmax(logits, 1)), {1}));
  out.loss = ops::reduce_mean(per_example);
  return out;
}

// ---------------------------------------------------------------------------------------------

class Lenet final : public BaseModel {
 public:
  static constexpr auto kOptions = join_options(
      std::array<OptionSpec, 2>{{
          {"dropout_keep_prob", OptionType::kFloat, "0.5", "keep_prob of dropout3"},
          {"weight_decay", OptionType::kFloat, "0.0", "lenet_arg_scope's weight_decay"},
      }},
      kLossOptions);

  explicit Lenet(const Options& options)
      : label_smoothing_(non_negative("lenet", options, "label_smoothing")),
        quantization_("lenet", options) {
    options_.dropout_keep_prob = probability("lenet", options, "dropout_keep_prob");
    options_.weight_decay = non_negative("lenet", options, "weight_decay");
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    const Tensor& images = image_input("lenet", batch);
    nets::LenetOptions o = options_;
    o.num_classes = checked_num_classes("lenet", ctx);
    layers::VariableScope root(ctx, mode);
    quantization_.apply(root, ctx, mode);
    return classifier_output(nets::lenet(root, images, o).net, batch, mode, label_smoothing_);
  }

 private:
  nets::LenetOptions options_;
  double label_smoothing_;
  ClassifierQuantization quantization_;
};

// ---------------------------------------------------------------------------------------------

constexpr std::array<OptionSpec, 6> kResnetOptions{{
    {"weight_decay", OptionType::kFloat, "0.0001", "resnet_arg_scope's weight_decay"},
    {"batch_norm_decay", OptionType::kFloat, "0.997", "resnet_arg_scope's batch_norm_decay"},
    {"batch_norm_epsilon", OptionType::kFloat, "1e-5", "resnet_arg_scope's batch_norm_epsilon"},
    {"output_stride", OptionType::kInt, "0", "atrous output stride; 0: none"},
    {"head", OptionType::kString, "logits",
     "logits: slim's <scope>/logits 1x1 conv; fully_connected: the walkthrough's "
     "Predict/logits on the pooled features"},
    {"scope", OptionType::kString, "", "variable scope; empty: the class name"},
}};

// The ResNet family: blocks from the class or its options, the head as options say.
class ResnetClassifier : public BaseModel {
 public:
  ResnetClassifier(std::string name, std::vector<nets::ResnetBlock> blocks, nets::ResnetRoot root,
                   const Options& options)
      : name_(std::move(name)),
        blocks_(std::move(blocks)),
        label_smoothing_(non_negative(name_, options, "label_smoothing")),
        quantization_(name_, options) {
    options_.root = root;
    options_.weight_decay = non_negative(name_, options, "weight_decay");
    options_.batch_norm_decay = options.get_float("batch_norm_decay");
    if (!(options_.batch_norm_decay >= 0.0 && options_.batch_norm_decay <= 1.0)) {
      throw InvalidArgument(name_ + ": batch_norm_decay is " +
                            option_value_to_string(options_.batch_norm_decay) +
                            "; expected [0, 1]");
    }
    options_.batch_norm_epsilon = options.get_float("batch_norm_epsilon");
    if (!(options_.batch_norm_epsilon > 0.0)) {
      throw InvalidArgument(name_ + ": batch_norm_epsilon must be > 0");
    }
    const int64_t output_stride = options.get_int("output_stride");
    if (output_stride < 0) throw InvalidArgument(name_ + ": output_stride must be >= 0");
    if (output_stride > 0) options_.output_stride = output_stride;
    const std::string& head = options.get_string("head");
    if (head != "logits" && head != "fully_connected") {
      throw InvalidArgument(name_ + ": head is '" + head + "'; expected logits or fully_connected");
    }
    fully_connected_head_ = head == "fully_connected";
    options_.scope = options.get_string("scope").empty() ? name_ : options.get_string("scope");
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    const Tensor& images = image_input(name_, batch);
    const int64_t num_classes = checked_num_classes(name_, ctx);
    layers::VariableScope root(ctx, mode);
    quantization_.apply(root, ctx, mode);
    nets::ResnetV1Options o = options_;
    o.num_classes = fully_connected_head_ ? 0 : num_classes;
    Tensor net = nets::resnet_v1(root, images, blocks_, o).net;
    if (fully_connected_head_) {
      // resnet_v1_50(num_classes=None) -> tf.squeeze(net, [1, 2]) -> fully_connected.
      if (net.shape()[1] != 1 || net.shape()[2] != 1) {
        throw InvalidArgument(name_ + ": head fully_connected needs pooled features; got " +
                              net.description());
      }
      net = ops::reshape(net, Shape{net.shape()[0], net.shape()[3]});
      layers::FullyConnectedOptions fc;
      fc.activation_fn = layers::ActivationFn::none();
      fc.scope = "Predict/logits";
      net = layers::fully_connected(root, net, num_classes, fc);
    }
    return classifier_output(net, batch, mode, label_smoothing_);
  }

 private:
  std::string name_;
  std::vector<nets::ResnetBlock> blocks_;
  nets::ResnetV1Options options_;
  double label_smoothing_;
  ClassifierQuantization quantization_;
  bool fully_connected_head_ = false;
};

template <int kDepth>
class ResnetV1Depth final : public ResnetClassifier {
 public:
  static constexpr auto kOptions = join_options(kResnetOptions, kLossOptions);
  explicit ResnetV1Depth(const Options& options)
      : ResnetClassifier("resnet_v1_" + std::to_string(kDepth), nets::resnet_v1_blocks(kDepth),
                         nets::ResnetRoot::kImagenet, options) {}
};

std::vector<nets::ResnetBlock> blocks_from_options(const Options& options) {
  const std::vector<int64_t>& depths = options.get_int_list("base_depths");
  const std::vector<int64_t>& units = options.get_int_list("num_units");
  const std::vector<int64_t>& strides = options.get_int_list("strides");
  if (depths.empty() || depths.size() != units.size() || depths.size() != strides.size()) {
    throw InvalidArgument(
        "resnet_v1: base_depths, num_units and strides must be lists of the same, non-zero "
        "length (one entry per block)");
  }
  const std::string& unit = options.get_string("unit");
  if (unit != "bottleneck" && unit != "basic") {
    throw InvalidArgument("resnet_v1: unit is '" + unit + "'; expected bottleneck or basic");
  }
  std::vector<nets::ResnetBlock> blocks;
  for (std::size_t b = 0; b < depths.size(); ++b) {
    if (depths[b] <= 0 || units[b] <= 0 || strides[b] <= 0) {
      throw InvalidArgument("resnet_v1: block " + std::to_string(b + 1) +
                            " has a non-positive base depth, unit count or stride");
    }
    nets::ResnetBlock block =
        nets::resnet_v1_block("block" + std::to_string(b + 1), depths[b], units[b], strides[b]);
    if (unit == "basic") {
      block.kind = nets::ResnetUnitKind::kBasic;
      for (nets::ResnetUnit& u : block.units) {
        u.depth = depths[b];
        u.depth_bottleneck = 0;
      }
    }
    blocks.push_back(std::move(block));
  }
  return blocks;
}

nets::ResnetRoot root_from_options(const Options& options) {
  const std::string& root = options.get_string("root");
  if (root == "imagenet") return nets::ResnetRoot::kImagenet;
  if (root == "cifar") return nets::ResnetRoot::kCifar;
  if (root == "none") return nets::ResnetRoot::kNone;
  throw InvalidArgument("resnet_v1: root is '" + root + "'; expected imagenet, cifar or none");
}

class ResnetV1 final : public ResnetClassifier {
 public:
  static constexpr auto kOptions = join_options(
      std::array<OptionSpec, 5>{{
          {"base_depths", OptionType::kIntList, "64,128,256,512",
           "per block: the bottleneck depth (output depth is 4x; a basic unit's depth)"},
          {"num_units", OptionType::kIntList, "3,4,6,3", "per block: the number of units"},
          {"strides", OptionType::kIntList, "2,2,2,1", "per block: the stride of its last unit"},
          {"unit", OptionType::kString, "bottleneck", "bottleneck (bottleneck_v1) or basic"},
          {"root", OptionType::kString, "imagenet",
           "imagenet (conv1 7x7/2 and pool1), cifar (conv1 3x3, 16) or none"},
      }},
      kResnetOptions, kLossOptions);
  explicit ResnetV1(const Options& options)
      : ResnetClassifier("resnet_v1", blocks_from_options(options), root_from_options(options),
                         options) {}
};

class Resnet20 final : public ResnetClassifier {
 public:
  static constexpr auto kOptions = join_options(kResnetOptions, kLossOptions);
  explicit Resnet20(const Options& options)
      : ResnetClassifier("resnet_20", nets::resnet_cifar_blocks(20), nets::ResnetRoot::kCifar,
                         options) {}
};

// ---------------------------------------------------------------------------------------------

class MobilenetV1 final : public BaseModel {
 public:
  static constexpr auto kOptions = join_options(
      std::array<OptionSpec, 9>{{
          {"depth_multiplier", OptionType::kFloat, "1.0", "channels of every layer times this"},
          {"min_depth", OptionType::kInt, "8", "the fewest channels of a layer"},
          {"dropout_keep_prob", OptionType::kFloat, "0.999", "keep_prob of Logits/Dropout_1b"},
          {"global_pool", OptionType::kBool, "false",
           "average over the whole map instead of the 7x7 AvgPool_1a"},
          {"use_explicit_padding", OptionType::kBool, "false", "fixed padding, then VALID"},
          {"weight_decay", OptionType::kFloat, "0.00004", "mobilenet_v1_arg_scope's weight_decay"},
          {"regularize_depthwise", OptionType::kBool, "false",
           "apply the weight decay to the depthwise weights too"},
          {"batch_norm_decay", OptionType::kFloat, "0.9997", "batch norm decay"},
          {"batch_norm_epsilon", OptionType::kFloat, "0.001", "batch norm epsilon"},
      }},
      kLossOptions);

  explicit MobilenetV1(const Options& options)
      : label_smoothing_(non_negative("mobilenet_v1", options, "label_smoothing")),
        quantization_("mobilenet_v1", options) {
    options_.depth_multiplier = options.get_float("depth_multiplier");
    if (!(options_.depth_multiplier > 0.0)) {
      throw InvalidArgument("mobilenet_v1: depth_multiplier must be > 0");
    }
    options_.min_depth = options.get_int("min_depth");
    if (options_.min_depth <= 0) throw InvalidArgument("mobilenet_v1: min_depth must be > 0");
    options_.dropout_keep_prob = probability("mobilenet_v1", options, "dropout_keep_prob");
    options_.global_pool = options.get_bool("global_pool");
    options_.use_explicit_padding = options.get_bool("use_explicit_padding");
    options_.weight_decay = non_negative("mobilenet_v1", options, "weight_decay");
    options_.regularize_depthwise = options.get_bool("regularize_depthwise");
    options_.batch_norm_decay = options.get_float("batch_norm_decay");
    options_.batch_norm_epsilon = options.get_float("batch_norm_epsilon");
    if (!(options_.batch_norm_decay >= 0.0 && options_.batch_norm_decay <= 1.0) ||
        !(options_.batch_norm_epsilon > 0.0)) {
      throw InvalidArgument(
          "mobilenet_v1: batch_norm_decay must be in [0, 1] and "
          "batch_norm_epsilon > 0");
    }
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    const Tensor& images = image_input("mobilenet_v1", batch);
    nets::MobilenetV1Options o = options_;
    o.num_classes = checked_num_classes("mobilenet_v1", ctx);
    layers::VariableScope root(ctx, mode);
    quantization_.apply(root, ctx, mode);
    return classifier_output(nets::mobilenet_v1(root, images, o).net, batch, mode,
                             label_smoothing_);
  }

 private:
  nets::MobilenetV1Options options_;
  double label_smoothing_;
  ClassifierQuantization quantization_;
};

// ---------------------------------------------------------------------------------------------

class MobilenetV2 final : public BaseModel {
 public:
  static constexpr auto kOptions = join_options(
      std::array<OptionSpec, 8>{{
          {"depth_multiplier", OptionType::kFloat, "1.0", "channels of every layer times this"},
          {"min_depth", OptionType::kInt, "8", "the fewest channels of a layer"},
          {"finegrain_classification_mode", OptionType::kBool, "false",
           "keep Conv_1's 1280 channels below depth multiplier 1"},
          {"dropout_keep_prob", OptionType::kFloat, "0.8", "keep_prob of Logits/Dropout"},
          {"use_explicit_padding", OptionType::kBool, "false", "fixed padding, then VALID"},
          {"weight_decay", OptionType::kFloat, "0.00004", "training_scope's weight_decay"},
          {"batch_norm_decay", OptionType::kFloat, "0.997", "training_scope's bn_decay"},
          {"batch_norm_epsilon", OptionType::kFloat, "0.001", "batch norm epsilon"},
      }},
      kLossOptions);

  explicit MobilenetV2(const Options& options)
      : label_smoothing_(non_negative("mobilenet_v2", options, "label_smoothing")),
        quantization_("mobilenet_v2", options) {
    options_.depth_multiplier = options.get_float("depth_multiplier");
    if (!(options_.depth_multiplier > 0.0 && options_.depth_multiplier <= 16.0)) {
      throw InvalidArgument("mobilenet_v2: depth_multiplier must be in (0, 16]");
    }
    options_.min_depth = options.get_int("min_depth");
    if (options_.min_depth <= 0) throw InvalidArgument("mobilenet_v2: min_depth must be > 0");
    options_.finegrain_classification_mode = options.get_bool("finegrain_classification_mode");
    options_.dropout_keep_prob = probability("mobilenet_v2", options, "dropout_keep_prob");
    options_.use_explicit_padding = options.get_bool("use_explicit_padding");
    options_.weight_decay = non_negative("mobilenet_v2", options, "weight_decay");
    options_.batch_norm_decay = options.get_float("batch_norm_decay");
    options_.batch_norm_epsilon = options.get_float("batch_norm_epsilon");
    if (!(options_.batch_norm_decay >= 0.0 && options_.batch_norm_decay <= 1.0) ||
        !(options_.batch_norm_epsilon > 0.0)) {
      throw InvalidArgument(
          "mobilenet_v2: batch_norm_decay must be in [0, 1] and "
          "batch_norm_epsilon > 0");
    }
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    const Tensor& images = image_input("mobilenet_v2", batch);
    nets::MobilenetV2Options o = options_;
    o.num_classes = checked_num_classes("mobilenet_v2", ctx);
    layers::VariableScope root(ctx, mode);
    quantization_.apply(root, ctx, mode);
    return classifier_output(nets::mobilenet_v2(root, images, o).net, batch, mode,
                             label_smoothing_);
  }

 private:
  nets::MobilenetV2Options options_;
  double label_smoothing_;
  ClassifierQuantization quantization_;
};

// ---------------------------------------------------------------------------------------------

// mobilenet_v3_large / mobilenet_v3_small: mobilenet_v3.large / .small.
template <nets::MobilenetV3Variant kVariant>
class MobilenetV3 final : public BaseModel {
 public:
  static constexpr const char* kName =
      kVariant == nets::MobilenetV3Variant::kLarge ? "mobilenet_v3_large" : "mobilenet_v3_small";
  static constexpr auto kOptions = join_options(
      std::array<OptionSpec, 7>{{
          {"depth_multiplier", OptionType::kFloat, "1.0", "channels of every layer times this"},
          {"min_depth", OptionType::kInt, "8", "the fewest channels of a layer"},
          {"finegrain_classification_mode", OptionType::kBool, "false",
           "keep Conv_2's channels (1280 large, 1024 small) whatever the depth multiplier"},
          {"dropout_keep_prob", OptionType::kFloat, "0.8", "keep_prob of Logits/Dropout"},
          {"weight_decay", OptionType::kFloat, "0.00004", "training_scope's weight_decay"},
          {"batch_norm_decay", OptionType::kFloat, "0.997", "training_scope's bn_decay"},
          {"batch_norm_epsilon", OptionType::kFloat, "0.001", "batch norm epsilon"},
      }},
      kLossOptions);

  explicit MobilenetV3(const Options& options)
      : label_smoothing_(non_negative(kName, options, "label_smoothing")),
        quantization_(kName, options) {
    const std::string name = kName;
    options_.variant = kVariant;
    options_.depth_multiplier = options.get_float("depth_multiplier");
    if (!(options_.depth_multiplier > 0.0 && options_.depth_multiplier <= 16.0)) {
      throw InvalidArgument(name + ": depth_multiplier must be in (0, 16]");
    }
    options_.min_depth = options.get_int("min_depth");
    if (options_.min_depth <= 0) throw InvalidArgument(name + ": min_depth must be > 0");
    options_.finegrain_classification_mode = options.get_bool("finegrain_classification_mode");
    options_.dropout_keep_prob = probability(kName, options, "dropout_keep_prob");
    options_.weight_decay = non_negative(kName, options, "weight_decay");
    options_.batch_norm_decay = options.get_float("batch_norm_decay");
    options_.batch_norm_epsilon = options.get_float("batch_norm_epsilon");
    if (!(options_.batch_norm_decay >= 0.0 && options_.batch_norm_decay <= 1.0) ||
        !(options_.batch_norm_epsilon > 0.0)) {
      throw InvalidArgument(name +
                            ": batch_norm_decay must be in [0, 1] and batch_norm_epsilon > 0");
    }
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    const Tensor& images = image_input(kName, batch);
    nets::MobilenetV3Options o = options_;
    o.num_classes = checked_num_classes(kName, ctx);
    layers::VariableScope root(ctx, mode);
    quantization_.apply(root, ctx, mode);
    return classifier_output(nets::mobilenet_v3(root, images, o).net, batch, mode,
                             label_smoothing_);
  }

 private:
  nets::MobilenetV3Options options_;
  double label_smoothing_;
  ClassifierQuantization quantization_;
};

using MobilenetV3Large = MobilenetV3<nets::MobilenetV3Variant::kLarge>;
using MobilenetV3Small = MobilenetV3<nets::MobilenetV3Variant::kSmall>;

constexpr std::array<OptionSpec, 8> kInceptionOptions{{
    {"depth_multiplier", OptionType::kFloat, "1.0", "channels of every layer times this"},
    {"min_depth", OptionType::kInt, "16", "the fewest channels of a layer"},
    {"dropout_keep_prob", OptionType::kFloat, "0.8", "keep_prob of Logits/Dropout_1b"},
    {"global_pool", OptionType::kBool, "false",
     "average over the whole map instead of the fixed AvgPool_1a"},
    {"weight_decay", OptionType::kFloat, "0.00004", "inception_arg_scope's weight_decay"},
    {"use_batch_norm", OptionType::kBool, "true", "batch norm after each convolution"},
    {"batch_norm_decay", OptionType::kFloat, "0.9997", "batch norm decay"},
    {"batch_norm_epsilon", OptionType::kFloat, "0.001", "batch norm epsilon"},
}};

// The options every Inception net takes, checked, into `o`.
template <typename NetOptions>
void read_inception_options(std::string_view model, const Options& options, NetOptions& o) {
  const std::string m(model);
  o.depth_multiplier = options.get_float("depth_multiplier");
  if (!(o.depth_multiplier > 0.0 && o.depth_multiplier <= 16.0)) {
    throw InvalidArgument(m + ": depth_multiplier is " +
                          option_value_to_string(o.depth_multiplier) + "; expected (0, 16]");
  }
  o.min_depth = options.get_int("min_depth");
  if (o.min_depth <= 0) {
    throw InvalidArgument(m + ": min_depth is " + std::to_string(o.min_depth) + "; expected > 0");
  }
  o.dropout_keep_prob = probability(model, options, "dropout_keep_prob");
  o.global_pool = options.get_bool("global_pool");
  o.arg_scope.weight_decay = non_negative(model, options, "weight_decay");
  o.arg_scope.use_batch_norm = options.get_bool("use_batch_norm");
  o.arg_scope.batch_norm_decay = options.get_float("batch_norm_decay");
  if (!(o.arg_scope.batch_norm_decay >= 0.0 && o.arg_scope.batch_norm_decay <= 1.0)) {
    throw InvalidArgument(m + ": batch_norm_decay is " +
                          option_value_to_string(o.arg_scope.batch_norm_decay) +
                          "; expected [0, 1]");
  }
  o.arg_scope.batch_norm_epsilon = options.get_float("batch_norm_epsilon");
  if (!(o.arg_scope.batch_norm_epsilon > 0.0)) {
    throw InvalidArgument(m + ": batch_norm_epsilon is " +
                          option_value_to_string(o.arg_scope.batch_norm_epsilon) +
                          "; expected > 0");
  }
}

class InceptionV2 final : public BaseModel {
 public:
  static constexpr auto kOptions =
      join_options(kInceptionOptions,
                   std::array<OptionSpec, 1>{{
                       {"use_separable_conv", OptionType::kBool, "true",
                        "Conv2d_1a_7x7 as a separable convolution (else a plain 7x7)"},
                   }},
                   kLossOptions);

  explicit InceptionV2(const Options& options)
      : label_smoothing_(non_negative("inception_v2", options, "label_smoothing")),
        quantization_("inception_v2", options) {
    read_inception_options("inception_v2", options, options_);
    options_.use_separable_conv = options.get_bool("use_separable_conv");
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    const Tensor& images = image_input("inception_v2", batch);
    nets::InceptionV2Options o = options_;
    o.num_classes = checked_num_classes("inception_v2", ctx);
    layers::VariableScope root(ctx, mode);
    quantization_.apply(root, ctx, mode);
    return classifier_output(nets::inception_v2(root, images, o).net, batch, mode,
                             label_smoothing_);
  }

 private:
  nets::InceptionV2Options options_;
  double label_smoothing_;
  ClassifierQuantization quantization_;
};

class InceptionV3 final : public BaseModel {
 public:
  static constexpr auto kOptions =
      join_options(kInceptionOptions,
                   std::array<OptionSpec, 1>{{
                       {"create_aux_logits", OptionType::kBool, "true",
                        "the AuxLogits head on Mixed_6e, its loss weighted 0.4"},
                   }},
                   kLossOptions);

  explicit InceptionV3(const Options& options)
      : label_smoothing_(non_negative("inception_v3", options, "label_smoothing")),
        quantization_("inception_v3", options) {
    read_inception_options("inception_v3", options, options_);
    options_.create_aux_logits = options.get_bool("create_aux_logits");
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    const Tensor& images = image_input("inception_v3", batch);
    nets::InceptionV3Options o = options_;
    o.num_classes = checked_num_classes("inception_v3", ctx);
    layers::VariableScope root(ctx, mode);
    quantization_.apply(root, ctx, mode);
    const nets::NetOutput net = nets::inception_v3(root, images, o);
    ModelOutput out = classifier_output(net.net, batch, mode, label_smoothing_);
    const auto aux = net.end_points.find("AuxLogits");
    if (mode == Mode::kTrain && out.loss && aux != net.end_points.end()) {
      // train_image_classifier.py: softmax_cross_entropy(labels, AuxLogits, weights=0.4); the
      // evaluation's loss is the logits' alone.
      const Tensor aux_loss = *classifier_output(aux->second, batch, mode, label_smoothing_).loss;
      out.loss = ops::add(*out.loss, ops::mul(aux_loss, 0.4));
    }
    return out;
  }

 private:
  nets::InceptionV3Options options_;
  double label_smoothing_;
  ClassifierQuantization quantization_;
};

class InceptionResnetV2 final : public BaseModel {
 public:
  static constexpr auto kOptions = join_options(
      std::array<OptionSpec, 5>{{
          {"dropout_keep_prob", OptionType::kFloat, "0.8", "keep_prob of Logits/Dropout"},
          {"create_aux_logits", OptionType::kBool, "true",
           "the AuxLogits head on PreAuxLogits, its loss weighted 0.4"},
          {"weight_decay", OptionType::kFloat, "0.00004",
           "inception_resnet_v2_arg_scope's weight_decay (weights and biases)"},
          {"batch_norm_decay", OptionType::kFloat, "0.9997", "batch norm decay"},
          {"batch_norm_epsilon", OptionType::kFloat, "0.001", "batch norm epsilon"},
      }},
      kLossOptions);

  explicit InceptionResnetV2(const Options& options)
      : label_smoothing_(non_negative(kName, options, "label_smoothing")),
        quantization_(kName, options) {
    options_.dropout_keep_prob = probability(kName, options, "dropout_keep_prob");
    options_.create_aux_logits = options.get_bool("create_aux_logits");
    options_.weight_decay = non_negative(kName, options, "weight_decay");
    options_.batch_norm_decay = options.get_float("batch_norm_decay");
    if (!(options_.batch_norm_decay >= 0.0 && options_.batch_norm_decay <= 1.0)) {
      throw InvalidArgument(std::string(kName) + ": batch_norm_decay is " +
                            option_value_to_string(options_.batch_norm_decay) +
                            "; expected [0, 1]");
    }
    options_.batch_norm_epsilon = options.get_float("batch_norm_epsilon");
    if (!(options_.batch_norm_epsilon > 0.0)) {
      throw InvalidArgument(std::string(kName) + ": batch_norm_epsilon is " +
                            option_value_to_string(options_.batch_norm_epsilon) + "; expected > 0");
    }
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    const Tensor& images = image_input(kName, batch);
    nets::InceptionResnetV2Options o = options_;
    o.num_classes = checked_num_classes(kName, ctx);
    layers::VariableScope root(ctx, mode);
    quantization_.apply(root, ctx, mode);
    const nets::NetOutput net = nets::inception_resnet_v2(root, images, o);
    ModelOutput out = classifier_output(net.net, batch, mode, label_smoothing_);
    const auto aux = net.end_points.find("AuxLogits");
    if (mode == Mode::kTrain && out.loss && aux != net.end_points.end()) {
      // train_image_classifier.py: softmax_cross_entropy(labels, AuxLogits, weights=0.4).
      const Tensor aux_loss = *classifier_output(aux->second, batch, mode, label_smoothing_).loss;
      out.loss = ops::add(*out.loss, ops::mul(aux_loss, 0.4));
    }
    return out;
  }

 private:
  static constexpr const char* kName = "inception_resnet_v2";
  nets::InceptionResnetV2Options options_;
  double label_smoothing_;
  ClassifierQuantization quantization_;
};

}  // namespace
}  // namespace trainyard::models

#define TRAINYARD_IMAGE_CLASSIFIER_CLASSES(X)                                                      \
  X(model, lenet, trainyard::models::Lenet, "TF-Slim LeNet for 28x28 images (conv1..fc4)")         \
  X(model, resnet_v1_50, trainyard::models::ResnetV1Depth<50>, "TF-Slim ResNet v1, 50 layers")     \
  X(model, resnet_v1_101, trainyard::models::ResnetV1Depth<101>, "TF-Slim ResNet v1, 101 layers")  \
  X(model, resnet_v1_152, trainyard::models::ResnetV1Depth<152>, "TF-Slim ResNet v1, 152 layers")  \
  X(model, resnet_v1, trainyard::models::ResnetV1, "TF-Slim ResNet v1 with its blocks as options") \
  X(model, resnet_20, trainyard::models::Resnet20,                                                 \
    "CIFAR ResNet-20 (He et al.): basic units, 16/32/64 channels, 32x32 images")                   \
  X(model, mobilenet_v1, trainyard::models::MobilenetV1,                                           \
    "TF-Slim MobileNet v1 with depth_multiplier")                                                  \
  X(model, mobilenet_v2, trainyard::models::MobilenetV2,                                           \
    "TF-Slim MobileNet v2 with depth_multiplier")                                                  \
  X(model, mobilenet_v3_large, trainyard::models::MobilenetV3Large,                                \
    "TF-Slim MobileNet v3 (V3_LARGE) with depth_multiplier")                                       \
  X(model, mobilenet_v3_small, trainyard::models::MobilenetV3Small,                                \
    "TF-Slim MobileNet v3 (V3_SMALL) with depth_multiplier")                                       \
  X(model, inception_v2, trainyard::models::InceptionV2,                                           \
    "TF-Slim Inception v2 with depth_multiplier")                                                  \
  X(model, inception_v3, trainyard::models::InceptionV3,                                           \
    "TF-Slim Inception v3 with its AuxLogits head")                                                \
  X(model, inception_resnet_v2, trainyard::models::InceptionResnetV2,                              \
    "TF-Slim Inception-ResNet v2 with its AuxLogits head")
TRAINYARD_PLUGIN(image_classifiers, 0, 1, 0, TRAINYARD_IMAGE_CLASSIFIER_CLASSES)
