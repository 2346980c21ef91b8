// Batch norm kernels: the ops batch_norm_training, batch_norm_inference and batch_norm_grad
// (ops/nn.h, registered by add_nn_kernels) and the fused kernels of pkg/layers' batch norm +
// activation composites (pkg/layers/src/batch_norm_activation.cc), which share their loops.
//
// x is viewed as [rows, c], normalized per column. Own loops for both dtypes. Statistics
// accumulate in double over fixed chunks of rows summed in order, so they are accurate for data
// far from zero and do not depend on the thread count (oneDNN's f32 statistics lose about 1e-5
// relative on data with mean 100 and unit spread).
//
// The fused kernels make the passes the op kernels make and no more: the forward writes y once
// (normalize, scale, shift and the activation in one loop), the backward applies the
// activation's mask inside batch_norm_grad's two passes, recomputing the pre-activation from x
// with the forward's own per-column scale (the training composite's fourth output). Their
// arithmetic is the op kernels' followed by relu / relu6 / relu_grad / relu6_grad, operation
// for operation, so they give the same bits as the ops they replace.
//
// The f32 row loops are compiled for AVX-512, AVX2 and baseline x86-64 (target_clones,
// kernels_common.h) without contracting multiplies and adds (-ffp-contract=off for this file),
// so the bits do not depend on the machine or the thread count.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "kernels_common.h"
#include "kernels_dnnl.h"

namespace trainyard::cpu {
namespace {

// The attributes of the layers.batch_norm_activation_* composites, by agreement with
// pkg/layers/include/trainyard/pkg/layers/batch_norm_activation.h (BatchNormActivationAttrs).
enum class NormActivation : uint32_t { kNone = 0, kRelu = 1, kRelu6 = 2 };
struct BatchNormActivationAttrs {
  double epsilon = 1e-3;
  NormActivation activation = NormActivation::kNone;
};

// relu / relu6 as kernels_math.cc computes them (NaN propagates).
template <NormActivation kAct, class T>
inline T activate(T z) {
  if constexpr (kAct == NormActivation::kRelu) {
    return z < T(0) ? T(0) : z;
  } else if constexpr (kAct == NormActivation::kRelu6) {
    return z < T(0) ? T(0) : (z > T(6) ? T(6) : z);
  } else {
    return z;
  }
}

// dy where the activation passes its input's gradient (relu_grad / relu6_grad), else +0: the
// selects of kernels_math.cc, written as a bit mask so that GCC vectorizes the loops around it
// (a ?: there leaves them scalar, "control flow in loop").
template <NormActivation kAct, class T>
inline T masked(T z, T dy) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits pass;
  if constexpr (kAct == NormActivation::kRelu) {
    pass = Bits(z > T(0));
  } else if constexpr (kAct == NormActivation::kRelu6) {
    pass = Bits(z > T(0)) & Bits(z < T(6));
  } else {
    return dy;
  }
  return std::bit_cast<T>(std::bit_cast<Bits>(dy) & (Bits(0) - pass));
}

std::shared_ptr<Storage> scratch(Backend& backend, std::size_t bytes) {
  return backend.allocate(bytes);
}

// A per-call array from the backend's caching allocator.
template <class T>
class ScratchArray {
 public:
  ScratchArray(Backend& backend, int64_t size)
      : storage_(
            scratch(backend, static_cast<std::size_t>(std::max<int64_t>(size, 1)) * sizeof(T))),
        data_(reinterpret_cast<T*>(static_cast<CpuStorage*>(storage_.get())->data())) {}
  T* data() const { return data_; }
  T& operator[](int64_t i) const { return data_[i]; }

 private:
  std::shared_ptr<Storage> storage_;
  T* data_;
};

// ---- Row loops ----
// Rows [r0, r1) of x viewed as [rows, c]. Inlined into the f32 entry points below, compiled per
// ISA; f64 runs them at the baseline ISA. This file is compiled with -ffp-contract=off, so no
// clone fuses a multiply and an add: every clone gives the baseline's bits.

// y = activation((x - mean) * scale + shift) per column.
template <class T, NormActivation kAct>
[[gnu::always_inline]] inline void apply_rows(int64_t r0, int64_t r1, int64_t c, const T* x,
                                              const T* mean, const T* scale, const T* shift, T* y) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * c;
    T* yr = y + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) {
      yr[j] = activate<kAct>((xr[j] - mean[j]) * scale[j] + shift[j]);
    }
  }
}

