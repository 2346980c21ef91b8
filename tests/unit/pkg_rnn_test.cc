// pkg/layers' recurrent layers (rnn.h) on every test backend: TensorFlow's variable names and
// initializers, BasicLSTMCell and GRUCell outputs against plain double-precision loops of
// TensorFlow's formulas, state carried through past each sequence's length (padding never
// changes the result), stacked layers, reverse_sequence, and gradients by central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/layers/rnn.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using layers::RnnCell;
using layers::RnnOptions;
using layers::VariableScope;
using testing::FakeModelContext;

class PkgRnnTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }
  Tensor tensor(const Shape& shape, const std::vector<double>& v) const {
    return Tensor::from_vector(backend(), shape, v);
  }
  Tensor lengths(const std::vector<int32_t>& v) const {
    return Tensor::from_vector(backend(), Shape{static_cast<int64_t>(v.size())}, v);
  }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, PkgRnnTest, ::testing::ValuesIn(test::backend_names()),
                         backend_test_name);

std::vector<double> values(const Tensor& t) {
  NoGradScope no_grad;
  return t.dtype() == DType::kF64 ? t.to_vector<double>()
                                  : ops::cast(t, DType::kF64).to_vector<double>();
}

std::vector<double> ramp(int64_t n, double scale, double offset = 0.0) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(std::sin(1.3 * static_cast<double>(i) + offset) * scale);
  return v;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// TensorFlow's BasicLSTMCell / GRUCell, one layer, in plain double loops. x is [B, T, D]
// row-major; kernels are [D + U, G U] row-major. Returns the final [c | h] or h per example.
struct Reference {
  int64_t b, t, d, u;
  std::vector<double> x;
  std::vector<int32_t> len;

  // s[k] = sum_i in[i] * w[i, k] for the concatenated input [x_t, h].
  std::vector<double> product(const std::vector<double>& in, const std::vector<double>& w,
                              int64_t cols) const {
    std::vector<double> out(static_cast<std::size_t>(cols), 0.0);
    for (std::size_t i = 0; i < in.size(); ++i)
      for (int64_t k = 0; k < cols; ++k) out[k] += in[i] * w[i * cols + k];
    return out;
  }
  std::vector<double> input_at(int64_t e, int64_t step, const std::vector<double>& h) const {
    std::vector<double> in(x.begin() + (e * t + step) * d, x.begin() + (e * t + step + 1) * d);
    in.insert(in.end(), h.begin(), h.end());
    return in;
  }

  void lstm(const std::vector<double>& kernel, const std::vector<double>& bias, double forget_bias,
            std::vector<double>* c_out, std::vector<double>* h_out) const {
    for (int64_t e = 0; e < b; ++e) {
      std::vector<double> c(u, 0.0), h(u, 0.0);
      for (int64_t s = 0; s < std::min<int64_t>(len[e], t); ++s) {
        std::vector<double> g = product(input_at(e, s, h), kernel, 4 * u);
        for (int64_t k = 0; k < 4 * u; ++k) g[k] += bias[k];
        for (int64_t k = 0; k < u; ++k) {
          c[k] = c[k] * sigmoid(g[2 * u + k] + forget_bias) + sigmoid(g[k]) * std::tanh(g[u + k]);
          h[k] = std::tanh(c[k]) * sigmoid(g[3 * u + k]);
        }
      }
      c_out->insert(c_out->end(), c.begin(), c.end());
      h_out->insert(h_out->end(), h.begin(), h.end());
    }
  }

  std::vector<double> gru(const std::vector<double>& gk, const std::vector<double>& gb,
                          const std::vector<double>& ck, const std::vector<double>& cb) const {
    std::vector<double> out;
    for (int64_t e = 0; e < b; ++e) {
      std::vector<double> h(u, 0.0);
      for (int64_t s = 0; s < std::min<int64_t>(len[e], t); ++s) {
        std::vector<double> g = product(input_at(e, s, h), gk, 2 * u);
        std::vector<double> rh(u);
        for (int64_t k = 0; k < u; ++k) rh[k] = sigmoid(g[k] + gb[k]) * h[k];
        std::vector<double> cand = product(input_at(e, s, rh), ck, u);
        for (int64_t k = 0; k < u; ++k) {
          const double upd = sigmoid(g[u + k] + gb[u + k]);
          h[k] = upd * h[k] + (1.0 - upd) * std::tanh(cand[k] + cb[k]);
        }
      }
      out.insert(out.end(), h.begin(), h.end());
    }
    return out;
  }
};

