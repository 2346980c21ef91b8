// The forward pass of the nn ops (ops/nn.h: convolution, pooling, batch norm, l2_normalize and
// dropout) on every test backend, against the plain reference loops of reference_ops.h.
// NnOpsAndUpdatesOnLargeInputs also runs a large matmul and apply_adam. ops_test_util.h has what
// the ops_<family>_test.cc files share.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"
#include "trainyard/autodiff.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(ConvolutionTest);
TRAINYARD_BACKEND_SUITE(PoolingTest);
TRAINYARD_BACKEND_SUITE(NormalizationTest);
TRAINYARD_BACKEND_SUITE(ParallelPathTest);

// =============================================================================================
// Convolution

TEST_P(ConvolutionTest, Conv2DValidStrideOne) {
  Array input = random_array({2, 5, 5, 3}, -1, 1, 1800);
  Array filter = random_array({3, 3, 3, 4}, -1, 1, 1801);
  EXPECT_TRUE(Matches(ops::conv2d(tensor(input), tensor(filter)), DType::kF32,
                      ref::conv2d(input, filter, ref::Window{}), kF32Conv));
  EXPECT_TRUE(Matches(ops::conv2d(tensor(input, DType::kF64), tensor(filter, DType::kF64)),
                      DType::kF64, ref::conv2d(input, filter, ref::Window{}), kF64));
}

TEST_P(ConvolutionTest, Conv2DSameWithStrideTwoPadsTheOddRowAtTheBottom) {
  // H = 6, k = 3, stride 2: out 3, one row of padding, all of it after (bottom); W = 5: one
  // column each side.
  ASSERT_EQ(ref::same_padding(6, 3, 2, 1), (std::pair<int64_t, int64_t>{0, 1}));
  ASSERT_EQ(ref::same_padding(5, 3, 2, 1), (std::pair<int64_t, int64_t>{1, 1}));
  Array input = random_array({1, 6, 5, 2}, -1, 1, 1900);
  Array filter = random_array({3, 3, 2, 3}, -1, 1, 1901);
  Tensor y = ops::conv2d(tensor(input), tensor(filter), {2, 2}, Padding2D::same());
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 3}));
  EXPECT_TRUE(Matches(y, DType::kF32,
                      ref::conv2d(input, filter, ref::same_window(6, 5, 3, 3, 2, 2)), kF32Conv));
  // A 4x4 filter on 6x6 with stride 2: total padding 2 per side pair, 1 and 1.
  Array filter4 = random_array({4, 4, 2, 2}, -1, 1, 1902);
  Array square = random_array({2, 6, 6, 2}, -1, 1, 1903);
  EXPECT_TRUE(Matches(ops::conv2d(tensor(square), tensor(filter4), {2, 2}, Padding2D::same()),
                      DType::kF32, ref::conv2d(square, filter4, ref::same_window(6, 6, 4, 4, 2, 2)),
                      kF32Conv));
}

TEST_P(ConvolutionTest, Conv2DExplicitPadsAndUnequalStrides) {
  Array input = random_array({1, 5, 6, 2}, -1, 1, 2000);
  Array filter = random_array({3, 2, 2, 3}, -1, 1, 2001);
  ref::Window win;
  win.stride_w = 2;
  win.pad_top = 1;
  win.pad_bottom = 0;
  win.pad_left = 2;
  win.pad_right = 1;
  EXPECT_TRUE(Matches(
      ops::conv2d(tensor(input), tensor(filter), {1, 2}, Padding2D::explicit_pads(1, 0, 2, 1)),
      DType::kF32, ref::conv2d(input, filter, win), kF32Conv));
}

// A backend's cached kernels run on whichever thread calls them: a convolution first run on
// this thread, then on another with the same shapes, gives the same result there (the CPU
// backend's oneDNN primitives once sized their scratchpad in the creating thread only, and the
// second thread overran its own).
TEST_P(ConvolutionTest, AKernelFirstRunOnOneThreadRunsOnAnother) {
  // Few channels and unequal strides: oneDNN's gemm-based convolution, which needs a
  // scratchpad for its im2col buffer.
  Array input = random_array({1, 5, 6, 2}, -1, 1, 2050);
  Array filter = random_array({3, 2, 2, 3}, -1, 1, 2051);
  auto run = [&] {
    Tensor x = tensor(input), f = tensor(filter);
    Tensor y = ops::conv2d(x, f, {1, 2}, Padding2D::explicit_pads(1, 0, 2, 1));
    return std::vector<Tensor>{y, ops::max_pool2d(y, {3, 3}, {2, 2}, Padding2D::same())};
  };
  const std::vector<Tensor> here = run();
  std::vector<Tensor> there;
  std::thread other([&] { there = run(); });
  other.join();
  ASSERT_EQ(there.size(), here.size());
  for (std::size_t i = 0; i < here.size(); ++i) {
    EXPECT_EQ(bytes_of(there[i]), bytes_of(here[i])) << "output " << i;
  }
}

