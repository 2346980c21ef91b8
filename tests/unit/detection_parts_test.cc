// The registries of detection parts (pkg/detection's part_registry.h, the SSD feature extractor
// and box predictor families, the Faster R-CNN feature extractors): an unknown name is refused
// listing the registered ones, and an extractor registered from this test, which no
// meta-architecture file names, is the one SSDMetaArch (FasterRCNNMetaArch) builds, predicts
// with and restores through. The detection_models plugin's
// sources are compiled into this test (a plugin's registries are its own), so SsdMetaArch here
// finds the parts this test adds.
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
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "detection_parts.h"
#include "faster_rcnn_meta_arch.h"
#include "ssd_meta_arch.h"
#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/named_registry.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/detection/part_builders.h"
#include "trainyard/pkg/detection/part_registry.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/nets/nets.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

Backend& cpu() { return *test::backend("cpu"); }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST(PartRegistry, UnknownNameListsTheRegisteredOnes) {
  const detection::PartRegistry<int> registry("test.part", "test part");
  NamedRegistration beta = registry.add("beta", 2);
  NamedRegistration alpha = registry.add("alpha", 1);
  EXPECT_EQ(registry.find("Owner", "part.type", "beta"), 2);
  EXPECT_EQ(registry.names(), (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(message_of([&] { registry.find("Owner", "part.type", "gamma"); }),
            "Owner: part.type is 'gamma', which is not a registered test part; registered: "
            "alpha, beta");
  EXPECT_NE(
      message_of([&] { (void)registry.add("alpha", 3); }).find("'alpha' is already registered"),
      std::string::npos);
  alpha.reset();  // its owner lets it go
  EXPECT_FALSE(registry.contains("alpha"));
  EXPECT_EQ(message_of([&] { registry.find("Owner", "part.type", "alpha"); }),
            "Owner: part.type is 'alpha', which is not a registered test part; registered: beta");
}

// Another PartRegistry object of the same table (another library's copy of pkg/detection) sees
// the same entries; shared entries stack, exclusive ones refuse a taken name; a value type
// another copy disagrees on is refused naming both types.
TEST(PartRegistry, ViewsOfOneTableShareItsEntries) {
  const detection::PartRegistry<int> mine("test.shared_part", "shared part");
  const detection::PartRegistry<int> theirs("test.shared_part", "shared part");
  NamedRegistration a = mine.add("same", 1, NameSharing::kShared);
  NamedRegistration b = theirs.add("same", 1, NameSharing::kShared);
  EXPECT_NE(message_of([&] { (void)theirs.add("same", 1); }).find("'same' is already registered"),
            std::string::npos);
  a.reset();
  EXPECT_EQ(theirs.find("Owner", "part.type", "same"), 1) << "gone while another copy holds it";
  b.reset();
  EXPECT_FALSE(mine.contains("same"));
  const detection::PartRegistry<double> other_type("test.shared_part", "shared part");
  NamedRegistration c = mine.add("typed", 1);
  const std::string m = message_of([&] { other_type.find("Owner", "part.type", "typed"); });
  EXPECT_NE(m.find("'typed' is registered by"), std::string::npos) << m;
}

// Two feature maps from two strided 3x3 convolutions, under FeatureExtractor/TinyNet; a
// classification checkpoint holds them under "tiny/".
class TinyFeatureExtractor final : public detection::SsdFeatureExtractor {
 public:
  explicit TinyFeatureExtractor(int64_t depth) : depth_(depth) {}

  Tensor preprocess(const Tensor& resized_images) const override {
    return ops::mul(ops::cast(resized_images, DType::kF32), 1.0 / 255.0);
  }

  std::vector<Tensor> extract_features(layers::VariableScope& scope,
                                       const Tensor& images) override {
    layers::VariableScope net = scope.child("TinyNet");
    layers::Conv2DOptions o;
    o.stride = {2, 2};
    o.scope = "Conv_0";
    const Tensor a = layers::conv2d(net, images, depth_, {3, 3}, o);
    o.scope = "Conv_1";
    const Tensor b = layers::conv2d(net, a, depth_, {3, 3}, o);
    return {a, b};
  }

  std::map<std::string, std::string> restore_from_classification_checkpoint(
      const std::string& feature_extractor_scope) const override {
    return {{feature_extractor_scope + "/TinyNet/", "tiny/"}};
  }

 private:
  int64_t depth_;
};

void register_tiny_extractor() {
  models::register_detection_parts();
  static NamedRegistration held;
  if (held) return;
  held = detection::ssd_feature_extractors().add(
      "tiny_fixture", [](const detection::SsdFeatureExtractorParams& params,
                         const detection::DetectionOptionReader&) {
        return std::make_unique<TinyFeatureExtractor>(params.min_depth);
      });
}

Options ssd_options(const Opts& given) {
  return Options::resolve("SSDMetaArch", models::SsdMetaArch::kOptions, given);
}

TEST(SsdFeatureExtractors, UnknownTypeListsTheRegisteredOnes) {
  models::register_detection_parts();
  const std::string m = message_of([] {
    models::SsdMetaArch model(
        ssd_options({{"feature_extractor.type", std::string("ssd_pnasnet")}}));
  });
  EXPECT_NE(
      m.find(
          "SSDMetaArch: feature_extractor.type is 'ssd_pnasnet', which is not a "
          "registered SSD feature extractor; registered: embedded_ssd_mobilenet_v1, "
          "ssd_inception_v2, ssd_inception_v3, ssd_mobilenet_v1, ssd_mobilenet_v1_fpn, "
          "ssd_mobilenet_v1_ppn, ssd_mobilenet_v2, ssd_mobilenet_v2_fpn, ssd_mobilenet_v2_keras, "
          "ssd_mobilenet_v3_large, ssd_mobilenet_v3_small, ssd_resnet101_v1_fpn, "
          "ssd_resnet152_v1_fpn, ssd_resnet50_v1_fpn"),
      std::string::npos)
      << m;
}

// The API's builder hands the fpn message's fields to the extractor, which fails unless it
// builds a pyramid; here the model is refused naming the field.
TEST(SsdFeatureExtractors, FpnFieldsOnAnExtractorWithoutAPyramidAreRefused) {
  models::register_detection_parts();
  const std::string m = message_of([] {
    models::SsdMetaArch model(ssd_options({{"feature_extractor.fpn", true}}));
  });
  EXPECT_NE(m.find("SSDMetaArch: feature_extractor.fpn is 'set'; ssd_mobilenet_v1 builds no "
                   "feature pyramid"),
            std::string::npos)
      << m;
}

// The API's Inception extractors raise unless override_base_feature_extractor_hyperparams is true
// (their base net has no arg scope but conv_hyperparams'), and v3 cannot build its graph on small
// images; the model is refused naming the field.
TEST(SsdFeatureExtractors, InceptionExtractorsRefuseABaseWithoutConvHyperparamsAndV3SmallImages) {
  models::register_detection_parts();
  for (const std::string type : {"ssd_inception_v2", "ssd_inception_v3"}) {
    const std::string m = message_of([&type] {
      models::SsdMetaArch model(ssd_options({{"feature_extractor.type", type}}));
    });
    EXPECT_NE(m.find("SSDMetaArch: feature_extractor.override_base_feature_extractor_hyperparams "
                     "is 'false'; " +
                     type + " takes conv_hyperparams for its base net too"),
              std::string::npos)
        << m;
  }
  // Inception v3's VALID stem and reductions need 75 pixels (the API checks 33, then TensorFlow
  // refuses its graph below 75).
  Opts v3 = {{"feature_extractor.type", std::string("ssd_inception_v3")},
             {"feature_extractor.override_base_feature_extractor_hyperparams", true},
             {"image_resizer.fixed_shape_resizer.width", int64_t{74}}};
  const std::string m = message_of([&v3] { models::SsdMetaArch model(ssd_options(v3)); });
  EXPECT_NE(m.find("SSDMetaArch: image_resizer.fixed_shape_resizer.width is '74'; "
                   "ssd_inception_v3 needs images of at least 75 x 75"),
            std::string::npos)
      << m;
  v3["image_resizer.fixed_shape_resizer.width"] = int64_t{75};
  models::SsdMetaArch fine(ssd_options(v3));
}

// What the API's ResNet FPN extractor raises at construction or in check_min_image_dim is refused
// when the model is built (so `config check` says it), naming the field.
TEST(SsdFeatureExtractors, ResnetFpnRefusesADepthMultiplierAndImagesBelow129) {
  models::register_detection_parts();
  const Opts resnet = {{"feature_extractor.type", std::string("ssd_resnet50_v1_fpn")},
                       {"anchor_generator", std::string("multiscale_anchor_generator")}};
  Opts half = resnet;
  half["feature_extractor.depth_multiplier"] = 0.5;
  std::string m = message_of([&] { models::SsdMetaArch model(ssd_options(half)); });
  EXPECT_NE(m.find("SSDMetaArch: feature_extractor.depth_multiplier is '0.5'; "
                   "ssd_resnet50_v1_fpn supports only depth 1.0"),
            std::string::npos)
      << m;
  Opts small = resnet;
  small["image_resizer.fixed_shape_resizer.height"] = int64_t{128};
  m = message_of([&] { models::SsdMetaArch model(ssd_options(small)); });
  EXPECT_NE(m.find("SSDMetaArch: image_resizer.fixed_shape_resizer.height is '128'; "
                   "ssd_resnet50_v1_fpn needs images of at least 129 x 129"),
            std::string::npos)
      << m;
  models::SsdMetaArch fine(ssd_options(resnet));  // 300 x 300, depth 1: accepted
}

// The weight-shared heads need as many anchors at every location of every map: the SSD
// anchors' default (3 in the lowest layer, 6 above) is refused when the model is built.
TEST(SsdBoxPredictors, WeightSharedPredictorRefusesUnequalAnchorsPerLocation) {
  models::register_detection_parts();
  const std::string m = message_of([] {
    models::SsdMetaArch model(ssd_options(
        {{"box_predictor", std::string("weight_shared_convolutional_box_predictor")},
         {"box_predictor.weight_shared_convolutional_box_predictor.depth", int64_t{8}}}));
  });
  EXPECT_NE(m.find("SSDMetaArch: anchor_generator.ssd_anchor_generator gives the feature maps 3, "
                   "6, 6, 6, 6, 6 anchors per location, which "
                   "box_predictor.weight_shared_convolutional_box_predictor does not take"),
            std::string::npos)
      << m;
  models::SsdMetaArch equal(
      ssd_options({{"box_predictor", std::string("weight_shared_convolutional_box_predictor")},
                   {"anchor_generator.ssd_anchor_generator.reduce_boxes_in_lowest_layer", false}}));
}

TEST(SsdBoxPredictors, UnknownChoiceListsTheRegisteredOnes) {
  const std::string m = message_of([] {
    models::SsdMetaArch model(ssd_options({{"box_predictor", std::string("rfcn_box_predictor")}}));
  });
  EXPECT_NE(m.find("SSDMetaArch: box_predictor is 'rfcn_box_predictor', "
                   "which is not a registered SSD box predictor; registered: "
                   "convolutional_box_predictor, weight_shared_convolutional_box_predictor"),
            std::string::npos)
      << m;
}

// mobilenet_base with use_explicit_padding pads the input of every op that has a kernel_size,
// which in V3's conv_defs includes the blocks, whose depthwise convolutions stay SAME: the maps
// grow by k - 1 at each stride-1 block. The shapes are those of the API's own
// mobilenet_v3.mobilenet_base(V3_SMALL_DETECTION, final_endpoint='layer_13') on 96 x 96 images
// (TF 2.21); its reduce_to_1x1 cannot take the padding, so a net reaching it is refused.
TEST(SsdFeatureExtractors, MobilenetV3ExplicitPaddingGrowsTheMapsAsTheApis) {
  FakeModelContext ctx(cpu(), 2);
  layers::VariableScope root(ctx, Mode::kEval);
  NoGradScope no_grad;
  const Tensor images =
      Tensor::from_vector(cpu(), Shape{1, 96, 96, 3}, std::vector<float>(96 * 96 * 3, 0.5f));
  nets::MobilenetV3Options o;
  o.variant = nets::MobilenetV3Variant::kSmall;
  o.detection = true;
  o.num_classes = 0;
  o.final_endpoint = "layer_13";
  const nets::NetOutput plain = nets::mobilenet_v3_base(root, images, o);
  EXPECT_EQ(plain.end_points.at("layer_13").shape(), (Shape{1, 3, 3, 288}));
  o.use_explicit_padding = true;
  const nets::NetOutput padded = nets::mobilenet_v3_base(root, images, o);
  const std::map<std::string, Shape> apis = {
      {"layer_1", Shape{1, 48, 48, 16}},
      {"layer_2", Shape{1, 25, 25, 16}},
      {"layer_3/expansion_output", Shape{1, 27, 27, 72}},
      {"layer_4", Shape{1, 16, 16, 24}},
      {"layer_9", Shape{1, 26, 26, 48}},
      {"layer_10/expansion_output", Shape{1, 30, 30, 288}},
      {"layer_12", Shape{1, 23, 23, 48}},
      {"layer_13", Shape{1, 23, 23, 288}},
  };
  for (const auto& [name, shape] : apis) {
    EXPECT_EQ(padded.end_points.at(name).shape(), shape) << name;
  }
  o.final_endpoint.clear();
  const std::string m = message_of([&] { nets::mobilenet_v3_base(root, images, o); });
  EXPECT_NE(m.find("MobilenetV3: use_explicit_padding reaches layer_14 (reduce_to_1x1)"),
            std::string::npos)
      << m;
}

TEST(SsdFeatureExtractors, ARegisteredFixtureIsBuiltByTheUnchangedMetaArch) {
  register_tiny_extractor();
  EXPECT_EQ(detection::ssd_feature_extractors().names(),
            (std::vector<std::string>{
                "embedded_ssd_mobilenet_v1", "ssd_inception_v2", "ssd_inception_v3",
                "ssd_mobilenet_v1", "ssd_mobilenet_v1_fpn", "ssd_mobilenet_v1_ppn",
                "ssd_mobilenet_v2", "ssd_mobilenet_v2_fpn", "ssd_mobilenet_v2_keras",
                "ssd_mobilenet_v3_large", "ssd_mobilenet_v3_small", "ssd_resnet101_v1_fpn",
                "ssd_resnet152_v1_fpn", "ssd_resnet50_v1_fpn", "tiny_fixture"}));
  models::SsdMetaArch model(
      ssd_options({{"feature_extractor.type", std::string("tiny_fixture")},
                   {"feature_extractor.min_depth", int64_t{8}},
                   {"anchor_generator.ssd_anchor_generator.num_layers", int64_t{2}}}));
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  NoGradScope no_grad;
  const Tensor images =
      Tensor::from_vector(cpu(), Shape{1, 32, 32, 3}, std::vector<float>(32 * 32 * 3, 255.0f));
  const PreprocessedImages pre = model.preprocess(ctx, images);
  EXPECT_EQ(pre.images.to_vector<float>()[0], 1.0f) << "the fixture's preprocess";
  const TensorDict out = model.predict(ctx, pre, Mode::kEval);
  // 16 x 16 cells with 3 anchors (the lowest layer's reduced set) and 8 x 8 with 6.
  const int64_t anchors = 16 * 16 * 3 + 8 * 8 * 6;
  EXPECT_EQ(out.at("box_encodings").shape(), (Shape{1, anchors, 4}));
  EXPECT_EQ(out.at("class_predictions_with_background").shape(), (Shape{1, anchors, 3}));
  EXPECT_EQ(ctx.at("FeatureExtractor/TinyNet/Conv_0/weights").value().shape(), (Shape{3, 3, 3, 8}));
  EXPECT_EQ(ctx.at("FeatureExtractor/TinyNet/Conv_1/weights").value().shape(), (Shape{3, 3, 8, 8}));
  EXPECT_EQ(ctx.at("BoxPredictor_1/ClassPredictor/weights").value().shape(),
            (Shape{1, 1, 8, 6 * 3}));
  EXPECT_EQ(ctx.find("FeatureExtractor/MobilenetV1/Conv2d_0/weights"), nullptr);
  EXPECT_EQ(model.restore_map("classification", false),
            (std::map<std::string, std::string>{{"FeatureExtractor/TinyNet/", "tiny/"}}));
  EXPECT_EQ(model.restore_map("detection", false),
            (std::map<std::string, std::string>{{"FeatureExtractor/", "FeatureExtractor/"}}));
}

// The names an option's help lists after "registered:", sorted.
std::vector<std::string> help_names(std::span<const OptionSpec> specs, const std::string& option) {
  for (const OptionSpec& spec : specs) {
    if (spec.name != option) continue;
    std::istringstream help(spec.help);
    std::string word;
    help >> word;
    EXPECT_EQ(word, "registered:") << option;
    std::vector<std::string> names;
    while (help >> word) names.push_back(word);
    std::sort(names.begin(), names.end());
    return names;
  }
  ADD_FAILURE() << "no option " << option;
  return {};
}

// The registered names but the fixtures this test adds.
template <class Registry>
std::vector<std::string> shipped_names(const Registry& registry) {
  std::vector<std::string> names;
  for (const std::string& name : registry.names()) {
    if (name.find("fixture") == std::string::npos) names.push_back(name);
  }
  return names;
}

// `trainyard plugins describe` shows the options' help: each part option lists what the
// plugin registers for it.
TEST(DetectionParts, OptionHelpListsTheRegisteredNames) {
  models::register_detection_parts();
  const std::span<const OptionSpec> ssd(models::SsdMetaArch::kOptions);
  EXPECT_EQ(help_names(ssd, "feature_extractor.type"),
            shipped_names(detection::ssd_feature_extractors()));
  EXPECT_EQ(help_names(ssd, "box_predictor"), shipped_names(detection::ssd_box_predictors()));
  EXPECT_EQ(help_names(ssd, "anchor_generator"), shipped_names(detection::anchor_generators()));
  EXPECT_EQ(help_names(ssd, "box_coder"), shipped_names(detection::box_coders()));
  EXPECT_EQ(help_names(ssd, "matcher"), shipped_names(detection::matchers()));
  EXPECT_EQ(help_names(ssd, "similarity_calculator"),
            shipped_names(detection::region_similarity_calculators()));
  EXPECT_EQ(help_names(ssd, "loss.localization_loss"),
            shipped_names(detection::localization_losses()));
  EXPECT_EQ(help_names(ssd, "loss.classification_loss"),
            shipped_names(detection::classification_losses()));
  EXPECT_EQ(help_names(ssd, "post_processing.score_converter"),
            shipped_names(detection::score_converters()));
  const std::span<const OptionSpec> frcnn(models::FasterRcnnMetaArch::kOptions);
  EXPECT_EQ(help_names(frcnn, "feature_extractor.type"),
            shipped_names(detection::faster_rcnn_feature_extractors()));
  EXPECT_EQ(help_names(frcnn, "second_stage_box_predictor"),
            shipped_names(detection::faster_rcnn_second_stage_box_predictors()));
  EXPECT_EQ(help_names(frcnn, "second_stage_post_processing.score_converter"),
            shipped_names(detection::score_converters()));
  EXPECT_EQ(help_names(ssd, "box_coder"),
            (std::vector<std::string>{"faster_rcnn_box_coder", "mean_stddev_box_coder"}));
}

TEST(DetectionParts, UnknownSmallPartChoicesListTheRegisteredOnes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"box_coder",
       "SSDMetaArch: box_coder is 'keypoint_box_coder', which is not a registered "
       "box coder; registered: faster_rcnn_box_coder, mean_stddev_box_coder"},
      {"matcher",
       "SSDMetaArch: matcher is 'keypoint_box_coder', which is not a registered "
       "matcher; registered: argmax_matcher, bipartite_matcher"},
      {"similarity_calculator",
       "SSDMetaArch: similarity_calculator is 'keypoint_box_coder', which is not a registered "
       "region similarity calculator; registered: ioa_similarity, iou_similarity, "
       "neg_sq_dist_similarity"},
      {"loss.localization_loss",
       "SSDMetaArch: loss.localization_loss is 'keypoint_box_coder', which is not a registered "
       "localization loss; registered: weighted_iou, weighted_l2, weighted_smooth_l1"},
      {"loss.classification_loss",
       "SSDMetaArch: loss.classification_loss is 'keypoint_box_coder', which is not a "
       "registered classification loss; registered: bootstrapped_sigmoid, weighted_sigmoid, "
       "weighted_sigmoid_focal, weighted_softmax"},
      {"anchor_generator",
       "SSDMetaArch: anchor_generator is 'keypoint_box_coder', which is not "
       "a registered anchor generator; registered: multiscale_anchor_generator, "
       "ssd_anchor_generator"},
      {"post_processing.score_converter",
       "SSDMetaArch: post_processing.score_converter is 'keypoint_box_coder', which is not a "
       "registered score converter; registered: IDENTITY, SIGMOID, SOFTMAX"},
  };
  for (const auto& [field, expected] : cases) {
    const std::string m = message_of([&field] {
      models::SsdMetaArch model(ssd_options({{field, std::string("keypoint_box_coder")}}));
    });
    EXPECT_NE(m.find(expected), std::string::npos) << m;
  }
}

