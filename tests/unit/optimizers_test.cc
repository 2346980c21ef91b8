// TensorFlow's optimizers (plugin tf_optimizers), created through the plugin registry, on
// every test backend: TF1's slot names and initial values, and three updates of a variable
// and its slots against TF's update formulas evaluated element by element in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/optimizer.h"
#include "trainyard/testing.h"
#include "trainyard/variable.h"

namespace trainyard {
namespace {

PluginRegistry& registry() { return test::plugin_registry(); }

std::shared_ptr<Optimizer> make_optimizer(const std::string& name,
                                          const std::map<std::string, OptionValue>& options = {}) {
  return registry().create<Optimizer>(ClassKind::kOptimizer, name, options);
}

std::vector<std::string> slot_names(const Optimizer& optimizer) {
  std::vector<std::string> names;
  for (const SlotSpec& s : optimizer.slots()) names.push_back(s.name);
  return names;
}

TEST(OptimizerSlotsTest, NamesAndInitialValuesAreTensorFlowOnes) {
  using Names = std::vector<std::string>;
  EXPECT_EQ(slot_names(*make_optimizer("GradientDescentOptimizer")), Names{});
  EXPECT_EQ(slot_names(*make_optimizer("MomentumOptimizer")), Names{"Momentum"});
  EXPECT_EQ(slot_names(*make_optimizer("AdamOptimizer")), (Names{"Adam", "Adam_1"}));
  EXPECT_EQ(slot_names(*make_optimizer("AdagradOptimizer")), Names{"Adagrad"});
  EXPECT_EQ(slot_names(*make_optimizer("RMSPropOptimizer")), (Names{"RMSProp", "RMSProp_1"}));
  EXPECT_EQ(slot_names(*make_optimizer("RMSPropOptimizer", {{"centered", true}})),
            (Names{"RMSProp", "RMSProp_1", "RMSProp_2"}));
  EXPECT_EQ(slot_names(*make_optimizer("AdadeltaOptimizer")), (Names{"Adadelta", "Adadelta_1"}));
  EXPECT_EQ(slot_names(*make_optimizer("FtrlOptimizer")), (Names{"Ftrl", "Ftrl_1"}));

  auto adagrad = make_optimizer("AdagradOptimizer")->slots();
  EXPECT_EQ(adagrad[0].initializer.kind, Initializer::Kind::kConstant);
  EXPECT_DOUBLE_EQ(adagrad[0].initializer.value, 0.1);
  auto rmsprop = make_optimizer("RMSPropOptimizer")->slots();
  EXPECT_EQ(rmsprop[0].initializer.kind, Initializer::Kind::kConstant);
  EXPECT_DOUBLE_EQ(rmsprop[0].initializer.value, 1.0);  // TF1: the mean square starts at ones
  EXPECT_EQ(rmsprop[1].initializer.kind, Initializer::Kind::kZeros);
  auto ftrl = make_optimizer("FtrlOptimizer")->slots();
  EXPECT_EQ(ftrl[0].initializer.kind, Initializer::Kind::kConstant);
  EXPECT_DOUBLE_EQ(ftrl[0].initializer.value, 0.1);
  EXPECT_EQ(ftrl[1].initializer.kind, Initializer::Kind::kZeros);
}

TEST(OptimizerSlotsTest, BadOptionsAreRejected) {
  EXPECT_THROW(make_optimizer("AdagradOptimizer", {{"initial_accumulator_value", 0.0}}), Error);
  EXPECT_THROW(make_optimizer("FtrlOptimizer", {{"learning_rate_power", 0.5}}), Error);
  EXPECT_THROW(make_optimizer("FtrlOptimizer", {{"l1_regularization_strength", -1.0}}), Error);
  EXPECT_THROW(make_optimizer("AdamOptimizer", {{"beta1", 1.0}}), Error);
}

// One element's variable and slot values, updated by the reference formula.
struct State {
  double w;
  std::vector<double> slots;
};
using Reference = std::function<void(State& s, double g, double lr, int64_t step)>;

const std::vector<double> kInitial = {0.5, -0.3, 0.0, 1.2, -0.7, 0.25};
const std::vector<std::vector<double>> kGradients = {{0.1, -0.4, 0.3, 0.0, 2.0, -0.05},
                                                     {-0.2, -0.1, 0.5, 0.3, -1.5, 0.05},
                                                     {0.3, 0.2, -0.6, -0.1, 0.7, 0.01}};
const std::vector<double> kLearningRates = {0.1, 0.05, 0.2};

class OptimizersTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }

