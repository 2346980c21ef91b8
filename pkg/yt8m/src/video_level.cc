#include "trainyard/pkg/yt8m/video_level.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"

namespace trainyard::yt8m {
namespace {

void check_input(const char* function, const Tensor& x, int64_t num_classes) {
  if (x.shape().rank() != 2) {
    throw InvalidArgument(std::string(function) + ": the input is " + x.description() +
                          "; expected [batch, features]");
  }
  if (num_classes <= 0) {
    throw InvalidArgument(std::string(function) + ": num_classes is " +
                          std::to_string(num_classes) + "; expected > 0");
  }
}

// slim.fully_connected(num_outputs, activation_fn=None, weights_regularizer=l2, biases or not).
layers::FullyConnectedOptions linear(const char* scope, double l2, bool biases) {
  layers::FullyConnectedOptions options;
  options.activation_fn = layers::ActivationFn::none();
  options.weights_l2 = l2;
  if (!biases) options.biases_initializer = std::nullopt;
  options.scope = scope;
  return options;
}

// slim.batch_norm(center=True, scale=True, scope=name) in the scope's mode.
Tensor batch_norm_scaled(layers::VariableScope& scope, const Tensor& x, const char* name) {
  layers::BatchNormOptions bn;
  bn.center = true;
  bn.scale = true;
  bn.scope = name;
  return layers::batch_norm(scope, x, bn);
}

// tf.matrix_diag_part of a square [D, D] matrix -> [D].
Tensor diagonal(const Tensor& w) {
  const int64_t d = w.shape()[0];
  std::vector<int32_t> at(static_cast<std::size_t>(d));
  for (int64_t i = 0; i < d; ++i) at[static_cast<std::size_t>(i)] = static_cast<int32_t>(i * d + i);
  return ops::gather(ops::reshape(w, Shape{d * d}), Tensor::from_vector(w.backend(), Shape{d}, at),
                     0);
}

// A [rows, cols] variable drawn from N(0, stddev^2), not regularized.
Tensor normal_weights(layers::VariableScope& scope, const char* name, int64_t rows, int64_t cols,
                      double stddev, DType dtype) {
  VariableSpec spec;
  spec.name = name;
  spec.dtype = dtype;
  spec.shape = Shape{rows, cols};
  spec.initializer = layers::random_normal_initializer(0.0, stddev);
  return scope.variable(spec).value();
}

}  // namespace

Tensor logistic_model(layers::VariableScope& scope, const Tensor& x, int64_t num_classes,
                      double l2_penalty, const std::string& layer_scope) {
  check_input("logistic_model", x, num_classes);
  layers::FullyConnectedOptions options = linear("", l2_penalty, true);
  options.activation_fn = layers::ActivationFn::sigmoid();
  options.scope = layer_scope;
  return layers::fully_connected(scope, x, num_classes, options);
}

Tensor moe_model(layers::VariableScope& scope, const Tensor& x, int64_t num_classes,
                 const MoeOptions& options) {
  check_input("moe_model", x, num_classes);
  const int64_t m = options.num_mixtures;
  if (m <= 0) {
    throw InvalidArgument("moe_model: moe_num_mixtures is " + std::to_string(m) +
                          "; expected at least one expert");
  }
  if (options.prob_gating && options.prob_gating_input != "prob" &&
      options.prob_gating_input != "input") {
    throw InvalidArgument("moe_model: moe_prob_gating_input is '" + options.prob_gating_input +
                          "'; expected 'prob' or 'input'");
  }
  const double l2 = options.l2_penalty;

  Tensor gate_activations;
  if (options.low_rank_gating <= 0) {
    gate_activations =
        layers::fully_connected(scope, x, num_classes * (m + 1), linear("gates", l2, false));
  } else {
    Tensor low =
        layers::fully_connected(scope, x, options.low_rank_gating, linear("gates1", l2, false));
    gate_activations =
        layers::fully_connected(scope, low, num_classes * (m + 1), linear("gates2", l2, false));
  }
  Tensor expert_activations =
      layers::fully_connected(scope, x, num_classes * m, linear("experts", l2, true));

  Tensor probabilities =
      ops::reshape(ops::moe_mixture(ops::reshape(gate_activations, Shape{-1, m + 1}),
                                    ops::reshape(expert_activations, Shape{-1, m})),
                   Shape{-1, num_classes});

  if (options.prob_gating) {
    const bool from_prob = options.prob_gating_input == "prob";
    const Tensor& input = from_prob ? probabilities : x;
    Tensor w = normal_weights(scope, "gating_prob_weights", input.shape()[1], num_classes,
                              1.0 / std::sqrt(static_cast<double>(num_classes)), input.dtype());
    Tensor gates = ops::matmul(input, w);
    if (options.remove_diag) {
      // The original takes the diagonal of W even when W is [D, C]; it needs D == C there.
      if (w.shape()[0] != w.shape()[1]) {
        throw InvalidArgument(
            "moe_model: gating_remove_diag needs a square gating_prob_weights, "
            "but it is " +
            w.description() + " (moe_prob_gating_input 'input')");
      }
      gates = ops::sub(gates, ops::mul(diagonal(w), probabilities));
    }
    gates = batch_norm_scaled(scope, gates, "gating_prob_bn");
    probabilities = ops::mul(probabilities, ops::sigmoid(gates));
  }
  return probabilities;
}

Tensor context_gating(layers::VariableScope& scope, const Tensor& x, bool remove_diag,
                      bool add_batch_norm, int64_t bias_stddev_fan) {
  if (x.shape().rank() != 2) {
    throw InvalidArgument("context_gating: the input is " + x.description() +
                          "; expected [batch, features]");
  }
  const int64_t d = x.shape()[1];
  Tensor w = normal_weights(scope, "gating_weights_2", d, d,
                            1.0 / std::sqrt(static_cast<double>(d)), x.dtype());
  Tensor gates = ops::matmul(x, w);
  if (remove_diag) gates = ops::sub(gates, ops::mul(diagonal(w), x));
  if (add_batch_norm) {
    gates = batch_norm_scaled(scope, gates, "gating_bn");
  } else {
    VariableSpec spec;
    spec.name = "gating_biases";
    spec.shape = Shape{d};
    spec.dtype = x.dtype();
    spec.initializer = layers::random_normal_initializer(
        0.0, 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(bias_stddev_fan, 1))));
    gates = ops::add(gates, scope.variable(spec).value());
  }
  return ops::mul(x, ops::sigmoid(gates));
}