// A similarity calculator registered here is the one SSDMetaArch's target assigner uses.
class FixtureSimilarity final : public detection::RegionSimilarityCalculator {
 public:
  std::vector<float> compare(std::span<const float> boxes1,
                             std::span<const float> boxes2) const override {
    return detection::IouSimilarity().compare(boxes1, boxes2);
  }
};

TEST(DetectionParts, ARegisteredSimilarityCalculatorIsUsedByTheUnchangedMetaArch) {
  static NamedRegistration held;
  if (!held) {
    held = detection::region_similarity_calculators().add(
        "fixture_similarity", [](const detection::DetectionOptionReader&, const std::string&) {
          return std::make_shared<const FixtureSimilarity>();
        });
  }
  models::SsdMetaArch model(
      ssd_options({{"similarity_calculator", std::string("fixture_similarity")}}));
  EXPECT_NE(dynamic_cast<const FixtureSimilarity*>(model.config().similarity.get()), nullptr);
}

// A 1x1 convolution at stride 16 for the RPN and a 1x1 convolution on the crops, each under a
// TinyNet scope.
class TinyFasterRcnnFeatureExtractor final : public detection::FasterRcnnFeatureExtractor {
 public:
  Tensor preprocess(const Tensor& resized_images) const override {
    return ops::mul(resized_images, 1.0 / 255.0);
  }
  Tensor extract_proposal_features(layers::VariableScope& scope, const Tensor& images) override {
    layers::VariableScope net = scope.child("TinyNet");
    layers::Conv2DOptions o;
    o.stride = {16, 16};
    o.scope = "Conv";
    return layers::conv2d(net, images, 8, {1, 1}, o);
  }
  Tensor extract_box_classifier_features(layers::VariableScope& scope,
                                         const Tensor& crops) override {
    layers::VariableScope net = scope.child("TinyNet");
    layers::Conv2DOptions o;
    o.scope = "Conv";
    return layers::conv2d(net, crops, 16, {1, 1}, o);
  }
};

