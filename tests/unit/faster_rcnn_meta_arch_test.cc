// FasterRCNNMetaArch (plugin detection_models) created through the plugin registry with the
// options of the API's faster_rcnn_resnet50_coco.config: keep_aspect_ratio_resizer's sizes, the
// API's variable names and shapes, the loss dict and its normalization, the balanced sampler's
// minibatch, proposals and post-processing, training that fits a tiny batch, the restore map,
// and errors that name the option.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/onnx_export.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"
#include "trainyard/wire/onnx.pb.h"
#include "trainyard/wire/saved_model.pb.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

Backend& cpu() { return *test::backend("cpu"); }

// The `faster_rcnn` message of faster_rcnn_resnet50_coco.config, flattened as the converter
// does (od_config_faster_rcnn_test pins that), with the images' size made small.
Opts sample_options(int64_t image_size) {
  Opts o;
  o["image_resizer"] = std::string("keep_aspect_ratio_resizer");
  o["image_resizer.keep_aspect_ratio_resizer.min_dimension"] = image_size;
  o["image_resizer.keep_aspect_ratio_resizer.max_dimension"] = image_size;
  o["feature_extractor"] = true;
  o["feature_extractor.type"] = std::string("faster_rcnn_resnet50");
  o["feature_extractor.first_stage_features_stride"] = int64_t{16};
  const std::string a = "first_stage_anchor_generator.grid_anchor_generator";
  o["first_stage_anchor_generator"] = std::string("grid_anchor_generator");
  o[a + ".height_stride"] = int64_t{16};
  o[a + ".width_stride"] = int64_t{16};
  o[a + ".scales"] = std::vector<double>{0.25, 0.5, 1.0, 2.0};
  o[a + ".aspect_ratios"] = std::vector<double>{0.5, 1.0, 2.0};
  const std::string rpn = "first_stage_box_predictor_conv_hyperparams";
  o[rpn] = true;
  o[rpn + ".op"] = std::string("CONV");
  o[rpn + ".regularizer"] = std::string("l2_regularizer");
  o[rpn + ".regularizer.l2_regularizer.weight"] = 0.0;
  o[rpn + ".initializer"] = std::string("truncated_normal_initializer");
  o[rpn + ".initializer.truncated_normal_initializer.stddev"] = 0.01;
  o["first_stage_nms_score_threshold"] = 0.0;
  o["first_stage_nms_iou_threshold"] = 0.7;
  o["first_stage_max_proposals"] = int64_t{300};
  o["first_stage_localization_loss_weight"] = 2.0;
  o["first_stage_objectness_loss_weight"] = 1.0;
  o["initial_crop_size"] = int64_t{14};
  o["maxpool_kernel_size"] = int64_t{2};
  o["maxpool_stride"] = int64_t{2};
  o["second_stage_box_predictor"] = std::string("mask_rcnn_box_predictor");
  const std::string fc = "second_stage_box_predictor.mask_rcnn_box_predictor.fc_hyperparams";
  o[fc] = true;
  o[fc + ".op"] = std::string("FC");
  o[fc + ".regularizer"] = std::string("l2_regularizer");
  o[fc + ".regularizer.l2_regularizer.weight"] = 0.0;
  o[fc + ".initializer"] = std::string("variance_scaling_initializer");
  o[fc + ".initializer.variance_scaling_initializer.factor"] = 1.0;
  o[fc + ".initializer.variance_scaling_initializer.uniform"] = true;
  o[fc + ".initializer.variance_scaling_initializer.mode"] = std::string("FAN_AVG");
  o["second_stage_box_predictor.mask_rcnn_box_predictor.use_dropout"] = false;
  o["second_stage_box_predictor.mask_rcnn_box_predictor.dropout_keep_probability"] = 1.0;
  const std::string nms = "second_stage_post_processing.batch_non_max_suppression";
  o["second_stage_post_processing"] = true;
  o[nms] = true;
  o[nms + ".score_threshold"] = 0.0;
  o[nms + ".iou_threshold"] = 0.6;
  o[nms + ".max_detections_per_class"] = int64_t{100};
  o[nms + ".max_total_detections"] = int64_t{300};
  o["second_stage_post_processing.score_converter"] = std::string("SOFTMAX");
  o["second_stage_localization_loss_weight"] = 2.0;
  o["second_stage_classification_loss_weight"] = 1.0;
  return o;
}