TEST_P(ConvolutionTest, Conv2DDilationTwo) {
  Array input = random_array({1, 7, 8, 2}, -1, 1, 2100);
  Array filter = random_array({3, 3, 2, 3}, -1, 1, 2101);
  ref::Window valid;
  valid.dilation_h = valid.dilation_w = 2;
  Tensor y = ops::conv2d(tensor(input), tensor(filter), {1, 1}, Padding2D::valid(), {2, 2});
  EXPECT_EQ(y.shape(), (Shape{1, 3, 4, 3}));
  EXPECT_TRUE(Matches(y, DType::kF32, ref::conv2d(input, filter, valid), kF32Conv));
  EXPECT_TRUE(Matches(
      ops::conv2d(tensor(input), tensor(filter), {1, 1}, Padding2D::same(), {2, 2}), DType::kF32,
      ref::conv2d(input, filter, ref::same_window(7, 8, 3, 3, 1, 1, 2, 2)), kF32Conv));
}

TEST_P(ConvolutionTest, Conv2DGroupsTwoSplitsChannels) {
  Array input = random_array({2, 5, 5, 4}, -1, 1, 2200);
  Array filter = random_array({3, 3, 2, 6}, -1, 1, 2201);
  EXPECT_TRUE(Matches(
      ops::conv2d(tensor(input), tensor(filter), {1, 1}, Padding2D::same(), {1, 1}, 2), DType::kF32,
      ref::conv2d(input, filter, ref::same_window(5, 5, 3, 3, 1, 1), 2), kF32Conv));
  EXPECT_TRUE(Matches(ops::conv2d(tensor(input, DType::kF64), tensor(filter, DType::kF64), {2, 1},
                                  Padding2D::valid(), {1, 1}, 2),
                      DType::kF64, ref::conv2d(input, filter, ref::Window{2, 1}, 2), kF64));
}

TEST_P(ConvolutionTest, Conv2DCombinesGroupsStrideDilationAndSamePadding) {
  Array input = random_array({2, 9, 8, 6}, -1, 1, 2250);
  Array filter = random_array({3, 2, 2, 9}, -1, 1, 2251);
  EXPECT_TRUE(Matches(
      ops::conv2d(tensor(input), tensor(filter), {2, 3}, Padding2D::same(), {2, 2}, 3), DType::kF32,
      ref::conv2d(input, filter, ref::same_window(9, 8, 3, 2, 2, 3, 2, 2), 3), kF32Conv));
  // A 1x1 convolution is a matmul over channels.
  Array pointwise = random_array({1, 1, 6, 4}, -1, 1, 2252);
  EXPECT_TRUE(Matches(ops::conv2d(tensor(input), tensor(pointwise)), DType::kF32,
                      ref::conv2d(input, pointwise, ref::Window{}), kF32Conv));
}

TEST_P(ConvolutionTest, DepthwiseConv2DTakesTensorFlowsFilterLayout) {
  Array input = random_array({1, 5, 6, 3}, -1, 1, 2300);
  Array filter = random_array({3, 3, 3, 2}, -1, 1, 2301);
  Tensor valid = ops::depthwise_conv2d(tensor(input), tensor(filter));
  EXPECT_EQ(valid.shape(), (Shape{1, 3, 4, 6}));
  EXPECT_TRUE(
      Matches(valid, DType::kF32, ref::depthwise_conv2d(input, filter, ref::Window{}), kF32Conv));
  EXPECT_TRUE(Matches(
      ops::depthwise_conv2d(tensor(input), tensor(filter), {2, 2}, Padding2D::same()), DType::kF32,
      ref::depthwise_conv2d(input, filter, ref::same_window(5, 6, 3, 3, 2, 2)), kF32Conv));
  ref::Window dilated;
  dilated.dilation_h = dilated.dilation_w = 2;
  EXPECT_TRUE(Matches(ops::depthwise_conv2d(tensor(input, DType::kF64), tensor(filter, DType::kF64),
                                            {1, 1}, Padding2D::valid(), {2, 2}),
                      DType::kF64, ref::depthwise_conv2d(input, filter, dilated), kF64));
}

