// Fine-tuning through a detection model's restore map (StoreContext::set_fine_tune's scopes,
// DetectionModel::restore_map): a classification checkpoint's "MobilenetV1/..." variables are
// read into "FeatureExtractor/MobilenetV1/...", the longest matching scope wins, variables under
// no scope stay as initialized, and the report names each variable with its checkpoint name.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/model_context.h"
#include "test_backends.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/variable.h"

namespace trainyard {
namespace {

class FineTuneScopesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fine_tune_scopes_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    // A classification checkpoint as TF-Slim names it, with a global_step.
    write_checkpoint((dir_ / "model.ckpt").string(),
                     {{"MobilenetV1/Conv2d_0/weights", values({2, 2}, 1.5f)},
                      {"MobilenetV1/Conv2d_0/BatchNorm/beta", values({2}, 0.25f)},
                      {"MobilenetV1/Logits/weights", values({3}, 9.0f)},
                      {"Special/weights", values({2}, 7.0f)},
                      {"global_step", values({}, 100.0f)}});
    reader_ = std::make_unique<CheckpointReader>((dir_ / "model.ckpt").string());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Backend& backend() { return *backend_; }
  Tensor values(const Shape& shape, float v) {
    std::vector<float> data(static_cast<std::size_t>(shape.num_elements()), v);
    return Tensor::from_vector(backend(), shape, data);
  }
  static VariableSpec spec(const std::string& name, const Shape& shape) {
    VariableSpec s;
    s.name = name;
    s.shape = shape;
    s.initializer = Initializer::zeros();
    return s;
  }
  static float first(const Variable& v) { return v.value().to_vector<float>()[0]; }

  std::shared_ptr<Backend> backend_ = test::backend("cpu");
  std::filesystem::path dir_;
  std::unique_ptr<CheckpointReader> reader_;
};

TEST_F(FineTuneScopesTest, ClassificationScopeReadsTheFeatureExtractorFromUnscopedNames) {
  VariableStore store(backend(), 1);
  StoreContext ctx(backend(), store, 4, 1, nullptr);
  ctx.set_fine_tune(reader_.get(), {}, {{"FeatureExtractor/", ""}});
  Variable& weights = ctx.variable(spec("FeatureExtractor/MobilenetV1/Conv2d_0/weights", {2, 2}));
  Variable& beta = ctx.variable(spec("FeatureExtractor/MobilenetV1/Conv2d_0/BatchNorm/beta", {2}));
  Variable& extra = ctx.variable(
      spec("FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_256/weights", {2}));
  Variable& logits = ctx.variable(spec("FeatureExtractor/MobilenetV1/Logits/weights", {4}));
  Variable& predictor = ctx.variable(spec("BoxPredictor_0/BoxEncodingPredictor/weights", {2}));
  EXPECT_EQ(first(weights), 1.5f);
  EXPECT_EQ(first(beta), 0.25f);
  EXPECT_EQ(first(extra), 0.0f);
  EXPECT_EQ(first(logits), 0.0f);
  EXPECT_EQ(first(predictor), 0.0f);
  const StoreContext::FineTuneReport& r = ctx.fine_tune_report();
  EXPECT_EQ(r.restored,
            (std::vector<std::string>{"FeatureExtractor/MobilenetV1/Conv2d_0/weights (as "
                                      "MobilenetV1/Conv2d_0/weights)",
                                      "FeatureExtractor/MobilenetV1/Conv2d_0/BatchNorm/beta (as "
                                      "MobilenetV1/Conv2d_0/BatchNorm/beta)"}));
  EXPECT_EQ(r.missing, (std::vector<std::string>{
                           "FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_256/"
                           "weights (as MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_256/"
                           "weights)"}));
  ASSERT_EQ(r.mismatched.size(), 1u);
  EXPECT_NE(r.mismatched[0].find("FeatureExtractor/MobilenetV1/Logits/weights (as "
                                 "MobilenetV1/Logits/weights): checkpoint"),
            std::string::npos)
      << r.mismatched[0];
  EXPECT_EQ(r.outside_restore_map,
            std::vector<std::string>{"BoxPredictor_0/BoxEncodingPredictor/weights"});
}

TEST_F(FineTuneScopesTest, LongestScopeWinsAndExcludedScopesComeFirst) {
  VariableStore store(backend(), 1);
  StoreContext ctx(backend(), store, 4, 1, nullptr);
  ctx.set_fine_tune(reader_.get(), {"Skip/"}, {{"", "MobilenetV1/"}, {"Net/Special/", "Special/"}});
  Variable& special = ctx.variable(spec("Net/Special/weights", {2}));
  Variable& general = ctx.variable(spec("Conv2d_0/BatchNorm/beta", {2}));
  Variable& skipped = ctx.variable(spec("Skip/Conv2d_0/weights", {2, 2}));
  EXPECT_EQ(first(special), 7.0f);
  EXPECT_EQ(first(general), 0.25f);
  EXPECT_EQ(first(skipped), 0.0f);
  EXPECT_EQ(ctx.fine_tune_report().excluded, std::vector<std::string>{"Skip/Conv2d_0/weights"});
  EXPECT_TRUE(ctx.fine_tune_report().outside_restore_map.empty());
}

TEST_F(FineTuneScopesTest, WithoutScopesEveryVariableIsReadByItsOwnName) {
  VariableStore store(backend(), 1);
  StoreContext ctx(backend(), store, 4, 1, nullptr);
  ctx.set_fine_tune(reader_.get(), {});
  Variable& weights = ctx.variable(spec("MobilenetV1/Conv2d_0/weights", {2, 2}));
  Variable& scoped = ctx.variable(spec("FeatureExtractor/MobilenetV1/Conv2d_0/weights", {2, 2}));
  EXPECT_EQ(first(weights), 1.5f);
  EXPECT_EQ(first(scoped), 0.0f);
  EXPECT_EQ(ctx.fine_tune_report().restored,
            std::vector<std::string>{"MobilenetV1/Conv2d_0/weights"});
  EXPECT_EQ(ctx.fine_tune_report().missing,
            std::vector<std::string>{"FeatureExtractor/MobilenetV1/Conv2d_0/weights"});
}

}  // namespace
}  // namespace trainyard