// A reduced configuration: the MobileNet extractor, anchors for a 96-pixel image, small
// minibatches.
Opts small_options() {
  Opts o = sample_options(96);
  o["feature_extractor.type"] = std::string("faster_rcnn_mobilenet_v1");
  const std::string a = "first_stage_anchor_generator.grid_anchor_generator";
  o[a + ".height"] = int64_t{64};
  o[a + ".width"] = int64_t{64};
  o[a + ".scales"] = std::vector<double>{0.5, 1.0};
  o["first_stage_box_predictor_depth"] = int64_t{64};
  o["first_stage_minibatch_size"] = int64_t{32};
  o["first_stage_max_proposals"] = int64_t{20};
  o["second_stage_batch_size"] = int64_t{8};
  o["initial_crop_size"] = int64_t{8};
  return o;
}

// The options with a fixed_shape_resizer of size x size instead of the keep_aspect_ratio_resizer
// (the exports need one graph size).
Opts fixed_shape(Opts o, int64_t size) {
  o.erase("image_resizer.keep_aspect_ratio_resizer.min_dimension");
  o.erase("image_resizer.keep_aspect_ratio_resizer.max_dimension");
  o["image_resizer"] = std::string("fixed_shape_resizer");
  o["image_resizer.fixed_shape_resizer.height"] = size;
  o["image_resizer.fixed_shape_resizer.width"] = size;
  return o;
}

std::shared_ptr<DetectionModel> make_frcnn(const Opts& options) {
  return test::plugin_registry().create<DetectionModel>(ClassKind::kDetectionModel,
                                                        "FasterRCNNMetaArch", options);
}

Tensor images(Backend& backend, int64_t n, int64_t height, int64_t width) {
  std::vector<float> pixels(static_cast<std::size_t>(n * height * width * 3));
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<float>(127.5 + 120.0 * std::sin(0.013 * static_cast<double>(i)));
  }
  return Tensor::from_vector(backend, Shape{n, height, width, 3}, pixels);
}

Shape shape_of(FakeModelContext& ctx, const std::string& name) {
  return ctx.at(name).value().shape();
}

double value_of(const Tensor& t) {
  NoGradScope no_grad;
  return ops::cast(t, DType::kF64).to_vector<double>()[0];
}

Groundtruth two_boxes(Backend& backend, int64_t images, int64_t num_classes) {
  Groundtruth gt;
  const std::vector<float> boxes = {0.1f, 0.1f, 0.5f, 0.45f, 0.4f, 0.5f, 0.9f, 0.95f};
  for (int64_t i = 0; i < images; ++i) {
    gt.boxes.push_back(Tensor::from_vector(backend, Shape{2, 4}, boxes));
    std::vector<float> one_hot(static_cast<std::size_t>(2 * num_classes), 0.0f);
    one_hot[0] = 1.0f;
    one_hot[static_cast<std::size_t>(num_classes + 1)] = 1.0f;  // classes 0 and 1
    gt.classes.push_back(Tensor::from_vector(backend, Shape{2, num_classes}, one_hot));
  }
  return gt;
}

// preprocessor.resize_to_range: the shorter side to min_dimension unless the longer would pass
// max_dimension; sides rounded half to even as Python's round. The model resizes in
// preprocess() and reports the resized size as the true shape.
Shape resized(int64_t h, int64_t w, int64_t lo, int64_t hi) {
  FakeModelContext ctx(cpu(), /*num_classes=*/3);
  Opts o = sample_options(lo);
  o["image_resizer.keep_aspect_ratio_resizer.max_dimension"] = hi;
  NoGradScope no_grad;
  return make_frcnn(o)->preprocess(ctx, images(cpu(), 1, h, w)).images.shape();
}

