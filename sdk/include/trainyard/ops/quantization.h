// The quantization ops of ops.h (core/src/engine/ops/quantization.cc declares and implements
// them): TensorFlow's fake quantization with learned ranges, tf.quantization.
// fake_quant_with_min_max_vars and fake_quant_with_min_max_vars_per_channel, the ops that
// quantization-aware training (tf.contrib.quantize) inserts after weights and activations.
// Errors as ops.h says.
#ifndef TRAINYARD_OPS_QUANTIZATION_H_
#define TRAINYARD_OPS_QUANTIZATION_H_

#include <cmath>
#include <cstdint>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The attribute struct of the quantization family's ops (what their kernels receive as
// KernelArgs::attrs): the forward ops and their gradients, per tensor and per channel.
struct FakeQuantAttrs {
  int64_t num_bits = 8;  // 2..16
  bool narrow_range = false;
};

// Functions callable from CUDA device code as well (the backends' kernels share them).
#if defined(__CUDACC__)
#define TRAINYARD_FAKE_QUANT_HOST_DEVICE __host__ __device__
#else
#define TRAINYARD_FAKE_QUANT_HOST_DEVICE
#endif

// a b rounded on its own: nvcc would otherwise contract a product and the sum after it into an
// FMA, which rounds once (host builds compile with -ffp-contract=off).
template <class T>
TRAINYARD_FAKE_QUANT_HOST_DEVICE T fake_quant_product(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == sizeof(float)) {
    return __fmul_rn(a, b);
  } else {
    return __dmul_rn(a, b);
  }
#else
  return a * b;
#endif
}

// v, or a zero of its sign when v is subnormal. TensorFlow's CPU kernels run with denormals
// flushed to zero (FTZ and DAZ): a subnormal input reads as 0 and a subnormal result is 0.
template <class T>
TRAINYARD_FAKE_QUANT_HOST_DEVICE T fake_quant_flush_denormal(T v) {
  T smallest;
  if constexpr (sizeof(T) == sizeof(float)) {
    smallest = T(1.17549435082228750797e-38f);  // FLT_MIN
  } else {
    smallest = T(2.2250738585072013830902e-308);  // DBL_MIN
  }
  return v > -smallest && v < smallest ? v * T(0) : v;
}

// A range [min, max] nudged as TensorFlow's Nudge() (fake_quant_ops_functor.h) nudges it, in T
// (TensorFlow: f32), and the zero level the forward op subtracts. What the kernels compute once
// per range; an exporter finds the quantization's scale and zero point here.
template <class T>
struct FakeQuantRange {
  T nudged_min = T(0), nudged_max = T(0);
  T scale = T(0);       // (max - min) / (quant_max - quant_min)
  T inv_scale = T(0);   // (quant_max - quant_min) / (max - min), not 1 / scale
  T zero_point = T(0);  // the integer level of 0, in [quant_min, quant_max]
  T quant_zero = T(0);  // floor(-nudged_min inv_scale + 0.5)
  bool zero = false;    // min = max = 0: the outputs are 0 and the gradient passes through
};

template <class T>
TRAINYARD_FAKE_QUANT_HOST_DEVICE FakeQuantRange<T> nudge_fake_quant_range(T min, T max,
                                                                          int64_t num_bits,
                                                                          bool narrow_range) {
  using std::floor;
  min = fake_quant_flush_denormal(min);
  max = fake_quant_flush_denormal(max);
  const T quant_min = narrow_range ? T(1) : T(0);
  const T quant_max = static_cast<T>((int64_t{1} << num_bits) - 1);
  FakeQuantRange<T> r;
  r.zero = min == T(0) && max == T(0);
  // Flushed as TensorFlow's FTZ flushes them: a range near FLT_MIN has a subnormal scale (0: the
  // nudged range is [0, 0]), a range near FLT_MAX a subnormal inv_scale.
  r.scale = fake_quant_flush_denormal((max - min) / (quant_max - quant_min));
  r.inv_scale = fake_quant_flush_denormal((quant_max - quant_min) / (max - min));
  const T from_min = quant_min - min / r.scale;
  if (from_min < quant_min) {
    r.zero_point = quant_min;
  } else if (from_min > quant_max) {
    r.zero_point = quant_max;
  } else if (from_min != from_min) {
    r.zero_point = T(0);  // NaN: TensorFlow's cast of NaN to uint16 gives 0 on x86
  } else {
    // std::round (half away from zero) of a value in [quant_min, quant_max]; v - floor(v) is exact.
    r.zero_point = floor(from_min);
    if (from_min - r.zero_point >= T(0.5)) r.zero_point = r.zero_point + T(1);
  }
  r.nudged_min = fake_quant_product(quant_min - r.zero_point, r.scale);
  r.nudged_max = fake_quant_product(quant_max - r.zero_point, r.scale);
  r.quant_zero = floor(fake_quant_product(-r.nudged_min, r.inv_scale) + T(0.5));
  return r;
}

