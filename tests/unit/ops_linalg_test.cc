// The forward pass of the linalg ops (ops/linalg.h: matmul and matmul_bias_act) on every test
// backend, against the plain reference loops of reference_ops.h. ops_test_util.h has what the
// ops_<family>_test.cc files share.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(LinearAlgebraTest);

// =============================================================================================
// Linear algebra

TEST_P(LinearAlgebraTest, MatmulAllFourTransposeCombinations) {
  const int64_t m = 3, k = 4, n = 5;
  uint32_t seed = 1400;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(std::string("matmul ") + dtype_name(dtype) + " transpose_a " +
                     (ta ? "true" : "false") + " transpose_b " + (tb ? "true" : "false"));
        Array a = random_array(ta ? Dims{k, m} : Dims{m, k}, -2, 2, seed++);
        Array b = random_array(tb ? Dims{n, k} : Dims{k, n}, -2, 2, seed++);
        EXPECT_TRUE(Matches(ops::matmul(tensor(a, dtype), tensor(b, dtype), ta, tb), dtype,
                            ref::matmul(a, b, ta, tb), tolerance_for(dtype, kF32Conv)));
      }
    }
  }
}

TEST_P(LinearAlgebraTest, MatmulBatchedOverEqualBatchDims) {
  uint32_t seed = 1500;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("transpose_a ") + (ta ? "true" : "false") + " transpose_b " +
                   (tb ? "true" : "false"));
      Array a = random_array(ta ? Dims{2, 4, 3} : Dims{2, 3, 4}, -2, 2, seed++);
      Array b = random_array(tb ? Dims{2, 5, 4} : Dims{2, 4, 5}, -2, 2, seed++);
      EXPECT_TRUE(Matches(ops::matmul(tensor(a), tensor(b), ta, tb), DType::kF32,
                          ref::matmul(a, b, ta, tb), kF32Conv));
    }
  }
  Array a = random_array({2, 3, 2, 4}, -2, 2, seed++);
  Array b = random_array({2, 3, 4, 3}, -2, 2, seed++);
  EXPECT_TRUE(Matches(ops::matmul(tensor(a, DType::kF64), tensor(b, DType::kF64)), DType::kF64,
                      ref::matmul(a, b, false, false), kF64));
}

TEST_P(LinearAlgebraTest, MatmulSharesARank2BAcrossEveryBatch) {
  uint32_t seed = 1600;
  for (bool tb : {false, true}) {
    SCOPED_TRACE(std::string("transpose_b ") + (tb ? "true" : "false"));
    Array a = random_array({2, 3, 4}, -2, 2, seed++);
    Array b = random_array(tb ? Dims{5, 4} : Dims{4, 5}, -2, 2, seed++);
    EXPECT_TRUE(Matches(ops::matmul(tensor(a), tensor(b), false, tb), DType::kF32,
                        ref::matmul(a, b, false, tb), kF32Conv));
  }
  Array a = random_array({2, 2, 4, 3}, -2, 2, seed++);
  Array b = random_array({4, 5}, -2, 2, seed++);
  EXPECT_TRUE(Matches(ops::matmul(tensor(a), tensor(b), true, false), DType::kF32,
                      ref::matmul(a, b, true, false), kF32Conv));
}

TEST_P(LinearAlgebraTest, MatmulSharesARank2AAcrossEveryBatchOfB) {
  uint32_t seed = 1650;
  for (bool ta : {false, true}) {
    SCOPED_TRACE(std::string("transpose_a ") + (ta ? "true" : "false"));
    Array a = random_array(ta ? Dims{4, 3} : Dims{3, 4}, -2, 2, seed++);
    Array b = random_array({2, 4, 5}, -2, 2, seed++);
    Tensor y = ops::matmul(tensor(a), tensor(b), ta, false);
    EXPECT_EQ(y.shape(), (Shape{2, 3, 5}));
    EXPECT_TRUE(Matches(y, DType::kF32, ref::matmul(a, b, ta, false), kF32Conv));
  }
  Array a = random_array({3, 4}, -2, 2, seed++);
  Array b = random_array({2, 2, 5, 4}, -2, 2, seed++);
  EXPECT_TRUE(Matches(ops::matmul(tensor(a, DType::kF64), tensor(b, DType::kF64), false, true),
                      DType::kF64, ref::matmul(a, b, false, true), kF64));
}

TEST_P(LinearAlgebraTest, MatmulDegenerateDimensions) {
  struct Case {
    Dims a, b;
  };
  uint32_t seed = 1680;
  for (const Case& c : {Case{{1, 4}, {4, 1}}, Case{{3, 1}, {1, 5}}, Case{{2, 0}, {0, 3}},
                        Case{{0, 4}, {4, 3}}, Case{{2, 4}, {4, 0}}, Case{{0, 2, 3}, {0, 3, 2}}}) {
    SCOPED_TRACE("matmul(f32" + dims_string(c.a) + ", f32" + dims_string(c.b) + ")");
    Array a = random_array(c.a, -2, 2, seed++);
    Array b = random_array(c.b, -2, 2, seed++);
    Tensor ta = tensor(a), tb = tensor(b);
    EXPECT_TRUE(MatchesResultOf([&] { return ops::matmul(ta, tb); }, DType::kF32,
                                ref::matmul(a, b, false, false), kF32Conv));
  }
}

TEST_P(LinearAlgebraTest, MatmulBiasActAppliesEachActivation) {
  struct Case {
    Activation activation;
    ref::Act reference;
    const char* name;
  };
  Array x = random_array({3, 4}, -2, 2, 1700);
  Array w = random_array({4, 5}, -1, 1, 1701);
  Array bias = random_array({5}, -1, 1, 1702);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (const Case& c : {Case{Activation::kNone, ref::Act::kNone, "none"},
                          Case{Activation::kRelu, ref::Act::kRelu, "relu"},
                          Case{Activation::kSigmoid, ref::Act::kSigmoid, "sigmoid"},
                          Case{Activation::kTanh, ref::Act::kTanh, "tanh"}}) {
      SCOPED_TRACE(std::string("matmul_bias_act ") + c.name + " " + dtype_name(dtype));
      EXPECT_TRUE(Matches(ops::matmul_bias_act(tensor(x, dtype), tensor(w, dtype),
                                               tensor(bias, dtype), c.activation),
                          dtype, ref::matmul_bias_act(x, w, bias, c.reference),
                          tolerance_for(dtype, kF32Conv)));
    }
  }
}

}  // namespace
}  // namespace trainyard
