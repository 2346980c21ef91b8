// The recurrent family: lstm_sequence and gru_sequence (ops/rnn.h), composites whose gradient
// is backpropagation through time written as a composite of its own, so that a backend can fuse
// the forward loop and the backward loop separately (backends/cpu/kernels_rnn.cc).
//
// Besides the states the forward composites return what their backward needs, as outputs the
// ops of rnn.h do not expose: the activated gates of every step. No loss depends on them, so
// their incoming gradients are zeros and the gradient rules ignore them.
#include <vector>

#include "engine/ops/common.h"
#include "trainyard/composite.h"

namespace trainyard {
namespace {
using namespace ops_internal;
using namespace ops;

constexpr const char kLstm[] = "lstm_sequence";
constexpr const char kLstmGrad[] = "lstm_sequence_grad";
constexpr const char kGru[] = "gru_sequence";
constexpr const char kGruGrad[] = "gru_sequence_grad";

// The T steps of time-major [T, B, G] as T tensors [B, G] (one split: its gradient is one
// concatenation).
std::vector<Tensor> steps_of(const Tensor& x) {
  const int64_t t = x.shape()[0], b = x.shape()[1], g = x.shape()[2];
  std::vector<Tensor> out = split(x, std::vector<int64_t>(std::size_t(t), 1), 0);
  for (Tensor& step : out) step = reshape(step, Shape{b, g});
  return out;
}

// The mask's steps as [B, 1] conditions.
std::vector<Tensor> mask_steps(const Tensor& mask) {
  const int64_t t = mask.shape()[0], b = mask.shape()[1];
  return steps_of(reshape(mask, Shape{t, b, 1}));
}

// T tensors [B, G] stacked to [T, B, G]; `empty` when there are none.
Tensor stack_steps(const std::vector<Tensor>& steps, const Tensor& empty) {
  if (steps.empty()) return empty;
  std::vector<Tensor> parts;
  parts.reserve(steps.size());
  for (const Tensor& s : steps) parts.push_back(reshape(s, Shape{1, s.shape()[0], s.shape()[1]}));
  return concat(parts, 0);
}

// h [T, B, U] shifted one step later with zeros first: the state each step starts from,
// [T * B, U].
Tensor previous_states(const Tensor& h) {
  const int64_t t = h.shape()[0], b = h.shape()[1], u = h.shape()[2];
  Tensor first = zeros(h.backend(), Shape{1, b, u}, h.dtype());
  Tensor all = t > 1 ? concat(std::vector<Tensor>{first, slice_outer(h, 0, t - 1)}, 0) : first;
  return reshape(all, Shape{t * b, u});
}

// 1 - x, elementwise.
Tensor one_minus(const Tensor& x) { return add(neg(x), 1.0); }

// Checks the shared inputs: x [T, B, G * U] float, a kernel [U, G * U] of x's dtype, mask bool
// [T, B]. Returns U.
int64_t check_sequence(const char* op, const Tensor& x, const Tensor& kernel, const Tensor& mask,
                       int64_t gates) {
  require_float(op, x);
  require_same_dtype(op, x, kernel);
  const Shape& s = x.shape();
  const Shape& k = kernel.shape();
  if (s.rank() != 3 || s[2] % gates != 0 || k.rank() != 2 || k[0] * gates != s[2] || k[1] != s[2]) {
    invalid(op, "expects input gates [T, B, " + std::to_string(gates) + "U] and a kernel [U, " +
                    std::to_string(gates) + "U], got " + x.description() + " and " +
                    kernel.description());
  }
  const Shape& m = mask.shape();
  if (mask.dtype() != DType::kBool || m.rank() != 2 || m[0] != s[0] || m[1] != s[1]) {
    invalid(op, "expects a bool mask [" + std::to_string(s[0]) + ", " + std::to_string(s[1]) +
                    "] for input gates " + x.description() + ", got " + mask.description());
  }
  return k[0];
}

// ---- BasicLSTMCell ----
// lstm_sequence (x [T, B, 4U], K_h [U, 4U], mask [T, B]), a = forget_bias
//   -> (h [T, B, U], c [T, B, U], gates [T, B, 4U]: sigmoid(i), tanh(j), sigmoid(f + bias),
//   sigmoid(o) of every step).

std::vector<TensorType> lstm_types(const CompositeCall& c) {
  const Tensor &x = c.inputs[0], &w = c.inputs[1];
  const int64_t u = check_sequence(kLstm, x, w, c.inputs[2], 4);
  const int64_t t = x.shape()[0], b = x.shape()[1];
  return {{Shape{t, b, u}, x.dtype()}, {Shape{t, b, u}, x.dtype()}, {x.shape(), x.dtype()}};
}

std::vector<Tensor> lstm_compose(const CompositeCall& call) {
  const Tensor &x = call.inputs[0], &w = call.inputs[1], &mask = call.inputs[2];
  const int64_t u = check_sequence(kLstm, x, w, mask, 4);
  const double forget_bias = call.get_attrs<ScalarAttrs>().a;
  const int64_t b = x.shape()[1];
  Tensor h = zeros(x.backend(), Shape{b, u}, x.dtype());
  Tensor c = h;
  std::vector<Tensor> xs = steps_of(x), ms = mask_steps(mask);
  std::vector<Tensor> hs, cs, acts;
  for (std::size_t t = 0; t < xs.size(); ++t) {
    std::vector<Tensor> g = split(add(xs[t], matmul(h, w)), {u, u, u, u}, 1);
    Tensor i = sigmoid(g[0]), j = tanh(g[1]), f = sigmoid(add(g[2], forget_bias));
    Tensor o = sigmoid(g[3]);
    Tensor new_c = add(mul(c, f), mul(i, j));
    Tensor new_h = mul(tanh(new_c), o);
    c = where(ms[t], new_c, c);
    h = where(ms[t], new_h, h);
    hs.push_back(h);
    cs.push_back(c);
    acts.push_back(concat(std::vector<Tensor>{i, j, f, o}, 1));
  }
  Tensor none = zeros(x.backend(), Shape{0, b, u}, x.dtype());
  return {stack_steps(hs, none), stack_steps(cs, none),
          stack_steps(acts, zeros(x.backend(), x.shape(), x.dtype()))};
}

// lstm_sequence_grad (K_h, mask, h, c, gates, dh [T, B, U], dc [T, B, U]) -> (dx [T, B, 4U],
// dK_h [U, 4U]).
std::vector<TensorType> lstm_grad_types(const CompositeCall& c) {
  const Tensor &w = c.inputs[0], &gates = c.inputs[4];
  return {{gates.shape(), gates.dtype()}, {w.shape(), w.dtype()}};
}

std::vector<Tensor> lstm_grad_compose(const CompositeCall& call) {
  const Tensor &w = call.inputs[0], &mask = call.inputs[1], &h = call.inputs[2];
  const Tensor &c = call.inputs[3], &gates = call.inputs[4];
  const int64_t t_steps = gates.shape()[0], b = gates.shape()[1], u = w.shape()[0];
  std::vector<Tensor> ms = mask_steps(mask), cs = steps_of(c), acts = steps_of(gates);
  std::vector<Tensor> dhs = steps_of(call.inputs[5]), dcs = steps_of(call.inputs[6]);
  Tensor zero = zeros(w.backend(), Shape{b, u}, w.dtype());
  Tensor dh_next = zero, dc_next = zero;
  std::vector<Tensor> dgates(static_cast<std::size_t>(t_steps));
  for (int64_t step = t_steps - 1; step >= 0; --step) {
    const auto t = static_cast<std::size_t>(step);
    Tensor dh = add(dhs[t], dh_next), dc = add(dcs[t], dc_next);
    Tensor dh_alive = where(ms[t], dh, zero), dc_alive = where(ms[t], dc, zero);
    std::vector<Tensor> g = split(acts[t], {u, u, u, u}, 1);
    const Tensor &i = g[0], &j = g[1], &f = g[2], &o = g[3];
    Tensor c_prev = t > 0 ? cs[t - 1] : zero;
    Tensor tanh_c = tanh(cs[t]);
    Tensor dc_new = add(dc_alive, mul(mul(dh_alive, o), one_minus(square(tanh_c))));
    Tensor di = mul(mul(dc_new, j), mul(i, one_minus(i)));
    Tensor dj = mul(mul(dc_new, i), one_minus(square(j)));
    Tensor df = mul(mul(dc_new, c_prev), mul(f, one_minus(f)));
    Tensor d_o = mul(mul(dh_alive, tanh_c), mul(o, one_minus(o)));
    dgates[t] = concat(std::vector<Tensor>{di, dj, df, d_o}, 1);
    dc_next = add(mul(dc_new, f), where(ms[t], zero, dc));
    dh_next = add(matmul(dgates[t], w, false, true), where(ms[t], zero, dh));
  }
  Tensor dx = stack_steps(dgates, zeros(w.backend(), gates.shape(), w.dtype()));
  Tensor dw = matmul(previous_states(h), reshape(dx, Shape{t_steps * b, 4 * u}), true, false);
  return {dx, dw};
}

const Composite& lstm_grad_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = kLstmGrad,
      .num_inputs = 7,
      .num_outputs = 2,
      .summary = "(K_h [U, 4U], mask [T, B], h, c [T, B, U], gates [T, B, 4U], dh, dc "
                 "[T, B, U]) -> (dx [T, B, 4U], dK_h [U, 4U]): lstm_sequence's backward",
      .compose = lstm_grad_compose,
      .infer = lstm_grad_types,
      .gradient = {},
  });
  return *composite;
}

