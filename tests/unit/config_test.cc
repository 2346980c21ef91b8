// Pipeline configs: text-format errors with line and column, typed plugin params, and checks
// of plugin sections against the registry.
#include "trainyard/core/config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "od_config_test_util.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

// with_config_line reads the detection task's dialect (an Object Detection API config below).
const bool kDialectsLoaded = test::load_task_dialects();

namespace fs = std::filesystem;

template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

PluginRegistry fixture_registry() {
  PluginRegistry::Settings settings;
  settings.plugin_path = {fs::path(TRAINYARD_FIXTURE_DIR) / "good"};
  settings.use_environment = false;
  return PluginRegistry(settings);  // plus the build tree: cpu, LocalCollective
}

TEST(ConfigTest, DefaultsFollowTheYouTube8MFlags) {
  config::Pipeline p = parse_pipeline_config("", "empty.config");
  EXPECT_EQ(p.train_config().batch_size(), 1024);
  // train_dir and task are the task's defaults, filled in by resolve_task (task_defaults_test).
  EXPECT_FALSE(p.train_config().has_train_dir());
  EXPECT_FALSE(p.has_task());
  EXPECT_DOUBLE_EQ(p.train_config().regularization_penalty(), 1.0);
  EXPECT_DOUBLE_EQ(p.train_config().clip_gradient_norm(), 1.0);
  EXPECT_EQ(p.train_config().export_model_steps(), 1000);
  EXPECT_EQ(p.train_input_reader().num_readers(), 8);
  EXPECT_EQ(p.train_input_reader().num_epochs(), 5);
  EXPECT_EQ(p.eval_config().top_k(), 20);
  EXPECT_EQ(p.num_classes(), 3862);
  const auto& lr = p.train_config().learning_rate().exponential_decay_examples();
  EXPECT_DOUBLE_EQ(lr.base_learning_rate(), 0.01);
  EXPECT_DOUBLE_EQ(lr.learning_rate_decay(), 0.95);
  EXPECT_EQ(lr.learning_rate_decay_examples(), 4000000);
}

TEST(ConfigTest, SyntaxErrorNamesSourceLineAndColumn) {
  std::string m = error_of([] {
    parse_pipeline_config("model {\n  class: \"MoeModel\"\n  parms { key: \"x\" }\n}\n",
                          "my.config");
  });
  EXPECT_EQ(m.rfind("my.config:3:", 0), 0u) << m;
  EXPECT_NE(m.find("parms"), std::string::npos) << m;
  m = error_of([] { parse_pipeline_config("train_config { batch_size: \"big\" }", "b.config"); });
  EXPECT_EQ(m.rfind("b.config:1:", 0), 0u) << m;
}

// The parser recurses once per nested message. Pipeline has no recursive message and unknown
// fields are refused, so nesting stops at the schema's depth (fuzz_pipeline_config): 100,000
// nested blocks are a syntax error at the first unknown one, not a stack overflow.
TEST(ConfigTest, DeepNestingStopsAtTheSchema) {
  std::string deep = "model { params { ";
  for (int i = 0; i < 100000; ++i) deep += "x { ";
  const std::string m = error_of([&] { parse_pipeline_config(deep, "deep.config"); });
  EXPECT_EQ(m.rfind("deep.config:1:", 0), 0u) << m.substr(0, 200);
  EXPECT_NE(m.find("\"x\""), std::string::npos) << m.substr(0, 200);
}

TEST(ConfigTest, UnreadableFileIsNamed) {
  std::string m = error_of([] { load_pipeline_config("/nonexistent/pipeline.config"); });
  EXPECT_NE(m.find("/nonexistent/pipeline.config"), std::string::npos) << m;
}

TEST(ConfigTest, ParamsBecomeTypedValues) {
  config::Pipeline p = parse_pipeline_config(R"(
    model {
      class: "FixtureModel"
      params { key: "hidden_size" int_value: 4 }
      params { key: "l2_penalty" float_value: 0.5 }
      params { key: "layer_sizes" int_list { value: [1, 2, 3] } }
      params { key: "feature_names" string_list { value: ["rgb", "audio"] } }
    })",
                                             "t");
  auto params = plugin_params(p.model(), "model");
  EXPECT_EQ(std::get<int64_t>(params.at("hidden_size")), 4);
  EXPECT_DOUBLE_EQ(std::get<double>(params.at("l2_penalty")), 0.5);
  EXPECT_EQ(std::get<std::vector<int64_t>>(params.at("layer_sizes")),
            (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(std::get<std::vector<std::string>>(params.at("feature_names")),
            (std::vector<std::string>{"rgb", "audio"}));

  config::Pipeline twice = parse_pipeline_config(
      "model { class: \"M\" params { key: \"a\" int_value: 1 } params { key: \"a\" int_value: 2 } "
      "}",
      "t");
  EXPECT_NE(error_of([&] { plugin_params(twice.model(), "model"); }).find("'a' is given twice"),
            std::string::npos);
  config::Pipeline no_value = parse_pipeline_config("model { params { key: \"a\" } }", "t");
  EXPECT_NE(error_of([&] { plugin_params(no_value.model(), "model"); }).find("'a' has no value"),
            std::string::npos);
}

TEST(ConfigTest, PluginSectionsAreCheckedAgainstDeclaredOptions) {
  PluginRegistry registry = fixture_registry();
  config::Pipeline ok = parse_pipeline_config(R"(
    model { class: "FixtureModel" params { key: "hidden_size" int_value: 4 } }
    train_config { label_loss { class: "FixtureLoss" } }
    backend { class: "cpu" params { key: "num_threads" int_value: 1 } }
    distributed { collective { class: "LocalCollective" } })",
                                              "ok.config");
  EXPECT_NO_THROW(check_pipeline_plugins(ok, registry));

  config::Pipeline typo = parse_pipeline_config(
      "model { class: \"FixtureModel\" params { key: \"hiden_size\" int_value: 4 } }", "t");
  std::string m = error_of([&] { check_pipeline_plugins(typo, registry); });
  EXPECT_EQ(m.rfind("model: FixtureModel has no option 'hiden_size'", 0), 0u) << m;
  EXPECT_NE(m.find("Did you mean 'hidden_size'?"), std::string::npos) << m;

  config::Pipeline wrong_type = parse_pipeline_config(
      "model { class: \"FixtureModel\" params { key: \"hidden_size\" string_value: \"4\" } }", "t");
  m = error_of([&] { check_pipeline_plugins(wrong_type, registry); });
  EXPECT_NE(m.find("option 'hidden_size' expects int, but was given string"), std::string::npos)
      << m;

  config::Pipeline wrong_kind =
      parse_pipeline_config("train_config { label_loss { class: \"FixtureModel\" } }", "t");
  m = error_of([&] { check_pipeline_plugins(wrong_kind, registry); });
  EXPECT_EQ(m.rfind("train_config.label_loss: 'FixtureModel' is a model class", 0), 0u) << m;

  config::Pipeline no_class = parse_pipeline_config("model { }", "t");
  EXPECT_EQ(error_of([&] { check_pipeline_plugins(no_class, registry); }),
            "model: 'class' is missing");
}