TEST(FasterRcnnMetaArch, KeepAspectRatioResizerSizes) {
  EXPECT_EQ(resized(48, 64, 60, 1024), (Shape{1, 60, 80, 3}));
  EXPECT_EQ(resized(64, 48, 60, 1024), (Shape{1, 80, 60, 3}));
  EXPECT_EQ(resized(30, 150, 60, 100), (Shape{1, 20, 100, 3}));
  EXPECT_EQ(resized(60, 300, 120, 205), (Shape{1, 41, 205, 3}));  // 60 x 205 / 300 = 41
  EXPECT_EQ(resized(4, 10, 6, 100), (Shape{1, 6, 15, 3}));
  EXPECT_EQ(resized(2, 5, 3, 100), (Shape{1, 3, 8, 3}));   // 7.5 rounds to 8
  EXPECT_EQ(resized(2, 7, 3, 100), (Shape{1, 3, 10, 3}));  // 10.5 rounds to 10
  EXPECT_EQ(resized(50, 50, 50, 60), (Shape{1, 50, 50, 3}));

  // The model resizes a 48 x 64 batch to 600 / 1024's 96 x 128 when min is 96, and reports it.
  FakeModelContext ctx(cpu(), /*num_classes=*/3);
  Opts o = small_options();
  o["image_resizer.keep_aspect_ratio_resizer.max_dimension"] = int64_t{1024};
  auto model = make_frcnn(o);
  NoGradScope no_grad;
  const PreprocessedImages pre = model->preprocess(ctx, images(cpu(), 2, 48, 64));
  EXPECT_EQ(pre.images.shape(), (Shape{2, 96, 128, 3}));
  EXPECT_EQ(pre.true_image_shapes.to_vector<int32_t>(),
            (std::vector<int32_t>{96, 128, 3, 96, 128, 3}));
  // MobileNet's preprocess maps [0, 255] to [-1, 1].
  const std::vector<float> v = pre.images.to_vector<float>();
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -1.0f);
  EXPECT_LE(*std::max_element(v.begin(), v.end()), 1.0f);

  // pad_to_max_dimension pads to max x max and keeps the true shape.
  o["image_resizer.keep_aspect_ratio_resizer.max_dimension"] = int64_t{160};
  o["image_resizer.keep_aspect_ratio_resizer.pad_to_max_dimension"] = true;
  const PreprocessedImages padded = make_frcnn(o)->preprocess(ctx, images(cpu(), 1, 48, 64));
  EXPECT_EQ(padded.images.shape(), (Shape{1, 160, 160, 3}));
  EXPECT_EQ(padded.true_image_shapes.to_vector<int32_t>(), (std::vector<int32_t>{96, 128, 3}));
  // The padding is zeros before the extractor's preprocess: -1 after MobileNet's.
  EXPECT_FLOAT_EQ(padded.images.to_vector<float>().back(), -1.0f);
}

