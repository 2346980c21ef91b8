// The image classifiers (plugin image_classifiers, on pkg/nets), created through the plugin
// registry: TF-Slim's variable names and shapes (so slim checkpoints restore by name), the
// published parameter counts, the end-point sizes the originals produce, the loss of
// train_image_classifier.py (softmax cross-entropy with label smoothing), batch norm and
// dropout switched by the mode, the options' errors, and a few training steps that fit a
// tiny batch. The equality with TensorFlow's own outputs is in slim_nets_golden_test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

std::shared_ptr<BaseModel> make_model(const std::string& name, const Opts& options = {}) {
  return test::plugin_registry().create<BaseModel>(ClassKind::kModel, name, options);
}

Backend& cpu() { return *test::backend("cpu"); }

std::vector<double> values(const Tensor& t) {
  NoGradScope no_grad;
  return ops::cast(t, DType::kF64).to_vector<double>();
}

Batch image_batch(Backend& backend, int64_t n, int64_t h, int64_t w, int64_t c,
                  int64_t num_classes) {
  std::vector<float> pixels(static_cast<std::size_t>(n * h * w * c));
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  }
  std::vector<float> labels(static_cast<std::size_t>(n * num_classes), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    labels[static_cast<std::size_t>(i * num_classes + i % num_classes)] = 1;
  Batch batch;
  batch.features["image"] = Tensor::from_vector(backend, Shape{n, h, w, c}, pixels);
  batch.labels = Tensor::from_vector(backend, Shape{n, num_classes}, labels);
  return batch;
}

int64_t trainable_parameters(FakeModelContext& ctx) {
  int64_t total = 0;
  for (Variable* v : ctx.store().trainable()) total += v->value().num_elements();
  return total;
}

Shape shape_of(FakeModelContext& ctx, const std::string& name) {
  return ctx.at(name).value().shape();
}

TEST(ImageClassifiers, ResnetV1_50HasSlimNamesAndShapes) {
  FakeModelContext ctx(cpu(), /*num_classes=*/1000);
  auto model = make_model("resnet_v1_50");
  NoGradScope no_grad;
  ModelOutput out = model->forward(ctx, image_batch(cpu(), 1, 64, 64, 3, 1000), Mode::kEval);
  EXPECT_EQ(out.predictions.shape(), (Shape{1, 1000}));
  EXPECT_EQ(shape_of(ctx, "resnet_v1_50/conv1/weights"), (Shape{7, 7, 3, 64}));
  EXPECT_EQ(shape_of(ctx, "resnet_v1_50/conv1/BatchNorm/gamma"), (Shape{64}));
  EXPECT_EQ(shape_of(ctx, "resnet_v1_50/conv1/BatchNorm/moving_variance"), (Shape{64}));
  EXPECT_EQ(shape_of(ctx, "resnet_v1_50/block1/unit_1/bottleneck_v1/shortcut/weights"),
            (Shape{1, 1, 64, 256}));
  EXPECT_EQ(shape_of(ctx, "resnet_v1_50/block1/unit_3/bottleneck_v1/conv2/weights"),
            (Shape{3, 3, 64, 64}));
  EXPECT_EQ(shape_of(ctx, "resnet_v1_50/block3/unit_6/bottleneck_v1/conv3/weights"),
            (Shape{1, 1, 256, 1024}));
  EXPECT_EQ(shape_of(ctx, "resnet_v1_50/block4/unit_3/bottleneck_v1/conv3/BatchNorm/beta"),
            (Shape{2048}));
  EXPECT_EQ(shape_of(ctx, "resnet_v1_50/logits/weights"), (Shape{1, 1, 2048, 1000}));
  EXPECT_EQ(shape_of(ctx, "resnet_v1_50/logits/biases"), (Shape{1000}));
  // Only the first unit of a block changes depth: the others have no shortcut conv.
  EXPECT_EQ(ctx.find("resnet_v1_50/block1/unit_2/bottleneck_v1/shortcut/weights"), nullptr);
  // No conv followed by batch norm has biases.
  EXPECT_EQ(ctx.find("resnet_v1_50/conv1/biases"), nullptr);
  // slim's resnet_v1_50 with 1000 classes: 25,557,032 trainable parameters (53 convs with
  // gamma and beta, the logits with biases); the moving statistics are not trainable.
  EXPECT_EQ(trainable_parameters(ctx), 25557032);
}

