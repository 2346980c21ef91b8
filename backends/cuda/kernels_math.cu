// The CUDA kernels of the math ops (core/src/ops/math.cc): fill, unary maps and their gradient
// helpers, broadcasting binary arithmetic and comparisons, where; and the two elementwise ops of
// the array family (core/src/ops/array.cc), cast and copy.
//
// Dtypes and numerics mirror the CPU backend (backends/cpu/kernels_math.cc, cast and copy in
// backends/cpu/kernels_array.cc). Every element is computed by one thread from its inputs alone,
// so results never depend on the launch configuration or timing.
//
// Elementwise work is a function object applied by one of two grid-stride kernels: map_kernel
// over contiguous tensors of the output's size (equal shapes; a scalar operand is bound into the
// function object), and broadcast_kernel, which finds each input's element through a
// BroadcastPlan.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels.cuh"

namespace trainyard::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// Launching elementwise work.

// out[i] = f(in[i]...) for i < n.
template <class F, class R, class... T>
__global__ void map_kernel(int64_t n, F f, R* __restrict__ out, const T* __restrict__... in) {
  TRAINYARD_GRID_LOOP(i, n) { out[i] = f(in[i]...); }
}

// How output elements map to input elements under NumPy broadcasting. The output's dims are
// walked row-major with each input's stride per dim (0 where the input is broadcast); dims of
// size 1 are dropped and neighbouring dims that every input walks contiguously (or not at all)
// are merged: a bias row broadcast over a matrix walks two dims (one division per element), a
// scalar operand one (none).
template <std::size_t N>
struct BroadcastPlan {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[N][kMaxRank] = {};

  // The offset in each input of output element i.
  __device__ void locate(int64_t i, int64_t (&offset)[N]) const {
    for (std::size_t k = 0; k < N; ++k) offset[k] = 0;
    for (int d = rank - 1; d > 0; --d) {
      const int64_t outer = i / size[d];
      const int64_t coordinate = i - outer * size[d];
      for (std::size_t k = 0; k < N; ++k) offset[k] += coordinate * stride[k][d];
      i = outer;
    }
    for (std::size_t k = 0; k < N; ++k) offset[k] += i * stride[k][0];
  }
};

template <std::size_t N>
BroadcastPlan<N> plan_broadcast(const Shape& out, const std::array<const Shape*, N>& in) {
  const std::size_t rank = out.rank();
  // Each input's stride per output dim; inputs are aligned on their last dim.
  int64_t full[N][kMaxRank] = {};
  for (std::size_t k = 0; k < N; ++k) {
    const Shape& shape = *in[k];
    const std::size_t lead = rank - shape.rank();
    int64_t stride = 1;
    for (std::size_t i = rank; i-- > lead;) {
      const int64_t d = shape[i - lead];
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
      merge = plan.stride[k][plan.rank - 1] == full[k][i] * d;
    }
    if (!merge) ++plan.rank;
    const int last = plan.rank - 1;
    plan.size[last] = merge ? plan.size[last] * d : d;
    for (std::size_t k = 0; k < N; ++k) plan.stride[k][last] = full[k][i];
  }
  return plan;
}

// f of the inputs' elements at `offset`.
template <class F, std::size_t... K, class... T>
__device__ auto apply_at(const F& f, const int64_t* offset, std::index_sequence<K...>,
                         const T*... in) {
  return f(in[offset[K]]...);
}

// out[i] = f(in[offset of output element i in that input]...) for i < n.
template <class F, class R, class... T>
__global__ void broadcast_kernel(int64_t n,
                                 const __grid_constant__ BroadcastPlan<sizeof...(T)> plan, F f,
                                 R* __restrict__ out, const T* __restrict__... in) {
  TRAINYARD_GRID_LOOP(i, n) {
    int64_t offset[sizeof...(T)];
    plan.locate(i, offset);
    out[i] = apply_at(f, offset, std::index_sequence_for<T...>{}, in...);
  }
}

// Queues map_kernel on the kernel's stream.
template <class F, class R, class... T>
void launch_map(const KernelArgs& args, int64_t n, F f, R* out, const T*... in) {
  if (n == 0) return;
  map_kernel<<<blocks_for(n), kThreads, 0, stream_of(args)>>>(n, f, out, in...);
  check_launch(args.op);
}