// The sample config's ResNet-50 model: the API's names and shapes (12 anchors per location, block3
// at stride 16 in the first stage, block4 in the second, the Mask R-CNN predictor's per-class
// boxes), and no first-stage block4 (it feeds nothing).
TEST(FasterRcnnMetaArch, ResnetHasTheApisVariableNames) {
  FakeModelContext ctx(cpu(), /*num_classes=*/90);
  auto model = make_frcnn(sample_options(64));
  NoGradScope no_grad;
  const PreprocessedImages pre = model->preprocess(ctx, images(cpu(), 1, 64, 64));
  const TensorDict out = model->predict(ctx, pre, Mode::kEval);
  // 64 / 16 = 4 x 4 locations, 12 anchors each, all kept (clipped) outside training.
  EXPECT_EQ(out.at("rpn_box_encodings").shape(), (Shape{1, 192, 4}));
  EXPECT_EQ(out.at("rpn_objectness_predictions_with_background").shape(), (Shape{1, 192, 2}));
  // Every slot of the proposals' NMS (first_stage_max_proposals, more than the anchors here).
  const int64_t proposals = 300;
  EXPECT_EQ(out.at("refined_box_encodings").shape(), (Shape{proposals, 90, 4}));
  EXPECT_EQ(out.at("class_predictions_with_background").shape(), (Shape{proposals, 91}));
  EXPECT_EQ(shape_of(ctx, "FirstStageFeatureExtractor/resnet_v1_50/conv1/weights"),
            (Shape{7, 7, 3, 64}));
  EXPECT_EQ(shape_of(ctx,
                     "FirstStageFeatureExtractor/resnet_v1_50/block3/unit_6/bottleneck_v1/conv3/"
                     "weights"),
            (Shape{1, 1, 256, 1024}));
  EXPECT_EQ(shape_of(ctx, "Conv/weights"), (Shape{3, 3, 1024, 512}));
  EXPECT_EQ(shape_of(ctx, "Conv/biases"), (Shape{512}));
  EXPECT_EQ(shape_of(ctx, "FirstStageBoxPredictor/BoxEncodingPredictor/weights"),
            (Shape{1, 1, 512, 48}));
  EXPECT_EQ(shape_of(ctx, "FirstStageBoxPredictor/ClassPredictor/weights"), (Shape{1, 1, 512, 24}));
  EXPECT_EQ(shape_of(ctx,
                     "SecondStageFeatureExtractor/resnet_v1_50/block4/unit_1/bottleneck_v1/"
                     "shortcut/weights"),
            (Shape{1, 1, 1024, 2048}));
  EXPECT_EQ(shape_of(ctx,
                     "SecondStageFeatureExtractor/resnet_v1_50/block4/unit_3/bottleneck_v1/conv2/"
                     "BatchNorm/moving_variance"),
            (Shape{512}));
  EXPECT_EQ(shape_of(ctx, "SecondStageBoxPredictor/BoxEncodingPredictor/weights"),
            (Shape{2048, 360}));
  EXPECT_EQ(shape_of(ctx, "SecondStageBoxPredictor/ClassPredictor/biases"), (Shape{91}));
  EXPECT_EQ(ctx.find("FirstStageFeatureExtractor/resnet_v1_50/block4/unit_1/bottleneck_v1/conv1/"
                     "weights"),
            nullptr);
  EXPECT_EQ(ctx.find("Conv/BatchNorm/beta"), nullptr) << "the sample's RPN has no normalizer";
}

// Losses at initialization: the RPN's objectness loss is the softmax cross entropy of near-zero
// logits, ln 2, averaged over each image's minibatch (so ln 2 whatever the minibatch's size);
// training samples at most second_stage_batch_size proposals with at most a quarter positive.
TEST(FasterRcnnMetaArch, LossesAreNormalizedByTheMinibatchAndProposalsAreSampled) {
  FakeModelContext ctx(cpu(), /*num_classes=*/3, /*seed=*/3, /*initializer_seed=*/5);
  auto model = make_frcnn(small_options());
  model->provide_groundtruth(two_boxes(cpu(), 2, 3));
  const PreprocessedImages pre = model->preprocess(ctx, images(cpu(), 2, 96, 96));
  const TensorDict prediction = model->predict(ctx, pre, Mode::kTrain);
  // Training drops the anchors that leave the image: of 6 x 6 x 6, those inside.
  const int64_t kept = prediction.at("rpn_box_encodings").shape()[1];
  EXPECT_LT(kept, 6 * 6 * 6);
  EXPECT_GT(kept, 0);
  const std::vector<float> anchors = prediction.at("anchors").to_vector<float>();
  for (float v : anchors) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LE(v, 1.0f);
  }
  // The sampled proposals: at most 8 per image, at most 2 of them positive (IoU >= 0.5 with a
  // groundtruth box), and the box classifier runs on exactly those.
  const std::vector<int32_t> counts = prediction.at("num_proposals").to_vector<int32_t>();
  const std::vector<float> boxes = prediction.at("proposal_boxes_normalized").to_vector<float>();
  const int64_t slots = prediction.at("proposal_boxes_normalized").shape()[1];
  const std::vector<float> gt = {0.1f, 0.1f, 0.5f, 0.45f, 0.4f, 0.5f, 0.9f, 0.95f};
  auto iou = [](const float* a, const float* b) {
    const float h = std::max(0.0f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
    const float w = std::max(0.0f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
    const float inter = h * w;
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter);
  };
  int64_t total = 0;
  for (int64_t b = 0; b < 2; ++b) {
    const int32_t n = counts[static_cast<std::size_t>(b)];
    EXPECT_GT(n, 0);
    EXPECT_LE(n, 8);
    total += n;
    int positives = 0;
    for (int32_t i = 0; i < n; ++i) {
      const float* box = boxes.data() + (b * slots + i) * 4;
      if (iou(box, gt.data()) >= 0.5f || iou(box, gt.data() + 4) >= 0.5f) ++positives;
    }
    EXPECT_LE(positives, 2) << "image " << b;
  }
  EXPECT_EQ(prediction.at("class_predictions_with_background").shape(), (Shape{total, 4}));
  const TensorDict losses = model->loss(ctx, prediction, pre.true_image_shapes);
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_NEAR(value_of(losses.at("Loss/RPNLoss/objectness_loss")), std::log(2.0), 0.02);
  for (const auto& [name, loss] : losses) {
    const double v = value_of(loss);
    EXPECT_TRUE(std::isfinite(v) && v >= 0.0) << name << " = " << v;
  }
  EXPECT_GT(value_of(losses.at("Loss/BoxClassifierLoss/classification_loss")), 0.1);
}

