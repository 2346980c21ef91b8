#include "trainyard/core/learning_rate.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <sstream>
#include <string>

#include "trainyard/error.h"

namespace trainyard {
namespace {

[[noreturn]] void bad_config(const char* schedule, const std::string& message) {
  throw InvalidArgument(std::string(schedule) + ": " + message);
}

std::string str(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

LearningRate::~LearningRate() = default;

// ---------------------------------------------------------------------------------------------

ExponentialDecayExamplesLearningRate::ExponentialDecayExamplesLearningRate(const Config& config)
    : config_(config) {
  constexpr const char* kName = "ExponentialDecayExamplesLearningRate";
  if (config.learning_rate_decay_examples <= 0) {
    bad_config(kName, "learning_rate_decay_examples is " +
                          std::to_string(config.learning_rate_decay_examples) +
                          "; expected a positive number of examples");
  }
  if (config.batch_size <= 0) {
    bad_config(kName, "batch_size is " + std::to_string(config.batch_size) +
                          "; expected the positive number of examples per step");
  }
}

double ExponentialDecayExamplesLearningRate::at(int64_t global_step) const {
  // long double holds step * batch_size exactly (64-bit mantissa), so the floor is exact.
  const long double examples =
      static_cast<long double>(global_step) * static_cast<long double>(config_.batch_size);
  const long double p =
      std::floor(examples / static_cast<long double>(config_.learning_rate_decay_examples));
  return config_.base_learning_rate * std::pow(config_.learning_rate_decay, static_cast<double>(p));
}

// ---------------------------------------------------------------------------------------------

ExponentialDecayLearningRate::ExponentialDecayLearningRate(const Config& config) : config_(config) {
  if (config.decay_steps <= 0) {
    bad_config("ExponentialDecayLearningRate", "decay_steps is " +
                                                   std::to_string(config.decay_steps) +
                                                   "; expected a positive number of steps");
  }
}

double ExponentialDecayLearningRate::at(int64_t global_step) const {
  double rate;
  if (global_step < config_.burnin_steps) {
    rate = config_.burnin_learning_rate == 0.0 ? config_.initial_learning_rate
                                               : config_.burnin_learning_rate;
  } else {
    double p = static_cast<double>(global_step - config_.burnin_steps) /
               static_cast<double>(config_.decay_steps);
    if (config_.staircase) p = std::floor(p);
    rate = config_.initial_learning_rate * std::pow(config_.decay_factor, p);
  }
  return std::max(rate, config_.min_learning_rate);
}

// ---------------------------------------------------------------------------------------------

ManualStepLearningRate::ManualStepLearningRate(const Config& config) : config_(config) {
  constexpr const char* kName = "ManualStepLearningRate";
  const std::vector<int64_t>& b = config.boundaries;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b[i] <= 0) {
      bad_config(
          kName,
          "boundaries[" + std::to_string(i) + "] is " + std::to_string(b[i]) +
              "; boundaries must be positive steps (the API's manual_stepping: \"First step cannot "
              "be zero.\"); the rate before the first boundary is "
              "initial_learning_rate, so leave out a schedule at step 0");
    }
    if (i > 0 && b[i] <= b[i - 1]) {
      bad_config(kName, "boundaries[" + std::to_string(i) + "] (" + std::to_string(b[i]) +
                            ") is not greater than boundaries[" + std::to_string(i - 1) + "] (" +
                            std::to_string(b[i - 1]) + "); boundaries must strictly increase");
    }
  }
  if (config.rates.size() != b.size() + 1) {
    bad_config(kName, "there are " + std::to_string(config.rates.size()) + " rates for " +
                          std::to_string(b.size()) +
                          " boundaries; expected exactly one rate more than boundaries (the "
                          "initial rate, then one per boundary)");
  }
}

double ManualStepLearningRate::at(int64_t global_step) const {
  const std::vector<int64_t>& b = config_.boundaries;
  const std::vector<double>& rates = config_.rates;
  if (config_.warmup && !b.empty() && global_step < b[0]) {
    if (global_step <= 0) return rates[0];
    const double slope = (rates[1] - rates[0]) * 1.0 / static_cast<double>(b[0]);
    return rates[0] + slope * static_cast<double>(global_step);
  }
  // The last boundary reached, as the index into rates.
  const std::size_t index =
      static_cast<std::size_t>(std::upper_bound(b.begin(), b.end(), global_step) - b.begin());
  return rates[index];
}

// ---------------------------------------------------------------------------------------------

CosineDecayLearningRate::CosineDecayLearningRate(const Config& config) : config_(config) {
  constexpr const char* kName = "CosineDecayLearningRate";
  if (config.total_steps < config.warmup_steps) {
    bad_config(kName, "total_steps (" + std::to_string(config.total_steps) +
                          ") is less than warmup_steps (" + std::to_string(config.warmup_steps) +
                          "); total_steps must be larger or equal to warmup_steps");
  }
  if (config.warmup_steps > 0 && config.learning_rate_base < config.warmup_learning_rate) {
    bad_config(kName, "learning_rate_base (" + str(config.learning_rate_base) +
                          ") is less than warmup_learning_rate (" +
                          str(config.warmup_learning_rate) +
                          "); learning_rate_base must be larger or equal to warmup_learning_rate");
  }
}

double CosineDecayLearningRate::at(int64_t global_step) const {
  const Config& c = config_;
  if (global_step > c.total_steps) return 0.0;
  if (c.warmup_steps > 0 && global_step < c.warmup_steps) {
    const double slope =
        (c.learning_rate_base - c.warmup_learning_rate) / static_cast<double>(c.warmup_steps);
    return slope * static_cast<double>(global_step) + c.warmup_learning_rate;
  }
  const int64_t start = c.warmup_steps + c.hold_base_rate_steps;
  if (c.hold_base_rate_steps > 0 && global_step <= start) return c.learning_rate_base;
  const int64_t span = c.total_steps - start;
  if (span == 0) return c.learning_rate_base;
  return 0.5 * c.learning_rate_base *
         (1.0 + std::cos(std::numbers::pi * static_cast<double>(global_step - start) /
                         static_cast<double>(span)));
}

}  // namespace trainyard
