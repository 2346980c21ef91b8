// TF-Slim's image networks (tensorflow/models research/slim/nets and tf_slim.nets), built from
// pkg/layers with slim's scopes, variable names, paddings, strides and arg_scope defaults, so
// checkpoints TensorFlow wrote for the originals restore by name and give the same outputs:
//
//   lenet          nets/lenet.py: conv1 5x5x32, pool1, conv2 5x5x64, pool2, flatten, fc3 1024,
//                  dropout3, fc4 (logits); lenet_arg_scope (truncated normal 0.1, relu).
//   resnet_v1      nets/resnet_v1.py with resnet_utils: conv1 7x7/2 (conv2d_same) and pool1
//                  3x3/2 SAME, then blocks of bottleneck_v1 units (the stride on the 3x3
//                  conv2, on the last unit of a block), global average pool5, logits 1x1 conv;
//                  resnet_arg_scope (He initialization, weight decay 1e-4, batch norm with
//                  gamma, decay 0.997, epsilon 1e-5). Also the basic two-3x3 unit and the
//                  CIFAR root (one 3x3 conv, no pooling) of He et al.'s ResNet-20, in the same
//                  naming scheme.
//   mobilenet_v1   nets/mobilenet_v1.py: Conv2d_0 then 13 depthwise-separable pairs
//                  Conv2d_<i>_depthwise / Conv2d_<i>_pointwise, depth(d) = max(int(d *
//                  depth_multiplier), min_depth); Logits/AvgPool_1a (or global pool),
//                  Logits/Dropout_1b, Logits/Conv2d_1c_1x1; mobilenet_v1_arg_scope (truncated
//                  normal 0.09, relu6, batch norm with gamma, decay 0.9997, epsilon 0.001).
//   mobilenet_v2   nets/mobilenet/mobilenet_v2.py with mobilenet.py and conv_blocks.py: V2_DEF's
//                  Conv (3x3/2, 32), 17 expanded_conv blocks (expand 1x1 by 6, depthwise 3x3,
//                  linear project 1x1, residual where stride 1 and depth unchanged) and Conv_1
//                  (1x1, 1280), end points layer_1 .. layer_19 and layer_<i>/expansion_output,
//                  /depthwise_output, /output; depths _make_divisible(d * multiplier, 8,
//                  min_depth); Logits/Dropout (global pool first), Logits/Conv2d_1c_1x1;
//                  training_scope (truncated normal 0.09, weight decay 0.00004 on conv2d only,
//                  relu6, batch norm with gamma, decay 0.997, epsilon 0.001).
//   mobilenet_v3   nets/mobilenet/mobilenet_v3.py (V3_LARGE, V3_SMALL) with mobilenet.py and
//                  conv_blocks.py: Conv (3x3/2, 16, hard_swish), expanded_conv blocks with 3x3 or
//                  5x5 depthwise kernels, relu or hard_swish inside and squeeze_excite on some,
//                  Conv_1 (1x1, hard_swish), a 1x1 average pool (layer_18 / layer_14) and Conv_2
//                  (1x1, biases, no batch norm, hard_swish); Logits as mobilenet_v2's.
//   inception_v2   nets/inception_v2.py: Conv2d_1a_7x7 (separable, depthwise multiplier
//                  min(depth(64) / 3, 8), or a plain 7x7 conv), MaxPool_2a_3x3, Conv2d_2b_1x1,
//                  Conv2d_2c_3x3, MaxPool_3a_3x3, the inception modules Mixed_3b .. Mixed_5c
//                  (Branch_<k>/...); depth(d) = max(int(d * depth_multiplier), min_depth);
//                  Logits/AvgPool_1a_<k>x<k> (7x7, smaller for small inputs), Dropout_1b,
//                  Conv2d_1c_1x1.
//   inception_v3   nets/inception_v3.py: Conv2d_1a_3x3 .. MaxPool_5a_3x3 (VALID), Mixed_5b ..
//                  Mixed_7c; AuxLogits on Mixed_6e (AvgPool_1a_5x5, Conv2d_1b_1x1,
//                  Conv2d_2a_<k>x<k>, Conv2d_2b_1x1) and Logits (AvgPool_1a_<k>x<k> of 8x8,
//                  Dropout_1b, Conv2d_1c_1x1).
//                  Both under inception_utils.inception_arg_scope (He initialization, weight
//                  decay 0.00004 on conv2d, relu, batch norm without gamma, decay 0.9997,
//                  epsilon 0.001), which covers conv2d only: inception_v2's separable
//                  Conv2d_1a_7x7 keeps slim's defaults there (relu, biases, no batch norm).
//
// Each takes NHWC f32 images and returns the net's output and its end points, named as slim
// names them. With num_classes 0 a net stops before its logits, as slim's num_classes=None.
// Training or inference (batch norm, dropout) follows the scope's mode.
#ifndef TRAINYARD_PKG_NETS_NETS_H_
#define TRAINYARD_PKG_NETS_NETS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/tensor.h"