// One input quantized and dequantized in range r, as TensorFlow's forward functors compute it:
// the per-tensor op divides by scale, the per-channel op multiplies by inv_scale. Each operation
// rounds on its own. A NaN input gives NaN.
template <class T>
TRAINYARD_FAKE_QUANT_HOST_DEVICE T fake_quantize(T x, const FakeQuantRange<T>& r,
                                                 bool per_channel) {
  using std::floor;
  if (r.zero) return T(0);
  x = fake_quant_flush_denormal(x);
  const T below = r.nudged_max < x ? r.nudged_max : x;            // Eigen's cwiseMin(nudged_max)
  const T clamped = below < r.nudged_min ? r.nudged_min : below;  // cwiseMax(nudged_min)
  const T shifted = clamped - r.nudged_min;
  const T levels = per_channel ? fake_quant_product(shifted, r.inv_scale) : shifted / r.scale;
  const T shifted_level = levels - r.quant_zero;
  return fake_quant_flush_denormal(fake_quant_product(floor(shifted_level + T(0.5)), r.scale));
}

// The gradients of one input x with output gradient dy in range r (TensorFlow's
// FakeQuantWithMinMaxVars*GradientFunctor): what the inputs get, and what min (below) and max
// (above) get to add. TensorFlow multiplies dy by 1 or 0, so a negative dy outside the range gives
// -0; with min = max = 0 the inputs get dy as it is.
template <class T>
struct FakeQuantGradient {
  T dx, below, above;
};

template <class T>
TRAINYARD_FAKE_QUANT_HOST_DEVICE FakeQuantGradient<T> fake_quant_gradient(
    T dy, T x, const FakeQuantRange<T>& r) {
  if (r.zero) return {dy, T(0), T(0)};
  dy = fake_quant_flush_denormal(dy);
  x = fake_quant_flush_denormal(x);
  const bool inside = x >= r.nudged_min && x <= r.nudged_max;
  return {dy * (inside ? T(1) : T(0)), x < r.nudged_min ? dy : T(0), x > r.nudged_max ? dy : T(0)};
}

namespace ops {

// tf.quantization.fake_quant_with_min_max_vars: `inputs` (f32, any shape) quantized to
// 2^num_bits levels in the range [min, max] (scalars of the inputs' dtype) and dequantized, with
// TensorFlow's arithmetic to the bit:
//
//   quant_min = narrow_range ? 1 : 0, quant_max = 2^num_bits - 1
//   scale = (max - min) / (quant_max - quant_min)
//   zero_point = round(quant_min - min / scale) (half away from zero), clamped to
//                [quant_min, quant_max]: the range is nudged so that 0 is a level
//   nudged_min = (quant_min - zero_point) scale, nudged_max = (quant_max - zero_point) scale
//   output = floor((clamp(x, nudged_min, nudged_max) - nudged_min) / scale
//                  - floor(-nudged_min (1 / scale) + 0.5) + 0.5) scale
//
// every step rounded in f32 (1 / scale is TensorFlow's inv_scale, (quant_max - quant_min) /
// (max - min)). min > 0 nudges min to 0, max < 0 nudges max to 0; min = max = 0 gives zeros.
// TensorFlow does not check min < max, and neither does this op: its outputs then follow the
// formulas. As TensorFlow's CPU kernels, which run with denormals flushed to zero, the op reads
// subnormal inputs, min and max as zeros and flushes subnormal results, scale and inv_scale to
// zero (a range whose f32 scale is subnormal is nudged to [0, 0], where the per-tensor op's 0 / 0
// gives NaN). f64 inputs compute the same formulas in double (the f64 reference and gradient
// checks; TensorFlow has f32 only).
//
// Gradients (TensorFlow's FakeQuantWithMinMaxVarsGradient, the straight-through estimator): the
// inputs' is the output gradient where nudged_min <= x <= nudged_max and 0 elsewhere; min's is
// the sum of the output gradient where x < nudged_min, max's where x > nudged_max. With min =
// max = 0 the inputs get the whole output gradient and min and max get 0.
//
// Throws InvalidArgument naming the op for: inputs not f32 or f64, min or max not a scalar of
// the inputs' dtype, num_bits outside [2, 16].
TRAINYARD_API Tensor fake_quant_with_min_max_vars(const Tensor& inputs, const Tensor& min,
                                                  const Tensor& max, int num_bits = 8,
                                                  bool narrow_range = false);

// tf.quantization.fake_quant_with_min_max_vars_per_channel: the same per channel of the last
// dimension: `inputs` of rank >= 1 with D channels in its last dimension, min and max [D], channel
// c quantized in [min[c], max[c]]. TensorFlow's per-channel kernel multiplies by inv_scale where
// the per-tensor one divides by scale:
//
//   output = floor((clamp(x, nudged_min, nudged_max) - nudged_min) inv_scale
//                  - floor(-nudged_min inv_scale + 0.5) + 0.5) scale
//
// so the two ops can differ in the last bit of a level (and pick the other level at a tie).
// Gradients as above, per channel (FakeQuantWithMinMaxVarsPerChannelGradient): min[c] and max[c]
// get the sums over channel c's elements.
//
// Throws InvalidArgument naming the op for: inputs not f32 or f64 or of rank 0, min or max not
// [D] of the inputs' dtype, num_bits outside [2, 16].
TRAINYARD_API Tensor fake_quant_with_min_max_vars_per_channel(const Tensor& inputs,
                                                              const Tensor& min, const Tensor& max,
                                                              int num_bits = 8,
                                                              bool narrow_range = false);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_QUANTIZATION_H_
