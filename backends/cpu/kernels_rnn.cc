// Recurrent kernels (ops/rnn.h): fused kernels for the composites lstm_sequence and
// gru_sequence and their backward passes (core/src/engine/ops/rnn.cc has the formulas and the
// composed form they replace).
//
// A sequence runs as one loop over its steps. Each step is one GEMM on the recurrent kernel
// (packed once per sequence, packed_gemm.h, where the machine has AVX2 and FMA; else
// dnnl_sgemm), accumulated onto the step's input half, then one pass over the batch
// rows that applies every gate and updates the state; the per-step ops do ten or more passes
// and as many allocations. Backward walks the steps in reverse: one pass for the gates'
// gradients, then one GEMM for the state's gradient; the kernels' gradients are one GEMM over
// all steps at the end instead of one accumulation per step.
//
// f32 rows compute sigmoid and tanh from kernels_common.h's inline exp (fast_exp_nonpositive,
// about 1 ulp), without calls; f64 uses the standard library's.
//
// Under the backend's bf16 policy (compute_precision.h) the f32 products, the per-step ones and
// the kernels' gradients, multiply bf16 copies of both operands (rounded to nearest even) with
// f32 accumulation through oneDNN's matmul, as the matmul op does; the recurrent kernel is
// converted once per sequence. Gates, states and their gradients stay f32.
#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels_common.h"
#include "kernels_dnnl.h"
#include "packed_gemm.h"

namespace trainyard::cpu {
namespace {

inline float sigmoid(float x) {
  const float e = fast_exp_nonpositive(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

// tanh: its Taylor polynomial below |x| = 1/4 (where (1 - e) / (1 + e) would cancel), else
// (1 - e) / (1 + e) with e = exp(-2|x|), signed.
inline float tanh(float x) {
  const float a = std::fabs(x);
  const float e = fast_exp_nonpositive(-2.0f * a);
  const float t = std::copysign((1.0f - e) / (1.0f + e), x);
  const float p = x * x;
  const float small =
      x *
      (1.0f + p * (-0.333333333f + p * (0.133333333f + p * (-0.0539682540f + p * 0.0218694885f))));
  return a < 0.25f ? small : t;
}

inline double sigmoid(double x) {
  const double e = std::exp(-std::fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

inline double tanh(double x) { return std::tanh(x); }

// c (+)= a b, row-major, a [m, k] (or its transpose), b [k, n] (or its transpose). beta is 0
// or 1; with 0, c is not read.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
          float beta, float* c) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t status = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a,
                                          ta ? m : k, b, tb ? k : n, beta, c, n);
  if (status != dnnl_success) {
    throw Error("dnnl_sgemm failed in a recurrent kernel (status " + std::to_string(status) + ")");
  }
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, const double* b,
          double beta, double* c) {
#pragma omp parallel for schedule(static) if (m * n * k > kParallelThreshold)
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        sum += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      }
      c[i * n + j] = beta == 0.0 ? sum : c[i * n + j] + sum;
    }
  }
}

// ---- bf16 products (the bf16 policy) ----

using dnnl::memory;
using Dims = memory::dims;

// A bf16 x bf16 -> f32 matmul for c [m, n] (+)= a [m, k] b [k, n] on row-major f32 memory
// (a stored [k, m] when ta, b stored [n, k] when tb), with the reorders that convert a and b.
// `usable` is false when oneDNN has only its reference bf16 implementation for the problem:
// the product is then computed in f32 (warned once per op, or refused, as
// use_bf16_implementation says).
struct Bf16Gemm {
  bool usable = false;
  dnnl::matmul primitive;
  memory::desc c;
  Bf16Operand a, b;
};

std::string describe_product(const char* op, bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  const std::string a = ta ? dims_string({k, m}) + "^T" : dims_string({m, k});
  const std::string b = tb ? dims_string({n, k}) + "^T" : dims_string({k, n});
  return std::string(op) + " product " + a + " x " + b;
}

