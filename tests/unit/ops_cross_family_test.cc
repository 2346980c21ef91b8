// Forward op tests that span several op families: ops on views at a non-zero byte offset, the
// errors of ops.h (op, shapes, dtypes, axes and devices named; nothing aborts) and a bitwise
// determinism rerun of a chain of ops. The tests of each family are in ops_<family>_test.cc;
// ops_test_util.h has what they share.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"
#include "trainyard/backend.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(ViewTest);
TRAINYARD_BACKEND_SUITE(ErrorTest);
TRAINYARD_BACKEND_SUITE(DeterminismTest);

// =============================================================================================
// Views at a non-zero byte offset as inputs and outputs

TEST_P(ViewTest, ViewsAtANonZeroOffsetFeedEveryKindOfOp) {
  Array x = random_array({6, 4, 5}, -2, 2, 4600);
  Tensor base = tensor(x);
  Tensor w_t = tensor(random_array({5, 2}, -1, 1, 4601));
  Array w = read(w_t);
  // Rows [2, 5) directly and through a view of a view; rows [0, 3) as a second operand.
  Array xv = ref::slice(x, {2, 0, 0}, {3, 4, 5});
  Array xo = ref::slice(x, {0, 0, 0}, {3, 4, 5});
  Tensor other = ops::slice_outer(base, 0, 3);
  Tensor views[] = {ops::slice_outer(base, 2, 3),
                    ops::slice_outer(ops::slice_outer(base, 1, 5), 1, 3),
                    ops::slice(base, {2, 0, 0}, {3, -1, -1})};
  for (const Tensor& v : views) {
    SCOPED_TRACE("view at byte offset " + std::to_string(v.byte_offset()));
    ASSERT_GT(v.byte_offset(), 0u);
    EXPECT_TRUE(Matches(ops::neg(v), DType::kF32, ref::map(xv, std::negate<>()), kExact));
    EXPECT_TRUE(Matches(ops::add(v, 1.5), DType::kF32,
                        ref::map(xv, [](double a) { return a + 1.5; }), kF32));
    EXPECT_TRUE(
        Matches(ops::sub(v, other), DType::kF32, ref::binary(xv, xo, std::minus<>()), kF32));
    EXPECT_TRUE(Matches(ops::mul(v, ops::slice_outer(other, 1, 1)), DType::kF32,
                        ref::binary(xv, ref::slice(x, {1, 0, 0}, {1, 4, 5}), std::multiplies<>()),
                        kF32));
    EXPECT_TRUE(Matches(ops::where(ops::greater(v, other), v, other), DType::kF32,
                        ref::binary(xv, xo, [](double a, double b) { return std::max(a, b); }),
                        kExact));
    EXPECT_TRUE(Matches(ops::reduce_sum(v, {1}), DType::kF32,
                        ref::reduce(xv, {1}, false, ref::Reduction::kSum), kF32Sum));
    EXPECT_TRUE(Matches(ops::reduce_max(v), DType::kF32,
                        ref::reduce(xv, {}, false, ref::Reduction::kMax), kExact));
    EXPECT_TRUE(Matches(ops::argmax(v, 2), DType::kI64, ref::argmax(xv, 2), kExact));
    EXPECT_TRUE(Matches(ops::softmax(v), DType::kF32, ref::softmax(xv, -1, false), kF32));
    EXPECT_TRUE(
        Matches(ops::matmul(v, w_t), DType::kF32, ref::matmul(xv, w, false, false), kF32Conv));
    EXPECT_TRUE(Matches(ops::matmul(v, other, false, true), DType::kF32,
                        ref::matmul(xv, xo, false, true), kF32Conv));
    EXPECT_TRUE(
        Matches(ops::transpose(v, {2, 0, 1}), DType::kF32, ref::transpose(xv, {2, 0, 1}), kExact));
    EXPECT_TRUE(Matches(ops::slice(v, {1, 1, 0}, {-1, 2, 3}), DType::kF32,
                        ref::slice(xv, {1, 1, 0}, {2, 2, 3}), kExact));
    EXPECT_TRUE(Matches(ops::concat(std::vector<Tensor>{v, other, v}, 1), DType::kF32,
                        ref::concat({xv, xo, xv}, 1), kExact));
    EXPECT_TRUE(Matches(ops::pad(v, {{0, 0}, {1, 0}, {0, 2}}, 0.5), DType::kF32,
                        ref::pad(xv, {{0, 0}, {1, 0}, {0, 2}}, 0.5), kExact));
    Array indices{{2}, {3, 0}};
    EXPECT_TRUE(Matches(ops::gather(v, tensor(indices, DType::kI64), 1), DType::kF32,
                        ref::gather(xv, indices, 1), kExact));
    auto [top_values, top_indices] = ops::top_k(v, 2);
    EXPECT_TRUE(Matches(top_values, DType::kF32, ref::top_k(xv, 2).first, kExact));
    EXPECT_TRUE(Matches(top_indices, DType::kI64, ref::top_k(xv, 2).second, kExact));
    EXPECT_TRUE(Matches(ops::copy(v), DType::kF32, xv, kExact));
    EXPECT_TRUE(Matches(ops::cast(v, DType::kF64), DType::kF64, xv, kExact));
    EXPECT_TRUE(
        Matches(ops::l2_normalize(v, 0), DType::kF32, ref::l2_normalize(xv, 0, 1e-12), kF32));
    EXPECT_TRUE(Matches(ops::sigmoid_cross_entropy_with_logits(ops::sigmoid(other), v), DType::kF32,
                        ref::sigmoid_cross_entropy(
                            ref::map(xo, [](double a) { return 1.0 / (1.0 + std::exp(-a)); }), xv),
                        kF32Sum));
    Array gamma = ref::filled({5}, 1.0), beta = ref::filled({5}, 0.0);
    EXPECT_TRUE(Matches(ops::batch_norm_training(v, tensor(gamma), tensor(beta)).y, DType::kF32,
                        ref::batch_norm_training(xv, gamma, beta, 1e-3).y, {1e-5, 1e-4}));
    // As NHWC images: reshape keeps the offset.
    Tensor image = ops::reshape(v, Shape{3, 4, 5, 1});
    EXPECT_EQ(image.byte_offset(), v.byte_offset());
    Array image_ref{{3, 4, 5, 1}, xv.values};
    Array filter = random_array({2, 2, 1, 2}, -1, 1, 4602);
    EXPECT_TRUE(Matches(ops::conv2d(image, tensor(filter)), DType::kF32,
                        ref::conv2d(image_ref, filter, ref::Window{}), kF32Conv));
    EXPECT_TRUE(Matches(ops::max_pool2d(image, {2, 2}, {2, 2}, Padding2D::same()), DType::kF32,
                        ref::pool2d(image_ref, 2, 2, ref::same_window(4, 5, 2, 2, 2, 2), false),
                        kExact));
    EXPECT_TRUE(Matches(ops::avg_pool2d(image, {2, 2}, {1, 1}), DType::kF32,
                        ref::pool2d(image_ref, 2, 2, ref::Window{}, true), kF32));
  }
  Array ids{{4, 3}, {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}};
  Tensor id_rows = ops::slice_outer(tensor(ids, DType::kI32), 1, 2);
  EXPECT_TRUE(Matches(ops::one_hot(id_rows, 4), DType::kF32,
                      ref::one_hot(ref::slice(ids, {1, 0}, {2, 3}), 4, 1.0, 0.0), kExact));
  Array updates = random_array({2, 3, 2}, -1, 1, 4603);
  Tensor update_rows = ops::slice_outer(tensor(updates), 1, 1);
  Array index_pair{{3}, {1, 1, 0}};
  EXPECT_TRUE(Matches(
      ops::scatter_add(update_rows, tensor(index_pair, DType::kI64), 1, Shape{1, 2, 2}),
      DType::kF32,
      ref::scatter_add(ref::slice(updates, {1, 0, 0}, {1, 3, 2}), index_pair, 1, {1, 2, 2}), kF32));
}

