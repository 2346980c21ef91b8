// The video-level models of the YouTube-8M starter code (video_level_models.py):
//
//   LogisticModel  p = sigmoid(x W + b), one logistic regression per class.
//   MoeModel       a mixture of logistic experts per class: p_c = sum_{m<M} g_cm e_cm with
//                  gates g_c = softmax over M + 1 gate logits (the last one a dummy expert that
//                  always predicts 0) and experts e_cm = sigmoid(x W_e + b_e).
//
// Input: batch.features["features"], f32 [B, D], already L2-normalized by the trainer; the
// number of classes comes from the context. Variables are those of the original's
// slim.fully_connected layers ([D, N] weights, glorot-uniform; [N] biases, zeros), named
// "<scope>/weights" and "<scope>/biases". MoeModel keeps the original scopes "gates" and
// "experts"; LogisticModel, whose original used slim's default scope "fully_connected", names
// its layer "logistic".
//
// Regularization: as slim's weights_regularizer=l2_regularizer(l2_penalty), every weight
// matrix is created with VariableSpec::l2_regularization = l2_penalty, so the trainer's
// VariableStore::regularization_loss() holds l2_penalty * sum(w^2) / 2 per matrix (the
// original's tf.losses regularization losses). ModelOutput::regularization_loss stays empty:
// reporting the same term there as well would count it twice.
#include <cstdint>
#include <string>
#include <string_view>

#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/options.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"
#include "trainyard/variable.h"

namespace trainyard::models {
namespace {

// The [B, D] input: checks that it is there and has rank 2.
const Tensor& model_input(std::string_view model, const Batch& batch) {
  auto it = batch.features.find("features");
  if (it == batch.features.end()) {
    throw InvalidArgument(std::string(model) +
                          ": the batch has no 'features'; a video-level model needs "
                          "features [batch, feature_size]");
  }
  const Tensor& x = it->second;
  if (x.shape().rank() != 2) {
    throw InvalidArgument(std::string(model) + ": 'features' is " + x.description() +
                          "; a video-level model needs [batch, feature_size] (use a frame-level "
                          "model for [batch, frames, feature_size])");
  }
  return x;
}

int64_t checked_num_classes(std::string_view model, const ModelContext& ctx) {
  const int64_t num_classes = ctx.num_classes();
  if (num_classes <= 0) {
    throw InvalidArgument(std::string(model) + ": num_classes is " + std::to_string(num_classes) +
                          "; expected a positive number of classes");
  }
  return num_classes;
}

double checked_l2_penalty(std::string_view model, const Options& options) {
  const double l2 = options.get_float("l2_penalty");
  if (!(l2 >= 0.0)) {
    throw InvalidArgument(std::string(model) + ": l2_penalty is " + option_value_to_string(l2) +
                          "; expected a value >= 0");
  }
  return l2;
}

// slim.fully_connected's weights: xavier (glorot) uniform, l2-regularized.
Variable& fc_weights(ModelContext& ctx, const std::string& scope, const Tensor& x,
                     int64_t num_outputs, double l2_penalty) {
  VariableSpec spec;
  spec.name = scope + "/weights";
  spec.shape = Shape{x.shape()[1], num_outputs};
  spec.dtype = x.dtype();
  spec.initializer.kind = Initializer::Kind::kGlorotUniform;
  spec.l2_regularization = l2_penalty;
  return ctx.variable(spec);
}

// slim.fully_connected's biases: zeros, not regularized.
Variable& fc_biases(ModelContext& ctx, const std::string& scope, const Tensor& x,
                    int64_t num_outputs) {
  VariableSpec spec;
  spec.name = scope + "/biases";
  spec.shape = Shape{num_outputs};
  spec.dtype = x.dtype();
  spec.initializer.kind = Initializer::Kind::kZeros;
  return ctx.variable(spec);
}

// ---------------------------------------------------------------------------------------------

class LogisticModel final : public BaseModel {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"l2_penalty", OptionType::kFloat, "1e-8", "L2 penalty on the weights (slim l2_regularizer)"},
  };

  explicit LogisticModel(const Options& options)
      : l2_penalty_(checked_l2_penalty("LogisticModel", options)) {}

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode) override {
    const Tensor& x = model_input("LogisticModel", batch);
    const int64_t num_classes = checked_num_classes("LogisticModel", ctx);
    Variable& weights = fc_weights(ctx, "logistic", x, num_classes, l2_penalty_);
    Variable& biases = fc_biases(ctx, "logistic", x, num_classes);
    ModelOutput output;
    output.predictions =
        ops::matmul_bias_act(x, weights.value(), biases.value(), Activation::kSigmoid);
    return output;
  }

 private:
  double l2_penalty_;
};

// ---------------------------------------------------------------------------------------------

class MoeModel final : public BaseModel {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"moe_num_mixtures", OptionType::kInt, "2",
       "Number of experts per class (a dummy expert predicting 0 is added to the gates)"},
      {"l2_penalty", OptionType::kFloat, "1e-8",
       "L2 penalty on the gate and expert weights (slim l2_regularizer)"},
  };

  explicit MoeModel(const Options& options)
      : num_mixtures_(options.get_int("moe_num_mixtures")),
        l2_penalty_(checked_l2_penalty("MoeModel", options)) {
    if (num_mixtures_ <= 0) {
      throw InvalidArgument("MoeModel: moe_num_mixtures is " + std::to_string(num_mixtures_) +
                            "; expected at least one expert");
    }
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode) override {
    const Tensor& x = model_input("MoeModel", batch);
    const int64_t num_classes = checked_num_classes("MoeModel", ctx);
    const int64_t m = num_mixtures_;

    // Gate logits [B, C * (M + 1)] (no bias), expert logits [B, C * M]; column c * (M + 1) + j
    // (resp. c * M + j) belongs to class c, as the original's reshape to [B * C, M + 1] reads.
    Variable& gate_weights = fc_weights(ctx, "gates", x, num_classes * (m + 1), l2_penalty_);
    Variable& expert_weights = fc_weights(ctx, "experts", x, num_classes * m, l2_penalty_);
    Variable& expert_biases = fc_biases(ctx, "experts", x, num_classes * m);

    Tensor gate_activations = ops::matmul(x, gate_weights.value());
    Tensor expert_activations =
        ops::matmul_bias_act(x, expert_weights.value(), expert_biases.value(), Activation::kNone);

    Tensor gating_distribution = ops::softmax(ops::reshape(gate_activations, Shape{-1, m + 1}));
    Tensor expert_distribution = ops::sigmoid(ops::reshape(expert_activations, Shape{-1, m}));

    // The dummy expert's gate (column M) takes probability mass and contributes nothing.
    Tensor real_gates = ops::slice(gating_distribution, {0, 0}, {-1, m});
    Tensor probabilities = ops::reduce_sum(ops::mul(real_gates, expert_distribution), {1});

    ModelOutput output;
    output.predictions = ops::reshape(probabilities, Shape{-1, num_classes});
    return output;
  }

 private:
  int64_t num_mixtures_;
  double l2_penalty_;
};

}  // namespace
}  // namespace trainyard::models

#define TRAINYARD_YT8M_MODEL_CLASSES(X)                                            \
  X(model, LogisticModel, trainyard::models::LogisticModel,                        \
    "YouTube-8M video level: one logistic regression per class, sigmoid(x W + b)") \
  X(model, MoeModel, trainyard::models::MoeModel,                                  \
    "YouTube-8M video level: mixture of logistic experts per class, softmax gates")
TRAINYARD_PLUGIN(yt8m_models, 0, 1, 0, TRAINYARD_YT8M_MODEL_CLASSES)