std::shared_ptr<const Bf16Gemm> bf16_gemm(const char* op, bool ta, bool tb, int64_t m, int64_t n,
                                          int64_t k, bool accumulate) {
  PrimitiveKey key("rnn_bf16_product");
  key.add(ta).add(tb).add(m).add(n).add(k).add(accumulate);
  return DnnlContext::get().find_or_create<Bf16Gemm>(key, [&] {
    Bf16Gemm e;
    const memory::desc a32({m, k}, memory::data_type::f32, ta ? Dims{1, m} : Dims{k, 1});
    const memory::desc b32({k, n}, memory::data_type::f32, tb ? Dims{1, k} : Dims{n, 1});
    e.c = memory::desc({m, n}, memory::data_type::f32, Dims{n, 1});
    // a converted into row-major order, b into the layout the primitive chooses (its packing).
    const memory::desc a16({m, k}, memory::data_type::bf16, memory::format_tag::ab);
    const memory::desc b16({k, n}, memory::data_type::bf16, memory::format_tag::any);
    dnnl::primitive_attr attr = dnnl_attr();
    if (accumulate) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);
      attr.set_post_ops(sum);
    }
    const dnnl::matmul::primitive_desc pd({a16, b16, e.c}, attr, DnnlContext::get().engine());
    if (!use_bf16_implementation(pd, op, [&] { return describe_product(op, ta, tb, m, n, k); })) {
      return e;
    }
    e.usable = true;
    e.primitive = dnnl::matmul(pd);
    e.a = bf16_operand(a32, pd.src_desc());
    e.b = bf16_operand(b32, pd.weights_desc());
    return e;
  });
}

// c [m, n] (+)= a b in bf16 through `g`, with b already converted (`b16`).
void run_bf16_gemm(Backend& backend, const Bf16Gemm& g, const float* a, const memory& b16,
                   float* c) {
  std::shared_ptr<Storage> a_holder;
  execute(g.primitive, {{DNNL_ARG_SRC, to_bf16(g.a, backend, const_cast<float*>(a), a_holder)},
                        {DNNL_ARG_WEIGHTS, b16},
                        {DNNL_ARG_DST, wrap(g.c, c)}});
}

// gemm() on `backend`: f32 products follow the bf16 policy when the backend has it.
template <class T>
void product(Backend& backend, const char* op, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
             const T* a, const T* b, T beta, T* c) {
  if constexpr (std::is_same_v<T, float>) {
    if (m > 0 && n > 0 && k > 0 && computes_in_bf16(backend)) {
      bool done = false;
      with_dnnl_errors(op, [&] {
        const std::shared_ptr<const Bf16Gemm> g = bf16_gemm(op, ta, tb, m, n, k, beta != 0.0f);
        if (!g->usable) return;
        std::shared_ptr<Storage> b_holder;
        const memory b16 = to_bf16(g->b, backend, const_cast<float*>(b), b_holder);
        run_bf16_gemm(backend, *g, a, b16, c);
        done = true;
      });
      if (done) return;
    }
  }
  gemm(ta, tb, m, n, k, a, b, beta, c);
}

// The right operand of a sequence's per-step products, b [k, n] (or the transpose of b given
// as [n, k]): for f32 packed once where the machine has AVX2 and FMA (packed_gemm.h), else
// multiplied by dnnl_sgemm at every step; under the bf16 policy converted to bf16 once (per
// primitive layout) and multiplied by oneDNN's bf16 matmul.
template <class T>
class StepOperand {
 public:
  StepOperand(Backend& backend, const char* op, const T* b, int64_t k, int64_t n, bool transposed)
      : backend_(backend), op_(op), b_(b), k_(k), n_(n), transposed_(transposed) {
    if constexpr (std::is_same_v<T, float>) {
      bf16_ = computes_in_bf16(backend) && k > 0 && n > 0;
      if (!bf16_ && PackedMatrix::available()) packed_.emplace(b, k, n, transposed);
    }
  }
  // c [m, n] (+)= a [m, k] b.
  void multiply(const T* a, int64_t m, T* c, bool accumulate) const {
    if constexpr (std::is_same_v<T, float>) {
      if (bf16_ && m > 0 && multiply_bf16(a, m, c, accumulate)) return;
      if (packed_) return packed_->multiply(a, m, c, accumulate);
    }
    gemm(false, transposed_, m, n_, k_, a, b_, accumulate ? T(1) : T(0), c);
  }