  std::vector<double> values(const Tensor& t) const {
    return t.dtype() == DType::kF64 ? t.to_vector<double>()
                                    : ops::cast(t, DType::kF64).to_vector<double>();
  }

  Tensor tensor(const std::vector<double>& v, DType dtype) const {
    Tensor t = Tensor::from_vector(backend(), Shape{2, 3}, v);
    return dtype == DType::kF64 ? t : ops::cast(t, dtype);
  }

  // Creates "fc/weights" and its slots as the trainer does, checks the slots' initial values,
  // runs three updates and compares the variable and every slot with `reference` after each.
  void check_updates(const std::string& name, const std::map<std::string, OptionValue>& options,
                     const std::vector<double>& initial_slots, const Reference& reference,
                     DType dtype = DType::kF64, double tolerance = 1e-12) {
    SCOPED_TRACE(name);
    auto optimizer = make_optimizer(name, options);
    VariableStore store(backend(), 3);
    VariableSpec spec;
    spec.name = "fc/weights";
    spec.shape = Shape{2, 3};
    spec.dtype = dtype;
    Variable& var = store.get_or_create(spec);
    Tensor w0 = tensor(kInitial, dtype);
    w0.set_requires_grad(true);
    var.assign(w0);

    std::vector<Variable*> slots;
    for (const SlotSpec& slot : optimizer->slots()) {
      VariableSpec s;
      s.name = spec.name + "/" + slot.name;
      s.shape = spec.shape;
      s.dtype = dtype;
      s.initializer = slot.initializer;
      s.trainable = false;
      s.collections = kGlobalVariables;
      slots.push_back(&store.get_or_create(s));
    }
    ASSERT_EQ(slots.size(), initial_slots.size());

    std::vector<State> expected;
    for (double w : kInitial) expected.push_back({w, initial_slots});
    for (std::size_t k = 0; k < slots.size(); ++k) {
      EXPECT_EQ(values(slots[k]->value()), std::vector<double>(6, initial_slots[k]))
          << slots[k]->name() << " starts wrong";
    }

    for (int64_t step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const auto& g = kGradients[static_cast<std::size_t>(step)];
      const double lr = kLearningRates[static_cast<std::size_t>(step)];
      optimizer->apply(var, tensor(g, dtype), std::span<Variable*>(slots), lr, step);
      for (std::size_t i = 0; i < expected.size(); ++i) reference(expected[i], g[i], lr, step);

      std::vector<double> w;
      for (const State& s : expected) w.push_back(s.w);
      EXPECT_EQ(testing::compare_close(values(var.value()), w, tolerance, tolerance), "")
          << "variable";
      for (std::size_t k = 0; k < slots.size(); ++k) {
        std::vector<double> slot;
        for (const State& s : expected) slot.push_back(s.slots[k]);
        EXPECT_EQ(testing::compare_close(values(slots[k]->value()), slot, tolerance, tolerance), "")
            << slots[k]->name();
      }
    }
    EXPECT_TRUE(var.value().requires_grad()) << "the variable stays a trainable leaf";
  }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, OptimizersTest, ::testing::ValuesIn(test::backend_names()),
                         backend_test_name);

TEST_P(OptimizersTest, GradientDescent) {
  check_updates("GradientDescentOptimizer", {}, {},
                [](State& s, double g, double lr, int64_t) { s.w -= lr * g; });
}

