// FasterRCNNMetaArch with a mask_rcnn_box_predictor that predicts instance masks (Mask R-CNN),
// created through the plugin registry: the mask loss key and its weight, training that fits a
// tiny batch's masks, detection_masks from post-processing, and the error for a batch without
// groundtruth masks. (The mask head, targets and loss are pinned to the API's numbers by
// detection_parts_test's MaskRcnnMaskHead and MaskRcnnMaskLoss, the meta-architecture's mask_loss
// and detection_masks by faster_rcnn_meta_arch_golden_test's MaskRcnn cases.)
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

// A small Mask R-CNN: the MobileNet extractor on 64-pixel images, 6 x 6 masks of 3 classes.
Opts mask_options(double mask_weight = 1.0) {
  Opts o;
  o["number_of_stages"] = int64_t{3};
  o["image_resizer"] = std::string("keep_aspect_ratio_resizer");
  o["image_resizer.keep_aspect_ratio_resizer.min_dimension"] = int64_t{64};
  o["image_resizer.keep_aspect_ratio_resizer.max_dimension"] = int64_t{64};
  o["feature_extractor"] = true;
  o["feature_extractor.type"] = std::string("faster_rcnn_mobilenet_v1");
  o["feature_extractor.first_stage_features_stride"] = int64_t{16};
  const std::string a = "first_stage_anchor_generator.grid_anchor_generator";
  o["first_stage_anchor_generator"] = std::string("grid_anchor_generator");
  o[a + ".height"] = int64_t{32};
  o[a + ".width"] = int64_t{32};
  o[a + ".height_stride"] = int64_t{16};
  o[a + ".width_stride"] = int64_t{16};
  o[a + ".scales"] = std::vector<double>{1.0, 2.0};
  o[a + ".aspect_ratios"] = std::vector<double>{1.0};
  o["first_stage_box_predictor_depth"] = int64_t{16};
  o["first_stage_minibatch_size"] = int64_t{16};
  o["first_stage_max_proposals"] = int64_t{10};
  o["second_stage_batch_size"] = int64_t{8};
  o["initial_crop_size"] = int64_t{6};
  o["second_stage_box_predictor"] = std::string("mask_rcnn_box_predictor");
  const std::string p = "second_stage_box_predictor.mask_rcnn_box_predictor.";
  o[p + "predict_instance_masks"] = true;
  o[p + "conv_hyperparams"] = true;
  o[p + "conv_hyperparams.initializer"] = std::string("truncated_normal_initializer");
  o[p + "conv_hyperparams.initializer.truncated_normal_initializer.stddev"] = 0.1;
  o[p + "mask_height"] = int64_t{6};
  o[p + "mask_width"] = int64_t{6};
  o[p + "mask_prediction_conv_depth"] = int64_t{8};
  o["second_stage_post_processing"] = true;
  o["second_stage_post_processing.batch_non_max_suppression"] = true;
  o["second_stage_post_processing.batch_non_max_suppression.max_detections_per_class"] = int64_t{5};
  o["second_stage_post_processing.batch_non_max_suppression.max_total_detections"] = int64_t{5};
  o["second_stage_post_processing.score_converter"] = std::string("SOFTMAX");
  o["second_stage_mask_prediction_loss_weight"] = mask_weight;
  return o;
}

std::shared_ptr<DetectionModel> make_frcnn(const Opts& options) {
  return test::plugin_registry().create<DetectionModel>(ClassKind::kDetectionModel,
                                                        "FasterRCNNMetaArch", options);
}

Tensor images(int64_t n) {
  std::vector<float> pixels(static_cast<std::size_t>(n * 64 * 64 * 3));
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<float>(127.5 + 120.0 * std::sin(0.013 * static_cast<double>(i)));
  }
  return Tensor::from_vector(cpu(), Shape{n, 64, 64, 3}, pixels);
}

// One box per image (class 1 of 3) whose mask is the disc inscribed in it, on 64 x 64 planes.
Groundtruth one_box(int64_t n) {
  Groundtruth gt;
  for (int64_t i = 0; i < n; ++i) {
    gt.boxes.push_back(
        Tensor::from_vector(cpu(), Shape{1, 4}, std::vector<float>{0.2f, 0.2f, 0.8f, 0.8f}));
    gt.classes.push_back(Tensor::from_vector(cpu(), Shape{1, 3}, std::vector<float>{0, 1, 0}));
  }
  return gt;
}

