// Math kernels (ops/math.h): unary maps, gradient helpers, broadcasting binary ops,
// comparisons, select and fill.
//
// Every loop runs in the tensor's own type over contiguous memory; broadcasting collapses the
// shapes into a few strided dimensions whose innermost one is contiguous or constant for each
// input, so the inner loops stay simple enough to vectorize.
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels_common.h"

namespace trainyard::cpu {
namespace {

// ---------------------------------------------------------------------------------------------
// Unary maps, x -> same. apply(x, a, b) gets ScalarAttrs a and b in x's type.

struct Cheap {
  static constexpr int64_t kThreshold = kParallelThreshold;
  static constexpr bool kUsesAttrs = false;
};
struct Costly {
  static constexpr int64_t kThreshold = kCostlyThreshold;
  static constexpr bool kUsesAttrs = false;
};

struct NegOp : Cheap {
  template <class T>
  static T apply(T x, T, T) {
    return -x;
  }
};
struct AbsOp : Cheap {
  template <class T>
  static T apply(T x, T, T) {
    return std::abs(x);
  }
};
struct SignOp : Cheap {  // NaN stays NaN, as in TensorFlow
  template <class T>
  static T apply(T x, T, T) {
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
  }
};
struct ExpOp : Costly {
  template <class T>
  static T apply(T x, T, T) {
    return std::exp(x);
  }
};
struct LogOp : Costly {
  template <class T>
  static T apply(T x, T, T) {
    return std::log(x);
  }
};
struct Log1pOp : Costly {
  template <class T>
  static T apply(T x, T, T) {
    return std::log1p(x);
  }
};
struct SqrtOp : Cheap {
  template <class T>
  static T apply(T x, T, T) {
    return std::sqrt(x);
  }
};
struct RsqrtOp : Cheap {
  template <class T>
  static T apply(T x, T, T) {
    return T(1) / std::sqrt(x);
  }
};
struct SquareOp : Cheap {
  template <class T>
  static T apply(T x, T, T) {
    return x * x;
  }
};
struct SigmoidOp : Costly {
  template <class T>
  static T apply(T x, T, T) {
    return stable_sigmoid(x);
  }
};
struct TanhOp : Costly {
  template <class T>
  static T apply(T x, T, T) {
    return std::tanh(x);
  }
};
struct ReluOp : Cheap {  // NaN propagates
  template <class T>
  static T apply(T x, T, T) {
    return x < T(0) ? T(0) : x;
  }
};
struct Relu6Op : Cheap {
  template <class T>
  static T apply(T x, T, T) {
    return x < T(0) ? T(0) : (x > T(6) ? T(6) : x);
  }
};
struct EluOp : Costly {
  static constexpr bool kUsesAttrs = true;
  template <class T>
  static T apply(T x, T alpha, T) {
    return x > T(0) ? x : alpha * std::expm1(x);
  }
};
struct SoftplusOp : Costly {
  template <class T>
  static T apply(T x, T, T) {
    return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-std::abs(x)));
  }
};
struct PowScalarOp : Costly {
  static constexpr bool kUsesAttrs = true;
  template <class T>
  static T apply(T x, T exponent, T) {
    return std::pow(x, exponent);
  }
};
struct ClipByValueOp : Cheap {  // NaN propagates
  static constexpr bool kUsesAttrs = true;
  template <class T>
  static T apply(T x, T lo, T hi) {
    const T y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};

template <OpLabel kOp, class F, DTypeSet kSet = DTypeSet::kFloat>
void unary_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  ScalarAttrs attrs;
  if constexpr (F::kUsesAttrs) attrs = args.get_attrs<ScalarAttrs>();
  visit<kSet>(kOp, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = data<T>(x);
    T* out = data<T>(args.outputs[0]);
    const T a = static_cast<T>(attrs.a);
    const T b = static_cast<T>(attrs.b);
    const int64_t n = x.num_elements();
    if constexpr (std::is_same_v<F, PowScalarOp>) {
      if (attrs.a == 2.0) {
#pragma omp parallel for if (n > kParallelThreshold)
        for (int64_t i = 0; i < n; ++i) out[i] = in[i] * in[i];
        return;
      }
      if (attrs.a == 1.0) {
        std::memcpy(out, in, static_cast<std::size_t>(n) * sizeof(T));
        return;
      }
    }
#pragma omp parallel for if (n > F::kThreshold)
    for (int64_t i = 0; i < n; ++i) out[i] = F::apply(in[i], a, b);
  });
}

