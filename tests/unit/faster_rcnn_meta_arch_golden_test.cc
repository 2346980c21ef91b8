// FasterRCNNMetaArch against the Object Detection API's own FasterRCNNMetaArch: the same tiny
// faster_rcnn_mobilenet_v1 model (3 classes, 96 x 96 images, 6 anchors per location, up to 64
// proposals, minibatches that take every candidate so that the API's random samplers are
// deterministic), the same variable values and images (meta_arch_goldens.h restates
// make_meta_arch_goldens.py's), the same groundtruth. tests/fixtures/detection/
// faster_rcnn_meta_arch.txt holds what the API computed under TensorFlow 2.21: the RPN's
// predictions and anchors, the proposals, the box classifier's predictions, the four losses,
// the gradients of their sum with respect to eight variables of both stages, and postprocess's
// detections, in training and in inference. Every number agrees within 1e-4 (absolute below 1,
// relative above). The R-FCN cases do the same with the API's RFCNMetaArch
// (meta_architectures/rfcn_meta_arch.py, rfcn_meta_arch.txt): the model with an
// rfcn_box_predictor, whose second stage runs the box classifier on the whole feature map and pools
// each proposal from it with position_sensitive_crop_regions.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "meta_arch_goldens.h"
#include "pkg_detection_goldens.h"
#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/registry.h"
#include "trainyard/detection_model.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

constexpr int64_t kImage = 96;
constexpr int64_t kBatch = 2;
constexpr int64_t kClasses = 3;

Backend& cpu() { return *test::backend("cpu"); }