// The dict loss() gets from the host: the prediction and each image's masks.
TensorDict with_masks(TensorDict prediction, int64_t n) {
  std::vector<uint8_t> disc(64 * 64);
  for (int y = 0; y < 64; ++y) {
    for (int x = 0; x < 64; ++x) {
      const double dy = (y - 31.5) / 19.2;
      const double dx = (x - 31.5) / 19.2;
      disc[static_cast<std::size_t>(y * 64 + x)] = dy * dy + dx * dx <= 1.0 ? 1 : 0;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    prediction["groundtruth_instance_masks/" + std::to_string(i)] =
        Tensor::from_vector(cpu(), Shape{1, 64, 64}, disc);
  }
  return prediction;
}

double value_of(const Tensor& t) {
  NoGradScope no_grad;
  return ops::cast(t, DType::kF64).to_vector<double>()[0];
}

TEST(MaskRcnnMetaArch, AddsTheMaskLossTimesItsWeight) {
  double losses[2] = {0.0, 0.0};
  const double weights[2] = {1.0, 2.5};
  for (int k = 0; k < 2; ++k) {
    FakeModelContext ctx(cpu(), /*num_classes=*/3, /*seed=*/1, /*initializer_seed=*/5);
    auto model = make_frcnn(mask_options(weights[k]));
    model->provide_groundtruth(one_box(2));
    const PreprocessedImages pre = model->preprocess(ctx, images(2));
    const TensorDict prediction = model->predict(ctx, pre, Mode::kTrain);
    const Tensor& masks = prediction.at("mask_predictions");
    EXPECT_EQ(masks.shape()[0], prediction.at("refined_box_encodings").shape()[0]);
    EXPECT_EQ(masks.shape().dims().size(), 4u);
    EXPECT_EQ(masks.shape()[1], 3);
    EXPECT_EQ(masks.shape()[2], 6);
    EXPECT_EQ(ctx.at("SecondStageBoxPredictor/Conv/weights").value().shape(),
              (Shape{3, 3, 1024, 8}));
    EXPECT_EQ(ctx.at("SecondStageBoxPredictor/Conv_1/weights").value().shape(),
              (Shape{3, 3, 8, 3}));
    const TensorDict d = model->loss(ctx, with_masks(prediction, 2), pre.true_image_shapes);
    losses[k] = value_of(d.at("Loss/BoxClassifierLoss/mask_loss"));
    // Near-zero logits at initialization: about ln 2 per pixel of the positives.
    EXPECT_GT(losses[k], 0.3 * weights[k]);
  }
  EXPECT_NEAR(losses[1], 2.5 * losses[0], 1e-5 * losses[1]);
}

// As the API: masks are its third stage, so two stages with the mask head predict none.
TEST(MaskRcnnMetaArch, TwoStagesPredictNoMasks) {
  FakeModelContext ctx(cpu(), 3, 1, 5);
  Opts o = mask_options();
  o["number_of_stages"] = int64_t{2};
  auto model = make_frcnn(o);
  model->provide_groundtruth(one_box(1));
  const PreprocessedImages pre = model->preprocess(ctx, images(1));
  const TensorDict prediction = model->predict(ctx, pre, Mode::kTrain);
  EXPECT_EQ(prediction.count("mask_predictions"), 0u);
  const TensorDict d = model->loss(ctx, with_masks(prediction, 1), pre.true_image_shapes);
  EXPECT_EQ(d.count("Loss/BoxClassifierLoss/mask_loss"), 0u);
}

TEST(MaskRcnnMetaArch, RefusesThreeStagesWithoutTheMaskHead) {
  Opts o = mask_options();
  o["second_stage_box_predictor.mask_rcnn_box_predictor.predict_instance_masks"] = false;
  std::string m = "(no error)";
  try {
    make_frcnn(o);
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("number_of_stages is '3'"), std::string::npos) << m;
  EXPECT_NE(m.find("predict_instance_masks"), std::string::npos) << m;
}

TEST(MaskRcnnMetaArch, RefusesABatchWithoutGroundtruthMasks) {
  FakeModelContext ctx(cpu(), 3, 1, 5);
  auto model = make_frcnn(mask_options());
  model->provide_groundtruth(one_box(1));
  const PreprocessedImages pre = model->preprocess(ctx, images(1));
  const TensorDict prediction = model->predict(ctx, pre, Mode::kTrain);
  std::string m = "(no error)";
  try {
    model->loss(ctx, prediction, pre.true_image_shapes);
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("load_instance_masks"), std::string::npos) << m;
}

// SGD on the losses fits the masks; post-processing then gives detection_masks, each the
// sigmoid of its detection's class's mask, and the top detection's mask is the disc's crop.
TEST(MaskRcnnMetaArch, TrainsTheMaskHeadAndPostprocessGivesDetectionMasks) {
  FakeModelContext ctx(cpu(), 3, 0, 7);
  auto model = make_frcnn(mask_options());
  const Tensor batch = images(2);
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 10; ++step) {
    ctx.set_seed(static_cast<uint64_t>(step));
    model->provide_groundtruth(one_box(2));
    const PreprocessedImages pre = model->preprocess(ctx, batch);
    const TensorDict prediction = model->predict(ctx, pre, Mode::kTrain);
    const TensorDict losses = model->loss(ctx, with_masks(prediction, 2), pre.true_image_shapes);
    Tensor total = losses.at("Loss/BoxClassifierLoss/mask_loss");
    const double mask = value_of(total);
    ASSERT_TRUE(std::isfinite(mask)) << "step " << step;
    if (step == 0) first = mask;
    last = mask;
    for (const auto& [name, loss] : losses) {
      if (name != "Loss/BoxClassifierLoss/mask_loss") total = ops::add(total, loss);
    }
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
  EXPECT_LT(last, 0.9 * first) << "first mask loss " << first << ", last " << last;

  NoGradScope no_grad;
  const PreprocessedImages pre = model->preprocess(ctx, batch);
  const TensorDict prediction = model->predict(ctx, pre, Mode::kEval);
  EXPECT_EQ(prediction.count("mask_predictions"), 0u) << "inference masks the detections";
  const TensorDict d = model->postprocess(ctx, prediction, pre.true_image_shapes);
  ASSERT_EQ(d.at("detection_masks").shape(), (Shape{2, 5, 6, 6}));
  const std::vector<float> masks = d.at("detection_masks").to_vector<float>();
  const std::vector<float> counts = d.at("num_detections").to_vector<float>();
  ASSERT_GT(counts[0], 0.0f);
  for (std::size_t i = 0; i < masks.size(); ++i) {
    const std::size_t detection = i / 36;
    if (static_cast<float>(detection % 5) < counts[detection / 5]) {
      ASSERT_GT(masks[i], 0.0f) << i;
      ASSERT_LT(masks[i], 1.0f) << i;
    } else {
      ASSERT_EQ(masks[i], 0.0f) << i << ": past num_detections";
    }
  }
}

// The third stage in inference is ops like the rest, so a SavedModel export of Mask R-CNN holds
// it: exporter.py's fifth output detection_masks [-1, M, mask_height, mask_width], the masks'
// crops a second CropAndResize (of every detection slot) and the mask head's resize a third; the
// ONNX export has the same output.
TEST(MaskRcnnMetaArch, TheSavedModelAndOnnxExportsHaveDetectionMasks) {
  FakeModelContext ctx(cpu(), 3, 0, 7);
  Opts o = mask_options();
  o.erase("image_resizer.keep_aspect_ratio_resizer.min_dimension");
  o.erase("image_resizer.keep_aspect_ratio_resizer.max_dimension");
  o["image_resizer"] = std::string("fixed_shape_resizer");
  o["image_resizer.fixed_shape_resizer.height"] = int64_t{64};
  o["image_resizer.fixed_shape_resizer.width"] = int64_t{64};
  auto model = make_frcnn(o);
  SavedModelExportOptions options;
  options.model_name = "FasterRCNNMetaArch";
  const DetectionSavedModel e = detection_saved_model_contents(*model, ctx, {64, 64, 3}, options);
  EXPECT_EQ(e.mask_size, (std::vector<int64_t>{6, 6}));
  wire::tf::SavedModel saved;
  ASSERT_TRUE(saved.ParseFromString(e.saved_model.saved_model_pb));
  const auto& outputs = saved.meta_graphs(0).signature_def().at("serving_default").outputs();
  ASSERT_EQ(outputs.count("detection_masks"), 1u);
  const auto& shape = outputs.at("detection_masks").tensor_shape();
  ASSERT_EQ(shape.dim_size(), 4);
  EXPECT_EQ(shape.dim(0).size(), -1);
  EXPECT_EQ(shape.dim(1).size(), 5);
  EXPECT_EQ(shape.dim(2).size(), 6);
  EXPECT_EQ(shape.dim(3).size(), 6);
  int crops = 0;
  bool named = false;
  for (const auto& node : saved.meta_graphs(0).graph_def().node()) {
    crops += node.op() == "CropAndResize";
    named = named || (node.name() == "detection_masks" && node.op() == "Identity");
  }
  EXPECT_EQ(crops, 3);  // the proposals, the detections, the mask head's resize of its features
  EXPECT_TRUE(named);

  // And the ONNX export: the same fifth output, [N, M, mask_height, mask_width].
  OnnxExportOptions onnx_options;
  onnx_options.model_name = "FasterRCNNMetaArch";
  wire::onnx::ModelProto exported;
  ASSERT_TRUE(
      exported.ParseFromString(detection_onnx_model_bytes(*model, ctx, {64, 64, 3}, onnx_options)));
  ASSERT_EQ(exported.graph().output_size(), 5);
  const auto& masks = exported.graph().output(4);
  EXPECT_EQ(masks.name(), "detection_masks");
  const auto& dims = masks.type().tensor_type().shape().dim();
  ASSERT_EQ(dims.size(), 4);
  EXPECT_EQ(dims[0].dim_param(), "N");
  EXPECT_EQ(dims[1].dim_value(), 5);
  EXPECT_EQ(dims[2].dim_value(), 6);
  EXPECT_EQ(dims[3].dim_value(), 6);
}

}  // namespace
}  // namespace trainyard
