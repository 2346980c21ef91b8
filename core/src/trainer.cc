#include "trainyard/core/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <optional>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "json_text.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/config.h"
#include "trainyard/core/trace.h"
#include "trainyard/error.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/loss.h"
#include "trainyard/core/metrics.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/optimizer.h"
#include "trainyard/proto/event.pb.h"
#include "trainyard/reader.h"
#include "trainyard/core/safetensors.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/variable.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* kDefaultModel = "LogisticModel";
const char* kDefaultLoss = "CrossEntropyLoss";
const char* kDefaultOptimizer = "AdamOptimizer";
const char* kVideoReader = "YT8MAggregatedFeatureReader";
// Checkpoint entries of the trainer's own beside the variables: the batches the input
// pipeline delivered so far (a resumed run skips them) and the seed of its randomness.
const char* kInputBatchesName = "trainyard/input_batches";
const char* kSeedName = "trainyard/seed";

std::string class_or(const config::PluginSpec& spec, bool present, const char* fallback) {
  return present && spec.has_class_() && !spec.class_().empty() ? spec.class_() : fallback;
}

template <class T>
std::shared_ptr<T> create(const PluginRegistry& registry, ClassKind kind,
                          const std::string& class_name, const config::PluginSpec* spec,
                          const char* where) {
  std::map<std::string, OptionValue> params;
  if (spec != nullptr) params = plugin_params(*spec, where);
  try {
    return registry.create<T>(kind, class_name, params);
  } catch (const Error& e) {
    throw ConfigError(std::string(where) + ": " + e.what());
  }
}

std::string reader_param_text(const config::PluginSpec& spec, const std::string& key,
                              const std::string& fallback) {
  for (const config::Param& p : spec.params()) {
    if (p.key() != key) continue;
    OptionValue v = plugin_params(spec, "reader").at(key);
    return option_value_to_string(v);
  }
  return fallback;
}

// A ModelContext over a VariableStore. When given a checkpoint it restores each variable from
// it the moment the model first asks for it (resume, eval); when given a fine-tuning checkpoint
// instead, it restores the model variables found there with the same shape and records what it
// restored, skipped and found mismatched (the Object Detection API's restore_map).
class StoreContext final : public ModelContext {
 public:
  StoreContext(Backend& backend, VariableStore& store, int64_t num_classes, uint64_t seed,
               const CheckpointReader* restore)
      : backend_(backend),
        store_(store),
        num_classes_(num_classes),
        seed_(seed),
        restore_(restore) {}
  Backend& backend() override { return backend_; }
  int64_t num_classes() const override { return num_classes_; }
  // Stable within a step, different across steps, and a function of (seed, step) only, so a
  // resumed run draws what an uninterrupted one would.
  uint64_t seed() const override { return mix(seed_ ^ mix(static_cast<uint64_t>(step_) + 1)); }
  void set_step(int64_t step) { step_ = step; }
  // Reads variables from `checkpoint` (the moving averages "<name>/ExponentialMovingAverage"
  // where it has them, with `averages`) instead of restore.
  void set_fine_tune(const CheckpointReader* checkpoint, std::vector<std::string> exclude_scopes) {
    fine_tune_ = checkpoint;
    exclude_scopes_ = std::move(exclude_scopes);
  }
  void set_use_averages(bool averages) { averages_ = averages; }
  Variable& variable(const VariableSpec& spec) override {
    bool existed = store_.find(spec.name) != nullptr;
    Variable& v = store_.get_or_create(spec);
    if (!existed && restore_ != nullptr) restore(v);
    if (!existed && fine_tune_ != nullptr) fine_tune(v);
    return v;
  }
  // A variable the trainer adds (optimizer slots, moving averages): restored when the
  // checkpoint has it, else fresh (a variable that was frozen when the checkpoint was written
  // has no slots). `initial` replaces the initializer's value when given.
  Variable& extra(const VariableSpec& spec, std::ostream& log, const Tensor* initial = nullptr) {
    bool existed = store_.find(spec.name) != nullptr;
    Variable& v = store_.get_or_create(spec);
    if (existed) return v;
    if (restore_ != nullptr && restore_->contains(spec.name)) {
      restore(v);
      return v;
    }
    if (restore_ != nullptr) {
      log << "'" << spec.name << "' is not in " << restore_->prefix()
          << "; starting it from its initializer\n";
    }
    if (initial != nullptr) v.assign(ops::copy(*initial));
    return v;
  }
  void restore(Variable& v) {
    std::string name = v.name();
    if (averages_ && v.trainable() && restore_->contains(name + "/ExponentialMovingAverage")) {
      name += "/ExponentialMovingAverage";
    }
    Tensor value = restore_->read(name, backend_);
    if (value.shape() != v.spec().shape || value.dtype() != v.spec().dtype) {
      throw ConfigError("checkpoint " + restore_->prefix() + " holds '" + name + "' as " +
                        value.description() + " but the model needs " + dtype_name(v.spec().dtype) +
                        v.spec().shape.to_string() + " (a checkpoint from another model?)");
    }
    if (v.value().requires_grad()) value.set_requires_grad(true);
    v.assign(value);
  }

  // What fine-tuning did, one line per variable.
  struct FineTuneReport {
    std::vector<std::string> restored, excluded, missing, mismatched;
  };
  const FineTuneReport& fine_tune_report() const { return report_; }