// =============================================================================================
// Errors: InvalidArgument naming what is wrong; nothing aborts

TEST_P(ErrorTest, ShapeMismatchNamesTheOpAndBothShapesAndDtypes) {
  Tensor a = ops::zeros(backend(), Shape{2, 3});
  Tensor b = ops::zeros(backend(), Shape{4, 5});
  Tensor c = ops::zeros(backend(), Shape{4});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::matmul(a, b); }),
                       {"matmul", "inner dimensions", "f32[2, 3]" + on(), "f32[4, 5]" + on()}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::add(a, c); }),
                       {"add", "broadcast", "f32[2, 3]" + on(), "f32[4]" + on()}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::where(ops::less(a, a), a, c); }),
                       {"where", "f32[2, 3]" + on(), "f32[4]" + on()}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::concat(std::vector<Tensor>{a, b}, 0);
                       }),
                       {"concat", "f32[2, 3]" + on(), "f32[4, 5]" + on()}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::sigmoid_cross_entropy_with_logits(a, b); }),
                       {"sigmoid_cross_entropy_with_logits", "f32[2, 3]", "f32[4, 5]"}));
  Tensor var = ops::zeros(backend(), Shape{2, 3});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::apply_gradient_descent(var, b, 0.1); }),
                       {"apply_gradient_descent", "f32[2, 3]", "f32[4, 5]"}));
  Tensor image = ops::zeros(backend(), Shape{1, 4, 4, 3});
  Tensor filter = ops::zeros(backend(), Shape{2, 2, 2, 4});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::conv2d(image, filter); }),
                       {"conv2d", "f32[2, 2, 2, 4]"}));
  Tensor gamma = ops::ones(backend(), Shape{2});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::batch_norm_training(a, gamma, gamma); }),
                       {"batch_norm_training", "f32[2, 3]", "f32[2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::reshape(a, Shape{4, 2});
                       }),
                       {"reshape", "f32[2, 3]", "[4, 2]"}));
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] {
        ops::matmul(ops::zeros(backend(), Shape{2, 2, 3}), ops::zeros(backend(), Shape{3, 3, 4}));
      }),
      {"matmul", "batch", "f32[2, 2, 3]", "f32[3, 3, 4]"}));
}