// SGD on the loss dict fits two images; post-processing then gives the API's four outputs,
// boxes inside the image, and the boxes of the groundtruth among the top detections.
TEST(FasterRcnnMetaArch, TrainsOnATinyBatchAndPostprocessGivesTheApisOutputs) {
  FakeModelContext ctx(cpu(), /*num_classes=*/3, /*seed=*/0, /*initializer_seed=*/7);
  auto model = make_frcnn(small_options());
  const Tensor batch = images(cpu(), 2, 96, 96);
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 30; ++step) {
    ctx.set_seed(static_cast<uint64_t>(step));
    model->provide_groundtruth(two_boxes(cpu(), 2, 3));
    const PreprocessedImages pre = model->preprocess(ctx, batch);
    const TensorDict prediction = model->predict(ctx, pre, Mode::kTrain);
    const TensorDict losses = model->loss(ctx, prediction, pre.true_image_shapes);
    std::vector<Tensor> parts;
    for (const auto& [name, loss] : losses) parts.push_back(loss);
    Tensor total = parts[0];
    for (std::size_t i = 1; i < parts.size(); ++i) total = ops::add(total, parts[i]);
    const double value = value_of(total);
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
      ops::assign(v, ops::sub(v, ops::mul(grads[i], 0.1)));
    }
  }
  EXPECT_LT(last, 0.6 * first) << "first loss " << first << ", last " << last;

  NoGradScope no_grad;
  const PreprocessedImages pre = model->preprocess(ctx, batch);
  const TensorDict prediction = model->predict(ctx, pre, Mode::kEval);
  const TensorDict d = model->postprocess(ctx, prediction, pre.true_image_shapes);
  EXPECT_EQ(d.at("detection_boxes").shape(), (Shape{2, 300, 4}));
  EXPECT_EQ(d.at("detection_scores").shape(), (Shape{2, 300}));
  EXPECT_EQ(d.at("detection_classes").shape(), (Shape{2, 300}));
  EXPECT_EQ(d.at("num_detections").shape(), (Shape{2}));
  const std::vector<float> counts = d.at("num_detections").to_vector<float>();
  const std::vector<float> boxes = d.at("detection_boxes").to_vector<float>();
  const std::vector<float> classes = d.at("detection_classes").to_vector<float>();
  ASSERT_GT(counts[0], 0.0f);
  for (int64_t i = 0; i < static_cast<int64_t>(counts[0]) * 4; ++i) {
    EXPECT_GE(boxes[static_cast<std::size_t>(i)], 0.0f);
    EXPECT_LE(boxes[static_cast<std::size_t>(i)], 1.0f);
  }
  EXPECT_GE(classes[0], 0.0f);
  EXPECT_LT(classes[0], 3.0f);
}