// =============================================================================================
// Pooling

TEST_P(PoolingTest, MaxPoolValid) {
  Array input = random_array({2, 4, 6, 3}, -2, 2, 2400);
  ref::Window win{2, 2};
  EXPECT_TRUE(Matches(ops::max_pool2d(tensor(input), {2, 2}, {2, 2}), DType::kF32,
                      ref::pool2d(input, 2, 2, win, false), kExact));
  ref::Window overlapping{1, 2};
  EXPECT_TRUE(Matches(ops::max_pool2d(tensor(input, DType::kF64), {3, 2}, {1, 2}), DType::kF64,
                      ref::pool2d(input, 3, 2, overlapping, false), kExact));
}

TEST_P(PoolingTest, MaxPoolSameNeverPicksThePadding) {
  // All inputs negative: a zero from the padding would win any window that touches it.
  Array input = random_array({1, 5, 6, 2}, -5, -1, 2500);
  Tensor y = ops::max_pool2d(tensor(input), {3, 3}, {2, 2}, Padding2D::same());
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 2}));
  EXPECT_TRUE(Matches(y, DType::kF32,
                      ref::pool2d(input, 3, 3, ref::same_window(5, 6, 3, 3, 2, 2), false), kExact));
  for (double v : read(y).values) EXPECT_LT(v, 0.0);
  ref::Window pads{1, 1};
  pads.pad_top = 1;
  pads.pad_left = 2;
  pads.pad_right = 1;
  EXPECT_TRUE(
      Matches(ops::max_pool2d(tensor(input), {2, 3}, {1, 1}, Padding2D::explicit_pads(1, 0, 2, 1)),
              DType::kF32, ref::pool2d(input, 2, 3, pads, false), kExact));
}

