#include "trainyard/core/tasks/classification_task.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "../pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/atomic_file.h"
#include "trainyard/core/config.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kTopK = 5;
constexpr const char* kRunConfig = "pipeline.config";

std::vector<float> host_f32(const Tensor& t) {
  return ops::cast(t, DType::kF32).to_vector<float>();
}

// What a run of train_dir must keep: the model and its options, the number of classes.
std::string recorded_part(const config::Pipeline& pipeline) {
  config::Pipeline p;
  *p.mutable_model() = pipeline.model();
  if (!p.model().has_class_()) p.mutable_model()->set_class_(model_class(pipeline));
  p.set_num_classes(pipeline.num_classes());
  p.set_task(pipeline.task());
  return pipeline_config_to_text(p, /*with_defaults=*/false);
}

class ClassificationEvaluation final : public TaskEvaluation {
 public:
  explicit ClassificationEvaluation(int64_t num_classes) : num_classes_(num_classes) {}

  void add(const Tensor& predictions, const Batch& batch, double loss,
           int64_t batch_size) override {
    const std::vector<float> p = host_f32(predictions);
    const std::vector<float> l = host_f32(batch.labels);
    const TopKCounts c = count_correct(p, l, batch_size, num_classes_, kTopK);
    top1_ += c.top1;
    topk_ += c.topk;
    loss_sum_ += loss * static_cast<double>(batch_size);
    examples_ += batch_size;
  }

  std::vector<Metric> result() const override {
    const double n = std::max<double>(static_cast<double>(examples_), 1.0);
    std::vector<Metric> out = declared();
    out[0].value = static_cast<double>(top1_) / n;
    out[1].value = static_cast<double>(topk_) / n;
    out[2].value = loss_sum_ / n;
    out[3].value = static_cast<double>(examples_);
    return out;
  }

  // The estimator's "accuracy" and "loss" (the mean of the batches' losses weighted by their
  // sizes), slim's Recall_5 as top_5_accuracy; the count of examples is logged, not written.
  static std::vector<Metric> declared() {
    return {{"accuracy", "accuracy", 0.0},
            {"top_5_accuracy", "top_5_accuracy", 0.0},
            {"loss", "loss", 0.0},
            {"examples", "", 0.0}};
  }

 private:
  int64_t num_classes_;
  int64_t top1_ = 0;
  int64_t topk_ = 0;
  double loss_sum_ = 0.0;
  int64_t examples_ = 0;
};

// "ImageId,LabelConfidencePairs", then per image its id and top_k "label probability" pairs by
// descending probability, the probability to 6 significant digits.
class ClassificationPredictionWriter final : public PredictionWriter {
 public:
  ClassificationPredictionWriter(std::ostream& out, int64_t k) : out_(out), k_(k) {
    out_ << "ImageId,LabelConfidencePairs\n";
  }

  void write(const Tensor& predictions, const Batch& batch) override {
    auto [values, indices] = ops::top_k(ops::cast(predictions, DType::kF32), k_);
    const std::vector<float> v = values.to_vector<float>();
    const std::vector<int64_t> c = indices.to_vector<int64_t>();
    for (std::size_t i = 0; i < batch.ids.size(); ++i, ++index_) {
      out_ << (batch.ids[i].empty() ? std::to_string(index_) : batch.ids[i]) << ",";
      for (int64_t j = 0; j < k_; ++j) {
        const std::size_t at = i * static_cast<std::size_t>(k_) + static_cast<std::size_t>(j);
        out_ << (j ? " " : "") << c[at] << " " << std::defaultfloat << std::setprecision(6)
             << v[at];
      }
      out_ << "\n";
    }
  }

 private:
  std::ostream& out_;
  int64_t k_;
  int64_t index_ = 0;
};

class ClassificationTask final : public Task {
 public:
  std::string name() const override { return "classification"; }
  std::string default_model() const override { return "lenet"; }
  // The classifiers compute their own softmax cross-entropy; this names the class a model
  // without its own loss would get.
  std::string default_loss() const override { return "SoftmaxLoss"; }
  std::string default_optimizer() const override { return "MomentumOptimizer"; }
  std::string default_reader() const override { return kImageClassificationReader; }

  Batch to_device(Backend& backend, HostBatch& host) const override {
    Batch batch;
    for (auto& [name, feature] : host.features) {
      Tensor t = Tensor::from_host(backend, Shape(feature.shape), feature.dtype,
                                   feature.bytes.data(), feature.bytes.size());
      if (name == "labels") {
        batch.labels = t;
      } else {
        batch.features.emplace(name, t);
      }
    }
    batch.ids = std::move(host.ids);
    return batch;
  }

  void check_or_record_run(const config::Pipeline& pipeline,
                           const std::string& train_dir) const override {
    check_or_record_pipeline_config(pipeline, train_dir);
  }