// Queues out = f(in...) with the inputs (of `shapes`) broadcast to args.outputs[0]: map_kernel
// when every input has the output's size, else broadcast_kernel.
template <class F, class R, class... T>
void launch_broadcast(const KernelArgs& args, const std::array<const Shape*, sizeof...(T)>& shapes,
                      F f, R* out, const T*... in) {
  const Shape& out_shape = args.outputs[0].shape();
  const int64_t n = out_shape.num_elements();
  if (n == 0) return;
  bool same = true;
  for (const Shape* shape : shapes) same = same && shape->num_elements() == n;
  if (same) {
    map_kernel<<<blocks_for(n), kThreads, 0, stream_of(args)>>>(n, f, out, in...);
  } else {
    broadcast_kernel<<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        n, plan_broadcast(out_shape, shapes), f, out, in...);
  }
  check_launch(args.op);
}

// Queues a copy of src's bytes into dst (same size) on the kernel's stream.
void copy_bytes(const KernelArgs& args, const Tensor& dst, const Tensor& src) {
  const std::size_t bytes = src.size_bytes();
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(data<std::byte>(dst), data<std::byte>(src), bytes,
                             cudaMemcpyDeviceToDevice, stream_of(args)),
             std::string("op ") + args.op + ": cudaMemcpyAsync");
}

template <class T>
__device__ bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return isnan(x);
  } else {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Unary maps, x -> same dtype: op(x, a, b) with ScalarAttrs a and b in x's type (kUsesAttrs).

struct IgnoresAttrs {
  static constexpr bool kUsesAttrs = false;
};
struct UsesAttrs {
  static constexpr bool kUsesAttrs = true;
};

struct Neg : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return -x;
  }
};
struct Abs : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T, T) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fabs(x);
    } else {
      return x < T(0) ? -x : x;
    }
  }
};
struct Sign : IgnoresAttrs {  // 0 and NaN map to themselves
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
  }
};
struct Exp : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return std::exp(x);
  }
};
struct Log : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return std::log(x);
  }
};
struct Log1p : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return std::log1p(x);
  }
};
struct Sqrt : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return std::sqrt(x);
  }
};
struct Rsqrt : IgnoresAttrs {  // correctly rounded sqrt and division, as on the CPU (not rsqrt())
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return T(1) / std::sqrt(x);
  }
};
struct Square : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return x * x;
  }
};
struct Sigmoid : IgnoresAttrs {  // from exp(-|x|), which cannot overflow
  template <class T>
  __device__ T operator()(T x, T, T) const {
    const T e = std::exp(-std::fabs(x));
    const T s = T(1) / (T(1) + e);
    return x >= T(0) ? s : e * s;
  }
};
struct Tanh : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return std::tanh(x);
  }
};
struct Relu : IgnoresAttrs {  // NaN propagates
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return x < T(0) ? T(0) : x;
  }
};
struct Relu6 : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return x < T(0) ? T(0) : (x > T(6) ? T(6) : x);
  }
};
struct Elu : UsesAttrs {
  template <class T>
  __device__ T operator()(T x, T alpha, T) const {
    return x > T(0) ? x : alpha * std::expm1(x);
  }
};
struct Softplus : IgnoresAttrs {  // max(x, 0) + log1p(exp(-|x|)): no overflow
  template <class T>
  __device__ T operator()(T x, T, T) const {
    return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-std::fabs(x)));
  }
};
struct PowScalar : UsesAttrs {
  template <class T>
  __device__ T operator()(T x, T exponent, T) const {
    return std::pow(x, exponent);
  }
};
struct ClipByValue : UsesAttrs {  // NaN propagates
  template <class T>
  __device__ T operator()(T x, T lo, T hi) const {
    const T y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};

// A unary op with its attributes bound: x -> op(x, a, b).
template <class Op, class T>
struct WithAttrs {
  T a, b;
  __device__ T operator()(T x) const { return Op{}(x, a, b); }
};

ScalarAttrs scalar_attrs(const KernelArgs& args, bool uses_attrs) {
  return uses_attrs ? args.get_attrs<ScalarAttrs>() : ScalarAttrs{};
}

template <class Op, class T>
void launch_unary(const KernelArgs& args, const ScalarAttrs& attrs) {
  const Tensor& x = args.inputs[0];
  launch_map(args, x.num_elements(),
             WithAttrs<Op, T>{static_cast<T>(attrs.a), static_cast<T>(attrs.b)},
             data<T>(args.outputs[0]), data<T>(x));
}

template <class Op, DTypeSet kSet = DTypeSet::kFloat>
void unary_kernel(Backend&, const KernelArgs& args) {
  const ScalarAttrs attrs = scalar_attrs(args, Op::kUsesAttrs);
  visit<kSet>(args.op, args.inputs[0].dtype(),
              [&](auto tag) { launch_unary<Op, typename decltype(tag)::type>(args, attrs); });
}

// pow_scalar with exponent 1 is a copy and with exponent 2 a square, exactly, as on the CPU.
void pow_scalar_kernel(Backend&, const KernelArgs& args) {
  const ScalarAttrs attrs = args.get_attrs<ScalarAttrs>();
  visit<DTypeSet::kFloat>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (attrs.a == 1.0) {
      copy_bytes(args, args.outputs[0], args.inputs[0]);
    } else if (attrs.a == 2.0) {
      launch_unary<Square, T>(args, attrs);
    } else {
      launch_unary<PowScalar, T>(args, attrs);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Gradient helpers, (y or x, dy) -> same as dy: op(x, dy, alpha), alpha = ScalarAttrs a.

struct SigmoidGrad : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T y, T dy, T) const {
    return dy * y * (T(1) - y);
  }
};
struct TanhGrad : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T y, T dy, T) const {
    return dy * (T(1) - y * y);
  }
};
struct ReluGrad : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T dy, T) const {
    return x > T(0) ? dy : T(0);
  }
};
struct Relu6Grad : IgnoresAttrs {
  template <class T>
  __device__ T operator()(T x, T dy, T) const {
    return (x > T(0) && x < T(6)) ? dy : T(0);
  }
};
struct EluGrad : UsesAttrs {
  template <class T>
  __device__ T operator()(T x, T dy, T alpha) const {
    return x > T(0) ? dy : dy * alpha * std::exp(x);
  }
};

