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

#include <cstdint>
#include <string>

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
enum class VideoLevelClassifier { kLogistic, kMoe };
VideoLevelClassifier video_level_classifier(const std::string& name);

// The classifier by kind: logistic_model with options.l2_penalty, or moe_model.
Tensor video_level_classifier_model(layers::VariableScope& scope, VideoLevelClassifier kind,
                                    const Tensor& x, int64_t num_classes,
                                    const MoeOptions& options);

}  // namespace trainyard::yt8m

#endif  // TRAINYARD_PKG_YT8M_VIDEO_LEVEL_H_