// max_pool2d's gradient (max_pool2d_grad through autodiff): each output's dy goes to the first
// maximum of its window in row-major order, and positions that no window picks get 0. Inputs on
// a grid of 9 values, so windows hold ties. Disjoint windows (2x2/2 covering the input, with a
// channel tail after two blocks of 16; 2x2/2 SAME leaving a row and a column to the padding;
// the 1x1/2 subsampling of resnet's shortcuts; 3x3/3 with explicit padding) and overlapping ones
// (3x3/2 SAME), in f32 and f64.
TEST_P(PoolingTest, MaxPoolGradientGoesToTheFirstMaximumOfEachWindow) {
  struct Case {
    Dims shape;
    int64_t kh, kw, sh, sw;
    bool same;
    int64_t pad_top, pad_bottom, pad_left, pad_right;  // when not same
  };
  const Case cases[] = {
      {{3, 28, 28, 37}, 2, 2, 2, 2, false, 0, 0, 0, 0},
      {{2, 7, 9, 16}, 2, 2, 2, 2, true, 0, 0, 0, 0},
      {{2, 8, 8, 20}, 1, 1, 2, 2, false, 0, 0, 0, 0},
      {{2, 9, 10, 3}, 3, 3, 3, 3, false, 1, 1, 2, 0},
      {{2, 7, 7, 18}, 3, 3, 2, 2, true, 0, 0, 0, 0},
  };
  uint32_t seed = 2580;
  for (const Case& c : cases) {
    Array x = random_array(c.shape, -2, 2, seed++);
    for (double& v : x.values) v = std::round(v * 2) / 2;
    const int64_t n = c.shape[0], h = c.shape[1], w = c.shape[2], ch = c.shape[3];
    ref::Window win{c.sh, c.sw};
    if (c.same) {
      win = ref::same_window(h, w, c.kh, c.kw, c.sh, c.sw);
    } else {
      win.pad_top = c.pad_top;
      win.pad_bottom = c.pad_bottom;
      win.pad_left = c.pad_left;
      win.pad_right = c.pad_right;
    }
    const int64_t oh = (h + win.pad_top + win.pad_bottom - c.kh) / c.sh + 1;
    const int64_t ow = (w + win.pad_left + win.pad_right - c.kw) / c.sw + 1;
    Array dy = random_array({n, oh, ow, ch}, -1, 1, seed++);
    Array expected = ref::filled(c.shape, 0.0);
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          for (int64_t k = 0; k < ch; ++k) {
            int64_t best = -1;
            for (int64_t iy = oy * c.sh - win.pad_top; iy < oy * c.sh - win.pad_top + c.kh; ++iy) {
              for (int64_t ix = ox * c.sw - win.pad_left; ix < ox * c.sw - win.pad_left + c.kw;
                   ++ix) {
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                const int64_t at = ((b * h + iy) * w + ix) * ch + k;
                if (best < 0 || x.values[static_cast<std::size_t>(at)] >
                                    x.values[static_cast<std::size_t>(best)]) {
                  best = at;
                }
              }
            }
            expected.values[static_cast<std::size_t>(best)] +=
                dy.values[static_cast<std::size_t>(((b * oh + oy) * ow + ox) * ch + k)];
          }
        }
      }
    }
    for (DType dtype : {DType::kF32, DType::kF64}) {
      std::string dims;
      for (int64_t d : c.shape) dims += (dims.empty() ? "[" : ", ") + std::to_string(d);
      SCOPED_TRACE(dims + "] window " + std::to_string(c.kh) + "x" + std::to_string(c.kw) + "/" +
                   std::to_string(c.sh) + " " + dtype_name(dtype));
      Tensor xt = tensor(x, dtype);
      xt.set_requires_grad(true);
      const Padding2D padding =
          c.same ? Padding2D::same()
                 : Padding2D::explicit_pads(c.pad_top, c.pad_bottom, c.pad_left, c.pad_right);
      Tensor y = ops::max_pool2d(xt, {c.kh, c.kw}, {c.sh, c.sw}, padding);
      ASSERT_EQ(y.shape(), (Shape{n, oh, ow, ch}));
      Tensor loss = ops::reduce_sum(ops::mul(y, tensor(dy, dtype)));
      std::vector<Tensor> dx = gradients(loss, std::vector<Tensor>{xt});
      EXPECT_TRUE(Matches(dx[0], dtype, expected, tolerance_for(dtype, kF32)));
    }
  }
}

TEST_P(PoolingTest, WindowsLargerThanTheInputUnderSamePadding) {
  Array input = random_array({1, 2, 2, 3}, -2, 2, 2550);
  ref::Window same = ref::same_window(2, 2, 3, 3, 1, 1);
  EXPECT_TRUE(Matches(ops::max_pool2d(tensor(input), {3, 3}, {1, 1}, Padding2D::same()),
                      DType::kF32, ref::pool2d(input, 3, 3, same, false), kExact));
  EXPECT_TRUE(Matches(ops::avg_pool2d(tensor(input), {3, 3}, {1, 1}, Padding2D::same()),
                      DType::kF32, ref::pool2d(input, 3, 3, same, true), kF32));
}

TEST_P(PoolingTest, AvgPoolExplicitPaddingIsLeftOutOfTheAverage) {
  Array input = random_array({1, 4, 5, 2}, -2, 2, 2560);
  ref::Window pads{2, 2};
  pads.pad_top = 1;
  pads.pad_bottom = 1;
  pads.pad_left = 0;
  pads.pad_right = 1;
  EXPECT_TRUE(
      Matches(ops::avg_pool2d(tensor(input), {2, 2}, {2, 2}, Padding2D::explicit_pads(1, 1, 0, 1)),
              DType::kF32, ref::pool2d(input, 2, 2, pads, true), kF32));
}

TEST_P(PoolingTest, AvgPoolValid) {
  Array input = random_array({2, 4, 6, 3}, -2, 2, 2600);
  EXPECT_TRUE(Matches(ops::avg_pool2d(tensor(input), {3, 2}, {1, 2}), DType::kF32,
                      ref::pool2d(input, 3, 2, ref::Window{1, 2}, true), kF32));
}

