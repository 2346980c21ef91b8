// Linear algebra kernels (ops/linalg.h): matmul and matmul_bias_act.
//
// f32 runs through oneDNN primitives, created once per shape and attributes and cached in
// DnnlContext; tensors are wrapped in place (transposes are memory strides, never copies). Under
// the backend's bf16 policy (compute_precision.h) the primitive multiplies bf16 copies of the two
// operands into the f32 result. f64
// and zero-sized problems run own blocked, OpenMP-parallel loops, the reference for gradient
// checks. The own loops give the same bits whatever the thread count, and oneDNN gives the same
// bits run to run for a given thread count.
#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels_dnnl.h"

namespace trainyard::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;
constexpr memory::data_type kBf16 = memory::data_type::bf16;

int64_t product(std::span<const int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

template <class T>
T activate(Activation activation, T x) {
  switch (activation) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return x > T(0) ? x : T(0);
    case Activation::kSigmoid:
      return T(1) / (T(1) + std::exp(-x));
    case Activation::kTanh:
      return std::tanh(x);
  }
  return x;
}

dnnl::algorithm eltwise_algorithm(Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return dnnl::algorithm::eltwise_relu;
    case Activation::kSigmoid:
      return dnnl::algorithm::eltwise_logistic;
    case Activation::kTanh:
      return dnnl::algorithm::eltwise_tanh;
    case Activation::kNone:
      break;
  }
  return dnnl::algorithm::undef;
}

// ---------------------------------------------------------------------------------------------
// Matmul

// out[b] = op(a[b]) op(b[b]) with op(a) [m, k], op(b) [k, n]; a batch of 1 is shared.
struct MatMulProblem {
  int64_t batch = 1, a_batch = 1, b_batch = 1;
  int64_t m = 0, k = 0, n = 0;
  bool transpose_a = false, transpose_b = false;
};

MatMulProblem matmul_problem(const Tensor& a, const Tensor& b, const Tensor& out,
                             const MatMulAttrs& attrs) {
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const Shape& os = out.shape();
  MatMulProblem p;
  p.transpose_a = attrs.transpose_a;
  p.transpose_b = attrs.transpose_b;
  p.m = os[os.rank() - 2];
  p.n = os[os.rank() - 1];
  p.k = p.transpose_a ? as[as.rank() - 2] : as[as.rank() - 1];
  p.batch = product(os.dims().first(os.rank() - 2));
  p.a_batch = product(as.dims().first(as.rank() - 2));
  p.b_batch = product(bs.dims().first(bs.rank() - 2));
  return p;
}

// Own loops: C tiles are independent (parallel), B is packed per K block, and every element
// sums over k in increasing order whatever the tiling and thread count.
template <class T>
void matmul_loops(const MatMulProblem& p, const T* a, const T* b, T* c) {
  constexpr int64_t kTileM = 32, kTileN = 256, kTileK = 128;
  const int64_t tiles_m = ceil_div(p.m, kTileM), tiles_n = ceil_div(p.n, kTileN);
  const int64_t tiles = p.batch * tiles_m * tiles_n;
  const bool parallel = p.batch * p.m * p.n * std::max<int64_t>(p.k, 1) > kParallelThreshold;
#pragma omp parallel if (parallel)
  {
    std::vector<T> packed(static_cast<std::size_t>(kTileK * kTileN));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t bi = t / (tiles_m * tiles_n);
      const int64_t i0 = (t / tiles_n) % tiles_m * kTileM, i1 = std::min(p.m, i0 + kTileM);
      const int64_t j0 = t % tiles_n * kTileN, j1 = std::min(p.n, j0 + kTileN);
      const int64_t nb = j1 - j0;
      const T* ab = a + (p.a_batch == 1 ? 0 : bi) * p.m * p.k;
      const T* bb = b + (p.b_batch == 1 ? 0 : bi) * p.k * p.n;
      T* cb = c + bi * p.m * p.n;
      for (int64_t i = i0; i < i1; ++i) std::fill_n(cb + i * p.n + j0, nb, T(0));
      for (int64_t k0 = 0; k0 < p.k; k0 += kTileK) {
        const int64_t k1 = std::min(p.k, k0 + kTileK);
        for (int64_t kk = k0; kk < k1; ++kk) {
          T* row = packed.data() + (kk - k0) * nb;
          if (p.transpose_b) {
            for (int64_t j = j0; j < j1; ++j) row[j - j0] = bb[j * p.k + kk];
          } else {
            std::copy_n(bb + kk * p.n + j0, nb, row);
          }
        }
        for (int64_t i = i0; i < i1; ++i) {
          T* crow = cb + i * p.n + j0;
          for (int64_t kk = k0; kk < k1; ++kk) {
            const T aik = p.transpose_a ? ab[kk * p.m + i] : ab[i * p.k + kk];
            const T* brow = packed.data() + (kk - k0) * nb;
#pragma omp simd
            for (int64_t j = 0; j < nb; ++j) crow[j] += aik * brow[j];
          }
        }
      }
    }
  }
}

