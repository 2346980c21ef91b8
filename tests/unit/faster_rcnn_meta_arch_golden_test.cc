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
// each proposal from it with position_sensitive_crop_regions. The MaskRcnn cases do the same with
// the API's FasterRCNNMetaArch as Mask R-CNN (make_mask_rcnn_goldens.py, mask_rcnn_meta_arch.txt:
// number_of_stages 3, groundtruth instance masks): the five losses with mask_loss, the mask
// head's gradients, detection_masks, and the API's reframe_box_masks_to_image_masks of them.
#include <gtest/gtest.h>

#include <cstddef>
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
#include "trainyard/pkg/detection/instance_masks.h"
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

// Mask R-CNN (make_mask_rcnn_goldens.py, mask_rcnn_meta_arch.txt): golden_options with
// number_of_stages 3 and the predictor's MASK_PREDICTOR, 6 x 7 masks per class.
Opts mask_options() {
  Opts o = golden_options(/*rfcn=*/false);
  o["number_of_stages"] = int64_t{3};
  const std::string p = "second_stage_box_predictor.mask_rcnn_box_predictor.";
  o[p + "predict_instance_masks"] = true;
  o[p + "mask_height"] = int64_t{6};
  o[p + "mask_width"] = int64_t{7};
  o[p + "mask_prediction_conv_depth"] = int64_t{8};
  o[p + "mask_prediction_num_conv_layers"] = int64_t{2};
  o[p + "conv_hyperparams"] = true;
  o[p + "conv_hyperparams.op"] = std::string("CONV");
  o[p + "conv_hyperparams.regularizer"] = std::string("l2_regularizer");
  o[p + "conv_hyperparams.regularizer.l2_regularizer.weight"] = 0.0;
  o[p + "conv_hyperparams.initializer"] = std::string("truncated_normal_initializer");
  o[p + "conv_hyperparams.initializer.truncated_normal_initializer.stddev"] = 0.01;
  return o;
}

// groundtruth_mask() of make_mask_rcnn_goldens.py for each box of an image: [n, 96, 96] u8, the
// pixels whose centre lies in the box on or above its top-left to bottom-right diagonal.
Tensor groundtruth_masks(const std::vector<float>& boxes) {
  const auto n = static_cast<int64_t>(boxes.size() / 4);
  std::vector<uint8_t> masks(static_cast<std::size_t>(n * kImage * kImage), 0);
  for (int64_t k = 0; k < n; ++k) {
    const double y1 = boxes[static_cast<std::size_t>(k * 4)];
    const double x1 = boxes[static_cast<std::size_t>(k * 4 + 1)];
    const double y2 = boxes[static_cast<std::size_t>(k * 4 + 2)];
    const double x2 = boxes[static_cast<std::size_t>(k * 4 + 3)];
    for (int64_t r = 0; r < kImage; ++r) {
      for (int64_t c = 0; c < kImage; ++c) {
        const double v = (static_cast<double>(r) + 0.5) / static_cast<double>(kImage);
        const double u = (static_cast<double>(c) + 0.5) / static_cast<double>(kImage);
        const bool inside = v >= y1 && v <= y2 && u >= x1 && u <= x2;
        const bool upper = (u - x1) * (y2 - y1) >= (v - y1) * (x2 - x1);
        masks[static_cast<std::size_t>((k * kImage + r) * kImage + c)] = inside && upper ? 1 : 0;
      }
    }
  }
  return Tensor::from_vector(cpu(), Shape{n, kImage, kImage}, masks);
}

// The model with the API's variable values, and its preprocessed images.
std::shared_ptr<DetectionModel> mask_model(FakeModelContext& ctx, const test::Goldens& g,
                                           PreprocessedImages& pre) {
  auto model = test::plugin_registry().create<DetectionModel>(ClassKind::kDetectionModel,
                                                              "FasterRCNNMetaArch", mask_options());
  const Tensor images = Tensor::from_vector(cpu(), Shape{kBatch, kImage, kImage, 3},
                                            test::image_values(kBatch, kImage, kImage));
  double sum = 0.0;
  for (double p : host(images)) sum += p;
  test::expect_close("images_sum", {sum}, g.get("images_sum").values, 1e-6);
  {
    NoGradScope no_grad;  // creates the variables (the mask head's in the third stage)
    const PreprocessedImages first = model->preprocess(ctx, images);
    model->postprocess(ctx, model->predict(ctx, first, Mode::kEval), first.true_image_shapes);
  }
  EXPECT_EQ(set_variables(ctx), g.get("num_variables").i64()[0])
      << "the API's model has another number of variables (global_step aside)";
  pre = model->preprocess(ctx, images);
  return model;
}

