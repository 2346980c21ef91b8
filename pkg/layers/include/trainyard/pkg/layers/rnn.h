// TensorFlow 1.x's recurrent cells and tf.nn.dynamic_rnn over a MultiRNNCell, with TensorFlow's
// semantics and variable names, composed of the SDK's public ops:
//
//   BasicLSTMCell  [i, j, f, o] = [x, h] K + b (gate order i, j, f, o);
//                  c' = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j);
//                  h' = tanh(c') * sigmoid(o).
//                  <cell>/basic_lstm_cell/kernel [D + U, 4U] (glorot uniform, get_variable's
//                  default), <cell>/basic_lstm_cell/bias [4U] (zeros).
//   GRUCell        [r, u] = sigmoid([x, h] K_g + b_g); c = tanh([x, r * h] K_c + b_c);
//                  h' = u * h + (1 - u) * c: the reset gate is applied to the state before the
//                  recurrent product, as TensorFlow's GRUCell does (cuDNN's GRU applies it after
//                  the product, which is a different model).
//                  <cell>/gru_cell/gates/kernel [D + U, 2U] (glorot uniform),
//                  <cell>/gru_cell/gates/bias [2U] (ones), <cell>/gru_cell/candidate/kernel
//                  [D + U, U] (glorot uniform), <cell>/gru_cell/candidate/bias [U] (zeros).
//
// dynamic_rnn(scope, inputs [B, T, D], sequence_length [B], options) runs num_layers cells of
// num_units as tf.nn.dynamic_rnn(MultiRNNCell([...]), sequence_length=...) does from a zero
// state: cell l's variables live under "<scope>/rnn/multi_rnn_cell/cell_<l>/", and past a
// video's sequence length its state is carried through unchanged (so padding frames never
// change the result). A length above T counts as T; a length of 0 leaves the zero state.
// Steps past the longest sequence of the batch are not computed.
//
// The input half of the kernel is applied to all T steps at once, one [B T, D] x [D, 4U]
// product per layer (LSTM). The steps then run as one op, ops::lstm_sequence or
// ops::gru_sequence (ops/rnn.h), which backends fuse into one loop of per-step products
// (RnnImplementation::kSequence, the default), or as TensorFlow's graph does, one product
// [B, U] x [U, 4U] and the gates' elementwise ops per step (kPerStep); both compute the same
// function and gradients.
//
// Errors: InvalidArgument naming "dynamic_rnn" and the shapes for an input that is not
// [B, T, D], a sequence_length that is not i32/i64 [B] or [B, 1], or num_units/num_layers <= 0.
#ifndef TRAINYARD_PKG_LAYERS_RNN_H_
#define TRAINYARD_PKG_LAYERS_RNN_H_

#include <cstdint>
#include <vector>

#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/tensor.h"

namespace trainyard::layers {

enum class RnnCell { kBasicLstm, kGru };
enum class RnnImplementation { kSequence, kPerStep };

struct RnnOptions {
  RnnCell cell = RnnCell::kBasicLstm;
  int64_t num_units = 0;
  int64_t num_layers = 1;
  double forget_bias = 1.0;  // BasicLSTMCell's
  RnnImplementation implementation = RnnImplementation::kSequence;
};

// The final state of each layer, bottom first: c and h for an LSTM (c empty for a GRU).
struct RnnState {
  std::vector<Tensor> c;  // [B, U] per layer
  std::vector<Tensor> h;  // [B, U] per layer
  // MultiRNNCell's state with state_is_tuple=False: [c_0, h_0, c_1, h_1, ...] for an LSTM,
  // [h_0, h_1, ...] for a GRU, concatenated on the feature axis.
  Tensor concatenated() const;
};

RnnState dynamic_rnn(VariableScope& scope, const Tensor& inputs, const Tensor& sequence_length,
                     const RnnOptions& options);

// tf.reverse_sequence(inputs, lengths, seq_axis=1, batch_axis=0): reverses the first
// lengths[b] frames of each example (lengths clamped to [0, T]); the rest stay in place.
Tensor reverse_sequence(const Tensor& inputs, const Tensor& lengths);

}  // namespace trainyard::layers

#endif  // TRAINYARD_PKG_LAYERS_RNN_H_