// a1 += x - x[0], a2 += (x - x[0])^2 per column, in double.
template <class T>
[[gnu::always_inline]] inline void moment_rows(int64_t r0, int64_t r1, int64_t c, const T* x,
                                               double* a1, double* a2) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) {
      const double d = double(xr[j]) - double(x[j]);
      a1[j] += d;
      a2[j] += d * d;
    }
  }
}

// dz = the activation's mask on dy at z = (x - mean) * scale + beta, recomputed as the forward
// computed it (scale and beta are unused without an activation).
template <class T, NormActivation kAct>
[[gnu::always_inline]] inline T masked_dy(T x, T dy, T mean, const T* scale, const T* beta,
                                          int64_t j) {
  if constexpr (kAct == NormActivation::kNone) {
    return dy;
  } else {
    return masked<kAct>((x - mean) * scale[j] + beta[j], dy);
  }
}

// a1 += dz, a2 += dz * (x - mean) per column, in double.
template <class T, NormActivation kAct>
[[gnu::always_inline]] inline void grad_sum_rows(int64_t r0, int64_t r1, int64_t c, const T* x,
                                                 const T* dy, const T* mean, const T* scale,
                                                 const T* beta, double* a1, double* a2) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * c;
    const T* dyr = dy + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) {
      const double dz = double(masked_dy<T, kAct>(xr[j], dyr[j], mean[j], scale, beta, j));
      a1[j] += dz;
      a2[j] += dz * (double(xr[j]) - double(mean[j]));
    }
  }
}

// dx = a * dz + b * (x - mean) + d per column.
template <class T, NormActivation kAct>
[[gnu::always_inline]] inline void grad_dx_rows(int64_t r0, int64_t r1, int64_t c, const T* x,
                                                const T* dy, const T* mean, const T* scale,
                                                const T* beta, const T* a, const T* b, const T* d,
                                                T* dx) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * c;
    const T* dyr = dy + r * c;
    T* dxr = dx + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) {
      const T dz = masked_dy<T, kAct>(xr[j], dyr[j], mean[j], scale, beta, j);
      dxr[j] = a[j] * dz + b[j] * (xr[j] - mean[j]) + d[j];
    }
  }
}

// The f32 entry points, per ISA (target_clones); the activation is switched outside the loops.
#define TRAINYARD_BN_BY_ACTIVATION(act, loop, ...)             \
  switch (act) {                                               \
    case NormActivation::kRelu:                                \
      return loop<float, NormActivation::kRelu>(__VA_ARGS__);  \
    case NormActivation::kRelu6:                               \
      return loop<float, NormActivation::kRelu6>(__VA_ARGS__); \
    case NormActivation::kNone:                                \
      return loop<float, NormActivation::kNone>(__VA_ARGS__);  \
  }

TRAINYARD_MULTIVERSION
void apply_rows_f32(NormActivation act, int64_t r0, int64_t r1, int64_t c, const float* x,
                    const float* mean, const float* scale, const float* shift, float* y){
    TRAINYARD_BN_BY_ACTIVATION(act, apply_rows, r0, r1, c, x, mean, scale, shift, y)}

TRAINYARD_MULTIVERSION void moment_rows_f32(int64_t r0, int64_t r1, int64_t c, const float* x,
                                            double* a1, double* a2) {
  moment_rows<float>(r0, r1, c, x, a1, a2);
}

TRAINYARD_MULTIVERSION
void grad_sum_rows_f32(NormActivation act, int64_t r0, int64_t r1, int64_t c, const float* x,
                       const float* dy, const float* mean, const float* scale, const float* beta,
                       double* a1, double* a2){
    TRAINYARD_BN_BY_ACTIVATION(act, grad_sum_rows, r0, r1, c, x, dy, mean, scale, beta, a1, a2)}

TRAINYARD_MULTIVERSION
    void grad_dx_rows_f32(NormActivation act, int64_t r0, int64_t r1, int64_t c, const float* x,
                          const float* dy, const float* mean, const float* scale, const float* beta,
                          const float* a, const float* b, const float* d, float* dx) {
  TRAINYARD_BN_BY_ACTIVATION(act, grad_dx_rows, r0, r1, c, x, dy, mean, scale, beta, a, b, d, dx)
}

#undef TRAINYARD_BN_BY_ACTIVATION