TEST(ImageClassifiers, ResnetV1_101HasTwentyThreeUnitsInBlock3) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("resnet_v1_101");
  NoGradScope no_grad;
  model->forward(ctx, image_batch(cpu(), 1, 32, 32, 3, 10), Mode::kEval);
  EXPECT_NE(ctx.find("resnet_v1_101/block3/unit_23/bottleneck_v1/conv3/weights"), nullptr);
  EXPECT_EQ(ctx.find("resnet_v1_101/block3/unit_24/bottleneck_v1/conv3/weights"), nullptr);
}

TEST(ImageClassifiers, MobilenetV1HasSlimNamesAndTheKerasParameterCount) {
  FakeModelContext ctx(cpu(), 1000);
  auto model = make_model("mobilenet_v1");
  NoGradScope no_grad;
  ModelOutput out = model->forward(ctx, image_batch(cpu(), 1, 224, 224, 3, 1000), Mode::kEval);
  EXPECT_EQ(out.predictions.shape(), (Shape{1, 1000}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV1/Conv2d_0/weights"), (Shape{3, 3, 3, 32}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV1/Conv2d_1_depthwise/depthwise_weights"),
            (Shape{3, 3, 32, 1}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV1/Conv2d_1_pointwise/weights"), (Shape{1, 1, 32, 64}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV1/Conv2d_13_pointwise/BatchNorm/gamma"), (Shape{1024}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV1/Logits/Conv2d_1c_1x1/weights"), (Shape{1, 1, 1024, 1000}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV1/Logits/Conv2d_1c_1x1/biases"), (Shape{1000}));
  // The same network as Keras' MobileNet(alpha=1.0) with 1000 classes: 4,231,976 trainable.
  EXPECT_EQ(trainable_parameters(ctx), 4231976);
}

TEST(ImageClassifiers, MobilenetV1DepthMultiplierAndMinDepth) {
  FakeModelContext ctx(cpu(), 5);
  auto model = make_model("mobilenet_v1", {{"depth_multiplier", 0.25}});
  NoGradScope no_grad;
  ModelOutput out = model->forward(ctx, image_batch(cpu(), 2, 64, 64, 3, 5), Mode::kEval);
  EXPECT_EQ(out.predictions.shape(), (Shape{2, 5}));
  // depth(32) = max(int(32 * 0.25), 8) = 8; depth(1024) = 256.
  EXPECT_EQ(shape_of(ctx, "MobilenetV1/Conv2d_0/weights"), (Shape{3, 3, 3, 8}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV1/Conv2d_1_pointwise/weights"), (Shape{1, 1, 8, 16}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV1/Logits/Conv2d_1c_1x1/weights"), (Shape{1, 1, 256, 5}));
  EXPECT_THROW(make_model("mobilenet_v1", {{"depth_multiplier", 0.0}}), Error);
}

