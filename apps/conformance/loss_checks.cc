// Loss checks (loss.h: a scalar, the batch mean of a per-example loss), on the CPU reference:
// the gradient by central differences in f64, values that hold for any label loss (perfect
// predictions cost about nothing, wrong ones more, random ones a finite non-negative amount,
// the batch loss is the mean of the per-example losses, unit label weights change nothing) and
// the shape contract.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "conformance.h"
#include "trainyard/error.h"
#include "trainyard/loss.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard::conformance {
namespace {

constexpr int64_t kBatch = 4;
constexpr int64_t kClasses = 5;

std::vector<double> multi_hot(uint64_t seed) {
  std::vector<double> u = uniform_values(seed, kBatch * kClasses, 0.0, 1.0);
  std::vector<double> y(u.size());
  for (std::size_t i = 0; i < u.size(); ++i) y[i] = u[i] < 0.4 ? 1.0 : 0.0;
  return y;
}

// One positive class per example: a label a perfect prediction can match for any usual loss.
std::vector<double> one_hot_labels() {
  std::vector<double> y(kBatch * kClasses, 0.0);
  for (int64_t r = 0; r < kBatch; ++r) y[r * kClasses + (r * 3 + 1) % kClasses] = 1.0;
  return y;
}

double loss_value(Loss& loss, const std::vector<double>& predictions,
                  const std::vector<double>& labels, int64_t rows = kBatch,
                  const std::optional<std::vector<double>>& weights = std::nullopt) {
  Backend& b = reference_backend();
  Shape shape{rows, kClasses};
  std::optional<Tensor> w;
  if (weights) w = make_tensor(b, shape, DType::kF32, *weights);
  Tensor out = guard_plugin_call(loss, "calculate_loss", [&] {
    return loss.calculate_loss(make_tensor(b, shape, DType::kF32, predictions),
                               make_tensor(b, shape, DType::kF32, labels), w);
  });
  std::vector<double> v = host_values(out);
  if (v.size() != 1) {
    throw InvalidArgument("the loss of " + shape.to_string() + " predictions is " +
                          out.description() + ", expected a scalar");
  }
  return v[0];
}

void check_gradient(const ClassInfo& info) {
  std::shared_ptr<Loss> loss = create_default<Loss>(info);
  Backend& b = reference_backend();
  Tensor predictions = make_tensor(b, Shape{kBatch, kClasses}, DType::kF64,
                                   uniform_values(suite().seed, kBatch * kClasses, 0.05, 0.95));
  Tensor labels = make_tensor(b, Shape{kBatch, kClasses}, DType::kF64, multi_hot(suite().seed));
  auto f = [&](const std::vector<Tensor>& in) {
    return guard_plugin_call(*loss, "calculate_loss",
                             [&] { return loss->calculate_loss(in[0], labels, std::nullopt); });
  };
  try {
    f({predictions});
  } catch (const Error& e) {
    GTEST_SKIP() << info.class_name << " does not take f64 predictions, which the gradient check "
                 << "needs: " << e.what();
  }
  testing::GradCheckOptions options;  // f64 defaults: atol 1e-8, rtol 1e-6
  testing::GradCheckResult result = testing::check_gradients(f, {predictions}, options);
  EXPECT_GT(result.checked, 0u);
  EXPECT_TRUE(result.ok) << info.class_name
                         << ": the gradient that autodiff gives for the predictions differs from "
                            "central differences (f64 predictions [4, 5] in [0.05, 0.95), "
                            "multi-hot labels; max error "
                         << result.max_error << "):\n"
                         << result.report << repro_line();
}

void check_known_values(const ClassInfo& info) {
  std::shared_ptr<Loss> loss = create_default<Loss>(info);

  // Perfect predictions, in each of the encodings a loss may expect, and their opposite.
  std::vector<double> y = one_hot_labels();
  struct Encoding {
    const char* name;
    double positive, negative;
  };
  const Encoding encodings[] = {{"probabilities (1 for the label, 0 elsewhere)", 1.0, 0.0},
                                {"scores (+1 for the label, -1 elsewhere)", 1.0, -1.0},
                                {"logits (+20 for the label, -20 elsewhere)", 20.0, -20.0}};
  std::ostringstream tried;
  bool perfect_found = false;
  for (const Encoding& e : encodings) {
    std::vector<double> perfect(y.size()), wrong(y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      perfect[i] = y[i] != 0.0 ? e.positive : e.negative;
      wrong[i] = y[i] != 0.0 ? e.negative : e.positive;
    }
    double good = loss_value(*loss, perfect, y);
    double bad = loss_value(*loss, wrong, y);
    tried << "\n  " << e.name << ": loss " << good << ", inverted predictions: loss " << bad;
    if (std::abs(good) < 1e-3) {
      perfect_found = true;
      EXPECT_TRUE(std::isfinite(bad) && bad > good + 0.1)
          << info.class_name << ": predictions that are exactly wrong, as " << e.name
          << ", give loss " << bad << ", not clearly more than the perfect ones' " << good;
      break;
    }
  }
  EXPECT_TRUE(perfect_found) << info.class_name
                             << ": no encoding of perfect predictions for one-hot labels gives a "
                                "loss near 0 (|loss| < 1e-3):"
                             << tried.str();

  // Random probabilities: finite and non-negative.
  std::vector<double> p = uniform_values(suite().seed + 1, kBatch * kClasses, 0.05, 0.95);
  std::vector<double> labels = multi_hot(suite().seed + 2);
  double value = loss_value(*loss, p, labels);
  EXPECT_TRUE(std::isfinite(value) && value >= -1e-4)
      << info.class_name << ": random predictions in [0.05, 0.95) give loss " << value
      << "; expected a finite, non-negative value";

  // The batch mean of the per-example losses.
  double mean = 0.0;
  for (int64_t r = 0; r < kBatch; ++r) {
    std::vector<double> pr(p.begin() + r * kClasses, p.begin() + (r + 1) * kClasses);
    std::vector<double> yr(labels.begin() + r * kClasses, labels.begin() + (r + 1) * kClasses);
    mean += loss_value(*loss, pr, yr, 1) / kBatch;
  }
  EXPECT_NEAR(value, mean, 1e-5 + 1e-5 * std::abs(mean))
      << info.class_name << ": the loss of a batch of " << kBatch
      << " is not the mean of the examples' losses (loss.h)";

  // Label weights of ones change nothing.
  std::vector<double> ones(p.size(), 1.0);
  double weighted = loss_value(*loss, p, labels, kBatch, ones);
  EXPECT_NEAR(weighted, value, 1e-6 + 1e-6 * std::abs(value))
      << info.class_name << ": label_weights of all ones change the loss from " << value << " to "
      << weighted;
}

void check_shapes(const ClassInfo& info) {
  std::shared_ptr<Loss> loss = create_default<Loss>(info);
  Backend& b = reference_backend();
  for (int64_t rows : {1, 3}) {
    Tensor p = make_tensor(b, Shape{rows, kClasses}, DType::kF32,
                           uniform_values(suite().seed + rows, rows * kClasses, 0.1, 0.9));
    Tensor y = make_tensor(b, Shape{rows, kClasses}, DType::kF32,
                           std::vector<double>(rows * kClasses, 1.0));
    Tensor out = guard_plugin_call(*loss, "calculate_loss",
                                   [&] { return loss->calculate_loss(p, y, std::nullopt); });
    EXPECT_EQ(out.num_elements(), 1)
        << info.class_name << ": the loss of " << p.description() << " predictions is "
        << out.description() << ", expected a scalar";
    EXPECT_EQ(out.dtype(), p.dtype()) << info.class_name << ": the loss of " << p.description()
                                      << " predictions is " << out.description();
  }
  Tensor p = make_tensor(b, Shape{kBatch, kClasses}, DType::kF32,
                         std::vector<double>(kBatch * kClasses, 0.5));
  Tensor y = make_tensor(b, Shape{kBatch, kClasses + 1}, DType::kF32,
                         std::vector<double>(kBatch * (kClasses + 1), 1.0));
  std::string message;
  try {
    guard_plugin_call(*loss, "calculate_loss",
                      [&] { return loss->calculate_loss(p, y, std::nullopt); });
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << info.class_name << ": predictions " << p.description()
                                << " with labels " << y.description()
                                << " should throw InvalidArgument (loss.h)";
  EXPECT_TRUE(message.find(p.shape().to_string()) != std::string::npos &&
              message.find(y.shape().to_string()) != std::string::npos)
      << info.class_name << ": the InvalidArgument for mismatched shapes should name both "
      << p.shape().to_string() << " and " << y.shape().to_string() << ": " << message;
}

}  // namespace

void register_loss_checks(const ClassInfo& info) {
  const std::string suite_name = "Loss/" + info.class_name;
  register_check(suite_name, "DeclaredOptionsValid", [info] { check_declared_options(info); });
  register_check(suite_name, "GradientCheck", [info] { check_gradient(info); });
  register_check(suite_name, "KnownValues", [info] { check_known_values(info); });
  register_check(suite_name, "ShapeChecks", [info] { check_shapes(info); });
}

}  // namespace trainyard::conformance
