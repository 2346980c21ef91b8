// SSDMetaArch (plugin detection_models) created through the plugin registry with the options
// of the API's ssd_mobilenet_v1_coco.config: the API's variable names and shapes, 1,917
// anchors at 300 x 300, the loss dict, post-processing's outputs, training that fits a tiny
// batch, and errors that name the option.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/registry.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

Backend& cpu() { return *test::backend("cpu"); }

// The `ssd` message of ssd_mobilenet_v1_coco.config, flattened as the config converter does.
Opts sample_options() {
  Opts o;
  o["image_resizer"] = std::string("fixed_shape_resizer");
  o["image_resizer.fixed_shape_resizer.height"] = int64_t{300};
  o["image_resizer.fixed_shape_resizer.width"] = int64_t{300};
  o["box_coder"] = std::string("faster_rcnn_box_coder");
  o["matcher"] = std::string("argmax_matcher");
  o["matcher.argmax_matcher.force_match_for_each_row"] = true;
  o["similarity_calculator"] = std::string("iou_similarity");
  o["anchor_generator"] = std::string("ssd_anchor_generator");
  o["box_predictor"] = std::string("convolutional_box_predictor");
  for (const std::string prefix : {"feature_extractor.conv_hyperparams",
                                   "box_predictor.convolutional_box_predictor.conv_hyperparams"}) {
    o[prefix] = true;
    o[prefix + ".activation"] = std::string("RELU_6");
    o[prefix + ".regularizer"] = std::string("l2_regularizer");
    o[prefix + ".regularizer.l2_regularizer.weight"] = 0.00004;
    o[prefix + ".initializer"] = std::string("truncated_normal_initializer");
    o[prefix + ".initializer.truncated_normal_initializer.stddev"] = 0.03;
    o[prefix + ".batch_norm"] = true;
    o[prefix + ".batch_norm.scale"] = true;
    o[prefix + ".batch_norm.decay"] = 0.9997;
  }
  o["box_predictor.convolutional_box_predictor.use_dropout"] = false;
  o["feature_extractor"] = true;
  o["feature_extractor.type"] = std::string("ssd_mobilenet_v1");
  o["loss"] = true;
  o["loss.hard_example_miner"] = true;
  o["loss.hard_example_miner.num_hard_examples"] = int64_t{3000};
  o["loss.hard_example_miner.iou_threshold"] = 0.99;
  o["loss.hard_example_miner.loss_type"] = std::string("CLASSIFICATION");
  o["loss.hard_example_miner.max_negatives_per_positive"] = int64_t{3};
  o["post_processing"] = true;
  o["post_processing.batch_non_max_suppression"] = true;
  o["post_processing.batch_non_max_suppression.score_threshold"] = 1e-8;
  o["post_processing.score_converter"] = std::string("SIGMOID");
  return o;
}

std::shared_ptr<DetectionModel> make_ssd(const Opts& options) {
  return test::plugin_registry().create<DetectionModel>(ClassKind::kDetectionModel, "SSDMetaArch",
                                                        options);
}

Tensor images(Backend& backend, int64_t n, int64_t size) {
  std::vector<float> pixels(static_cast<std::size_t>(n * size * size * 3));
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<float>(127.5 + 120.0 * std::sin(0.013 * static_cast<double>(i)));
  }
  return Tensor::from_vector(backend, Shape{n, size, size, 3}, pixels);
}

Shape shape_of(FakeModelContext& ctx, const std::string& name) {
  return ctx.at(name).value().shape();
}

