// The YouTube-8M task (the starter code's train.py, eval.py and inference.py): features
// L2-normalized on the device, model_flags.json recorded in and checked against train_dir (and
// read back by eval, predict and export), Hit@1 / PERR / GAP on logged training batches,
// Hit@1 / PERR / mAP / GAP / loss per evaluation (eval_util.py), the inference CSV, and
// model_flags.json in exports.
#include <filesystem>
#include <iomanip>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/yt8m/metrics.h"
#include "trainyard/pkg/yt8m/model_flags.h"
#include "trainyard/plugin.h"
#include "trainyard/task.h"
#include "trainyard/user_file.h"

namespace trainyard::tasks {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModelFlags = "model_flags.json";

std::vector<float> host_f32(const Tensor& t) {
  return ops::cast(t, DType::kF32).to_vector<float>();
}

// Followed, a link would let train read or create a file outside train_dir.
void refuse_link(const std::string& path) {
  std::error_code error;
  if (fs::is_symlink(fs::symlink_status(path, error))) {
    throw ConfigError(path + " is a symbolic link (to " + fs::read_symlink(path, error).string() +
                      "); train records the run in train_dir itself and follows no link "
                      "there: remove it");
  }
}

void check_model_flags(const std::string& path, const yt8m::ModelFlags& now) {
  yt8m::ModelFlags old = yt8m::read_model_flags(path);
  auto differ = [&](const char* flag, const std::string& a, const std::string& b) {
    if (a != b) {
      throw ConfigError(path + ": --" + flag + " was '" + a + "' when this train_dir was " +
                        "created but is '" + b + "' now; use --start_new_model to start over");
    }
  };
  differ("model", old.model, now.model);
  differ("feature_names", old.feature_names, now.feature_names);
  differ("feature_sizes", old.feature_sizes, now.feature_sizes);
  differ("frame_features", old.frame_features ? "true" : "false",
         now.frame_features ? "true" : "false");
  differ("label_loss", old.label_loss, now.label_loss);
  if (old.num_classes > 0) {
    differ("num_classes", std::to_string(old.num_classes), std::to_string(now.num_classes));
  }
  // The model's options (the host fills in the recorded ones a resume does not give).
  for (const auto& [key, recorded] : old.model_params) {
    for (const auto& [now_key, value] : now.model_params) {
      if (now_key == key) differ(key.c_str(), recorded, value);
    }
  }
}

// eval_util.EvaluationMetrics over an evaluation's batches.
class Yt8mEvaluation final : public TaskEvaluation {
 public:
  explicit Yt8mEvaluation(const TaskPipeline& pipeline)
      : metrics_(pipeline.num_classes, pipeline.eval_top_k), num_classes_(pipeline.num_classes) {}

  void add(const Tensor& predictions, const Batch& batch, double loss,
           int64_t batch_size) override {
    metrics_.accumulate(host_f32(predictions), host_f32(batch.labels), loss, batch_size);
  }

  std::vector<Metric> result() const override {
    metrics::EpochMetrics s = metrics_.get();
    std::vector<Metric> out = declared();
    for (Metric& m : out) {
      m.value = m.name == "Avg_Hit@1"  ? s.avg_hit_at_one
                : m.name == "Avg_PERR" ? s.avg_perr
                : m.name == "MAP"      ? s.mean_ap
                : m.name == "GAP"      ? s.gap
                : m.name == "Avg_Loss" ? s.avg_loss
                                       : static_cast<double>(num_classes_);
    }
    return out;
  }

  // eval.py's metrics and their Epoch/Eval_* tags; num_classes is logged, not written.
  static std::vector<Metric> declared() {
    return {{"Avg_Hit@1", "Epoch/Eval_Avg_Hit@1", 0.0},
            {"Avg_PERR", "Epoch/Eval_Avg_Perr", 0.0},
            {"MAP", "Epoch/Eval_MAP", 0.0},
            {"GAP", "Epoch/Eval_GAP", 0.0},
            {"Avg_Loss", "Epoch/Eval_Avg_Loss", 0.0},
            {"num_classes", "", 0.0}};
  }

