// Model checks, on the CPU reference backend with a tiny batch (4 examples, 16 features,
// 5 classes): the declared options, the shape and range of the predictions, a finite loss, a
// gradient for every trainable variable, fitting the batch, and a checkpoint round trip.
//
// A BaseModel does not declare its input, so the suite offers the two the trainer gives: a
// video-level batch, "features" [B, D], and failing that a frame-level one, "features"
// [B, T, D] with "num_frames" [B].
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "conformance.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/variable.h"

namespace trainyard::conformance {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kBatch = 4;
constexpr int64_t kFeatures = 16;
constexpr int64_t kFrames = 6;
constexpr int64_t kClasses = 5;

class StoreContext final : public ModelContext {
 public:
  StoreContext(Backend& backend, uint64_t seed) : store_(backend, seed) {}
  Backend& backend() override { return store_.backend(); }
  int64_t num_classes() const override { return kClasses; }
  Variable& variable(const VariableSpec& spec) override { return store_.get_or_create(spec); }
  uint64_t seed() const override { return 99; }
  VariableStore& store() { return store_; }

 private:
  VariableStore store_;
};

// Rows of unit L2 norm, as the trainer normalizes video-level features.
std::vector<double> normalized_rows(uint64_t seed, int64_t rows, int64_t cols) {
  std::vector<double> v = uniform_values(seed, static_cast<std::size_t>(rows * cols), -1.0, 1.0);
  for (int64_t r = 0; r < rows; ++r) {
    double norm = 0.0;
    for (int64_t c = 0; c < cols; ++c) norm += v[r * cols + c] * v[r * cols + c];
    norm = std::sqrt(norm);
    for (int64_t c = 0; c < cols; ++c) v[r * cols + c] /= norm;
  }
  return v;
}

Batch video_batch(Backend& backend) {
  Batch b;
  b.features["features"] = make_tensor(backend, Shape{kBatch, kFeatures}, DType::kF32,
                                       normalized_rows(suite().seed, kBatch, kFeatures));
  return b;
}

Batch frame_batch(Backend& backend) {
  Batch b;
  b.features["features"] = make_tensor(backend, Shape{kBatch, kFrames, kFeatures}, DType::kF32,
                                       normalized_rows(suite().seed, kBatch * kFrames, kFeatures));
  std::vector<double> frames = {6, 3, 5, 1};
  b.num_frames = make_tensor(backend, Shape{kBatch}, DType::kI32, frames);
  b.features["num_frames"] = b.num_frames;
  return b;
}

// Labels with at least one positive per example (multi-hot).
Tensor labels(Backend& backend) {
  std::vector<double> u = uniform_values(suite().seed + 7, kBatch * kClasses, 0.0, 1.0);
  std::vector<double> y(u.size());
  for (int64_t r = 0; r < kBatch; ++r) {
    for (int64_t c = 0; c < kClasses; ++c) y[r * kClasses + c] = u[r * kClasses + c] < 0.4;
    y[r * kClasses + (r % kClasses)] = 1.0;
  }
  return make_tensor(backend, Shape{kBatch, kClasses}, DType::kF32, y);
}

// A model with the input it accepts.
struct Fixture {
  std::shared_ptr<BaseModel> model;
  std::unique_ptr<StoreContext> ctx;
  Batch batch;
  std::string input;  // "video-level features f32[4, 16]", ...
};

Fixture make_fixture(const ClassInfo& info, uint64_t store_seed = 1234) {
  Backend& backend = reference_backend();
  std::string errors;
  for (bool frame_level : {false, true}) {
    Fixture f;
    f.model = create_default<BaseModel>(info);
    f.ctx = std::make_unique<StoreContext>(backend, store_seed);
    f.batch = frame_level ? frame_batch(backend) : video_batch(backend);
    f.batch.labels = labels(backend);
    f.input = std::string(frame_level ? "frame-level" : "video-level") + " features " +
              f.batch.features["features"].description();
    try {
      NoGradScope no_grad;
      guard_plugin_call(*f.model, "forward",
                        [&] { return f.model->forward(*f.ctx, f.batch, Mode::kTrain); });
      // Start again from fresh variables.
      f.ctx = std::make_unique<StoreContext>(backend, store_seed);
      return f;
    } catch (const Error& e) {
      errors += "\n  with " + f.input + ": " + e.what();
    }
  }
  throw InvalidArgument(info.class_name +
                        " rejected both inputs the trainer can give it:" + errors);
}

// The label loss: the model's own, or the batch mean of the per-class cross-entropy.
Tensor label_loss(const ModelOutput& out, const Tensor& y) {
  if (out.loss.has_value()) return *out.loss;
  Tensor p = ops::clip_by_value(out.predictions, 1e-6, 1.0 - 1e-6);
  Tensor positive = ops::mul(y, ops::log(p));
  Tensor negative = ops::mul(ops::add(ops::neg(y), 1.0), ops::log(ops::add(ops::neg(p), 1.0)));
  return ops::reduce_mean(ops::reduce_sum(ops::neg(ops::add(positive, negative)), {1}));
}

Tensor total_loss(const ModelOutput& out, const Tensor& y, VariableStore& store) {
  Tensor total = label_loss(out, y);
  if (out.regularization_loss.has_value()) total = ops::add(total, *out.regularization_loss);
  Tensor reg = store.regularization_loss();
  if (reg.defined()) total = ops::add(total, ops::cast(reg, total.dtype()));
  return total;
}

double scalar_value(const Tensor& t) { return host_values(t).at(0); }

// Adam on every trainable variable, in place.
class Adam {
 public:
  void step(VariableStore& store, const Tensor& loss, double learning_rate) {
    std::vector<Variable*> vars = store.trainable();
    std::vector<Tensor> values;
    for (Variable* v : vars) values.push_back(v->value());
    std::vector<Tensor> grads = gradients(loss, values);
    NoGradScope no_grad;
    ++t_;
    for (std::size_t i = 0; i < vars.size(); ++i) {
      if (!grads[i].defined()) continue;
      auto [it, inserted] = slots_.try_emplace(vars[i]->name());
      if (inserted) {
        it->second = {ops::zeros_like(values[i]), ops::zeros_like(values[i])};
      }
      Tensor var = values[i];
      ops::apply_adam(var, it->second.first, it->second.second, grads[i], learning_rate, 0.9, 0.999,
                      1e-8, t_);
    }
  }