TEST_P(OptimizersTest, Momentum) {
  check_updates("MomentumOptimizer", {}, {0.0}, [](State& s, double g, double lr, int64_t) {
    s.slots[0] = 0.9 * s.slots[0] + g;
    s.w -= lr * s.slots[0];
  });
  check_updates("MomentumOptimizer", {{"momentum", 0.5}, {"use_nesterov", true}}, {0.0},
                [](State& s, double g, double lr, int64_t) {
                  s.slots[0] = 0.5 * s.slots[0] + g;
                  s.w -= lr * (g + 0.5 * s.slots[0]);
                });
}

void adam_reference(State& s, double g, double lr, int64_t step, double b1, double b2, double eps) {
  const double t = static_cast<double>(step + 1);
  double& m = s.slots[0];
  double& v = s.slots[1];
  m += (g - m) * (1 - b1);
  v += (g * g - v) * (1 - b2);
  const double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
  s.w -= lr_t * m / (std::sqrt(v) + eps);
}

TEST_P(OptimizersTest, Adam) {
  check_updates("AdamOptimizer", {}, {0.0, 0.0}, [](State& s, double g, double lr, int64_t t) {
    adam_reference(s, g, lr, t, 0.9, 0.999, 1e-8);
  });
  check_updates(
      "AdamOptimizer", {{"beta1", 0.5}, {"beta2", 0.9}, {"epsilon", 0.1}}, {0.0, 0.0},
      [](State& s, double g, double lr, int64_t t) { adam_reference(s, g, lr, t, 0.5, 0.9, 0.1); });
  // The fused f32 kernel, within float rounding.
  check_updates(
      "AdamOptimizer", {}, {0.0, 0.0},
      [](State& s, double g, double lr, int64_t t) {
        adam_reference(s, g, lr, t, 0.9, 0.999, 1e-8);
      },
      DType::kF32, 1e-5);
}

TEST_P(OptimizersTest, AdamFirstStepMovesByTheLearningRate) {
  // Bias correction at t = 1: the update is lr * g / (|g| + eps / sqrt(1 - b2)), about lr.
  auto adam = make_optimizer("AdamOptimizer");
  VariableStore store(backend(), 1);
  VariableSpec spec;
  spec.name = "w";
  spec.shape = Shape{2, 3};
  spec.dtype = DType::kF64;
  Variable& var = store.get_or_create(spec);
  std::vector<Variable*> slots;
  for (const SlotSpec& slot : adam->slots()) {
    VariableSpec s = spec;
    s.name = "w/" + slot.name;
    s.trainable = false;
    slots.push_back(&store.get_or_create(s));
  }
  adam->apply(var, tensor({1, -2, 3, -4, 5, -6}, DType::kF64), std::span<Variable*>(slots), 0.01,
              0);
  EXPECT_EQ(
      testing::compare_close(values(var.value()),
                             std::vector<double>{-0.01, 0.01, -0.01, 0.01, -0.01, 0.01}, 1e-8, 0),
      "");
}

TEST_P(OptimizersTest, Adagrad) {
  check_updates("AdagradOptimizer", {}, {0.1}, [](State& s, double g, double lr, int64_t) {
    s.slots[0] += g * g;
    s.w -= g * lr / std::sqrt(s.slots[0]);
  });
  check_updates("AdagradOptimizer", {{"initial_accumulator_value", 2.5}}, {2.5},
                [](State& s, double g, double lr, int64_t) {
                  s.slots[0] += g * g;
                  s.w -= g * lr / std::sqrt(s.slots[0]);
                });
}

Reference rmsprop_reference(double rho, double momentum, double eps, bool centered) {
  return [=](State& s, double g, double lr, int64_t) {
    double& ms = s.slots[0];
    double& mom = s.slots.back();
    ms += (g * g - ms) * (1 - rho);
    double denominator = ms;
    if (centered) {
      double& mg = s.slots[1];
      mg += (g - mg) * (1 - rho);
      denominator = ms - mg * mg;
    }
    mom = mom * momentum + g * lr / std::sqrt(denominator + eps);
    s.w -= mom;
  };
}