 private:
  metrics::EvaluationMetrics metrics_;
  int64_t num_classes_;
};

// inference.py's CSV: "VideoId,LabelConfidencePairs", then "id c1 s1 c2 s2 ..." per video,
// the top_k classes by descending score.
class Yt8mPredictionWriter final : public PredictionWriter {
 public:
  Yt8mPredictionWriter(std::ostream& out, int64_t k) : out_(out), k_(k) {
    out_ << "VideoId,LabelConfidencePairs\n";
  }

  void write(const Tensor& predictions, const Batch& batch) override {
    auto [values, indices] = ops::top_k(ops::cast(predictions, DType::kF32), k_);
    std::vector<float> v = values.to_vector<float>();
    std::vector<int64_t> c = indices.to_vector<int64_t>();
    for (std::size_t i = 0; i < batch.ids.size(); ++i) {
      out_ << batch.ids[i] << ",";
      for (int64_t j = 0; j < k_; ++j) {
        std::size_t at = i * static_cast<std::size_t>(k_) + static_cast<std::size_t>(j);
        out_ << (j ? " " : "") << c[at] << " " << std::fixed << std::setprecision(6) << v[at];
      }
      out_ << "\n";
    }
  }

 private:
  std::ostream& out_;
  int64_t k_;
};

}  // namespace

class Yt8mTask final : public Task {
 public:
  explicit Yt8mTask(const Options&) {}

  TaskDefaults defaults() const override {
    TaskDefaults d;
    d.model = "LogisticModel";
    d.loss = "CrossEntropyLoss";
    d.optimizer = "AdamOptimizer";
    d.reader = yt8m::kVideoReader;
    d.train_dir = "/tmp/yt8m_model/";  // train.py's --train_dir
    // train.py trains from flags alone: a pipeline that names no task is the starter code's.
    d.runs_unnamed_pipelines = true;
    return d;
  }

  // `trainyard train` is the starter code's train.py: its learning-rate and input-layout flags
  // apply with their defaults (the video-level "mean_rgb" of 1024), --frame_features picks the
  // frame-level reader of "rgb"; predict
  // reads 512 videos a batch and needs the run's model_flags.json (--train_dir).
  TaskFlagDialect flag_dialect() const override {
    TaskFlagDialect d;
    d.starter_flags = true;
    d.feature_names = "mean_rgb";
    d.feature_sizes = "1024";
    d.frame_reader = yt8m::kFrameReader;
    d.frame_feature_names = "rgb";
    d.predict_batch_size = 512;
    d.predicts_from_pipeline_config = false;
    return d;
  }

  // The starter code L2-normalizes "features" along the last axis (per frame for frame
  // features) in training, evaluation and inference.
  void prepare_batch(Batch& batch) const override {
    auto it = batch.features.find("features");
    if (it != batch.features.end()) it->second = ops::l2_normalize(it->second, -1, 1e-12);
  }

  void check_or_record_run(const TaskPipeline& pipeline, RunRecorder&) const override {
    const std::string path = (fs::path(pipeline.train_dir) / kModelFlags).string();
    refuse_link(path);
    yt8m::ModelFlags flags = yt8m::model_flags_of(pipeline);
    if (fs::exists(path)) {
      check_model_flags(path, flags);
      return;
    }
    write_file_atomically(path, yt8m::model_flags_to_json(flags));
  }

  // eval, predict and export read the model, its options, the label loss and the input layout
  // from model_flags.json.
  std::optional<RecordedRun> read_run_record(const std::string& train_dir) const override {
    const fs::path path = fs::path(train_dir) / kModelFlags;
    refuse_link(path.string());
    std::error_code error;
    if (!fs::exists(fs::symlink_status(path, error))) return std::nullopt;
    const yt8m::ModelFlags flags = yt8m::read_model_flags(path.string());
    RecordedRun run;
    run.source = path.string();
    run.model = {flags.model, flags.model_params};
    run.label_loss = {flags.label_loss, flags.label_loss_params};
    run.reader.class_name = flags.frame_features ? yt8m::kFrameReader : yt8m::kVideoReader;
    run.reader.params = {{"feature_names", flags.feature_names},
                         {"feature_sizes", flags.feature_sizes}};
    run.num_classes = flags.num_classes;
    return run;
  }