template <class Op, class T>
struct WithAlpha {
  T alpha;
  __device__ T operator()(T x, T dy) const { return Op{}(x, dy, alpha); }
};

template <class Op>
void grad_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& dy = args.inputs[1];
  const ScalarAttrs attrs = scalar_attrs(args, Op::kUsesAttrs);
  visit<DTypeSet::kFloat>(args.op, dy.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(args, dy.num_elements(), WithAlpha<Op, T>{static_cast<T>(attrs.a)},
               data<T>(args.outputs[0]), data<T>(x), data<T>(dy));
  });
}

// ---------------------------------------------------------------------------------------------
// Broadcasting binary ops, (a, b) -> a's dtype, or bool (uint8_t) for comparisons.

struct Add {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Sub {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a - b;
  }
};
struct Mul {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a * b;
  }
};
struct Div {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a / b;
  }
};
struct Maximum {  // NaN in either operand propagates
  template <class T>
  __device__ T operator()(T a, T b) const {
    return (a > b || is_nan(a)) ? a : b;
  }
};
struct Minimum {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return (a < b || is_nan(a)) ? a : b;
  }
};
struct Pow {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return std::pow(a, b);
  }
};
struct Equal {
  template <class T>
  __device__ uint8_t operator()(T a, T b) const {
    return a == b;
  }
};
struct NotEqual {
  template <class T>
  __device__ uint8_t operator()(T a, T b) const {
    return a != b;
  }
};
struct Less {
  template <class T>
  __device__ uint8_t operator()(T a, T b) const {
    return a < b;
  }
};
struct LessEqual {
  template <class T>
  __device__ uint8_t operator()(T a, T b) const {
    return a <= b;
  }
};
struct Greater {
  template <class T>
  __device__ uint8_t operator()(T a, T b) const {
    return a > b;
  }
};
struct GreaterEqual {
  template <class T>
  __device__ uint8_t operator()(T a, T b) const {
    return a >= b;
  }
};