TEST(SsdMetaArch, HasTheApisVariableNamesAndAnchorsAt300) {
  FakeModelContext ctx(cpu(), /*num_classes=*/90);
  auto model = make_ssd(sample_options());
  NoGradScope no_grad;
  const PreprocessedImages pre = model->preprocess(ctx, images(cpu(), 1, 300));
  const TensorDict out = model->predict(ctx, pre, Mode::kEval);
  EXPECT_EQ(out.at("box_encodings").shape(), (Shape{1, 1917, 4}));
  EXPECT_EQ(out.at("class_predictions_with_background").shape(), (Shape{1, 1917, 91}));
  EXPECT_EQ(out.at("anchors").shape(), (Shape{1917, 4}));
  EXPECT_EQ(shape_of(ctx, "FeatureExtractor/MobilenetV1/Conv2d_0/weights"), (Shape{3, 3, 3, 32}));
  EXPECT_EQ(shape_of(ctx, "FeatureExtractor/MobilenetV1/Conv2d_13_pointwise/BatchNorm/gamma"),
            (Shape{1024}));
  EXPECT_EQ(shape_of(ctx,
                     "FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_256/"
                     "weights"),
            (Shape{1, 1, 1024, 256}));
  EXPECT_EQ(shape_of(ctx,
                     "FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_Conv2d_2_3x3_s2_512/"
                     "BatchNorm/moving_variance"),
            (Shape{512}));
  EXPECT_EQ(shape_of(ctx,
                     "FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_Conv2d_5_3x3_s2_128/"
                     "weights"),
            (Shape{3, 3, 64, 128}));
  // Three boxes per location on the lowest layer, six on the others; kernel_size 1.
  EXPECT_EQ(shape_of(ctx, "BoxPredictor_0/BoxEncodingPredictor/weights"), (Shape{1, 1, 512, 12}));
  EXPECT_EQ(shape_of(ctx, "BoxPredictor_0/ClassPredictor/biases"), (Shape{3 * 91}));
  EXPECT_EQ(shape_of(ctx, "BoxPredictor_5/ClassPredictor/weights"), (Shape{1, 1, 128, 6 * 91}));
  EXPECT_EQ(ctx.find("BoxPredictor_0/BoxEncodingPredictor/BatchNorm/beta"), nullptr)
      << "the predictors have no normalizer";
}

Groundtruth two_boxes(Backend& backend, int64_t num_classes) {
  Groundtruth gt;
  const std::vector<std::vector<float>> boxes = {{0.1f, 0.1f, 0.5f, 0.45f},
                                                 {0.4f, 0.5f, 0.9f, 0.95f}};
  for (int i = 0; i < 2; ++i) {
    gt.boxes.push_back(
        Tensor::from_vector(backend, Shape{1, 4}, boxes[static_cast<std::size_t>(i)]));
    std::vector<float> one_hot(static_cast<std::size_t>(num_classes), 0.0f);
    one_hot[static_cast<std::size_t>(i % num_classes)] = 1.0f;
    gt.classes.push_back(Tensor::from_vector(backend, Shape{1, num_classes}, one_hot));
  }
  return gt;
}

// The loss dict has the API's two entries, both finite and positive; SGD steps on them fit two
// images, and post-processing gives the API's four outputs at max_total_detections.
TEST(SsdMetaArch, LossesFitATinyBatchAndPostprocessGivesTheApisOutputs) {
  FakeModelContext ctx(cpu(), /*num_classes=*/3, /*seed=*/0, /*initializer_seed=*/5);
  Opts o = sample_options();
  o["feature_extractor.depth_multiplier"] = 0.25;
  o["feature_extractor.min_depth"] = int64_t{8};
  auto model = make_ssd(o);
  const Tensor batch = images(cpu(), 2, 96);
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 25; ++step) {
    model->provide_groundtruth(two_boxes(cpu(), 3));
    const PreprocessedImages pre = model->preprocess(ctx, batch);
    const TensorDict prediction = model->predict(ctx, pre, Mode::kTrain);
    const TensorDict losses = model->loss(ctx, prediction, pre.true_image_shapes);
    ASSERT_EQ(losses.size(), 2u);
    const Tensor total =
        ops::add(losses.at("Loss/localization_loss"), losses.at("Loss/classification_loss"));
    double value = 0.0;
    {
      NoGradScope read;
      value = ops::cast(total, DType::kF64).to_vector<double>()[0];
    }
    ASSERT_TRUE(std::isfinite(value) && value > 0.0) << "step " << step << ": " << value;
    if (step == 0) first = value;
    last = value;
    std::vector<Variable*> trainable = ctx.store().trainable();
    std::vector<Tensor> sources;
    for (Variable* v : trainable) sources.push_back(v->value());
    const std::vector<Tensor> grads = gradients(total, sources);
    NoGradScope update;
    for (std::size_t i = 0; i < trainable.size(); ++i) {
      if (!grads[i].defined()) continue;
      Tensor v = trainable[i]->value();
      ops::assign(v, ops::sub(v, ops::mul(grads[i], 0.05)));
    }
  }
  EXPECT_LT(last, 0.5 * first) << "first loss " << first << ", last " << last;

  NoGradScope no_grad;
  const PreprocessedImages pre = model->preprocess(ctx, batch);
  const TensorDict prediction = model->predict(ctx, pre, Mode::kEval);
  const TensorDict d = model->postprocess(ctx, prediction, pre.true_image_shapes);
  EXPECT_EQ(d.at("detection_boxes").shape(), (Shape{2, 100, 4}));
  EXPECT_EQ(d.at("detection_scores").shape(), (Shape{2, 100}));
  EXPECT_EQ(d.at("detection_classes").shape(), (Shape{2, 100}));
  EXPECT_EQ(d.at("num_detections").shape(), (Shape{2}));
}