TEST_P(PoolingTest, AvgPoolSameLeavesThePaddingOutOfTheAverage) {
  // Ones average to one everywhere, edges included, only if the padding is not counted.
  Tensor ones = ops::ones(backend(), Shape{1, 5, 5, 1});
  EXPECT_TRUE(Matches(ops::avg_pool2d(ones, {3, 3}, {2, 2}, Padding2D::same()), DType::kF32,
                      ref::filled({1, 3, 3, 1}, 1.0), kF32));
  Array input = random_array({2, 5, 6, 2}, -2, 2, 2700);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(Matches(ops::avg_pool2d(tensor(input, dtype), {3, 3}, {2, 2}, Padding2D::same()),
                        dtype, ref::pool2d(input, 3, 3, ref::same_window(5, 6, 3, 3, 2, 2), true),
                        tolerance_for(dtype, kF32)));
  }
}

// =============================================================================================
// Normalization

TEST_P(NormalizationTest, BatchNormTrainingNormalizesOverAllButTheLastAxis) {
  Array x = random_array({2, 3, 2, 4}, -2, 3, 2800);
  Array gamma = random_array({4}, 0.5, 1.5, 2801);
  Array beta = random_array({4}, -1, 1, 2802);
  ref::BatchNorm expected = ref::batch_norm_training(x, gamma, beta, 1e-3);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tolerance tol = tolerance_for(dtype, {1e-5, 1e-4});
    ops::BatchNormResult r =
        ops::batch_norm_training(tensor(x, dtype), tensor(gamma, dtype), tensor(beta, dtype));
    EXPECT_TRUE(Matches(r.y, dtype, expected.y, tol));
    EXPECT_TRUE(Matches(r.batch_mean, dtype, expected.mean, tol));
    EXPECT_TRUE(Matches(r.batch_variance, dtype, expected.variance, tol)) << "biased variance";
  }
  // A larger epsilon is used as given.
  ref::BatchNorm loose = ref::batch_norm_training(x, gamma, beta, 0.5);
  EXPECT_TRUE(Matches(ops::batch_norm_training(tensor(x), tensor(gamma), tensor(beta), 0.5).y,
                      DType::kF32, loose.y, {1e-5, 1e-4}));
}

TEST_P(NormalizationTest, BatchNormInferenceUsesTheGivenStatistics) {
  Array x = random_array({5, 3}, -2, 2, 2900);
  Array gamma = random_array({3}, 0.5, 1.5, 2901);
  Array beta = random_array({3}, -1, 1, 2902);
  Array mean = random_array({3}, -0.5, 0.5, 2903);
  Array variance = random_array({3}, 0.2, 2, 2904);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(Matches(
        ops::batch_norm_inference(tensor(x, dtype), tensor(gamma, dtype), tensor(beta, dtype),
                                  tensor(mean, dtype), tensor(variance, dtype), 1e-2),
        dtype, ref::batch_norm_inference(x, gamma, beta, mean, variance, 1e-2),
        tolerance_for(dtype, kF32Sum)));
  }
}

TEST_P(NormalizationTest, L2NormalizeAlongAnAxisWithEpsilonForZeroRows) {
  Array x = random_array({3, 4}, -2, 2, 3100);
  for (std::size_t j = 0; j < 4; ++j) x.values[4 + j] = 0.0;  // a zero row stays zero
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (int64_t axis : {-1, 0}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " axis " + std::to_string(axis));
      EXPECT_TRUE(Matches(ops::l2_normalize(tensor(x, dtype), axis), dtype,
                          ref::l2_normalize(x, axis, 1e-12), tolerance_for(dtype, kF32)));
    }
  }
  // A large epsilon caps the scale: x / sqrt(max(sum, eps)).
  EXPECT_TRUE(Matches(ops::l2_normalize(tensor(x), 1, 100.0), DType::kF32,
                      ref::l2_normalize(x, 1, 100.0), kF32));
}

TEST_P(NormalizationTest, DropoutWhenNotTrainingOrAtRateZeroIsTheIdentity) {
  Array x = random_array({4, 5}, -2, 2, 3200);
  Generator generator(5, 10);
  EXPECT_TRUE(Matches(ops::dropout(tensor(x), 0.5, generator, false), DType::kF32, x, kExact));
  EXPECT_TRUE(Matches(ops::dropout(tensor(x), 0.0, generator, true), DType::kF32, x, kExact));
  EXPECT_EQ(generator.counter(), 10u) << "the identity drew random numbers";
}