TEST_P(OptimizersTest, RMSProp) {
  check_updates("RMSPropOptimizer", {}, {1.0, 0.0}, rmsprop_reference(0.9, 0.0, 1e-10, false));
  check_updates("RMSPropOptimizer", {{"decay", 0.8}, {"momentum", 0.5}, {"epsilon", 1e-3}},
                {1.0, 0.0}, rmsprop_reference(0.8, 0.5, 1e-3, false));
  check_updates("RMSPropOptimizer", {{"momentum", 0.5}, {"centered", true}}, {1.0, 0.0, 0.0},
                rmsprop_reference(0.9, 0.5, 1e-10, true));
}

// TF's f32 kernel, element by element: each operation rounded to f32 in TF's order, the
// scalars rounded first and 1 - decay computed in f32.
Reference rmsprop_reference_f32(float rho, float momentum, float eps, bool centered) {
  return [=](State& s, double g64, double lr64, int64_t) {
    const float g = static_cast<float>(g64), lr = static_cast<float>(lr64);
    float w = static_cast<float>(s.w), ms = static_cast<float>(s.slots[0]);
    float mom = static_cast<float>(s.slots.back());
    ms += (g * g - ms) * (1.0f - rho);
    float denominator = ms;
    if (centered) {
      float mg = static_cast<float>(s.slots[1]);
      mg += (g - mg) * (1.0f - rho);
      denominator = ms - mg * mg;
      s.slots[1] = mg;
    }
    mom = mom * momentum + (g * lr) / std::sqrt(denominator + eps);
    w -= mom;
    s.w = w;
    s.slots[0] = ms;
    s.slots.back() = mom;
  };
}

// The OD API's SSD settings (rms_prop_optimizer: decay 0.9, momentum 0.9, epsilon 1.0) in f32:
// bit for bit TF's kernel on the CPU kernel's backends, to f32 rounding on the others.
TEST_P(OptimizersTest, RMSPropInF32IsTensorFlowsKernel) {
  const bool cpu_kernel = GetParam() == "cpu" || GetParam() == "opaque";
  const double tolerance = cpu_kernel ? 0.0 : 1e-6;
  check_updates("RMSPropOptimizer", {{"decay", 0.9}, {"momentum", 0.9}, {"epsilon", 1.0}},
                {1.0, 0.0}, rmsprop_reference_f32(0.9f, 0.9f, 1.0f, false), DType::kF32, tolerance);
  check_updates("RMSPropOptimizer", {{"momentum", 0.5}, {"epsilon", 1e-3}, {"centered", true}},
                {1.0, 0.0, 0.0}, rmsprop_reference_f32(0.9f, 0.5f, 1e-3f, true), DType::kF32,
                tolerance);
}

TEST_P(OptimizersTest, Adadelta) {
  auto reference = [](double rho, double eps) {
    return [=](State& s, double g, double lr, int64_t) {
      double& accum = s.slots[0];
      double& accum_update = s.slots[1];
      accum = accum * rho + g * g * (1 - rho);
      const double update = std::sqrt(accum_update + eps) / std::sqrt(accum + eps) * g;
      s.w -= update * lr;
      accum_update = accum_update * rho + update * update * (1 - rho);
    };
  };
  check_updates("AdadeltaOptimizer", {}, {0.0, 0.0}, reference(0.95, 1e-8));
  check_updates("AdadeltaOptimizer", {{"rho", 0.5}, {"epsilon", 1e-2}}, {0.0, 0.0},
                reference(0.5, 1e-2));
}

Reference ftrl_reference(double lr_power, double l1, double l2, double l2_shrinkage) {
  return [=](State& s, double g, double lr, int64_t) {
    double& accum = s.slots[0];
    double& linear = s.slots[1];
    auto power = [&](double a) { return lr_power == -0.5 ? std::sqrt(a) : std::pow(a, -lr_power); };
    const double shrunk = g + 2 * l2_shrinkage * s.w;
    const double new_accum = accum + g * g;
    linear += shrunk - (power(new_accum) - power(accum)) / lr * s.w;
    const double x = l1 * (linear > 0 ? 1 : linear < 0 ? -1 : 0) - linear;
    const double y = power(new_accum) / lr + 2 * l2;
    s.w = std::abs(linear) > l1 ? x / y : 0.0;
    accum = new_accum;
  };
}