// Rows per block: about 4096 elements (a few pages of each stream), at least one row.
int64_t rows_per_block(int64_t c) { return std::max<int64_t>(1, 4096 / std::max<int64_t>(c, 1)); }

// sum0[j], sum1[j] = per-column sums over all rows of what add_rows(r0, r1, s0, s1) adds to
// s0[j], s1[j] for rows [r0, r1): per block of rows, the blocks' sums added in order.
template <class AddRows>
void column_sums(Backend& backend, int64_t rows, int64_t c, AddRows add_rows, double* sum0,
                 double* sum1) {
  const int64_t chunk = rows_per_block(c);
  const int64_t chunks = ceil_div(rows, chunk);
  ScratchArray<double> partial(backend, chunks * 2 * c);
#pragma omp parallel for schedule(static) if (rows * c > kParallelThreshold)
  for (int64_t k = 0; k < chunks; ++k) {
    double* s0 = partial.data() + k * 2 * c;
    double* s1 = s0 + c;
    std::fill_n(s0, 2 * c, 0.0);
    add_rows(k * chunk, std::min(rows, (k + 1) * chunk), s0, s1);
  }
  std::fill_n(sum0, c, 0.0);
  std::fill_n(sum1, c, 0.0);
  for (int64_t k = 0; k < chunks; ++k) {
    for (int64_t j = 0; j < c; ++j) {
      sum0[j] += partial[k * 2 * c + j];
      sum1[j] += partial[k * 2 * c + c + j];
    }
  }
}

// Calls rows(r0, r1) over all rows in blocks, in parallel.
template <class Rows>
void for_row_blocks(int64_t rows, int64_t c, Rows run) {
  const int64_t chunk = rows_per_block(c);
  const int64_t chunks = ceil_div(rows, chunk);
#pragma omp parallel for schedule(static) if (rows * c > kParallelThreshold)
  for (int64_t k = 0; k < chunks; ++k) run(k * chunk, std::min(rows, (k + 1) * chunk));
}

// y = activation((x - mean) * scale + shift) per column.
template <class T, NormActivation kAct>
void batch_norm_apply(int64_t rows, int64_t c, const T* x, const T* mean, const T* scale,
                      const T* shift, T* y) {
  for_row_blocks(rows, c, [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<T, float>) {
      apply_rows_f32(kAct, r0, r1, c, x, mean, scale, shift, y);
      clear_upper_vector_state();
    } else {
      apply_rows<T, kAct>(r0, r1, c, x, mean, scale, shift, y);
    }
  });
}

template <class T, NormActivation kAct>
void batch_norm_inference_loops(Backend& backend, int64_t rows, int64_t c, const T* x,
                                const T* gamma, const T* beta, const T* mean, const T* variance,
                                double epsilon, T* y) {
  ScratchArray<T> scale(backend, c);
  for (int64_t j = 0; j < c; ++j) {
    scale[j] = static_cast<T>(double(gamma[j]) / std::sqrt(double(variance[j]) + epsilon));
  }
  batch_norm_apply<T, kAct>(rows, c, x, mean, scale.data(), beta, y);
}

// scale_out, when not null, receives the per-column scale y was computed with.
template <class T, NormActivation kAct>
void batch_norm_training_loops(Backend& backend, int64_t rows, int64_t c, const T* x,
                               const T* gamma, const T* beta, double epsilon, T* y, T* mean,
                               T* variance, T* scale_out) {
  // Sums of x - x[0] and its square: one pass, and no cancellation worth the name in double.
  ScratchArray<double> sums(backend, 2 * c);
  double* s1 = sums.data();
  double* s2 = s1 + c;
  column_sums(
      backend, rows, c,
      [&](int64_t r0, int64_t r1, double* a1, double* a2) {
        if constexpr (std::is_same_v<T, float>) {
          moment_rows_f32(r0, r1, c, x, a1, a2);
          clear_upper_vector_state();
        } else {
          moment_rows<T>(r0, r1, c, x, a1, a2);
        }
      },
      s1, s2);
  ScratchArray<T> scratch_scale(backend, scale_out != nullptr ? 0 : c);
  T* scale = scale_out != nullptr ? scale_out : scratch_scale.data();
  const double n = double(rows);
  for (int64_t j = 0; j < c; ++j) {
    const double m = s1[j] / n;
    const double v = std::max(s2[j] / n - m * m, 0.0);
    mean[j] = static_cast<T>((rows > 0 ? double(x[j]) : 0.0) + m);
    variance[j] = static_cast<T>(v);
    scale[j] = static_cast<T>(double(gamma[j]) / std::sqrt(v + epsilon));
  }
  batch_norm_apply<T, kAct>(rows, c, x, mean, scale, beta, y);
}