TEST_P(PkgRnnTest, LstmHasTensorFlowNamesAndMatchesBasicLstmCellWithRaggedLengths) {
  FakeModelContext ctx(backend());
  const int64_t b = 3, t = 4, d = 2, u = 3;
  Reference ref{b, t, d, u, ramp(b * t * d, 0.9), {4, 2, 0}};
  RnnOptions options;
  options.num_units = u;
  options.forget_bias = 1.0;
  Tensor x = tensor({b, t, d}, ref.x);
  VariableScope root(ctx, Mode::kTrain);
  layers::RnnState state = layers::dynamic_rnn(root, x, lengths(ref.len), options);

  Variable& kernel = ctx.at("rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel");
  Variable& bias = ctx.at("rnn/multi_rnn_cell/cell_0/basic_lstm_cell/bias");
  EXPECT_EQ(kernel.spec().shape, (Shape{d + u, 4 * u}));
  EXPECT_EQ(kernel.spec().initializer.kind, Initializer::Kind::kGlorotUniform);
  EXPECT_EQ(bias.spec().shape, (Shape{4 * u}));
  EXPECT_EQ(bias.spec().initializer.kind, Initializer::Kind::kZeros);
  EXPECT_EQ(ctx.variable_names().size(), 2u);

  // Non-zero biases so that the gate order i, j, f, o matters.
  std::vector<double> bias_values = ramp(4 * u, 0.5, 2.0);
  bias.assign(tensor({4 * u}, bias_values));
  VariableScope again(ctx, Mode::kTrain);
  state = layers::dynamic_rnn(again, x, lengths(ref.len), options);
  std::vector<double> c, h;
  ref.lstm(values(kernel.value()), bias_values, 1.0, &c, &h);
  ASSERT_EQ(state.c.size(), 1u);
  EXPECT_EQ(testing::compare_close(values(state.c[0]), c, 1e-12, 1e-10), "");
  EXPECT_EQ(testing::compare_close(values(state.h[0]), h, 1e-12, 1e-10), "");
  // The zero-length example keeps the zero state.
  for (int64_t k = 0; k < u; ++k) EXPECT_EQ(values(state.h[0])[2 * u + k], 0.0);
  // [c, h] for state_is_tuple=False.
  std::vector<double> concatenated = values(state.concatenated());
  ASSERT_EQ(concatenated.size(), static_cast<std::size_t>(b * 2 * u));
  EXPECT_DOUBLE_EQ(concatenated[0], c[0]);
  EXPECT_DOUBLE_EQ(concatenated[u], h[0]);
}

TEST_P(PkgRnnTest, GruAppliesTheResetGateBeforeTheRecurrentProduct) {
  FakeModelContext ctx(backend());
  const int64_t b = 2, t = 5, d = 3, u = 2;
  Reference ref{b, t, d, u, ramp(b * t * d, 1.1, 0.4), {5, 3}};
  RnnOptions options;
  options.cell = RnnCell::kGru;
  options.num_units = u;
  VariableScope root(ctx, Mode::kTrain);
  Tensor x = tensor({b, t, d}, ref.x);
  layers::RnnState state = layers::dynamic_rnn(root, x, lengths(ref.len), options);
  EXPECT_TRUE(state.c.empty());
  const std::string cell = "rnn/multi_rnn_cell/cell_0/gru_cell/";
  Variable& gk = ctx.at(cell + "gates/kernel");
  Variable& gb = ctx.at(cell + "gates/bias");
  Variable& ck = ctx.at(cell + "candidate/kernel");
  Variable& cb = ctx.at(cell + "candidate/bias");
  EXPECT_EQ(gk.spec().shape, (Shape{d + u, 2 * u}));
  EXPECT_EQ(gb.spec().initializer.kind, Initializer::Kind::kConstant);
  EXPECT_EQ(gb.spec().initializer.value, 1.0);
  EXPECT_EQ(ck.spec().shape, (Shape{d + u, u}));
  EXPECT_EQ(cb.spec().initializer.kind, Initializer::Kind::kZeros);
  std::vector<double> expected =
      ref.gru(values(gk.value()), values(gb.value()), values(ck.value()), values(cb.value()));
  EXPECT_EQ(testing::compare_close(values(state.h[0]), expected, 1e-12, 1e-10), "");
}