const Composite& lstm_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = kLstm,
      .num_inputs = 3,
      .num_outputs = 3,
      .attrs_size = sizeof(ScalarAttrs),
      .summary = "(x [T, B, 4U], K_h [U, 4U], mask [T, B]), a = forget_bias -> (h, c "
                 "[T, B, U], activated gates [T, B, 4U]): BasicLSTMCell over T steps",
      .compose = lstm_compose,
      .infer = lstm_types,
      .gradient =
          [](const CompositeGrad& g) {
            const Tensor &w = g.call.inputs[1], &mask = g.call.inputs[2];
            std::vector<Tensor> d =
                lstm_grad_composite()({w, mask, g.outputs[0], g.outputs[1], g.outputs[2],
                                       g.grad_outputs[0], g.grad_outputs[1]});
            return Grads{d[0], d[1], Tensor()};
          },
  });
  return *composite;
}

// ---- GRUCell ----
// gru_sequence (x_g [T, B, 2U], x_c [T, B, U], K_g [U, 2U], K_c [U, U], mask [T, B])
//   -> (h [T, B, U], gates [T, B, 2U]: r and u after the sigmoid, candidate [T, B, U] after
//   the tanh).

int64_t check_gru(const CompositeCall& c) {
  const Tensor &xg = c.inputs[0], &xc = c.inputs[1];
  const int64_t u = check_sequence(kGru, xg, c.inputs[2], c.inputs[4], 2);
  require_same_dtype(kGru, xg, xc);
  require_same_dtype(kGru, xg, c.inputs[3]);
  const Shape& s = xg.shape();
  if (xc.shape() != Shape{s[0], s[1], u} || c.inputs[3].shape() != Shape{u, u}) {
    invalid(kGru,
            "expects input candidate [T, B, U] and a candidate kernel [U, U] for input "
            "gates " +
                xg.description() + ", got " + xc.description() + " and " +
                c.inputs[3].description());
  }
  return u;
}