// dz = the activation's mask on dy, the pre-activation z = (x - mean) * scale + beta recomputed
// as the forward computed it (scale and beta are unused without an activation). Then
// dbeta = sum dz, dgamma = sum dz * xhat,
// dx = gamma * inv_std * (dz - (dbeta + xhat * dgamma) / rows) with xhat = (x - mean) inv_std.
template <class T, NormActivation kAct>
void batch_norm_grad_loops(Backend& backend, int64_t rows, int64_t c, const T* x, const T* gamma,
                           const T* beta, const T* mean, const T* variance, const T* scale,
                           const T* dy, double epsilon, T* dx, T* dgamma, T* dbeta) {
  ScratchArray<double> sums(backend, 2 * c);
  double* sum_dy = sums.data();
  double* sum_dy_xc = sum_dy + c;
  column_sums(
      backend, rows, c,
      [&](int64_t r0, int64_t r1, double* a1, double* a2) {
        if constexpr (std::is_same_v<T, float>) {
          grad_sum_rows_f32(kAct, r0, r1, c, x, dy, mean, scale, beta, a1, a2);
          clear_upper_vector_state();
        } else {
          grad_sum_rows<T, kAct>(r0, r1, c, x, dy, mean, scale, beta, a1, a2);
        }
      },
      sum_dy, sum_dy_xc);
  // dx = a * dz + b * (x - mean) + d per column.
  ScratchArray<T> coefficients(backend, 3 * c);
  T* a = coefficients.data();
  T* b = a + c;
  T* d = b + c;
  const double n = double(rows);
  for (int64_t j = 0; j < c; ++j) {
    const double inv_std = 1.0 / std::sqrt(double(variance[j]) + epsilon);
    const double g = double(gamma[j]) * inv_std;
    const double dg = sum_dy_xc[j] * inv_std;
    dbeta[j] = static_cast<T>(sum_dy[j]);
    dgamma[j] = static_cast<T>(dg);
    a[j] = static_cast<T>(g);
    b[j] = static_cast<T>(-g * inv_std * dg / n);
    d[j] = static_cast<T>(-g * sum_dy[j] / n);
  }
  for_row_blocks(rows, c, [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<T, float>) {
      grad_dx_rows_f32(kAct, r0, r1, c, x, dy, mean, scale, beta, a, b, d, dx);
      clear_upper_vector_state();
    } else {
      grad_dx_rows<T, kAct>(r0, r1, c, x, dy, mean, scale, beta, a, b, d, dx);
    }
  });
}

// ---- The ops ----

template <class T, OpLabel kOp>
void batch_norm_loops(Backend& backend, int64_t rows, int64_t c, double epsilon,
                      const KernelArgs& args) {
  auto in = [&](std::size_t i) { return data<T>(args.inputs[i]); };
  auto out = [&](std::size_t i) { return data<T>(args.outputs[i]); };
  constexpr NormActivation kNone = NormActivation::kNone;
  if constexpr (kOp == "batch_norm_training") {
    return batch_norm_training_loops<T, kNone>(backend, rows, c, in(0), in(1), in(2), epsilon,
                                               out(0), out(1), out(2), nullptr);
  } else if constexpr (kOp == "batch_norm_inference") {
    return batch_norm_inference_loops<T, kNone>(backend, rows, c, in(0), in(1), in(2), in(3), in(4),
                                                epsilon, out(0));
  } else {
    return batch_norm_grad_loops<T, kNone>(backend, rows, c, in(0), in(1), nullptr, in(2), in(3),
                                           nullptr, in(4), epsilon, out(0), out(1), out(2));
  }
}

template <OpLabel kOp>
void batch_norm_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const int64_t c = x.shape()[x.shape().rank() - 1];
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  const double epsilon = args.get_attrs<BatchNormAttrs>().epsilon;
  switch (x.dtype()) {
    case DType::kF32:
      return batch_norm_loops<float, kOp>(backend, rows, c, epsilon, args);
    case DType::kF64:
      return batch_norm_loops<double, kOp>(backend, rows, c, epsilon, args);
    default:
      unsupported_dtype(kOp.name, x.dtype());
  }
}