 private:
  static uint64_t mix(uint64_t x) {  // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }

  void fine_tune(Variable& v) {
    if (!(v.spec().collections & kModelVariables)) return;
    for (const std::string& scope : exclude_scopes_) {
      if (!scope.empty() && v.name().rfind(scope, 0) == 0) {
        report_.excluded.push_back(v.name());
        return;
      }
    }
    if (!fine_tune_->contains(v.name())) {
      report_.missing.push_back(v.name());
      return;
    }
    const CheckpointTensorInfo& info = fine_tune_->info(v.name());
    if (!info.unsupported.empty()) {
      report_.mismatched.push_back(v.name() + ": " + info.unsupported);
      return;
    }
    if (info.shape != v.spec().shape || info.dtype != v.spec().dtype) {
      report_.mismatched.push_back(v.name() + ": checkpoint " + dtype_name(info.dtype) +
                                   info.shape.to_string() + ", model " +
                                   dtype_name(v.spec().dtype) + v.spec().shape.to_string());
      return;
    }
    Tensor value = fine_tune_->read(v.name(), backend_);
    if (v.value().requires_grad()) value.set_requires_grad(true);
    v.assign(value);
    report_.restored.push_back(v.name());
  }

  Backend& backend_;
  VariableStore& store_;
  int64_t num_classes_;
  uint64_t seed_;
  int64_t step_ = 0;
  const CheckpointReader* restore_;
  const CheckpointReader* fine_tune_ = nullptr;
  std::vector<std::string> exclude_scopes_;
  bool averages_ = false;
  FineTuneReport report_;
};

Tensor to_device(Backend& backend, const ParsedFeature& f) {
  return Tensor::from_host(backend, Shape(f.shape), f.dtype, f.bytes.data(), f.bytes.size());
}

}  // namespace

