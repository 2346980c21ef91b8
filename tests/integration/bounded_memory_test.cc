// Resident memory stays flat over a long run: each model family (YouTube-8M's video-level
// LogisticModel and MoeModel, the frame-level DbofModel, TF-Slim's LeNet image classifier)
// trains on synthetic data, writing checkpoints and histogram summaries every step (LeNet's,
// 40 MB with Adam's slots, every second) and an export every fifth of the run (in hundreds of
// steps), then evaluates four times. VmRSS (/proc/self/status; the
// trainer runs in this process) after the last step may exceed its largest value in the first
// half of the run (from step 100) by at most 5 MB + 2 %, and after the fourth evaluation that
// after the second by as much: over 1,000 steps, a per-step leak of about 10 kB fails.
//
// The step count is TRAINYARD_MEMORY_STEPS (default 300, the integration test); ctest's
// `long` label runs it with 1,000.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <regex>
#include <sstream>

#include "trainer_fixture.h"
#include "trainyard/core/evaluator.h"
#include "trainyard/core/host_malloc.h"
#include "trainyard/core/training_loop.h"

namespace trainyard {
namespace {

// Resident set size of this process in kB.
int64_t resident_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  ADD_FAILURE() << "no VmRSS in /proc/self/status";
  return 0;
}

// A log that calls `on_line` with each complete line written to it and keeps the last lines
// (a bounded amount, so the test itself does not grow).
class LineTap : public std::streambuf {
 public:
  explicit LineTap(std::function<void(const std::string&)> on_line)
      : on_line_(std::move(on_line)) {}
  const std::string& text() const { return text_; }

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return 0;
    const char ch = static_cast<char>(c);
    text_ += ch;
    if (text_.size() > 2 * kKept) text_.erase(0, text_.size() - kKept);
    if (ch == '\n') {
      on_line_(line_);
      line_.clear();
    } else {
      line_ += ch;
    }
    return c;
  }

 private:
  static constexpr std::size_t kKept = 8192;
  std::function<void(const std::string&)> on_line_;
  std::string line_;
  std::string text_;
};

int64_t steps_to_train() {
  const char* value = std::getenv("TRAINYARD_MEMORY_STEPS");
  return value != nullptr ? std::strtoll(value, nullptr, 10) : 300;
}

class BoundedMemoryTest : public TrainerTest {
 protected:
  // The host's malloc settings (host_malloc.h), so that what stays flat is what `trainyard`
  // runs with.
  static void SetUpTestSuite() { tune_malloc_for_training(); }

  // The growth allowed over `base_kb`: 5 MB + 2 %.
  static int64_t allowed_kb(int64_t base_kb) { return 5 * 1024 + base_kb / 50; }

  // Trains `p` for steps_to_train() steps, logging every 100 and writing a checkpoint and
  // histograms every `save_secs` (0: every step), then evaluates four times; checks and
  // prints the resident memory at those points.
  void expect_flat(config::Pipeline p, const std::string& family, double save_secs) {
    const int64_t steps = steps_to_train();
    ASSERT_GE(steps, 200);
    p.mutable_train_config()->set_max_steps(steps);
    p.mutable_train_config()->set_log_every_n_steps(100);
    p.mutable_train_config()->set_save_interval_secs(save_secs);
    p.mutable_train_config()->set_save_summaries_secs(save_secs);
    // Exports (a SavedModel beside Trainyard's files) in both halves of the run: one at the last
    // step alone would put its one-off working memory into the last sample.
    p.mutable_train_config()->set_export_model_steps(std::max<int64_t>(100, steps / 500 * 100));
    p.mutable_train_input_reader()->set_num_epochs(0);
    p.mutable_eval_config()->set_steps(20);
    // kB after the logged step, sampled at the last line naming it (at an export's step, the
    // line that reports the export)
    std::map<int64_t, int64_t> rss_at_step;
    const std::regex step_line("step ([0-9]+)[ :|]");
    LineTap tap([&](const std::string& line) {
      std::smatch m;
      if (std::regex_search(line, m, step_line)) rss_at_step[std::stoll(m[1])] = resident_kb();
    });
    std::ostream log(&tap);
    TrainResult result = train(*registry_, p, log);
    ASSERT_EQ(result.global_step, steps) << tap.text();
    ASSERT_TRUE(rss_at_step.count(100) && rss_at_step.count(steps - 100) &&
                rss_at_step.count(steps))
        << tap.text();
    std::vector<int64_t> after_eval;
    for (int i = 0; i < 4; ++i) {
      evaluate(*registry_, p, "", log);
      after_eval.push_back(resident_kb());
    }
    // The baseline is the largest sample of the first half of the run (at least steps 100 and
    // 200): how soon the allocator and the caches reach their working size depends on the
    // machine's speed (LeNet's checkpoints, every 2 s, took it from 115 to 137 MB between steps
    // 100 and 200 on a loaded machine, then it stayed flat); a leak keeps growing after that.
    // The larger of the last two samples: LeNet's process gives back tens of megabytes around
    // its final step, which would hide growth before it.
    int64_t base = 0;
    for (const auto& [step, kb] : rss_at_step) {
      if (step >= 100 && step <= std::max<int64_t>(200, steps / 2)) base = std::max(base, kb);
    }
    const int64_t last = std::max(rss_at_step[steps], rss_at_step[steps - 100]);
    std::cout << family << ": VmRSS " << base << " kB at most in the first half, " << last
              << " kB after step " << steps << " (the larger of it and step " << (steps - 100)
              << ": " << (last - base) << " kB more), " << after_eval[1]
              << " kB after the second evaluation, " << after_eval[3] << " kB after the fourth ("
              << (after_eval[3] - after_eval[1]) << " kB); at each logged step:";
    for (const auto& [step, kb] : rss_at_step) std::cout << " " << step << ":" << kb;
    std::cout << "\n";
    EXPECT_LE(last - base, allowed_kb(base))
        << family << " grew by " << (last - base) << " kB from the first half to step " << steps;
    // The first evaluation warms the evaluation's caches (LeNet: 3 MB, then flat).
    EXPECT_LE(after_eval[3] - after_eval[1], allowed_kb(after_eval[1]))
        << family << " grew by " << (after_eval[3] - after_eval[1]) << " kB over two evaluations";
  }
};