TEST_P(PkgRnnTest, PaddingFramesNeverChangeTheFinalState) {
  for (RnnCell cell : {RnnCell::kBasicLstm, RnnCell::kGru}) {
    FakeModelContext ctx(backend());
    RnnOptions options;
    options.cell = cell;
    options.num_units = 3;
    options.num_layers = 2;
    const int64_t b = 2, t = 6, d = 2;
    std::vector<double> x = ramp(b * t * d, 0.8);
    std::vector<double> garbage = x;
    // Frames 3.. of example 0 and 5 of example 1 are padding.
    for (int64_t s = 3; s < t; ++s)
      for (int64_t k = 0; k < d; ++k) garbage[(0 * t + s) * d + k] = 50.0 + s;
    for (int64_t k = 0; k < d; ++k) garbage[(1 * t + 5) * d + k] = -7.0;
    VariableScope r1(ctx, Mode::kTrain);
    Tensor a =
        layers::dynamic_rnn(r1, tensor({b, t, d}, x), lengths({3, 5}), options).concatenated();
    VariableScope r2(ctx, Mode::kTrain);
    Tensor g = layers::dynamic_rnn(r2, tensor({b, t, d}, garbage), lengths({3, 5}), options)
                   .concatenated();
    EXPECT_EQ(values(a), values(g)) << (cell == RnnCell::kGru ? "GRU" : "LSTM");
    // The second layer's input is the first layer's output: its kernel is [U + U, G U].
    Variable& k1 = ctx.at(
        "rnn/multi_rnn_cell/cell_1/" +
        std::string(cell == RnnCell::kGru ? "gru_cell/gates/kernel" : "basic_lstm_cell/kernel"));
    EXPECT_EQ(k1.spec().shape[0], 3 + 3) << k1.name();
  }
}

