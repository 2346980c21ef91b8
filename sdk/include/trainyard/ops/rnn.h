// The recurrent ops of ops.h (core/src/engine/ops/rnn.cc declares and implements them): whole
// sequences of TensorFlow's BasicLSTMCell and GRUCell over time-major inputs whose input half
// of every step is already applied. pkg/layers' dynamic_rnn is their user.
//
// Both are composites (composite.h) with their own gradient (backpropagation through time): a
// backend with fused kernels runs a sequence as one loop of per-step products and fused
// elementwise gate math, forward and backward; elsewhere they run as the per-step ops below.
//
// `mask` [T, B] (bool) says which steps of which examples are computed: where it is false the
// state is carried through unchanged, as tf.nn.dynamic_rnn does past a sequence's length. The
// state before step 0 is zero. f32 and f64. Errors as ops.h says, naming the op and the shapes.
#ifndef TRAINYARD_OPS_RNN_H_
#define TRAINYARD_OPS_RNN_H_

#include "trainyard/export.h"
#include "trainyard/tensor.h"

namespace trainyard {

namespace ops {

// The states after every step, [T, B, U] each.
struct LstmSequence {
  Tensor h;
  Tensor c;
};

// BasicLSTMCell over T steps. input_gates [T, B, 4U]: x_t K_x + b for every step, in
// TensorFlow's gate order i, j, f, o; recurrent_kernel [U, 4U]: K_h. Per step:
//   [i, j, f, o] = input_gates[t] + h K_h;
//   c' = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j);  h' = tanh(c') * sigmoid(o).
TRAINYARD_API LstmSequence lstm_sequence(const Tensor& input_gates, const Tensor& recurrent_kernel,
                                         const Tensor& mask, double forget_bias);

// GRUCell over T steps; returns h after every step [T, B, U]. input_gates [T, B, 2U] (r, u),
// input_candidate [T, B, U], gate_kernel [U, 2U], candidate_kernel [U, U]. Per step:
//   [r, u] = sigmoid(input_gates[t] + h K_g);  c = tanh(input_candidate[t] + (r * h) K_c);
//   h' = u * h + (1 - u) * c   (the reset gate before the recurrent product, as TensorFlow).
TRAINYARD_API Tensor gru_sequence(const Tensor& input_gates, const Tensor& input_candidate,
                                  const Tensor& gate_kernel, const Tensor& candidate_kernel,
                                  const Tensor& mask);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_RNN_H_
