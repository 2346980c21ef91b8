// The fixture the trainer's integration tests share: a small synthetic YouTube-8M dataset
// (600 training and 120 validation videos, 30 classes, mean_rgb[24] and mean_audio[8]) and a
// pipeline that trains on it in a few seconds.
#ifndef TRAINYARD_TESTS_INTEGRATION_TRAINER_FIXTURE_H_
#define TRAINYARD_TESTS_INTEGRATION_TRAINER_FIXTURE_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "data_tools.h"
#include "trainyard/core/config.h"
#include "trainyard/core/trainer.h"
#include "trainyard/core/registry.h"

namespace trainyard {

namespace fs = std::filesystem;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("trainyard_trainer_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    app::SynthYt8mOptions o;
    o.output_dir = (root_ / "data").string();
    o.num_videos = 600;
    o.num_classes = 30;
    o.num_shards = 2;
    o.feature_sizes = {24, 8};
    o.seed = 9;
    app::synth_yt8m(o);
    PluginRegistry::Settings s;
    s.use_environment = false;
    registry_ = std::make_unique<PluginRegistry>(s);
  }
  void TearDown() override { fs::remove_all(root_); }

  config::Pipeline pipeline(const std::string& model = "LogisticModel") {
    config::Pipeline p = parse_pipeline_config(
        "model { class: \"" + model +
            "\" }\n"
            "num_classes: 30\n"
            "train_config { batch_size: 50 log_every_n_steps: 5 save_interval_secs: 1000 seed: 1\n"
            "  learning_rate { constant { learning_rate: 0.05 } } }\n"
            "train_input_reader { data_pattern: \"" +
            (root_ / "data/train-*").string() +
            "\"\n"
            "  num_epochs: 2 num_readers: 2\n"
            "  reader { class: \"YT8MAggregatedFeatureReader\"\n"
            "    params { key: \"feature_names\" string_list { value: [\"mean_rgb\", "
            "\"mean_audio\"] } }\n"
            "    params { key: \"feature_sizes\" int_list { value: [24, 8] } }\n"
            "    params { key: \"num_classes\" int_value: 30 } } }\n"
            "eval_input_reader { data_pattern: \"" +
            (root_ / "data/validate-*").string() +
            "\"\n"
            "  reader { class: \"YT8MAggregatedFeatureReader\"\n"
            "    params { key: \"feature_names\" string_list { value: [\"mean_rgb\", "
            "\"mean_audio\"] } }\n"
            "    params { key: \"feature_sizes\" int_list { value: [24, 8] } }\n"
            "    params { key: \"num_classes\" int_value: 30 } } }\n"
            "eval_config { batch_size: 40 }\n",
        "test");
    p.mutable_train_config()->set_train_dir((root_ / "train").string());
    return p;
  }

  fs::path root_;
  std::unique_ptr<PluginRegistry> registry_;
};

}  // namespace trainyard

#endif  // TRAINYARD_TESTS_INTEGRATION_TRAINER_FIXTURE_H_