 private:
  // False when oneDNN has no optimized bf16 implementation for the product.
  bool multiply_bf16(const float* a, int64_t m, float* c, bool accumulate) const {
    bool done = false;
    with_dnnl_errors(op_, [&] {
      const std::shared_ptr<const Bf16Gemm> g =
          bf16_gemm(op_, false, transposed_, m, n_, k_, accumulate);
      if (!g->usable) return;
      // b in the layout of this primitive; primitives of other m or accumulation may choose
      // another one, converted when first needed.
      Converted* converted = nullptr;
      for (Converted& x : converted_) {
        if (x.desc == g->b.to) converted = &x;
      }
      if (converted == nullptr) {
        converted = &converted_.emplace_back();
        converted->desc = g->b.to;
        converted->value = to_bf16(g->b, backend_, const_cast<float*>(b_), converted->holder);
      }
      run_bf16_gemm(backend_, *g, a, converted->value, c);
      done = true;
    });
    return done;
  }

  struct Converted {
    memory::desc desc;
    std::shared_ptr<Storage> holder;
    memory value;
  };

  Backend& backend_;
  const char* op_;
  const T* b_;
  int64_t k_, n_;
  bool transposed_;
  bool bf16_ = false;
  std::optional<PackedMatrix> packed_;
  mutable std::vector<Converted> converted_;
};

// One row of a step (U units), shared by the batch loop below.
template <class T>
struct Rows {
  int64_t batch, units;
  const uint8_t* alive;  // mask [T, B]
  std::vector<T> zero;   // the state before step 0

  const T* previous(const T* states, int64_t t, int64_t b) const {
    return t > 0 ? states + ((t - 1) * batch + b) * units : zero.data();
  }
  // Runs fn(b) for every row of the step, in parallel when worth it.
  template <class F>
  void each(const F& fn) const {
#pragma omp parallel for schedule(static) if (batch * units > kCostlyThreshold)
    for (int64_t b = 0; b < batch; ++b) {
      fn(b);
      clear_upper_vector_state();
    }
  }
};

// ---- BasicLSTMCell ----

template <class T>
void lstm_forward_row(T* g, const T* c_prev, const T* h_prev, T* c, T* h, int64_t u, T bias,
                      bool alive) {
#pragma omp simd
  for (int64_t k = 0; k < u; ++k) {
    const T i = sigmoid(g[k]), j = tanh(g[u + k]), f = sigmoid(g[2 * u + k] + bias);
    const T o = sigmoid(g[3 * u + k]);
    g[k] = i;
    g[u + k] = j;
    g[2 * u + k] = f;
    g[3 * u + k] = o;
    const T new_c = c_prev[k] * f + i * j;
    const T new_h = tanh(new_c) * o;
    c[k] = alive ? new_c : c_prev[k];
    h[k] = alive ? new_h : h_prev[k];
  }
}

TRAINYARD_MULTIVERSION void lstm_forward_row_f32(float* g, const float* c_prev, const float* h_prev,
                                                 float* c, float* h, int64_t u, float bias,
                                                 bool alive) {
  lstm_forward_row<float>(g, c_prev, h_prev, c, h, u, bias, alive);
}

void lstm_forward_row_of(double* g, const double* c_prev, const double* h_prev, double* c,
                         double* h, int64_t u, double bias, bool alive) {
  lstm_forward_row<double>(g, c_prev, h_prev, c, h, u, bias, alive);
}
void lstm_forward_row_of(float* g, const float* c_prev, const float* h_prev, float* c, float* h,
                         int64_t u, float bias, bool alive) {
  lstm_forward_row_f32(g, c_prev, h_prev, c, h, u, bias, alive);
}