std::vector<TensorType> gru_types(const CompositeCall& c) {
  check_gru(c);
  const Tensor &xg = c.inputs[0], &xc = c.inputs[1];
  return {{xc.shape(), xc.dtype()}, {xg.shape(), xg.dtype()}, {xc.shape(), xc.dtype()}};
}

std::vector<Tensor> gru_compose(const CompositeCall& call) {
  const int64_t u = check_gru(call);
  const Tensor &xg = call.inputs[0], &xc = call.inputs[1];
  const Tensor &wg = call.inputs[2], &wc = call.inputs[3];
  const int64_t b = xg.shape()[1];
  Tensor h = zeros(xg.backend(), Shape{b, u}, xg.dtype());
  std::vector<Tensor> xgs = steps_of(xg), xcs = steps_of(xc), ms = mask_steps(call.inputs[4]);
  std::vector<Tensor> hs, gates, candidates;
  for (std::size_t t = 0; t < xgs.size(); ++t) {
    Tensor value = sigmoid(add(xgs[t], matmul(h, wg)));
    std::vector<Tensor> ru = split(value, {u, u}, 1);
    Tensor candidate = tanh(add(xcs[t], matmul(mul(ru[0], h), wc)));
    // u * h + (1 - u) * c, written as c + u * (h - c).
    Tensor new_h = add(candidate, mul(ru[1], sub(h, candidate)));
    h = where(ms[t], new_h, h);
    hs.push_back(h);
    gates.push_back(value);
    candidates.push_back(candidate);
  }
  Tensor none = zeros(xg.backend(), xc.shape(), xg.dtype());
  return {stack_steps(hs, none), stack_steps(gates, zeros(xg.backend(), xg.shape(), xg.dtype())),
          stack_steps(candidates, none)};
}

// gru_sequence_grad (K_g, K_c, mask, h, gates, candidate, dh [T, B, U])
//   -> (dx_g [T, B, 2U], dx_c [T, B, U], dK_g [U, 2U], dK_c [U, U]).
std::vector<TensorType> gru_grad_types(const CompositeCall& c) {
  const Tensor &wg = c.inputs[0], &wc = c.inputs[1], &gates = c.inputs[4], &cand = c.inputs[5];
  return {{gates.shape(), gates.dtype()},
          {cand.shape(), cand.dtype()},
          {wg.shape(), wg.dtype()},
          {wc.shape(), wc.dtype()}};
}

