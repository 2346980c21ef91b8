#include "trainyard/variable.h"

#include <cmath>

#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

// Standard deviation of a standard normal truncated to [-2, 2].
constexpr double kTruncatedNormalStddev = 0.87962566103423978;

void fans(const Shape& shape, double* fan_in, double* fan_out) {
  std::size_t rank = shape.rank();
  if (rank == 0) {
    *fan_in = *fan_out = 1;
  } else if (rank == 1) {
    *fan_in = *fan_out = static_cast<double>(shape[0]);
  } else {
    double receptive = 1;
    for (std::size_t i = 0; i + 2 < rank; ++i) receptive *= static_cast<double>(shape[i]);
    *fan_in = static_cast<double>(shape[rank - 2]) * receptive;
    *fan_out = static_cast<double>(shape[rank - 1]) * receptive;
  }
}

// FNV-1a: a stable hash of a variable name, the same on every platform.
uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

Variable::Variable(VariableSpec spec, Tensor value) : spec_(std::move(spec)) {
  assign(std::move(value));
}

void Variable::assign(Tensor value) {
  if (value.shape() != spec_.shape || value.dtype() != spec_.dtype) {
    throw InvalidArgument("variable '" + spec_.name + "' is " + dtype_name(spec_.dtype) +
                          spec_.shape.to_string() + ", cannot assign " + dtype_name(value.dtype()) +
                          value.shape().to_string());
  }
  value_ = std::move(value);
}

Tensor initial_value(Backend& backend, const VariableSpec& spec, Generator& generator) {
  NoGradScope no_grad;
  const Initializer& init = spec.initializer;
  const Shape& shape = spec.shape;
  DType dtype = spec.dtype;
  double fan_in = 1, fan_out = 1;
  fans(shape, &fan_in, &fan_out);
  auto variance_scaled = [&](double scale, Initializer::FanMode mode,
                             Initializer::Distribution distribution) {
    double fan = mode == Initializer::FanMode::kFanIn    ? fan_in
                 : mode == Initializer::FanMode::kFanOut ? fan_out
                                                         : (fan_in + fan_out) / 2.0;
    scale /= std::max(1.0, fan);
    switch (distribution) {
      case Initializer::Distribution::kTruncatedNormal:
        return ops::truncated_normal(backend, shape, generator, 0.0,
                                     std::sqrt(scale) / kTruncatedNormalStddev, dtype);
      case Initializer::Distribution::kUntruncatedNormal:
        return ops::random_normal(backend, shape, generator, 0.0, std::sqrt(scale), dtype);
      case Initializer::Distribution::kUniform: {
        double limit = std::sqrt(3.0 * scale);
        return ops::random_uniform(backend, shape, generator, -limit, limit, dtype);
      }
    }
    throw InvalidArgument("variable '" + spec.name + "': unknown distribution");
  };
  switch (init.kind) {
    case Initializer::Kind::kZeros:
      return ops::zeros(backend, shape, dtype);
    case Initializer::Kind::kConstant:
      return ops::full(backend, shape, init.value, dtype);
    case Initializer::Kind::kUniform:
      return ops::random_uniform(backend, shape, generator, init.minval, init.maxval, dtype);
    case Initializer::Kind::kNormal:
      return ops::random_normal(backend, shape, generator, init.mean, init.stddev, dtype);
    case Initializer::Kind::kTruncatedNormal:
      return ops::truncated_normal(backend, shape, generator, init.mean, init.stddev, dtype);
    case Initializer::Kind::kGlorotUniform:
      return variance_scaled(1.0, Initializer::FanMode::kFanAvg,
                             Initializer::Distribution::kUniform);
    case Initializer::Kind::kGlorotNormal:
      return variance_scaled(1.0, Initializer::FanMode::kFanAvg,
                             Initializer::Distribution::kTruncatedNormal);
    case Initializer::Kind::kVarianceScaling:
      return variance_scaled(init.scale, init.mode, init.distribution);
  }
  throw InvalidArgument("variable '" + spec.name + "': unknown initializer");
}

VariableStore::VariableStore(Backend& backend, uint64_t seed) : backend_(backend), seed_(seed) {}

Variable& VariableStore::get_or_create(const VariableSpec& spec) {
  if (spec.name.empty()) throw InvalidArgument("a variable needs a name");
  if (Variable* existing = find(spec.name)) {
    if (existing->spec().shape != spec.shape || existing->spec().dtype != spec.dtype) {
      throw InvalidArgument("variable '" + spec.name + "' exists as " +
                            dtype_name(existing->spec().dtype) +
                            existing->spec().shape.to_string() + ", requested as " +
                            dtype_name(spec.dtype) + spec.shape.to_string());
    }
    return *existing;
  }
  // Each variable draws from its own stream, keyed by the store's seed and its name, so its
  // initial value does not depend on the order variables are created in.
  Generator generator(seed_ ^ name_hash(spec.name));
  VariableSpec stored = spec;
  if (spec.trainable) stored.collections |= kTrainableVariables;
  stored.collections |= kGlobalVariables;
  Tensor value = initial_value(backend_, stored, generator);
  if (spec.trainable) value.set_requires_grad(true);
  variables_.push_back(std::make_unique<Variable>(stored, value));
  return *variables_.back();
}

Variable* VariableStore::find(const std::string& name) {
  for (auto& v : variables_) {
    if (v->name() == name) return v.get();
  }
  return nullptr;
}

std::vector<Variable*> VariableStore::collection(VariableCollection which) {
  std::vector<Variable*> out;
  for (auto& v : variables_) {
    if ((v->spec().collections & which) != 0) out.push_back(v.get());
  }
  return out;
}

Tensor VariableStore::regularization_loss() {
  Tensor total;
  for (auto& v : variables_) {
    double l2 = v->spec().l2_regularization;
    if (l2 <= 0.0) continue;
    Tensor term = ops::mul(ops::l2_loss(v->value()), l2);
    total = total.defined() ? ops::add(total, term) : term;
  }
  return total;
}

}  // namespace trainyard