TEST(FasterRcnnFeatureExtractors, UnknownTypeListsTheRegisteredOnes) {
  models::register_detection_parts();
  const std::string m = message_of([] {
    models::FasterRcnnMetaArch model(
        Options::resolve("FasterRCNNMetaArch", models::FasterRcnnMetaArch::kOptions,
                         {{"feature_extractor.type", std::string("faster_rcnn_nas")}}));
  });
  EXPECT_NE(m.find("FasterRCNNMetaArch: feature_extractor.type is 'faster_rcnn_nas', "
                   "which is not a registered Faster R-CNN feature extractor; registered: "
                   "faster_rcnn_inception_resnet_v2, faster_rcnn_inception_v2, "
                   "faster_rcnn_mobilenet_v1, faster_rcnn_resnet101, faster_rcnn_resnet152, "
                   "faster_rcnn_resnet50"),
            std::string::npos)
      << m;
}

TEST(FasterRcnnSecondStageBoxPredictors, UnknownChoiceListsTheRegisteredOnes) {
  const std::string m = message_of([] {
    models::FasterRcnnMetaArch model(Options::resolve(
        "FasterRCNNMetaArch", models::FasterRcnnMetaArch::kOptions,
        {{"second_stage_box_predictor", std::string("convolutional_box_predictor")}}));
  });
  EXPECT_NE(m.find("FasterRCNNMetaArch: second_stage_box_predictor is "
                   "'convolutional_box_predictor', which is not a registered Faster R-CNN second "
                   "stage box predictor; registered: mask_rcnn_box_predictor, rfcn_box_predictor"),
            std::string::npos)
      << m;
}