TEST_P(ErrorTest, DtypeMismatchNamesBothDtypes) {
  Tensor f32 = ops::zeros(backend(), Shape{2});
  Tensor f64 = ops::zeros(backend(), Shape{2}, DType::kF64);
  Tensor i32 = ops::zeros(backend(), Shape{2}, DType::kI32);
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::add(f32, f64); }),
                       {"add", "f32[2]" + on(), "f64[2]" + on()}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::matmul(ops::zeros(backend(), Shape{2, 2}),
                                     ops::zeros(backend(), Shape{2, 2}, DType::kF64));
                       }),
                       {"matmul", "f32[2, 2]", "f64[2, 2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::where(f32, f32, f32); }),
                       {"where", "bool", "f32[2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::gather(f32, f32); }), {"gather", "f32[2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::exp(i32); }), {"exp", "i32[2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::div(i32, i32); }), {"div", "i32[2]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::concat(std::vector<Tensor>{f32, f64}, 0);
                       }),
                       {"concat", "f32[2]", "f64[2]"}));
  Generator g;
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::random_normal(backend(), Shape{2}, g, 0, 1, DType::kI32); }),
      {"random_normal", "i32"}));
}

TEST_P(ErrorTest, OutOfRangeAxisIsNamed) {
  Tensor x = ops::zeros(backend(), Shape{2, 3});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::reduce_sum(x, {2}); }),
                       {"reduce_sum", "axis 2", "f32[2, 3]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::reduce_mean(x, {-3}); }),
                       {"reduce_mean", "axis -3"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::softmax(x, 2); }), {"softmax", "axis 2"}));
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] { ops::log_softmax(x, -3); }), {"log_softmax", "axis -3"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::argmax(x, 5); }), {"argmax", "axis 5"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::concat(std::vector<Tensor>{x, x}, 2);
                       }),
                       {"concat", "axis 2"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::split(x, {1, 1}, -3);
                       }),
                       {"split", "axis -3"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::transpose(x, {0, 2});
                       }),
                       {"transpose", "axis 2"}));
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::gather(x, ops::zeros(backend(), Shape{1}, DType::kI32), 2); }),
      {"gather", "axis 2"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::l2_normalize(x, 4); }), {"axis 4"}));
}

