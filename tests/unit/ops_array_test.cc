// The forward pass of the array ops (ops/array.h: reshape, slice, concat, split, transpose, pad,
// gather, scatter_add, one_hot, top_k, copy, cast and assign, and slice_outer views) on every test
// backend, against the plain reference loops of reference_ops.h. ops_test_util.h has what the
// ops_<family>_test.cc files share.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(ElementwiseTest);
TRAINYARD_BACKEND_SUITE(DataMovementTest);
TRAINYARD_BACKEND_SUITE(ViewTest);
TRAINYARD_BACKEND_SUITE(OptimizerTest);
TRAINYARD_BACKEND_SUITE(ParallelPathTest);

// =============================================================================================
// Cast

TEST_P(ElementwiseTest, CastConvertsEveryInterestingPair) {
  Array floats{{8}, {-2.7, -0.5, 0.5, 2.7, 3.0, -3.0, 0.0, 0.1}};
  auto truncate = [](double v) { return std::trunc(v); };
  auto to_f32 = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  auto to_bool = [](double v) { return v != 0.0 ? 1.0 : 0.0; };
  struct Case {
    DType from, to;
    Array input;
    std::function<double(double)> expected;
  };
  Array ints{{5}, {-7, 0, 3, 100, -1}};
  Array bools{{4}, {1, 0, 0, 1}};
  std::vector<Case> cases = {
      {DType::kF32, DType::kI32, floats, truncate},
      {DType::kF32, DType::kI64, floats, truncate},
      {DType::kF64, DType::kI32, floats, truncate},
      {DType::kF64, DType::kI64, floats, truncate},
      {DType::kF32, DType::kF64, floats, to_f32},
      {DType::kF64, DType::kF32, floats, to_f32},
      {DType::kI32, DType::kF32, ints, to_f32},
      {DType::kI64, DType::kF64, ints, to_f32},
      {DType::kI32, DType::kI64, ints, to_f32},
      {DType::kI64, DType::kI32, ints, to_f32},
      {DType::kF32, DType::kBool, floats, to_bool},
      {DType::kF64, DType::kBool, floats, to_bool},
      {DType::kI32, DType::kBool, ints, to_bool},
      {DType::kI64, DType::kBool, ints, to_bool},
      {DType::kBool, DType::kF32, bools, to_f32},
      {DType::kBool, DType::kI32, bools, to_f32},
      {DType::kBool, DType::kI64, bools, to_f32},
      {DType::kU8, DType::kF32, Array{{3}, {0, 7, 255}}, to_f32},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string("cast ") + dtype_name(c.from) + " -> " + dtype_name(c.to));
    // The input as stored in `from` (f32 rounds 0.1) is what the cast sees.
    Array stored = read(tensor(c.input, c.from));
    EXPECT_TRUE(Matches(ops::cast(tensor(c.input, c.from), c.to), c.to,
                        ref::map(stored, c.expected), kExact));
  }
}

TEST_P(ElementwiseTest, CastOfNegativeZeroAndNaNToBoolFollowsNotEqualZero) {
  Array x{{3}, {-0.0, kNaN, -kInf}};
  EXPECT_TRUE(
      Matches(ops::cast(tensor(x), DType::kBool), DType::kBool, Array{{3}, {0, 1, 1}}, kExact));
}

TEST_P(ElementwiseTest, CastToTheSameDtypeKeepsTheValues) {
  Array x = random_array({2, 2}, -1, 1, 800);
  EXPECT_TRUE(Matches(ops::cast(tensor(x), DType::kF32), DType::kF32, x, kExact));
}

// =============================================================================================
// Data movement