TEST(FasterRcnnFeatureExtractors, ARegisteredFixtureIsBuiltByTheUnchangedMetaArch) {
  models::register_detection_parts();
  static NamedRegistration held;
  if (!held) {
    held = detection::faster_rcnn_feature_extractors().add(
        "tiny_frcnn_fixture", [](const detection::FasterRcnnFeatureExtractorParams&,
                                 const detection::DetectionOptionReader&) {
          return std::make_unique<TinyFasterRcnnFeatureExtractor>();
        });
  }
  const std::string a = "first_stage_anchor_generator.grid_anchor_generator";
  models::FasterRcnnMetaArch model(
      Options::resolve("FasterRCNNMetaArch", models::FasterRcnnMetaArch::kOptions,
                       {{"feature_extractor.type", std::string("tiny_frcnn_fixture")},
                        {"image_resizer.keep_aspect_ratio_resizer.min_dimension", int64_t{64}},
                        {"image_resizer.keep_aspect_ratio_resizer.max_dimension", int64_t{64}},
                        {a + ".height", int64_t{32}},
                        {a + ".width", int64_t{32}},
                        {a + ".scales", std::vector<double>{1.0}},
                        {a + ".aspect_ratios", std::vector<double>{1.0}},
                        {"first_stage_box_predictor_depth", int64_t{8}},
                        {"first_stage_max_proposals", int64_t{6}},
                        {"second_stage_batch_size", int64_t{6}},
                        {"initial_crop_size", int64_t{4}}}));
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  NoGradScope no_grad;
  const Tensor images =
      Tensor::from_vector(cpu(), Shape{1, 64, 64, 3}, std::vector<float>(64 * 64 * 3, 255.0f));
  const PreprocessedImages pre = model.preprocess(ctx, images);
  EXPECT_EQ(pre.images.to_vector<float>()[0], 1.0f) << "the fixture's preprocess";
  const TensorDict out = model.predict(ctx, pre, Mode::kEval);
  EXPECT_EQ(out.at("rpn_box_encodings").shape(), (Shape{1, 4 * 4, 4}));
  EXPECT_EQ(ctx.at("FirstStageFeatureExtractor/TinyNet/Conv/weights").value().shape(),
            (Shape{1, 1, 3, 8}));
  EXPECT_EQ(ctx.at("SecondStageFeatureExtractor/TinyNet/Conv/weights").value().shape(),
            (Shape{1, 1, 8, 16}));
  EXPECT_EQ(ctx.at("SecondStageBoxPredictor/ClassPredictor/weights").value().shape(),
            (Shape{16, 3}));
  EXPECT_EQ(model.restore_map("classification", false),
            (std::map<std::string, std::string>{{"FirstStageFeatureExtractor/", ""},
                                                {"SecondStageFeatureExtractor/", ""}}));
}

