// The recurrent ops (ops/rnn.h: lstm_sequence and gru_sequence) on every test backend, against
// plain double loops of TensorFlow's BasicLSTMCell and GRUCell: every step's state, with a mask
// that is not a prefix (a masked step carries the state, whatever follows), gate inputs that
// saturate, and errors naming the op and the shapes. The cpu backend runs them as fused loops,
// the opaque backend as the composed per-step ops. Gradients: pkg_rnn_test.cc (against the
// per-step graph and central differences) and the conformance suite's cases_rnn.cc.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(RnnOpTest);

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// row [B, K] times w [K, N], added to out [B, N].
void add_product(const double* row, const std::vector<double>& w, int64_t b, int64_t k, int64_t n,
                 double* out) {
  for (int64_t e = 0; e < b; ++e)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) out[e * n + j] += row[e * k + i] * w[i * n + j];
}

// B = 7 and U = 20: products of a 6-row tile and one row, over whole and partial 16-column
// panels on the cpu backend (packed_gemm.h).
constexpr int64_t kT = 5, kB = 7, kU = 20;
// mask [T, B]: examples 0 and 6 run every step, example 2 none, the others skip some steps and
// run again after them.
const std::vector<double> kMask = [] {
  std::vector<double> m;
  for (int64_t t = 0; t < kT; ++t) {
    for (int64_t e = 0; e < kB; ++e) {
      m.push_back(e == 0 || e == 6 ? 1.0 : e == 2 ? 0.0 : (t + e) % 3 != 1 ? 1.0 : 0.0);
    }
  }
  return m;
}();

TEST_P(RnnOpTest, LstmSequenceMatchesBasicLstmCellStepByStep) {
  Array x = random_array({kT, kB, 4 * kU}, -6, 6, 1300);
  x.values[0] = 40.0;  // saturated gates
  x.values[5] = -40.0;
  x.values[7] = 1e-3;
  Array w = random_array({kU, 4 * kU}, -1, 1, 1301);
  Array mask{{kT, kB}, kMask};
  const double forget_bias = 1.0;
  Array h_expected{{kT, kB, kU}, {}}, c_expected{{kT, kB, kU}, {}};
  std::vector<double> h(kB * kU, 0.0), c(kB * kU, 0.0);
  for (int64_t t = 0; t < kT; ++t) {
    std::vector<double> g(x.values.begin() + t * kB * 4 * kU,
                          x.values.begin() + (t + 1) * kB * 4 * kU);
    add_product(h.data(), w.values, kB, kU, 4 * kU, g.data());
    for (int64_t e = 0; e < kB; ++e) {
      if (kMask[t * kB + e] == 0) continue;
      for (int64_t k = 0; k < kU; ++k) {
        const double* ge = g.data() + e * 4 * kU;
        double& ce = c[e * kU + k];
        ce = ce * sigmoid(ge[2 * kU + k] + forget_bias) + sigmoid(ge[k]) * std::tanh(ge[kU + k]);
        h[e * kU + k] = std::tanh(ce) * sigmoid(ge[3 * kU + k]);
      }
    }
    h_expected.values.insert(h_expected.values.end(), h.begin(), h.end());
    c_expected.values.insert(c_expected.values.end(), c.begin(), c.end());
  }
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    ops::LstmSequence s = ops::lstm_sequence(tensor(x, dtype), tensor(w, dtype),
                                             tensor(mask, DType::kBool), forget_bias);
    EXPECT_TRUE(Matches(s.h, dtype, h_expected, tolerance_for(dtype, kF32Conv)));
    EXPECT_TRUE(Matches(s.c, dtype, c_expected, tolerance_for(dtype, kF32Conv)));
  }
}

