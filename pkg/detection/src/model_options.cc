#include "trainyard/pkg/detection/model_options.h"

#include <cmath>
#include <string>

#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard::detection {

layers::Conv2DOptions conv_options(const ConvHyperparams& h, bool training_allowed) {
  layers::Conv2DOptions o;
  o.activation_fn = h.activation;
  o.weights_initializer = h.initializer;
  o.weights_l2 = h.l2_weight;
  if (h.batch_norm) {
    o.normalizer = *h.batch_norm;
    if (!training_allowed) o.normalizer->is_training = false;
  }
  return o;
}

std::vector<float> host_f32(const Tensor& t) {
  return t.dtype() == DType::kF32 ? t.to_vector<float>()
                                  : ops::cast(t, DType::kF32).to_vector<float>();
}

const Tensor& prediction_entry(const TensorDict& dict, const char* key, const char* call,
                               const char* model) {
  auto it = dict.find(key);
  if (it == dict.end()) {
    throw InvalidArgument(std::string(model) + ": " + call + " needs '" + key +
                          "' in the prediction dict (from predict())");
  }
  return it->second;
}

void DetectionOptionReader::refuse(const std::string& option, const std::string& value,
                                   const std::string& expected) const {
  throw InvalidArgument(model_ + ": " + option + " is '" + value + "'; " + expected);
}

std::string DetectionOptionReader::choice(const std::string& key,
                                          std::initializer_list<const char*> supported) const {
  const std::string& v = o_.get_string(key);
  std::string list;
  for (const char* s : supported) {
    if (v == s) return v;
    list += (list.empty() ? "" : ", ") + std::string(s);
  }
  refuse(key, v, "supported: " + list);
}

double DetectionOptionReader::positive(const std::string& key) const {
  const double v = o_.get_float(key);
  if (!(v > 0.0)) refuse(key, option_value_to_string(v), "expected > 0");
  return v;
}

double DetectionOptionReader::unit_interval(const std::string& key) const {
  const double v = o_.get_float(key);
  if (!(v >= 0.0 && v <= 1.0)) refuse(key, option_value_to_string(v), "expected [0, 1]");
  return v;
}

int64_t DetectionOptionReader::at_least(const std::string& key, int64_t minimum) const {
  const int64_t v = o_.get_int(key);
  if (v < minimum) refuse(key, std::to_string(v), "expected >= " + std::to_string(minimum));
  return v;
}

double DetectionOptionReader::positive_at_most(const std::string& key, double maximum) const {
  const double v = o_.get_float(key);
  if (!(v > 0.0 && v <= maximum)) {
    refuse(key, option_value_to_string(v),
           "expected > 0 and <= " + option_value_to_string(maximum));
  }
  return v;
}

int64_t DetectionOptionReader::in_range(const std::string& key, int64_t minimum,
                                        int64_t maximum) const {
  const int64_t v = o_.get_int(key);
  if (v < minimum || v > maximum) {
    refuse(key, std::to_string(v),
           "expected >= " + std::to_string(minimum) + " and <= " + std::to_string(maximum));
  }
  return v;
}

std::vector<double> DetectionOptionReader::positive_list(const std::string& key) const {
  const std::vector<double> values = o_.get_float_list(key);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!(std::isfinite(values[i]) && values[i] > 0.0)) {
      // Indexed as the config writes a repeated field, so the error can name its line.
      refuse(key + "[" + std::to_string(i) + "]", option_value_to_string(values[i]),
             "every value must be finite and > 0");
    }
  }
  return values;
}

std::optional<ConvHyperparams> DetectionOptionReader::hyperparams(const std::string& prefix,
                                                                  const std::string& op) const {
  if (!o_.get_bool(prefix)) return std::nullopt;
  ConvHyperparams h;
  if (choice(prefix + ".op", {"CONV", "FC"}) != op) {
    refuse(prefix + ".op", o_.get_string(prefix + ".op"), "this layer is " + op);
  }
  const std::string activation = choice(prefix + ".activation", {"NONE", "RELU", "RELU_6"});
  if (activation == "NONE") {
    h.activation = layers::ActivationFn::none();
  } else if (activation == "RELU") {
    h.activation = layers::ActivationFn::relu();
  } else {
    h.activation = layers::ActivationFn::relu6();
  }
  if (choice(prefix + ".regularizer", {"l2_regularizer", "l1_regularizer"}) == "l1_regularizer") {
    throw Unimplemented(model_ + ": " + prefix +
                        ".regularizer l1_regularizer is not supported; use l2_regularizer");
  }
  // hyperparams_builder: slim.l2_regularizer(scale=float(weight)), w * sum(x^2) / 2, as
  // VariableSpec::l2_regularization.
  h.l2_weight = o_.get_float(prefix + ".regularizer.l2_regularizer.weight");
  const std::string init =
      choice(prefix + ".initializer", {"truncated_normal_initializer", "random_normal_initializer",
                                       "variance_scaling_initializer"});
  const std::string at = prefix + ".initializer." + init;
  if (init == "truncated_normal_initializer") {
    h.initializer =
        layers::truncated_normal_initializer(o_.get_float(at + ".mean"), positive(at + ".stddev"));
  } else if (init == "random_normal_initializer") {
    h.initializer =
        layers::random_normal_initializer(o_.get_float(at + ".mean"), positive(at + ".stddev"));
  } else {
    const std::string mode = choice(at + ".mode", {"FAN_IN", "FAN_OUT", "FAN_AVG"});
    h.initializer = Initializer::variance_scaling(
        positive(at + ".factor"),
        mode == "FAN_IN"    ? Initializer::FanMode::kFanIn
        : mode == "FAN_OUT" ? Initializer::FanMode::kFanOut
                            : Initializer::FanMode::kFanAvg,
        o_.get_bool(at + ".uniform") ? Initializer::Distribution::kUniform
                                     : Initializer::Distribution::kTruncatedNormal);
  }
  if (o_.get_bool(prefix + ".batch_norm")) {
    layers::BatchNormOptions bn;
    bn.decay = unit_interval(prefix + ".batch_norm.decay");
    bn.center = o_.get_bool(prefix + ".batch_norm.center");
    bn.scale = o_.get_bool(prefix + ".batch_norm.scale");
    bn.epsilon = positive(prefix + ".batch_norm.epsilon");
    // hyperparams_builder: batch_norm.train false makes beta and gamma untrainable and the
    // layer run in inference mode.
    if (!o_.get_bool(prefix + ".batch_norm.train")) {
      bn.trainable = false;
      bn.is_training = false;
    }
    h.batch_norm = bn;
  }
  return h;
}

}  // namespace trainyard::detection