// A binary op with its scalar second (first) operand bound: a -> op(a, *b) (b -> op(*a, b)).
template <class Op, class T>
struct ScalarSecond {
  const T* b;
  __device__ auto operator()(T a) const { return Op{}(a, *b); }
};
template <class Op, class T>
struct ScalarFirst {
  const T* a;
  __device__ auto operator()(T b) const { return Op{}(*a, b); }
};

// kCompare: the result is bool.
template <class Op, DTypeSet kSet, bool kCompare = false>
void binary_kernel(Backend&, const KernelArgs& args) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& out = args.outputs[0];
  visit<kSet>(args.op, a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using R = std::conditional_t<kCompare, uint8_t, T>;
    const T* pa = data<T>(a);
    const T* pb = data<T>(b);
    R* po = data<R>(out);
    const int64_t n = out.num_elements();
    if (a.num_elements() == n && b.num_elements() == 1) {
      launch_map(args, n, ScalarSecond<Op, T>{pb}, po, pa);
    } else if (a.num_elements() == 1 && b.num_elements() == n) {
      launch_map(args, n, ScalarFirst<Op, T>{pa}, po, pb);
    } else {
      launch_broadcast(args, {&a.shape(), &b.shape()}, Op{}, po, pa, pb);
    }
  });
}

// where: (condition, a, b) -> condition ? a : b, all three broadcast.
struct Select {
  template <class T>
  __device__ T operator()(uint8_t condition, T a, T b) const {
    return condition != 0 ? a : b;
  }
};

void where_kernel(Backend&, const KernelArgs& args) {
  const Tensor& condition = args.inputs[0];
  const Tensor& a = args.inputs[1];
  const Tensor& b = args.inputs[2];
  visit<DTypeSet::kAll>(args.op, a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_broadcast(args, {&condition.shape(), &a.shape(), &b.shape()}, Select{},
                     data<T>(args.outputs[0]), data<uint8_t>(condition), data<T>(a), data<T>(b));
  });
}

// ---------------------------------------------------------------------------------------------
// Fill: every element of the output set to FillAttrs::value in its dtype; bf16 and f16 are
// rounded to nearest even from the f32 value, as on the CPU.

template <class U>
struct Constant {
  U value;
  __device__ U operator()() const { return value; }
};

template <class U>
void fill_with(const KernelArgs& args, U value) {
  const Tensor& out = args.outputs[0];
  launch_map(args, out.num_elements(), Constant<U>{value}, data<U>(out));
}

void fill_kernel(Backend&, const KernelArgs& args) {
  const DType dtype = args.outputs[0].dtype();
  const double v = args.get_attrs<FillAttrs>().value;
  switch (dtype) {
    case DType::kF32:
      return fill_with(args, static_cast<float>(v));
    case DType::kF64:
      return fill_with(args, v);
    case DType::kBF16:
      return fill_with(args, __nv_bfloat16_raw(__float2bfloat16_rn(static_cast<float>(v))).x);
    case DType::kF16:
      return fill_with(args, __half_raw(__float2half_rn(static_cast<float>(v))).x);
    case DType::kI32:
      return fill_with(args, static_cast<int32_t>(v));
    case DType::kI64:
      return fill_with(args, static_cast<int64_t>(v));
    case DType::kU8:
      return fill_with(args, static_cast<uint8_t>(static_cast<int64_t>(v)));
    case DType::kBool:
      return fill_with(args, static_cast<uint8_t>(v != 0.0));
  }
  unsupported_dtype(args.op, dtype);
}

// ---------------------------------------------------------------------------------------------
// Cast and copy. A cast converts as C++ does, except that float -> u8 goes through i64 (wrapping
// modulo 256 as an integer would) and -> bool is x != 0; float -> int truncates toward zero (a
// value out of the integer's range saturates, and NaN gives 0: the GPU's conversion, where the
// CPU's result is undefined).

template <class To>
struct Convert {
  template <class From>
  __device__ To operator()(From x) const {
    if constexpr (std::is_same_v<To, uint8_t> && std::is_floating_point_v<From>) {
      return static_cast<uint8_t>(static_cast<int64_t>(x));
    } else {
      return static_cast<To>(x);
    }
  }
};

struct NonZero {
  template <class From>
  __device__ uint8_t operator()(From x) const {
    return x != From(0);
  }
};