// (x [T, B, 4U], K_h [U, 4U], mask [T, B]) -> (h, c [T, B, U], gates [T, B, 4U]).
void lstm_sequence_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  visit<DTypeSet::kFloat>("lstm_sequence", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t steps = x.shape()[0], batch = x.shape()[1], u = x.shape()[2] / 4;
    const T* w = data<T>(args.inputs[1]);
    const auto bias = static_cast<T>(args.get_attrs<ScalarAttrs>().a);
    T* h = data<T>(args.outputs[0]);
    T* c = data<T>(args.outputs[1]);
    T* gates = data<T>(args.outputs[2]);
    Rows<T> rows{batch, u, data<uint8_t>(args.inputs[2]), std::vector<T>(std::size_t(u), T(0))};
    std::memcpy(gates, data<T>(x), static_cast<std::size_t>(x.num_elements()) * sizeof(T));
    const StepOperand<T> recurrent(backend, "lstm_sequence", w, u, 4 * u, false);
    for (int64_t t = 0; t < steps; ++t) {
      T* g = gates + t * batch * 4 * u;
      if (t > 0) recurrent.multiply(h + (t - 1) * batch * u, batch, g, true);
      rows.each([&](int64_t b) {
        const int64_t row = (t * batch + b) * u;
        lstm_forward_row_of(g + b * 4 * u, rows.previous(c, t, b), rows.previous(h, t, b), c + row,
                            h + row, u, bias, rows.alive[t * batch + b] != 0);
      });
    }
  });
}

template <class T>
void lstm_backward_row(const T* g, const T* c, const T* c_prev, const T* dh_out, const T* dc_out,
                       T* dh_next, T* dc_next, T* dg, int64_t u, bool alive) {
#pragma omp simd
  for (int64_t k = 0; k < u; ++k) {
    const T dh = dh_out[k] + dh_next[k], dc = dc_out[k] + dc_next[k];
    const T i = g[k], j = g[u + k], f = g[2 * u + k], o = g[3 * u + k];
    const T tc = tanh(c[k]);
    const T dc_new = dc + dh * o * (T(1) - tc * tc);
    dg[k] = alive ? dc_new * j * (i * (T(1) - i)) : T(0);
    dg[u + k] = alive ? dc_new * i * (T(1) - j * j) : T(0);
    dg[2 * u + k] = alive ? dc_new * c_prev[k] * (f * (T(1) - f)) : T(0);
    dg[3 * u + k] = alive ? dh * tc * (o * (T(1) - o)) : T(0);
    dc_next[k] = alive ? dc_new * f : dc;
    dh_next[k] = alive ? T(0) : dh;
  }
}

TRAINYARD_MULTIVERSION void lstm_backward_row_f32(const float* g, const float* c,
                                                  const float* c_prev, const float* dh_out,
                                                  const float* dc_out, float* dh_next,
                                                  float* dc_next, float* dg, int64_t u,
                                                  bool alive) {
  lstm_backward_row<float>(g, c, c_prev, dh_out, dc_out, dh_next, dc_next, dg, u, alive);
}

void lstm_backward_row_of(const double* g, const double* c, const double* c_prev,
                          const double* dh_out, const double* dc_out, double* dh_next,
                          double* dc_next, double* dg, int64_t u, bool alive) {
  lstm_backward_row<double>(g, c, c_prev, dh_out, dc_out, dh_next, dc_next, dg, u, alive);
}
void lstm_backward_row_of(const float* g, const float* c, const float* c_prev, const float* dh_out,
                          const float* dc_out, float* dh_next, float* dc_next, float* dg, int64_t u,
                          bool alive) {
  lstm_backward_row_f32(g, c, c_prev, dh_out, dc_out, dh_next, dc_next, dg, u, alive);
}