namespace trainyard::nets {

struct NetOutput {
  Tensor net;  // logits [B, num_classes] (squeezed), or the last feature map without classes
  std::map<std::string, Tensor> end_points;
};

// ---------------------------------------------------------------------------------------------
// LeNet

struct LenetOptions {
  int64_t num_classes = 10;  // 0: stop after fc3
  double dropout_keep_prob = 0.5;
  double weight_decay = 0.0;
  std::string scope = "LeNet";
};

NetOutput lenet(layers::VariableScope& root, const Tensor& images, const LenetOptions& options);

// ---------------------------------------------------------------------------------------------
// ResNet v1

enum class ResnetUnitKind {
  kBottleneck,  // "bottleneck_v1": 1x1 depth_bottleneck, 3x3 (strided), 1x1 depth
  kBasic,       // "basic_v1": 3x3 depth (strided), 3x3 depth
};

struct ResnetUnit {
  int64_t depth = 0;
  int64_t depth_bottleneck = 0;  // bottleneck units only
  int64_t stride = 1;
};

struct ResnetBlock {
  std::string scope;  // "block1"
  ResnetUnitKind kind = ResnetUnitKind::kBottleneck;
  std::vector<ResnetUnit> units;
};

// resnet_v1_block: num_units bottleneck units of depth 4 * base_depth, the last with `stride`.
ResnetBlock resnet_v1_block(std::string scope, int64_t base_depth, int64_t num_units,
                            int64_t stride);
// The blocks of resnet_v1_50, _101, _152 and _200. Throws InvalidArgument for another depth.
std::vector<ResnetBlock> resnet_v1_blocks(int64_t depth);
// He et al.'s CIFAR ResNet-(6n+2): three blocks of n basic units, 16, 32 and 64 channels.
std::vector<ResnetBlock> resnet_cifar_blocks(int64_t depth);

enum class ResnetRoot {
  kImagenet,  // conv1 7x7/2 64 (conv2d_same) and pool1 3x3/2 SAME
  kCifar,     // conv1 3x3/1 16
  kNone,      // include_root_block=False
};

struct ResnetV1Options {
  int64_t num_classes = 0;  // 0: no logits, as num_classes=None
  bool global_pool = true;
  std::optional<int64_t> output_stride;  // atrous convolution past it
  // Each block's end point before its stride: the last unit runs at stride 1 and the block's
  // output is subsampled after it (as slim's resnet_v1 with store_non_strided_activations, which
  // the Object Detection API's FPN extractors use).
  bool store_non_strided_activations = false;
  ResnetRoot root = ResnetRoot::kImagenet;
  bool spatial_squeeze = true;
  // resnet_arg_scope
  double weight_decay = 0.0001;
  double batch_norm_decay = 0.997;
  double batch_norm_epsilon = 1e-5;
  bool batch_norm_scale = true;
  // The convolutions' initializer and activation instead of arg_scope's He initializer and relu
  // (a detection config's conv_hyperparams with override_base_feature_extractor_hyperparams);
  // the relu after each unit's sum stays.
  std::optional<Initializer> weights_initializer;
  std::optional<layers::ActivationFn> activation_fn;
  // arg_scope([batch_norm], is_training=...): unset follows the scope's mode; false runs batch
  // norm on its moving statistics while training (the Object Detection API's Faster R-CNN
  // extractors with batch_norm_trainable false).
  std::optional<bool> batch_norm_is_training;
  std::string scope = "resnet_v1";
};

NetOutput resnet_v1(layers::VariableScope& root, const Tensor& images,
                    const std::vector<ResnetBlock>& blocks, const ResnetV1Options& options);

// resnet_utils.conv2d_same: SAME padding at stride 1; beyond, explicit symmetric padding of the
// effective kernel (pad_total // 2 before) and VALID, so the result does not depend on the
// input's size parity.
Tensor conv2d_same(layers::VariableScope& scope, const Tensor& inputs, int64_t num_outputs,
                   int64_t kernel_size, int64_t stride, int64_t rate,
                   layers::Conv2DOptions options);

// ---------------------------------------------------------------------------------------------
// MobileNet v1

struct MobilenetV1Options {
  int64_t num_classes = 1000;  // 0: no logits
  double depth_multiplier = 1.0;
  int64_t min_depth = 8;
  double dropout_keep_prob = 0.999;
  bool global_pool = false;
  std::string final_endpoint = "Conv2d_13_pointwise";
  std::optional<int64_t> output_stride;  // 8, 16 or 32
  bool use_explicit_padding = false;     // fixed padding and VALID instead of SAME
  bool spatial_squeeze = true;
  // mobilenet_v1_arg_scope
  double weight_decay = 0.00004;
  double stddev = 0.09;
  // Instead of the truncated normal of stddev and relu6 (conv_hyperparams overriding the arg
  // scope; not the logits).
  std::optional<Initializer> weights_initializer;
  std::optional<layers::ActivationFn> activation_fn;
  bool regularize_depthwise = false;
  double batch_norm_decay = 0.9997;
  double batch_norm_epsilon = 0.001;
  std::optional<bool> batch_norm_is_training;  // as ResnetV1Options'
  // conv_defs changed in depth only: Conv2d_<i> -> its depth before the multiplier (the API's
  // FPN-lite extractors make Conv2d_12 512 and Conv2d_13 256).
  std::map<int64_t, int64_t> depths;
  std::string scope = "MobilenetV1";
};

// The convolutional base, up to final_endpoint; end points "Conv2d_0" .. "Conv2d_13_pointwise".
// Throws InvalidArgument for an unknown final_endpoint or a depth_multiplier <= 0.
NetOutput mobilenet_v1_base(layers::VariableScope& root, const Tensor& images,
                            const MobilenetV1Options& options);
NetOutput mobilenet_v1(layers::VariableScope& root, const Tensor& images,
                       const MobilenetV1Options& options);

// ---------------------------------------------------------------------------------------------
// MobileNet v2

struct MobilenetV2Options {
  int64_t num_classes = 1001;  // 0: no logits (the global pool is the output)
  double depth_multiplier = 1.0;
  int64_t min_depth = 8;  // mobilenet.depth_multiplier's min_depth
  int64_t divisible_by = 8;
  // Keeps Conv_1 at 1280 channels for a depth_multiplier below 1.
  bool finegrain_classification_mode = false;
  std::string final_endpoint = "layer_19";  // "layer_1" .. "layer_19"
  // Conv_1's depth before the multiplier instead of 1280 (the API's FPN-lite extractor: 256).
  std::optional<int64_t> last_layer_depth;
  bool use_explicit_padding = false;  // fixed padding and VALID instead of SAME
  // tf.keras.applications' MobileNetV2 as the API's Keras SSD extractor builds it: a block has
  // its residual sum only where its input's depth equals its nominal projection depth,
  // _make_divisible(int(filters * depth_multiplier), 8), which the application decides before
  // min_depth raises the convolution (with depth_multiplier 0.25 and min_depth 16, blocks 2, 4
  // and 5 have none).
  bool keras_residuals = false;
  double dropout_keep_prob = 0.8;
  // training_scope
  double weight_decay = 0.00004;
  double stddev = 0.09;
  // Instead of the truncated normal of stddev (conv_hyperparams overriding training_scope; not
  // the logits). V2_DEF's own defaults keep relu6 and batch norm whatever the arg scope says.
  std::optional<Initializer> weights_initializer;
  // The depthwise weights' own, where they do not take the convolutions' (the API's Keras
  // MobileNetV2 under conv_hyperparams: its DepthwiseConv2D keeps Keras' glorot_uniform).
  std::optional<Initializer> depthwise_initializer;
  bool regularize_depthwise = false;  // training_scope leaves separable_conv2d unregularized
  double batch_norm_decay = 0.997;
  double batch_norm_epsilon = 0.001;
  std::optional<bool> batch_norm_is_training;  // as ResnetV1Options'
  std::string scope = "MobilenetV2";
};

// mobilenet._make_divisible: `value` rounded to the nearest multiple of `divisor`, at least
// `min_value`, and never below 90% of `value`.
int64_t make_divisible(double value, int64_t divisor, int64_t min_value);

// The convolutional base, up to final_endpoint. Throws InvalidArgument for an unknown
// final_endpoint or a depth_multiplier <= 0.
NetOutput mobilenet_v2_base(layers::VariableScope& root, const Tensor& images,
                            const MobilenetV2Options& options);
NetOutput mobilenet_v2(layers::VariableScope& root, const Tensor& images,
                       const MobilenetV2Options& options);

// ---------------------------------------------------------------------------------------------
// MobileNet v3

enum class MobilenetV3Variant {
  kLarge,  // V3_LARGE: layer_1 .. layer_19 (Conv, expanded_conv .. _14, Conv_1, pool, Conv_2)
  kSmall,  // V3_SMALL: layer_1 .. layer_15 (Conv, expanded_conv .. _10, Conv_1, pool, Conv_2)
};

struct MobilenetV3Options {
  MobilenetV3Variant variant = MobilenetV3Variant::kLarge;
  int64_t num_classes = 1001;  // 0: no logits (the global pool is the output)
  double depth_multiplier = 1.0;
  int64_t min_depth = 8;  // mobilenet.depth_multiplier's min_depth
  int64_t divisible_by = 8;
  // Keeps Conv_2 at its full depth (1280 or 1024) whatever the depth_multiplier.
  bool finegrain_classification_mode = false;
  // The API's V3_LARGE_DETECTION / V3_SMALL_DETECTION: the last three blocks and Conv_1 at half
  // their depth (layer_14 .. layer_17 of large, layer_10 .. layer_13 of small).
  bool detection = false;
  std::string final_endpoint;  // empty: the last layer
  // mobilenet_base's: each layer's input padded as for its kernel (conv_blocks._fixed_padding),
  // the plain convolutions then VALID but the blocks still SAME, so the maps grow by k - 1 at
  // every stride-1 block (as the API's own does); the pooling layer refuses it.
  bool use_explicit_padding = false;
  double dropout_keep_prob = 0.8;
  // training_scope
  double weight_decay = 0.00004;
  double stddev = 0.09;
  // Instead of the truncated normal of stddev (conv_hyperparams overriding training_scope; not
  // the logits). The conv_defs' own activations and batch norm stay.
  std::optional<Initializer> weights_initializer;
  bool regularize_depthwise = false;  // training_scope leaves separable_conv2d unregularized
  double batch_norm_decay = 0.997;
  double batch_norm_epsilon = 0.001;
  std::optional<bool> batch_norm_is_training;  // as ResnetV1Options'
  std::string scope = "MobilenetV3";
};

// mobilenet_v3.hard_swish: x * relu6(x + 3) / 6.
Tensor hard_swish(const Tensor& x);

// The convolutional base, up to final_endpoint, with end points layer_<i> and, for the blocks,
// layer_<i>/expansion_output (when expanded), /depthwise_output and /output. Throws
// InvalidArgument for an unknown final_endpoint, a depth_multiplier <= 0, or use_explicit_padding
// up to the pooling layer.
NetOutput mobilenet_v3_base(layers::VariableScope& root, const Tensor& images,
                            const MobilenetV3Options& options);
NetOutput mobilenet_v3(layers::VariableScope& root, const Tensor& images,
                       const MobilenetV3Options& options);

// ---------------------------------------------------------------------------------------------
// Inception v2 and v3

// inception_utils.inception_arg_scope, or what replaces it.
struct InceptionArgScope {
  double weight_decay = 0.00004;
  bool use_batch_norm = true;
  double batch_norm_decay = 0.9997;
  double batch_norm_epsilon = 0.001;
  std::optional<bool> batch_norm_is_training;  // as ResnetV1Options'
  // The options of every conv2d and separable_conv2d instead of the arg scope's (an SSD's
  // conv_hyperparams with override_base_feature_extractor_hyperparams): its activation,
  // normalizer, weight decay (on the depthwise weights too) and initializer, except where the
  // net names an initializer itself (trunc_normal(...) in slim's code), which wins as there.
  std::optional<layers::Conv2DOptions> replacement;
};

struct InceptionV2Options {
  int64_t num_classes = 1000;  // 0: no logits (the average pool is the output)
  double depth_multiplier = 1.0;
  int64_t min_depth = 16;
  bool use_separable_conv = true;  // Conv2d_1a_7x7 separable; else a plain convolution
  std::string final_endpoint = "Mixed_5c";
  double dropout_keep_prob = 0.8;
  bool global_pool = false;
  bool spatial_squeeze = true;
  InceptionArgScope arg_scope;
  std::string scope = "InceptionV2";
};

// The convolutional base, up to final_endpoint (Conv2d_1a_7x7 .. Mixed_5c). Throws
// InvalidArgument for an unknown final_endpoint or a depth_multiplier <= 0.
NetOutput inception_v2_base(layers::VariableScope& root, const Tensor& images,
                            const InceptionV2Options& options);
NetOutput inception_v2(layers::VariableScope& root, const Tensor& images,
                       const InceptionV2Options& options);
// The base's modules from `first_endpoint` to options.final_endpoint (both of Mixed_3b ..
// Mixed_5c, in order) on a feature map `net` [B, H, W, C] instead of images, under
// <options.scope>/<module>: the second half of the net, as the Object Detection API's
// faster_rcnn_inception_v2 extractor rebuilds Mixed_5a .. Mixed_5c on the proposals' crops.
// Throws InvalidArgument for unknown or misordered end points or a depth_multiplier <= 0.
NetOutput inception_v2_modules(layers::VariableScope& root, const Tensor& net,
                               const std::string& first_endpoint,
                               const InceptionV2Options& options);

// ---------------------------------------------------------------------------------------------
// Inception-ResNet v2 (nets/inception_resnet_v2.py under inception_resnet_v2_arg_scope)

struct InceptionResnetV2Options {
  int64_t num_classes = 1001;  // 0: no logits (Logits/AvgPool_1a_8x8 is the output)
  double dropout_keep_prob = 0.8;
  bool create_aux_logits = true;  // AuxLogits on PreAuxLogits (with num_classes > 0)
  // The base's last end point: Conv2d_1a_3x3 .. MaxPool_5a_3x3, Mixed_5b, Mixed_6a,
  // PreAuxLogits, Mixed_7a, Conv2d_7b_1x1.
  std::string final_endpoint = "Conv2d_7b_1x1";
  // 16, or 8: Mixed_6a at stride 1 and the block17s atrous (rate 2), up to PreAuxLogits only.
  int64_t output_stride = 16;
  bool align_feature_maps = false;  // every VALID padding of the base SAME
  // inception_resnet_v2_arg_scope: L2 on conv2d's and fully_connected's weights and biases,
  // batch norm (no gamma) on conv2d.
  double weight_decay = 0.00004;
  double batch_norm_decay = 0.9997;
  double batch_norm_epsilon = 0.001;
  std::optional<bool> batch_norm_is_training;  // as ResnetV1Options'
  std::string scope = "InceptionResnetV2";
};

// The base up to options.final_endpoint. Throws InvalidArgument for an unknown final_endpoint, an
// output_stride other than 8 or 16, or output_stride 8 past PreAuxLogits.
NetOutput inception_resnet_v2_base(layers::VariableScope& root, const Tensor& images,
                                   const InceptionResnetV2Options& options);
// Mixed_7a, nine block8 (scale 0.2) under <scope>/<repeat_scope>/block8_<i>, Block8 without
// activation and Conv2d_7b_1x1 on a PreAuxLogits map `net` (the base's own use "Repeat_2"; the
// Object Detection API's faster_rcnn_inception_resnet_v2 rebuilds them on the proposals' crops
// under "Repeat"), with the base's VALID strided paddings.
NetOutput inception_resnet_v2_top(layers::VariableScope& root, const Tensor& net,
                                  const std::string& repeat_scope,
                                  const InceptionResnetV2Options& options);
// The classifier: the base, AuxLogits (AvgPool 5x5/3, Conv2d_1b_1x1, Conv2d_2a_5x5 over the whole
// map, Logits) and Logits (the whole map's average pool, Dropout, Logits).
NetOutput inception_resnet_v2(layers::VariableScope& root, const Tensor& images,
                              const InceptionResnetV2Options& options);

struct InceptionV3Options {
  int64_t num_classes = 1000;  // 0: no logits nor aux logits (the average pool is the output)
  double depth_multiplier = 1.0;
  int64_t min_depth = 16;
  std::string final_endpoint = "Mixed_7c";
  double dropout_keep_prob = 0.8;
  bool create_aux_logits = true;
  bool global_pool = false;
  bool spatial_squeeze = true;
  InceptionArgScope arg_scope;
  std::string scope = "InceptionV3";
};

// The convolutional base, up to final_endpoint (Conv2d_1a_3x3 .. Mixed_7c). Throws
// InvalidArgument for an unknown final_endpoint or a depth_multiplier <= 0.
NetOutput inception_v3_base(layers::VariableScope& root, const Tensor& images,
                            const InceptionV3Options& options);
// With num_classes and create_aux_logits, end_points["AuxLogits"] holds the auxiliary head's
// logits, which the caller adds to the loss (slim's train_image_classifier weighs them 0.4).
NetOutput inception_v3(layers::VariableScope& root, const Tensor& images,
                       const InceptionV3Options& options);

}  // namespace trainyard::nets

#endif  // TRAINYARD_PKG_NETS_NETS_H_