TEST_P(DataMovementTest, ReshapeInfersMinusOneAndSharesStorage) {
  Array x = random_array({2, 3, 4}, -1, 1, 3400);
  Tensor t = tensor(x);
  Tensor r = ops::reshape(t, Shape{4, -1});
  EXPECT_TRUE(Matches(r, DType::kF32, Array{{4, 6}, x.values}, kExact));
  EXPECT_EQ(r.storage(), t.storage());
  EXPECT_EQ(r.byte_offset(), t.byte_offset());
  EXPECT_EQ(ops::reshape(t, Shape{-1}).shape(), Shape{24});
  EXPECT_EQ(ops::reshape(t, Shape{2, 3, 1, 4}).shape(), (Shape{2, 3, 1, 4}));
  // A write through the original shows in the view.
  Array other = random_array({2, 3, 4}, -1, 1, 3401);
  ops::assign(t, tensor(other));
  EXPECT_TRUE(Matches(r, DType::kF32, Array{{4, 6}, other.values}, kExact));
  // Empty and scalar reshapes.
  EXPECT_EQ(ops::reshape(tensor(ref::filled({0, 3}, 0)), Shape{-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::reshape(tensor(Array{{1, 1}, {5}}), Shape{}).shape(), Shape{});
}

TEST_P(DataMovementTest, SliceCopiesInnerRangesAndSizeMinusOneRunsToTheEnd) {
  Array x = random_array({4, 5, 6}, -1, 1, 3500);
  for (DType dtype : {DType::kF32, DType::kI32}) {
    Array xi = dtype == DType::kI32 ? random_ints({4, 5, 6}, -50, 50, 3501) : x;
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(Matches(ops::slice(tensor(xi, dtype), {1, 2, 0}, {2, -1, 3}), dtype,
                        ref::slice(xi, {1, 2, 0}, {2, -1, 3}), kExact));
    EXPECT_TRUE(Matches(ops::slice(tensor(xi, dtype), {0, 0, 5}, {-1, 5, 1}), dtype,
                        ref::slice(xi, {0, 0, 5}, {-1, 5, 1}), kExact));
    EXPECT_TRUE(Matches(ops::slice(tensor(xi, dtype), {3, 1, 2}, {0, 2, 2}), dtype,
                        ref::slice(xi, {3, 1, 2}, {0, 2, 2}), kExact));
  }
  // A slice of whole rows is a view.
  Tensor t = tensor(x);
  Tensor rows = ops::slice(t, {1, 0, 0}, {2, -1, -1});
  EXPECT_TRUE(Matches(rows, DType::kF32, ref::slice(x, {1, 0, 0}, {2, 5, 6}), kExact));
  EXPECT_EQ(rows.storage(), t.storage());
}

TEST_P(DataMovementTest, ConcatJoinsThreeInputsAlongAMiddleAxis) {
  uint32_t seed = 3600;
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI64}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<Array> parts = {random_ints({2, 1, 3}, -50, 50, seed++),
                                random_ints({2, 3, 3}, -50, 50, seed++),
                                random_ints({2, 2, 3}, -50, 50, seed++)};
    std::vector<Tensor> inputs;
    for (const Array& p : parts) inputs.push_back(tensor(p, dtype));
    EXPECT_TRUE(Matches(ops::concat(inputs, 1), dtype, ref::concat(parts, 1), kExact));
    EXPECT_TRUE(Matches(ops::concat(inputs, -2), dtype, ref::concat(parts, 1), kExact));
  }
  std::vector<Array> last = {random_array({2, 2}, -1, 1, seed++),
                             random_array({2, 0}, -1, 1, seed++),
                             random_array({2, 3}, -1, 1, seed++)};
  std::vector<Tensor> inputs = {tensor(last[0]), tensor(last[1]), tensor(last[2])};
  EXPECT_TRUE(Matches(ops::concat(inputs, -1), DType::kF32, ref::concat(last, -1), kExact));
  EXPECT_TRUE(Matches(ops::concat(std::vector<Tensor>{tensor(last[0]), tensor(last[0])}, 0),
                      DType::kF32, ref::concat({last[0], last[0]}, 0), kExact));
}