// f32 sigmoid: stable_sigmoid's formula with fast_exp_nonpositive (about 1 ulp) instead of a
// call to std::exp per element, vectorized (the file is built without trapping math, so GCC
// turns the sign select into a blend). NaN stays NaN; -inf and +inf give 0 and 1. A leaf
// function: the OpenMP region below is outlined, which target_clones would not cover.
TRAINYARD_MULTIVERSION void sigmoid_f32(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = fast_sigmoid(x[i]);
}

void sigmoid_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  if (x.dtype() != DType::kF32) {
    unary_kernel<"sigmoid", SigmoidOp>(backend, args);
    return;
  }
  const float* in = data<float>(x);
  float* out = data<float>(args.outputs[0]);
  const int64_t n = x.num_elements();
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > SigmoidOp::kThreshold)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk;
    sigmoid_f32(in + begin, out + begin, std::min(kChunk, n - begin));
    clear_upper_vector_state();
  }
}

// ---------------------------------------------------------------------------------------------
// Gradient helpers, (y or x, dy) -> same as dy; apply(x, dy, alpha).

struct SigmoidGradOp : Cheap {
  template <class T>
  static T apply(T y, T dy, T) {
    return dy * y * (T(1) - y);
  }
};
struct TanhGradOp : Cheap {
  template <class T>
  static T apply(T y, T dy, T) {
    return dy * (T(1) - y * y);
  }
};
struct ReluGradOp : Cheap {
  template <class T>
  static T apply(T x, T dy, T) {
    return x > T(0) ? dy : T(0);
  }
};
struct Relu6GradOp : Cheap {
  template <class T>
  static T apply(T x, T dy, T) {
    return (x > T(0) && x < T(6)) ? dy : T(0);
  }
};
struct EluGradOp : Costly {
  static constexpr bool kUsesAttrs = true;
  template <class T>
  static T apply(T x, T dy, T alpha) {
    return x > T(0) ? dy : dy * alpha * std::exp(x);
  }
};

template <OpLabel kOp, class F>
void grad_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& dy = args.inputs[1];
  ScalarAttrs attrs;
  if constexpr (F::kUsesAttrs) attrs = args.get_attrs<ScalarAttrs>();
  visit<DTypeSet::kFloat>(kOp, dy.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = data<T>(x);
    const T* dys = data<T>(dy);
    T* out = data<T>(args.outputs[0]);
    const T alpha = static_cast<T>(attrs.a);
    const int64_t n = dy.num_elements();
#pragma omp parallel for if (n > F::kThreshold)
    for (int64_t i = 0; i < n; ++i) out[i] = F::apply(xs[i], dys[i], alpha);
  });
}

// ---------------------------------------------------------------------------------------------
// Broadcasting. The output's dims are walked with each input's stride per dim (0 where the
// input is broadcast); dims of size 1 are dropped and neighbouring dims that every input walks
// contiguously (or not at all) are merged. After that the innermost dim has stride 1 or 0 in
// every input, so equal shapes become one contiguous loop, a scalar a constant operand, and a
// row broadcast over the last dim a loop over contiguous rows.

template <std::size_t N>
struct BroadcastPlan {
  std::size_t rank = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<std::array<int64_t, kMaxRank>, N> strides{};
};

template <std::size_t N>
BroadcastPlan<N> plan_broadcast(const Shape& out, const std::array<const Shape*, N>& in) {
  const std::size_t rank = out.rank();
  std::array<std::array<int64_t, kMaxRank>, N> full{};
  for (std::size_t k = 0; k < N; ++k) {
    const Shape& s = *in[k];
    int64_t stride = 1;
    for (std::size_t i = rank; i-- > 0;) {
      if (i + s.rank() < rank) {
        full[k][i] = 0;
        continue;
      }
      const int64_t d = s[i + s.rank() - rank];
      full[k][i] = d == 1 ? 0 : stride;
      stride *= d;
    }
  }
  BroadcastPlan<N> plan;
  for (std::size_t i = 0; i < rank; ++i) {
    const int64_t d = out[i];
    if (d == 1) continue;
    bool merge = plan.rank > 0;
    for (std::size_t k = 0; k < N && merge; ++k) {
      merge = plan.strides[k][plan.rank - 1] == full[k][i] * d;
    }
    if (merge) {
      plan.dims[plan.rank - 1] *= d;
      for (std::size_t k = 0; k < N; ++k) plan.strides[k][plan.rank - 1] = full[k][i];
    } else {
      plan.dims[plan.rank] = d;
      for (std::size_t k = 0; k < N; ++k) plan.strides[k][plan.rank] = full[k][i];
      ++plan.rank;
    }
  }
  if (plan.rank == 0) {  // every dim is 1: one element
    plan.rank = 1;
    plan.dims[0] = 1;
  }
  return plan;
}

