// Registrations have owners: a composite and a detection part that a plugin registers from its
// static storage are found while the plugin is loaded, are gone once it is closed, and are
// registered afresh when it is loaded again; a composite two plugins declare alike stays while
// either is loaded. The part a third party's plugin adds is what SSDMetaArch, in the models
// plugin, builds.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/loss.h"
#include "trainyard/named_registry.h"
#include "trainyard/op.h"
#include "trainyard/pkg/detection/ssd_feature_extractor.h"

namespace trainyard {
namespace {

constexpr const char kSquare[] = "fixture.owned_square";
constexpr const char kExtractorA[] = "fixture_owned_extractor_a";
constexpr const char kExtractorB[] = "fixture_owned_extractor_b";

std::unique_ptr<PluginRegistry> registry() {
  PluginRegistry::Settings settings;
  settings.plugin_path = {std::string(TRAINYARD_FIXTURE_DIR) + "/registrations_a",
                          std::string(TRAINYARD_FIXTURE_DIR) + "/registrations_b"};
  settings.use_environment = false;
  return std::make_unique<PluginRegistry>(settings);
}

bool extractor_registered(const std::string& name) {
  return detection::ssd_feature_extractors().contains(name);
}

std::string find_error(const std::string& name) {
  try {
    detection::ssd_feature_extractors().find("SSDMetaArch", "feature_extractor.type", name);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(found)";
}

TEST(RegistrationOwners, APluginsRegistrationsGoWhenItIsClosedAndComeBackWhenItIsLoaded) {
  auto plugins = registry();
  auto cpu = plugins->create<Backend>(ClassKind::kBackend, "cpu");
  ASSERT_EQ(find_op(kSquare), nullptr) << "declared before the fixture was loaded";
  ASSERT_FALSE(extractor_registered(kExtractorA));
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("load " + std::to_string(round + 1));
    auto loss = plugins->create<Loss>(ClassKind::kLoss, "RegistrationsLossA");
    const OpInfo* square = find_op(kSquare);
    ASSERT_NE(square, nullptr);
    EXPECT_TRUE(square->composite);
    EXPECT_TRUE(extractor_registered(kExtractorA));
    EXPECT_NE(named_registry::owner("detection.ssd_feature_extractor", kExtractorA)
                  .find("registrations_a"),
              std::string::npos);
    Tensor x = Tensor::from_vector<float>(*cpu, Shape{3}, {1, -2, 3});
    EXPECT_EQ(loss->calculate_loss(x, x, std::nullopt).to_vector<float>(),
              (std::vector<float>{1, 4, 9}));
    loss.reset();
    ASSERT_EQ(plugins->loaded_library_count(), 1u) << "only the cpu backend's stays loaded";
    EXPECT_EQ(find_op(kSquare), nullptr) << "the closed plugin's composite is still declared";
    for (const OpInfo& op : declared_ops()) EXPECT_STRNE(op.name, kSquare);
    EXPECT_FALSE(extractor_registered(kExtractorA));
    const std::string error = find_error(kExtractorA);
    EXPECT_NE(error.find("feature_extractor.type is 'fixture_owned_extractor_a', which is not a "
                         "registered SSD feature extractor"),
              std::string::npos)
        << error;
  }
}

TEST(RegistrationOwners, ACompositeTwoPluginsDeclareStaysWhileEitherIsLoaded) {
  auto plugins = registry();
  auto cpu = plugins->create<Backend>(ClassKind::kBackend, "cpu");
  auto a = plugins->create<Loss>(ClassKind::kLoss, "RegistrationsLossA");
  auto b = plugins->create<Loss>(ClassKind::kLoss, "RegistrationsLossB");
  EXPECT_TRUE(extractor_registered(kExtractorA));
  EXPECT_TRUE(extractor_registered(kExtractorB));
  a.reset();
  ASSERT_EQ(plugins->loaded_library_count(), 2u);
  EXPECT_NE(find_op(kSquare), nullptr) << "withdrawn although registrations_b still declares it";
  EXPECT_FALSE(extractor_registered(kExtractorA));
  EXPECT_TRUE(extractor_registered(kExtractorB));
  Tensor x = Tensor::from_vector<float>(*cpu, Shape{2}, {2, 3});
  EXPECT_EQ(b->calculate_loss(x, x, std::nullopt).to_vector<float>(), (std::vector<float>{4, 9}));
  b.reset();
  ASSERT_EQ(plugins->loaded_library_count(), 1u);
  EXPECT_EQ(find_op(kSquare), nullptr);
  EXPECT_FALSE(extractor_registered(kExtractorB));
}

// The models plugin's SSDMetaArch builds the extractor the fixture plugin registered: one table
// per part family for the whole process.
TEST(RegistrationOwners, SsdMetaArchFindsAThirdPartysFeatureExtractor) {
  auto plugins = registry();
  auto a = plugins->create<Loss>(ClassKind::kLoss, "RegistrationsLossA");
  std::map<std::string, OptionValue> given = {
      {"image_resizer", std::string("fixed_shape_resizer")},
      {"box_coder", std::string("faster_rcnn_box_coder")},
      {"matcher", std::string("argmax_matcher")},
      {"similarity_calculator", std::string("iou_similarity")},
      {"anchor_generator", std::string("ssd_anchor_generator")},
      {"box_predictor", std::string("convolutional_box_predictor")},
      {"feature_extractor.type", std::string(kExtractorA)}};
  EXPECT_NO_THROW(
      plugins->create<DetectionModel>(ClassKind::kDetectionModel, "SSDMetaArch", given));
  a.reset();
  plugins->loaded_library_count();  // closes the fixture
  try {
    plugins->create<DetectionModel>(ClassKind::kDetectionModel, "SSDMetaArch", given);
    FAIL() << "SSDMetaArch was built with the extractor of a closed plugin";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fixture_owned_extractor_a', which is not a registered "
                                         "SSD feature extractor"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trainyard
