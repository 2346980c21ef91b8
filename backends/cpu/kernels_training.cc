// Training kernels (ops/training.h): the optimizer updates, in place on their first inputs, and
// a fused tf.clip_by_norm: two passes over its input (the norm, then the scale) where the
// composed ops make ten or more.
//
// The clipping loops are compiled for AVX-512, AVX2 and baseline x86-64 (target_clones,
// kernels_common.h). The norm accumulates in f64 over fixed chunks combined in a fixed order,
// so a result does not depend on the number of threads.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels_common.h"

namespace trainyard::cpu {
namespace {

// ---------------------------------------------------------------------------------------------
// Optimizer updates, in place on their first inputs.

void apply_gradient_descent_kernel(Backend&, const KernelArgs& args) {
  const Tensor& var = args.inputs[0];
  const auto& attrs = args.get_attrs<OptimizerAttrs>();
  visit<DTypeSet::kFloat>("apply_gradient_descent", var.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* w = data<T>(var);
    const T* g = data<T>(args.inputs[1]);
    const T lr = static_cast<T>(attrs.learning_rate);
    const int64_t n = var.num_elements();
#pragma omp parallel for if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) w[i] -= lr * g[i];
  });
}

void apply_momentum_kernel(Backend&, const KernelArgs& args) {
  const Tensor& var = args.inputs[0];
  const auto& attrs = args.get_attrs<OptimizerAttrs>();
  visit<DTypeSet::kFloat>("apply_momentum", var.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* w = data<T>(var);
    T* accum = data<T>(args.inputs[1]);
    const T* g = data<T>(args.inputs[2]);
    const T lr = static_cast<T>(attrs.learning_rate);
    const T momentum = static_cast<T>(attrs.momentum);
    const int64_t n = var.num_elements();
    if (attrs.use_nesterov) {
#pragma omp parallel for if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) {
        accum[i] = momentum * accum[i] + g[i];
        w[i] -= lr * (g[i] + momentum * accum[i]);
      }
    } else {
#pragma omp parallel for if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) {
        accum[i] = momentum * accum[i] + g[i];
        w[i] -= lr * accum[i];
      }
    }
  });
}

// TensorFlow's ApplyAdam: m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2);
// var -= lr_t m / (sqrt(v) + epsilon) with lr_t = lr sqrt(1 - b2^t) / (1 - b1^t).
void apply_adam_kernel(Backend&, const KernelArgs& args) {
  const Tensor& var = args.inputs[0];
  const auto& attrs = args.get_attrs<OptimizerAttrs>();
  visit<DTypeSet::kFloat>("apply_adam", var.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* w = data<T>(var);
    T* m = data<T>(args.inputs[1]);
    T* v = data<T>(args.inputs[2]);
    const T* g = data<T>(args.inputs[3]);
    const T lr_t = static_cast<T>(attrs.learning_rate * std::sqrt(1.0 - attrs.beta2_power) /
                                  (1.0 - attrs.beta1_power));
    const T one_minus_beta1 = static_cast<T>(1.0 - attrs.beta1);
    const T one_minus_beta2 = static_cast<T>(1.0 - attrs.beta2);
    const T epsilon = static_cast<T>(attrs.epsilon);
    const int64_t n = var.num_elements();
#pragma omp parallel for simd if (n > kCostlyThreshold)
    for (int64_t i = 0; i < n; ++i) {
      m[i] += (g[i] - m[i]) * one_minus_beta1;
      v[i] += (g[i] * g[i] - v[i]) * one_minus_beta2;
      w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + epsilon);
    }
  });
}