// The innermost dim is cut into tiles so that a few long rows still spread over threads.
inline constexpr int64_t kBroadcastTile = 1 << 14;

// Calls row(out_offset, in_offsets, length, inner_strides) for every contiguous piece of the
// output, in parallel when the output has more than `threshold` elements.
template <std::size_t N, class Row>
void for_each_row(const BroadcastPlan<N>& plan, int64_t total, int64_t threshold, Row&& row) {
  if (total == 0) return;
  const std::size_t outer_rank = plan.rank - 1;
  const int64_t inner = plan.dims[outer_rank];
  const int64_t tiles_per_row = (inner + kBroadcastTile - 1) / kBroadcastTile;
  const int64_t units = (total / inner) * tiles_per_row;
  std::array<int64_t, N> inner_strides{};
  for (std::size_t k = 0; k < N; ++k) inner_strides[k] = plan.strides[k][outer_rank];

#pragma omp parallel if (total > threshold)
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t thread = omp_get_thread_num();
    const int64_t begin = units * thread / threads;
    const int64_t end = units * (thread + 1) / threads;
    if (begin < end) {
      // Position of unit `begin`: its row's index over the outer dims, and its tile.
      std::array<int64_t, kMaxRank> index{};
      std::array<int64_t, N> base{};
      int64_t row_number = begin / tiles_per_row;
      int64_t tile = begin % tiles_per_row;
      for (std::size_t d = outer_rank, r = static_cast<std::size_t>(row_number); d-- > 0;) {
        index[d] = static_cast<int64_t>(r % static_cast<std::size_t>(plan.dims[d]));
        r /= static_cast<std::size_t>(plan.dims[d]);
        for (std::size_t k = 0; k < N; ++k) base[k] += index[d] * plan.strides[k][d];
      }
      for (int64_t unit = begin; unit < end; ++unit) {
        const int64_t start = tile * kBroadcastTile;
        const int64_t length = std::min(kBroadcastTile, inner - start);
        std::array<int64_t, N> offsets;
        for (std::size_t k = 0; k < N; ++k) offsets[k] = base[k] + start * inner_strides[k];
        row(row_number * inner + start, offsets, length, inner_strides);
        if (++tile == tiles_per_row) {
          tile = 0;
          ++row_number;
          for (std::size_t d = outer_rank; d-- > 0;) {
            for (std::size_t k = 0; k < N; ++k) base[k] += plan.strides[k][d];
            if (++index[d] < plan.dims[d]) break;
            for (std::size_t k = 0; k < N; ++k) base[k] -= plan.strides[k][d] * plan.dims[d];
            index[d] = 0;
          }
        }
      }
    }
  }
}

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    (void)x;
    return false;
  }
}

// Binary functors: apply(a, b) -> result (T, or uint8_t for comparisons).
struct AddOp {
  template <class T>
  static T apply(T a, T b) {
    return a + b;
  }
};
struct SubOp {
  template <class T>
  static T apply(T a, T b) {
    return a - b;
  }
};
struct MulOp {
  template <class T>
  static T apply(T a, T b) {
    return a * b;
  }
};
struct DivOp {
  template <class T>
  static T apply(T a, T b) {
    return a / b;
  }
};
struct MaximumOp {  // NaN in either operand propagates
  template <class T>
  static T apply(T a, T b) {
    return (a > b || is_nan(a)) ? a : b;
  }
};
struct MinimumOp {
  template <class T>
  static T apply(T a, T b) {
    return (a < b || is_nan(a)) ? a : b;
  }
};
struct PowOp {
  template <class T>
  static T apply(T a, T b) {
    return std::pow(a, b);
  }
};
struct EqualOp {
  template <class T>
  static uint8_t apply(T a, T b) {
    return a == b;
  }
};
struct NotEqualOp {
  template <class T>
  static uint8_t apply(T a, T b) {
    return a != b;
  }
};
struct LessOp {
  template <class T>
  static uint8_t apply(T a, T b) {
    return a < b;
  }
};
struct LessEqualOp {
  template <class T>
  static uint8_t apply(T a, T b) {
    return a <= b;
  }
};
struct GreaterOp {
  template <class T>
  static uint8_t apply(T a, T b) {
    return a > b;
  }
};
struct GreaterEqualOp {
  template <class T>
  static uint8_t apply(T a, T b) {
    return a >= b;
  }
};