// ---- rfcn_box_predictor (R-FCN) ----

const std::string kRfcnGolden =
    std::string(TRAINYARD_SOURCE_DIR) + "/tests/golden/rfcn_box_predictor/";

std::vector<double> rfcn_golden(const std::string& name, std::size_t count) {
  std::ifstream in(kRfcnGolden + name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + kRfcnGolden + name);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  if (bytes.size() != count * sizeof(float)) {
    throw std::runtime_error(kRfcnGolden + name + ": " + std::to_string(bytes.size()) +
                             " bytes, expected " + std::to_string(count * sizeof(float)));
  }
  std::vector<float> values(count);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return {values.begin(), values.end()};
}

// The options of make_rfcn_box_predictor_golden.py's RfcnBoxPredictor (conv_hyperparams left
// unset: ReLU and biases, as the script's).
Options rfcn_options(Opts extra = {}) {
  const std::string p = "second_stage_box_predictor.rfcn_box_predictor.";
  Opts o = {{"second_stage_box_predictor", std::string("rfcn_box_predictor")},
            {p + "num_spatial_bins_height", int64_t{2}},
            {p + "num_spatial_bins_width", int64_t{2}},
            {p + "depth", int64_t{8}},
            {p + "crop_height", int64_t{4}},
            {p + "crop_width", int64_t{4}}};
  for (auto& [k, v] : extra) o[k] = v;
  return Options::resolve("FasterRCNNMetaArch", models::FasterRcnnMetaArch::kOptions, o);
}