// The faster_rcnn message of make_meta_arch_goldens.py (FRCNN_CONFIG, or RFCN_CONFIG when rfcn),
// flattened as the config converter does.
Opts golden_options(bool rfcn) {
  Opts o;
  o["image_resizer"] = std::string("keep_aspect_ratio_resizer");
  o["image_resizer.keep_aspect_ratio_resizer.min_dimension"] = kImage;
  o["image_resizer.keep_aspect_ratio_resizer.max_dimension"] = kImage;
  o["feature_extractor"] = true;
  o["feature_extractor.type"] = std::string("faster_rcnn_mobilenet_v1");
  o["feature_extractor.first_stage_features_stride"] = int64_t{16};
  const std::string a = "first_stage_anchor_generator.grid_anchor_generator";
  o["first_stage_anchor_generator"] = std::string("grid_anchor_generator");
  o[a + ".scales"] = std::vector<double>{0.5, 1.0};
  o[a + ".aspect_ratios"] = std::vector<double>{0.5, 1.0, 2.0};
  o[a + ".height"] = int64_t{64};
  o[a + ".width"] = int64_t{64};
  o[a + ".height_stride"] = int64_t{16};
  o[a + ".width_stride"] = int64_t{16};
  const std::string rpn = "first_stage_box_predictor_conv_hyperparams";
  o[rpn] = true;
  o[rpn + ".op"] = std::string("CONV");
  o[rpn + ".regularizer"] = std::string("l2_regularizer");
  o[rpn + ".regularizer.l2_regularizer.weight"] = 0.0;
  o[rpn + ".initializer"] = std::string("truncated_normal_initializer");
  o[rpn + ".initializer.truncated_normal_initializer.stddev"] = 0.01;
  o["first_stage_box_predictor_depth"] = int64_t{64};
  o["first_stage_minibatch_size"] = int64_t{256};
  o["first_stage_nms_score_threshold"] = 0.0;
  o["first_stage_nms_iou_threshold"] = 0.7;
  o["first_stage_max_proposals"] = int64_t{64};
  o["first_stage_localization_loss_weight"] = 2.0;
  o["first_stage_objectness_loss_weight"] = 1.0;
  if (rfcn) {
    const std::string r = "second_stage_box_predictor.rfcn_box_predictor";
    o["second_stage_box_predictor"] = std::string("rfcn_box_predictor");
    o[r + ".conv_hyperparams"] = true;
    o[r + ".conv_hyperparams.op"] = std::string("CONV");
    o[r + ".conv_hyperparams.regularizer"] = std::string("l2_regularizer");
    o[r + ".conv_hyperparams.regularizer.l2_regularizer.weight"] = 0.0;
    o[r + ".conv_hyperparams.initializer"] = std::string("truncated_normal_initializer");
    o[r + ".conv_hyperparams.initializer.truncated_normal_initializer.stddev"] = 0.01;
    o[r + ".depth"] = int64_t{32};
    o[r + ".crop_height"] = int64_t{6};
    o[r + ".crop_width"] = int64_t{6};
    o[r + ".num_spatial_bins_height"] = int64_t{3};
    o[r + ".num_spatial_bins_width"] = int64_t{3};
  } else {
    o["initial_crop_size"] = int64_t{8};
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
  }
  o["second_stage_batch_size"] = int64_t{64};
  o["second_stage_balance_fraction"] = 1.0;
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

std::vector<double> host(const Tensor& t) {
  NoGradScope no_grad;
  return ops::cast(t, DType::kF64).to_vector<double>();
}

std::vector<double> scaled(std::vector<double> v, double factor) {
  for (double& x : v) x *= factor;
  return v;
}

int64_t set_variables(FakeModelContext& ctx) {
  int64_t n = 0;
  for (const std::string& name : ctx.variable_names()) {
    const auto value = test::variable_value(name, ctx.at(name).value().shape());
    if (!value) continue;
    ctx.set_value(name, *value);
    ++n;
  }
  return n;
}

Groundtruth groundtruth(Backend& backend, const test::Goldens& g) {
  Groundtruth gt;
  for (int64_t i = 0; i < kBatch; ++i) {
    const std::string k = std::to_string(i);
    const std::vector<int32_t> classes = g.get("groundtruth_classes_" + k).i32();
    const auto n = static_cast<int64_t>(classes.size());
    gt.boxes.push_back(
        Tensor::from_vector(backend, Shape{n, 4}, g.get("groundtruth_boxes_" + k).f32()));
    std::vector<float> one_hot(static_cast<std::size_t>(n * kClasses), 0.0f);
    for (int64_t r = 0; r < n; ++r) {
      one_hot[static_cast<std::size_t>(r * kClasses + classes[static_cast<std::size_t>(r)])] = 1.0f;
    }
    gt.classes.push_back(Tensor::from_vector(backend, Shape{n, kClasses}, one_hot));
  }
  return gt;
}

const std::vector<std::string> kLosses = {
    "Loss/RPNLoss/localization_loss", "Loss/RPNLoss/objectness_loss",
    "Loss/BoxClassifierLoss/localization_loss", "Loss/BoxClassifierLoss/classification_loss"};

// FRCNN_GRADIENTS, or RFCN_GRADIENTS when rfcn.
std::vector<std::string> gradient_variables(bool rfcn) {
  std::vector<std::string> names = {
      "FirstStageFeatureExtractor/MobilenetV1/Conv2d_0/weights",
      "FirstStageFeatureExtractor/MobilenetV1/Conv2d_11_pointwise/BatchNorm/beta",
      "Conv/biases",
      "FirstStageBoxPredictor/BoxEncodingPredictor/biases",
      "FirstStageBoxPredictor/ClassPredictor/weights",
      "SecondStageFeatureExtractor/MobilenetV1/Conv2d_13_pointwise/BatchNorm/beta",
  };
  if (rfcn) {
    names.insert(names.end(), {"SecondStageBoxPredictor/reduce_depth/weights",
                               "SecondStageBoxPredictor/refined_locations/biases",
                               "SecondStageBoxPredictor/class_predictions/weights"});
  } else {
    names.insert(names.end(), {"SecondStageBoxPredictor/BoxEncodingPredictor/biases",
                               "SecondStageBoxPredictor/ClassPredictor/biases"});
  }
  return names;
}

// One run ("train" or "eval") of make_meta_arch_goldens.py's frcnn_goldens (rfcn: its R-FCN case).
void expect_run_is_the_apis(const std::string& run, bool rfcn = false) {
  SCOPED_TRACE(run + (rfcn ? " (R-FCN)" : ""));
  const bool training = run == "train";
  const test::Goldens g(rfcn ? "rfcn_meta_arch.txt" : "faster_rcnn_meta_arch.txt");
  const std::vector<std::string> kGradientVariables = gradient_variables(rfcn);
  auto model = test::plugin_registry().create<DetectionModel>(
      ClassKind::kDetectionModel, "FasterRCNNMetaArch", golden_options(rfcn));
  FakeModelContext ctx(cpu(), kClasses);
  const Tensor images = Tensor::from_vector(cpu(), Shape{kBatch, kImage, kImage, 3},
                                            test::image_values(kBatch, kImage, kImage));
  double sum = 0.0;
  for (double p : host(images)) sum += p;
  test::expect_close("images_sum", {sum}, g.get("images_sum").values, 1e-6);
  {
    NoGradScope no_grad;  // creates the variables
    model->predict(ctx, model->preprocess(ctx, images), Mode::kEval);
  }
  EXPECT_EQ(set_variables(ctx), g.get("num_variables").i64()[0])
      << "the API's model has another number of variables (global_step aside)";

  if (training) model->provide_groundtruth(groundtruth(cpu(), g));
  const PreprocessedImages pre = model->preprocess(ctx, images);
  const TensorDict p = model->predict(ctx, pre, training ? Mode::kTrain : Mode::kEval);
  // The API's anchors and proposals are in pixels of the 96 x 96 image, ours normalized.
  const double pixels = static_cast<double>(kImage);
  test::expect_close(run + " anchors", scaled(host(p.at("anchors")), pixels),
                     g.get(run + "_anchors").values);
  for (const char* key : {"rpn_box_encodings", "rpn_objectness_predictions_with_background"}) {
    test::expect_close(run + " " + key, host(p.at(key)), g.get(run + "_" + key).values);
  }
  test::expect_close(run + " num_proposals", host(p.at("num_proposals")),
                     g.get(run + "_num_proposals").values);
  test::expect_close(run + " proposal_boxes",
                     scaled(host(p.at("proposal_boxes_normalized")), pixels),
                     g.get(run + "_proposal_boxes").values);
  for (const char* key : {"refined_box_encodings", "class_predictions_with_background"}) {
    test::expect_close(run + " " + key, host(p.at(key)), g.get(run + "_" + key).values);
  }
  if (training) {
    const TensorDict losses = model->loss(ctx, p, pre.true_image_shapes);
    Tensor total;
    for (const std::string& k : kLosses) {
      test::expect_close(run + " " + k, host(losses.at(k)), g.get(run + "_" + k).values);
      total = total.defined() ? ops::add(total, losses.at(k)) : losses.at(k);
    }
    std::vector<Tensor> sources;
    for (const std::string& n : kGradientVariables) sources.push_back(ctx.at(n).value());
    const std::vector<Tensor> grads = gradients(total, sources);
    for (std::size_t i = 0; i < kGradientVariables.size(); ++i) {
      ASSERT_TRUE(grads[i].defined()) << kGradientVariables[i];
      test::expect_close(run + " gradient of " + kGradientVariables[i], host(grads[i]),
                         g.get(run + "_gradient/" + kGradientVariables[i]).values);
    }
  }
  NoGradScope no_grad;
  const TensorDict d = model->postprocess(ctx, p, pre.true_image_shapes);
  for (const char* key :
       {"num_detections", "detection_boxes", "detection_scores", "detection_classes"}) {
    test::expect_close(run + " " + key, host(d.at(key)), g.get(run + "_" + key).values);
  }
}

// Training: anchors inside the image, every one in the RPN's minibatch, the 64 proposals in the
// box classifier's; the four losses, the gradients of their sum, and postprocess.
TEST(FasterRcnnMetaArchGolden, TrainingLossesGradientsAndDetectionsAreTheApis) {
  expect_run_is_the_apis("train");
}

// Inference: every anchor (clipped), the 64 best proposals after NMS, postprocess.
TEST(FasterRcnnMetaArchGolden, InferenceProposalsAndDetectionsAreTheApis) {
  expect_run_is_the_apis("eval");
}

// R-FCN (RFCNMetaArch), training: the same proposals, the box classifier on the whole feature
// map, the rfcn_box_predictor's position-sensitive pooling of each, the four losses, the
// gradients (the predictor's three convolutions among them) and postprocess.
TEST(FasterRcnnMetaArchGolden, RfcnTrainingLossesGradientsAndDetectionsAreTheApis) {
  expect_run_is_the_apis("train", /*rfcn=*/true);
}

// R-FCN, inference.
TEST(FasterRcnnMetaArchGolden, RfcnInferenceProposalsAndDetectionsAreTheApis) {
  expect_run_is_the_apis("eval", /*rfcn=*/true);
}

}  // namespace
}  // namespace trainyard