TEST_P(OptimizersTest, Ftrl) {
  check_updates("FtrlOptimizer", {}, {0.1, 0.0}, ftrl_reference(-0.5, 0, 0, 0));
  check_updates("FtrlOptimizer",
                {{"learning_rate_power", -0.25},
                 {"initial_accumulator_value", 0.5},
                 {"l1_regularization_strength", 0.05},
                 {"l2_regularization_strength", 0.1},
                 {"l2_shrinkage_regularization_strength", 0.01}},
                {0.5, 0.0}, ftrl_reference(-0.25, 0.05, 0.1, 0.01));
  check_updates("FtrlOptimizer", {{"l1_regularization_strength", 1.0}}, {0.1, 0.0},
                ftrl_reference(-0.5, 1.0, 0, 0));
}

TEST_P(OptimizersTest, FtrlL1ZeroesWeightsWithSmallLinearTerms) {
  auto ftrl = make_optimizer("FtrlOptimizer", {{"l1_regularization_strength", 100.0}});
  VariableStore store(backend(), 1);
  VariableSpec spec;
  spec.name = "w";
  spec.shape = Shape{2, 3};
  spec.dtype = DType::kF64;
  Variable& var = store.get_or_create(spec);
  var.assign(tensor(kInitial, DType::kF64));
  std::vector<Variable*> slots;
  for (const SlotSpec& slot : ftrl->slots()) {
    VariableSpec s = spec;
    s.name = "w/" + slot.name;
    s.initializer = slot.initializer;
    slots.push_back(&store.get_or_create(s));
  }
  ftrl->apply(var, tensor(kGradients[0], DType::kF64), std::span<Variable*>(slots), 0.1, 0);
  EXPECT_EQ(values(var.value()), std::vector<double>(6, 0.0));
}

TEST_P(OptimizersTest, UndefinedGradientLeavesVariableAndSlotsUnchanged) {
  for (const char* name :
       {"GradientDescentOptimizer", "AdamOptimizer", "RMSPropOptimizer", "FtrlOptimizer"}) {
    SCOPED_TRACE(name);
    auto optimizer = make_optimizer(name);
    VariableStore store(backend(), 1);
    VariableSpec spec;
    spec.name = "w";
    spec.shape = Shape{2, 3};
    spec.dtype = DType::kF64;
    Variable& var = store.get_or_create(spec);
    var.assign(tensor(kInitial, DType::kF64));
    std::vector<Variable*> slots;
    std::vector<std::vector<double>> before;
    for (const SlotSpec& slot : optimizer->slots()) {
      VariableSpec s = spec;
      s.name = "w/" + slot.name;
      s.initializer = slot.initializer;
      slots.push_back(&store.get_or_create(s));
      before.push_back(values(slots.back()->value()));
    }
    optimizer->apply(var, Tensor(), std::span<Variable*>(slots), 0.1, 0);
    EXPECT_EQ(values(var.value()), kInitial);
    for (std::size_t k = 0; k < slots.size(); ++k) {
      EXPECT_EQ(values(slots[k]->value()), before[k]);
    }
  }
}

TEST_P(OptimizersTest, WrongSlotsNameTheVariableAndTheExpectedSlots) {
  auto adam = make_optimizer("AdamOptimizer");
  VariableStore store(backend(), 1);
  VariableSpec spec;
  spec.name = "tower/fc/weights";
  spec.shape = Shape{2, 3};
  spec.dtype = DType::kF64;
  Variable& var = store.get_or_create(spec);
  std::vector<Variable*> one = {&var};
  try {
    adam->apply(var, tensor(kGradients[0], DType::kF64), std::span<Variable*>(one), 0.1, 0);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("AdamOptimizer"), std::string::npos) << message;
    EXPECT_NE(message.find("tower/fc/weights"), std::string::npos) << message;
    EXPECT_NE(message.find("Adam, Adam_1"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace trainyard
