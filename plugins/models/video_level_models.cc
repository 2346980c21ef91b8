// The video-level models of the YouTube-8M starter code (video_level_models.py):
//
//   LogisticModel  p = sigmoid(x W + b), one logistic regression per class.
//   MoeModel       a mixture of logistic experts per class: p_c = sum_{m<M} g_cm e_cm with
//                  gates g_c = softmax over M + 1 gate logits (the last one a dummy expert that
//                  always predicts 0) and experts e_cm = sigmoid(x W_e + b_e). With the
//                  WILLOW fork's options: its penalty flag moe_l2, low-rank gates, and Context
//                  Gating of the probabilities (pkg/yt8m/video_level.h has the math).
//
// Input: batch.features["features"], f32 [B, D], already L2-normalized by the trainer; the
// number of classes comes from the context. The layers are the original's slim.fully_connected
// (pkg/layers: [D, N] weights, glorot-uniform; [N] biases, zeros), named "<scope>/weights" and
// "<scope>/biases". MoeModel keeps the original scopes "gates" (no biases) and "experts";
// LogisticModel's layer has slim's default scope, "fully_connected", as the original's
// (checkpoints of the starter code restore by name). Neither model has dropout or batch norm, so
// the mode changes nothing.
//
// Regularization: as slim's weights_regularizer=l2_regularizer(l2_penalty), every weight
// matrix is created with VariableSpec::l2_regularization = l2_penalty, so the trainer's
// VariableStore::regularization_loss() holds l2_penalty * sum(w^2) / 2 per matrix (the
// original's tf.losses regularization losses). ModelOutput::regularization_loss stays empty:
// reporting the same term there as well would count it twice.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/options.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/pkg/yt8m/video_level.h"
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

// ---------------------------------------------------------------------------------------------

class LogisticModel final : public BaseModel {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"l2_penalty", OptionType::kFloat, "1e-8", "L2 penalty on the weights (slim l2_regularizer)"},
  };

  explicit LogisticModel(const Options& options)
      : l2_penalty_(checked_l2_penalty("LogisticModel", options)) {}

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    const Tensor& x = model_input("LogisticModel", batch);
    const int64_t num_classes = checked_num_classes("LogisticModel", ctx);
    layers::VariableScope root(ctx, mode);
    ModelOutput output;
    output.predictions = yt8m::logistic_model(root, x, num_classes, l2_penalty_);
    return output;
  }

 private:
  double l2_penalty_;
};

// ---------------------------------------------------------------------------------------------

class MoeModel final : public BaseModel {
 public:
  // WILLOW's MoE options, then the starter code's l2_penalty: WILLOW's MoeModel takes its
  // penalty from --moe_l2 whatever l2_penalty says, and the starter code's has no such flag, so
  // moe_l2 at its default (the two originals' shared 1e-8) leaves l2_penalty in force.
  static constexpr auto kOptions = join_options(
      yt8m::kMoeOptions,
      std::array<OptionSpec, 1>{{{"l2_penalty", OptionType::kFloat, "1e-8",
                                  "L2 penalty on the gate and expert weights (slim "
                                  "l2_regularizer); a moe_l2 other than 1e-8 replaces it"}}});

  explicit MoeModel(const Options& options) : options_(yt8m::moe_options("MoeModel", options)) {
    const double l2_penalty = checked_l2_penalty("MoeModel", options);
    if (options_.l2_penalty == 1e-8) options_.l2_penalty = l2_penalty;
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    const Tensor& x = model_input("MoeModel", batch);
    const int64_t num_classes = checked_num_classes("MoeModel", ctx);
    layers::VariableScope root(ctx, mode);
    ModelOutput output;
    output.predictions = yt8m::moe_model(root, x, num_classes, options_);
    return output;
  }

 private:
  yt8m::MoeOptions options_;
};
}  // namespace
}  // namespace trainyard::models

#define TRAINYARD_YT8M_MODEL_CLASSES(X)                                            \
  X(model, LogisticModel, trainyard::models::LogisticModel,                        \
    "YouTube-8M video level: one logistic regression per class, sigmoid(x W + b)") \
  X(model, MoeModel, trainyard::models::MoeModel,                                  \
    "YouTube-8M video level: mixture of logistic experts per class, softmax gates")
TRAINYARD_PLUGIN(yt8m_models, 0, 1, 0, TRAINYARD_YT8M_MODEL_CLASSES)