  // The estimator's "loss = L, step = N" with the batch's accuracy; scalars "loss",
  // "accuracy" (the walkthrough's summaries), "learning_rate" and "examples/sec".
  void report_train_step(const config::Pipeline& pipeline, const TrainStepReport& step,
                         std::ostream& log, SummaryWriter& summaries) const override {
    NoGradScope no_grad;
    const std::vector<float> p = host_f32(*step.predictions);
    const std::vector<float> l = host_f32(step.batch->labels);
    const TopKCounts c = count_correct(p, l, step.batch_size, pipeline.num_classes(), /*k=*/1);
    const double accuracy =
        static_cast<double>(c.top1) / std::max<double>(static_cast<double>(step.batch_size), 1.0);
    log << "global step " << step.global_step << ": loss = " << std::fixed << std::setprecision(4)
        << step.loss << ", accuracy = " << accuracy << " (" << std::setprecision(1)
        << step.examples_per_sec << " examples/sec)\n";
    summaries.add_scalar("loss", step.loss, step.global_step);
    summaries.add_scalar("accuracy", accuracy, step.global_step);
    summaries.add_scalar("learning_rate", step.learning_rate, step.global_step);
    summaries.add_scalar("examples/sec", step.examples_per_sec, step.global_step);
  }

  std::unique_ptr<TaskEvaluation> make_evaluation(const config::Pipeline& pipeline) const override {
    return std::make_unique<ClassificationEvaluation>(pipeline.num_classes());
  }

  std::vector<Metric> evaluation_metrics() const override {
    return ClassificationEvaluation::declared();
  }

  // The estimator's "Saving dict for global step N: accuracy = ..., loss = ..." line.
  void report_evaluation(int64_t global_step, const std::vector<Metric>& metrics, std::ostream& log,
                         SummaryWriter& summaries) const override {
    log << "Saving dict for global step " << global_step << ":";
    bool first = true;
    for (const Metric& m : metrics) {
      if (m.tag.empty()) continue;
      log << (first ? " " : ", ") << m.name << " = " << std::defaultfloat << std::setprecision(6)
          << m.value;
      first = false;
      summaries.add_scalar(m.tag, m.value, global_step);
    }
    for (const Metric& m : metrics) {
      if (m.tag.empty()) log << ", " << m.name << " = " << static_cast<int64_t>(m.value);
    }
    log << ", global_step = " << global_step << "\n";
  }

  std::unique_ptr<PredictionWriter> make_prediction_writer(const config::Pipeline& pipeline,
                                                           std::ostream& out,
                                                           int top_k) const override {
    return std::make_unique<ClassificationPredictionWriter>(
        out, std::min<int64_t>(top_k, pipeline.num_classes()));
  }

  void write_export_files(const config::Pipeline&, const std::string&) const override {}
};

}  // namespace

const Task& classification_task() {
  static const ClassificationTask task;
  return task;
}

void check_or_record_pipeline_config(const config::Pipeline& pipeline,
                                     const std::string& train_dir) {
  const fs::path path = fs::path(train_dir) / kRunConfig;
  if (fs::exists(path)) {
    const config::Pipeline recorded = load_pipeline_config(path);
    const std::string was = recorded_part(recorded);
    const std::string now = recorded_part(pipeline);
    if (was != now) {
      throw ConfigError(path.string() + ": this train_dir was created with\n" + was +
                        "but this run has\n" + now +
                        "use --start_new_model (or another train_dir) to start over");
    }
    return;
  }
  write_file_atomically(path.string(), pipeline_config_to_text(pipeline, /*with_defaults=*/true));
}

TopKCounts count_correct(std::span<const float> predictions, std::span<const float> labels,
                         int64_t rows, int64_t num_classes, int64_t k) {
  const auto n = static_cast<std::size_t>(rows * num_classes);
  if (rows < 0 || num_classes <= 0 || predictions.size() < n || labels.size() < n) {
    throw InvalidArgument("classification metrics: " + std::to_string(rows) + " rows of " +
                          std::to_string(num_classes) + " classes, but " +
                          std::to_string(predictions.size()) + " predictions and " +
                          std::to_string(labels.size()) + " labels");
  }
  TopKCounts counts;
  const auto width = static_cast<std::size_t>(num_classes);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const float* p = predictions.data() + r * width;
    const float* l = labels.data() + r * width;
    const std::size_t label = static_cast<std::size_t>(std::max_element(l, l + width) - l);
    if (static_cast<std::size_t>(std::max_element(p, p + width) - p) == label) ++counts.top1;
    int64_t higher = 0;
    for (std::size_t c = 0; c < width; ++c) higher += p[c] > p[label] ? 1 : 0;
    if (std::isfinite(p[label]) && higher < k) ++counts.topk;
  }
  return counts;
}

}  // namespace trainyard