// Keras' MobileNetV2 is the same network with the same rounding (its alpha keeps the last
// layer's 1280 channels below 1, as slim's finegrain_classification_mode): trainable parameter
// counts from tf.keras.applications.MobileNetV2(weights=None) under TensorFlow 2.21, 3,504,872
// at alpha 1.0 with 1000 classes and 408,938 at alpha 0.35 with 10.
TEST(ImageClassifiers, MobilenetV2HasSlimNamesAndTheKerasParameterCounts) {
  FakeModelContext ctx(cpu(), 1000);
  auto model = make_model("mobilenet_v2");
  NoGradScope no_grad;
  ModelOutput out = model->forward(ctx, image_batch(cpu(), 1, 96, 96, 3, 1000), Mode::kEval);
  EXPECT_EQ(out.predictions.shape(), (Shape{1, 1000}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV2/Conv/weights"), (Shape{3, 3, 3, 32}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV2/expanded_conv/depthwise/depthwise_weights"),
            (Shape{3, 3, 32, 1}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV2/expanded_conv/project/weights"), (Shape{1, 1, 32, 16}));
  EXPECT_EQ(ctx.find("MobilenetV2/expanded_conv/expand/weights"), nullptr);
  EXPECT_EQ(shape_of(ctx, "MobilenetV2/expanded_conv_1/expand/weights"), (Shape{1, 1, 16, 96}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV2/expanded_conv_16/project/weights"), (Shape{1, 1, 960, 320}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV2/Conv_1/weights"), (Shape{1, 1, 320, 1280}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV2/Logits/Conv2d_1c_1x1/weights"), (Shape{1, 1, 1280, 1000}));
  EXPECT_EQ(trainable_parameters(ctx), 3504872);

  FakeModelContext small(cpu(), 10);
  auto narrow = make_model("mobilenet_v2",
                           {{"depth_multiplier", 0.35}, {"finegrain_classification_mode", true}});
  narrow->forward(small, image_batch(cpu(), 1, 96, 96, 3, 10), Mode::kEval);
  EXPECT_EQ(shape_of(small, "MobilenetV2/Conv/weights"), (Shape{3, 3, 3, 16}));
  EXPECT_EQ(shape_of(small, "MobilenetV2/Conv_1/weights"), (Shape{1, 1, 112, 1280}));
  EXPECT_EQ(trainable_parameters(small), 408938);
  EXPECT_THROW(make_model("mobilenet_v2", {{"depth_multiplier", 0.0}}), Error);
}

// Trainable parameter counts of slim's own nets (nets/inception_v2.py and inception_v3.py under
// their arg scope, built with tf_slim 1.1 under TensorFlow 2.21): Inception v3 with 1001 classes
// and its AuxLogits head on 299x299 images, 27,145,970 (23,819,401 without AuxLogits); at
// depth_multiplier 0.5 with 10 classes on 139x139 images (AuxLogits' Conv2d_2a shrinks to the
// 1x1 map there: Conv2d_2a_1x1), 5,510,308.
TEST(ImageClassifiers, InceptionV3HasSlimNamesAuxLogitsAndSlimsParameterCounts) {
  FakeModelContext ctx(cpu(), 1001);
  auto model = make_model("inception_v3");
  {
    NoGradScope no_grad;
    ModelOutput out = model->forward(ctx, image_batch(cpu(), 1, 299, 299, 3, 1001), Mode::kEval);
    EXPECT_EQ(out.predictions.shape(), (Shape{1, 1001}));
  }
  EXPECT_EQ(shape_of(ctx, "InceptionV3/Conv2d_1a_3x3/weights"), (Shape{3, 3, 3, 32}));
  EXPECT_EQ(ctx.find("InceptionV3/Conv2d_1a_3x3/biases"), nullptr);
  EXPECT_EQ(ctx.find("InceptionV3/Conv2d_1a_3x3/BatchNorm/gamma"), nullptr);
  EXPECT_EQ(shape_of(ctx, "InceptionV3/Mixed_5c/Branch_1/Conv_1_0c_5x5/weights"),
            (Shape{5, 5, 48, 64}));
  EXPECT_EQ(shape_of(ctx, "InceptionV3/Mixed_6e/Branch_2/Conv2d_0e_1x7/weights"),
            (Shape{1, 7, 192, 192}));
  EXPECT_EQ(shape_of(ctx, "InceptionV3/Mixed_7c/Branch_1/Conv2d_0c_3x1/weights"),
            (Shape{3, 1, 384, 384}));
  EXPECT_EQ(shape_of(ctx, "InceptionV3/AuxLogits/Conv2d_2a_5x5/weights"), (Shape{5, 5, 128, 768}));
  EXPECT_EQ(shape_of(ctx, "InceptionV3/AuxLogits/Conv2d_2b_1x1/weights"), (Shape{1, 1, 768, 1001}));
  EXPECT_EQ(shape_of(ctx, "InceptionV3/Logits/Conv2d_1c_1x1/weights"), (Shape{1, 1, 2048, 1001}));
  EXPECT_EQ(trainable_parameters(ctx), 27145970);

  FakeModelContext small(cpu(), 10);
  auto narrow = make_model("inception_v3", {{"depth_multiplier", 0.5}});
  NoGradScope no_grad;
  narrow->forward(small, image_batch(cpu(), 1, 139, 139, 3, 10), Mode::kEval);
  EXPECT_EQ(shape_of(small, "InceptionV3/AuxLogits/Conv2d_2a_1x1/weights"), (Shape{1, 1, 64, 384}));
  EXPECT_EQ(trainable_parameters(small), 5510308);
  EXPECT_THROW(make_model("inception_v3", {{"depth_multiplier", 0.0}}), Error);
}

// The AuxLogits head adds train_image_classifier.py's cross-entropy weighted 0.4 to the training
// loss: on the same variables (dropout off, so both runs see the same logits), the loss with the
// head less the loss without it is 0.4 times the head's cross-entropy, which is log(4) within
// 0.02 here (Conv2d_2b_1x1's trunc_normal(0.001) weights keep the aux logits near 0 over 4
// classes). The evaluation's loss is the logits' alone.
TEST(ImageClassifiers, InceptionV3TrainingLossAddsTheAuxLogitsCrossEntropyWeighted04) {
  const Batch batch = image_batch(cpu(), 2, 139, 139, 3, 4);
  FakeModelContext ctx(cpu(), 4);
  NoGradScope no_grad;
  const Opts with_head = {{"depth_multiplier", 0.25}, {"dropout_keep_prob", 1.0}};
  Opts without_head = with_head;
  without_head["create_aux_logits"] = false;
  auto loss = [&](const Opts& options, Mode mode) {
    return values(*make_model("inception_v3", options)->forward(ctx, batch, mode).loss)[0];
  };
  EXPECT_NEAR(loss(with_head, Mode::kTrain) - loss(without_head, Mode::kTrain), 0.4 * std::log(4.0),
              0.02);
  EXPECT_DOUBLE_EQ(loss(with_head, Mode::kEval), loss(without_head, Mode::kEval));
}

// Slim's Inception v2 (separable Conv2d_1a_7x7 with depthwise multiplier 8): 11,179,361 trainable
// parameters with 1001 classes on 224x224 images, 2,547,218 at depth_multiplier 0.5 with 10
// classes on 96x96 images (tf_slim 1.1, TensorFlow 2.21).
TEST(ImageClassifiers, InceptionV2HasSlimNamesAndSlimsParameterCounts) {
  FakeModelContext ctx(cpu(), 1001);
  auto model = make_model("inception_v2");
  NoGradScope no_grad;
  ModelOutput out = model->forward(ctx, image_batch(cpu(), 1, 224, 224, 3, 1001), Mode::kEval);
  EXPECT_EQ(out.predictions.shape(), (Shape{1, 1001}));
  EXPECT_EQ(shape_of(ctx, "InceptionV2/Conv2d_1a_7x7/depthwise_weights"), (Shape{7, 7, 3, 8}));
  EXPECT_EQ(shape_of(ctx, "InceptionV2/Conv2d_1a_7x7/pointwise_weights"), (Shape{1, 1, 24, 64}));
  EXPECT_EQ(shape_of(ctx, "InceptionV2/Conv2d_1a_7x7/biases"), (Shape{64}));
  EXPECT_EQ(shape_of(ctx, "InceptionV2/Mixed_4a/Branch_1/Conv2d_1a_3x3/weights"),
            (Shape{3, 3, 96, 96}));
  EXPECT_EQ(shape_of(ctx, "InceptionV2/Mixed_5c/Branch_3/Conv2d_0b_1x1/weights"),
            (Shape{1, 1, 1024, 128}));
  EXPECT_EQ(shape_of(ctx, "InceptionV2/Logits/Conv2d_1c_1x1/weights"), (Shape{1, 1, 1024, 1001}));
  EXPECT_EQ(trainable_parameters(ctx), 11179361);

  FakeModelContext small(cpu(), 10);
  make_model("inception_v2", {{"depth_multiplier", 0.5}})
      ->forward(small, image_batch(cpu(), 1, 96, 96, 3, 10), Mode::kEval);
  EXPECT_EQ(trainable_parameters(small), 2547218);
  EXPECT_THROW(make_model("inception_v2", {{"min_depth", int64_t{0}}}), Error);

  // use_separable_conv false: a plain 7x7 convolution under the arg scope (batch norm, no biases).
  FakeModelContext plain(cpu(), 10);
  make_model("inception_v2", {{"depth_multiplier", 0.5}, {"use_separable_conv", false}})
      ->forward(plain, image_batch(cpu(), 1, 96, 96, 3, 10), Mode::kEval);
  EXPECT_EQ(shape_of(plain, "InceptionV2/Conv2d_1a_7x7/weights"), (Shape{7, 7, 3, 32}));
  EXPECT_EQ(plain.find("InceptionV2/Conv2d_1a_7x7/biases"), nullptr);
  EXPECT_NE(plain.find("InceptionV2/Conv2d_1a_7x7/BatchNorm/beta"), nullptr);
}

int64_t regularized_variables(FakeModelContext& ctx) {
  int64_t n = 0;
  for (Variable* v : ctx.store().trainable()) n += v->spec().l2_regularization > 0.0 ? 1 : 0;
  return n;
}

// Parameter counts of slim's own mobilenet_v3.large / .small under training_scope() (TF 2.21,
// tf-slim 1.1): 5,483,032 and 2,542,856 trainable with 1000 classes; at depth multiplier 0.5
// with 10 classes, 1,421,330 (large, finegrain_classification_mode) and 424,866 (small). slim
// regularizes every conv2d's weights (squeeze_excite's and Conv_2's too) and no depthwise ones:
// 49 variables in large, 43 in small.
TEST(ImageClassifiers, MobilenetV3HasSlimNamesAndSlimsParameterCounts) {
  FakeModelContext ctx(cpu(), 1000);
  auto model = make_model("mobilenet_v3_large");
  NoGradScope no_grad;
  ModelOutput out = model->forward(ctx, image_batch(cpu(), 1, 96, 96, 3, 1000), Mode::kEval);
  EXPECT_EQ(out.predictions.shape(), (Shape{1, 1000}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV3/Conv/weights"), (Shape{3, 3, 3, 16}));
  EXPECT_EQ(ctx.find("MobilenetV3/expanded_conv/expand/weights"), nullptr);
  EXPECT_EQ(shape_of(ctx, "MobilenetV3/expanded_conv_1/expand/weights"), (Shape{1, 1, 16, 64}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV3/expanded_conv_3/depthwise/depthwise_weights"),
            (Shape{5, 5, 72, 1}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV3/expanded_conv_3/squeeze_excite/Conv/weights"),
            (Shape{1, 1, 72, 24}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV3/expanded_conv_3/squeeze_excite/Conv_1/biases"), (Shape{72}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV3/Conv_2/weights"), (Shape{1, 1, 960, 1280}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV3/Conv_2/biases"), (Shape{1280}));
  EXPECT_EQ(shape_of(ctx, "MobilenetV3/Logits/Conv2d_1c_1x1/weights"), (Shape{1, 1, 1280, 1000}));
  EXPECT_EQ(trainable_parameters(ctx), 5483032);
  EXPECT_EQ(regularized_variables(ctx), 49);

  FakeModelContext small_ctx(cpu(), 1000);
  make_model("mobilenet_v3_small")
      ->forward(small_ctx, image_batch(cpu(), 1, 96, 96, 3, 1000), Mode::kEval);
  EXPECT_EQ(shape_of(small_ctx, "MobilenetV3/expanded_conv/squeeze_excite/Conv/weights"),
            (Shape{1, 1, 16, 8}));
  EXPECT_EQ(shape_of(small_ctx, "MobilenetV3/expanded_conv_1/expand/weights"),
            (Shape{1, 1, 16, 72}));
  EXPECT_EQ(shape_of(small_ctx, "MobilenetV3/Conv_2/weights"), (Shape{1, 1, 576, 1024}));
  EXPECT_EQ(trainable_parameters(small_ctx), 2542856);
  EXPECT_EQ(regularized_variables(small_ctx), 43);

  FakeModelContext narrow_large(cpu(), 10);
  make_model("mobilenet_v3_large",
             {{"depth_multiplier", 0.5}, {"finegrain_classification_mode", true}})
      ->forward(narrow_large, image_batch(cpu(), 1, 96, 96, 3, 10), Mode::kEval);
  EXPECT_EQ(shape_of(narrow_large, "MobilenetV3/Conv_2/weights"), (Shape{1, 1, 480, 1280}));
  EXPECT_EQ(trainable_parameters(narrow_large), 1421330);
  FakeModelContext narrow_small(cpu(), 10);
  make_model("mobilenet_v3_small", {{"depth_multiplier", 0.5}})
      ->forward(narrow_small, image_batch(cpu(), 1, 96, 96, 3, 10), Mode::kEval);
  EXPECT_EQ(trainable_parameters(narrow_small), 424866);
  EXPECT_THROW(make_model("mobilenet_v3_small", {{"depth_multiplier", 0.0}}), Error);
  // reduce_to_1x1 pools a non-square map 7 x 7, as slim does: 64 x 96 images leave 2 x 3.
  FakeModelContext oblong(cpu(), 10);
  try {
    make_model("mobilenet_v3_small")
        ->forward(oblong, image_batch(cpu(), 1, 64, 96, 3, 10), Mode::kEval);
    ADD_FAILURE() << "a 2 x 3 map was pooled 7 x 7";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("MobilenetV3: layer_14 (reduce_to_1x1) pools the "
                                         "non-square map"),
              std::string::npos)
        << e.what();
  }
}

TEST(ImageClassifiers, LenetHasSlimNamesAndShapes) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("lenet");
  NoGradScope no_grad;
  model->forward(ctx, image_batch(cpu(), 2, 28, 28, 1, 10), Mode::kEval);
  EXPECT_EQ(
      ctx.variable_names(),
      (std::vector<std::string>{"LeNet/conv1/weights", "LeNet/conv1/biases", "LeNet/conv2/weights",
                                "LeNet/conv2/biases", "LeNet/fc3/weights", "LeNet/fc3/biases",
                                "LeNet/fc4/weights", "LeNet/fc4/biases"}));
  EXPECT_EQ(shape_of(ctx, "LeNet/fc3/weights"), (Shape{7 * 7 * 64, 1024}));
  EXPECT_EQ(trainable_parameters(ctx),
            (5 * 5 * 32 + 32) + (5 * 5 * 32 * 64 + 64) + (3136 * 1024 + 1024) + (1024 * 10 + 10));
}

// train_image_classifier.py's --quantize_delay: contrib.quantize's variables under each layer
// (weights_quant/{min,max}, act_quant/{min,max} with their moving averages), fake quantization
// from the delay-th training step on (the logits on fc4/act_quant's grid), counted by
// fake_quantization_step, and always out of training; none with the default -1; a delay below -1
// refused naming the option.
TEST(ImageClassifiers, QuantizeDelayTrainsLenetWithContribQuantizesFakeQuantization) {
  FakeModelContext plain(cpu(), 10);
  make_model("lenet")->forward(plain, image_batch(cpu(), 2, 28, 28, 1, 10), Mode::kTrain);
  for (const std::string& name : plain.variable_names()) {
    EXPECT_EQ(name.find("quant"), std::string::npos) << name;
  }
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("lenet", {{"quantize_delay", int64_t{2}}});
  const Batch batch = image_batch(cpu(), 2, 28, 28, 1, 10);
  // fc4's logits step by fc4/act_quant's range / 255 once quantized.
  auto on_one_grid = [&](const Tensor& probabilities) {
    std::vector<double> p = values(probabilities);
    std::vector<double> logits(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) logits[i] = std::log(p[i]);
    const double min = values(ctx.at("LeNet/fc4/act_quant/min").value())[0];
    const double max = values(ctx.at("LeNet/fc4/act_quant/max").value())[0];
    const double step = (max - std::min(min, 0.0)) / 255.0;
    for (std::size_t i = 1; i < 10; ++i) {  // softmax keeps differences of logits
      const double k = (logits[i] - logits[0]) / step;
      if (std::abs(k - std::round(k)) > 1e-3) return false;
    }
    return true;
  };
  // The trainer gives each step its own seed; fake_quantization_step counts the steps.
  auto step = [&](uint64_t seed) {
    ctx.set_seed(seed);
    return model->forward(ctx, batch, Mode::kTrain).predictions;
  };
  EXPECT_FALSE(on_one_grid(step(1)));  // step 1: before the delay, float
  for (const char* name :
       {"LeNet/conv1/weights_quant/min", "LeNet/conv1/weights_quant/max",
        "LeNet/conv2/act_quant/min", "LeNet/fc3/act_quant/max", "LeNet/fc4/act_quant/min",
        "LeNet/fc4/act_quant/LeNet/fc4/act_quant/max/biased", "fake_quantization_step"}) {
    EXPECT_NO_THROW(ctx.at(name)) << name;
  }
  EXPECT_EQ(values(ctx.at("fake_quantization_step").value()), std::vector<double>{1});
  // Out of training the stored ranges apply whatever the step (create_eval_graph).
  EXPECT_TRUE(on_one_grid(model->forward(ctx, batch, Mode::kPredict).predictions));
  EXPECT_TRUE(on_one_grid(step(2)));  // step 2: quantized from here on
  EXPECT_TRUE(on_one_grid(step(3)));
  EXPECT_EQ(values(ctx.at("fake_quantization_step").value()), std::vector<double>{3});
  try {
    make_model("lenet", {{"quantize_delay", int64_t{-2}}});
    ADD_FAILURE() << "quantize_delay -2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("quantize_delay"), std::string::npos) << e.what();
  }
}

// contrib.quantize's pre-activation bypass on ResNet v1's relu(shortcut + residual): act_quant
// after the relu in the unit's scope; conv_quant on the sum's first input that is a layer's
// output (the graph matcher's first permutation): the projection shortcut's conv where there is
// one (the residual's last conv then a final layer, act_quant), else the residual's last conv.
TEST(ImageClassifiers, QuantizedResnetUnitsQuantizeThePreActivationBypassAsContribDoes) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("resnet_20", {{"quantize_delay", int64_t{0}}});
  model->forward(ctx, image_batch(cpu(), 2, 32, 32, 3, 10), Mode::kTrain);
  std::set<std::string> ranges;
  for (const std::string& name : ctx.variable_names()) {
    if (name.ends_with("_quant/min")) ranges.insert(name.substr(0, name.size() - 4));
  }
  const std::string identity = "resnet_20/block1/unit_2/basic_v1";
  const std::string projection = "resnet_20/block2/unit_1/basic_v1";
  for (const std::string& want :
       {identity + "/act_quant", identity + "/conv2/conv_quant", identity + "/conv1/act_quant",
        projection + "/act_quant", projection + "/shortcut/conv_quant",
        projection + "/conv2/act_quant", projection + "/conv1/act_quant"}) {
    EXPECT_EQ(ranges.count(want), 1u) << want;
  }
  for (const std::string& unwanted :
       {identity + "/conv2/act_quant", projection + "/conv2/conv_quant",
        projection + "/shortcut/act_quant", identity + "/add_quant"}) {
    EXPECT_EQ(ranges.count(unwanted), 0u) << unwanted;
  }
  // conv_quant starts at (-6, 6) as _InsertQuantOp's default, act_quant at (0, 6); after one
  // step both are the zero-debiased averages of that step's ranges: the batch's own min.
  EXPECT_LT(values(ctx.at(identity + "/conv2/conv_quant/min").value())[0], 0.0);
  EXPECT_EQ(values(ctx.at(identity + "/act_quant/min").value())[0], 0.0);  // after a relu
}

TEST(ImageClassifiers, Resnet20IsTwentyLayersDeep) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("resnet_20");
  NoGradScope no_grad;
  model->forward(ctx, image_batch(cpu(), 2, 32, 32, 3, 10), Mode::kEval);
  int64_t convs = 0;
  for (const std::string& name : ctx.variable_names()) {
    if (name.ends_with("/weights") && name.find("shortcut") == std::string::npos) ++convs;
  }
  EXPECT_EQ(convs, 20);  // conv1, 9 units of two 3x3 convs, the logits
  EXPECT_EQ(shape_of(ctx, "resnet_20/conv1/weights"), (Shape{3, 3, 3, 16}));
  EXPECT_EQ(shape_of(ctx, "resnet_20/block2/unit_1/basic_v1/shortcut/weights"),
            (Shape{1, 1, 16, 32}));
  EXPECT_EQ(shape_of(ctx, "resnet_20/block3/unit_3/basic_v1/conv2/weights"), (Shape{3, 3, 64, 64}));
  EXPECT_EQ(shape_of(ctx, "resnet_20/logits/weights"), (Shape{1, 1, 64, 10}));
}

TEST(ImageClassifiers, TheWalkthroughHeadIsAFullyConnectedPredictLogitsLayer) {
  FakeModelContext ctx(cpu(), 2);
  auto model = make_model("resnet_v1", {{"base_depths", std::vector<int64_t>{4, 8}},
                                        {"num_units", std::vector<int64_t>{1, 1}},
                                        {"strides", std::vector<int64_t>{2, 1}},
                                        {"head", std::string("fully_connected")},
                                        {"scope", std::string("resnet_v1_50")}});
  NoGradScope no_grad;
  model->forward(ctx, image_batch(cpu(), 2, 32, 32, 3, 2), Mode::kEval);
  EXPECT_EQ(shape_of(ctx, "Predict/logits/weights"), (Shape{32, 2}));
  EXPECT_EQ(ctx.find("resnet_v1_50/logits/weights"), nullptr);
}

TEST(ImageClassifiers, LossIsSoftmaxCrossEntropyWithLabelSmoothing) {
  for (double smoothing : {0.0, 0.1}) {
    FakeModelContext ctx(cpu(), 3);
    auto model = make_model("lenet", {{"label_smoothing", smoothing}});
    Batch batch = image_batch(cpu(), 3, 28, 28, 1, 3);
    NoGradScope no_grad;
    ModelOutput out = model->forward(ctx, batch, Mode::kEval);
    ASSERT_TRUE(out.loss.has_value());
    std::vector<double> p = values(out.predictions);
    std::vector<double> y = values(batch.labels);
    double expected = 0.0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      expected -= (y[i] * (1.0 - smoothing) + smoothing / 3.0) * std::log(p[i]);
    }
    EXPECT_NEAR(values(*out.loss)[0], expected / 3.0, 1e-5) << "label_smoothing " << smoothing;
    for (int r = 0; r < 3; ++r) EXPECT_NEAR(p[r * 3] + p[r * 3 + 1] + p[r * 3 + 2], 1.0, 1e-6);
  }
}

TEST(ImageClassifiers, PredictComputesNoLossAndEvalUpdatesNoMovingStatistics) {
  FakeModelContext ctx(cpu(), 4);
  auto model = make_model("resnet_20");
  Batch batch = image_batch(cpu(), 2, 32, 32, 3, 4);
  NoGradScope no_grad;
  EXPECT_FALSE(model->forward(ctx, batch, Mode::kPredict).loss.has_value());
  const std::string mean = "resnet_20/conv1/BatchNorm/moving_mean";
  const std::vector<double> before = values(ctx.at(mean).value());
  model->forward(ctx, batch, Mode::kEval);
  EXPECT_EQ(values(ctx.at(mean).value()), before);
  model->forward(ctx, batch, Mode::kTrain);
  EXPECT_NE(values(ctx.at(mean).value()), before);
}

TEST(ImageClassifiers, ErrorsNameTheModelAndTheInput) {
  FakeModelContext ctx(cpu(), 4);
  auto model = make_model("lenet");
  Batch batch;
  try {
    model->forward(ctx, batch, Mode::kEval);
    FAIL() << "no image accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("lenet: the batch has no 'image'"), std::string::npos)
        << e.what();
  }
  batch.features["image"] = ops::zeros(cpu(), Shape{2, 28, 28});
  EXPECT_THROW(model->forward(ctx, batch, Mode::kEval), InvalidArgument);
  EXPECT_THROW(make_model("resnet_v1", {{"num_units", std::vector<int64_t>{1}}}), Error);
  EXPECT_THROW(make_model("resnet_v1_50", {{"head", std::string("dense")}}), Error);
  EXPECT_THROW(make_model("lenet", {{"dropout_keep_prob", 0.0}}), Error);
}

// Gradients reach every trainable variable and a few momentum-free SGD steps fit a tiny batch.
TEST(ImageClassifiers, Resnet20FitsATinyBatch) {
  FakeModelContext ctx(cpu(), 4, /*seed=*/0, /*initializer_seed=*/7);
  auto model = make_model("resnet_20", {{"weight_decay", 0.0}});
  Batch batch = image_batch(cpu(), 8, 16, 16, 3, 4);
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 30; ++step) {
    ModelOutput out = model->forward(ctx, batch, Mode::kTrain);
    const double loss = values(*out.loss)[0];
    if (step == 0) first = loss;
    last = loss;
    std::vector<Variable*> trainable = ctx.store().trainable();
    std::vector<Tensor> sources;
    for (Variable* v : trainable) sources.push_back(v->value());
    std::vector<Tensor> grads = gradients(*out.loss, sources);
    NoGradScope no_grad;
    for (std::size_t i = 0; i < trainable.size(); ++i) {
      ASSERT_TRUE(grads[i].defined()) << trainable[i]->name();
      Tensor v = trainable[i]->value();
      ops::assign(v, ops::sub(v, ops::mul(grads[i], 0.1)));
    }
  }
  EXPECT_LT(last, 0.25 * first) << "first loss " << first << ", last " << last;
}

}  // namespace
}  // namespace trainyard
