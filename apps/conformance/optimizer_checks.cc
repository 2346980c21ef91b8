// Optimizer checks, on the CPU reference, with the slots created as the trainer creates them
// ("<variable>/<slot name>", from the declared initializers): convergence on a quadratic, an
// undefined gradient changing nothing, and a checkpoint of the variable and its slots that
// continues with exactly the updates an uninterrupted run makes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "conformance.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/optimizer.h"
#include "trainyard/variable.h"

namespace trainyard::conformance {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSize = 8;

// loss(x) = 1/2 sum_i a_i (x_i - t_i)^2, minimum 0 at t.
struct Quadratic {
  std::vector<double> a = uniform_values(suite().seed + 11, kSize, 0.5, 2.0);
  std::vector<double> t = uniform_values(suite().seed + 12, kSize, -1.0, 1.0);
  std::vector<double> x0 = uniform_values(suite().seed + 13, kSize, -3.0, 3.0);

  double loss(const std::vector<double>& x) const {
    double sum = 0.0;
    for (int64_t i = 0; i < kSize; ++i) sum += 0.5 * a[i] * (x[i] - t[i]) * (x[i] - t[i]);
    return sum;
  }
  Tensor gradient(Backend& b, const Tensor& x) const {
    std::vector<double> xs = host_values(x), g(kSize);
    for (int64_t i = 0; i < kSize; ++i) g[i] = a[i] * (xs[i] - t[i]);
    return make_tensor(b, x.shape(), x.dtype(), g);
  }
};

// A variable and its slots, as the trainer makes them.
struct Trained {
  std::unique_ptr<Variable> variable;
  std::vector<std::unique_ptr<Variable>> slots;

  std::vector<Variable*> slot_pointers() {
    std::vector<Variable*> out;
    for (auto& s : slots) out.push_back(s.get());
    return out;
  }
  std::vector<std::pair<std::string, Tensor>> tensors() const {
    std::vector<std::pair<std::string, Tensor>> out = {{variable->name(), variable->value()}};
    for (const auto& s : slots) out.emplace_back(s->name(), s->value());
    return out;
  }
};

Trained make_trained(const Optimizer& optimizer, const std::vector<double>& x0) {
  Backend& b = reference_backend();
  Trained t;
  VariableSpec spec;
  spec.name = "quadratic/x";
  spec.shape = Shape{kSize};
  spec.collections = kGlobalVariables | kTrainableVariables | kModelVariables;
  Tensor value = make_tensor(b, spec.shape, DType::kF32, x0);
  value.set_requires_grad(true);
  t.variable = std::make_unique<Variable>(spec, value);
  Generator generator(suite().seed);
  for (const SlotSpec& slot : optimizer.slots()) {
    VariableSpec s;
    s.name = spec.name + "/" + slot.name;
    s.shape = spec.shape;
    s.initializer = slot.initializer;
    s.trainable = false;
    s.collections = kGlobalVariables;
    t.slots.push_back(std::make_unique<Variable>(s, initial_value(b, s, generator)));
  }
  return t;
}

void apply_step(Optimizer& optimizer, Trained& t, const Quadratic& q, double lr, int64_t step) {
  Backend& b = reference_backend();
  Tensor g = q.gradient(b, t.variable->value());
  std::vector<Variable*> slots = t.slot_pointers();
  NoGradScope no_grad;
  guard_plugin_call(optimizer, "apply", [&] { optimizer.apply(*t.variable, g, slots, lr, step); });
}

void check_converges(const ClassInfo& info) {
  Quadratic q;
  const double start = q.loss(q.x0);
  constexpr int kMaxSteps = 3000;
  constexpr double kTarget = 1e-2;  // of the starting loss
  std::ostringstream tried;
  tried << std::setprecision(4);
  for (double lr : {0.1, 0.3, 1.0, 3.0, 10.0, 0.03}) {
    std::shared_ptr<Optimizer> optimizer = create_default<Optimizer>(info);
    Trained t = make_trained(*optimizer, q.x0);
    double loss = start;
    int step = 0;
    for (; step < kMaxSteps && loss > kTarget * start && std::isfinite(loss); ++step) {
      apply_step(*optimizer, t, q, lr, step);
      loss = q.loss(host_values(t.variable->value()));
    }
    tried << "\n  learning rate " << lr << ": loss " << loss << " after " << step << " steps";
    if (loss <= kTarget * start) {
      std::cout << "    converged with learning rate " << lr << " in " << step << " steps\n";
      return;
    }
  }
  ADD_FAILURE() << info.class_name << " does not minimize 1/2 sum a (x - t)^2 over f32[" << kSize
                << "] (start loss " << start << ") to " << kTarget << " of its start within "
                << kMaxSteps << " steps at any learning rate tried:" << tried.str() << "\n"
                << repro_line();
}

void check_undefined_gradient(const ClassInfo& info) {
  std::shared_ptr<Optimizer> optimizer = create_default<Optimizer>(info);
  Quadratic q;
  Trained t = make_trained(*optimizer, q.x0);
  apply_step(*optimizer, t, q, 0.1, 0);  // slots away from their initial values
  auto before = t.tensors();
  std::vector<std::vector<std::byte>> bytes;
  for (const auto& [name, value] : before) bytes.push_back(host_bytes(value));
  std::vector<Variable*> slots = t.slot_pointers();
  {
    NoGradScope no_grad;
    guard_plugin_call(*optimizer, "apply",
                      [&] { optimizer->apply(*t.variable, Tensor(), slots, 0.1, 1); });
  }
  auto after = t.tensors();
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(host_bytes(after[i].second) == bytes[i])
        << info.class_name << ": apply() with an undefined gradient changed '" << after[i].first
        << "' (optimizer.h: it must leave the variable and its slots unchanged)";
  }
}