TEST_P(NormalizationTest, DropoutKeepsAboutOneMinusRateAndScalesThem) {
  const int64_t n = 100000;
  const double rate = 0.3;
  Array x = random_array({n}, 0.5, 2, 3300);
  Generator generator(77);
  Array y = read(ops::dropout(tensor(x), rate, generator, true));
  int64_t kept = 0;
  for (std::size_t i = 0; i < x.values.size(); ++i) {
    if (y.values[i] == 0.0) continue;
    ++kept;
    ASSERT_NEAR(y.values[i], x.values[i] / (1.0 - rate), 1e-5 * y.values[i]) << "element " << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - rate, 0.01);
  EXPECT_GT(generator.counter(), 0u) << "training dropout drew nothing from the generator";
}

TEST_P(NormalizationTest, DropoutMaskDependsOnlyOnTheGeneratorState) {
  Array x = ref::filled({1000}, 1.0);
  Generator g1(9, 4), g2(9, 4);
  std::vector<std::byte> first = bytes_of(ops::dropout(tensor(x), 0.5, g1, true));
  EXPECT_EQ(first, bytes_of(ops::dropout(tensor(x), 0.5, g2, true)));
  EXPECT_EQ(g1.counter(), g2.counter());
  EXPECT_NE(first, bytes_of(ops::dropout(tensor(x), 0.5, g1, true)))
      << "a second draw from the advanced generator gave the same mask";
}

// =============================================================================================
// Inputs above the kernels' parallel threshold (32768 elements), so the threaded and tiled paths
// run too

TEST_P(ParallelPathTest, NnOpsAndUpdatesOnLargeInputs) {
  Array a = random_array({64, 128}, -1, 1, 6300);
  Array b = random_array({128, 96}, -1, 1, 6301);
  EXPECT_TRUE(Matches(ops::matmul(tensor(a), tensor(b)), DType::kF32,
                      ref::matmul(a, b, false, false), kF32Conv));
  Array input = random_array({1, 16, 16, 8}, -1, 1, 6302);
  Array filter = random_array({3, 3, 8, 8}, -1, 1, 6303);
  EXPECT_TRUE(Matches(ops::conv2d(tensor(input), tensor(filter), {1, 1}, Padding2D::same()),
                      DType::kF32, ref::conv2d(input, filter, ref::same_window(16, 16, 3, 3, 1, 1)),
                      kF32Conv));
  Array images = random_array({2, 40, 50, 10}, -1, 1, 6304);
  ref::Window same = ref::same_window(40, 50, 3, 3, 2, 2);
  EXPECT_TRUE(Matches(ops::max_pool2d(tensor(images), {3, 3}, {2, 2}, Padding2D::same()),
                      DType::kF32, ref::pool2d(images, 3, 3, same, false), kExact));
  EXPECT_TRUE(Matches(ops::avg_pool2d(tensor(images), {3, 3}, {2, 2}, Padding2D::same()),
                      DType::kF32, ref::pool2d(images, 3, 3, same, true), kF32));
  Array x = random_array({600, 64}, -2, 3, 6305);
  Array gamma = random_array({64}, 0.5, 1.5, 6306), beta = random_array({64}, -1, 1, 6307);
  ref::BatchNorm bn = ref::batch_norm_training(x, gamma, beta, 1e-3);
  ops::BatchNormResult r = ops::batch_norm_training(tensor(x), tensor(gamma), tensor(beta));
  EXPECT_TRUE(Matches(r.y, DType::kF32, bn.y, {1e-4, 1e-4}));
  EXPECT_TRUE(Matches(r.batch_mean, DType::kF32, bn.mean, {1e-5, 1e-4}));
  EXPECT_TRUE(Matches(r.batch_variance, DType::kF32, bn.variance, {1e-5, 1e-4}));
  Array var = random_array({50000}, -1, 1, 6308), grad = random_array({50000}, -1, 1, 6309);
  Array m = ref::filled({50000}, 0.0), v = m;
  Tensor tv = tensor(var), tm = tensor(m), tvv = tensor(v);
  ops::apply_adam(tv, tm, tvv, tensor(grad), 0.01, 0.9, 0.999, 1e-7, 1);
  ref::adam(var, m, v, grad, 0.01, 0.9, 0.999, 1e-7, 1);
  EXPECT_TRUE(Matches(tv, DType::kF32, var, kF32));
  EXPECT_TRUE(Matches(tvv, DType::kF32, v, kF32));
}

}  // namespace
}  // namespace trainyard