template <class T>
void bias_act_loops(int64_t rows, int64_t n, const T* bias, Activation activation, T* c) {
#pragma omp parallel for schedule(static) if (rows * n > kParallelThreshold)
  for (int64_t i = 0; i < rows; ++i) {
    T* row = c + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] = activate(activation, row[j] + bias[j]);
  }
}

// The primitive and the tensors' f32 layouts; under the bf16 policy the primitive reads bf16
// copies of a and b, made by the operands' reorders.
struct MatMulEntry {
  dnnl::matmul primitive;
  memory::desc a, b, bias, out;
  bool bf16 = false;
  Bf16Operand a_bf16, b_bf16;
};

// oneDNN 2.6 ranks its brgemm matmul first; on plain f32 layouts it repacks b on every call
// and reaches ~55% of the jit sgemm on AVX-512 (1024x1152 by 1152x3862: 47 ms against 27 ms).
// The gemm-based implementation (the sgemm itself, plus bias and post-ops) is taken when there
// is one.
dnnl::matmul::primitive_desc matmul_pd(const dnnl::matmul::desc& desc,
                                       const dnnl::primitive_attr& attr) {
  const dnnl::engine& engine = DnnlContext::get().engine();
  dnnl::matmul::primitive_desc pd(desc, attr, engine);
  do {
    if (std::string_view(pd.impl_info_str()).starts_with("gemm")) return pd;
  } while (pd.next_impl());
  return dnnl::matmul::primitive_desc(desc, attr, engine);
}

// "matmul [1024, 1152] x [1152, 3862]": the operands' shapes as the op sees them (batched
// operands with their batch; a transposed operand as stored, marked ^T).
std::string describe_matmul(const char* op, const MatMulProblem& p) {
  auto operand = [&](int64_t batch, int64_t rows, int64_t cols, bool transposed) {
    if (transposed) std::swap(rows, cols);
    const std::string s =
        p.batch == 1 ? dims_string({rows, cols}) : dims_string({batch, rows, cols});
    return transposed ? s + "^T" : s;
  };
  return std::string(op) + " " + operand(p.a_batch, p.m, p.k, p.transpose_a) + " x " +
         operand(p.b_batch, p.k, p.n, p.transpose_b);
}

// The primitive of problem `p`; with `bf16` a bf16 x bf16 -> f32 one where oneDNN has an
// optimized implementation (compute_precision.h), else the f32 one.
MatMulEntry make_matmul(const char* op, const MatMulProblem& p, bool with_bias,
                        Activation activation, bool bf16) {
  const bool ta = p.transpose_a, tb = p.transpose_b;
  MatMulEntry e;
  Dims a_dims, a_strides, b_dims, b_strides;
  // A shared b with a non-transposed a is one GEMM over the stacked rows of a.
  const bool stacked = p.b_batch == 1 && p.a_batch == p.batch && !ta;
  if (stacked || p.batch == 1) {
    const int64_t rows = p.batch * p.m;
    a_dims = {rows, p.k};
    a_strides = ta ? Dims{1, p.m} : Dims{p.k, 1};
    b_dims = {p.k, p.n};
    b_strides = tb ? Dims{1, p.k} : Dims{p.n, 1};
    e.out = memory::desc({rows, p.n}, kF32, Dims{p.n, 1});
    e.bias = memory::desc({1, p.n}, kF32, Dims{p.n, 1});
  } else {
    a_dims = {p.a_batch, p.m, p.k};
    a_strides = ta ? Dims{p.m * p.k, 1, p.m} : Dims{p.m * p.k, p.k, 1};
    b_dims = {p.b_batch, p.k, p.n};
    b_strides = tb ? Dims{p.k * p.n, 1, p.k} : Dims{p.k * p.n, p.n, 1};
    e.out = memory::desc({p.batch, p.m, p.n}, kF32, Dims{p.m * p.n, p.n, 1});
    e.bias = memory::desc({1, 1, p.n}, kF32, Dims{p.n, p.n, 1});
  }
  e.a = memory::desc(a_dims, kF32, a_strides);
  e.b = memory::desc(b_dims, kF32, b_strides);
  dnnl::primitive_attr attr = dnnl_attr();
  if (activation != Activation::kNone) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, eltwise_algorithm(activation), 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  auto describe = [&] { return describe_matmul(op, p); };
  if (bf16) {
    // a converted into row-major order (a transposed a is transposed by the conversion, which
    // the primitive would otherwise copy); b into the layout the primitive chooses (its packed
    // layout, so that the conversion is the packing).
    const memory::desc a16(a_dims, kBf16, a_dims.size() == 2 ? Tag::ab : Tag::abc),
        b16(b_dims, kBf16, Tag::any);
    const dnnl::engine& engine = DnnlContext::get().engine();
    const dnnl::matmul::primitive_desc pd =
        with_bias ? dnnl::matmul::primitive_desc({a16, b16, e.bias, e.out}, attr, engine)
                  : dnnl::matmul::primitive_desc({a16, b16, e.out}, attr, engine);
    if (use_bf16_implementation(pd, op, describe)) {
      e.primitive = dnnl::matmul(pd);
      e.bf16 = true;
      e.a_bf16 = bf16_operand(e.a, pd.src_desc());
      e.b_bf16 = bf16_operand(e.b, pd.weights_desc());
      return e;
    }
  }
  const dnnl::matmul::primitive_desc pd =
      with_bias ? matmul_pd({e.a, e.b, e.bias, e.out}, attr) : matmul_pd({e.a, e.b, e.out}, attr);
  check_not_reference(pd, describe);
  e.primitive = dnnl::matmul(pd);
  return e;
}