void check_slots_round_trip(const ClassInfo& info) {
  Backend& b = reference_backend();
  Quadratic q;
  constexpr double kLr = 0.05;
  constexpr int kBefore = 5, kAfter = 5;
  std::shared_ptr<Optimizer> first = create_default<Optimizer>(info);
  std::set<std::string> names;
  for (const SlotSpec& s : first->slots()) {
    EXPECT_FALSE(s.name.empty()) << info.class_name << " declares a slot without a name";
    EXPECT_TRUE(names.insert(s.name).second)
        << info.class_name << " declares slot '" << s.name << "' twice";
  }
  Trained run = make_trained(*first, q.x0);
  for (int step = 0; step < kBefore; ++step) apply_step(*first, run, q, kLr, step);

  fs::path dir = fs::temp_directory_path() /
                 ("trainyard-conformance-" + std::to_string(::getpid()) + "-" + info.class_name);
  fs::remove_all(dir);
  const std::string prefix = (dir / "model.ckpt-5").string();
  write_checkpoint(prefix, run.tensors());

  std::vector<std::vector<std::byte>> uninterrupted;
  std::vector<std::vector<double>> uninterrupted_values;
  for (int step = kBefore; step < kBefore + kAfter; ++step) {
    apply_step(*first, run, q, kLr, step);
    uninterrupted.push_back(host_bytes(run.variable->value()));
    uninterrupted_values.push_back(host_values(run.variable->value()));
  }

  // A new instance, its variable and slots restored from the checkpoint.
  std::shared_ptr<Optimizer> second = create_default<Optimizer>(info);
  Trained resumed = make_trained(*second, std::vector<double>(kSize, 0.0));
  CheckpointReader reader(prefix);
  auto restore = [&](Variable& v) {
    ASSERT_TRUE(reader.contains(v.name())) << "the checkpoint lacks '" << v.name() << "'";
    Tensor value = reader.read(v.name(), b);
    if (v.trainable()) value.set_requires_grad(true);
    v.assign(value);
  };
  restore(*resumed.variable);
  for (auto& s : resumed.slots) restore(*s);
  for (int step = kBefore; step < kBefore + kAfter; ++step) {
    apply_step(*second, resumed, q, kLr, step);
    std::vector<std::byte> got = host_bytes(resumed.variable->value());
    if (got != uninterrupted[step - kBefore]) {
      ADD_FAILURE() << info.class_name << ": after restoring 'quadratic/x' and its "
                    << resumed.slots.size() << " slot(s) from a checkpoint written at step "
                    << kBefore << ", update " << step << " differs from the uninterrupted run's:\n"
                    << compare_values(host_values(resumed.variable->value()),
                                      uninterrupted_values[step - kBefore], 0.0, 0.0)
                    << "(state kept outside the slots is lost in a checkpoint)\n"
                    << repro_line();
      break;
    }
  }
  fs::remove_all(dir);
}

}  // namespace

void register_optimizer_checks(const ClassInfo& info) {
  const std::string suite_name = "Optimizer/" + info.class_name;
  register_check(suite_name, "DeclaredOptionsValid", [info] { check_declared_options(info); });
  register_check(suite_name, "ConvergesOnQuadratic", [info] { check_converges(info); });
  register_check(suite_name, "UndefinedGradientChangesNothing",
                 [info] { check_undefined_gradient(info); });
  register_check(suite_name, "SlotsSavedAndRestored", [info] { check_slots_round_trip(info); });
}

}  // namespace trainyard::conformance