TEST_P(RnnOpTest, GruSequenceAppliesTheResetGateBeforeTheRecurrentProduct) {
  Array xg = random_array({kT, kB, 2 * kU}, -6, 6, 1310);
  Array xc = random_array({kT, kB, kU}, -6, 6, 1311);
  xg.values[1] = 40.0;
  xc.values[2] = -40.0;
  Array wg = random_array({kU, 2 * kU}, -1, 1, 1312);
  Array wc = random_array({kU, kU}, -1, 1, 1313);
  Array mask{{kT, kB}, kMask};
  Array expected{{kT, kB, kU}, {}};
  std::vector<double> h(kB * kU, 0.0);
  for (int64_t t = 0; t < kT; ++t) {
    std::vector<double> g(xg.values.begin() + t * kB * 2 * kU,
                          xg.values.begin() + (t + 1) * kB * 2 * kU);
    add_product(h.data(), wg.values, kB, kU, 2 * kU, g.data());
    for (double& v : g) v = sigmoid(v);
    std::vector<double> rh(kB * kU);
    for (int64_t e = 0; e < kB; ++e)
      for (int64_t k = 0; k < kU; ++k) rh[e * kU + k] = g[e * 2 * kU + k] * h[e * kU + k];
    std::vector<double> cand(xc.values.begin() + t * kB * kU,
                             xc.values.begin() + (t + 1) * kB * kU);
    add_product(rh.data(), wc.values, kB, kU, kU, cand.data());
    for (int64_t e = 0; e < kB; ++e) {
      if (kMask[t * kB + e] == 0) continue;
      for (int64_t k = 0; k < kU; ++k) {
        const double u = g[e * 2 * kU + kU + k];
        h[e * kU + k] = u * h[e * kU + k] + (1.0 - u) * std::tanh(cand[e * kU + k]);
      }
    }
    expected.values.insert(expected.values.end(), h.begin(), h.end());
  }
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor out = ops::gru_sequence(tensor(xg, dtype), tensor(xc, dtype), tensor(wg, dtype),
                                   tensor(wc, dtype), tensor(mask, DType::kBool));
    EXPECT_TRUE(Matches(out, dtype, expected, tolerance_for(dtype, kF32Conv)));
  }
}

TEST_P(RnnOpTest, EmptySequencesGiveEmptyStates) {
  ops::LstmSequence s = ops::lstm_sequence(tensor(Array{{0, 2, 8}, {}}),
                                           tensor(Array{{2, 8}, std::vector<double>(16, 0.5)}),
                                           tensor(Array{{0, 2}, {}}, DType::kBool), 1.0);
  EXPECT_EQ(s.h.shape(), (Shape{0, 2, 2}));
  EXPECT_EQ(s.c.shape(), (Shape{0, 2, 2}));
}

TEST_P(RnnOpTest, BadShapesNameTheOpAndBothShapes) {
  Tensor x = tensor(random_array({3, 2, 8}, -1, 1, 1320));
  Tensor mask = tensor(Array{{3, 2}, {1, 1, 1, 1, 1, 1}}, DType::kBool);
  Tensor w_wrong = tensor(random_array({3, 8}, -1, 1, 1321));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::lstm_sequence(x, w_wrong, mask, 1.0); }),
                       {"lstm_sequence", "[3, 2, 8]", "[3, 8]"}));
  Tensor w = tensor(random_array({2, 8}, -1, 1, 1322));
  Tensor float_mask = tensor(Array{{3, 2}, {1, 1, 1, 1, 1, 1}});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::lstm_sequence(x, w, float_mask, 1.0); }),
                       {"lstm_sequence", "mask"}));
  Tensor short_mask = tensor(Array{{2, 2}, {1, 1, 1, 1}}, DType::kBool);
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::lstm_sequence(x, w, short_mask, 1.0); }),
                       {"lstm_sequence", "[3, 2]"}));
  // GRU: input gates [3, 2, 4] (U = 2), a candidate of the wrong width.
  Tensor xg = tensor(random_array({3, 2, 4}, -1, 1, 1323));
  Tensor xc = tensor(random_array({3, 2, 3}, -1, 1, 1324));
  Tensor wg = tensor(random_array({2, 4}, -1, 1, 1325));
  Tensor wc = tensor(random_array({2, 2}, -1, 1, 1326));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::gru_sequence(xg, xc, wg, wc, mask); }),
                       {"gru_sequence", "[3, 2, 3]"}));
}

}  // namespace
}  // namespace trainyard
