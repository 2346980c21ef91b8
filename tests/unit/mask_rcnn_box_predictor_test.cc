// Mask R-CNN's mask branch against the Object Detection API's own outputs: the mask head of
// mask_rcnn_box_predictor (tests/golden/make_mask_head_golden.py runs the API's
// MaskRCNNMaskHead under TensorFlow 2.21 and writes tests/golden/mask_head/). Built into
// detection_parts_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "detection_parts.h"
#include "faster_rcnn_meta_arch.h"
#include "mask_rcnn_mask_loss.h"
#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/detection/matcher.h"
#include "trainyard/pkg/detection/region_similarity_calculator.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

Backend& cpu() { return *test::backend("cpu"); }

const std::string kGolden = std::string(TRAINYARD_SOURCE_DIR) + "/tests/golden/mask_head/";

std::vector<double> golden(const std::string& name, std::size_t count) {
  std::ifstream in(kGolden + name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + kGolden + name);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  if (bytes.size() != count * sizeof(float)) {
    throw std::runtime_error(kGolden + name + ": " + std::to_string(bytes.size()) +
                             " bytes, expected " + std::to_string(count * sizeof(float)));
  }
  std::vector<float> values(count);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return {values.begin(), values.end()};
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

constexpr const char* kPredictor = "second_stage_box_predictor.mask_rcnn_box_predictor";

// The script's head: conv_hyperparams ReLU with biases, no batch norm.
Options mask_options(Opts extra) {
  const std::string p = std::string(kPredictor) + ".";
  Opts o = {{p + "predict_instance_masks", true}, {p + "conv_hyperparams", true}};
  for (auto& [k, v] : extra) o[k] = v;
  return Options::resolve("FasterRCNNMetaArch", models::FasterRcnnMetaArch::kOptions, o);
}

// Runs the predictor's mask head on the case's features twice: once to make the variables
// (checked by name and shape, then set to the script's values), once to compare.
void expect_api_masks(const std::string& folder, const Options& options,
                      const std::vector<std::pair<std::string, Shape>>& variables,
                      const Shape& want_shape) {
  const detection::DetectionOptionReader reader(options, "FasterRCNNMetaArch");
  std::unique_ptr<detection::SecondStageBoxPredictor> predictor =
      models::make_mask_rcnn_box_predictor(reader, kPredictor);
  ASSERT_TRUE(predictor->predicts_instance_masks());
  FakeModelContext ctx(cpu(), /*num_classes=*/3);
  const Tensor features =
      ops::cast(Tensor::from_vector(cpu(), Shape{4, 3, 3, 6}, golden(folder + "features.f32", 216)),
                DType::kF32);
  auto predict = [&] {
    layers::VariableScope root(ctx, Mode::kTrain);
    layers::VariableScope scope = root.child("SecondStageBoxPredictor");
    return predictor->predict_instance_masks(scope, features, 3);
  };
  predict();
  EXPECT_EQ(ctx.variable_names().size(), variables.size());
  for (const auto& [name, shape] : variables) {
    ASSERT_EQ(ctx.at(name).value().shape(), shape) << name;
    std::string file = name;
    for (std::size_t at = file.find('/'); at != std::string::npos; at = file.find('/')) {
      file.replace(at, 1, "__");
    }
    ctx.set_value(name,
                  golden(folder + file + ".f32", static_cast<std::size_t>(shape.num_elements())));
  }
  const Tensor got = predict();
  ASSERT_EQ(got.shape(), want_shape);
  const std::vector<float> have = got.to_vector<float>();
  const std::vector<double> want =
      golden(folder + "masks.f32", static_cast<std::size_t>(want_shape.num_elements()));
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(have[i], want[i], 1e-4 * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

TEST(MaskRcnnMaskHead, ResizedFirstGivesTheApisMasksWithItsVariableNames) {
  // mask_prediction_conv_depth 0: the API computes 2^round((2 log2 6 + 3 log2 3) / 5) = 4.
  const std::string p = std::string(kPredictor) + ".";
  expect_api_masks("resize/",
                   mask_options({{p + "mask_height", int64_t{5}},
                                 {p + "mask_width", int64_t{6}},
                                 {p + "mask_prediction_num_conv_layers", int64_t{3}},
                                 {p + "mask_prediction_conv_depth", int64_t{0}}}),
                   {{"SecondStageBoxPredictor/Conv/weights", Shape{3, 3, 6, 4}},
                    {"SecondStageBoxPredictor/Conv/biases", Shape{4}},
                    {"SecondStageBoxPredictor/Conv_1/weights", Shape{3, 3, 4, 4}},
                    {"SecondStageBoxPredictor/Conv_1/biases", Shape{4}},
                    {"SecondStageBoxPredictor/Conv_2/weights", Shape{3, 3, 4, 3}},
                    {"SecondStageBoxPredictor/Conv_2/biases", Shape{3}}},
                   Shape{4, 3, 5, 6});
}

TEST(MaskRcnnMaskHead, ConvolvedThenUpsampledGivesTheApisClassAgnosticMasks) {
  const std::string p = std::string(kPredictor) + ".";
  expect_api_masks("upsample/",
                   mask_options({{p + "mask_height", int64_t{6}},
                                 {p + "mask_width", int64_t{6}},
                                 {p + "mask_prediction_num_conv_layers", int64_t{2}},
                                 {p + "mask_prediction_conv_depth", int64_t{5}},
                                 {p + "masks_are_class_agnostic", true},
                                 {p + "convolve_then_upsample_masks", true}}),
                   {{"SecondStageBoxPredictor/Conv/weights", Shape{3, 3, 6, 5}},
                    {"SecondStageBoxPredictor/Conv/biases", Shape{5}},
                    {"SecondStageBoxPredictor/Conv_1/weights", Shape{3, 3, 5, 5}},
                    {"SecondStageBoxPredictor/Conv_1/biases", Shape{5}},
                    {"SecondStageBoxPredictor/Conv_2/weights", Shape{3, 3, 5, 1}},
                    {"SecondStageBoxPredictor/Conv_2/biases", Shape{1}}},
                   Shape{4, 1, 6, 6});
}

TEST(MaskRcnnMaskHead, RefusesAMaskHeadWithoutConvHyperparams) {
  const std::string p = std::string(kPredictor) + ".";
  const Options options = mask_options({{p + "conv_hyperparams", false}});
  const detection::DetectionOptionReader reader(options, "FasterRCNNMetaArch");
  const std::string m =
      message_of([&] { models::make_mask_rcnn_box_predictor(reader, kPredictor); });
  EXPECT_NE(m.find(p + "conv_hyperparams"), std::string::npos) << m;
  EXPECT_NE(m.find("predict_instance_masks"), std::string::npos) << m;
}

TEST(MaskRcnnMaskHead, RefusesUpsamplingByAFactorThatIsNotAnInteger) {
  const std::string p = std::string(kPredictor) + ".";
  const Options options =
      mask_options({{p + "mask_height", int64_t{7}}, {p + "convolve_then_upsample_masks", true}});
  const detection::DetectionOptionReader reader(options, "FasterRCNNMetaArch");
  std::unique_ptr<detection::SecondStageBoxPredictor> predictor =
      models::make_mask_rcnn_box_predictor(reader, kPredictor);
  FakeModelContext ctx(cpu(), 3);
  layers::VariableScope root(ctx, Mode::kTrain);
  const Tensor features = Tensor::from_vector(cpu(), Shape{1, 3, 3, 2}, std::vector<float>(18));
  const std::string m = message_of([&] { predictor->predict_instance_masks(root, features, 3); });
  EXPECT_NE(m.find("7 x 15"), std::string::npos) << m;
}

TEST(MaskRcnnMaskHead, IsAbsentWithoutPredictInstanceMasks) {
  const Options options =
      Options::resolve("FasterRCNNMetaArch", models::FasterRcnnMetaArch::kOptions, {});
  const detection::DetectionOptionReader reader(options, "FasterRCNNMetaArch");
  EXPECT_FALSE(models::make_mask_rcnn_box_predictor(reader, kPredictor)->predicts_instance_masks());
}

// ---- the mask targets and loss (_loss_box_classifier) ----

TEST(MaskRcnnMaskLoss, GivesTheApisTargetsAndNormalizedLoss) {
  // The script's batch: 2 images padded to 4 proposals (image 1 has 2), 3 classes, 4 x 5 masks.
  const std::vector<int64_t> counts = {2, 1};
  const std::vector<double> all_proposals = golden("loss/proposals.f32", 32);
  const std::vector<double> want_matches = golden("loss/matches.f32", 8);
  const std::vector<int64_t> num_proposals = {4, 2};
  const detection::ArgMaxMatcher matcher([] {
    detection::ArgMaxMatcherOptions m;
    m.matched_threshold = 0.5;
    m.unmatched_threshold = 0.5;
    return m;
  }());
  std::vector<std::vector<float>> proposals(2);
  std::vector<std::vector<int32_t>> matches(2);
  std::vector<Tensor> masks;
  std::vector<float> weights;
  std::vector<int64_t> classes;
  for (int64_t i = 0; i < 2; ++i) {
    const auto image = static_cast<std::size_t>(i);
    const std::string n = std::to_string(i);
    const std::vector<double> boxes =
        golden("loss/gt_boxes_" + n + ".f32", static_cast<std::size_t>(counts[image] * 4));
    const std::vector<double> labels =
        golden("loss/gt_classes_" + n + ".f32", static_cast<std::size_t>(counts[image]));
    masks.push_back(ops::cast(
        Tensor::from_vector(
            cpu(), Shape{counts[image], 8, 10},
            golden("loss/gt_masks_" + n + ".f32", static_cast<std::size_t>(counts[image] * 80))),
        DType::kU8));
    // Only the image's real proposals (the padding has weight 0 in the API).
    for (int64_t k = 0; k < num_proposals[image] * 4; ++k) {
      proposals[image].push_back(
          static_cast<float>(all_proposals[static_cast<std::size_t>(i * 16 + k)]));
    }
    // The detector target assigner's matcher gives the script's matches.
    const std::vector<float> gt(boxes.begin(), boxes.end());
    const std::vector<float> similarity = detection::IouSimilarity().compare(gt, proposals[image]);
    const detection::Match match = matcher.match(similarity, counts[image], num_proposals[image]);
    for (int64_t k = 0; k < num_proposals[image]; ++k) {
      const int32_t m = match.match_results()[static_cast<std::size_t>(k)];
      EXPECT_EQ(m < 0 ? -1 : m, want_matches[static_cast<std::size_t>(i * 4 + k)])
          << "image " << i << " proposal " << k;
      matches[image].push_back(m);
      weights.push_back(m >= 0 ? 1.0f : 0.0f);
      classes.push_back(m >= 0 ? static_cast<int64_t>(labels[static_cast<std::size_t>(m)]) + 1 : 0);
    }
  }
  const std::vector<models::MaskTargetImage> images = {{proposals[0], matches[0], masks[0]},
                                                       {proposals[1], matches[1], masks[1]}};
  const Tensor targets = models::mask_rcnn_mask_targets(cpu(), images, 4, 5);
  ASSERT_EQ(targets.shape(), (Shape{6, 4, 5}));
  const std::vector<double> want_targets = golden("loss/targets.f32", 160);
  const std::vector<float> have_targets = targets.to_vector<float>();
  // The real proposals are the script's rows 0-5 (image 0's 4, then image 1's 2).
  for (std::size_t j = 0; j < 6 * 20; ++j) {
    EXPECT_NEAR(have_targets[j], want_targets[j], 1e-5)
        << "proposal " << j / 20 << " pixel " << j % 20;
  }
  // The predictions of the real proposals (rows 0-3 and 4-5 of the script's 8).
  const std::vector<double> all = golden("loss/prediction_masks.f32", 480);
  std::vector<double> real(all.begin(), all.begin() + 6 * 60);
  const Tensor prediction =
      ops::cast(Tensor::from_vector(cpu(), Shape{6, 3, 4, 5}, real), DType::kF32);
  const Tensor loss = models::mask_rcnn_mask_loss(prediction, targets, weights, classes);
  EXPECT_NEAR(loss.to_vector<float>()[0], golden("loss/loss.f32", 1)[0], 1e-5);
}

TEST(MaskRcnnMaskLoss, CountsOnlyPositivesOfTheTargetClass) {
  // One positive of class 2 (the second mask) and one negative: only the positive's second mask
  // counts, over its 4 pixels; the negative and the other class's mask change nothing.
  const Tensor targets =
      Tensor::from_vector(cpu(), Shape{2, 2, 2}, std::vector<float>{1, 0, 1, 0, 0, 0, 0, 0});
  std::vector<float> logits(2 * 2 * 4, 5.0f);
  for (int j = 0; j < 4; ++j) logits[4 + j] = 0.0f;  // proposal 0, class 2: logits 0
  const Tensor prediction = Tensor::from_vector(cpu(), Shape{2, 2, 2, 2}, logits);
  const std::vector<float> weights = {1.0f, 0.0f};
  const std::vector<int64_t> classes = {2, 0};
  const Tensor loss = models::mask_rcnn_mask_loss(prediction, targets, weights, classes);
  EXPECT_NEAR(loss.to_vector<float>()[0], std::log(2.0), 1e-6);
}

// A padded, non-square image: its true 30 x 40 extent in a 40 x 64 preprocessed frame, its masks
// 30 x 40 as the input gave them. The proposals (normalized to the frame) scaled by
// to_mask_frame crop from those masks what the API crops from the masks zero-padded to 40 x 64
// with the proposals as they are; unscaled, they would crop elsewhere.
TEST(MaskRcnnMaskTargets, APaddedNonSquareImageCropsItsOwnMasksAsTheApiCropsThePaddedOnes) {
  const int64_t frame_h = 40, frame_w = 64, h = 30, w = 40;
  std::vector<float> mask(static_cast<std::size_t>(h * w)),
      padded(static_cast<std::size_t>(frame_h * frame_w));
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      // A triangle below the diagonal and a stripe: a flip, transpose or shift shows.
      const float v = (3 * x < 4 * y || (x >= 30 && x < 34)) ? 1.0f : 0.0f;
      mask[static_cast<std::size_t>(y * w + x)] = v;
      padded[static_cast<std::size_t>(y * frame_w + x)] = v;
    }
  }
  // Proposals inside the true image, normalized to the frame (its last true row and column are
  // (h - 1) / (frame_h - 1) and (w - 1) / (frame_w - 1)).
  const float ymax = static_cast<float>(h - 1) / static_cast<float>(frame_h - 1);
  const float xmax = static_cast<float>(w - 1) / static_cast<float>(frame_w - 1);
  const std::vector<float> proposals = {0.05f,       0.1f,         0.6f * ymax, 0.7f * xmax,
                                        0.3f * ymax, 0.2f * xmax,  ymax,        xmax,
                                        0.0f,        0.45f * xmax, 0.5f * ymax, 0.9f * xmax};
  const std::vector<int32_t> matches = {0, 0, 0};
  const std::vector<float> scaled =
      models::to_mask_frame(proposals, static_cast<float>(h) / static_cast<float>(frame_h),
                            static_cast<float>(w) / static_cast<float>(frame_w), frame_h, frame_w);
  const Tensor own = Tensor::from_vector(cpu(), Shape{1, h, w}, mask);
  const std::vector<models::MaskTargetImage> ours = {{scaled, matches, own}};
  const std::vector<models::MaskTargetImage> api = {
      {proposals, matches, Tensor::from_vector(cpu(), Shape{1, frame_h, frame_w}, padded)}};
  const std::vector<float> got =
      models::mask_rcnn_mask_targets(cpu(), ours, 7, 9).to_vector<float>();
  const std::vector<float> want =
      models::mask_rcnn_mask_targets(cpu(), api, 7, 9).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  double mass = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5) << "target element " << i;
    mass += want[i];
  }
  EXPECT_GT(mass, 20.0);  // the crops hold mask, not only background
  const std::vector<models::MaskTargetImage> unscaled = {{proposals, matches, own}};
  const std::vector<float> wrong =
      models::mask_rcnn_mask_targets(cpu(), unscaled, 7, 9).to_vector<float>();
  double off = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) off += std::abs(wrong[i] - want[i]);
  EXPECT_GT(off, 5.0) << "the scaling made no difference: the test would be blind";
}

}  // namespace
}  // namespace trainyard
