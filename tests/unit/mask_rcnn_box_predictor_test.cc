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
#include "test_backends.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
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

}  // namespace
}  // namespace trainyard