// In inference the second stage runs, as the API's predict, on every slot of the proposals' NMS
// ([B * M] rows, an image's zero rows past its num_proposals too), postprocess keeps each image's
// first num_proposals (a padded slot's class scores never pass the threshold), and loss sees the
// real proposals only. All of it is ops, so the SavedModel export holds both stages: two NMS
// loops (one NonMaxSuppressionV5 for the proposals, one per class for the detections),
// CropAndResize of every slot with its image index computed from the rows (FloorDiv of a Range).
TEST(FasterRcnnMetaArch, InferenceRunsEverySlotAsOpsThatTheSavedModelExportHolds) {
  FakeModelContext ctx(cpu(), /*num_classes=*/3, /*seed=*/0, /*initializer_seed=*/7);
  Opts o = small_options();
  o["first_stage_nms_iou_threshold"] = 0.01;  // fewer proposals than slots: padding
  auto model = make_frcnn(o);
  {
    NoGradScope no_grad;
    const PreprocessedImages pre = model->preprocess(ctx, images(cpu(), 2, 96, 96));
    const TensorDict prediction = model->predict(ctx, pre, Mode::kEval);
    EXPECT_EQ(prediction.at("refined_box_encodings").shape(), (Shape{2 * 20, 3, 4}));
    EXPECT_EQ(prediction.at("proposal_boxes_normalized").shape(), (Shape{2, 20, 4}));
    const std::vector<int32_t> num = prediction.at("num_proposals").to_vector<int32_t>();
    EXPECT_GT(num[0], 0);
    ASSERT_LT(num[0], 20) << "no padded slot to leave out";
    // The slots past num_proposals are zero boxes.
    const std::vector<float> slots = prediction.at("proposal_boxes_normalized").to_vector<float>();
    for (std::size_t i = static_cast<std::size_t>(num[0]) * 4; i < 20 * 4; ++i) {
      EXPECT_EQ(slots[i], 0.0f) << i;
    }
    const TensorDict d = model->postprocess(ctx, prediction, pre.true_image_shapes);
    // Every detection is of a real proposal: one of the first num_proposals slots' boxes, so no
    // more than 3 classes x num_proposals of them.
    const std::vector<float> counts = d.at("num_detections").to_vector<float>();
    EXPECT_GT(counts[0], 0.0f);
    EXPECT_LE(counts[0], 3.0f * static_cast<float>(num[0]));
    model->provide_groundtruth(two_boxes(cpu(), 2, 3));
    const TensorDict losses = model->loss(ctx, prediction, pre.true_image_shapes);
    EXPECT_TRUE(std::isfinite(value_of(losses.at("Loss/BoxClassifierLoss/classification_loss"))));
  }
  auto fixed = make_frcnn(fixed_shape(o, 96));
  SavedModelExportOptions options;
  options.model_name = "FasterRCNNMetaArch";
  const DetectionSavedModel e = detection_saved_model_contents(*fixed, ctx, {96, 96, 3}, options);
  wire::tf::SavedModel saved;
  ASSERT_TRUE(saved.ParseFromString(e.saved_model.saved_model_pb));
  const wire::tf::GraphDef& graph = saved.meta_graphs(0).graph_def();
  auto count = [](const auto& nodes, const std::string& op) {
    int n = 0;
    for (const auto& node : nodes) n += node.op() == op;
    return n;
  };
  EXPECT_EQ(count(graph.node(), "While"), 2);
  EXPECT_EQ(count(graph.node(), "CropAndResize"), 1);
  EXPECT_EQ(count(graph.node(), "FloorDiv"), 1 + 2);  // box_ind, and each NMS's slot -> class
  int nms = 0;
  for (const auto& f : graph.library().function())
    nms += count(f.node_def(), "NonMaxSuppressionV5");
  EXPECT_EQ(nms, 1 + 3);
  const auto& outputs = saved.meta_graphs(0).signature_def().at("serving_default").outputs();
  EXPECT_EQ(outputs.at("detection_boxes").tensor_shape().dim(1).size(), 300);
}