std::vector<Tensor> gru_grad_compose(const CompositeCall& call) {
  const Tensor &wg = call.inputs[0], &wc = call.inputs[1], &mask = call.inputs[2];
  const Tensor &h = call.inputs[3], &gates = call.inputs[4], &cand = call.inputs[5];
  const int64_t t_steps = cand.shape()[0], b = cand.shape()[1], u = wc.shape()[0];
  std::vector<Tensor> ms = mask_steps(mask), hs = steps_of(h), gs = steps_of(gates);
  std::vector<Tensor> cds = steps_of(cand), dhs = steps_of(call.inputs[6]);
  Tensor zero = zeros(wg.backend(), Shape{b, u}, wg.dtype());
  Tensor dh_next = zero;
  std::vector<Tensor> dxg(static_cast<std::size_t>(t_steps)), dxc(dxg.size()), rh(dxg.size());
  for (int64_t step = t_steps - 1; step >= 0; --step) {
    const auto t = static_cast<std::size_t>(step);
    Tensor dh = add(dhs[t], dh_next);
    Tensor dh_alive = where(ms[t], dh, zero);
    Tensor h_prev = t > 0 ? hs[t - 1] : zero;
    std::vector<Tensor> ru = split(gs[t], {u, u}, 1);
    const Tensor &r = ru[0], &up = ru[1], &cd = cds[t];
    Tensor du = mul(mul(dh_alive, sub(h_prev, cd)), mul(up, one_minus(up)));
    dxc[t] = mul(mul(dh_alive, one_minus(up)), one_minus(square(cd)));
    Tensor d_rh = matmul(dxc[t], wc, false, true);
    Tensor dr = mul(mul(d_rh, h_prev), mul(r, one_minus(r)));
    dxg[t] = concat(std::vector<Tensor>{dr, du}, 1);
    rh[t] = mul(r, h_prev);
    dh_next = add(add(add(mul(dh_alive, up), where(ms[t], zero, dh)), mul(d_rh, r)),
                  matmul(dxg[t], wg, false, true));
  }
  Tensor dx_g = stack_steps(dxg, zeros(wg.backend(), gates.shape(), wg.dtype()));
  Tensor dx_c = stack_steps(dxc, zeros(wg.backend(), cand.shape(), wg.dtype()));
  Tensor h_prev = previous_states(h);
  Tensor dwg = matmul(h_prev, reshape(dx_g, Shape{t_steps * b, 2 * u}), true, false);
  Tensor rh_all = t_steps > 0 ? reshape(stack_steps(rh, Tensor()), Shape{t_steps * b, u}) : h_prev;
  Tensor dwc = matmul(rh_all, reshape(dx_c, Shape{t_steps * b, u}), true, false);
  return {dx_g, dx_c, dwg, dwc};
}

const Composite& gru_grad_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = kGruGrad,
      .num_inputs = 7,
      .num_outputs = 4,
      .summary = "(K_g, K_c, mask, h, gates, candidate, dh) -> (dx_g [T, B, 2U], dx_c "
                 "[T, B, U], dK_g [U, 2U], dK_c [U, U]): gru_sequence's backward",
      .compose = gru_grad_compose,
      .infer = gru_grad_types,
      .gradient = {},
  });
  return *composite;
}

const Composite& gru_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = kGru,
      .num_inputs = 5,
      .num_outputs = 3,
      .summary = "(x_g [T, B, 2U], x_c [T, B, U], K_g [U, 2U], K_c [U, U], mask [T, B]) -> (h "
                 "[T, B, U], gates r, u [T, B, 2U], candidate [T, B, U]): GRUCell over T steps",
      .compose = gru_compose,
      .infer = gru_types,
      .gradient =
          [](const CompositeGrad& g) {
            const Tensor &wg = g.call.inputs[2], &wc = g.call.inputs[3];
            std::vector<Tensor> d =
                gru_grad_composite()({wg, wc, g.call.inputs[4], g.outputs[0], g.outputs[1],
                                      g.outputs[2], g.grad_outputs[0]});
            return Grads{d[0], d[1], d[2], d[3], Tensor()};
          },
  });
  return *composite;
}

}  // namespace

void declare_rnn_composites() {
  lstm_composite();
  lstm_grad_composite();
  gru_composite();
  gru_grad_composite();
}

namespace ops {

LstmSequence lstm_sequence(const Tensor& input_gates, const Tensor& recurrent_kernel,
                           const Tensor& mask, double forget_bias) {
  ScalarAttrs attrs{forget_bias, 0.0};
  std::vector<Tensor> out = lstm_composite()({input_gates, recurrent_kernel, mask}, &attrs);
  return {out[0], out[1]};
}

Tensor gru_sequence(const Tensor& input_gates, const Tensor& input_candidate,
                    const Tensor& gate_kernel, const Tensor& candidate_kernel, const Tensor& mask) {
  return gru_composite()({input_gates, input_candidate, gate_kernel, candidate_kernel, mask})[0];
}

}  // namespace ops
}  // namespace trainyard