TEST(SsdMetaArch, UnsupportedChoicesNameTheOption) {
  Opts o = sample_options();
  o["feature_extractor.type"] = std::string("ssd_pnasnet");
  try {
    make_ssd(o);
    FAIL() << "an unsupported feature extractor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("feature_extractor.type"), std::string::npos) << e.what();
  }
  Opts l1 = sample_options();
  l1["feature_extractor.conv_hyperparams.regularizer"] = std::string("l1_regularizer");
  try {
    make_ssd(l1);
    FAIL() << "an L1 regularizer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("feature_extractor.conv_hyperparams.regularizer"),
              std::string::npos)
        << e.what();
  }
  Opts zero_scale = sample_options();
  zero_scale["post_processing.logit_scale"] = 0.0;
  try {
    make_ssd(zero_scale);
    FAIL() << "a logit_scale of 0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("post_processing.logit_scale"), std::string::npos)
        << e.what();
  }
  Opts unknown = sample_options();
  unknown["loss.no_such_field"] = 1.0;
  try {
    make_ssd(unknown);
    FAIL() << "an undeclared field was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loss.no_such_field"), std::string::npos) << e.what();
  }
}

// batch_non_max_suppression's variants reach the post-processing: soft NMS keeps what hard NMS
// suppresses, with decayed scores, and combined NMS builds; the API's builder's refusals name
// the option (max_detections_per_class above max_total_detections, a negative sigma, combined
// with class-agnostic NMS, more than one class per detection).
TEST(SsdMetaArch, NmsVariantsReachThePostprocessAndTheApisRefusalsNameTheOption) {
  const std::string n = "post_processing.batch_non_max_suppression.";
  auto detections = [&](const Opts& o) {
    FakeModelContext ctx(cpu(), /*num_classes=*/3, /*seed=*/0, /*initializer_seed=*/5);
    auto model = make_ssd(o);
    NoGradScope no_grad;
    const PreprocessedImages pre = model->preprocess(ctx, images(cpu(), 1, 96));
    TensorDict prediction = model->predict(ctx, pre, Mode::kEval);
    // Logits spread over [-4, 4], so that overlapping boxes compete with different scores.
    Tensor& logits = prediction.at("class_predictions_with_background");
    std::vector<float> values(static_cast<std::size_t>(logits.shape().num_elements()));
    for (std::size_t i = 0; i < values.size(); ++i) {
      values[i] = static_cast<float>(4.0 * std::sin(0.7 * static_cast<double>(i)));
    }
    logits = Tensor::from_vector(cpu(), logits.shape(), values);
    const TensorDict d = model->postprocess(ctx, prediction, pre.true_image_shapes);
    return d.at("detection_scores").to_vector<float>();
  };
  Opts hard = sample_options();
  hard["feature_extractor.depth_multiplier"] = 0.25;
  hard["feature_extractor.min_depth"] = int64_t{8};
  hard[n + "iou_threshold"] = 0.3;
  Opts soft = hard;
  soft[n + "soft_nms_sigma"] = 0.5;
  Opts combined = hard;
  combined[n + "use_combined_nms"] = true;
  const std::vector<float> hard_scores = detections(hard);
  EXPECT_NE(detections(soft), hard_scores);
  EXPECT_EQ(detections(combined), hard_scores);  // the same per-class NMS, boxes inside [0, 1]

  auto refused = [&](Opts o, const std::string& option) {
    try {
      make_ssd(o);
      ADD_FAILURE() << option << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << e.what();
    }
  };
  Opts per_class = hard;
  per_class[n + "max_detections_per_class"] = int64_t{200};
  refused(per_class, n + "max_detections_per_class");
  Opts negative = hard;
  negative[n + "soft_nms_sigma"] = -0.5;
  refused(negative, n + "soft_nms_sigma");
  Opts agnostic = combined;
  agnostic[n + "use_class_agnostic_nms"] = true;
  refused(agnostic, n + "use_combined_nms");
  Opts classes = hard;
  classes[n + "max_classes_per_detection"] = int64_t{2};
  refused(classes, n + "max_classes_per_detection");
}

