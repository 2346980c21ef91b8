// The image classification task (the walkthrough's classifier trained with tf.estimator, TF-Slim's
// train_image_classifier.py and eval_image_classifier.py): images and one-hot labels moved to the
// device as they are, the run's pipeline.config recorded in and checked against train_dir,
// accuracy on logged training batches, accuracy / top-5 accuracy / loss per evaluation, and the
// "ImageId,LabelConfidencePairs" predictions CSV.
#include <algorithm>
#include <iomanip>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "top_k_counts.h"
#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/plugin.h"
#include "trainyard/task.h"

namespace trainyard::tasks {
namespace {

constexpr int64_t kTopK = 5;

std::vector<float> host_f32(const Tensor& t) {
  return ops::cast(t, DType::kF32).to_vector<float>();
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

}  // namespace

class ClassificationTask final : public Task {
 public:
  explicit ClassificationTask(const Options&) {}

  // The classifiers compute their own softmax cross-entropy; SoftmaxLoss names the class a model
  // without its own loss would get.
  TaskDefaults defaults() const override {
    TaskDefaults d;
    d.model = "lenet";
    d.loss = "SoftmaxLoss";
    d.optimizer = "MomentumOptimizer";
    d.reader = "ImageClassificationReader";
    d.train_dir = "/tmp/tfmodel/";  // train_image_classifier.py's --train_dir
    return d;
  }

  // TF-Slim's eval_image_classifier.py on a checkpoint: the preprocessing slim's
  // preprocessing_factory gives the model (vgg: the shorter side resized to 256, then the
  // central crop; inception, the MobileNets' and the Inceptions': the shorter side resized to the
  // crop size, then the central crop, an approximation of its central_crop(0.875) and resize;
  // lenet: the image as it is), at the net's default_image_size (inception_v3 and
  // inception_resnet_v2: 299), on the net's channels.
  std::optional<CheckpointInput> checkpoint_input(const std::string& model,
                                                  const std::string& preprocessing,
                                                  int64_t image_size) const override {
    const bool inception_preprocessing =
        model.rfind("mobilenet", 0) == 0 || model.rfind("inception", 0) == 0;
    const std::string name = !preprocessing.empty()    ? preprocessing
                             : model == "lenet"        ? "lenet"
                             : inception_preprocessing ? "inception"
                                                       : "vgg";
    CheckpointInput in;
    in.image_size = image_size > 0                                              ? image_size
                    : model == "lenet"                                          ? 28
                    : model == "resnet_20"                                      ? 32
                    : model == "inception_v3" || model == "inception_resnet_v2" ? 299
                                                                                : 224;
    in.channels = model == "lenet" ? 1 : 3;
    in.normalization = name;
    if (name == "vgg") {
      in.resize_side = 256;
    } else if (name == "inception") {
      in.resize_side = in.image_size;
    } else if (name != "lenet" && name != "none") {
      throw ConfigError("--preprocessing_name is '" + name +
                        "'; expected vgg, inception, lenet or none");
    }
    return in;
  }

  // The estimator's "loss = L, step = N" with the batch's accuracy; scalars "loss",
  // "accuracy" (the walkthrough's summaries), "learning_rate" and "examples/sec".
  void report_train_step(const TaskPipeline& pipeline, const TrainStepReport& step,
                         std::ostream& log, Summaries& summaries) const override {
    NoGradScope no_grad;
    const std::vector<float> p = host_f32(*step.predictions);
    const std::vector<float> l = host_f32(step.batch->labels);
    const TopKCounts c = count_correct(p, l, step.batch_size, pipeline.num_classes, /*k=*/1);
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

  std::unique_ptr<TaskEvaluation> make_evaluation(const TaskPipeline& pipeline) const override {
    return std::make_unique<ClassificationEvaluation>(pipeline.num_classes);
  }

  std::vector<Metric> evaluation_metrics() const override {
    return ClassificationEvaluation::declared();
  }

  // The estimator's "Saving dict for global step N: accuracy = ..., loss = ..." line.
  void report_evaluation(int64_t global_step, const std::vector<Metric>& metrics, std::ostream& log,
                         Summaries& summaries) const override {
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

  std::unique_ptr<PredictionWriter> make_prediction_writer(const TaskPipeline& pipeline,
                                                           std::ostream& out,
                                                           int top_k) const override {
    return std::make_unique<ClassificationPredictionWriter>(
        out, std::min<int64_t>(top_k, pipeline.num_classes));
  }
};

}  // namespace trainyard::tasks

#define CLASSIFICATION_TASK_CLASSES(X)                          \
  X(task, classification, trainyard::tasks::ClassificationTask, \
    "Image classification (tf.estimator's walkthrough, TF-Slim's classifiers)")
TRAINYARD_PLUGIN(task_classification, 1, 0, 0, CLASSIFICATION_TASK_CLASSES)