TEST_P(DataMovementTest, SplitUndoesConcat) {
  Array x = random_array({2, 6, 3}, -1, 1, 3700);
  std::vector<Tensor> parts = ops::split(tensor(x), {1, 3, 2}, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(Matches(parts[0], DType::kF32, ref::slice(x, {0, 0, 0}, {2, 1, 3}), kExact));
  EXPECT_TRUE(Matches(parts[1], DType::kF32, ref::slice(x, {0, 1, 0}, {2, 3, 3}), kExact));
  EXPECT_TRUE(Matches(parts[2], DType::kF32, ref::slice(x, {0, 4, 0}, {2, 2, 3}), kExact));
  std::vector<Tensor> last = ops::split(tensor(x), {2, 0, 1}, -1);
  ASSERT_EQ(last.size(), 3u);
  EXPECT_TRUE(Matches(last[0], DType::kF32, ref::slice(x, {0, 0, 0}, {2, 6, 2}), kExact));
  EXPECT_EQ(last[1].shape(), (Shape{2, 6, 0}));
  EXPECT_TRUE(Matches(last[2], DType::kF32, ref::slice(x, {0, 0, 2}, {2, 6, 1}), kExact));
  std::vector<Tensor> rows = ops::split(tensor(x), {1, 1}, 0);
  EXPECT_TRUE(Matches(rows[1], DType::kF32, ref::slice(x, {1, 0, 0}, {1, 6, 3}), kExact));
}

TEST_P(DataMovementTest, TransposeRank4PermutesDimensions) {
  Array x = random_array({2, 3, 4, 5}, -1, 1, 3800);
  for (const Dims& perm :
       {Dims{2, 0, 3, 1}, Dims{3, 2, 1, 0}, Dims{0, 1, 2, 3}, Dims{-1, 0, 1, 2}}) {
    SCOPED_TRACE("perm " + dims_string(perm));
    EXPECT_TRUE(
        Matches(ops::transpose(tensor(x), perm), DType::kF32, ref::transpose(x, perm), kExact));
  }
  Array ints = random_ints({2, 3, 4, 5}, -100, 100, 3801);
  EXPECT_TRUE(Matches(ops::transpose(tensor(ints, DType::kI32), {1, 3, 0, 2}), DType::kI32,
                      ref::transpose(ints, {1, 3, 0, 2}), kExact));
}

TEST_P(DataMovementTest, PadFillsWithTheValueInTheTensorsDtype) {
  Array x = random_array({2, 3}, -1, 1, 3900);
  EXPECT_TRUE(Matches(ops::pad(tensor(x), {{1, 0}, {2, 1}}, 1.5), DType::kF32,
                      ref::pad(x, {{1, 0}, {2, 1}}, 1.5), kExact));
  EXPECT_TRUE(Matches(ops::pad(tensor(x), {{0, 0}, {0, 0}}), DType::kF32, x, kExact));
  Array y = random_array({2, 2, 3}, -1, 1, 3901);
  EXPECT_TRUE(Matches(ops::pad(tensor(y, DType::kF64), {{0, 1}, {1, 1}, {2, 0}}, -2.0), DType::kF64,
                      ref::pad(y, {{0, 1}, {1, 1}, {2, 0}}, -2.0), kExact));
  Array n = random_ints({3}, -9, 9, 3902);
  EXPECT_TRUE(Matches(ops::pad(tensor(n, DType::kI32), {{2, 3}}, 7.0), DType::kI32,
                      ref::pad(n, {{2, 3}}, 7.0), kExact));
}

TEST_P(DataMovementTest, GatherAlongAxisOneWithTwoDimensionalIndices) {
  Array params = random_array({3, 4, 2}, -1, 1, 4000);
  Array indices = random_ints({2, 3}, 0, 3, 4001);
  indices.values[0] = 3;
  indices.values[1] = 3;  // repeated index
  for (DType index_dtype : {DType::kI32, DType::kI64}) {
    SCOPED_TRACE(std::string("indices ") + dtype_name(index_dtype));
    Tensor y = ops::gather(tensor(params), tensor(indices, index_dtype), 1);
    EXPECT_EQ(y.shape(), (Shape{3, 2, 3, 2}));
    EXPECT_TRUE(Matches(y, DType::kF32, ref::gather(params, indices, 1), kExact));
    EXPECT_TRUE(Matches(ops::gather(tensor(params), tensor(indices, index_dtype), -2), DType::kF32,
                        ref::gather(params, indices, 1), kExact));
  }
  Array rows{{4}, {2, 0, 2, 1}};
  EXPECT_TRUE(Matches(ops::gather(tensor(params, DType::kF64), tensor(rows, DType::kI64)),
                      DType::kF64, ref::gather(params, Array{{4}, {2, 0, 2, 1}}, 0), kExact));
  Array ints = random_ints({5, 2}, -9, 9, 4002);
  Array scalar_index{{}, {4}};
  EXPECT_TRUE(Matches(ops::gather(tensor(ints, DType::kI32), tensor(scalar_index, DType::kI32), 0),
                      DType::kI32, ref::gather(ints, scalar_index, 0), kExact));
}

TEST_P(DataMovementTest, GatherIndexOutOfRangeIsAnErrorNamingIt) {
  Array params = random_array({3, 4}, -1, 1, 4100);
  for (double bad : {17.0, -1.0, 4.0}) {
    SCOPED_TRACE("index " + std::to_string(bad));
    Array indices{{3}, {0, bad, 1}};
    std::string m = invalid_argument_of(
        [&] { ops::gather(tensor(params), tensor(indices, DType::kI64), 1).to_vector<float>(); });
    EXPECT_TRUE(Mentions(m, {"gather", std::to_string(static_cast<int64_t>(bad))}));
  }
}

TEST_P(DataMovementTest, ScatterAddIndexOutOfRangeIsAnErrorNamingIt) {
  Array updates = random_array({3}, -1, 1, 4150);
  for (double bad : {12.0, -3.0}) {
    SCOPED_TRACE("index " + std::to_string(bad));
    Array indices{{3}, {0, bad, 1}};
    std::string m = invalid_argument_of([&] {
      ops::scatter_add(tensor(updates), tensor(indices, DType::kI32), 0, Shape{5})
          .to_vector<float>();
    });
    EXPECT_TRUE(Mentions(m, {"scatter_add", std::to_string(static_cast<int64_t>(bad))}));
  }
}

TEST_P(DataMovementTest, ScatterAddSumsRepeatedIndices) {
  Array indices{{2, 2}, {0, 2, 2, 3}};
  Array updates = random_array({3, 2, 2}, -1, 1, 4200);
  for (DType index_dtype : {DType::kI32, DType::kI64}) {
    SCOPED_TRACE(dtype_name(index_dtype));
    EXPECT_TRUE(
        Matches(ops::scatter_add(tensor(updates), tensor(indices, index_dtype), 1, Shape{3, 4}),
                DType::kF32, ref::scatter_add(updates, indices, 1, {3, 4}), kF32));
  }
  Array rows{{3}, {1, 1, 0}};
  Array row_updates = random_array({3, 3}, -1, 1, 4201);
  EXPECT_TRUE(Matches(
      ops::scatter_add(tensor(row_updates, DType::kF64), tensor(rows, DType::kI32), 0, Shape{2, 3}),
      DType::kF64, ref::scatter_add(row_updates, rows, 0, {2, 3}), kF64));
}

TEST_P(DataMovementTest, ScatterAddIntoAnOutputLargerThanTheUpdates) {
  // The usual gradient-of-gather case (an embedding lookup): few rows updated in a big table.
  Array few{{2}, {7, 2}};
  Array few_updates = random_array({2}, -1, 1, 4202);
  Tensor u = tensor(few_updates), i = tensor(few, DType::kI64);
  EXPECT_TRUE(MatchesResultOf([&] { return ops::scatter_add(u, i, 0, Shape{10}); }, DType::kF32,
                              ref::scatter_add(few_updates, few, 0, {10}), kExact));
  Array ids{{3}, {4, 0, 4}};
  Array updates = random_array({3, 2}, -1, 1, 4203);
  Tensor tu = tensor(updates), ti = tensor(ids, DType::kI32);
  EXPECT_TRUE(MatchesResultOf(
      [&] {
        return ops::scatter_add(tu, ti, 0, Shape{6, 2});
      },
      DType::kF32, ref::scatter_add(updates, ids, 0, {6, 2}), kF32));
}

TEST_P(DataMovementTest, OneHotLeavesOutOfRangeRowsAllOff) {
  Array indices{{2, 3}, {0, 3, -1, 4, 1, 2}};
  EXPECT_TRUE(Matches(ops::one_hot(tensor(indices, DType::kI32), 4, 5.0, -1.0, DType::kF64),
                      DType::kF64, ref::one_hot(indices, 4, 5.0, -1.0), kExact));
  EXPECT_TRUE(Matches(ops::one_hot(tensor(indices, DType::kI64), 4), DType::kF32,
                      ref::one_hot(indices, 4, 1.0, 0.0), kExact));
  EXPECT_TRUE(Matches(ops::one_hot(tensor(indices, DType::kI64), 3, 1.0, 0.0, DType::kI32),
                      DType::kI32, ref::one_hot(indices, 3, 1.0, 0.0), kExact));
}

TEST_P(DataMovementTest, DataMovementWorksOnEveryDtype) {
  uint32_t seed = 4240;
  for (DType dtype : {DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kBool, DType::kBF16,
                      DType::kF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    // Values every dtype holds exactly (bf16 and f16 as bit patterns).
    int64_t high = dtype == DType::kBool ? 1 : 200;
    Array x = random_ints({2, 3, 4}, 0, high, seed++);
    Array y = random_ints({2, 2, 4}, 0, high, seed++);
    Tensor tx = tensor(x, dtype), ty = tensor(y, dtype);
    EXPECT_TRUE(Matches(ops::concat(std::vector<Tensor>{tx, ty, tx}, 1), dtype,
                        ref::concat({x, y, x}, 1), kExact));
    EXPECT_TRUE(Matches(ops::slice(tx, {1, 1, 1}, {1, 2, -1}), dtype,
                        ref::slice(x, {1, 1, 1}, {1, 2, 3}), kExact));
    EXPECT_TRUE(
        Matches(ops::transpose(tx, {2, 0, 1}), dtype, ref::transpose(x, {2, 0, 1}), kExact));
    Array indices{{3}, {3, 0, 3}};
    EXPECT_TRUE(Matches(ops::gather(tx, tensor(indices, DType::kI32), 2), dtype,
                        ref::gather(x, indices, 2), kExact));
    EXPECT_TRUE(Matches(ops::copy(tx), dtype, x, kExact));
    std::vector<Tensor> parts = ops::split(tx, {1, 2}, 1);
    EXPECT_TRUE(Matches(parts[1], dtype, ref::slice(x, {0, 1, 0}, {2, 2, 4}), kExact));
  }
  // The pad value is cast to the tensor's dtype: 1 is 0x3F80 in bf16 and 0x3C00 in f16.
  struct PadCase {
    DType dtype;
    double stored_one;
  };
  Array x = random_ints({2, 3}, 0, 1, seed++);
  for (const PadCase& c :
       {PadCase{DType::kF64, 1.0}, PadCase{DType::kI32, 1.0}, PadCase{DType::kI64, 1.0},
        PadCase{DType::kU8, 1.0}, PadCase{DType::kBool, 1.0}, PadCase{DType::kBF16, 0x3F80},
        PadCase{DType::kF16, 0x3C00}}) {
    SCOPED_TRACE(std::string("pad ") + dtype_name(c.dtype));
    EXPECT_TRUE(Matches(ops::pad(tensor(x, c.dtype), {{0, 1}, {1, 0}}, 1.0), c.dtype,
                        ref::pad(x, {{0, 1}, {1, 0}}, c.stored_one), kExact));
  }
}

TEST_P(DataMovementTest, TransposeOfAHighRankTensor) {
  Array x = random_array({2, 1, 3, 1, 2, 2}, -1, 1, 4245);
  for (const Dims& perm : {Dims{5, 4, 3, 2, 1, 0}, Dims{2, 0, 5, 1, 4, 3}}) {
    SCOPED_TRACE("perm " + dims_string(perm));
    EXPECT_TRUE(
        Matches(ops::transpose(tensor(x), perm), DType::kF32, ref::transpose(x, perm), kExact));
  }
}

TEST_P(DataMovementTest, EmptyAndSizeOneEdgeCases) {
  Array x = random_array({3, 4}, -1, 1, 4250);
  Array none{{0}, {}};
  EXPECT_TRUE(Matches(ops::gather(tensor(x), tensor(none, DType::kI32), 0), DType::kF32,
                      ref::filled({0, 4}, 0.0), kExact));
  EXPECT_TRUE(Matches(ops::one_hot(tensor(Array{{2}, {0, 1}}, DType::kI32), 0), DType::kF32,
                      ref::filled({2, 0}, 0.0), kExact));
  EXPECT_TRUE(Matches(ops::concat(std::vector<Tensor>{tensor(x)}, 0), DType::kF32, x, kExact));
  EXPECT_TRUE(Matches(ops::transpose(tensor(ref::filled({0, 3}, 0.0)), {1, 0}), DType::kF32,
                      ref::filled({3, 0}, 0.0), kExact));
  Array column = random_array({4, 1}, -1, 1, 4251);
  EXPECT_TRUE(Matches(ops::softmax(tensor(column)), DType::kF32, ref::filled({4, 1}, 1.0), kF32));
  EXPECT_TRUE(
      Matches(ops::log_softmax(tensor(column)), DType::kF32, ref::filled({4, 1}, 0.0), kF32));
  EXPECT_TRUE(Matches(ops::argmax(tensor(column), 1), DType::kI64, ref::filled({4}, 0.0), kExact));
}

TEST_P(DataMovementTest, TopKIsDescendingWithLowerIndexFirstOnTies) {
  Array x{{2, 6},
          {3, 1, 3, 2, 3, 0,  //
           -1, 5, 5, -2, 0, 5}};
  for (DType dtype : {DType::kF32, DType::kI32}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto [values, indices] = ops::top_k(tensor(x, dtype), 3);
    EXPECT_TRUE(Matches(values, dtype, Array{{2, 3}, {3, 3, 3, 5, 5, 5}}, kExact));
    EXPECT_TRUE(Matches(indices, DType::kI64, Array{{2, 3}, {0, 2, 4, 1, 2, 5}}, kExact));
  }
  for (int64_t k : {0, 1, 4, 6}) {
    SCOPED_TRACE("k " + std::to_string(k));
    auto [values, indices] = ops::top_k(tensor(x), k);
    auto [ref_values, ref_indices] = ref::top_k(x, k);
    EXPECT_TRUE(Matches(values, DType::kF32, ref_values, kExact));
    EXPECT_TRUE(Matches(indices, DType::kI64, ref_indices, kExact));
  }
  Array y = random_ints({2, 3, 7}, -3, 3, 4300);
  auto [values, indices] = ops::top_k(tensor(y, DType::kF64), 5);
  auto [ref_values, ref_indices] = ref::top_k(y, 5);
  EXPECT_TRUE(Matches(values, DType::kF64, ref_values, kExact));
  EXPECT_TRUE(Matches(indices, DType::kI64, ref_indices, kExact));
}

TEST_P(DataMovementTest, CopyIsContiguousAndIndependentOfItsSource) {
  Array x = random_array({4, 3}, -1, 1, 4400);
  Tensor base = tensor(x);
  Tensor view = ops::slice_outer(base, 1, 2);
  Tensor c = ops::copy(view);
  EXPECT_TRUE(Matches(c, DType::kF32, ref::slice(x, {1, 0}, {2, 3}), kExact));
  EXPECT_NE(c.storage(), base.storage());
  EXPECT_EQ(c.byte_offset(), 0u);
  ops::assign(base, ops::zeros(backend(), Shape{4, 3}));
  EXPECT_TRUE(Matches(c, DType::kF32, ref::slice(x, {1, 0}, {2, 3}), kExact))
      << "the copy changed with its source";
  Array n = random_ints({3}, -5, 5, 4401);
  EXPECT_TRUE(Matches(ops::copy(tensor(n, DType::kI64)), DType::kI64, n, kExact));
}

// =============================================================================================
// Views at a non-zero byte offset as inputs and outputs

TEST_P(ViewTest, SliceOuterIsAViewAtARowOffset) {
  Array x = random_array({5, 3, 4}, -1, 1, 4500);
  Tensor base = tensor(x);
  Tensor v = ops::slice_outer(base, 2, 2);
  EXPECT_EQ(v.storage(), base.storage());
  EXPECT_EQ(v.byte_offset(), 2u * 3 * 4 * sizeof(float));
  EXPECT_TRUE(Matches(v, DType::kF32, ref::slice(x, {2, 0, 0}, {2, 3, 4}), kExact));
  Tensor nested = ops::slice_outer(ops::slice_outer(base, 1, 4), 1, 2);
  EXPECT_EQ(nested.byte_offset(), v.byte_offset());
  EXPECT_TRUE(Matches(nested, DType::kF32, ref::slice(x, {2, 0, 0}, {2, 3, 4}), kExact));
  EXPECT_EQ(ops::slice_outer(base, 5, 0).num_elements(), 0);
}

// =============================================================================================
// Assign

TEST_P(OptimizerTest, AssignCopiesIntoTheTarget) {
  Array value = random_array({3, 2}, -1, 1, 5100);
  Tensor target = ops::zeros(backend(), Shape{3, 2}, DType::kF64);
  ops::assign(target, tensor(value, DType::kF64));
  EXPECT_TRUE(Matches(target, DType::kF64, value, kExact));
}

// =============================================================================================
// Inputs above the kernels' parallel threshold (32768 elements), so the threaded and tiled paths
// run too

TEST_P(ParallelPathTest, DataMovementOnLargeInputs) {
  Array x = random_array({60, 70, 20}, -1, 1, 6200);
  EXPECT_TRUE(Matches(ops::transpose(tensor(x), {2, 0, 1}), DType::kF32,
                      ref::transpose(x, {2, 0, 1}), kExact));
  EXPECT_TRUE(Matches(ops::transpose(tensor(x), {1, 0, 2}), DType::kF32,
                      ref::transpose(x, {1, 0, 2}), kExact));
  EXPECT_TRUE(Matches(ops::slice(tensor(x), {5, 3, 1}, {50, 60, 18}), DType::kF32,
                      ref::slice(x, {5, 3, 1}, {50, 60, 18}), kExact));
  EXPECT_TRUE(Matches(ops::pad(tensor(x), {{1, 2}, {0, 3}, {4, 0}}, -1.0), DType::kF32,
                      ref::pad(x, {{1, 2}, {0, 3}, {4, 0}}, -1.0), kExact));
  std::vector<Array> parts = {random_array({200, 100}, -1, 1, 6201),
                              random_array({200, 50}, -1, 1, 6202),
                              random_array({200, 100}, -1, 1, 6203)};
  EXPECT_TRUE(Matches(
      ops::concat(std::vector<Tensor>{tensor(parts[0]), tensor(parts[1]), tensor(parts[2])}, 1),
      DType::kF32, ref::concat(parts, 1), kExact));
  Array table = random_array({1000, 40}, -1, 1, 6204);
  Array ids = random_ints({900}, 0, 999, 6205);
  EXPECT_TRUE(Matches(ops::gather(tensor(table), tensor(ids, DType::kI64)), DType::kF32,
                      ref::gather(table, ids, 0), kExact));
  Array updates = random_array({40000}, -1, 1, 6206);
  Array buckets = random_ints({40000}, 0, 9, 6207);
  EXPECT_TRUE(Matches(ops::scatter_add(tensor(updates), tensor(buckets, DType::kI32), 0, Shape{10}),
                      DType::kF32, ref::scatter_add(updates, buckets, 0, {10}), {1e-3, 1e-4}));
  Array labels = random_ints({5000}, -1, 10, 6208);
  EXPECT_TRUE(Matches(ops::one_hot(tensor(labels, DType::kI32), 10), DType::kF32,
                      ref::one_hot(labels, 10, 1.0, 0.0), kExact));
}

}  // namespace
}  // namespace trainyard
