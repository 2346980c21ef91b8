// Op cases of the recurrent family (op_cases.h; the composites are declared in
// core/src/engine/ops/rnn.cc): whole LSTM and GRU sequences with ragged lengths, forward and
// through their backward composites. The reference backend has no fused kernels, so a backend's
// fused loops are checked against the composition of plain ops.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/autodiff.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {
namespace {

// mask [T = 4, B = 3], time-major: sequence lengths 4, 2 and 3.
InputSpec ragged_mask() {
  return fixed(Shape{4, 3}, DType::kBool, {1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0});
}

Tensor trainable(const Tensor& x) {
  Tensor t = ops::copy(x);
  t.set_requires_grad(true);
  return t;
}

}  // namespace

void add_rnn_cases(std::vector<OpCase>& c) {
  using namespace ops;
  // U = 3: input gates [4, 3, 12], recurrent kernel [3, 12].
  c.push_back({"lstm_sequence",
               "lstm_sequence",
               {f32(Shape{4, 3, 12}, -3, 3), f32(Shape{3, 12}, -1, 1), ragged_mask()},
               [](Backend&, const Inputs& x) {
                 LstmSequence s = lstm_sequence(x[0], x[1], x[2], 1.0);
                 return Outputs{s.h, s.c};
               },
               kAccumulating,
               true});
  c.push_back({"lstm_sequence_grad",
               "lstm_sequence_grad",
               {f32(Shape{4, 3, 12}, -3, 3), f32(Shape{3, 12}, -1, 1), ragged_mask()},
               [](Backend&, const Inputs& x) {
                 Tensor gates = trainable(x[0]), kernel = trainable(x[1]);
                 LstmSequence s = lstm_sequence(gates, kernel, x[2], 1.0);
                 Tensor loss = add(reduce_sum(mul(s.h, s.h)), reduce_sum(s.c));
                 return gradients(loss, Inputs{gates, kernel});
               },
               kGradient});
  // U = 3: input gates [4, 3, 6], candidate [4, 3, 3], kernels [3, 6] and [3, 3].
  c.push_back({"gru_sequence",
               "gru_sequence",
               {f32(Shape{4, 3, 6}, -3, 3), f32(Shape{4, 3, 3}, -3, 3), f32(Shape{3, 6}, -1, 1),
                f32(Shape{3, 3}, -1, 1), ragged_mask()},
               [](Backend&, const Inputs& x) {
                 return Outputs{gru_sequence(x[0], x[1], x[2], x[3], x[4])};
               },
               kAccumulating,
               true});
  c.push_back({"gru_sequence_grad",
               "gru_sequence_grad",
               {f32(Shape{4, 3, 6}, -3, 3), f32(Shape{4, 3, 3}, -3, 3), f32(Shape{3, 6}, -1, 1),
                f32(Shape{3, 3}, -1, 1), ragged_mask()},
               [](Backend&, const Inputs& x) {
                 Tensor gates = trainable(x[0]), cand = trainable(x[1]);
                 Tensor wg = trainable(x[2]), wc = trainable(x[3]);
                 Tensor h = gru_sequence(gates, cand, wg, wc, x[4]);
                 return gradients(reduce_sum(mul(h, h)), Inputs{gates, cand, wg, wc});
               },
               kGradient});
}

}  // namespace trainyard::conformance