// (K_h, mask, h, c, gates, dh, dc) -> (dx [T, B, 4U], dK_h [U, 4U]).
void lstm_sequence_grad_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& w_tensor = args.inputs[0];
  visit<DTypeSet::kFloat>("lstm_sequence_grad", w_tensor.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor& gates_tensor = args.inputs[4];
    const int64_t steps = gates_tensor.shape()[0], batch = gates_tensor.shape()[1];
    const int64_t u = w_tensor.shape()[0];
    const T* w = data<T>(w_tensor);
    const T* h = data<T>(args.inputs[2]);
    const T* c = data<T>(args.inputs[3]);
    const T* gates = data<T>(gates_tensor);
    const T* dh_out = data<T>(args.inputs[5]);
    const T* dc_out = data<T>(args.inputs[6]);
    T* dx = data<T>(args.outputs[0]);
    T* dw = data<T>(args.outputs[1]);
    Rows<T> rows{batch, u, data<uint8_t>(args.inputs[1]), std::vector<T>(std::size_t(u), T(0))};
    std::vector<T> dh_next(static_cast<std::size_t>(batch * u), T(0)), dc_next(dh_next);
    const StepOperand<T> recurrent_t(backend, "lstm_sequence_grad", w, 4 * u, u, true);  // K_h^T
    for (int64_t t = steps - 1; t >= 0; --t) {
      T* dg = dx + t * batch * 4 * u;
      rows.each([&](int64_t b) {
        const int64_t row = (t * batch + b) * u;
        lstm_backward_row_of(gates + row * 4, c + row, rows.previous(c, t, b), dh_out + row,
                             dc_out + row, dh_next.data() + b * u, dc_next.data() + b * u,
                             dg + b * 4 * u, u, rows.alive[t * batch + b] != 0);
      });
      if (t > 0) recurrent_t.multiply(dg, batch, dh_next.data(), true);
    }
    // dK_h = sum over steps of h_{t-1}^T dgates_t; h_{-1} is zero.
    if (steps > 1) {
      product(backend, "lstm_sequence_grad", true, false, u, 4 * u, (steps - 1) * batch, h,
              dx + batch * 4 * u, T(0), dw);
    } else {
      std::fill(dw, dw + u * 4 * u, T(0));
    }
  });
}

// ---- GRUCell ----

// Sigmoid of the gates r, u in place; rh = r * h_prev.
template <class T>
void gru_gates_row(T* g, const T* h_prev, T* rh, int64_t u) {
#pragma omp simd
  for (int64_t k = 0; k < 2 * u; ++k) g[k] = sigmoid(g[k]);
#pragma omp simd
  for (int64_t k = 0; k < u; ++k) rh[k] = g[k] * h_prev[k];
}

// The candidate's tanh in place; h = u * h_prev + (1 - u) * candidate where alive.
template <class T>
void gru_state_row(const T* g, T* cand, const T* h_prev, T* h, int64_t u, bool alive) {
#pragma omp simd
  for (int64_t k = 0; k < u; ++k) {
    const T cd = tanh(cand[k]);
    cand[k] = cd;
    const T new_h = cd + g[u + k] * (h_prev[k] - cd);
    h[k] = alive ? new_h : h_prev[k];
  }
}

TRAINYARD_MULTIVERSION void gru_gates_row_f32(float* g, const float* h_prev, float* rh, int64_t u) {
  gru_gates_row<float>(g, h_prev, rh, u);
}
TRAINYARD_MULTIVERSION void gru_state_row_f32(const float* g, float* cand, const float* h_prev,
                                              float* h, int64_t u, bool alive) {
  gru_state_row<float>(g, cand, h_prev, h, u, alive);
}
void gru_gates_row_of(float* g, const float* h_prev, float* rh, int64_t u) {
  gru_gates_row_f32(g, h_prev, rh, u);
}
void gru_gates_row_of(double* g, const double* h_prev, double* rh, int64_t u) {
  gru_gates_row<double>(g, h_prev, rh, u);
}
void gru_state_row_of(const float* g, float* cand, const float* h_prev, float* h, int64_t u,
                      bool alive) {
  gru_state_row_f32(g, cand, h_prev, h, u, alive);
}
void gru_state_row_of(const double* g, double* cand, const double* h_prev, double* h, int64_t u,
                      bool alive) {
  gru_state_row<double>(g, cand, h_prev, h, u, alive);
}