void matmul_dnnl(Backend& backend, const char* op, const MatMulProblem& p, const Tensor& a,
                 const Tensor& b, const Tensor* bias, Activation activation, const Tensor& out) {
  const bool bf16 = computes_in_bf16(backend);
  PrimitiveKey key = f32_key(op);
  key.add(p.batch).add(p.a_batch).add(p.b_batch).add(p.m).add(p.k).add(p.n);
  key.add(p.transpose_a).add(p.transpose_b).add(static_cast<int64_t>(activation)).add(bf16);
  auto entry = DnnlContext::get().find_or_create<MatMulEntry>(
      key, [&] { return make_matmul(op, p, bias != nullptr, activation, bf16); });
  std::shared_ptr<Storage> a_holder, b_holder;
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, wrap(entry->out, out)}};
  if (entry->bf16) {
    args.emplace(DNNL_ARG_SRC, to_bf16(entry->a_bf16, backend, data<float>(a), a_holder));
    args.emplace(DNNL_ARG_WEIGHTS, to_bf16(entry->b_bf16, backend, data<float>(b), b_holder));
  } else {
    args.emplace(DNNL_ARG_SRC, wrap(entry->a, a));
    args.emplace(DNNL_ARG_WEIGHTS, wrap(entry->b, b));
  }
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, wrap(entry->bias, *bias));
  execute(entry->primitive, args);
}

// (a, b) or (x, w, bias) -> out; k == 0 gives act(bias) or zeros.
template <class T>
void matmul_any(Backend& backend, const char* op, const MatMulProblem& p, const Tensor& a,
                const Tensor& b, const Tensor* bias, Activation activation, const Tensor& out) {
  if (out.num_elements() == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (p.k > 0) {
      return with_dnnl_errors(op,
                              [&] { matmul_dnnl(backend, op, p, a, b, bias, activation, out); });
    }
  }
  matmul_loops<T>(p, data<T>(a), data<T>(b), data<T>(out));
  if (bias != nullptr) {
    bias_act_loops<T>(p.batch * p.m, p.n, data<T>(*bias), activation, data<T>(out));
  }
}

void matmul_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& a = args.inputs[0];
  const MatMulProblem p =
      matmul_problem(a, args.inputs[1], args.outputs[0], args.get_attrs<MatMulAttrs>());
  switch (a.dtype()) {
    case DType::kF32:
      return matmul_any<float>(backend, "matmul", p, a, args.inputs[1], nullptr, Activation::kNone,
                               args.outputs[0]);
    case DType::kF64:
      return matmul_any<double>(backend, "matmul", p, a, args.inputs[1], nullptr, Activation::kNone,
                                args.outputs[0]);
    default:
      unsupported_dtype("matmul", a.dtype());
  }
}

void matmul_bias_act_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const MatMulAttrs& attrs = args.get_attrs<MatMulAttrs>();
  const MatMulProblem p = matmul_problem(x, args.inputs[1], args.outputs[0], attrs);
  switch (x.dtype()) {
    case DType::kF32:
      return matmul_any<float>(backend, "matmul_bias_act", p, x, args.inputs[1], &args.inputs[2],
                               attrs.activation, args.outputs[0]);
    case DType::kF64:
      return matmul_any<double>(backend, "matmul_bias_act", p, x, args.inputs[1], &args.inputs[2],
                                attrs.activation, args.outputs[0]);
    default:
      unsupported_dtype("matmul_bias_act", x.dtype());
  }
}

}  // namespace

void add_linalg_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cpu_kernel<&matmul_kernel>("matmul"));
  table.push_back(cpu_kernel<&matmul_bias_act_kernel>("matmul_bias_act"));
}

}  // namespace trainyard::cpu
