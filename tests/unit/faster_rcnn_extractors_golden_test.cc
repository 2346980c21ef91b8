// The Faster R-CNN feature extractors against the Object Detection API's own extractor classes:
// tests/fixtures/detection/<stem>.txt holds what the API's FasterRCNN*FeatureExtractor computed
// under TensorFlow 2.21 (make_frcnn_extractor_goldens.py: is_training True, the case's
// first_stage_features_stride and batch_norm_trainable, every variable set by variable_value(),
// which meta_arch_goldens.h restates): the preprocessed images' sum, the first stage's feature
// map under FirstStageFeatureExtractor and the box classifier features of fixed crops under
// SecondStageFeatureExtractor. Every value agrees within 1e-4 (absolute below 1, relative
// above), and our variables are the API's (<stem>.variables): the same names and shapes, so the
// zoo's checkpoints restore by name. Also the TF-Slim inception_resnet_v2 classifier (below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "detection_parts.h"
#include "faster_rcnn_meta_arch.h"
#include "meta_arch_goldens.h"
#include "pkg_detection_goldens.h"
#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/pkg/nets/nets.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;

Backend& cpu() { return *test::backend("cpu"); }

struct Case {
  const char* stem;
  const char* type;
  int64_t stride;
  bool batch_norm_trainable;
  int64_t image;
  Shape crops;
  // Variables the API creates that feed nothing and that we leave out: its ResNet extractors
  // build the whole resnet_v1 in the first stage and take block3's end point, so block4's
  // first-stage copy is in the API's graph (and its checkpoints) but unused.
  const char* unused_prefix;
  // The first-stage map's tolerance, where the API's own result moves by more than 1e-4 between
  // TensorFlow's oneDNN and Eigen kernels (make_frcnn_extractor_goldens.py run with and without
  // TF_ENABLE_ONEDNN_OPTS=0): batch statistics of a 1-image batch over 6 x 6 or 4 x 4 maps
  // divide by small variances (TensorFlow moved by 3.2e-4 on resnet50_atrous and 1.3e-4 on
  // inception_v2_bn_trainable). ResNet-152's 50 residual units in inference mode with the
  // goldens' random variables grow the map to 1.2e12, where TensorFlow's two kernels differ by
  // 2.3e-6 of the largest value (0.4% of some elements): that map is compared relative to its
  // largest magnitude.
  double rpn_tolerance = 1e-4;
  bool rpn_relative_to_largest = false;
};

std::vector<double> host(const Tensor& t) {
  NoGradScope no_grad;
  return ops::cast(t, DType::kF64).to_vector<double>();
}

std::map<std::string, Shape> api_variables(const std::string& stem) {
  const std::string path =
      std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/detection/" + stem + ".variables";
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::map<std::string, Shape> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    std::vector<int64_t> dims;
    int64_t d = 0;
    while (words >> d) dims.push_back(d);
    out[name] = Shape(dims);
  }
  return out;
}

class FasterRcnnExtractorGolden : public ::testing::TestWithParam<Case> {};

TEST_P(FasterRcnnExtractorGolden, GivesTheApisFeaturesWithTheApisVariables) {
  const Case& c = GetParam();
  models::register_detection_parts();
  const Options options =
      Options::resolve("FasterRCNNMetaArch", models::FasterRcnnMetaArch::kOptions, {});
  const detection::DetectionOptionReader reader(options, "FasterRCNNMetaArch");
  detection::FasterRcnnFeatureExtractorParams params;
  params.type = c.type;
  params.first_stage_features_stride = c.stride;
  params.batch_norm_trainable = c.batch_norm_trainable;
  std::unique_ptr<detection::FasterRcnnFeatureExtractor> extractor =
      detection::faster_rcnn_feature_extractors().find("test", "feature_extractor.type", c.type)(
          params, reader);
  const test::Goldens g(std::string(c.stem) + ".txt");

  FakeModelContext ctx(cpu(), 2);
  const Tensor images = Tensor::from_vector(cpu(), Shape{1, c.image, c.image, 3},
                                            test::image_values(1, c.image, c.image));
  const std::vector<double> unit = test::unit_values("crops", c.crops.num_elements());
  std::vector<float> crop_values;
  for (double u : unit) crop_values.push_back(static_cast<float>(0.5 + 0.5 * u));
  const Tensor crops = Tensor::from_vector(cpu(), c.crops, crop_values);
  auto run = [&] {
    NoGradScope no_grad;
    layers::VariableScope root(ctx, Mode::kTrain);
    layers::VariableScope first = root.child(detection::kFirstStageFeatureExtractorScope);
    layers::VariableScope second = root.child(detection::kSecondStageFeatureExtractorScope);
    const Tensor preprocessed = extractor->preprocess(images);
    const Tensor features = extractor->extract_proposal_features(first, preprocessed);
    const Tensor box_features = extractor->extract_box_classifier_features(second, crops);
    return std::vector<Tensor>{preprocessed, features, box_features};
  };
  run();  // creates the variables

  // The variables: the API's names and shapes, none missing, none left over.
  std::map<std::string, Shape> theirs = api_variables(c.stem);
  ASSERT_GT(theirs.size(), 100U);
  std::map<std::string, Shape> ours;
  for (const std::string& name : ctx.variable_names()) ours[name] = ctx.at(name).value().shape();
  int64_t unused = 0;
  for (auto it = theirs.begin(); it != theirs.end();) {
    if (c.unused_prefix[0] != '\0' && it->first.rfind(c.unused_prefix, 0) == 0) {
      it = theirs.erase(it);
      ++unused;
    } else {
      ++it;
    }
  }
  if (c.unused_prefix[0] != '\0') {
    EXPECT_GT(unused, 0) << c.unused_prefix;
  }
  EXPECT_EQ(ours, theirs);

  for (const std::string& name : ctx.variable_names()) {
    const auto value = test::variable_value(name, ctx.at(name).value().shape());
    ASSERT_TRUE(value) << name;
    ctx.set_value(name, *value);
  }
  const std::vector<Tensor> out = run();
  double sum = 0.0;
  for (double v : host(out[0])) sum += v;
  test::expect_close(std::string(c.stem) + " preprocessed_sum", {sum},
                     g.get("preprocessed_sum").values, 1e-6);
  const test::GoldenTensor& rpn = g.get("rpn_feature_map");
  EXPECT_EQ(out[1].shape(), Shape(rpn.shape));
  std::vector<double> got = host(out[1]);
  std::vector<double> want = rpn.values;
  if (c.rpn_relative_to_largest) {
    double largest = 0.0;
    for (double v : want) largest = std::max(largest, std::abs(v));
    for (double& v : got) v /= largest;
    for (double& v : want) v /= largest;
  }
  test::expect_close(std::string(c.stem) + " rpn_feature_map", got, want, c.rpn_tolerance);
  const test::GoldenTensor& box = g.get("box_classifier_features");
  EXPECT_EQ(out[2].shape(), Shape(box.shape));
  test::expect_close(std::string(c.stem) + " box_classifier_features", host(out[2]), box.values);
}