 private:
  int64_t t_ = 0;
  std::map<std::string, std::pair<Tensor, Tensor>> slots_;
};

std::string where_(const ClassInfo& info, const Fixture& f) {
  return info.class_name + " on " + f.input + ", " + std::to_string(kClasses) + " classes";
}

void check_outputs(const ClassInfo& info) {
  Fixture f = make_fixture(info);
  for (Mode mode : {Mode::kTrain, Mode::kEval, Mode::kPredict}) {
    Batch batch = f.batch;
    if (mode == Mode::kPredict) batch.labels = Tensor();
    ModelOutput out = guard_plugin_call(*f.model, "forward",
                                        [&] { return f.model->forward(*f.ctx, batch, mode); });
    const Tensor& p = out.predictions;
    ASSERT_TRUE(p.defined()) << where_(info, f) << ", mode " << mode_name(mode)
                             << ": no predictions";
    EXPECT_EQ(p.shape(), (Shape{kBatch, kClasses}))
        << where_(info, f) << ", mode " << mode_name(mode) << ": predictions are "
        << p.description() << ", expected [batch, num_classes] = [" << kBatch << ", " << kClasses
        << "]";
    EXPECT_TRUE(p.dtype() == DType::kF32 || p.dtype() == DType::kF64)
        << where_(info, f) << ": predictions are " << p.description() << ", expected floats";
    std::vector<double> v = host_values(p);
    std::size_t outside = 0;
    for (double x : v) outside += !(x >= 0.0 && x <= 1.0);
    EXPECT_EQ(outside, 0u) << where_(info, f) << ", mode " << mode_name(mode) << ": " << outside
                           << " of " << v.size()
                           << " predictions are not probabilities in [0, 1] (model.h)";
  }
}

void check_finite_loss(const ClassInfo& info) {
  Fixture f = make_fixture(info);
  ModelOutput out = guard_plugin_call(
      *f.model, "forward", [&] { return f.model->forward(*f.ctx, f.batch, Mode::kTrain); });
  if (out.loss.has_value()) {
    EXPECT_EQ(out.loss->num_elements(), 1) << where_(info, f) << ": the model's own loss is "
                                           << out.loss->description() << ", expected a scalar";
  }
  if (out.regularization_loss.has_value()) {
    EXPECT_EQ(out.regularization_loss->num_elements(), 1)
        << where_(info, f) << ": regularization_loss is " << out.regularization_loss->description()
        << ", expected a scalar";
  }
  double loss = scalar_value(total_loss(out, f.batch.labels, f.ctx->store()));
  EXPECT_TRUE(std::isfinite(loss)) << where_(info, f) << ": the training loss is " << loss;
}

void check_gradients(const ClassInfo& info) {
  Fixture f = make_fixture(info);
  ModelOutput out = guard_plugin_call(
      *f.model, "forward", [&] { return f.model->forward(*f.ctx, f.batch, Mode::kTrain); });
  std::vector<Variable*> vars = f.ctx->store().trainable();
  ASSERT_FALSE(vars.empty()) << where_(info, f) << ": the model created no trainable variable";
  std::vector<Tensor> values;
  for (Variable* v : vars) values.push_back(v->value());
  // The label loss alone: a variable reached only through its L2 penalty is not learning.
  std::vector<Tensor> grads = gradients(label_loss(out, f.batch.labels), values);
  for (std::size_t i = 0; i < vars.size(); ++i) {
    const std::string& name = vars[i]->name();
    if (!grads[i].defined()) {
      ADD_FAILURE() << where_(info, f) << ": trainable variable '" << name << "' "
                    << values[i].description()
                    << " gets no gradient from the label loss (the predictions do not depend on "
                       "it)";
      continue;
    }
    std::vector<double> g = host_values(grads[i]);
    std::size_t non_finite = 0, zeros = 0;
    for (double x : g) {
      non_finite += !std::isfinite(x);
      zeros += x == 0.0;
    }
    EXPECT_EQ(non_finite, 0u) << where_(info, f) << ": the gradient of '" << name << "' has "
                              << non_finite << " non-finite elements";
    EXPECT_LT(zeros, g.size()) << where_(info, f) << ": the gradient of '" << name
                               << "' is zero everywhere";
  }
}

void check_overfits(const ClassInfo& info) {
  Fixture f = make_fixture(info);
  Adam adam;
  constexpr int kSteps = 200;
  constexpr double kLearningRate = 0.05;
  double first = 0.0, last = 0.0;
  for (int step = 0; step < kSteps; ++step) {
    ModelOutput out = guard_plugin_call(
        *f.model, "forward", [&] { return f.model->forward(*f.ctx, f.batch, Mode::kTrain); });
    Tensor loss = total_loss(out, f.batch.labels, f.ctx->store());
    last = scalar_value(loss);
    if (step == 0) first = last;
    ASSERT_TRUE(std::isfinite(last))
        << where_(info, f) << ": the loss became " << last << " at step " << step;
    adam.step(f.ctx->store(), loss, kLearningRate);
  }
  EXPECT_LT(last, 0.3 * first) << where_(info, f) << ": " << kSteps << " Adam steps (learning rate "
                               << kLearningRate << ") on one batch of " << kBatch
                               << " examples took the loss from " << first << " to " << last
                               << "; expected below 30% of the start";
}

void check_checkpoint(const ClassInfo& info) {
  Backend& backend = reference_backend();
  Fixture f = make_fixture(info);
  Adam adam;
  for (int step = 0; step < 3; ++step) {
    ModelOutput out = guard_plugin_call(
        *f.model, "forward", [&] { return f.model->forward(*f.ctx, f.batch, Mode::kTrain); });
    adam.step(f.ctx->store(), total_loss(out, f.batch.labels, f.ctx->store()), 0.05);
  }
  std::vector<double> expected;
  {
    NoGradScope no_grad;
    expected = host_values(guard_plugin_call(*f.model, "forward", [&] {
                             return f.model->forward(*f.ctx, f.batch, Mode::kEval);
                           }).predictions);
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (Variable* v : f.ctx->store().collection(kGlobalVariables)) {
    tensors.emplace_back(v->name(), v->value());
  }
  ASSERT_FALSE(tensors.empty()) << where_(info, f) << ": the model created no variable";
  fs::path dir = fs::temp_directory_path() /
                 ("trainyard-conformance-" + std::to_string(::getpid()) + "-" + info.class_name);
  fs::remove_all(dir);
  const std::string prefix = (dir / "model.ckpt-3").string();
  write_checkpoint(prefix, tensors);
  CheckpointReader reader(prefix);
  for (const auto& [name, value] : tensors) {
    ASSERT_TRUE(reader.contains(name)) << "the checkpoint lacks variable '" << name << "'";
    Tensor read = reader.read(name, backend);
    EXPECT_EQ(read.shape(), value.shape()) << "variable '" << name << "'";
    EXPECT_EQ(read.dtype(), value.dtype()) << "variable '" << name << "'";
    EXPECT_TRUE(host_bytes(read) == host_bytes(value))
        << "variable '" << name << "' " << value.description()
        << " reads back from the checkpoint with other values";
  }

  // A second instance, with variables initialized from another seed, restored from the
  // checkpoint, must predict exactly what the first did.
  Fixture g = make_fixture(info, /*store_seed=*/4321);
  {
    NoGradScope no_grad;
    guard_plugin_call(*g.model, "forward",
                      [&] { return g.model->forward(*g.ctx, g.batch, Mode::kEval); });
  }
  for (Variable* v : g.ctx->store().collection(kGlobalVariables)) {
    ASSERT_TRUE(reader.contains(v->name()))
        << where_(info, g) << ": a second instance created variable '" << v->name()
        << "', which the first did not save; variable names must not depend on the instance";
    Tensor restored = reader.read(v->name(), backend);
    if (v->trainable()) restored.set_requires_grad(true);
    v->assign(restored);
  }
  std::vector<double> actual;
  {
    NoGradScope no_grad;
    actual = host_values(guard_plugin_call(*g.model, "forward", [&] {
                           return g.model->forward(*g.ctx, g.batch, Mode::kEval);
                         }).predictions);
  }
  std::string diff = compare_values(actual, expected, 0.0, 0.0);
  EXPECT_EQ(diff, "") << where_(info, g)
                      << ": a second instance restored from the checkpoint predicts differently "
                         "from the instance that wrote it:\n"
                      << diff;
  fs::remove_all(dir);
}

}  // namespace

void register_model_checks(const ClassInfo& info) {
  const std::string suite_name = "Model/" + info.class_name;
  register_check(suite_name, "DeclaredOptionsValid", [info] { check_declared_options(info); });
  register_check(suite_name, "OutputShapes", [info] { check_outputs(info); });
  register_check(suite_name, "FiniteLoss", [info] { check_finite_loss(info); });
  register_check(suite_name, "GradientForEveryTrainableVariable",
                 [info] { check_gradients(info); });
  register_check(suite_name, "OverfitsTinyBatch", [info] { check_overfits(info); });
  register_check(suite_name, "CheckpointRoundTrip", [info] { check_checkpoint(info); });
}

}  // namespace trainyard::conformance