TEST(ConfigTest, PrintWithDefaultsRoundTrips) {
  config::Pipeline p = parse_pipeline_config("train_config { batch_size: 64 }", "t");
  std::string text = pipeline_config_to_text(p, true);
  EXPECT_NE(text.find("batch_size: 64"), std::string::npos) << text;
  EXPECT_NE(text.find("regularization_penalty: 1"), std::string::npos) << text;
  config::Pipeline again = parse_pipeline_config(text, "printed");
  EXPECT_EQ(again.train_config().batch_size(), 64);
  EXPECT_TRUE(again.train_config().has_clip_gradient_norm());
}

TEST(ConfigTest, ShippedConfigsParseAndCheck) {
  PluginRegistry registry = fixture_registry();
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(TRAINYARD_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".config") continue;
    SCOPED_TRACE(entry.path().string());
    config::Pipeline p = load_pipeline_config(entry.path());
    EXPECT_NO_THROW(check_pipeline_plugins(p, registry));
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// with_config_line: the line that sets the field or option an error names, in either format.
class ConfigLineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() /
             ("trainyard_config_line_" + std::to_string(::getpid()) + ".config"))
                .string();
  }
  void TearDown() override { fs::remove(path_); }
  void write(const std::string& text) {
    std::ofstream out(path_);
    out << text;
  }
  std::string path_;
};

TEST_F(ConfigLineTest, NamesTheLineOfAFieldAndOfAPluginParam) {
  write(
      "num_classes: 4\n"
      "train_config {\n"
      "  batch_size: -5\n"
      "  optimizer {\n"
      "    class: \"AdamOptimizer\"\n"
      "    params { key: \"beta1\" float_value: 2 }\n"
      "  }\n"
      "}\n");
  EXPECT_EQ(with_config_line("train_config.batch_size is -5; it must be at least 1", path_),
            "train_config.batch_size is -5; it must be at least 1 (" + path_ + " line 3)");
  EXPECT_EQ(with_config_line("train_config.optimizer.params.beta1 is 2", path_),
            "train_config.optimizer.params.beta1 is 2 (" + path_ + " line 6)");
  // "batch_size" inside a longer name, or a name the file does not set: unchanged.
  EXPECT_EQ(with_config_line("eval_config.batch_size is 0", path_), "eval_config.batch_size is 0");
  EXPECT_EQ(with_config_line("nothing here", path_), "nothing here");
}

TEST_F(ConfigLineTest, NamesTheLineOfAnObjectDetectionModelOptionAndSkipsAmbiguousNames) {
  write(
      "model {\n"
      "  ssd {\n"
      "    num_classes: 4\n"
      "    feature_extractor {\n"
      "      type: \"ssd_mobilenet_v1\"\n"
      "      depth_multiplier: 1e6\n"
      "    }\n"
      "    anchor_generator { ssd_anchor_generator {\n"
      "      aspect_ratios: 1.0\n"
      "      aspect_ratios: 0\n"
      "    } }\n"
      "  }\n"
      "}\n");
  // As the SSD plugin names its option, and as the converter names the field.
  EXPECT_EQ(with_config_line("feature_extractor.depth_multiplier is '1000000'", path_),
            "feature_extractor.depth_multiplier is '1000000' (" + path_ + " line 6)");
  EXPECT_EQ(with_config_line("model.ssd.num_classes is 0", path_),
            "model.ssd.num_classes is 0 (" + path_ + " line 3)");
  // Set on two lines: no line is said; an index picks one.
  const std::string ratios = "anchor_generator.ssd_anchor_generator.aspect_ratios is '0'";
  EXPECT_EQ(with_config_line(ratios, path_), ratios);
  EXPECT_EQ(with_config_line("anchor_generator.ssd_anchor_generator.aspect_ratios[1] is 0", path_),
            "anchor_generator.ssd_anchor_generator.aspect_ratios[1] is 0 (" + path_ + " line 10)");
}

TEST_F(ConfigLineTest, AnUnreadableOrUnparsableFileLeavesTheMessage) {
  EXPECT_EQ(with_config_line("train_config.batch_size is -5", path_ + ".missing"),
            "train_config.batch_size is -5");
  write("train_config { batch_size: \n");
  EXPECT_EQ(with_config_line("train_config.batch_size is -5", path_),
            "train_config.batch_size is -5");
}

}  // namespace
}  // namespace trainyard