void cast_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& y = args.outputs[0];
  const DType to = args.get_attrs<CastAttrs>().dtype;
  if (x.dtype() == to && to != DType::kBool) {
    copy_bytes(args, y, x);
    return;
  }
  const int64_t n = x.num_elements();
  visit<DTypeSet::kAll>(args.op, x.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    visit<DTypeSet::kAll>(args.op, to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      if (to == DType::kBool) {
        launch_map(args, n, NonZero{}, data<uint8_t>(y), data<From>(x));
      } else if constexpr (std::is_same_v<From, To>) {  // bool -> u8
        copy_bytes(args, y, x);
      } else {
        launch_map(args, n, Convert<To>{}, data<To>(y), data<From>(x));
      }
    });
  });
}

void copy_kernel(Backend&, const KernelArgs& args) {
  copy_bytes(args, args.outputs[0], args.inputs[0]);
}

}  // namespace

void add_math_kernels(std::vector<KernelRegistration>& table) {
  constexpr auto kFloat = DTypeSet::kFloat;
  constexpr auto kNumeric = DTypeSet::kNumeric;
  constexpr auto kAll = DTypeSet::kAll;
  const KernelRegistration kernels[] = {
      cuda_kernel<&unary_kernel<Neg, kNumeric>>("neg"),
      cuda_kernel<&unary_kernel<Abs, kNumeric>>("abs"),
      cuda_kernel<&unary_kernel<Sign, kNumeric>>("sign"),
      cuda_kernel<&unary_kernel<Exp>>("exp"),
      cuda_kernel<&unary_kernel<Log>>("log"),
      cuda_kernel<&unary_kernel<Log1p>>("log1p"),
      cuda_kernel<&unary_kernel<Sqrt>>("sqrt"),
      cuda_kernel<&unary_kernel<Rsqrt>>("rsqrt"),
      cuda_kernel<&unary_kernel<Square>>("square"),
      cuda_kernel<&unary_kernel<Sigmoid>>("sigmoid"),
      cuda_kernel<&unary_kernel<Tanh>>("tanh"),
      cuda_kernel<&unary_kernel<Relu>>("relu"),
      cuda_kernel<&unary_kernel<Relu6>>("relu6"),
      cuda_kernel<&unary_kernel<Elu>>("elu"),
      cuda_kernel<&unary_kernel<Softplus>>("softplus"),
      cuda_kernel<&pow_scalar_kernel>("pow_scalar"),
      cuda_kernel<&unary_kernel<ClipByValue>>("clip_by_value"),
      cuda_kernel<&fill_kernel>("fill"),

      cuda_kernel<&grad_kernel<SigmoidGrad>>("sigmoid_grad"),
      cuda_kernel<&grad_kernel<TanhGrad>>("tanh_grad"),
      cuda_kernel<&grad_kernel<ReluGrad>>("relu_grad"),
      cuda_kernel<&grad_kernel<Relu6Grad>>("relu6_grad"),
      cuda_kernel<&grad_kernel<EluGrad>>("elu_grad"),

      cuda_kernel<&binary_kernel<Add, kNumeric>>("add"),
      cuda_kernel<&binary_kernel<Sub, kNumeric>>("sub"),
      cuda_kernel<&binary_kernel<Mul, kNumeric>>("mul"),
      cuda_kernel<&binary_kernel<Div, kFloat>>("div"),
      cuda_kernel<&binary_kernel<Maximum, kNumeric>>("maximum"),
      cuda_kernel<&binary_kernel<Minimum, kNumeric>>("minimum"),
      cuda_kernel<&binary_kernel<Pow, kFloat>>("pow"),
      cuda_kernel<&binary_kernel<Equal, kAll, true>>("equal"),
      cuda_kernel<&binary_kernel<NotEqual, kAll, true>>("not_equal"),
      cuda_kernel<&binary_kernel<Less, kAll, true>>("less"),
      cuda_kernel<&binary_kernel<LessEqual, kAll, true>>("less_equal"),
      cuda_kernel<&binary_kernel<Greater, kAll, true>>("greater"),
      cuda_kernel<&binary_kernel<GreaterEqual, kAll, true>>("greater_equal"),
      cuda_kernel<&where_kernel>("where"),

      // The array family's elementwise ops.
      cuda_kernel<&cast_kernel>("cast"),
      cuda_kernel<&copy_kernel>("copy"),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cuda