TEST_P(ErrorTest, OutOfRangeIndicesAndSizesAreNamed) {
  Tensor x = ops::zeros(backend(), Shape{4, 6});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::slice_outer(x, 3, 2); }),
                       {"slice_outer", "[3, 5)", "f32[4, 6]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::slice(x, {0, 4}, {1, 3});
                       }),
                       {"slice", "[4, 7)", "f32[4, 6]"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::top_k(x, 7); }), {"top_k", "k = 7"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::split(x, {2, 3}, 1);
                       }),
                       {"split", "5", "6"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::reshape(x, Shape{-1, -1}); }), {"reshape"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::argmax(ops::zeros(backend(), Shape{2, 0}), 1);
                       }),
                       {"argmax", "empty"}));
}

TEST_P(ErrorTest, InvalidAttributesAreRejected) {
  Tensor x = ops::zeros(backend(), Shape{2, 3});
  Generator g;
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] { ops::dropout(x, 1.0, g, true); }), {"dropout", "rate"}));
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] { ops::random_uniform(backend(), Shape{2}, g, 1, 1); }),
               {"random_uniform"}));
  EXPECT_TRUE(
      Mentions(invalid_argument_of([&] { ops::clip_by_value(x, 2, 1); }), {"clip_by_value"}));
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::one_hot(ops::zeros(backend(), Shape{2}, DType::kI32), -1); }),
      {"one_hot", "depth"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::pad(x, {{0, 0}, {-1, 0}}); }), {"pad"}));
  Tensor var = ops::zeros(backend(), Shape{2}), m = ops::zeros(backend(), Shape{2}),
         v = ops::zeros(backend(), Shape{2});
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::apply_adam(var, m, v, var, 0.1, 0.9, 0.999, 1e-8, 0); }),
      {"apply_adam", "step"}));
  Tensor image = ops::zeros(backend(), Shape{1, 2, 2, 1});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::max_pool2d(image, {3, 3}, {1, 1});
                       }),
                       {"max_pool", "VALID"}));
  EXPECT_TRUE(Mentions(invalid_argument_of([&] {
                         ops::avg_pool2d(image, {1, 1}, {0, 1});
                       }),
                       {"avg_pool", "stride"}));
}

// Not per backend: it needs both.
TEST(CrossBackendErrorTest, InputsOnDifferentBackendsAreRejectedNamingBoth) {
  Backend& cpu = *test::backend("cpu");
  Backend& opaque = *test::backend("opaque");
  Tensor a = ops::ones(cpu, Shape{2, 2});
  Tensor b = ops::ones(opaque, Shape{2, 2});
  auto check = [&](const char* op, const std::function<void()>& fn) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(Mentions(invalid_argument_of(fn), {op, "f32[2, 2] on cpu", "f32[2, 2] on opaque"}));
  };
  check("add", [&] { ops::add(a, b); });
  check("add", [&] { ops::add(b, a); });
  check("matmul", [&] { ops::matmul(a, b); });
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::where(ops::less(a, a), b, b); }),
                       {"where", "bool[2, 2] on cpu", "f32[2, 2] on opaque"}));
  check("concat", [&] { ops::concat(std::vector<Tensor>{a, b}, 0); });
  EXPECT_TRUE(Mentions(
      invalid_argument_of([&] { ops::gather(a, ops::zeros(opaque, Shape{2}, DType::kI32)); }),
      {"gather", "f32[2, 2] on cpu", "i32[2] on opaque"}));
  check("sigmoid_cross_entropy_with_logits", [&] { ops::sigmoid_cross_entropy_with_logits(a, b); });
  check("apply_gradient_descent", [&] { ops::apply_gradient_descent(a, b, 0.1); });
  check("assign", [&] { ops::assign(a, b); });
  Tensor bias = ops::ones(opaque, Shape{2});
  EXPECT_TRUE(Mentions(invalid_argument_of([&] { ops::matmul_bias_act(a, a, bias); }),
                       {"matmul_bias_act", "on cpu", "on opaque"}));
}

// =============================================================================================
// Determinism: the same chain of ops on the same inputs gives the same bits