// (x_g [T, B, 2U], x_c [T, B, U], K_g [U, 2U], K_c [U, U], mask) -> (h, gates, candidate).
void gru_sequence_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& xg = args.inputs[0];
  visit<DTypeSet::kFloat>("gru_sequence", xg.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t steps = xg.shape()[0], batch = xg.shape()[1], u = xg.shape()[2] / 2;
    const T* wg = data<T>(args.inputs[2]);
    const T* wc = data<T>(args.inputs[3]);
    T* h = data<T>(args.outputs[0]);
    T* gates = data<T>(args.outputs[1]);
    T* cand = data<T>(args.outputs[2]);
    Rows<T> rows{batch, u, data<uint8_t>(args.inputs[4]), std::vector<T>(std::size_t(u), T(0))};
    std::memcpy(gates, data<T>(xg), static_cast<std::size_t>(xg.num_elements()) * sizeof(T));
    std::memcpy(cand, data<T>(args.inputs[1]),
                static_cast<std::size_t>(args.inputs[1].num_elements()) * sizeof(T));
    std::vector<T> rh(static_cast<std::size_t>(batch * u));
    const StepOperand<T> gate_kernel(backend, "gru_sequence", wg, u, 2 * u, false);
    const StepOperand<T> candidate_kernel(backend, "gru_sequence", wc, u, u, false);
    for (int64_t t = 0; t < steps; ++t) {
      T* g = gates + t * batch * 2 * u;
      T* cd = cand + t * batch * u;
      if (t > 0) gate_kernel.multiply(h + (t - 1) * batch * u, batch, g, true);
      rows.each([&](int64_t b) {
        gru_gates_row_of(g + b * 2 * u, rows.previous(h, t, b), rh.data() + b * u, u);
      });
      if (t > 0) candidate_kernel.multiply(rh.data(), batch, cd, true);
      rows.each([&](int64_t b) {
        gru_state_row_of(g + b * 2 * u, cd + b * u, rows.previous(h, t, b), h + (t * batch + b) * u,
                         u, rows.alive[t * batch + b] != 0);
      });
    }
  });
}

// dx_c and the u half of dx_g of one row; dh_next becomes what passes to the previous state
// before the products.
template <class T>
void gru_backward_row(const T* g, const T* cd, const T* h_prev, const T* dh_out, T* dh_next, T* dg,
                      T* dcand, int64_t u, bool alive) {
#pragma omp simd
  for (int64_t k = 0; k < u; ++k) {
    const T dh = dh_out[k] + dh_next[k];
    const T up = g[u + k], c = cd[k];
    dg[u + k] = alive ? dh * (h_prev[k] - c) * (up * (T(1) - up)) : T(0);
    dcand[k] = alive ? dh * (T(1) - up) * (T(1) - c * c) : T(0);
    dh_next[k] = alive ? dh * up : dh;
  }
}

// The r half of dx_g of one row from d(r * h_prev); adds d_rh * r to dh_next.
template <class T>
void gru_reset_row(const T* g, const T* h_prev, const T* d_rh, T* dh_next, T* dg, int64_t u) {
#pragma omp simd
  for (int64_t k = 0; k < u; ++k) {
    const T r = g[k];
    dg[k] = d_rh[k] * h_prev[k] * (r * (T(1) - r));
    dh_next[k] += d_rh[k] * r;
  }
}