// ---- The fused composites ----
// layers.batch_norm_activation_training (x, gamma, beta) -> (y, batch_mean, batch_variance,
//   scale [C]);
// layers.batch_norm_activation_inference (x, gamma, beta, mean, variance) -> y;
// layers.batch_norm_activation_grad (x, gamma, beta, batch_mean, batch_variance, scale, dy)
//   -> (dx, dgamma, dbeta).

template <class T, OpLabel kOp, NormActivation kAct>
void fused_loops(Backend& backend, int64_t rows, int64_t c, double epsilon,
                 const KernelArgs& args) {
  auto in = [&](std::size_t i) { return data<T>(args.inputs[i]); };
  auto out = [&](std::size_t i) { return data<T>(args.outputs[i]); };
  if constexpr (kOp == "layers.batch_norm_activation_training") {
    return batch_norm_training_loops<T, kAct>(backend, rows, c, in(0), in(1), in(2), epsilon,
                                              out(0), out(1), out(2), out(3));
  } else if constexpr (kOp == "layers.batch_norm_activation_inference") {
    return batch_norm_inference_loops<T, kAct>(backend, rows, c, in(0), in(1), in(2), in(3), in(4),
                                               epsilon, out(0));
  } else {
    return batch_norm_grad_loops<T, kAct>(backend, rows, c, in(0), in(1), in(2), in(3), in(4),
                                          in(5), in(6), epsilon, out(0), out(1), out(2));
  }
}

template <class T, OpLabel kOp>
void fused_dispatch(Backend& backend, int64_t rows, int64_t c, const BatchNormActivationAttrs& a,
                    const KernelArgs& args) {
  switch (a.activation) {
    case NormActivation::kNone:
      return fused_loops<T, kOp, NormActivation::kNone>(backend, rows, c, a.epsilon, args);
    case NormActivation::kRelu:
      return fused_loops<T, kOp, NormActivation::kRelu>(backend, rows, c, a.epsilon, args);
    case NormActivation::kRelu6:
      return fused_loops<T, kOp, NormActivation::kRelu6>(backend, rows, c, a.epsilon, args);
  }
  throw InvalidArgument(std::string(kOp.name) + ": unknown activation code " +
                        std::to_string(static_cast<uint32_t>(a.activation)));
}

template <OpLabel kOp>
void batch_norm_activation_kernel(Backend& backend, const KernelArgs& args) {
  // attrs_size is 0 where a caller does not say it (the opaque test fixture's trampoline).
  if (args.attrs == nullptr ||
      (args.attrs_size != 0 && args.attrs_size != sizeof(BatchNormActivationAttrs))) {
    throw InvalidArgument(
        std::string(kOp.name) + ": expects BatchNormActivationAttrs (" +
        std::to_string(sizeof(BatchNormActivationAttrs)) + " bytes), got " +
        (args.attrs == nullptr ? std::string("none") : std::to_string(args.attrs_size) + " bytes"));
  }
  const auto& attrs = args.get_attrs<BatchNormActivationAttrs>();
  const Tensor& x = args.inputs[0];
  const int64_t c = x.shape()[x.shape().rank() - 1];
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  switch (x.dtype()) {
    case DType::kF32:
      return fused_dispatch<float, kOp>(backend, rows, c, attrs, args);
    case DType::kF64:
      return fused_dispatch<double, kOp>(backend, rows, c, attrs, args);
    default:
      unsupported_dtype(kOp.name, x.dtype());
  }
}

}  // namespace

void add_batch_norm_kernels(std::vector<KernelRegistration>& table) {
  const KernelRegistration kernels[] = {
      cpu_kernel<&batch_norm_kernel<"batch_norm_training">>("batch_norm_training"),
      cpu_kernel<&batch_norm_kernel<"batch_norm_inference">>("batch_norm_inference"),
      cpu_kernel<&batch_norm_kernel<"batch_norm_grad">>("batch_norm_grad"),
      cpu_kernel<&batch_norm_activation_kernel<"layers.batch_norm_activation_training">>(
          "layers.batch_norm_activation_training", kFusedComposite),
      cpu_kernel<&batch_norm_activation_kernel<"layers.batch_norm_activation_inference">>(
          "layers.batch_norm_activation_inference", kFusedComposite),
      cpu_kernel<&batch_norm_activation_kernel<"layers.batch_norm_activation_grad">>(
          "layers.batch_norm_activation_grad", kFusedComposite),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cpu