Batch to_device_batch(Backend& backend, HostBatch& host) {
  Batch batch;
  for (auto& [name, feature] : host.features) {
    Tensor t = to_device(backend, feature);
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

namespace {

InputOptions input_options(const config::InputReader& reader, int64_t batch_size, uint64_t seed) {
  InputOptions o;
  o.data_pattern = reader.data_pattern();
  o.batch_size = batch_size;
  o.num_readers = reader.num_readers();
  o.num_epochs = reader.num_epochs();
  o.shuffle = reader.shuffle();
  o.shuffle_buffer_size = reader.has_shuffle_buffer_size() ? reader.shuffle_buffer_size() : 0;
  o.prefetch_batches = reader.prefetch_batches();
  o.skip_corrupt_records = reader.skip_corrupt_records();
  o.deterministic = reader.deterministic();
  o.seed = seed;
  return o;
}

std::string reader_class(const config::InputReader& reader) {
  return class_or(reader.reader(), reader.has_reader(), kVideoReader);
}

// tf.clip_by_norm: t * clip / max(||t||, clip).
Tensor clip_by_norm(const Tensor& t, double clip) { return ops::clip_by_norm(t, clip); }

double to_double(const Tensor& scalar) {
  Tensor f = ops::cast(scalar, DType::kF64);
  return f.to_vector<double>().at(0);
}

double learning_rate_at(const config::TrainConfig& train, int64_t step) {
  const config::LearningRate& lr = train.learning_rate();
  if (lr.has_constant()) return lr.constant().learning_rate();
  const config::ExponentialDecayExamples& d = lr.exponential_decay_examples();
  double examples = static_cast<double>(step) * static_cast<double>(train.batch_size());
  double periods = std::floor(examples / static_cast<double>(d.learning_rate_decay_examples()));
  return d.base_learning_rate() * std::pow(d.learning_rate_decay(), periods);
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
}

// The backend the pipeline names, with its params.
std::shared_ptr<Backend> make_backend(const PluginRegistry& registry,
                                      const config::Pipeline& pipeline) {
  config::PluginSpec spec;
  spec.set_class_(pipeline.backend().class_());
  *spec.mutable_params() = pipeline.backend().params();
  return create<Backend>(registry, ClassKind::kBackend, spec.class_(), &spec, "backend");
}

std::string checkpoint_or_latest(const config::Pipeline& pipeline, const std::string& prefix) {
  if (!prefix.empty()) return prefix;
  const std::string& dir = pipeline.train_config().train_dir();
  std::optional<std::string> latest = latest_checkpoint(dir);
  if (!latest) throw NotFound("no checkpoint in train_dir " + dir);
  return *latest;
}

// What eval and predict share: the model restored from a checkpoint as it creates its
// variables, and one deterministic pass over `input`.
struct Inference {
  std::string prefix;
  std::shared_ptr<Backend> backend;
  std::shared_ptr<BaseModel> model;
  std::shared_ptr<Reader> reader;
  std::unique_ptr<CheckpointReader> restore;
  std::unique_ptr<VariableStore> store;
  std::unique_ptr<StoreContext> ctx;
  std::unique_ptr<InputPipeline> data;

  Inference(const PluginRegistry& registry, const config::Pipeline& pipeline,
            const std::string& checkpoint_prefix, const config::InputReader& input) {
    prefix = checkpoint_or_latest(pipeline, checkpoint_prefix);
    ModelFlags flags = model_flags_of(pipeline);
    backend = make_backend(registry, pipeline);
    model = create<BaseModel>(registry, ClassKind::kModel, flags.model,
                              pipeline.has_model() ? &pipeline.model() : nullptr, "model");
    reader =
        create<Reader>(registry, ClassKind::kReader, reader_class(input),
                       input.has_reader() ? &input.reader() : nullptr, "eval_input_reader.reader");
    restore = std::make_unique<CheckpointReader>(prefix);
    store = std::make_unique<VariableStore>(*backend, 0);
    ctx =
        std::make_unique<StoreContext>(*backend, *store, pipeline.num_classes(), 0, restore.get());
    ctx->set_use_averages(pipeline.eval_config().use_moving_averages() ||
                          pipeline.train_config().use_moving_average());
    InputOptions options = input_options(input, pipeline.eval_config().batch_size(), 0);
    options.num_epochs = 1;
    options.shuffle = false;
    options.deterministic = true;
    data = std::make_unique<InputPipeline>(*reader, options);
  }
};

// Python's re.match: the pattern matches at the start of the name.
bool matches_prefix(const std::string& pattern, const std::string& name) {
  try {
    return std::regex_search(name, std::regex(pattern), std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    throw ConfigError("train_config: bad variable regex '" + pattern + "': " + e.what());
  }
}

// The variables the train op updates, as the Object Detection API filters them: only those
// matching update_trainable_variables (when given), less those matching freeze_variables.
std::vector<Variable*> variables_to_train(const std::vector<Variable*>& trainable,
                                          const config::TrainConfig& tc) {
  std::vector<Variable*> out;
  for (Variable* v : trainable) {
    bool keep = tc.update_trainable_variables_size() == 0;
    for (const std::string& p : tc.update_trainable_variables())
      keep |= matches_prefix(p, v->name());
    for (const std::string& p : tc.freeze_variables()) keep &= !matches_prefix(p, v->name());
    if (keep) out.push_back(v);
  }
  return out;
}

// The product of the gradient multipliers whose regex matches `name` (1 when none does).
double gradient_multiplier(const config::TrainConfig& tc, const std::string& name) {
  double m = 1.0;
  for (const config::GradientMultiplier& g : tc.gradient_multipliers()) {
    if (matches_prefix(g.variable_regex(), name)) m *= g.multiplier();
  }
  return m;
}

// A suffix that keeps event files of runs started in the same second apart (a resumed run, an
// eval next to training), as TensorFlow 2 adds the process id and a counter.
std::string event_file_suffix() {
  static std::atomic<int> counter{0};
  return "." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

}  // namespace

ModelFlags model_flags_of(const config::Pipeline& pipeline) {
  ModelFlags f;
  f.model = class_or(pipeline.model(), pipeline.has_model(), kDefaultModel);
  const config::InputReader& reader = pipeline.train_input_reader();
  std::string rc = reader_class(reader);
  f.frame_features = rc == "YT8MFrameFeatureReader";
  f.feature_names =
      reader_param_text(reader.reader(), "feature_names", f.frame_features ? "rgb" : "mean_rgb");
  f.feature_sizes = reader_param_text(reader.reader(), "feature_sizes", "1024");
  f.label_loss = class_or(pipeline.train_config().label_loss(),
                          pipeline.train_config().has_label_loss(), kDefaultLoss);
  return f;
}

std::string model_flags_to_json(const ModelFlags& f) {
  std::ostringstream out;
  out << "{\"model\": " << json_quoted(f.model)
      << ", \"feature_sizes\": " << json_quoted(f.feature_sizes)
      << ", \"feature_names\": " << json_quoted(f.feature_names)
      << ", \"frame_features\": " << (f.frame_features ? "true" : "false")
      << ", \"label_loss\": " << json_quoted(f.label_loss) << "}\n";
  return out.str();
}

ModelFlags read_model_flags(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  auto value_of = [&](const std::string& key) -> std::string {
    std::size_t k = text.find("\"" + key + "\"");
    if (k == std::string::npos) throw ConfigError(path + ": no \"" + key + "\"");
    std::size_t colon = text.find(':', k);
    std::size_t start = text.find_first_not_of(" \t\n", colon + 1);
    if (start == std::string::npos) throw ConfigError(path + ": no value for \"" + key + "\"");
    if (text[start] == '"') {
      std::string v;
      for (std::size_t i = start + 1; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        v += text[i];
      }
      return v;
    }
    std::size_t end = text.find_first_of(",}\n", start);
    return text.substr(start, end - start);
  };
  ModelFlags f;
  f.model = value_of("model");
  f.feature_names = value_of("feature_names");
  f.feature_sizes = value_of("feature_sizes");
  f.frame_features = value_of("frame_features") == "true";
  f.label_loss = value_of("label_loss");
  return f;
}

struct TrainStep::Impl {
  config::TrainConfig tc;
  std::ostream& log;
  std::shared_ptr<Backend> backend;
  std::shared_ptr<BaseModel> model;
  std::shared_ptr<Loss> loss_fn;
  std::shared_ptr<Optimizer> optimizer;
  std::unique_ptr<VariableStore> store;
  std::unique_ptr<StoreContext> ctx;
  std::unique_ptr<CheckpointReader> fine_tune;
  struct Trained {
    Variable* variable = nullptr;
    std::vector<Variable*> slots;
    Variable* average = nullptr;  // with use_moving_average
    double multiplier = 1.0;      // gradient multipliers and bias_grad_multiplier
  };
  std::vector<Trained> trained;
  std::vector<Variable*> trained_variables;
  bool ready = false;

  Impl(const PluginRegistry& registry, const config::Pipeline& pipeline,
       const CheckpointReader* restore, std::ostream& out)
      : tc(pipeline.train_config()), log(out) {
    ModelFlags flags = model_flags_of(pipeline);
    backend = make_backend(registry, pipeline);
    model = create<BaseModel>(registry, ClassKind::kModel, flags.model,
                              pipeline.has_model() ? &pipeline.model() : nullptr, "model");
    loss_fn =
        create<Loss>(registry, ClassKind::kLoss, flags.label_loss,
                     tc.has_label_loss() ? &tc.label_loss() : nullptr, "train_config.label_loss");
    optimizer =
        create<Optimizer>(registry, ClassKind::kOptimizer,
                          class_or(tc.optimizer(), tc.has_optimizer(), kDefaultOptimizer),
                          tc.has_optimizer() ? &tc.optimizer() : nullptr, "train_config.optimizer");
    uint64_t seed = tc.has_seed() ? tc.seed() : 0;
    store = std::make_unique<VariableStore>(*backend, seed);
    ctx = std::make_unique<StoreContext>(*backend, *store, pipeline.num_classes(), seed, restore);
    if (restore == nullptr && !tc.fine_tune_checkpoint().empty()) {
      try {
        fine_tune = std::make_unique<CheckpointReader>(tc.fine_tune_checkpoint());
      } catch (const Error& e) {
        throw ConfigError("fine_tune_checkpoint: " + std::string(e.what()));
      }
      ctx->set_fine_tune(fine_tune.get(), {tc.checkpoint_exclude_scopes().begin(),
                                           tc.checkpoint_exclude_scopes().end()});
    }
  }

  // After the first forward pass created the model's variables: what the train op updates,
  // the optimizer's slots, the moving averages, and the fine-tuning report.
  void prepare() {
    trained_variables = variables_to_train(store->trainable(), tc);
    if (trained_variables.empty()) {
      throw ConfigError(
          "train_config: freeze_variables / update_trainable_variables leave no variable to "
          "train");
    }
    for (Variable* v : trained_variables) {
      Trained t;
      t.variable = v;
      for (const SlotSpec& slot : optimizer->slots()) {
        t.slots.push_back(&ctx->extra(extra_spec(*v, slot.name, slot.initializer), log));
      }
      if (tc.use_moving_average()) {
        Tensor initial = v->value();
        t.average = &ctx->extra(extra_spec(*v, "ExponentialMovingAverage", {}), log, &initial);
      }
      t.multiplier = gradient_multiplier(tc, v->name());
      if (tc.bias_grad_multiplier() > 0 && matches_prefix(".*/biases", v->name())) {
        t.multiplier *= tc.bias_grad_multiplier();
      }
      trained.push_back(std::move(t));
    }
    if (fine_tune != nullptr) {
      const StoreContext::FineTuneReport& r = ctx->fine_tune_report();
      log << "fine_tune_checkpoint " << fine_tune->prefix() << ": restored " << r.restored.size()
          << " variables, skipped " << r.missing.size() << " not in the checkpoint and "
          << r.excluded.size() << " excluded by checkpoint_exclude_scopes, " << r.mismatched.size()
          << " mismatched\n";
      for (const std::string& name : r.missing) log << "  not in the checkpoint: " << name << "\n";
      for (const std::string& name : r.excluded) log << "  excluded: " << name << "\n";
      for (const std::string& line : r.mismatched) log << "  mismatched: " << line << "\n";
    }
    ready = true;
  }

  static VariableSpec extra_spec(const Variable& v, const std::string& suffix,
                                 const Initializer& initializer) {
    VariableSpec s;
    s.name = v.name() + "/" + suffix;
    s.shape = v.spec().shape;
    s.dtype = v.spec().dtype;
    s.initializer = initializer;
    s.trainable = false;
    s.collections = kGlobalVariables;
    return s;
  }
};

TrainStep::TrainStep(const PluginRegistry& registry, const config::Pipeline& pipeline,
                     const CheckpointReader* restore, std::ostream& log)
    : impl_(std::make_unique<Impl>(registry, pipeline, restore, log)) {}

TrainStep::~TrainStep() = default;

Backend& TrainStep::backend() { return *impl_->backend; }

const std::vector<Variable*>& TrainStep::trained() const { return impl_->trained_variables; }

StepResult TrainStep::run(const Batch& batch, int64_t global_step, bool want_gradients) {
  Impl& m = *impl_;
  const config::TrainConfig& tc = m.tc;
  StepTrace* trace = StepTrace::active();
  m.ctx->set_step(global_step);
  StepResult result;
  result.learning_rate = learning_rate_at(tc, global_step);
  Tensor total;
  {
    StepTrace::Span span(trace, "forward");
    ModelOutput out = m.model->forward(*m.ctx, batch, Mode::kTrain);
    Tensor label_loss =
        out.loss ? *out.loss
                 : m.loss_fn->calculate_loss(out.predictions, batch.labels, std::nullopt);
    Tensor reg = m.store->regularization_loss();
    if (out.regularization_loss)
      reg = reg.defined() ? ops::add(reg, *out.regularization_loss) : *out.regularization_loss;
    total = reg.defined() ? ops::add(label_loss, ops::mul(reg, tc.regularization_penalty()))
                          : label_loss;
    result.loss = to_double(label_loss);
    result.total_loss = reg.defined() ? to_double(total) : result.loss;
    result.predictions = out.predictions;
  }
  // TF-Slim checks the loss after the update; checking first keeps the weights of the last
  // good step as well as its checkpoint.
  if (!std::isfinite(result.loss) || !std::isfinite(result.total_loss)) {
    throw Error("loss is inf or nan at step " + std::to_string(global_step));
  }
  if (!m.ready) m.prepare();
  std::vector<Tensor> grads;
  {
    StepTrace::Span span(trace, "backward");
    std::vector<Tensor> sources;
    for (const Impl::Trained& t : m.trained) sources.push_back(t.variable->value());
    grads = gradients(total, sources);
  }
  {
    StepTrace::Span span(trace, "apply_gradients");
    NoGradScope no_grad;
    for (std::size_t i = 0; i < m.trained.size(); ++i) {
      Impl::Trained& t = m.trained[i];
      if (!grads[i].defined()) continue;
      Tensor g = grads[i];
      // Multipliers first, then clipping, as TF-Slim's create_train_op orders them.
      if (t.multiplier != 1.0) g = ops::mul(g, t.multiplier);
      if (tc.clip_gradient_norm() > 0) g = clip_by_norm(g, tc.clip_gradient_norm());
      if (want_gradients) result.gradients.emplace_back(t.variable->name(), g);
      guard_plugin_call(*m.optimizer, [&] {
        m.optimizer->apply(*t.variable, g, t.slots, result.learning_rate, global_step);
      });
    }
    // MovingAverageOptimizer: the averages follow each update, with a fixed decay.
    for (Impl::Trained& t : m.trained) {
      if (t.average == nullptr) continue;
      Tensor average = t.average->value();
      ops::assign_moving_average(average, t.variable->value(), tc.moving_average_decay());
    }
  }
  return result;
}

std::vector<std::pair<std::string, Tensor>> TrainStep::state(int64_t global_step) {
  Impl& m = *impl_;
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::set<std::string> names;
  for (Variable* v : m.store->collection(kGlobalVariables)) {
    tensors.emplace_back(v->name(), v->value());
    names.insert(v->name());
  }
  tensors.emplace_back("global_step",
                       Tensor::from_vector(*m.backend, Shape{}, std::vector<int64_t>{global_step}));
  for (const auto& [name, value] : m.optimizer->non_slot_values(global_step)) {
    if (names.count(name)) continue;
    tensors.emplace_back(name, Tensor::from_vector(*m.backend, Shape{},
                                                   std::vector<float>{static_cast<float>(value)}));
  }
  return tensors;
}

TrainResult train(const PluginRegistry& registry, const config::Pipeline& pipeline_in,
                  std::ostream& log) {
  config::Pipeline pipeline = pipeline_in;
  config::TrainConfig& tc = *pipeline.mutable_train_config();
  const std::string train_dir = tc.train_dir();
  if (tc.start_new_model() && fs::exists(train_dir)) {
    log << "start_new_model: removing " << train_dir << "\n";
    fs::remove_all(train_dir);
  }
  std::error_code ec;
  fs::create_directories(train_dir, ec);
  if (ec || !fs::is_directory(train_dir)) {
    throw ConfigError("cannot create train_dir " + train_dir + ": " + ec.message());
  }
  if (::access(train_dir.c_str(), W_OK) != 0) {
    throw ConfigError("train_dir " + train_dir + " is not writable");
  }
  ModelFlags flags = model_flags_of(pipeline);
  const std::string flags_path = (fs::path(train_dir) / "model_flags.json").string();
  if (fs::exists(flags_path)) {
    check_model_flags(flags_path, flags);
  } else {
    std::ofstream out(flags_path);
    out << model_flags_to_json(flags);
    if (!out) throw ConfigError("cannot write " + flags_path);
  }
  const config::InputReader& input = pipeline.train_input_reader();
  if (input.data_pattern().empty()) {
    throw ConfigError(
        "no training data: set --train_data_pattern (train_input_reader.data_pattern)");
  }

  // State: the latest checkpoint when there is one, with the step, the seed and the input
  // position it reached.
  std::optional<CheckpointReader> restore;
  int64_t global_step = 0;
  int64_t input_batches = 0;
  if (std::optional<std::string> latest = latest_checkpoint(train_dir)) {
    restore.emplace(*latest);
    std::shared_ptr<Backend> reading = make_backend(registry, pipeline);
    auto scalar = [&](const char* name) -> int64_t {
      return ops::cast(restore->read(name, *reading), DType::kI64).to_vector<int64_t>().at(0);
    };
    global_step = scalar("global_step");
    if (restore->contains(kInputBatchesName)) input_batches = scalar(kInputBatchesName);
    if (!tc.has_seed() && restore->contains(kSeedName))
      tc.set_seed(static_cast<uint64_t>(scalar(kSeedName)));
    log << "restoring from " << *latest << " at step " << global_step << "\n";
  }
  const uint64_t seed = tc.has_seed() ? tc.seed() : 0;
  TrainStep step(registry, pipeline, restore ? &*restore : nullptr, log);
  Backend& backend = step.backend();
  auto reader =
      create<Reader>(registry, ClassKind::kReader, reader_class(input),
                     input.has_reader() ? &input.reader() : nullptr, "train_input_reader.reader");

  CheckpointManager checkpoints(train_dir, tc.max_to_keep(), tc.keep_checkpoint_every_n_hours());
  SummaryWriter summaries(train_dir, event_file_suffix());
  InputOptions options = input_options(input, tc.batch_size(), seed);
  InputPipeline data(*reader, options);
  if (input_batches > 0) {
    log << "skipping the " << input_batches << " batches the checkpoint's run already read\n";
    for (int64_t i = 0; i < input_batches; ++i) {
      std::optional<HostBatch> skipped = data.next();
      if (!skipped) break;
      data.recycle(std::move(*skipped));
    }
  }

  TrainResult result;
  int64_t last_export = global_step;
  auto save = [&] {
    std::vector<std::pair<std::string, Tensor>> tensors = step.state(global_step);
    tensors.emplace_back(
        kInputBatchesName,
        Tensor::from_vector(backend, Shape{}, std::vector<int64_t>{input_batches}));
    tensors.emplace_back(
        kSeedName,
        Tensor::from_vector(backend, Shape{}, std::vector<int64_t>{static_cast<int64_t>(seed)}));
    result.last_checkpoint = checkpoints.save(global_step, tensors);
    log << "saved checkpoint " << result.last_checkpoint << "\n";
  };
  // train.py exports the model every export_model_steps, from a checkpoint of that step.
  auto maybe_export = [&](bool saved) {
    if (tc.export_model_steps() <= 0 || global_step - last_export < tc.export_model_steps()) return;
    if (!saved) save();
    std::string dir =
        (fs::path(train_dir) / "export" / ("step_" + std::to_string(global_step))).string();
    export_model(registry, pipeline, result.last_checkpoint, dir);
    log << "exported the model at step " << global_step << " to " << dir << "\n";
    last_export = global_step;
  };

  // Histograms of the trained variables (TF-Slim's model_variables summaries) and, with
  // summarize_gradients, of their gradients, every save_summaries_secs and at the end.
  auto add_histograms = [&](const StepResult* last) {
    NoGradScope no_grad;
    for (Variable* v : step.trained()) {
      summaries.add_histogram(v->name(), ops::cast(v->value(), DType::kF64).to_vector<double>(),
                              global_step);
    }
    if (last == nullptr) return;
    for (const auto& [name, g] : last->gradients) {
      std::vector<double> values = ops::cast(g, DType::kF64).to_vector<double>();
      double norm = 0.0;
      for (double x : values) norm += x * x;
      summaries.add_histogram(name + "/gradient", values, global_step);
      summaries.add_scalar(name + "/gradient_norm", std::sqrt(norm), global_step);
    }
  };

  const int64_t log_every = std::max<int64_t>(1, tc.log_every_n_steps());
  auto last_histograms = Clock::now();
  auto last_save = Clock::now();
  auto last_log = Clock::now();
  int64_t examples_since_log = 0;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  while (!tc.has_max_steps() || global_step < tc.max_steps()) {
    std::optional<HostBatch> host = data.next();
    if (!host) break;
    ++input_batches;
    int64_t batch_size = host->size;
    Batch batch = to_device_batch(backend, *host);
    data.recycle(std::move(*host));
    bool histograms_due = since(last_histograms) >= tc.save_summaries_secs();
    std::optional<StepTrace> trace;
    if (tc.trace_every_n_steps() > 0 && global_step % tc.trace_every_n_steps() == 0)
      trace.emplace();
    StepResult r;
    try {
      r = step.run(batch, global_step, histograms_due && tc.summarize_gradients());
    } catch (const Error& e) {
      std::string what = e.what();
      if (what.rfind("loss is inf or nan", 0) != 0) throw;
      throw Error(
          what + "; the last good checkpoint is kept" +
          (result.last_checkpoint.empty() ? std::string() : " (" + result.last_checkpoint + ")"));
    }
    if (trace) {
      std::string path =
          (fs::path(train_dir) / ("tf_trace-" + std::to_string(global_step) + ".json")).string();
      trace->write_json(path);
      trace.reset();
    }
    ++global_step;
    examples_since_log += batch_size;
    result.last_loss = r.loss;
    if (global_step % log_every == 0) {
      NoGradScope no_grad;
      std::vector<float> p = ops::cast(r.predictions, DType::kF32).to_vector<float>();
      std::vector<float> l = ops::cast(batch.labels, DType::kF32).to_vector<float>();
      int64_t classes = pipeline.num_classes();
      double hit = metrics::hit_at_one(p, l, batch_size, classes);
      double perr = metrics::precision_at_equal_recall_rate(p, l, batch_size, classes);
      double gap = metrics::gap(p, l, batch_size, classes, 20);
      double eps = static_cast<double>(examples_since_log) / std::max(since(last_log), 1e-9);
      result.examples_per_sec = eps;
      log << std::fixed << std::setprecision(2) << "training step " << global_step
          << " | Hit@1: " << hit << " | PERR: " << perr << " | GAP: " << gap
          << " | Loss: " << std::setprecision(5) << r.loss
          << " | Examples/sec: " << std::setprecision(2) << eps << "\n";
      summaries.add_scalar("model/Training_Loss", r.loss, global_step);
      summaries.add_scalar("model/Learning_Rate", r.learning_rate, global_step);
      summaries.add_scalar("model/Training_Hit@1", hit, global_step);
      summaries.add_scalar("model/Training_Perr", perr, global_step);
      summaries.add_scalar("model/Training_GAP", gap, global_step);
      summaries.add_scalar("global_step/Examples/Second", eps, global_step);
      InputStats input_stats = data.stats();
      if (input_stats.corrupt_skipped > 0) {
        log << "skipped " << input_stats.corrupt_skipped
            << " corrupt records so far (skip_corrupt_records)\n";
        summaries.add_scalar("input/corrupt_records_skipped",
                             static_cast<double>(input_stats.corrupt_skipped), global_step);
      }
      last_log = Clock::now();
      examples_since_log = 0;
    }
    if (histograms_due) {
      add_histograms(&r);
      last_histograms = Clock::now();
    }
    bool saved = false;
    if (since(last_save) >= tc.save_interval_secs()) {
      save();
      last_save = Clock::now();
      saved = true;
    }
    maybe_export(saved);
  }
  if (global_step > 0 && !step.trained().empty()) {
    add_histograms(nullptr);
    if (result.last_checkpoint.empty() || fs::path(result.last_checkpoint).filename() !=
                                              "model.ckpt-" + std::to_string(global_step)) {
      save();
    }
  }
  if (int64_t skipped = data.stats().corrupt_skipped; skipped > 0) {
    log << "skipped " << skipped << " corrupt records in all (skip_corrupt_records)\n";
  }
  summaries.close();
  result.global_step = global_step;
  return result;
}

EvalResult evaluate(const PluginRegistry& registry, const config::Pipeline& pipeline,
                    const std::string& checkpoint_prefix, std::ostream& log) {
  const config::TrainConfig& tc = pipeline.train_config();
  const config::InputReader& input = pipeline.eval_input_reader().has_data_pattern()
                                         ? pipeline.eval_input_reader()
                                         : pipeline.train_input_reader();
  Inference run(registry, pipeline, checkpoint_prefix, input);
  auto loss_fn =
      create<Loss>(registry, ClassKind::kLoss, model_flags_of(pipeline).label_loss,
                   tc.has_label_loss() ? &tc.label_loss() : nullptr, "train_config.label_loss");
  metrics::EvaluationMetrics evaluation(pipeline.num_classes(), pipeline.eval_config().top_k());
  EvalResult result;
  result.global_step =
      static_cast<int64_t>(to_double(run.restore->read("global_step", *run.backend)));
  NoGradScope no_grad;
  while (std::optional<HostBatch> host = run.data->next()) {
    int64_t batch_size = host->size;
    Batch batch = to_device_batch(*run.backend, *host);
    run.data->recycle(std::move(*host));
    ModelOutput out = run.model->forward(*run.ctx, batch, Mode::kEval);
    Tensor loss =
        out.loss ? *out.loss : loss_fn->calculate_loss(out.predictions, batch.labels, std::nullopt);
    std::vector<float> p = ops::cast(out.predictions, DType::kF32).to_vector<float>();
    std::vector<float> l = ops::cast(batch.labels, DType::kF32).to_vector<float>();
    evaluation.accumulate(p, l, to_double(loss), batch_size);
    result.examples += batch_size;
  }
  metrics::EpochMetrics s = evaluation.get();
  result.avg_hit_at_one = s.avg_hit_at_one;
  result.avg_perr = s.avg_perr;
  result.mean_ap = s.mean_ap;
  result.gap = s.gap;
  result.avg_loss = s.avg_loss;
  log << std::fixed << std::setprecision(3) << "eval step " << result.global_step
      << " | Avg_Hit@1: " << result.avg_hit_at_one << " | Avg_PERR: " << result.avg_perr
      << " | MAP: " << result.mean_ap << " | GAP: " << result.gap
      << " | Avg_Loss: " << result.avg_loss << "\n";
  SummaryWriter summaries((fs::path(tc.train_dir()) / "eval").string(), event_file_suffix());
  summaries.add_scalar("Eval/Avg_Hit@1", result.avg_hit_at_one, result.global_step);
  summaries.add_scalar("Eval/Avg_Perr", result.avg_perr, result.global_step);
  summaries.add_scalar("Eval/MAP", result.mean_ap, result.global_step);
  summaries.add_scalar("Eval/GAP", result.gap, result.global_step);
  summaries.add_scalar("Eval/Avg_Loss", result.avg_loss, result.global_step);
  summaries.close();
  return result;
}

namespace {

// The newest step an earlier eval run recorded in train_dir/eval (-1 when none), so that a
// restarted evaluator does not evaluate a checkpoint again.
int64_t last_evaluated_step(const std::string& train_dir) {
  int64_t last = -1;
  fs::path dir = fs::path(train_dir) / "eval";
  if (!fs::is_directory(dir)) return last;
  for (const std::string& file : EventFileReader::list_event_files(dir.string())) {
    try {
      EventFileReader reader(file);
      tf::Event event;
      while (reader.next(&event)) {
        for (const auto& value : event.summary().value()) {
          if (value.tag() == "Eval/GAP") last = std::max<int64_t>(last, event.step());
        }
      }
    } catch (const DataLoss&) {
      // A damaged event file only means that step may be evaluated again.
    }
  }
  return last;
}

}  // namespace

std::vector<EvalResult> evaluate_checkpoints(const PluginRegistry& registry,
                                             const config::Pipeline& pipeline, std::ostream& log) {
  const config::EvalConfig& ec = pipeline.eval_config();
  const std::string& train_dir = pipeline.train_config().train_dir();
  std::vector<EvalResult> results;
  int64_t last_step = ec.run_once() ? -1 : last_evaluated_step(train_dir);
  if (last_step >= 0) {
    log << "step " << last_step << " was evaluated by an earlier run (" << train_dir
        << "/eval); waiting for newer checkpoints\n";
  }
  auto last_new = Clock::now();
  bool waiting_logged = false;
  std::shared_ptr<Backend> backend;  // for reading global_step, made once
  while (true) {
    std::optional<std::string> latest = latest_checkpoint(train_dir);
    if (!latest && ec.run_once()) throw NotFound("no checkpoint in train_dir " + train_dir);
    if (latest) {
      if (!backend) backend = make_backend(registry, pipeline);
      int64_t step =
          static_cast<int64_t>(to_double(CheckpointReader(*latest).read("global_step", *backend)));
      if (step > last_step) {
        results.push_back(evaluate(registry, pipeline, *latest, log));
        last_step = step;
        last_new = Clock::now();
        waiting_logged = false;
      } else if (!waiting_logged) {
        log << "step " << step << " is evaluated; waiting for a newer checkpoint in " << train_dir
            << "\n";
        waiting_logged = true;
      }
    }
    if (ec.run_once()) return results;
    double waited = std::chrono::duration<double>(Clock::now() - last_new).count();
    if (ec.timeout_secs() > 0 && waited >= ec.timeout_secs()) {
      log << std::defaultfloat << "no new checkpoint for " << ec.timeout_secs() << " s; stopping\n";
      return results;
    }
    double pause = ec.eval_interval_secs();
    if (ec.timeout_secs() > 0) pause = std::min(pause, ec.timeout_secs() - waited);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(pause, 0.01)));
  }
}

int64_t predict(const PluginRegistry& registry, const config::Pipeline& pipeline,
                const std::string& checkpoint_prefix, const std::string& output_csv, int top_k,
                std::ostream& log) {
  if (top_k < 1) throw InvalidArgument("--top_k must be >= 1, got " + std::to_string(top_k));
  const config::InputReader& input = pipeline.eval_input_reader();
  if (input.data_pattern().empty()) throw ConfigError("no input data: set --input_data_pattern");
  Inference run(registry, pipeline, checkpoint_prefix, input);
  const std::string temporary = output_csv + ".tmp";
  std::ofstream out(temporary, std::ios::trunc);
  if (!out) throw Error("cannot write " + temporary);
  out << "VideoId,LabelConfidencePairs\n";
  int64_t videos = 0;
  NoGradScope no_grad;
  int64_t k = std::min<int64_t>(top_k, pipeline.num_classes());
  while (std::optional<HostBatch> host = run.data->next()) {
    Batch batch = to_device_batch(*run.backend, *host);
    run.data->recycle(std::move(*host));
    ModelOutput result = run.model->forward(*run.ctx, batch, Mode::kPredict);
    auto [values, indices] = ops::top_k(ops::cast(result.predictions, DType::kF32), k);
    std::vector<float> v = values.to_vector<float>();
    std::vector<int64_t> c = indices.to_vector<int64_t>();
    for (std::size_t i = 0; i < batch.ids.size(); ++i) {
      out << batch.ids[i] << ",";
      for (int64_t j = 0; j < k; ++j) {
        std::size_t at = i * static_cast<std::size_t>(k) + static_cast<std::size_t>(j);
        out << (j ? " " : "") << c[at] << " " << std::fixed << std::setprecision(6) << v[at];
      }
      out << "\n";
      ++videos;
    }
  }
  out.close();
  if (!out) throw Error("cannot write " + temporary);
  fs::rename(temporary, output_csv);
  log << "wrote predictions for " << videos << " videos to " << output_csv << " (from "
      << run.prefix << ")\n";
  return videos;
}

namespace {

// The weights of a checkpoint as an export shows them: no step, no trainer state, no optimizer
// slots or averages (an entry "X/suffix" beside a variable X of the same shape), and with
// `averages` each variable's "X/ExponentialMovingAverage" in its place, as TensorFlow's
// swapping saver exports it.
std::vector<std::pair<std::string, Tensor>> exported_weights(const CheckpointReader& checkpoint,
                                                             bool averages, Backend& host) {
  std::map<std::string, const CheckpointTensorInfo*> by_name;
  for (const CheckpointTensorInfo& info : checkpoint.tensors()) by_name[info.name] = &info;
  auto is_extra = [&](const CheckpointTensorInfo& info) {
    for (std::size_t slash = info.name.rfind('/'); slash != std::string::npos && slash > 0;
         slash = info.name.rfind('/', slash - 1)) {
      auto owner = by_name.find(info.name.substr(0, slash));
      if (owner != by_name.end() && owner->second->shape == info.shape) return true;
    }
    return false;
  };
  std::vector<std::pair<std::string, Tensor>> out;
  for (const CheckpointTensorInfo& info : checkpoint.tensors()) {
    if (info.name == "global_step" || info.name.rfind("trainyard/", 0) == 0 ||
        info.name == "beta1_power" || info.name == "beta2_power" || !info.unsupported.empty() ||
        is_extra(info)) {
      continue;
    }
    std::string source = info.name;
    if (averages && by_name.count(info.name + "/ExponentialMovingAverage"))
      source += "/ExponentialMovingAverage";
    out.emplace_back(info.name, checkpoint.read(source, host));
  }
  return out;
}

}  // namespace

std::string export_model(const PluginRegistry& registry, const config::Pipeline& pipeline,
                         const std::string& checkpoint_prefix, const std::string& export_dir) {
  const config::TrainConfig& tc = pipeline.train_config();
  std::string prefix = checkpoint_or_latest(pipeline, checkpoint_prefix);
  CheckpointReader check(prefix);  // refuses an incomplete checkpoint before anything is written
  fs::path target(export_dir);
  fs::path staging = target.string() + ".tmp";
  fs::remove_all(staging);
  fs::create_directories(staging);
  std::string name = fs::path(prefix).filename().string();
  for (const char* suffix : {".index", ".data-00000-of-00001"}) {
    fs::copy_file(prefix + suffix, staging / (name + suffix), fs::copy_options::overwrite_existing);
  }
  {
    std::ofstream state(staging / "checkpoint");
    state << "model_checkpoint_path: \"" << name << "\"\nall_model_checkpoint_paths: \"" << name
          << "\"\n";
    // The training run's own record of its flags, so predict checks against what trained.
    fs::path recorded = fs::path(tc.train_dir()) / "model_flags.json";
    std::ofstream flags(staging / "model_flags.json");
    flags << (fs::exists(recorded) ? model_flags_to_json(read_model_flags(recorded.string()))
                                   : model_flags_to_json(model_flags_of(pipeline)));
    std::ofstream config(staging / "pipeline.config");
    config << pipeline_config_to_text(pipeline, /*with_defaults=*/true);
    if (!state || !flags || !config) throw Error("cannot write the export in " + staging.string());
  }
  std::shared_ptr<Backend> backend = make_backend(registry, pipeline);
  write_safetensors((staging / "model.safetensors").string(),
                    exported_weights(check, tc.use_moving_average(), *backend),
                    {{"format", "trainyard"}, {"source", name}});
  fs::remove_all(target);
  fs::rename(staging, target);
  return (target / name).string();
}

}  // namespace trainyard
