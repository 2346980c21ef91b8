// The forward pass of the random ops (ops/random.h: the Philox streams of random_uniform,
// random_normal and truncated_normal) on every test backend, against the plain reference loops of
// reference_ops.h. ops_test_util.h has what the ops_<family>_test.cc files share.
#include "trainyard/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"
#include "trainyard/random.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(RandomTest);
TRAINYARD_BACKEND_SUITE(ParallelPathTest);

// =============================================================================================
// Random numbers

TEST_P(RandomTest, SameSeedAndCounterGiveBitwiseEqualDraws) {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    using Draw = std::function<Tensor(Generator&)>;
    std::vector<std::pair<std::string, Draw>> draws = {
        {"random_uniform",
         [&](Generator& g) {
           return ops::random_uniform(backend(), Shape{7, 9}, g, -1, 2, dtype);
         }},
        {"random_normal",
         [&](Generator& g) {
           return ops::random_normal(backend(), Shape{7, 9}, g, 1, 3, dtype);
         }},
        {"truncated_normal",
         [&](Generator& g) {
           return ops::truncated_normal(backend(), Shape{7, 9}, g, 0, 2, dtype);
         }},
    };
    for (const auto& [name, draw] : draws) {
      SCOPED_TRACE(name);
      Generator a(1234, 56), b(1234, 56), later(1234, 57), reseeded(1235, 56);
      std::vector<std::byte> first = bytes_of(draw(a));
      EXPECT_EQ(first, bytes_of(draw(b)));
      EXPECT_EQ(a.counter(), b.counter());
      EXPECT_NE(first, bytes_of(draw(later))) << "a different counter gave the same numbers";
      EXPECT_NE(first, bytes_of(draw(reseeded))) << "a different seed gave the same numbers";
      EXPECT_NE(first, bytes_of(draw(a))) << "the next draw repeated the previous one";
    }
  }
}

TEST_P(RandomTest, DrawsAdvanceTheCounterByTheBlocksTheyUse) {
  Generator g(3, 100);
  ops::random_uniform(backend(), Shape{10}, g);
  EXPECT_EQ(g.counter(), 100u + 3u);  // 4 f32 per block
  ops::random_uniform(backend(), Shape{5}, g, 0, 1, DType::kF64);
  EXPECT_EQ(g.counter(), 103u + 3u);  // 2 f64 per block
  ops::random_normal(backend(), Shape{2, 5}, g);
  EXPECT_EQ(g.counter(), 106u + 10u);
  ops::truncated_normal(backend(), Shape{4}, g);
  EXPECT_EQ(g.counter(), 116u + 4u * random::kTruncatedNormalAttempts);
  EXPECT_EQ(g.seed(), 3u);
}

TEST_P(RandomTest, ValuesFollowTheDocumentedPhiloxMapping) {
  const uint64_t seed = 0x0123456789ABCDEFull, counter = 42;
  const int64_t n = 11;
  Generator g(seed, counter);
  Array uniform32 = read(ops::random_uniform(backend(), Shape{n}, g));
  g.set_state(seed, counter);
  Array uniform64 = read(ops::random_uniform(backend(), Shape{n}, g, 0, 1, DType::kF64));
  g.set_state(seed, counter);
  Array scaled = read(ops::random_uniform(backend(), Shape{n}, g, -2, 3));
  g.set_state(seed, counter);
  Array normal32 = read(ops::random_normal(backend(), Shape{n}, g));
  g.set_state(seed, counter);
  Array normal64 = read(ops::random_normal(backend(), Shape{n}, g, 0, 1, DType::kF64));
  g.set_state(seed, counter);
  Array shifted = read(ops::random_normal(backend(), Shape{n}, g, 5, 0.5, DType::kF64));
  g.set_state(seed, counter);
  Array truncated = read(ops::truncated_normal(backend(), Shape{n}, g, 0, 1, DType::kF64));
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE("element " + std::to_string(i));
    auto u = static_cast<uint64_t>(i);
    auto k = static_cast<std::size_t>(i);
    random::Block b32 = random::philox4x32_10(seed, counter + u / 4);
    EXPECT_EQ(uniform32.values[k], random::uniform_f32(b32[u % 4]));
    EXPECT_NEAR(scaled.values[k], -2.0 + 5.0 * random::uniform_f32(b32[u % 4]), 1e-6);
    random::Block b64 = random::philox4x32_10(seed, counter + u / 2);
    EXPECT_EQ(uniform64.values[k], random::uniform_f64(b64[2 * (u % 2)], b64[2 * (u % 2) + 1]));
    random::Block bn = random::philox4x32_10(seed, counter + u);
    double z = random::normal_from(bn[0], bn[1]);
    EXPECT_NEAR(normal32.values[k], z, 1e-6 * std::max(1.0, std::abs(z)));
    EXPECT_NEAR(normal64.values[k], z, 1e-15);
    EXPECT_NEAR(shifted.values[k], 5.0 + 0.5 * z, 1e-14);
    EXPECT_NEAR(truncated.values[k],
                random::truncated_normal(seed, counter, static_cast<uint64_t>(n), u), 1e-15);
  }
}