  // train.py's line, as its log parsers read it: the loss and rate, then the batch's Hit@1,
  // PERR and GAP, each "%.2f".
  void report_train_step(const TaskPipeline& pipeline, const TrainStepReport& step,
                         std::ostream& log, Summaries& summaries) const override {
    NoGradScope no_grad;
    std::vector<float> p = host_f32(*step.predictions);
    std::vector<float> l = host_f32(step.batch->labels);
    int64_t classes = pipeline.num_classes;
    // One pass over each row, the same doubles as hit_at_one, precision_at_equal_recall_rate
    // and gap (metrics_fast_test), about 5x faster (bench_metrics).
    const auto [hit, perr, gap] =
        metrics::training_batch_metrics(p, l, step.batch_size, classes, 20);
    log << std::fixed << std::setprecision(2) << "training step " << step.global_step
        << " | Loss: " << step.loss << " Examples/sec: " << step.examples_per_sec
        << " | Hit@1: " << hit << " PERR: " << perr << " GAP: " << gap << "\n";
    summaries.add_scalar("model/Training_Loss", step.loss, step.global_step);
    summaries.add_scalar("model/Learning_Rate", step.learning_rate, step.global_step);
    summaries.add_scalar("model/Training_Hit@1", hit, step.global_step);
    summaries.add_scalar("model/Training_Perr", perr, step.global_step);
    summaries.add_scalar("model/Training_GAP", gap, step.global_step);
    summaries.add_scalar("global_step/Examples/Second", step.examples_per_sec, step.global_step);
  }

  std::unique_ptr<TaskEvaluation> make_evaluation(const TaskPipeline& pipeline) const override {
    return std::make_unique<Yt8mEvaluation>(pipeline);
  }

  std::vector<Metric> evaluation_metrics() const override { return Yt8mEvaluation::declared(); }

  // eval.py's line (utils.AddEpochSummary): "epoch/eval number N | Avg_Hit@1: %.3f | Avg_PERR:
  // %.3f | MAP: %.3f | GAP: %.3f | Avg_Loss: %3f | num_classes: C" and its Epoch/Eval_* scalars.
  void report_evaluation(int64_t global_step, const std::vector<Metric>& metrics, std::ostream& log,
                         Summaries& summaries) const override {
    log << "epoch/eval number " << global_step;
    for (const Metric& m : metrics) {
      if (m.name == "num_classes") {
        log << " | num_classes: " << static_cast<int64_t>(m.value);
        continue;
      }
      log << " | " << m.name << ": " << std::fixed
          << std::setprecision(m.name == "Avg_Loss" ? 6 : 3) << m.value;
      summaries.add_scalar(m.tag, m.value, global_step);
    }
    log << "\n";
  }

  std::unique_ptr<PredictionWriter> make_prediction_writer(const TaskPipeline& pipeline,
                                                           std::ostream& out,
                                                           int top_k) const override {
    return std::make_unique<Yt8mPredictionWriter>(out,
                                                  std::min<int64_t>(top_k, pipeline.num_classes));
  }

  // The training run's own record of its flags, so predict checks against what trained.
  void write_export_files(const TaskPipeline& pipeline,
                          const std::string& export_dir) const override {
    fs::path recorded = fs::path(pipeline.train_dir) / kModelFlags;
    write_file_atomically((fs::path(export_dir) / kModelFlags).string(),
                          fs::exists(recorded)
                              ? yt8m::model_flags_to_json(yt8m::read_model_flags(recorded.string()))
                              : yt8m::model_flags_to_json(yt8m::model_flags_of(pipeline)));
  }
};

}  // namespace trainyard::tasks

#define YT8M_TASK_CLASSES(X) \
  X(task, yt8m, trainyard::tasks::Yt8mTask, "YouTube-8M video classification (the starter code)")
TRAINYARD_PLUGIN(task_yt8m, 1, 0, 0, YT8M_TASK_CLASSES)
