#include "trainyard/core/train_step.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>

#include "engine/autodiff_internal.h"
#include "engine/model_context.h"
#include "engine/variable_regex.h"
#include "registry/pipeline_plugins.h"
#include "train/data_parallel.h"
#include "registry/detection_model_adapter.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/learning_rate_config.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/trace.h"
#include "trainyard/error.h"
#include "trainyard/loss.h"
#include "trainyard/ops.h"
#include "trainyard/optimizer.h"

namespace trainyard {
namespace {

// A repeated regex field of train_config, compiled once ("train_config.freeze_variables[0]").
std::vector<VariableRegex> compile_regexes(
    const google::protobuf::RepeatedPtrField<std::string>& patterns, const std::string& field) {
  std::vector<VariableRegex> out;
  for (int i = 0; i < patterns.size(); ++i) {
    out.emplace_back(patterns[i], field + "[" + std::to_string(i) + "]");
  }
  return out;
}

bool any_matches(const std::vector<VariableRegex>& regexes, const std::string& name) {
  for (const VariableRegex& r : regexes) {
    if (r.matches_prefix(name)) return true;
  }
  return false;
}

// The variables the train op updates, as the Object Detection API filters them: only those
// matching update_trainable_variables (when given), less those matching freeze_variables.
std::vector<Variable*> variables_to_train(const std::vector<Variable*>& trainable,
                                          const config::TrainConfig& tc) {
  const std::vector<VariableRegex> update =
      compile_regexes(tc.update_trainable_variables(), "train_config.update_trainable_variables");
  const std::vector<VariableRegex> freeze =
      compile_regexes(tc.freeze_variables(), "train_config.freeze_variables");
  std::vector<Variable*> out;
  for (Variable* v : trainable) {
    const bool keep =
        (update.empty() || any_matches(update, v->name())) && !any_matches(freeze, v->name());
    if (keep) out.push_back(v);
  }
  return out;
}

// The product of the gradient multipliers whose regex matches `name` (1 when none does).
double gradient_multiplier(const config::TrainConfig& tc, const std::vector<VariableRegex>& regexes,
                           const std::string& name) {
  double m = 1.0;
  for (int i = 0; i < tc.gradient_multipliers_size(); ++i) {
    if (regexes[i].matches_prefix(name)) m *= tc.gradient_multipliers(i).multiplier();
  }
  return m;
}

// A loss or penalty in a message: six significant digits ("0.693147", "nan", "inf", "-inf").
// A NaN is "nan" whatever its sign bit (x86's default NaN, which AVX-512 code produces, has it
// set, and printed as "-nan").
std::string number_text(double value) {
  if (std::isnan(value)) return "nan";
  std::ostringstream out;
  out << value;
  return out.str();
}

// Each defined gradient's sum, read back in one transfer: inf or nan exactly where the gradient
// holds an inf or nan (or its sum overflows). Entries of undefined gradients are 0.
std::vector<double> gradient_sums(const std::vector<Tensor>& grads) {
  NoGradScope no_grad;
  std::vector<Tensor> sums;
  std::vector<std::size_t> index;
  bool all_f32 = true;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    const Tensor& g = grads[i];
    // A half-precision sum would overflow long before its elements do.
    const bool half = g.dtype() == DType::kF16 || g.dtype() == DType::kBF16;
    Tensor sum = ops::reduce_sum(half ? ops::cast(g, DType::kF32) : g);
    all_f32 &= sum.dtype() == DType::kF32;
    sums.push_back(ops::reshape(sum, Shape{1}));
    index.push_back(i);
  }
  std::vector<double> out(grads.size(), 0.0);
  if (sums.empty()) return out;
  if (!all_f32) {
    for (Tensor& sum : sums) sum = ops::cast(sum, DType::kF64);
  }
  Tensor all = sums.size() == 1 ? sums.front() : ops::concat(sums, 0);
  if (all_f32) {
    std::vector<float> values = all.to_vector<float>();
    for (std::size_t k = 0; k < index.size(); ++k) out[index[k]] = values[k];
  } else {
    std::vector<double> values = all.to_vector<double>();
    for (std::size_t k = 0; k < index.size(); ++k) out[index[k]] = values[k];
  }
  return out;
}

// `batch` cut into `clones` equal parts along its first dimension (views, in order).
std::vector<Batch> split_batch(const Batch& batch, int clones) {
  auto rows = [&](const Tensor& t) { return t.defined() ? t.shape().dim(0) : int64_t{-1}; };
  int64_t size = rows(batch.labels);
  if (size < 0 && !batch.features.empty()) size = rows(batch.features.begin()->second);
  if (size < 0 || size % clones != 0) {
    throw InvalidArgument("train_config.num_clones " + std::to_string(clones) + ": the batch of " +
                          std::to_string(size) +
                          " examples does not split into equal clones (the input batch is "
                          "num_clones x batch_size; allow_smaller_final_batch must be false)");
  }
  const int64_t each = size / clones;
  auto part = [&](const Tensor& t, int c) {
    return t.defined() ? ops::slice_outer(t, c * each, each) : Tensor();
  };
  std::vector<Batch> parts(static_cast<std::size_t>(clones));
  for (int c = 0; c < clones; ++c) {
    Batch& b = parts[static_cast<std::size_t>(c)];
    for (const auto& [name, t] : batch.features) b.features[name] = part(t, c);
    b.labels = part(batch.labels, c);
    b.num_frames = part(batch.num_frames, c);
    const auto from = static_cast<std::size_t>(c * each);
    if (batch.ids.size() == static_cast<std::size_t>(size)) {
      b.ids.assign(batch.ids.begin() + from, batch.ids.begin() + from + each);
    }
  }
  return parts;
}

// The scopes fine-tuning reads a detection model's variables from: the model's restore_map of
// train_config.fine_tune_checkpoint_type and load_all_detection_checkpoint_vars. Every variable
// by its own name (an empty map) for other models and without a type.
std::map<std::string, std::string> detection_restore_scopes(BaseModel& model,
                                                            const config::TrainConfig& tc) {
  auto* detection = dynamic_cast<DetectionModelAdapter*>(&model);
  const std::string& type = tc.fine_tune_checkpoint_type();
  if (detection == nullptr || type.empty()) return {};
  try {
    return detection->model().restore_map(type, tc.load_all_detection_checkpoint_vars());
  } catch (const InvalidArgument& e) {
    throw ConfigError("train_config.fine_tune_checkpoint_type: " + std::string(e.what()));
  }
}

}  // namespace

