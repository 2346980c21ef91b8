// The ops the core declares, their attributes, and the kernel interface backends implement.
//
// An op is declared once, in the core (core/src/ops.cc): its inputs, the shape and dtype of
// its outputs, and its gradient written in other ops. A backend registers one kernel per op it
// implements (Backend::kernels()). Before calling a kernel the core has checked every input,
// computed the output shapes and dtypes and allocated the outputs on the kernel's backend; a
// kernel only computes. Every tensor a kernel sees is contiguous and row-major, starting at its
// byte_offset() in its storage, and lives on the kernel's own backend.
//
// Layout conventions (TensorFlow's): images are NHWC; conv2d filters are
// [filter_height, filter_width, in_channels / groups, out_channels]; batch norm normalizes the
// last axis.
#ifndef TRAINYARD_OP_H_
#define TRAINYARD_OP_H_

#include <array>
#include <cstdint>
#include <span>

#include "trainyard/export.h"
#include "trainyard/tensor.h"

namespace trainyard {

class Backend;

// Every op. Comments give inputs -> outputs; "x" is any float tensor (f32 or f64 unless said),
// "same" means the output has the first input's shape and dtype.
enum class OpId : uint16_t {
  // Elementwise unary, x -> same. Attrs ScalarAttrs where noted.
  kNeg,
  kAbs,
  kSign,  // -1, 0, 1
  kExp,
  kLog,
  kLog1p,
  kSqrt,
  kRsqrt,
  kSquare,
  kSigmoid,
  kTanh,
  kRelu,
  kRelu6,
  kElu,          // a = alpha: x > 0 ? x : alpha * (exp(x) - 1)
  kSoftplus,     // log(1 + exp(x)), computed without overflow
  kPowScalar,    // a = exponent: x^a
  kClipByValue,  // a = min, b = max
  kFill,         // () -> the core-allocated output filled with FillAttrs::value; any dtype

  // Gradient helpers, (y or x, dy) -> same as dy.
  kSigmoidGrad,  // (y, dy): dy * y * (1 - y)
  kTanhGrad,     // (y, dy): dy * (1 - y^2)
  kReluGrad,     // (x, dy): x > 0 ? dy : 0
  kRelu6Grad,    // (x, dy): 0 < x < 6 ? dy : 0
  kEluGrad,      // (x, dy), a = alpha: x > 0 ? dy : dy * alpha * exp(x)

  // Elementwise binary with NumPy broadcasting, (a, b) -> broadcast shape. a and b have the
  // same dtype; add, sub, mul, maximum, minimum also take i32 and i64.
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMaximum,
  kMinimum,
  kPow,
  // Comparisons, (a, b) -> bool of the broadcast shape; f32, f64, i32, i64, u8, bool.
  kEqual,
  kNotEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  // (condition bool, a, b) -> broadcast of all three, a's dtype (as comparisons):
  // condition ? a : b.
  kWhere,

  // Reductions, x -> the kept dims (ReduceAttrs). kArgMax reduces one axis to i64 (first
  // maximum wins). Sum also takes i32/i64. A reduction over zero elements gives 0 for sum, NaN
  // for mean, -inf/+inf for max/min and -inf for logsumexp.
  kReduceSum,
  kReduceMean,
  kReduceMax,
  kReduceMin,
  kLogSumExp,
  kArgMax,
  // Softmax over AxisAttrs::axis, x -> same.
  kSoftmax,
  kLogSoftmax,

  // (a [..., M, K], b [..., K, N]) -> [..., M, N], MatMulAttrs transposes the last two dims of
  // a or b first. Batch dims of a and b are equal, or one side is rank 2 and shared by every
  // batch of the other.
  kMatMul,
  // Fused: (x [M, K], w [K, N], bias [N]) -> act(x w + bias), MatMulAttrs::activation (the
  // core never sets the transposes for this op).
  kMatMulBiasAct,

  // (input [N, H, W, C], filter [KH, KW, C / groups, O]) -> [N, OH, OW, O], Conv2DAttrs.
  // Output channel o belongs to group o / (O / groups) and reads input channels
  // [g C / groups, (g + 1) C / groups). A depthwise filter [KH, KW, C, multiplier] is this with
  // groups = C, reshaped to [KH, KW, 1, C * multiplier].
  kConv2D,
  // (dy [N, OH, OW, O], filter) -> dinput of Conv2DAttrs::input_shape.
  kConv2DBackwardInput,
  // (input, dy) -> dfilter of Conv2DAttrs::filter_shape.
  kConv2DBackwardFilter,
  // (input [N, H, W, C]) -> [N, OH, OW, C], PoolAttrs. Padding never wins a max and is left
  // out of an average (TensorFlow's SAME average pooling).
  kMaxPool,
  kAvgPool,
  // (input, dy) -> dinput. For ties in a window the first maximum (row-major) gets dy.
  kMaxPoolGrad,
  // (dy) -> dinput of PoolAttrs::input_shape.
  kAvgPoolGrad,
  // Batch norm over the last axis C, BatchNormAttrs::epsilon.
  // (x, gamma [C], beta [C]) -> (y, batch_mean [C], batch_variance [C] (biased)).
  kBatchNormTraining,
  // (x, gamma, beta, mean, variance) -> y.
  kBatchNormInference,
  // (x, gamma, batch_mean, batch_variance, dy) -> (dx, dgamma, dbeta), for the training form.
  kBatchNormGrad,