template <class F, class T, class R>
void binary_row(const T* a, int64_t stride_a, const T* b, int64_t stride_b, R* out, int64_t n) {
  if (stride_a == 1 && stride_b == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = F::apply(a[i], b[i]);
  } else if (stride_a == 1) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = F::apply(a[i], bv);
  } else if (stride_b == 1) {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = F::apply(av, b[i]);
  } else {
    const R v = F::apply(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

template <OpLabel kOp, class F, DTypeSet kSet, bool kCompare = false, bool kCostly = false>
void binary_kernel(Backend&, const KernelArgs& args) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& out = args.outputs[0];
  const auto plan = plan_broadcast<2>(out.shape(), {&a.shape(), &b.shape()});
  const int64_t threshold = kCostly ? kCostlyThreshold : kParallelThreshold;
  visit<kSet>(kOp, a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using R = std::conditional_t<kCompare, uint8_t, T>;
    const T* pa = data<T>(a);
    const T* pb = data<T>(b);
    R* po = data<R>(out);
    for_each_row(plan, out.num_elements(), threshold,
                 [&](int64_t o, const std::array<int64_t, 2>& in, int64_t n,
                     const std::array<int64_t, 2>& stride) {
                   binary_row<F>(pa + in[0], stride[0], pb + in[1], stride[1], po + o, n);
                 });
  });
}

void where_kernel(Backend&, const KernelArgs& args) {
  const Tensor& cond = args.inputs[0];
  const Tensor& a = args.inputs[1];
  const Tensor& b = args.inputs[2];
  const Tensor& out = args.outputs[0];
  const auto plan = plan_broadcast<3>(out.shape(), {&cond.shape(), &a.shape(), &b.shape()});
  const uint8_t* pc = data<uint8_t>(cond);
  visit<DTypeSet::kAll>("where", a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = data<T>(a);
    const T* pb = data<T>(b);
    T* po = data<T>(out);
    for_each_row(plan, out.num_elements(), kParallelThreshold,
                 [&](int64_t o, const std::array<int64_t, 3>& in, int64_t n,
                     const std::array<int64_t, 3>& s) {
                   const uint8_t* c = pc + in[0];
                   const T* x = pa + in[1];
                   const T* y = pb + in[2];
                   T* z = po + o;
                   if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
                     for (int64_t i = 0; i < n; ++i) {
                       const T xv = x[i];  // both loaded, so the select vectorizes
                       const T yv = y[i];
                       z[i] = c[i] != 0 ? xv : yv;
                     }
                   } else {
                     for (int64_t i = 0; i < n; ++i) z[i] = c[i * s[0]] ? x[i * s[1]] : y[i * s[2]];
                   }
                 });
  });
}

// ---------------------------------------------------------------------------------------------
// Fill.

// Round to nearest even, NaN kept quiet.
uint16_t to_bf16_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

uint16_t to_f16_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal in units of 2^-24
    const float units = std::bit_cast<float>(magnitude) * 0x1.0p24f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(units)));
  }
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u) - 0x38000000u;
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

template <class T>
void fill_with(const Tensor& out, T value) {
  T* p = data<T>(out);
  const int64_t n = out.num_elements();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

void fill_kernel(Backend&, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const double v = args.get_attrs<FillAttrs>().value;
  switch (out.dtype()) {
    case DType::kF32:
      return fill_with(out, static_cast<float>(v));
    case DType::kF64:
      return fill_with(out, v);
    case DType::kBF16:
      return fill_with(out, to_bf16_bits(static_cast<float>(v)));
    case DType::kF16:
      return fill_with(out, to_f16_bits(static_cast<float>(v)));
    case DType::kI32:
      return fill_with(out, static_cast<int32_t>(v));
    case DType::kI64:
      return fill_with(out, static_cast<int64_t>(v));
    case DType::kU8:
      return fill_with(out, static_cast<uint8_t>(static_cast<int64_t>(v)));
    case DType::kBool:
      return fill_with(out, static_cast<uint8_t>(v != 0.0));
  }
  unsupported_dtype("fill", out.dtype());
}

}  // namespace