NonFiniteError::NonFiniteError(const std::string& message, int64_t step, Source source,
                               std::string variable)
    : Error(message), step_(step), source_(source), variable_(std::move(variable)) {}

NonFiniteError::~NonFiniteError() = default;

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
  std::unique_ptr<LearningRate> learning_rate;
  struct Trained {
    Variable* variable = nullptr;
    std::vector<Variable*> slots;
    Variable* average = nullptr;  // with use_moving_average
    double multiplier = 1.0;      // gradient multipliers and bias_grad_multiplier
  };
  std::vector<Trained> trained;
  std::vector<Variable*> trained_variables;
  bool ready = false;
  Collective* replicas = nullptr;  // set_replicas: a world of several replicas
  std::unique_ptr<GradientReducer> reducer;
  bool gradients_checked = false;  // the first step's check for variables without a gradient
  // global_step as the restored checkpoint holds it: the originals' tf.Variable(0) is int32.
  DType global_step_dtype = DType::kI64;

  Impl(const PluginRegistry& registry, const config::Pipeline& pipeline,
       const CheckpointReader* restore, std::ostream& out)
      : tc(pipeline.train_config()), log(out) {
    backend = make_backend(registry, pipeline);
    model = make_model(registry, pipeline);
    loss_fn = create_plugin<Loss>(registry, ClassKind::kLoss, loss_class(registry, pipeline),
                                  tc.has_label_loss() ? &tc.label_loss() : nullptr,
                                  "train_config.label_loss");
    optimizer = create_plugin<Optimizer>(
        registry, ClassKind::kOptimizer, optimizer_class(registry, pipeline),
        tc.has_optimizer() ? &tc.optimizer() : nullptr, "train_config.optimizer");
    learning_rate = learning_rate_from_config(tc);
    uint64_t seed = tc.has_seed() ? tc.seed() : 0;
    store = std::make_unique<VariableStore>(*backend, seed);
    ctx = std::make_unique<StoreContext>(*backend, *store, pipeline.num_classes(), seed, restore);
    if (restore != nullptr && restore->contains("global_step") &&
        restore->info("global_step").dtype == DType::kI32) {
      global_step_dtype = DType::kI32;
    }
    if (restore == nullptr && !tc.fine_tune_checkpoint().empty()) {
      try {
        fine_tune = std::make_unique<CheckpointReader>(tc.fine_tune_checkpoint());
      } catch (const Error& e) {
        throw ConfigError("fine_tune_checkpoint: " + std::string(e.what()));
      }
      ctx->set_fine_tune(
          fine_tune.get(),
          {tc.checkpoint_exclude_scopes().begin(), tc.checkpoint_exclude_scopes().end()},
          detection_restore_scopes(*model, tc));
    }
  }

  // A trained variable the total loss does not depend on gets no gradient and is never
  // updated: a model that created it and forgot it, or a typo in a variable's scope. Named at
  // the first step, as a warning or, with fail_on_variables_without_gradient, an error.
  void check_gradients_reach(const std::vector<Tensor>& grads) {
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) missing.push_back(trained[i].variable->name());
    }
    if (missing.empty()) return;
    std::string names;
    for (const std::string& name : missing) names += (names.empty() ? "'" : ", '") + name + "'";
    const std::string message =
        std::to_string(missing.size()) + " of the " + std::to_string(grads.size()) +
        " trained variables got no gradient from the loss, so training never changes them: " +
        names + " (the model " + model->plugin_origin().class_name +
        " creates them but its loss does not depend on them; leave them out with "
        "freeze_variables, or mark them trainable: false)";
    if (tc.fail_on_variables_without_gradient()) {
      throw InvalidArgument(message + "; train_config.fail_on_variables_without_gradient is set");
    }
    log << "warning: " << message << std::endl;
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
    std::vector<VariableRegex> multiplier_regexes;
    for (int i = 0; i < tc.gradient_multipliers_size(); ++i) {
      multiplier_regexes.emplace_back(
          tc.gradient_multipliers(i).variable_regex(),
          "train_config.gradient_multipliers[" + std::to_string(i) + "].variable_regex");
    }
    const VariableRegex biases(".*/biases", "bias_grad_multiplier");
    for (Variable* v : trained_variables) {
      Trained t;
      t.variable = v;
      for (const SlotSpec& slot :
           guard_plugin_call(*optimizer, "slots", [&] { return optimizer->slots(); })) {
        t.slots.push_back(&ctx->extra(extra_spec(*v, slot.name, slot.initializer), log));
      }
      if (tc.use_moving_average()) {
        Tensor initial = v->value();
        t.average = &ctx->extra(extra_spec(*v, "ExponentialMovingAverage", {}), log, &initial);
      }
      t.multiplier = gradient_multiplier(tc, multiplier_regexes, v->name());
      if (tc.bias_grad_multiplier() > 0 && biases.matches_prefix(v->name())) {
        t.multiplier *= tc.bias_grad_multiplier();
      }
      trained.push_back(std::move(t));
    }
    if (fine_tune != nullptr) {
      const StoreContext::FineTuneReport& r = ctx->fine_tune_report();
      log << "fine_tune_checkpoint " << fine_tune->prefix() << ": restored " << r.restored.size()
          << " variables, skipped " << r.missing.size() << " not in the checkpoint and "
          << r.excluded.size() << " excluded by checkpoint_exclude_scopes, " << r.mismatched.size()
          << " mismatched";
      if (!tc.fine_tune_checkpoint_type().empty()) {
        log << ", " << r.outside_restore_map.size() << " outside the restore map of a '"
            << tc.fine_tune_checkpoint_type() << "' checkpoint";
      }
      log << "\n";
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

void TrainStep::set_replicas(Collective& collective, int64_t bucket_bytes) {
  impl_->replicas = &collective;
  impl_->reducer = std::make_unique<GradientReducer>(collective, bucket_bytes);
}

void TrainStep::broadcast_state(int root) {
  if (impl_->replicas != nullptr) {
    broadcast_variables(*impl_->replicas, impl_->store->collection(kGlobalVariables), root);
  }
}

const std::vector<Variable*>& TrainStep::trained() const { return impl_->trained_variables; }

StepResult TrainStep::run(const Batch& batch, int64_t global_step, bool want_gradients) {
  Impl& m = *impl_;
  const config::TrainConfig& tc = m.tc;
  StepTrace* trace = StepTrace::active();
  m.ctx->set_step(global_step);
  StepResult result;
  result.learning_rate = m.learning_rate->at(global_step);
  // One forward pass: `total` is what a clone differentiates. With towers (num_clones) each
  // clone's objective is its label loss plus the regularization (YouTube-8M sums the towers'
  // gradients) or its label loss / num_clones plus the regularization once, in clone 0 (the OD
  // API's model_deploy averages the clone losses).
  struct Pass {
    Tensor total;
    double label_loss = 0.0;
    double regularization = 0.0;  // regularization_penalty x the regularization loss
    Tensor predictions;
  };
  Tensor last_reg;  // the regularization loss of the last forward pass, for messages
  const int clones = std::max(1, tc.num_clones());
  const bool mean_clones = tc.clone_gradients() == config::TrainConfig::MEAN;
  auto forward = [&](const Batch& b, int clone) {
    StepTrace::Span span(trace, "forward");
    ModelOutput out = guard_plugin_call(*m.model, "forward",
                                        [&] { return m.model->forward(*m.ctx, b, Mode::kTrain); });
    Tensor label_loss = out.loss ? *out.loss : guard_plugin_call(*m.loss_fn, "calculate_loss", [&] {
      return m.loss_fn->calculate_loss(out.predictions, b.labels, std::nullopt);
    });
    Tensor reg = m.store->regularization_loss();
    if (out.regularization_loss)
      reg = reg.defined() ? ops::add(reg, *out.regularization_loss) : *out.regularization_loss;
    Pass pass;
    pass.label_loss = to_double(label_loss);
    pass.predictions = out.predictions;
    Tensor objective = clones > 1 && mean_clones ? ops::mul(label_loss, 1.0 / clones) : label_loss;
    if (reg.defined()) {
      last_reg = reg;
      Tensor penalty = ops::mul(reg, tc.regularization_penalty());
      pass.regularization = to_double(penalty);
      if (!(mean_clones && clone > 0)) objective = ops::add(objective, penalty);
    }
    pass.total = objective;
    return pass;
  };
  const std::vector<Batch> parts = clones > 1 ? split_batch(batch, clones) : std::vector<Batch>{};
  const Batch& first_part = clones > 1 ? parts[0] : batch;
  std::optional<Pass> first;
  if (!m.ready) {
    first = forward(first_part, 0);  // creates the variables
    m.prepare();
    if (m.replicas != nullptr) {
      // Every replica takes rank 0's values (restored or initialized) and computes its forward
      // pass again with them.
      broadcast_variables(*m.replicas, m.store->collection(kGlobalVariables));
      first.reset();
    }
  }
  std::vector<Tensor> sources;
  for (const Impl::Trained& t : m.trained) sources.push_back(t.variable->value());
  // The losses over every example of the step: the clones' mean, then the replicas' mean (their
  // batches are equal). An inf or nan on one replica reaches every replica, so all of them stop
  // at the same step.
  auto report_losses = [&](double label_sum, double regularization) {
    result.loss = label_sum / clones;
    result.total_loss = result.loss + regularization;
    if (m.replicas != nullptr) {
      NoGradScope no_grad;
      Tensor losses = Tensor::from_vector(*m.backend, Shape{2},
                                          std::vector<double>{result.loss, result.total_loss});
      m.replicas->all_reduce(losses, ReduceOp::kMean);
      const std::vector<double> mean = losses.to_vector<double>();
      result.loss = mean[0];
      result.total_loss = mean[1];
    }
  };
  // TF-Slim checks the loss after the update; checking first keeps the weights of the last
  // good step as well as its checkpoint.
  const std::string at_step = " at step " + std::to_string(global_step);
  auto check_losses = [&] {
    if (!std::isfinite(result.loss)) {
      throw NonFiniteError(
          "loss is inf or nan" + at_step + ": the label loss is " + number_text(result.loss),
          global_step, NonFiniteError::Source::kLabelLoss, "");
    }
    if (!std::isfinite(result.total_loss)) {
      throw NonFiniteError("loss is inf or nan" + at_step + ": the regularization loss (" +
                               number_text(to_double(last_reg)) +
                               ") times regularization_penalty (" +
                               number_text(tc.regularization_penalty()) + ") is " +
                               number_text(result.total_loss - result.loss) + "; the label loss, " +
                               number_text(result.loss) + ", is finite",
                           global_step, NonFiniteError::Source::kRegularizationLoss, "");
    }
  };
  auto check_reach = [&](const std::vector<Tensor>& grads) {
    if (m.gradients_checked) return;
    m.gradients_checked = true;
    m.check_gradients_reach(grads);
  };
  std::vector<Tensor> grads;
  if (clones == 1) {
    Pass pass = first ? std::move(*first) : forward(batch, 0);
    result.predictions = pass.predictions;
    report_losses(pass.label_loss, pass.regularization);
    check_losses();
    StepTrace::Span span(trace, "backward");
    if (m.reducer) {
      m.reducer->begin(m.trained_variables);
      grads = gradients_as_ready(pass.total, sources,
                                 [&](std::size_t i, const Tensor& g) { m.reducer->ready(i, g); });
      check_reach(grads);  // before the reduction turns missing gradients into zeros
      StepTrace::Span reduce(trace, "all_reduce");
      m.reducer->finish(grads);
    } else {
      grads = gradients(pass.total, sources);
      check_reach(grads);
    }
  } else {
    // Clone after clone, each forward pass followed by its backward pass, the gradients added.
    double label_sum = 0.0;
    double regularization = 0.0;
    std::vector<Tensor> predictions;
    for (int c = 0; c < clones; ++c) {
      Pass pass = c == 0 && first ? std::move(*first) : forward(parts[c], c);
      label_sum += pass.label_loss;
      regularization = pass.regularization;
      predictions.push_back(pass.predictions);
      StepTrace::Span span(trace, "backward");
      std::vector<Tensor> g = gradients(pass.total, sources);
      NoGradScope no_grad;
      if (grads.empty()) {
        grads = std::move(g);
        continue;
      }
      for (std::size_t i = 0; i < grads.size(); ++i) {
        if (!g[i].defined()) continue;
        grads[i] = grads[i].defined() ? ops::add(grads[i], g[i]) : g[i];
      }
    }
    {
      NoGradScope no_grad;
      result.predictions = ops::concat(predictions, 0);
    }
    report_losses(label_sum, regularization);
    check_losses();
    check_reach(grads);
    if (m.reducer) {
      StepTrace::Span reduce(trace, "all_reduce");
      m.reducer->begin(m.trained_variables);
      m.reducer->finish(grads);
    }
  }
  {
    // Multipliers first, then clipping, as TF-Slim's create_train_op orders them; the check
    // sees the gradients as multiplied (a multiplier can overflow one), before clipping (which
    // turns an inf into nan or 0) and before any update.
    NoGradScope no_grad;
    for (std::size_t i = 0; i < m.trained.size(); ++i) {
      if (grads[i].defined() && m.trained[i].multiplier != 1.0) {
        grads[i] = ops::mul(grads[i], m.trained[i].multiplier);
      }
    }
  }
  {
    StepTrace::Span span(trace, "check_numerics");
    const std::vector<double> sums = gradient_sums(grads);
    std::size_t bad = 0;
    std::size_t first = sums.size();
    for (std::size_t i = 0; i < sums.size(); ++i) {
      if (std::isfinite(sums[i])) continue;
      if (first == sums.size()) first = i;
      ++bad;
    }
    if (bad > 0) {
      const std::string& name = m.trained[first].variable->name();
      throw NonFiniteError("a gradient is inf or nan" + at_step + ": first that of variable '" +
                               name + "' (" + std::to_string(bad) + " of the " +
                               std::to_string(sums.size()) + " trained variables; the loss, " +
                               number_text(result.total_loss) + ", is finite)",
                           global_step, NonFiniteError::Source::kGradient, name);
    }
  }
  {
    StepTrace::Span span(trace, "apply_gradients");
    NoGradScope no_grad;
    for (std::size_t i = 0; i < m.trained.size(); ++i) {
      Impl::Trained& t = m.trained[i];
      if (!grads[i].defined()) continue;
      Tensor g = grads[i];
      if (tc.clip_gradient_norm() > 0) g = ops::clip_by_norm(g, tc.clip_gradient_norm());
      if (want_gradients) result.gradients.emplace_back(t.variable->name(), g);
      guard_plugin_call(*m.optimizer, "apply", [&] {
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

void TrainStep::restore(const CheckpointReader& checkpoint) {
  Impl& m = *impl_;
  const std::string scope = m.ctx->tower_scope() ? StoreContext::kTowerScope : "";
  for (Variable* v : m.store->collection(kGlobalVariables)) {
    const std::string name = scope + v->name();
    Tensor value = checkpoint.read(name, *m.backend);
    if (value.shape() != v->spec().shape || value.dtype() != v->spec().dtype) {
      throw ConfigError("checkpoint " + checkpoint.prefix() + " holds '" + name + "' as " +
                        value.description() + " but the variable is " +
                        dtype_name(v->spec().dtype) + v->spec().shape.to_string());
    }
    if (v->value().requires_grad()) value.set_requires_grad(true);
    v->assign(value);
  }
}

std::vector<std::pair<std::string, Tensor>> TrainStep::state(int64_t global_step) {
  Impl& m = *impl_;
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::set<std::string> names;
  // Under the starter code's "tower/" scope when the run resumed from its checkpoint.
  const std::string scope = m.ctx->tower_scope() ? StoreContext::kTowerScope : "";
  for (Variable* v : m.store->collection(kGlobalVariables)) {
    tensors.emplace_back(scope + v->name(), v->value());
    names.insert(scope + v->name());
  }
  Tensor step = Tensor::from_vector(*m.backend, Shape{}, std::vector<int64_t>{global_step});
  tensors.emplace_back("global_step", m.global_step_dtype == DType::kI64
                                          ? step
                                          : ops::cast(step, m.global_step_dtype));
  for (const auto& [name, value] : guard_plugin_call(*m.optimizer, "non_slot_values", [&] {
         return m.optimizer->non_slot_values(global_step);
       })) {
    if (names.count(name)) continue;
    tensors.emplace_back(name, Tensor::from_vector(*m.backend, Shape{},
                                                   std::vector<float>{static_cast<float>(value)}));
  }
  return tensors;
}

}  // namespace trainyard
