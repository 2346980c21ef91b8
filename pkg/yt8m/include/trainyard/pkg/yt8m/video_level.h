// The video-level classifiers of the YouTube-8M starter code and of the WILLOW fork
// (video_level_models.py), as functions that the video-level model plugins and the frame-level
// models' `video_level_classifier_model` share, plus WILLOW's Context Gating:
//
//   logistic_model  p = sigmoid(x W + b): slim.fully_connected(num_classes, sigmoid) in the
//                   scope given ("fully_connected" in the original).
//   moe_model       per class c, gates g_c = softmax(x W_g)[c, 0..M] (no bias; M + 1 columns,
//                   the last a dummy expert predicting 0) and experts e_cm = sigmoid(x W_e + b_e);
//                   p_c = sum_{m<M} g_cm e_cm. Scopes "gates" [D, C(M+1)] and "experts"
//                   [D, CM] as the original's; column c (M + 1) + j belongs to class c.
//                   WILLOW's options:
//                     low_rank_gating > 0   gates through "gates1" [D, r] then "gates2"
//                                           [r, C(M+1)], both without bias (-1: off).
//                     prob_gating           p <- p * sigmoid(BN(g W_p)) with W_p
//                                           "gating_prob_weights", N(0, 1/sqrt(C)), not
//                                           regularized, g = p ([C, C]) for input "prob" or x
//                                           ([D, C]) otherwise; BN "gating_prob_bn" (center and
//                                           scale) is always on. remove_diag subtracts
//                                           diag(W_p) * p from the gate logits.
//                   Every slim layer carries l2_regularizer(l2_penalty); WILLOW's `moe_l2` flag
//                   is that penalty.
//   context_gating  WILLOW's Context Gating, as its frame-level models write it inline after the
//                   hidden layer: y = x * sigmoid(BN(x W)), W "gating_weights_2" [D, D],
//                   N(0, 1/sqrt(D)), not regularized; BN "gating_bn" (center and scale);
//                   remove_diag subtracts diag(W) * x from the gate logits. Without batch norm
//                   the original adds "gating_biases" of [cluster_size] with a tensor as
//                   initializer, which fails unless the sizes agree; here they are [D],
//                   N(0, 1/sqrt(bias_stddev_fan)) as the original meant.
//
// The functions create their variables under `scope` (VariableScope::variable), follow the
// scope's mode for batch norm, and throw InvalidArgument naming the function and the input for
// an input that is not [B, D], num_classes <= 0, num_mixtures <= 0, or an unknown
// prob_gating_input.
#ifndef TRAINYARD_PKG_YT8M_VIDEO_LEVEL_H_
#define TRAINYARD_PKG_YT8M_VIDEO_LEVEL_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "trainyard/options.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/tensor.h"

namespace trainyard::yt8m {

struct MoeOptions {
  int64_t num_mixtures = 2;
  double l2_penalty = 1e-8;
  int64_t low_rank_gating = -1;            // WILLOW moe_low_rank_gating; -1: one gate layer
  bool prob_gating = false;                // WILLOW moe_prob_gating
  std::string prob_gating_input = "prob";  // WILLOW moe_prob_gating_input: "prob" or "input"
  bool remove_diag = false;                // WILLOW gating_remove_diag
};

enum class VideoLevelClassifier { kLogistic, kMoe };

// The MoE's options with the WILLOW fork's flag names and defaults (moe_l2 is its penalty).
inline constexpr std::array<OptionSpec, 6> kMoeOptions = {{
    {"moe_num_mixtures", OptionType::kInt, "2",
     "Number of experts per class (a dummy expert predicting 0 is added to the gates)"},
    {"moe_l2", OptionType::kFloat, "1e-8", "L2 penalty on the classifier's weights"},
    {"moe_low_rank_gating", OptionType::kInt, "-1",
     "Units of a two-layer low-rank gate (WILLOW); -1: one gate layer"},
    {"moe_prob_gating", OptionType::kBool, "false",
     "Context Gating of the probabilities (WILLOW): p * sigmoid(BN(g W))"},
    {"moe_prob_gating_input", OptionType::kString, "prob",
     "Input g of the probability gating: prob (the probabilities) or input (the MoE's input)"},
    {"gating_remove_diag", OptionType::kBool, "false",
     "Remove the diagonal of the gating weights (WILLOW)"},
}};

// What a model ending in the starter code's video_level_classifier_model declares: the choice
// of classifier, then kMoeOptions (LogisticModel takes moe_l2 as its penalty).
inline constexpr std::array<OptionSpec, 7> kClassifierOptions = join_options(
    std::array<OptionSpec, 1>{{{"video_level_classifier_model", OptionType::kString, "MoeModel",
                                "The classifier on the pooled representation: MoeModel or "
                                "LogisticModel"}}},
    kMoeOptions);

// kMoeOptions' values, checked: throws InvalidArgument "<model>: <option> is <value>; expected
// ..." for moe_num_mixtures <= 0, moe_l2 < 0 or NaN, moe_low_rank_gating neither -1 nor > 0,
// and an unknown moe_prob_gating_input.
MoeOptions moe_options(std::string_view model, const Options& options);

struct Classifier {
  VideoLevelClassifier kind;
  MoeOptions moe;
};
// kClassifierOptions' values, checked as moe_options does and naming the known classifiers.
Classifier classifier_options(std::string_view model, const Options& options);

// [B, D] -> probabilities [B, num_classes].
Tensor logistic_model(layers::VariableScope& scope, const Tensor& x, int64_t num_classes,
                      double l2_penalty, const std::string& layer_scope = "fully_connected");

// [B, D] -> probabilities [B, num_classes].
Tensor moe_model(layers::VariableScope& scope, const Tensor& x, int64_t num_classes,
                 const MoeOptions& options);

// [B, D] -> [B, D].
Tensor context_gating(layers::VariableScope& scope, const Tensor& x, bool remove_diag,
                      bool add_batch_norm = true, int64_t bias_stddev_fan = 1);

// The starter code's --video_level_classifier_model: "LogisticModel" or "MoeModel" (the
// classifiers the frame-level models may end in). Throws InvalidArgument naming the known ones.
VideoLevelClassifier video_level_classifier(const std::string& name);

// The classifier by kind: logistic_model with options.l2_penalty, or moe_model.
Tensor video_level_classifier_model(layers::VariableScope& scope, VideoLevelClassifier kind,
                                    const Tensor& x, int64_t num_classes,
                                    const MoeOptions& options);
inline Tensor video_level_classifier_model(layers::VariableScope& scope, const Classifier& c,
                                           const Tensor& x, int64_t num_classes) {
  return video_level_classifier_model(scope, c.kind, x, num_classes, c.moe);
}

}  // namespace trainyard::yt8m

#endif  // TRAINYARD_PKG_YT8M_VIDEO_LEVEL_H_
