// The nn ops of ops.h (core/src/engine/ops/nn.cc declares and implements them). Convolution,
// pooling, batch normalization (NHWC, TensorFlow's padding rules), dropout, l2_normalize. Errors as
// ops.h says.
#ifndef TRAINYARD_OPS_NN_H_
#define TRAINYARD_OPS_NN_H_

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/ops/random.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The attribute structs of the nn family's ops (what their kernels receive as
// KernelArgs::attrs; op.h has the family-neutral ones).
struct Conv2DAttrs {
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t groups = 1;
  std::array<int64_t, 4> input_shape{};   // N, H, W, C
  std::array<int64_t, 4> filter_shape{};  // KH, KW, C / groups, O
};

struct PoolAttrs {
  int64_t window_h = 1, window_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  std::array<int64_t, 4> input_shape{};  // N, H, W, C
};

struct BatchNormAttrs {
  double epsilon = 1e-3;
};

enum class PaddingType { kValid, kSame, kExplicit };

struct Padding2D {
  PaddingType type = PaddingType::kValid;
  int64_t top = 0, bottom = 0, left = 0, right = 0;  // kExplicit only
  static Padding2D valid() { return {}; }
  static Padding2D same() { return {PaddingType::kSame}; }
  static Padding2D explicit_pads(int64_t top, int64_t bottom, int64_t left, int64_t right) {
    return {PaddingType::kExplicit, top, bottom, left, right};
  }
};

namespace ops {

// Convolution and pooling, NHWC. Filters are [KH, KW, C / groups, O]. depthwise_conv2d takes
// TensorFlow's depthwise filter [KH, KW, C, multiplier].
TRAINYARD_API Tensor conv2d(const Tensor& input, const Tensor& filter,
                            std::pair<int64_t, int64_t> strides = {1, 1},
                            Padding2D padding = Padding2D::valid(),
                            std::pair<int64_t, int64_t> dilations = {1, 1}, int64_t groups = 1);
TRAINYARD_API Tensor depthwise_conv2d(const Tensor& input, const Tensor& filter,
                                      std::pair<int64_t, int64_t> strides = {1, 1},
                                      Padding2D padding = Padding2D::valid(),
                                      std::pair<int64_t, int64_t> dilations = {1, 1});
TRAINYARD_API Tensor max_pool2d(const Tensor& input, std::pair<int64_t, int64_t> window,
                                std::pair<int64_t, int64_t> strides,
                                Padding2D padding = Padding2D::valid());
TRAINYARD_API Tensor avg_pool2d(const Tensor& input, std::pair<int64_t, int64_t> window,
                                std::pair<int64_t, int64_t> strides,
                                Padding2D padding = Padding2D::valid());

// Batch normalization over the last axis.
struct BatchNormResult {
  Tensor y;
  Tensor batch_mean;      // training only
  Tensor batch_variance;  // training only, biased
};
TRAINYARD_API BatchNormResult batch_norm_training(const Tensor& x, const Tensor& gamma,
                                                  const Tensor& beta, double epsilon = 1e-3);
TRAINYARD_API Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                          const Tensor& mean, const Tensor& variance,
                                          double epsilon = 1e-3);
// Keeps each element with probability 1 - rate, scaled by 1 / (1 - rate); identity when not
// training or rate is 0.
TRAINYARD_API Tensor dropout(const Tensor& x, double rate, Generator& generator, bool training);

// x / sqrt(max(sum(x^2, axis), epsilon)), as tf.nn.l2_normalize.
TRAINYARD_API Tensor l2_normalize(const Tensor& x, int64_t axis = -1, double epsilon = 1e-12);

// A mixture of experts' gated sum, one row per (example, class), as YouTube-8M's MoeModel
// computes it: gate_logits [N, M + 1] and expert_logits [N, M] (f32 or f64) -> [N],
// p = sum_{j<M} softmax(gate_logits)[j] * sigmoid(expert_logits)[j] (column M of the gates is
// the dummy expert's, which predicts 0). A composite ("moe_mixture", gradient
// "moe_mixture_grad": d gate_logits[i] = dp g_i (e_i - p) with e_M = 0, d expert_logits[j] =
// dp g_j e_j (1 - e_j)): one pass each way where the backend has fused kernels (cpu), the
// softmax, sigmoid, slice, mul and reduce_sum ops elsewhere.
TRAINYARD_API Tensor moe_mixture(const Tensor& gate_logits, const Tensor& expert_logits);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_NN_H_