namespace {

[[noreturn]] void bad_option(std::string_view model, std::string_view option,
                             const OptionValue& value, std::string_view expected) {
  throw InvalidArgument(std::string(model) + ": " + std::string(option) + " is " +
                        option_value_to_string(value) + "; expected " + std::string(expected));
}

}  // namespace

MoeOptions moe_options(std::string_view model, const Options& options) {
  MoeOptions o;
  o.num_mixtures = options.get_int("moe_num_mixtures");
  if (o.num_mixtures <= 0) bad_option(model, "moe_num_mixtures", o.num_mixtures, "a value > 0");
  o.l2_penalty = options.get_float("moe_l2");
  if (!(o.l2_penalty >= 0.0)) bad_option(model, "moe_l2", o.l2_penalty, "a value >= 0");
  o.low_rank_gating = options.get_int("moe_low_rank_gating");
  if (o.low_rank_gating != -1 && o.low_rank_gating <= 0) {
    bad_option(model, "moe_low_rank_gating", o.low_rank_gating, "-1 (off) or a rank > 0");
  }
  o.prob_gating = options.get_bool("moe_prob_gating");
  o.prob_gating_input = options.get_string("moe_prob_gating_input");
  if (o.prob_gating_input != "prob" && o.prob_gating_input != "input") {
    bad_option(model, "moe_prob_gating_input", o.prob_gating_input, "'prob' or 'input'");
  }
  o.remove_diag = options.get_bool("gating_remove_diag");
  return o;
}

Classifier classifier_options(std::string_view model, const Options& options) {
  Classifier c;
  try {
    c.kind = video_level_classifier(options.get_string("video_level_classifier_model"));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string(model) + ": " + e.what());
  }
  c.moe = moe_options(model, options);
  return c;
}

VideoLevelClassifier video_level_classifier(const std::string& name) {
  if (name == "MoeModel") return VideoLevelClassifier::kMoe;
  if (name == "LogisticModel") return VideoLevelClassifier::kLogistic;
  throw InvalidArgument("video_level_classifier_model is '" + name +
                        "'; the video-level classifiers are LogisticModel, MoeModel");
}

Tensor video_level_classifier_model(layers::VariableScope& scope, VideoLevelClassifier kind,
                                    const Tensor& x, int64_t num_classes,
                                    const MoeOptions& options) {
  if (kind == VideoLevelClassifier::kLogistic) {
    return logistic_model(scope, x, num_classes, options.l2_penalty);
  }
  return moe_model(scope, x, num_classes, options);
}

}  // namespace trainyard::yt8m