TEST_F(BoundedMemoryTest, LogisticModelStaysFlat) {
  expect_flat(pipeline("LogisticModel"), "LogisticModel", 0);
}

TEST_F(BoundedMemoryTest, MoeModelStaysFlat) { expect_flat(pipeline("MoeModel"), "MoeModel", 0); }

TEST_F(BoundedMemoryTest, FrameLevelDbofModelStaysFlat) {
  app::SynthYt8mOptions o;
  o.output_dir = (root_ / "frames").string();
  o.num_videos = 200;
  o.num_classes = 30;
  o.num_shards = 2;
  o.feature_sizes = {24, 8};
  o.frame_level = true;
  o.min_frames = 10;
  o.max_frames = 30;
  o.seed = 4;
  app::synth_yt8m(o);
  std::string reader =
      "reader { class: \"YT8MFrameFeatureReader\"\n"
      "  params { key: \"feature_names\" string_list { value: [\"rgb\", \"audio\"] } }\n"
      "  params { key: \"feature_sizes\" int_list { value: [24, 8] } }\n"
      "  params { key: \"num_classes\" int_value: 30 } }\n";
  config::Pipeline p = parse_pipeline_config(
      "model { class: \"DbofModel\"\n"
      "  params { key: \"iterations\" int_value: 10 }\n"
      "  params { key: \"dbof_cluster_size\" int_value: 32 }\n"
      "  params { key: \"dbof_hidden_size\" int_value: 16 }\n"
      "  params { key: \"moe_num_mixtures\" int_value: 2 } }\n"
      "num_classes: 30\n"
      "train_config { batch_size: 20 seed: 1\n"
      "  learning_rate { constant { learning_rate: 0.01 } } }\n"
      "train_input_reader { data_pattern: \"" +
          (root_ / "frames/train-*").string() + "\" num_readers: 2\n" + reader +
          "}\n"
          "eval_input_reader { data_pattern: \"" +
          (root_ / "frames/validate-*").string() + "\"\n" + reader +
          "}\n"
          "eval_config { batch_size: 20 }\n",
      "test");
  p.mutable_train_config()->set_train_dir((root_ / "train").string());
  expect_flat(p, "DbofModel (frame level)", 0);
}

TEST_F(BoundedMemoryTest, ImageClassifierStaysFlat) {
  // 1,000 28x28 gray images of 10 classes (a stripe pattern per class), converted as
  // `trainyard data convert-mnist` does.
  const int n = 1000, side = 28;
  auto be32 = [](std::ofstream& out, uint32_t v) {
    const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 8), static_cast<char>(v)};
    out.write(b, 4);
  };
  {
    std::ofstream images(root_ / "images.idx", std::ios::binary);
    std::ofstream labels(root_ / "labels.idx", std::ios::binary);
    be32(images, 0x803);
    be32(images, n);
    be32(images, side);
    be32(images, side);
    be32(labels, 0x801);
    be32(labels, n);
    for (int i = 0; i < n; ++i) {
      for (int p = 0; p < side * side; ++p) {
        images.put(
            static_cast<char>(((p / side + i) % (i % 10 + 2)) == 0 ? 255 : (p * 7 + i) % 64));
      }
      labels.put(static_cast<char>(i % 10));
    }
  }
  app::convert_mnist((root_ / "images.idx").string(), (root_ / "labels.idx").string(),
                     (root_ / "mnist/train.tfrecord").string());
  const std::string preprocessing =
      "preprocessing_step { image_classification_preprocessing {\n"
      "  fixed_resize_side: 0 default_image_size: 28 normalization: LENET } }\n";
  config::Pipeline p = parse_pipeline_config(
      "task: \"classification\"\n"
      "num_classes: 10\n"
      "model { class: \"lenet\" }\n"
      "train_config { batch_size: 8 seed: 1 clip_gradient_norm: 0\n"
      "  optimizer { class: \"AdamOptimizer\" }\n"
      "  learning_rate { constant { learning_rate: 0.001 } } }\n"
      "train_input_reader { data_pattern: \"" +
          (root_ / "mnist/train.tfrecord").string() +
          "\" num_readers: 1\n"
          "  reader { class: \"ImageClassificationReader\"\n"
          "    params { key: \"channels\" int_value: 1 } }\n" +
          preprocessing +
          "}\n"
          "eval_input_reader { data_pattern: \"" +
          (root_ / "mnist/train.tfrecord").string() +
          "\"\n"
          "  reader { class: \"ImageClassificationReader\"\n"
          "    params { key: \"channels\" int_value: 1 } }\n" +
          preprocessing +
          "}\n"
          "eval_config { batch_size: 16 }\n",
      "test");
  p.mutable_train_config()->set_train_dir((root_ / "train").string());
  expect_flat(p, "lenet (image classifier)", 1);
}

}  // namespace
}  // namespace trainyard