// The ONNX export holds both stages as well: the proposals' NMS and the detections' (one
// NonMaxSuppression each; the detections' takes each image's classes as images of their own, a
// box per class), and CropAndResize composed of ONNX ops (no RoiAlign, which samples otherwise):
// the four pixels of each sample gathered, each box's image computed from a Range of its rows.
TEST(FasterRcnnMetaArch, TheOnnxExportHoldsBothStagesWithTheCropsComposed) {
  FakeModelContext ctx(cpu(), /*num_classes=*/3, /*seed=*/0, /*initializer_seed=*/7);
  auto model = make_frcnn(fixed_shape(small_options(), 96));
  OnnxExportOptions options;
  options.model_name = "FasterRCNNMetaArch";
  wire::onnx::ModelProto exported;
  ASSERT_TRUE(
      exported.ParseFromString(detection_onnx_model_bytes(*model, ctx, {96, 96, 3}, options)));
  std::map<std::string, int> ops;
  for (const auto& node : exported.graph().node()) ++ops[node.op_type()];
  EXPECT_EQ(ops["NonMaxSuppression"], 2);
  EXPECT_EQ(ops["RoiAlign"], 0);
  EXPECT_EQ(ops["Range"], 1);
  EXPECT_GE(ops["Gather"], 4);
  ASSERT_EQ(exported.graph().output_size(), 4);
  const auto& boxes = exported.graph().output(0);
  EXPECT_EQ(boxes.name(), "detection_boxes");
  EXPECT_EQ(boxes.type().tensor_type().shape().dim(0).dim_param(), "N");
  EXPECT_EQ(boxes.type().tensor_type().shape().dim(1).dim_value(), 300);
}

// number_of_stages 1: the RPN alone, two losses, and its proposals (class 0) as detections.
TEST(FasterRcnnMetaArch, OneStageIsTheRpn) {
  FakeModelContext ctx(cpu(), /*num_classes=*/3, /*seed=*/0, /*initializer_seed=*/5);
  Opts o = small_options();
  o["number_of_stages"] = int64_t{1};
  auto model = make_frcnn(o);
  model->provide_groundtruth(two_boxes(cpu(), 1, 3));
  const PreprocessedImages pre = model->preprocess(ctx, images(cpu(), 1, 96, 96));
  const TensorDict train = model->predict(ctx, pre, Mode::kTrain);
  EXPECT_EQ(train.count("refined_box_encodings"), 0u);
  const TensorDict losses = model->loss(ctx, train, pre.true_image_shapes);
  EXPECT_EQ(losses.size(), 2u);
  EXPECT_EQ(losses.count("Loss/RPNLoss/localization_loss"), 1u);

  NoGradScope no_grad;
  const TensorDict eval = model->predict(ctx, pre, Mode::kEval);
  const TensorDict d = model->postprocess(ctx, eval, pre.true_image_shapes);
  EXPECT_EQ(d.at("detection_boxes").shape(), (Shape{1, 20, 4}));
  const float count = d.at("num_detections").to_vector<float>()[0];
  EXPECT_GT(count, 0.0f);
  EXPECT_LE(count, 20.0f);
  const std::vector<float> classes = d.at("detection_classes").to_vector<float>();
  EXPECT_TRUE(std::all_of(classes.begin(), classes.end(), [](float c) { return c == 0.0f; }));
  // Proposals come best first.
  const std::vector<float> scores = d.at("detection_scores").to_vector<float>();
  EXPECT_TRUE(std::is_sorted(scores.begin(), scores.begin() + static_cast<int64_t>(count),
                             std::greater<float>()));
}

// hard_example_miner: no proposal sampling in training (the box classifier sees every proposal)
// and the second stage's losses sum the mined proposals only: at most num_hard_examples of them,
// so no more than every proposal's (an IoU threshold of 1 and no limit).
TEST(FasterRcnnMetaArch, HardExampleMinerSumsTheMinedProposals) {
  FakeModelContext ctx(cpu(), /*num_classes=*/3, /*seed=*/0, /*initializer_seed=*/5);
  std::map<std::string, double> cls, loc;
  int64_t proposals = 0;
  for (const int64_t examples : {int64_t{2}, int64_t{0}}) {
    Opts o = small_options();
    o["hard_example_miner"] = true;
    o["hard_example_miner.num_hard_examples"] = examples;
    o["hard_example_miner.iou_threshold"] = examples == 0 ? 1.0 : 0.7;
    auto model = make_frcnn(o);
    model->provide_groundtruth(two_boxes(cpu(), 2, 3));
    const PreprocessedImages pre = model->preprocess(ctx, images(cpu(), 2, 96, 96));
    const TensorDict prediction = model->predict(ctx, pre, Mode::kTrain);
    const std::vector<int32_t> counts = prediction.at("num_proposals").to_vector<int32_t>();
    proposals = counts[0] + counts[1];
    EXPECT_EQ(prediction.at("refined_box_encodings").shape()[0], proposals);
    const TensorDict losses = model->loss(ctx, prediction, pre.true_image_shapes);
    const std::string key = examples == 0 ? "all" : "mined";
    cls[key] = value_of(losses.at("Loss/BoxClassifierLoss/classification_loss"));
    loc[key] = value_of(losses.at("Loss/BoxClassifierLoss/localization_loss"));
  }
  EXPECT_GT(proposals, 2 * 8) << "more proposals than second_stage_batch_size: none sampled";
  EXPECT_GT(cls["mined"], 0.0);
  EXPECT_LT(cls["mined"], cls["all"]);
  EXPECT_LE(loc["mined"], loc["all"]);
}