// TensorFlow's ApplyRMSProp and ApplyCenteredRMSProp, in T and in TF's order (its CPU
// functors), the scalars rounded to T first and 1 - rho computed in T:
//   ms += (g^2 - ms)(1 - rho); [mg += (g - mg)(1 - rho);]
//   mom = mom momentum + (g lr) / sqrt(ms [- mg^2] + epsilon); w -= mom.
// One pass where the composed ops make eleven (fifteen centered). Not multiversioned: an
// AVX-512 clone would contract products and sums into FMAs and round otherwise than TF; the
// loop is memory-bound as it is.
template <bool kCentered>
void apply_rms_prop_kernel(Backend&, const KernelArgs& args) {
  const Tensor& var = args.inputs[0];
  const auto& attrs = args.get_attrs<OptimizerAttrs>();
  visit<DTypeSet::kFloat>(args.op, var.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kFirstSlot = kCentered ? 2 : 1;  // ms; mg before it when centered
    T* w = data<T>(var);
    T* mg = kCentered ? data<T>(args.inputs[1]) : nullptr;
    T* ms = data<T>(args.inputs[kFirstSlot]);
    T* mom = data<T>(args.inputs[kFirstSlot + 1]);
    const T* g = data<T>(args.inputs[kFirstSlot + 2]);
    const T lr = static_cast<T>(attrs.learning_rate);
    const T one_minus_rho = T(1) - static_cast<T>(attrs.rho);
    const T momentum = static_cast<T>(attrs.momentum);
    const T epsilon = static_cast<T>(attrs.epsilon);
    const int64_t n = var.num_elements();
    if constexpr (kCentered) {
#pragma omp parallel for simd if (n > kCostlyThreshold)
      for (int64_t i = 0; i < n; ++i) {
        const T gi = g[i];
        const T ms_i = ms[i] + (gi * gi - ms[i]) * one_minus_rho;
        const T mg_i = mg[i] + (gi - mg[i]) * one_minus_rho;
        const T mom_i = mom[i] * momentum + (gi * lr) / std::sqrt((ms_i - mg_i * mg_i) + epsilon);
        ms[i] = ms_i;
        mg[i] = mg_i;
        mom[i] = mom_i;
        w[i] -= mom_i;
      }
    } else {
#pragma omp parallel for simd if (n > kCostlyThreshold)
      for (int64_t i = 0; i < n; ++i) {
        const T gi = g[i];
        const T ms_i = ms[i] + (gi * gi - ms[i]) * one_minus_rho;
        const T mom_i = mom[i] * momentum + (gi * lr) / std::sqrt(ms_i + epsilon);
        ms[i] = ms_i;
        mom[i] = mom_i;
        w[i] -= mom_i;
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Clipping by the norm (the norm's sum of squares is kernels_loss.cc's).

TRAINYARD_MULTIVERSION
void scale_chunk_f32(const float* x, float* out, int64_t n, float s) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

void scale_f32(const float* x, float* out, int64_t n, float s) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk;
    scale_chunk_f32(x + begin, out + begin, std::min(kChunk, n - begin), s);
    clear_upper_vector_state();
  }
}

void clip_by_norm_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const double clip = static_cast<const ScalarAttrs*>(args.attrs)->a;
  const int64_t n = x.num_elements();
  switch (x.dtype()) {
    case DType::kF32: {
      // tf.clip_by_norm in x's type: clip / max(norm, clip), the norm rounded to f32 first.
      const float norm = static_cast<float>(std::sqrt(sum_of_squares_f32(data<float>(x), n)));
      const float c = static_cast<float>(clip);
      return scale_f32(data<float>(x), data<float>(args.outputs[0]), n, c / std::max(norm, c));
    }
    case DType::kF64: {
      const double norm = std::sqrt(sum_of_squares_f64(data<double>(x), n));
      const double s = clip / std::max(norm, clip);
      const double* in = data<double>(x);
      double* out = data<double>(args.outputs[0]);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) out[i] = in[i] * s;
      return;
    }
    default:
      unsupported_dtype("clip_by_norm", x.dtype());
  }
}

}  // namespace

void add_training_kernels(std::vector<KernelRegistration>& table) {
  const KernelRegistration kernels[] = {
      cpu_kernel<&apply_gradient_descent_kernel>("apply_gradient_descent"),
      cpu_kernel<&apply_momentum_kernel>("apply_momentum"),
      cpu_kernel<&apply_adam_kernel>("apply_adam"),
      cpu_kernel<&apply_rms_prop_kernel<false>>("apply_rms_prop"),
      cpu_kernel<&apply_rms_prop_kernel<true>>("apply_centered_rms_prop"),
      cpu_kernel<&clip_by_norm_kernel>("clip_by_norm", kFusedComposite),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cpu