// Training: the API's loss() with groundtruth masks, its mask_loss among the five (each proposal
// matched by the second stage's target assigner, the matched box's mask cropped to the proposal,
// the mask of the box's class from the one-hot, the groundtruth weights), and the gradients of
// their sum with respect to the mask head.
TEST(FasterRcnnMetaArchGolden, MaskRcnnTrainingLossesAndMaskHeadGradientsAreTheApis) {
  const test::Goldens g("mask_rcnn_meta_arch.txt");
  FakeModelContext ctx(cpu(), kClasses);
  PreprocessedImages pre;
  auto model = mask_model(ctx, g, pre);
  model->provide_groundtruth(groundtruth(cpu(), g));
  TensorDict p = model->predict(ctx, pre, Mode::kTrain);
  ASSERT_EQ(p.at("mask_predictions").shape(), (Shape{kBatch * 64, kClasses, 6, 7}));
  for (int64_t i = 0; i < kBatch; ++i) {
    const std::string k = std::to_string(i);
    const Tensor masks = groundtruth_masks(g.get("groundtruth_boxes_" + k).f32());
    test::expect_close("groundtruth mask sums " + k,
                       host(ops::reduce_sum(ops::cast(masks, DType::kF32), {1, 2})),
                       g.get("groundtruth_mask_sums_" + k).values, 0.0);
    p["groundtruth_instance_masks/" + k] = masks;
  }
  const TensorDict losses = model->loss(ctx, p, pre.true_image_shapes);
  Tensor total;
  for (const std::string& k : {kLosses[0], kLosses[1], kLosses[2], kLosses[3],
                               std::string("Loss/BoxClassifierLoss/mask_loss")}) {
    test::expect_close("train " + k, host(losses.at(k)), g.get("train_" + k).values);
    total = total.defined() ? ops::add(total, losses.at(k)) : losses.at(k);
  }
  const std::vector<std::string> variables = {"SecondStageBoxPredictor/Conv/biases",
                                              "SecondStageBoxPredictor/Conv_1/weights",
                                              "SecondStageBoxPredictor/Conv_1/biases"};
  std::vector<Tensor> sources;
  for (const std::string& n : variables) sources.push_back(ctx.at(n).value());
  const std::vector<Tensor> grads = gradients(total, sources);
  for (std::size_t i = 0; i < variables.size(); ++i) {
    ASSERT_TRUE(grads[i].defined()) << variables[i];
    test::expect_close("train gradient of " + variables[i], host(grads[i]),
                       g.get("train_gradient/" + variables[i]).values);
  }
}

// Whether crop_and_resize (TensorFlow's float arithmetic) of the box `a` and of the box `b`
// along either axis of a `height` x `width` feature map, `crop` samples each, put a sample inside
// the map for one and outside (extrapolated) for the other. A detection on the image's edge
// (clipped to 1) samples the map's last column at (W - 1) plus or minus an ulp: where our box and
// the API's differ by an ulp, one crop reads the column and the other 0, and so do their masks.
bool crop_samples_differ(const float* a, const float* b, int64_t height, int64_t width,
                         int64_t crop) {
  auto inside = [crop](float lo, float hi, int64_t size, int64_t i) {
    const float start = lo * static_cast<float>(size - 1);
    const float scale = (hi - lo) * static_cast<float>(size - 1) / static_cast<float>(crop - 1);
    const float v = start + static_cast<float>(i) * scale;
    return v >= 0.0f && v <= static_cast<float>(size - 1);
  };
  for (int64_t i = 0; i < crop; ++i) {
    if (inside(a[0], a[2], height, i) != inside(b[0], b[2], height, i) ||
        inside(a[1], a[3], width, i) != inside(b[1], b[3], width, i)) {
      return true;
    }
  }
  return false;
}