// (K_g, K_c, mask, h, gates, candidate, dh) -> (dx_g, dx_c, dK_g, dK_c).
void gru_sequence_grad_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& wg_tensor = args.inputs[0];
  visit<DTypeSet::kFloat>("gru_sequence_grad", wg_tensor.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor& cand_tensor = args.inputs[5];
    const int64_t steps = cand_tensor.shape()[0], batch = cand_tensor.shape()[1];
    const int64_t u = wg_tensor.shape()[0];
    const T* wg = data<T>(wg_tensor);
    const T* wc = data<T>(args.inputs[1]);
    const T* h = data<T>(args.inputs[3]);
    const T* gates = data<T>(args.inputs[4]);
    const T* cand = data<T>(cand_tensor);
    const T* dh_out = data<T>(args.inputs[6]);
    T* dxg = data<T>(args.outputs[0]);
    T* dxc = data<T>(args.outputs[1]);
    T* dwg = data<T>(args.outputs[2]);
    T* dwc = data<T>(args.outputs[3]);
    Rows<T> rows{batch, u, data<uint8_t>(args.inputs[2]), std::vector<T>(std::size_t(u), T(0))};
    std::vector<T> dh_next(static_cast<std::size_t>(batch * u), T(0)), d_rh(dh_next.size());
    const StepOperand<T> gate_kernel_t(backend, "gru_sequence_grad", wg, 2 * u, u, true);
    const StepOperand<T> candidate_kernel_t(backend, "gru_sequence_grad", wc, u, u, true);
    for (int64_t t = steps - 1; t >= 0; --t) {
      T* dg = dxg + t * batch * 2 * u;
      T* dc = dxc + t * batch * u;
      rows.each([&](int64_t b) {
        const int64_t row = (t * batch + b) * u;
        gru_backward_row(gates + row * 2, cand + row, rows.previous(h, t, b), dh_out + row,
                         dh_next.data() + b * u, dg + b * 2 * u, dc + b * u, u,
                         rows.alive[t * batch + b] != 0);
      });
      if (t == 0) {
        // h_{-1} is zero: no gradient reaches it and the reset gate's is zero.
        for (int64_t b = 0; b < batch; ++b) std::fill(dg + b * 2 * u, dg + b * 2 * u + u, T(0));
        continue;
      }
      candidate_kernel_t.multiply(dc, batch, d_rh.data(), false);
      rows.each([&](int64_t b) {
        gru_reset_row(gates + (t * batch + b) * 2 * u, rows.previous(h, t, b), d_rh.data() + b * u,
                      dh_next.data() + b * u, dg + b * 2 * u, u);
      });
      gate_kernel_t.multiply(dg, batch, dh_next.data(), true);
    }
    if (steps > 1) {
      const int64_t n = (steps - 1) * batch;
      product(backend, "gru_sequence_grad", true, false, u, 2 * u, n, h, dxg + batch * 2 * u, T(0),
              dwg);
      // (r_t * h_{t-1}) for t >= 1, then dK_c = its transpose times dx_c.
      std::vector<T> rh(static_cast<std::size_t>(n * u));
#pragma omp parallel for schedule(static) if (n * u > kParallelThreshold)
      for (int64_t row = 0; row < n; ++row) {
        const T* r = gates + (batch + row) * 2 * u;
        const T* hp = h + row * u;
        for (int64_t k = 0; k < u; ++k) rh[std::size_t(row * u + k)] = r[k] * hp[k];
      }
      product(backend, "gru_sequence_grad", true, false, u, u, n, rh.data(), dxc + batch * u, T(0),
              dwc);
    } else {
      std::fill(dwg, dwg + u * 2 * u, T(0));
      std::fill(dwc, dwc + u * u, T(0));
    }
  });
}

}  // namespace

void add_rnn_kernels(std::vector<KernelRegistration>& table) {
  const KernelRegistration kernels[] = {
      cpu_kernel<&lstm_sequence_kernel>("lstm_sequence", kFusedComposite),
      cpu_kernel<&lstm_sequence_grad_kernel>("lstm_sequence_grad", kFusedComposite),
      cpu_kernel<&gru_sequence_kernel>("gru_sequence", kFusedComposite),
      cpu_kernel<&gru_sequence_grad_kernel>("gru_sequence_grad", kFusedComposite),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cpu