  // Fused loss: (logits, labels) -> same: max(x, 0) - x * z + log(1 + exp(-|x|)).
  kSigmoidCrossEntropyWithLogits,
  // (logits, labels, dloss) -> dlogits: dloss * (sigmoid(x) - z).
  kSigmoidCrossEntropyWithLogitsGrad,
  // Fused loss on probabilities, the YouTube-8M CrossEntropyLoss per example: (p [..., C],
  // y same) -> [...]: the sum over C of -(y log(p + eps) + (1 - y) log((1 - p) + eps)),
  // ScalarAttrs a = eps. Elementwise terms in p's type as the composed ops compute them.
  kBinaryCrossEntropy,
  // (p, y, dloss [...]) -> dp: dloss * ((1 - y) / ((1 - p) + eps) - y / (p + eps)).
  kBinaryCrossEntropyGrad,
  // x -> scalar sum(x^2) / 2 (tf.nn.l2_loss), accumulated in f64, in x's type.
  kL2Loss,
  // x -> x * clip / max(||x||_2, clip) (tf.clip_by_norm over the whole tensor), ScalarAttrs
  // a = clip; the norm is accumulated in f64.
  kClipByNorm,

  // Data movement; any dtype.
  kConcat,      // (inputs...) -> joined along AxisAttrs::axis
  kSlice,       // x -> x[begin : begin + size] per dim, SliceAttrs
  kTranspose,   // x -> dims permuted, PermAttrs: out dim i is in dim perm[i]
  kPad,         // x -> padded with PadAttrs::value (cast to x's dtype), PadAttrs::before/after
  kGather,      // (params, indices i32/i64) -> params[:axis] + indices.shape + params[axis+1:]
                // AxisAttrs; an index outside [0, dim) is an InvalidArgument naming it
  kScatterAdd,  // (updates, indices) -> zeros of ScatterAttrs::output_shape with updates added
                // at indices along ScatterAttrs::axis (the gradient of kGather)
  kOneHot,      // (indices i32/i64) -> [..., depth] of OneHotAttrs::dtype: on or off
  kTopK,        // x [..., N] -> (values [..., k], indices i64 [..., k]), descending, stable
  kCast,        // x -> CastAttrs::dtype (float -> int truncates toward zero, NaN and
                // out-of-range values are unspecified; -> bool is != 0)
  kCopy,        // x -> same (a contiguous copy)

  // Counter-based random numbers (Philox-4x32-10, random.h), RandomAttrs; output allocated by
  // the core with the attrs' shape and dtype (f32 or f64).
  kRandomUniform,    // [low, high)
  kRandomNormal,     // mean, stddev
  kTruncatedNormal,  // mean, stddev, redrawn when more than two stddev from the mean

  // Optimizer updates in place: they write their first inputs and have no outputs.
  // (var, grad): var -= lr * grad
  kApplyGradientDescent,
  // (var, accum, grad): accum = momentum * accum + grad;
  //   var -= lr * (use_nesterov ? grad + momentum * accum : accum)
  kApplyMomentum,
  // (var, m, v, grad): m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2)  (TensorFlow's rounding);
  //   var -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + epsilon)   (TensorFlow's form)
  kApplyAdam,

  kCount
};

inline constexpr std::size_t kOpCount = static_cast<std::size_t>(OpId::kCount);

// "add", "conv2d_backward_input", ... (snake case of the enumerator).
TRAINYARD_API const char* op_name(OpId op);

inline constexpr std::size_t kMaxRank = kMaxTensorRank;

struct ScalarAttrs {
  double a = 0.0;
  double b = 0.0;
};

struct FillAttrs {
  double value = 0.0;
};

struct ReduceAttrs {
  uint32_t axis_mask = 0;  // bit i set: reduce axis i (of the input)
  bool keepdims = false;
};

struct AxisAttrs {
  int64_t axis = 0;  // already non-negative
};

enum class Activation : uint8_t { kNone, kRelu, kSigmoid, kTanh };

struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
  Activation activation = Activation::kNone;  // kMatMulBiasAct only
};

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

struct SliceAttrs {
  std::array<int64_t, kMaxRank> begin{};
  std::array<int64_t, kMaxRank> size{};
};

struct PermAttrs {
  std::array<int64_t, kMaxRank> perm{};
};

struct PadAttrs {
  std::array<int64_t, kMaxRank> before{};
  std::array<int64_t, kMaxRank> after{};
  double value = 0.0;
};

struct ScatterAttrs {
  int64_t axis = 0;
  std::array<int64_t, kMaxRank> output_shape{};
  std::size_t output_rank = 0;
};

struct OneHotAttrs {
  int64_t depth = 0;
  double on_value = 1.0;
  double off_value = 0.0;
  DType dtype = DType::kF32;
};

struct TopKAttrs {
  int64_t k = 1;
};

struct CastAttrs {
  DType dtype = DType::kF32;
};

struct RandomAttrs {
  uint64_t seed = 0;     // the generator's key
  uint64_t counter = 0;  // the first Philox counter block this draw uses
  double a = 0.0;        // low or mean
  double b = 1.0;        // high or stddev
};

struct OptimizerAttrs {
  double learning_rate = 0.0;
  double momentum = 0.0;  // kApplyMomentum
  bool use_nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;  // kApplyAdam
  double beta1_power = 1.0, beta2_power = 1.0;        // b1^t, b2^t for this step t (1-based)
};

// What a kernel receives. `attrs` points to the op's attribute struct named above (or is null
// for ops without attributes). Outputs are allocated and have their final shapes.
struct KernelArgs {
  std::span<const Tensor> inputs;
  std::span<Tensor> outputs;
  const void* attrs = nullptr;

  template <class T>
  const T& get_attrs() const {
    return *static_cast<const T*>(attrs);
  }
};

// A kernel throws Unimplemented for a dtype it does not support, naming the op and dtype.
using KernelFn = void (*)(Backend& backend, const KernelArgs& args);

struct KernelRegistration {
  OpId op;
  KernelFn fn;
};

}  // namespace trainyard

#endif  // TRAINYARD_OP_H_