TEST_P(RandomTest, MomentsAreRightOnAHundredThousandSamples) {
  const int64_t n = 100000;
  auto moments = [](const Array& a) {
    double mean = 0.0, sq = 0.0;
    for (double v : a.values) mean += v;
    mean /= static_cast<double>(a.values.size());
    for (double v : a.values) sq += (v - mean) * (v - mean);
    return std::pair<double, double>{mean, std::sqrt(sq / static_cast<double>(a.values.size()))};
  };
  Generator g(2718);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Array uniform = read(ops::random_uniform(backend(), Shape{n}, g, -1, 3, dtype));
    for (double v : uniform.values) ASSERT_TRUE(v >= -1.0 && v < 3.0) << v;
    auto [um, us] = moments(uniform);
    EXPECT_NEAR(um, 1.0, 0.02);
    EXPECT_NEAR(us, 4.0 / std::sqrt(12.0), 0.02);

    Array normal = read(ops::random_normal(backend(), Shape{n}, g, 2, 0.5, dtype));
    auto [nm, ns] = moments(normal);
    EXPECT_NEAR(nm, 2.0, 0.01);
    EXPECT_NEAR(ns, 0.5, 0.01);

    // A normal truncated at two stddev has stddev 0.8796 of the untruncated one.
    Array truncated = read(ops::truncated_normal(backend(), Shape{n}, g, -1, 2, dtype));
    for (double v : truncated.values) ASSERT_TRUE(v >= -5.0 && v <= 3.0) << v;
    auto [tm, ts] = moments(truncated);
    EXPECT_NEAR(tm, -1.0, 0.03);
    EXPECT_NEAR(ts, 2.0 * 0.8796, 0.03);
  }
}

// =============================================================================================
// Inputs above the kernels' parallel threshold (32768 elements), so the threaded and tiled paths
// run too

TEST_P(ParallelPathTest, LargeRandomDrawsFollowThePhiloxMappingEverywhere) {
  const uint64_t seed = 99, counter = 7;
  const int64_t n = 100003;
  Generator g(seed, counter);
  Array uniform = read(ops::random_uniform(backend(), Shape{n}, g));
  g.set_state(seed, counter);
  Array normal = read(ops::random_normal(backend(), Shape{n}, g, 0, 1, DType::kF64));
  // The host's libm (cpu, and the opaque fixture running the cpu's kernels) gives random.h's
  // f64 normals exactly; a GPU's log and cos are within a few ulp of it.
  const std::string device = backend().device_name();
  const double ulps = device == "cpu" || device == "opaque" ? 0.0 : 4.0;
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto u = static_cast<uint64_t>(i);
    auto k = static_cast<std::size_t>(i);
    random::Block b = random::philox4x32_10(seed, counter + u / 4);
    random::Block bn = random::philox4x32_10(seed, counter + u);
    const double want = random::normal_from(bn[0], bn[1]);
    if (uniform.values[k] != random::uniform_f32(b[u % 4]) ||
        std::abs(normal.values[k] - want) >
            ulps * std::numeric_limits<double>::epsilon() * std::abs(want)) {
      if (mismatches++ < 5) ADD_FAILURE() << "element " << i << " does not follow random.h";
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace trainyard