std::vector<Tensor> chain_results(Backend& backend) {
  Generator g(2024);
  Tensor x = ops::random_normal(backend, Shape{4, 8, 8, 3}, g);
  Tensor filter = ops::truncated_normal(backend, Shape{3, 3, 3, 4}, g, 0, 0.3);
  Tensor y = ops::conv2d(x, filter, {1, 1}, Padding2D::same());  // 1
  y = ops::batch_norm_training(y, ops::ones(backend, Shape{4}), ops::zeros(backend, Shape{4}))
          .y;                              // 2
  y = ops::relu(y);                        // 3
  y = ops::max_pool2d(y, {2, 2}, {2, 2});  // 4
  y = ops::reshape(y, Shape{4, -1});       // 5
  Tensor w = ops::random_uniform(backend, Shape{64, 10}, g, -0.2, 0.2);
  Tensor bias = ops::random_uniform(backend, Shape{10}, g, -0.1, 0.1);
  Tensor h = ops::matmul_bias_act(y, w, bias, Activation::kTanh);                       // 6
  Tensor s = ops::softmax(h);                                                           // 7
  Tensor ls = ops::log_softmax(h, 0);                                                   // 8
  Tensor d = ops::dropout(h, 0.3, g, true);                                             // 9
  Tensor t = ops::transpose(ops::reshape(d, Shape{4, 2, 5}), {2, 0, 1});                // 10
  Tensor c = ops::concat(std::vector<Tensor>{t, ops::exp(t)}, 1);                       // 11, 12
  Tensor r = ops::reduce_logsumexp(c, {0});                                             // 13
  auto [top_values, top_indices] = ops::top_k(h, 3);                                    // 14
  Tensor gathered = ops::gather(s, top_indices, 1);                                     // 15
  Tensor n = ops::l2_normalize(ops::avg_pool2d(x, {3, 3}, {2, 2}, Padding2D::same()));  // 16, 17
  Tensor loss = ops::reduce_mean(ops::sigmoid_cross_entropy_with_logits(s, h));         // 18, 19
  Tensor p = ops::matmul(ops::slice_outer(ls, 1, 3), ls, false, true);                  // 20
  return {s, ls, d, c, r, top_values, top_indices, gathered, n, loss, p};
}

std::vector<std::vector<std::byte>> run_chain(Backend& backend) {
  std::vector<std::vector<std::byte>> out;
  for (const Tensor& result : chain_results(backend)) out.push_back(bytes_of(result));
  return out;
}

// The opaque backend runs the cpu kernels on copies: any difference is the core's or a copy's.
TEST(CrossBackendDeterminismTest, ChainGivesTheSameBitsOnABackendWithTheCpuKernels) {
  std::vector<std::vector<std::byte>> cpu = run_chain(*test::backend("cpu"));
  std::vector<std::vector<std::byte>> opaque = run_chain(*test::backend("opaque"));
  ASSERT_EQ(cpu.size(), opaque.size());
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(cpu[i], opaque[i]) << "result " << i << " of the chain differs from cpu's";
  }
}

// A backend with kernels of its own (cuda: its own exp, its own summation order) gives the cpu's
// numbers to f32 rounding: the same random draws, dropout mask, top-k picks and gathers.
TEST(CrossBackendDeterminismTest, ChainGivesTheCpuNumbersOnEveryBackend) {
  std::vector<Tensor> cpu = chain_results(*test::backend("cpu"));
  for (const std::string& name : test::backend_names()) {
    SCOPED_TRACE(name);
    std::vector<Tensor> other = chain_results(*test::backend(name));
    ASSERT_EQ(cpu.size(), other.size());
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      Array want = read(cpu[i]), got = read(other[i]);
      ASSERT_EQ(want.values.size(), got.values.size()) << "result " << i;
      for (std::size_t j = 0; j < want.values.size(); ++j) {
        EXPECT_NEAR(got.values[j], want.values[j], 1e-5 + 1e-4 * std::abs(want.values[j]))
            << "result " << i << ", element " << j << " of the chain";
      }
    }
  }
}

TEST_P(DeterminismTest, ChainOfOpsRunTwiceIsBitwiseEqual) {
  std::vector<std::vector<std::byte>> first = run_chain(backend());
  std::vector<std::vector<std::byte>> second = run_chain(backend());
  ASSERT_EQ(first.size(), second.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i], second[i]) << "result " << i << " of the chain differs between runs";
  }
}

}  // namespace
}  // namespace trainyard