// As the API's restore_map(fine_tune_checkpoint_type, load_all_detection_checkpoint_vars):
// load_all_detection_checkpoint_vars widens a detection checkpoint's map to every variable and
// leaves a classification checkpoint's alone.
TEST(FasterRcnnMetaArch, RestoreMapIsTheApisExtractorScopes) {
  auto model = make_frcnn(sample_options(64));
  using Scopes = std::map<std::string, std::string>;
  EXPECT_EQ(model->restore_map("detection", false),
            (Scopes{{"FirstStageFeatureExtractor/", "FirstStageFeatureExtractor/"},
                    {"SecondStageFeatureExtractor/", "SecondStageFeatureExtractor/"}}));
  EXPECT_EQ(model->restore_map("detection", true), (Scopes{{"", ""}}));
  const Scopes classification{{"FirstStageFeatureExtractor/", ""},
                              {"SecondStageFeatureExtractor/", ""}};
  EXPECT_EQ(model->restore_map("classification", false), classification);
  EXPECT_EQ(model->restore_map("classification", true), classification);
  EXPECT_THROW(model->restore_map("segmentation", false), InvalidArgument);
  EXPECT_THROW(model->restore_map("segmentation", true), InvalidArgument);
}

TEST(FasterRcnnMetaArch, UnsupportedValuesNameTheOption) {
  const std::vector<std::pair<std::string, OptionValue>> cases = {
      {"number_of_stages", int64_t{3}},
      {"feature_extractor.type", std::string("faster_rcnn_nas")},
      {"feature_extractor.first_stage_features_stride", int64_t{32}},
      {"hard_example_miner.loss_type", std::string("BOTHER")},
      {"second_stage_box_predictor.mask_rcnn_box_predictor.box_code_size", int64_t{5}},
      {"first_stage_anchor_generator.grid_anchor_generator.scales", std::vector<double>{}},
      {"second_stage_post_processing.logit_scale", 0.0},
      {"first_stage_box_predictor_conv_hyperparams.op", std::string("FC")},
      {"image_resizer.keep_aspect_ratio_resizer.max_dimension", int64_t{10}},
      {"second_stage_no_such_field", 1.0},
      {"second_stage_batch_size", int64_t{301}},
  };
  for (const auto& [key, value] : cases) {
    Opts o = sample_options(64);
    o[key] = value;
    if (key.starts_with("hard_example_miner.")) o["hard_example_miner"] = true;
    try {
      make_frcnn(o);
      ADD_FAILURE() << key << " was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(key), std::string::npos) << key << ": " << what;
    }
  }
}

// Created with no options (as `trainyard plugins check` does), the model is the API's sample:
// faster_rcnn_resnet50 at stride 16 with the protos' defaults.
TEST(FasterRcnnMetaArch, DefaultsAreTheSamplesExtractor) {
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  auto model = make_frcnn({});
  NoGradScope no_grad;
  const PreprocessedImages pre = model->preprocess(ctx, images(cpu(), 1, 40, 40));
  EXPECT_EQ(pre.images.shape(), (Shape{1, 600, 600, 3}));  // keep_aspect_ratio_resizer 600
  EXPECT_NO_THROW(model->restore_map("classification", false));
}

}  // namespace
}  // namespace trainyard
