// Test utilities for Trainyard and for plugin authors: a gradient checker by central
// differences, closeness checks with per-output tolerances, and FakeModelContext, which runs a
// model or a layer without the trainer. Header-only; needs only the SDK and libtrainyard_core
// (no test framework).
//
// check_gradients(f, inputs) puts a fixed random projection on top of f (loss = sum(w * f(x)),
// as Caffe's GradientChecker puts an L2 loss on a layer), compares the gradient that autodiff
// gives with (loss(x + h) - loss(x - h)) / 2h for every input element, and reports every
// element where |analytic - numeric| > atol + rtol * |numeric|. Run it in f64: with f32 the
// differences are dominated by rounding. Elements within `kink_range` of a point in `kinks`
// (ReLU's 0, ReLU6's 0 and 6, clip bounds) are skipped, since the derivative is not defined
// there.
#ifndef TRAINYARD_TESTING_H_
#define TRAINYARD_TESTING_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/tensor.h"
#include "trainyard/variable.h"

namespace trainyard::testing {

// The defaults suit f64: with step 1e-6 the central difference is off by about 1e-9
// (truncation ~ step^2, rounding ~ 1e-16 / step), so a wrong gradient shows far above them.
struct GradCheckOptions {
  double step = 1e-6;
  double atol = 1e-8;
  double rtol = 1e-6;
  std::vector<double> kinks;
  double kink_range = 1e-3;
  uint64_t projection_seed = 1701;
  std::size_t max_reported = 8;
};

struct GradCheckResult {
  bool ok = true;
  std::size_t checked = 0;
  std::size_t skipped = 0;
  double max_error = 0.0;
  std::string report;  // one line per mismatch: input, element, analytic, numeric
};

using TensorFunction = std::function<Tensor(const std::vector<Tensor>& inputs)>;

// `inputs` must be f64 tensors on one backend; they are not modified.
inline GradCheckResult check_gradients(const TensorFunction& f, const std::vector<Tensor>& inputs,
                                       const GradCheckOptions& options = {}) {
  GradCheckResult result;
  std::vector<std::vector<double>> values;
  for (const Tensor& t : inputs) values.push_back(t.to_vector<double>());
  Backend& backend = inputs.at(0).backend();

  auto make_inputs = [&](bool requires_grad) {
    std::vector<Tensor> made;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      Tensor t = Tensor::from_vector(backend, inputs[i].shape(), values[i]);
      if (requires_grad) t.set_requires_grad(true);
      made.push_back(t);
    }
    return made;
  };

  std::vector<Tensor> leaves = make_inputs(true);
  Tensor y = f(leaves);
  Generator generator(options.projection_seed);
  Tensor w = ops::random_uniform(backend, y.shape(), generator, 0.5, 1.5, y.dtype());
  Tensor loss = ops::reduce_sum(ops::mul(y, w));
  std::vector<Tensor> analytic = gradients(loss, leaves);
  std::vector<double> w_host = w.to_vector<double>();

  auto evaluate = [&]() {
    NoGradScope no_grad;
    std::vector<Tensor> plain = make_inputs(false);
    std::vector<double> out = f(plain).to_vector<double>();
    double sum = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) sum += out[i] * w_host[i];
    return sum;
  };

  std::ostringstream report;
  std::size_t reported = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<double> grad = analytic[i].defined() ? analytic[i].to_vector<double>()
                                                     : std::vector<double>(values[i].size(), 0.0);
    for (std::size_t j = 0; j < values[i].size(); ++j) {
      double x = values[i][j];
      bool near_kink = false;
      for (double k : options.kinks) near_kink |= std::abs(x - k) < options.kink_range;
      if (near_kink) {
        ++result.skipped;
        continue;
      }
      values[i][j] = x + options.step;
      double plus = evaluate();
      values[i][j] = x - options.step;
      double minus = evaluate();
      values[i][j] = x;
      double numeric = (plus - minus) / (2.0 * options.step);
      double error = std::abs(grad[j] - numeric);
      result.max_error = std::max(result.max_error, error);
      ++result.checked;
      if (!(error <= options.atol + options.rtol * std::abs(numeric))) {
        result.ok = false;
        if (reported++ < options.max_reported) {
          report << "input " << i << " element " << j << " (x = " << x << "): analytic " << grad[j]
                 << ", numeric " << numeric << "\n";
        }
      }
    }
  }
  result.report = report.str();
  return result;
}