TEST_P(PkgRnnTest, ReverseSequenceReversesOnlyTheValidFrames) {
  Tensor x = tensor({2, 4, 1}, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(values(layers::reverse_sequence(x, lengths({3, 4}))),
            (std::vector<double>{3, 2, 1, 4, 8, 7, 6, 5}));
  EXPECT_EQ(values(layers::reverse_sequence(x, lengths({0, 9}))),
            (std::vector<double>{1, 2, 3, 4, 8, 7, 6, 5}))
      << "lengths clamp to [0, T]";
}

TEST_P(PkgRnnTest, GradientsMatchCentralDifferences) {
  for (RnnCell cell : {RnnCell::kBasicLstm, RnnCell::kGru}) {
    SCOPED_TRACE(cell == RnnCell::kGru ? "GRU" : "LSTM");
    FakeModelContext ctx(backend());
    RnnOptions options;
    options.cell = cell;
    options.num_units = 2;
    options.num_layers = 2;
    Tensor x = tensor({2, 3, 2}, ramp(12, 0.7, 0.2));
    Tensor len = lengths({3, 2});
    auto run = [&](const Tensor& in) {
      VariableScope root(ctx, Mode::kTrain);
      return layers::dynamic_rnn(root, in, len, options).concatenated();
    };
    run(x);
    std::vector<Variable*> variables = ctx.store().trainable();
    std::vector<Tensor> inputs = {x};
    for (Variable* v : variables) inputs.push_back(v->value());
    auto f = [&](const std::vector<Tensor>& in) {
      for (std::size_t i = 0; i < variables.size(); ++i) variables[i]->assign(in[i + 1]);
      return run(in[0]);
    };
    testing::GradCheckResult r = testing::check_gradients(f, inputs);
    EXPECT_TRUE(r.ok) << r.report;
    EXPECT_GT(r.checked, 40u);
  }
}

// The sequence ops (fused loops on the cpu backend, their composition elsewhere) against the
// per-step graph: the final states and the gradients of every input and variable, f32 and f64,
// two stacked layers, ragged lengths including 0 and T, and gate inputs from -40 to 40 (the
// fused kernels' sigmoid and tanh saturate, and take the small-argument path, as the ops do).
TEST_P(PkgRnnTest, SequenceOpsMatchThePerStepGraphWithGradients) {
  for (RnnCell cell : {RnnCell::kBasicLstm, RnnCell::kGru}) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      SCOPED_TRACE(std::string(cell == RnnCell::kGru ? "GRU " : "LSTM ") + dtype_name(dtype));
      const int64_t b = 5, t = 7, d = 4, u = 6;
      std::vector<double> x_values = ramp(b * t * d, 2.0, 0.3);
      x_values[3] = 40.0;
      x_values[9] = -40.0;
      x_values[17] = 0.01;
      const std::vector<int32_t> len = {7, 3, 0, 5, 7};
      struct Run {
        std::vector<double> state;
        std::vector<std::vector<double>> grads;
        std::vector<std::string> names;
      };
      auto run = [&](layers::RnnImplementation implementation) {
        FakeModelContext ctx(backend());
        RnnOptions options;
        options.cell = cell;
        options.num_units = u;
        options.num_layers = 2;
        options.implementation = implementation;
        Tensor x = ops::cast(tensor({b, t, d}, x_values), dtype);
        x.set_requires_grad(true);
        Run r;
        for (int pass = 0; pass < 2; ++pass) {
          VariableScope root(ctx, Mode::kTrain);
          if (pass == 1) {
            // Deterministic, non-zero weights (biases too, so the gate order matters).
            int salt = 0;
            for (const std::string& name : ctx.variable_names()) {
              Variable& v = ctx.at(name);
              Tensor value = ops::cast(
                  tensor(v.spec().shape, ramp(v.spec().shape.num_elements(), 0.6, 0.1 * ++salt)),
                  dtype);
              value.set_requires_grad(true);
              v.assign(value);
            }
          }
          Tensor state = layers::dynamic_rnn(root, x, lengths(len), options).concatenated();
          if (pass == 0) continue;
          Tensor weights =
              ops::cast(tensor(state.shape(), ramp(state.shape().num_elements(), 1.0, 0.7)), dtype);
          Tensor loss = ops::reduce_sum(ops::mul(state, weights));
          std::vector<Tensor> sources = {x};
          for (const std::string& name : ctx.variable_names()) {
            sources.push_back(ctx.at(name).value());
            r.names.push_back(name);
          }
          for (const Tensor& g : gradients(loss, sources)) r.grads.push_back(values(g));
          r.state = values(state);
        }
        return r;
      };
      Run sequence = run(layers::RnnImplementation::kSequence);
      Run per_step = run(layers::RnnImplementation::kPerStep);
      const double atol = dtype == DType::kF32 ? 2e-5 : 1e-12;
      const double rtol = dtype == DType::kF32 ? 2e-4 : 1e-10;
      EXPECT_EQ(testing::compare_close(sequence.state, per_step.state, atol, rtol), "");
      ASSERT_EQ(sequence.grads.size(), per_step.grads.size());
      ASSERT_EQ(sequence.names, per_step.names);
      for (std::size_t i = 0; i < sequence.grads.size(); ++i) {
        EXPECT_EQ(testing::compare_close(sequence.grads[i], per_step.grads[i], atol, rtol), "")
            << "gradient of " << (i == 0 ? std::string("the input") : sequence.names[i - 1]);
      }
    }
  }
}

TEST_P(PkgRnnTest, BadInputsNameTheFunction) {
  FakeModelContext ctx(backend());
  VariableScope root(ctx, Mode::kTrain);
  RnnOptions options;
  options.num_units = 2;
  try {
    layers::dynamic_rnn(root, tensor({2, 3}, ramp(6, 1.0)), lengths({1, 1}), options);
    FAIL() << "a rank-2 input was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic_rnn"), std::string::npos) << e.what();
  }
  EXPECT_THROW(layers::dynamic_rnn(root, tensor({2, 1, 1}, {1, 2}), lengths({1}), options),
               InvalidArgument);
  options.num_units = 0;
  EXPECT_THROW(layers::dynamic_rnn(root, tensor({2, 1, 1}, {1, 2}), lengths({1, 1}), options),
               InvalidArgument);
}

}  // namespace
}  // namespace trainyard
