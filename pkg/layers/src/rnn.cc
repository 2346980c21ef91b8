#include "trainyard/pkg/layers/rnn.h"

#include <algorithm>
#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/layers.h"

namespace trainyard::layers {
namespace {

// The lengths as host integers clamped to [0, max_frames].
std::vector<int64_t> host_lengths(const char* function, const Tensor& inputs,
                                  const Tensor& lengths) {
  const Shape& s = inputs.shape();
  if (s.rank() != 3) {
    throw InvalidArgument(std::string(function) + ": the input is " + inputs.description() +
                          "; expected [batch, max_frames, features]");
  }
  const Shape& n = lengths.shape();
  const bool counts = (n.rank() == 1 || (n.rank() == 2 && n[1] == 1)) && n[0] == s[0];
  const bool integer = lengths.dtype() == DType::kI32 || lengths.dtype() == DType::kI64;
  if (!counts || !integer) {
    throw InvalidArgument(std::string(function) + ": sequence_length is " + lengths.description() +
                          "; expected i32 or i64 [" + std::to_string(s[0]) + "] for the input " +
                          inputs.description());
  }
  std::vector<int64_t> out = ops::cast(lengths, DType::kI64).to_vector<int64_t>();
  for (int64_t& v : out) v = std::clamp<int64_t>(v, 0, s[1]);
  return out;
}

Tensor weights(VariableScope& scope, const char* name, int64_t rows, int64_t cols, DType dtype) {
  VariableSpec spec;
  spec.name = name;
  spec.dtype = dtype;
  spec.shape = Shape{rows, cols};
  spec.initializer = xavier_initializer();
  return scope.variable(spec).value();
}

Tensor bias(VariableScope& scope, const char* name, int64_t size, double value, DType dtype) {
  VariableSpec spec;
  spec.name = name;
  spec.dtype = dtype;
  spec.shape = Shape{size};
  spec.initializer = value == 0.0 ? zeros_initializer() : constant_initializer(value);
  return scope.variable(spec).value();
}

// x [T * B, D] times the first D rows of `kernel`, plus `b`: the input half of every step.
Tensor input_projection(const Tensor& x, const Tensor& kernel, const Tensor& b, int64_t d) {
  Tensor w_x = ops::slice(kernel, {0, 0}, {d, -1});
  return ops::add(ops::matmul(x, w_x), b);
}

// The T steps of time-major [T, B, G] as T tensors [B, G]: one split, whose gradient is one
// concatenation (slicing step by step would pad each step's gradient to [T, B, G]).
std::vector<Tensor> steps_of(const Tensor& time_major) {
  const int64_t t = time_major.shape()[0], b = time_major.shape()[1], g = time_major.shape()[2];
  std::vector<Tensor> out = ops::split(time_major, std::vector<int64_t>(std::size_t(t), 1), 0);
  for (Tensor& step : out) step = ops::reshape(step, Shape{b, g});
  return out;
}

// One layer over time-major inputs [T, B, D], for `steps` steps. Returns the outputs [T', B, U]
// of the computed steps (for the next layer) and the final state.
struct LayerResult {
  Tensor outputs;
  Tensor c, h;
};

// The last step of time-major [T, B, U] as [B, U].
Tensor last_step(const Tensor& time_major) {
  const int64_t t = time_major.shape()[0];
  return ops::reshape(ops::slice_outer(time_major, t - 1, 1),
                      Shape{time_major.shape()[1], time_major.shape()[2]});
}

// What the steps see: alive[t] [B, 1] for the per-step path, mask [T, B] for the sequence ops.
struct StepMask {
  std::vector<Tensor> alive;
  Tensor mask;
};

LayerResult run_layer(VariableScope& cell_scope, const Tensor& time_major, const StepMask& masks,
                      int64_t steps, const RnnOptions& options) {
  const std::vector<Tensor>& alive = masks.alive;
  const bool sequence = options.implementation == RnnImplementation::kSequence && steps > 0;
  const int64_t batch = time_major.shape()[1], d = time_major.shape()[2];
  const int64_t u = options.num_units;
  const DType dtype = time_major.dtype();
  Backend& backend = time_major.backend();
  Tensor x = ops::reshape(ops::slice_outer(time_major, 0, steps), Shape{steps * batch, d});
  Tensor h = ops::zeros(backend, Shape{batch, u}, time_major.dtype());
  Tensor c = h;
  std::vector<Tensor> outputs;
  outputs.reserve(static_cast<std::size_t>(steps));

  if (options.cell == RnnCell::kBasicLstm) {
    VariableScope cell = cell_scope.child("basic_lstm_cell");
    Tensor kernel = weights(cell, "kernel", d + u, 4 * u, dtype);
    Tensor b = bias(cell, "bias", 4 * u, 0.0, dtype);
    Tensor w_h = ops::slice(kernel, {d, 0}, {-1, -1});
    Tensor input_gates =
        ops::reshape(input_projection(x, kernel, b, d), Shape{steps, batch, 4 * u});
    if (sequence) {
      ops::LstmSequence seq = ops::lstm_sequence(input_gates, w_h, masks.mask, options.forget_bias);
      return {seq.h, last_step(seq.c), last_step(seq.h)};
    }
    std::vector<Tensor> projected = steps_of(input_gates);
    for (int64_t t = 0; t < steps; ++t) {
      Tensor gates = ops::add(projected[std::size_t(t)], ops::matmul(h, w_h));
      std::vector<Tensor> ijfo = ops::split(gates, {u, u, u, u}, 1);
      Tensor new_c = ops::add(ops::mul(c, ops::sigmoid(ops::add(ijfo[2], options.forget_bias))),
                              ops::mul(ops::sigmoid(ijfo[0]), ops::tanh(ijfo[1])));
      Tensor new_h = ops::mul(ops::tanh(new_c), ops::sigmoid(ijfo[3]));
      const Tensor& keep = alive[static_cast<std::size_t>(t)];
      c = ops::where(keep, new_c, c);
      h = ops::where(keep, new_h, h);
      outputs.push_back(ops::reshape(h, Shape{1, batch, u}));
    }
  } else {
    VariableScope cell = cell_scope.child("gru_cell");
    VariableScope gates_scope = cell.child("gates");
    VariableScope candidate_scope = cell.child("candidate");
    Tensor gate_kernel = weights(gates_scope, "kernel", d + u, 2 * u, dtype);
    Tensor gate_bias = bias(gates_scope, "bias", 2 * u, 1.0, dtype);
    Tensor cand_kernel = weights(candidate_scope, "kernel", d + u, u, dtype);
    Tensor cand_bias = bias(candidate_scope, "bias", u, 0.0, dtype);
    Tensor gate_w_h = ops::slice(gate_kernel, {d, 0}, {-1, -1});
    Tensor cand_w_h = ops::slice(cand_kernel, {d, 0}, {-1, -1});
    Tensor input_gates =
        ops::reshape(input_projection(x, gate_kernel, gate_bias, d), Shape{steps, batch, 2 * u});
    Tensor input_candidate =
        ops::reshape(input_projection(x, cand_kernel, cand_bias, d), Shape{steps, batch, u});
    if (sequence) {
      Tensor hs = ops::gru_sequence(input_gates, input_candidate, gate_w_h, cand_w_h, masks.mask);
      return {hs, Tensor(), last_step(hs)};
    }
    std::vector<Tensor> gate_x = steps_of(input_gates);
    std::vector<Tensor> cand_x = steps_of(input_candidate);
    for (int64_t t = 0; t < steps; ++t) {
      Tensor value = ops::sigmoid(ops::add(gate_x[std::size_t(t)], ops::matmul(h, gate_w_h)));
      std::vector<Tensor> ru = ops::split(value, {u, u}, 1);
      Tensor candidate =
          ops::tanh(ops::add(cand_x[std::size_t(t)], ops::matmul(ops::mul(ru[0], h), cand_w_h)));
      // u * h + (1 - u) * c, written as c + u * (h - c).
      Tensor new_h = ops::add(candidate, ops::mul(ru[1], ops::sub(h, candidate)));
      h = ops::where(alive[static_cast<std::size_t>(t)], new_h, h);
      outputs.push_back(ops::reshape(h, Shape{1, batch, u}));
    }
    c = Tensor();
  }
  LayerResult result;
  result.outputs = ops::concat(outputs, 0);
  result.c = c;
  result.h = h;
  return result;
}

}  // namespace

Tensor RnnState::concatenated() const {
  std::vector<Tensor> parts;
  for (std::size_t l = 0; l < h.size(); ++l) {
    if (l < c.size() && c[l].defined()) parts.push_back(c[l]);
    parts.push_back(h[l]);
  }
  return ops::concat(parts, 1);
}

RnnState dynamic_rnn(VariableScope& scope, const Tensor& inputs, const Tensor& sequence_length,
                     const RnnOptions& options) {
  std::vector<int64_t> lengths = host_lengths("dynamic_rnn", inputs, sequence_length);
  if (options.num_units <= 0 || options.num_layers <= 0) {
    throw InvalidArgument("dynamic_rnn: num_units is " + std::to_string(options.num_units) +
                          " and num_layers " + std::to_string(options.num_layers) +
                          "; expected both > 0");
  }
  const int64_t batch = inputs.shape()[0];
  const int64_t steps = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  Backend& backend = inputs.backend();

  // Whether step t is within each example's sequence: mask [T, B] for the sequence ops, or
  // alive[t] [B, 1] for the per-step path.
  // The mask is computed by ops from sequence_length (t < length), not on the host, so that a
  // captured forward (the ONNX export) holds it as a function of the lengths.
  StepMask masks;
  Tensor mask;
  if (steps > 0) {
    std::vector<int32_t> step_index(static_cast<std::size_t>(steps));
    for (int64_t t = 0; t < steps; ++t) step_index[static_cast<std::size_t>(t)] = int32_t(t);
    Tensor length = ops::cast(ops::reshape(sequence_length, Shape{batch, 1}), DType::kI32);
    mask = ops::transpose(
        ops::less(Tensor::from_vector(backend, Shape{1, steps}, step_index), length), {1, 0});
  }
  if (options.implementation == RnnImplementation::kSequence) {
    masks.mask = mask;
  } else {
    for (int64_t t = 0; t < steps; ++t) {
      masks.alive.push_back(ops::reshape(ops::slice_outer(mask, t, 1), Shape{batch, 1}));
    }
  }

  RnnState state;
  VariableScope cells = scope.child("rnn").child("multi_rnn_cell");
  Tensor layer_input = ops::transpose(inputs, {1, 0, 2});  // [T, B, D]
  for (int64_t l = 0; l < options.num_layers; ++l) {
    VariableScope cell = cells.child("cell_" + std::to_string(l));
    if (steps == 0) {
      Tensor zero = ops::zeros(backend, Shape{batch, options.num_units}, inputs.dtype());
      // Create the variables all the same, so a checkpoint holds them from the first step.
      LayerResult unused = run_layer(cell, layer_input, masks, 0, options);
      (void)unused;
      if (options.cell == RnnCell::kBasicLstm) state.c.push_back(zero);
      state.h.push_back(zero);
      continue;
    }
    LayerResult r = run_layer(cell, layer_input, masks, steps, options);
    if (options.cell == RnnCell::kBasicLstm) state.c.push_back(r.c);
    state.h.push_back(r.h);
    layer_input = r.outputs;
  }
  return state;
}

Tensor reverse_sequence(const Tensor& inputs, const Tensor& lengths) {
  std::vector<int64_t> n = host_lengths("reverse_sequence", inputs, lengths);
  const int64_t batch = inputs.shape()[0], frames = inputs.shape()[1], d = inputs.shape()[2];
  std::vector<int32_t> index(static_cast<std::size_t>(batch * frames));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < frames; ++t) {
      const int64_t from = t < n[b] ? n[b] - 1 - t : t;
      index[static_cast<std::size_t>(b * frames + t)] = static_cast<int32_t>(b * frames + from);
    }
  }
  Tensor rows = ops::gather(ops::reshape(inputs, Shape{batch * frames, d}),
                            Tensor::from_vector(inputs.backend(), Shape{batch * frames}, index), 0);
  return ops::reshape(rows, Shape{batch, frames, d});
}

}  // namespace trainyard::layers