// Element-wise closeness: |actual - expected| <= atol + rtol * |expected|; NaN matches NaN.
// Returns "" when close, else a description of the first mismatches.
template <class T>
std::string compare_close(const std::vector<T>& actual, const std::vector<T>& expected, double atol,
                          double rtol, std::size_t max_reported = 5) {
  if (actual.size() != expected.size()) {
    return "sizes differ: " + std::to_string(actual.size()) + " vs " +
           std::to_string(expected.size());
  }
  std::ostringstream out;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    double a = static_cast<double>(actual[i]), e = static_cast<double>(expected[i]);
    bool close =
        (std::isnan(a) && std::isnan(e)) || a == e || std::abs(a - e) <= atol + rtol * std::abs(e);
    if (!close && bad++ < max_reported) {
      out << "element " << i << ": got " << a << ", expected " << e << "\n";
    }
  }
  if (bad > 0) out << bad << " of " << actual.size() << " elements differ\n";
  return out.str();
}

// What the trainer gives a model, for tests: the variables in a VariableStore, as the trainer
// keeps them (created once per name with their initializer, drawn from `initializer_seed` and
// the name; trainable ones require gradients), a backend, a class count, and a seed for the
// model's own randomness that the test sets (the trainer changes it every step). `backend`
// must outlive the context. Not thread-safe.
class FakeModelContext final : public ModelContext {
 public:
  explicit FakeModelContext(Backend& backend, int64_t num_classes = 2, uint64_t seed = 0,
                            uint64_t initializer_seed = 1234)
      : store_(backend, initializer_seed), num_classes_(num_classes), seed_(seed) {}

  Backend& backend() override { return store_.backend(); }
  int64_t num_classes() const override { return num_classes_; }
  Variable& variable(const VariableSpec& spec) override { return store_.get_or_create(spec); }
  uint64_t seed() const override { return seed_; }

  void set_num_classes(int64_t num_classes) { num_classes_ = num_classes; }
  void set_seed(uint64_t seed) { seed_ = seed; }
  VariableStore& store() { return store_; }

  // The variable named `name`, or null.
  Variable* find(const std::string& name) { return store_.find(name); }
  // The variable named `name`; throws InvalidArgument naming it and the variables there are.
  Variable& at(const std::string& name) {
    if (Variable* v = store_.find(name)) return *v;
    std::string known;
    for (const std::string& n : variable_names()) known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgument("FakeModelContext: no variable '" + name +
                          "'; the model created: " + (known.empty() ? std::string("none") : known));
  }
  // Every variable's name, in creation order.
  std::vector<std::string> variable_names() {
    std::vector<std::string> names;
    for (Variable* v : store_.collection(kGlobalVariables)) names.push_back(v->name());
    return names;
  }
  // Sets the variable `name` to `values` (row-major, its shape), cast to its dtype, keeping
  // trainable variables differentiable.
  void set_value(const std::string& name, const std::vector<double>& values) {
    Variable& v = at(name);
    Tensor t = Tensor::from_vector(backend(), v.spec().shape, values);
    if (v.spec().dtype != DType::kF64) t = ops::cast(t, v.spec().dtype);
    t.set_requires_grad(v.trainable());
    v.assign(t);
  }
  // The variable's value as doubles.
  std::vector<double> values(const std::string& name) {
    NoGradScope no_grad;
    const Tensor& t = at(name).value();
    return t.dtype() == DType::kF64 ? t.to_vector<double>()
                                    : ops::cast(t, DType::kF64).to_vector<double>();
  }

 private:
  VariableStore store_;
  int64_t num_classes_;
  uint64_t seed_;
};

}  // namespace trainyard::testing

#endif  // TRAINYARD_TESTING_H_