TEST(RfcnBoxPredictor, GivesTheApisPredictionsWithItsVariableNames) {
  const Options options = rfcn_options();
  const detection::DetectionOptionReader reader(options, "FasterRCNNMetaArch");
  std::unique_ptr<detection::SecondStageBoxPredictor> predictor =
      models::make_rfcn_box_predictor(reader, "second_stage_box_predictor.rfcn_box_predictor");
  ASSERT_TRUE(predictor->crops_proposals());
  EXPECT_EQ(predictor->num_box_sets(2), 2);
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  const Tensor features =
      Tensor::from_vector(cpu(), Shape{2, 5, 6, 6}, rfcn_golden("features.f32", 360));
  const Tensor boxes = Tensor::from_vector(cpu(), Shape{2, 3, 4}, rfcn_golden("boxes.f32", 24));
  auto predict = [&] {
    layers::VariableScope root(ctx, Mode::kTrain);
    layers::VariableScope scope = root.child("SecondStageBoxPredictor");
    return predictor->predict_from_proposals(scope, ops::cast(features, DType::kF32),
                                             ops::cast(boxes, DType::kF32), 2);
  };
  predict();
  // The API's variables, by name and shape; set to the script's values.
  const std::vector<std::pair<std::string, Shape>> variables = {
      {"SecondStageBoxPredictor/reduce_depth/weights", Shape{1, 1, 6, 8}},
      {"SecondStageBoxPredictor/reduce_depth/biases", Shape{8}},
      {"SecondStageBoxPredictor/refined_locations/weights", Shape{1, 1, 8, 32}},
      {"SecondStageBoxPredictor/refined_locations/biases", Shape{32}},
      {"SecondStageBoxPredictor/class_predictions/weights", Shape{1, 1, 8, 12}},
      {"SecondStageBoxPredictor/class_predictions/biases", Shape{12}}};
  EXPECT_EQ(ctx.variable_names().size(), variables.size());
  for (const auto& [name, shape] : variables) {
    ASSERT_EQ(ctx.at(name).value().shape(), shape) << name;
    std::string file = name;
    for (std::size_t at = file.find('/'); at != std::string::npos; at = file.find('/')) {
      file.replace(at, 1, "__");
    }
    ctx.set_value(name, rfcn_golden(file + ".f32", static_cast<std::size_t>(shape.num_elements())));
  }
  const detection::SecondStageBoxPredictions got = predict();
  ASSERT_EQ(got.refined_box_encodings.shape(), (Shape{6, 2, 4}));
  ASSERT_EQ(got.class_predictions_with_background.shape(), (Shape{6, 3}));
  auto near = [](const Tensor& t, const std::vector<double>& want) {
    const std::vector<float> have = t.to_vector<float>();
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(have[i], want[i], 1e-4 * std::max(1.0, std::abs(want[i]))) << "element " << i;
    }
  };
  near(got.refined_box_encodings, rfcn_golden("box_encodings.f32", 48));
  near(got.class_predictions_with_background, rfcn_golden("class_predictions.f32", 18));
}