// The API's restore_map as scopes: a detection checkpoint gives the feature extractor by its
// own names (the box predictor follows num_classes), or every variable with
// load_all_detection_checkpoint_vars; a classification checkpoint gives it without the
// "FeatureExtractor/" scope, load_all_detection_checkpoint_vars or not; another type is refused
// by name.
// graph_rewriter's quantization delay counts training steps, not forward passes: with
// num_clones each clone of a step runs predict with the step's seed, and TensorFlow's one graph
// advances fake_quantization_step once a session run.
TEST(SsdMetaArch, TheClonesOfAStepAdvanceTheQuantizationStepOnce) {
  Opts o = sample_options();
  o["feature_extractor.depth_multiplier"] = 0.25;
  o["feature_extractor.min_depth"] = int64_t{8};
  o["graph_rewriter.quantization"] = true;
  o["graph_rewriter.quantization.delay"] = int64_t{3};
  FakeModelContext ctx(cpu(), /*num_classes=*/3, /*seed=*/0, /*initializer_seed=*/5);
  auto model = make_ssd(o);
  const PreprocessedImages pre = model->preprocess(ctx, images(cpu(), 1, 96));
  auto pass = [&](uint64_t step_seed, Mode mode) {
    ctx.set_seed(step_seed);
    model->predict(ctx, pre, mode);
    return ctx.values("fake_quantization_step").at(0);
  };
  EXPECT_EQ(pass(11, Mode::kTrain), 1);  // step 1, clone 0
  EXPECT_EQ(pass(11, Mode::kTrain), 1);  // step 1, clone 1
  EXPECT_EQ(pass(11, Mode::kEval), 1);   // an evaluation counts nothing
  EXPECT_EQ(pass(12, Mode::kTrain), 2);  // step 2
  EXPECT_EQ(pass(12, Mode::kTrain), 2);
  EXPECT_EQ(pass(13, Mode::kTrain), 3);
}

TEST(SsdMetaArch, RestoreMapIsTheApisFeatureExtractorScope) {
  auto model = make_ssd(sample_options());
  using Scopes = std::map<std::string, std::string>;
  EXPECT_EQ(model->restore_map("detection", false),
            (Scopes{{"FeatureExtractor/", "FeatureExtractor/"}}));
  EXPECT_EQ(model->restore_map("detection", true), (Scopes{{"", ""}}));
  EXPECT_EQ(model->restore_map("classification", false), (Scopes{{"FeatureExtractor/", ""}}));
  EXPECT_EQ(model->restore_map("classification", true), (Scopes{{"FeatureExtractor/", ""}}));
  try {
    model->restore_map("segmentation", false);
    FAIL() << "an unknown fine_tune_checkpoint_type was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'segmentation'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trainyard