void add_math_kernels(std::vector<KernelRegistration>& table) {
  constexpr auto kFloat = DTypeSet::kFloat;
  constexpr auto kNumeric = DTypeSet::kNumeric;
  constexpr auto kAll = DTypeSet::kAll;
  const KernelRegistration kernels[] = {
      cpu_kernel<&unary_kernel<"neg", NegOp, kNumeric>>("neg"),
      cpu_kernel<&unary_kernel<"abs", AbsOp, kNumeric>>("abs"),
      cpu_kernel<&unary_kernel<"sign", SignOp, kNumeric>>("sign"),
      cpu_kernel<&unary_kernel<"exp", ExpOp>>("exp"),
      cpu_kernel<&unary_kernel<"log", LogOp>>("log"),
      cpu_kernel<&unary_kernel<"log1p", Log1pOp>>("log1p"),
      cpu_kernel<&unary_kernel<"sqrt", SqrtOp>>("sqrt"),
      cpu_kernel<&unary_kernel<"rsqrt", RsqrtOp>>("rsqrt"),
      cpu_kernel<&unary_kernel<"square", SquareOp>>("square"),
      cpu_kernel<&sigmoid_kernel>("sigmoid"),
      cpu_kernel<&unary_kernel<"tanh", TanhOp>>("tanh"),
      cpu_kernel<&unary_kernel<"relu", ReluOp>>("relu"),
      cpu_kernel<&unary_kernel<"relu6", Relu6Op>>("relu6"),
      cpu_kernel<&unary_kernel<"elu", EluOp>>("elu"),
      cpu_kernel<&unary_kernel<"softplus", SoftplusOp>>("softplus"),
      cpu_kernel<&unary_kernel<"pow_scalar", PowScalarOp>>("pow_scalar"),
      cpu_kernel<&unary_kernel<"clip_by_value", ClipByValueOp>>("clip_by_value"),
      cpu_kernel<&fill_kernel>("fill"),

      cpu_kernel<&grad_kernel<"sigmoid_grad", SigmoidGradOp>>("sigmoid_grad"),
      cpu_kernel<&grad_kernel<"tanh_grad", TanhGradOp>>("tanh_grad"),
      cpu_kernel<&grad_kernel<"relu_grad", ReluGradOp>>("relu_grad"),
      cpu_kernel<&grad_kernel<"relu6_grad", Relu6GradOp>>("relu6_grad"),
      cpu_kernel<&grad_kernel<"elu_grad", EluGradOp>>("elu_grad"),

      cpu_kernel<&binary_kernel<"add", AddOp, kNumeric>>("add"),
      cpu_kernel<&binary_kernel<"sub", SubOp, kNumeric>>("sub"),
      cpu_kernel<&binary_kernel<"mul", MulOp, kNumeric>>("mul"),
      cpu_kernel<&binary_kernel<"div", DivOp, kFloat>>("div"),
      cpu_kernel<&binary_kernel<"maximum", MaximumOp, kNumeric>>("maximum"),
      cpu_kernel<&binary_kernel<"minimum", MinimumOp, kNumeric>>("minimum"),
      cpu_kernel<&binary_kernel<"pow", PowOp, kFloat, false, true>>("pow"),
      cpu_kernel<&binary_kernel<"equal", EqualOp, kAll, true>>("equal"),
      cpu_kernel<&binary_kernel<"not_equal", NotEqualOp, kAll, true>>("not_equal"),
      cpu_kernel<&binary_kernel<"less", LessOp, kAll, true>>("less"),
      cpu_kernel<&binary_kernel<"less_equal", LessEqualOp, kAll, true>>("less_equal"),
      cpu_kernel<&binary_kernel<"greater", GreaterOp, kAll, true>>("greater"),
      cpu_kernel<&binary_kernel<"greater_equal", GreaterEqualOp, kAll, true>>("greater_equal"),
      cpu_kernel<&where_kernel>("where"),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cpu