// Inference: the third stage's detection_masks (each detection's box cropped from the first
// stage's features, the box classifier, the mask head, the detected class's mask, sigmoid) for
// every detection, zeros past num_detections, and the first 4 of each image reframed into 24 x 20
// image masks as the API's reframe_box_masks_to_image_masks pastes them.
TEST(FasterRcnnMetaArchGolden, MaskRcnnInferenceDetectionMasksAreTheApis) {
  const test::Goldens g("mask_rcnn_meta_arch.txt");
  FakeModelContext ctx(cpu(), kClasses);
  PreprocessedImages pre;
  auto model = mask_model(ctx, g, pre);
  NoGradScope no_grad;
  const TensorDict p = model->predict(ctx, pre, Mode::kEval);
  const TensorDict d = model->postprocess(ctx, p, pre.true_image_shapes);
  for (const char* key :
       {"num_detections", "detection_boxes", "detection_scores", "detection_classes"}) {
    test::expect_close(std::string("eval ") + key, host(d.at(key)),
                       g.get(std::string("eval_") + key).values);
  }
  const Tensor& masks = d.at("detection_masks");
  ASSERT_EQ(masks.shape(), (Shape{kBatch, 300, 6, 7}));
  const std::vector<double> all = host(masks);
  const std::vector<float> boxes = d.at("detection_boxes").to_vector<float>();
  const std::vector<float> api_boxes = g.get("eval_detection_boxes").f32();
  const std::vector<double> counts = host(d.at("num_detections"));
  const Shape& features = p.at("rpn_features_to_crop").shape();
  const std::vector<double> want_image_masks = g.get("eval_image_masks").values;
  constexpr int64_t kReframed = 4;
  int64_t compared = 0;
  for (int64_t i = 0; i < kBatch; ++i) {
    const std::string k = std::to_string(i);
    const auto count = static_cast<int64_t>(counts[static_cast<std::size_t>(i)]);
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(i) * 300 * 42;
    const std::vector<double> want = g.get("eval_detection_masks_" + k).values;
    std::vector<double> have_rows, want_rows;
    for (int64_t r = 0; r < count; ++r) {
      const auto at = static_cast<std::size_t>((i * 300 + r) * 4);
      if (crop_samples_differ(&boxes[at], &api_boxes[at], features[1], features[2], 8)) continue;
      have_rows.insert(have_rows.end(), first + r * 42, first + (r + 1) * 42);
      want_rows.insert(want_rows.end(), want.begin() + r * 42, want.begin() + (r + 1) * 42);
      ++compared;
    }
    test::expect_close("eval detection_masks " + k, have_rows, want_rows);
    for (auto it = first + count * 42; it != first + 300 * 42; ++it) {
      ASSERT_EQ(*it, 0.0) << "image " << i << ": a mask past num_detections";
    }
    // Reframed with the API's boxes (ours equal them within 1e-4 above, but a box on the
    // image's edge that differs by an ulp can move reframe's last sample across it too).
    const Tensor box_masks =
        ops::cast(Tensor::from_vector(cpu(), Shape{kReframed, 6, 7},
                                      std::vector<double>(first, first + kReframed * 42)),
                  DType::kF32);
    const std::vector<float> box(api_boxes.begin() + i * 300 * 4,
                                 api_boxes.begin() + (i * 300 + kReframed) * 4);
    const Tensor image_masks =
        detection::reframe_box_masks_to_image_mask_values(box_masks, box, 24, 20);
    const auto image_want = want_image_masks.begin() + i * kReframed * 24 * 20;
    test::expect_close("eval image masks " + k, host(image_masks),
                       {image_want, image_want + kReframed * 24 * 20});
  }
  // All but the few detections on the image's edge.
  EXPECT_GE(compared, static_cast<int64_t>(counts[0] + counts[1]) - 5);
}

}  // namespace
}  // namespace trainyard
