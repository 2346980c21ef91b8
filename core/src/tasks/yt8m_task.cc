#include "trainyard/core/tasks/yt8m_task.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "../json_text.h"
#include "../pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/atomic_file.h"
#include "trainyard/core/config.h"
#include "trainyard/core/metrics.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

std::vector<float> host_f32(const Tensor& t) {
  return ops::cast(t, DType::kF32).to_vector<float>();
}

void check_model_flags(const std::string& path, const ModelFlags& now) {
  ModelFlags old = read_model_flags(path);
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
  explicit Yt8mEvaluation(const config::Pipeline& pipeline)
      : metrics_(pipeline.num_classes(), pipeline.eval_config().top_k()),
        num_classes_(pipeline.num_classes()) {}

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

class Yt8mTask final : public Task {
 public:
  std::string name() const override { return "yt8m"; }
  std::string default_model() const override { return "LogisticModel"; }
  std::string default_loss() const override { return "CrossEntropyLoss"; }
  std::string default_optimizer() const override { return "AdamOptimizer"; }
  std::string default_reader() const override { return kYt8mVideoReader; }

  // The starter code L2-normalizes "features" along the last axis (per frame for frame
  // features) in training, evaluation and inference.
  Batch to_device(Backend& backend, HostBatch& host) const override {
    Batch batch;
    for (auto& [name, feature] : host.features) {
      Tensor t = Tensor::from_host(backend, Shape(feature.shape), feature.dtype,
                                   feature.bytes.data(), feature.bytes.size());
      if (name == "features") t = ops::l2_normalize(t, -1, 1e-12);
      if (name == "labels") {
        batch.labels = t;
      } else if (name == "num_frames") {
        batch.num_frames = t;
      } else {
        batch.features.emplace(name, t);
      }
    }
    batch.ids = std::move(host.ids);
    return batch;
  }

  void check_or_record_run(const config::Pipeline& pipeline,
                           const std::string& train_dir) const override {
    const std::string path = (fs::path(train_dir) / "model_flags.json").string();
    std::error_code error;
    if (fs::is_symlink(fs::symlink_status(path, error))) {
      // Followed, a link would let train read or create a file outside train_dir.
      throw ConfigError(path + " is a symbolic link (to " + fs::read_symlink(path, error).string() +
                        "); train records the run in train_dir itself and follows no link "
                        "there: remove it");
    }
    ModelFlags flags = model_flags_of(pipeline);
    if (fs::exists(path)) {
      check_model_flags(path, flags);
      return;
    }
    write_file_atomically(path, model_flags_to_json(flags));
  }

  // train.py's line, as its log parsers read it: the loss and rate, then the batch's Hit@1,
  // PERR and GAP, each "%.2f".
  void report_train_step(const config::Pipeline& pipeline, const TrainStepReport& step,
                         std::ostream& log, SummaryWriter& summaries) const override {
    NoGradScope no_grad;
    std::vector<float> p = host_f32(*step.predictions);
    std::vector<float> l = host_f32(step.batch->labels);
    int64_t classes = pipeline.num_classes();
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

  std::unique_ptr<TaskEvaluation> make_evaluation(const config::Pipeline& pipeline) const override {
    return std::make_unique<Yt8mEvaluation>(pipeline);
  }

  std::vector<Metric> evaluation_metrics() const override { return Yt8mEvaluation::declared(); }

  // eval.py's line (utils.AddEpochSummary): "epoch/eval number N | Avg_Hit@1: %.3f | Avg_PERR:
  // %.3f | MAP: %.3f | GAP: %.3f | Avg_Loss: %3f | num_classes: C" and its Epoch/Eval_* scalars.
  void report_evaluation(int64_t global_step, const std::vector<Metric>& metrics, std::ostream& log,
                         SummaryWriter& summaries) const override {
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

  std::unique_ptr<PredictionWriter> make_prediction_writer(const config::Pipeline& pipeline,
                                                           std::ostream& out,
                                                           int top_k) const override {
    return std::make_unique<Yt8mPredictionWriter>(out,
                                                  std::min<int64_t>(top_k, pipeline.num_classes()));
  }

  // The training run's own record of its flags, so predict checks against what trained.
  void write_export_files(const config::Pipeline& pipeline,
                          const std::string& export_dir) const override {
    fs::path recorded = fs::path(pipeline.train_config().train_dir()) / "model_flags.json";
    write_file_atomically((fs::path(export_dir) / "model_flags.json").string(),
                          fs::exists(recorded)
                              ? model_flags_to_json(read_model_flags(recorded.string()))
                              : model_flags_to_json(model_flags_of(pipeline)));
  }
};

}  // namespace

const Task& yt8m_task() {
  static const Yt8mTask task;
  return task;
}

ModelFlags model_flags_of(const config::Pipeline& pipeline) {
  ModelFlags f;
  f.model = model_class(pipeline);
  const config::InputReader& reader = pipeline.train_input_reader();
  f.frame_features = reader_class(pipeline, reader) == kYt8mFrameReader;
  f.feature_names =
      param_text(reader.reader(), "feature_names", f.frame_features ? "rgb" : "mean_rgb");
  f.feature_sizes = param_text(reader.reader(), "feature_sizes", "1024");
  f.label_loss = loss_class(pipeline);
  f.num_classes = pipeline.num_classes();
  for (const auto& [key, value] : plugin_params(pipeline.model(), "model")) {
    f.model_params.emplace_back(key, option_value_to_string(value));
  }
  for (const auto& [key, value] :
       plugin_params(pipeline.train_config().label_loss(), "train_config.label_loss")) {
    f.label_loss_params.emplace_back(key, option_value_to_string(value));
  }
  return f;
}

std::string model_flags_to_json(const ModelFlags& f) {
  std::ostringstream out;
  out << "{\"model\": " << json_quoted(f.model)
      << ", \"feature_sizes\": " << json_quoted(f.feature_sizes)
      << ", \"feature_names\": " << json_quoted(f.feature_names)
      << ", \"frame_features\": " << (f.frame_features ? "true" : "false")
      << ", \"label_loss\": " << json_quoted(f.label_loss);
  if (f.num_classes > 0) out << ", \"num_classes\": " << f.num_classes;
  auto params = [&](const char* name, const std::vector<std::pair<std::string, std::string>>& p) {
    out << ", " << json_quoted(name) << ": {";
    for (std::size_t i = 0; i < p.size(); ++i) {
      out << (i ? ", " : "") << json_quoted(p[i].first) << ": " << json_quoted(p[i].second);
    }
    out << "}";
  };
  params("model_params", f.model_params);
  if (!f.label_loss_params.empty()) params("label_loss_params", f.label_loss_params);
  out << "}\n";
  return out.str();
}

ModelFlags read_model_flags(const std::string& path) {
  // O_NONBLOCK: a FIFO must be refused below, not waited on for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ConfigError("cannot read " + path + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    throw ConfigError(path + " is not a regular file (a FIFO, device or directory); not read");
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > (1u << 20)) throw ConfigError(path + ": larger than 1 MiB");
  }
  const JsonValue json = parse_json(text, path);
  if (json.kind != JsonValue::Kind::kObject) throw ConfigError(path + ": not a JSON object");
  auto member = [&](const char* key, JsonValue::Kind kind, const char* what) -> const JsonValue* {
    const JsonValue* v = json.find(key);
    if (v != nullptr && v->kind != kind) {
      throw ConfigError(path + ": \"" + key + "\" is not " + what);
    }
    return v;
  };
  auto required = [&](const char* key, JsonValue::Kind kind, const char* what) {
    const JsonValue* v = member(key, kind, what);
    if (v == nullptr) throw ConfigError(path + ": no \"" + key + "\"");
    return v;
  };
  ModelFlags f;
  f.model = required("model", JsonValue::Kind::kString, "a string")->text;
  f.feature_names = required("feature_names", JsonValue::Kind::kString, "a string")->text;
  f.feature_sizes = required("feature_sizes", JsonValue::Kind::kString, "a string")->text;
  f.frame_features = required("frame_features", JsonValue::Kind::kBool, "true or false")->boolean;
  f.label_loss = required("label_loss", JsonValue::Kind::kString, "a string")->text;
  if (const JsonValue* n = member("num_classes", JsonValue::Kind::kNumber, "a number")) {
    try {
      std::size_t used = 0;
      f.num_classes = std::stoll(n->text, &used);
      if (used != n->text.size() || f.num_classes <= 0) throw std::invalid_argument(n->text);
    } catch (const std::exception&) {
      throw ConfigError(path + ": \"num_classes\" is " + n->text + ", not a positive integer");
    }
  }
  auto read_params = [&](const char* name, std::vector<std::pair<std::string, std::string>>& out) {
    const JsonValue* params = member(name, JsonValue::Kind::kObject, "an object");
    if (params == nullptr) return;
    for (const auto& [key, value] : params->object) {
      std::string text;
      switch (value.kind) {
        case JsonValue::Kind::kString:
        case JsonValue::Kind::kNumber:
          text = value.text;
          break;
        case JsonValue::Kind::kBool:
          text = value.boolean ? "true" : "false";
          break;
        case JsonValue::Kind::kArray:
          for (const JsonValue& item : value.array) {
            text += (text.empty() ? "" : ",") + (item.kind == JsonValue::Kind::kBool
                                                     ? std::string(item.boolean ? "true" : "false")
                                                     : item.text);
          }
          break;
        case JsonValue::Kind::kNull:
        case JsonValue::Kind::kObject:
          throw ConfigError(path + ": " + name + " \"" + key + "\" is not a value");
      }
      out.emplace_back(key, text);
    }
  };
  read_params("model_params", f.model_params);
  read_params("label_loss_params", f.label_loss_params);
  return f;
}

}  // namespace trainyard