TEST(RfcnBoxPredictor, RefusesCropSizesTheBinsDoNotDivide) {
  const Options options =
      rfcn_options({{"second_stage_box_predictor.rfcn_box_predictor.crop_width", int64_t{5}}});
  const detection::DetectionOptionReader reader(options, "FasterRCNNMetaArch");
  const std::string m = message_of([&] {
    models::make_rfcn_box_predictor(reader, "second_stage_box_predictor.rfcn_box_predictor");
  });
  EXPECT_NE(m.find("second_stage_box_predictor.rfcn_box_predictor.crop_width is '5'"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("num_spatial_bins_width"), std::string::npos) << m;
}

TEST(RfcnBoxPredictor, MakesTheMetaArchR_FcnOnTheWholeFeatureMaps) {
  models::register_detection_parts();
  static NamedRegistration held;
  if (!held) {
    held = detection::faster_rcnn_feature_extractors().add(
        "tiny_rfcn_fixture", [](const detection::FasterRcnnFeatureExtractorParams&,
                                const detection::DetectionOptionReader&) {
          return std::make_unique<TinyFasterRcnnFeatureExtractor>();
        });
  }
  const std::string a = "first_stage_anchor_generator.grid_anchor_generator";
  models::FasterRcnnMetaArch model(
      rfcn_options({{"feature_extractor.type", std::string("tiny_rfcn_fixture")},
                    {"image_resizer.keep_aspect_ratio_resizer.min_dimension", int64_t{64}},
                    {"image_resizer.keep_aspect_ratio_resizer.max_dimension", int64_t{64}},
                    {a + ".height", int64_t{32}},
                    {a + ".width", int64_t{32}},
                    {a + ".scales", std::vector<double>{1.0}},
                    {a + ".aspect_ratios", std::vector<double>{1.0}},
                    {"first_stage_box_predictor_depth", int64_t{8}},
                    {"first_stage_max_proposals", int64_t{6}},
                    {"second_stage_batch_size", int64_t{6}}}));
  FakeModelContext ctx(cpu(), /*num_classes=*/2);
  Generator generator(38);
  const Tensor images =
      ops::cast(ops::random_uniform(cpu(), Shape{2, 64, 64, 3}, generator, 0, 255), DType::kF32);
  const PreprocessedImages pre = model.preprocess(ctx, images);
  const TensorDict out = model.predict(ctx, pre, Mode::kEval);
  std::size_t proposals = 0;
  for (const std::vector<float>& p : model.proposals()) proposals += p.size() / 4;
  ASSERT_GT(proposals, 0u);
  const auto total = static_cast<int64_t>(proposals);
  EXPECT_EQ(out.at("refined_box_encodings").shape(), (Shape{total, 2, 4}));
  EXPECT_EQ(out.at("class_predictions_with_background").shape(), (Shape{total, 3}));
  // The box classifier ran on the whole 4 x 4 feature map (its 16 channels), not on crops.
  EXPECT_EQ(ctx.at("SecondStageFeatureExtractor/TinyNet/Conv/weights").value().shape(),
            (Shape{1, 1, 8, 16}));
  EXPECT_EQ(ctx.at("SecondStageBoxPredictor/reduce_depth/weights").value().shape(),
            (Shape{1, 1, 16, 8}));
  EXPECT_EQ(ctx.at("SecondStageBoxPredictor/class_predictions/weights").value().shape(),
            (Shape{1, 1, 8, 12}));
  // Image 1's first proposal's logits are the predictor's on that image alone.
  const std::vector<float>& first = model.proposals()[1];
  ASSERT_GE(first.size(), 4u);
  const int64_t row = static_cast<int64_t>(model.proposals()[0].size() / 4);
  layers::VariableScope root(ctx, Mode::kEval);
  layers::VariableScope first_stage = root.child("FirstStageFeatureExtractor");
  layers::VariableScope second_stage = root.child("SecondStageFeatureExtractor");
  TinyFasterRcnnFeatureExtractor extractor;
  const Tensor features = extractor.extract_box_classifier_features(
      second_stage,
      extractor.extract_proposal_features(first_stage, ops::slice_outer(pre.images, 1, 1)));
  layers::VariableScope predictor_scope = root.child("SecondStageBoxPredictor");
  const detection::SecondStageBoxPredictions alone =
      model.config().second_stage_box_predictor->predict_from_proposals(
          predictor_scope, features,
          Tensor::from_vector(cpu(), Shape{1, 1, 4},
                              std::vector<float>(first.begin(), first.begin() + 4)),
          2);
  const std::vector<float> want = alone.class_predictions_with_background.to_vector<float>();
  const std::vector<float> have = out.at("class_predictions_with_background").to_vector<float>();
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(have[row * 3 + k], want[k], 1e-5) << k;
}

}  // namespace
}  // namespace trainyard