INSTANTIATE_TEST_SUITE_P(
    Api, FasterRcnnExtractorGolden,
    ::testing::Values(
        Case{"faster_rcnn_resnet152", "faster_rcnn_resnet152", 16, false, 64, Shape{2, 4, 4, 1024},
             "FirstStageFeatureExtractor/resnet_v1_152/block4/", 1e-4, true},
        // first_stage_features_stride 8: block3 atrous (rate 2).
        Case{"faster_rcnn_resnet50_atrous", "faster_rcnn_resnet50", 8, true, 48,
             Shape{2, 3, 3, 1024}, "FirstStageFeatureExtractor/resnet_v1_50/block4/", 5e-4},
        Case{"faster_rcnn_inception_v2", "faster_rcnn_inception_v2", 16, false, 64,
             Shape{2, 7, 7, 576}, ""},
        Case{"faster_rcnn_inception_v2_bn_trainable", "faster_rcnn_inception_v2", 16, true, 64,
             Shape{2, 7, 7, 576}, "", 5e-4},
        // first_stage_features_stride 8: Mixed_6a at stride 1, the block17s atrous (rate 2).
        Case{"faster_rcnn_inception_resnet_v2_atrous", "faster_rcnn_inception_resnet_v2", 8, false,
             64, Shape{2, 8, 8, 1088}, ""},
        Case{"faster_rcnn_inception_resnet_v2", "faster_rcnn_inception_resnet_v2", 16, false, 80,
             Shape{2, 8, 8, 1088}, ""}),

    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.stem); });

// The TF-Slim classifier behind faster_rcnn_inception_resnet_v2 (the image classifier
// inception_resnet_v2): inception_resnet_v2.txt holds what slim's own net computed in inference
// mode for 5 classes on a 139 x 139 image (make_frcnn_extractor_goldens.py), its Logits and
// AuxLogits; inception_resnet_v2.variables its variables, which ours equal.
TEST(InceptionResnetV2Classifier, GivesSlimsLogitsWithSlimsVariables) {
  constexpr int64_t kImage = 139;
  const test::Goldens g("inception_resnet_v2.txt");
  FakeModelContext ctx(cpu(), 5);
  const Tensor pixels = Tensor::from_vector(cpu(), Shape{1, kImage, kImage, 3},
                                            test::image_values(1, kImage, kImage));
  const Tensor images = ops::add(ops::mul(pixels, 2.0 / 255.0), -1.0);
  nets::InceptionResnetV2Options o;
  o.num_classes = 5;
  auto run = [&] {
    NoGradScope no_grad;
    layers::VariableScope root(ctx, Mode::kEval);
    return nets::inception_resnet_v2(root, images, o);
  };
  run();
  std::map<std::string, Shape> ours;
  for (const std::string& name : ctx.variable_names()) ours[name] = ctx.at(name).value().shape();
  EXPECT_EQ(ours, api_variables("inception_resnet_v2"));
  for (const std::string& name : ctx.variable_names()) {
    const auto value = test::variable_value(name, ctx.at(name).value().shape());
    ASSERT_TRUE(value) << name;
    ctx.set_value(name, *value);
  }
  const nets::NetOutput out = run();
  test::expect_close("inception_resnet_v2 logits", host(out.net), g.get("logits").values);
  test::expect_close("inception_resnet_v2 aux_logits", host(out.end_points.at("AuxLogits")),
                     g.get("aux_logits").values);
}

}  // namespace
}  // namespace trainyard
