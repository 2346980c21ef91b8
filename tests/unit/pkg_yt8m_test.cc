// pkg/yt8m, the YouTube-8M model utilities (model_utils.py), on every test backend: frame
// sampling draws valid frames of each video uniformly (SampleRandomFrames) or a consecutive run
// (SampleRandomSequence), deterministically by seed and with gradients to the sampled frames;
// frame pooling averages, maxes or flattens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "test_backends.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/yt8m/model_utils.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

class PkgYt8mTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }

  // [B, T, 2] with frame (b, t) = {100 b + t, -(100 b + t)}, so a sampled row names its frame.
  Tensor frames(int64_t b, int64_t t, DType dtype = DType::kF32) const {
    std::vector<double> v;
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 0; j < t; ++j) {
        v.push_back(100.0 * i + j);
        v.push_back(-(100.0 * i + j));
      }
    }
    Tensor x = Tensor::from_vector(backend(), Shape{b, t, 2}, v);
    return dtype == DType::kF64 ? x : ops::cast(x, dtype);
  }
  Tensor counts(const std::vector<int32_t>& n) const {
    return Tensor::from_vector(backend(), Shape{static_cast<int64_t>(n.size())}, n);
  }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, PkgYt8mTest, ::testing::ValuesIn(test::backend_names()),
                         backend_test_name);

std::vector<double> values(const Tensor& t) {
  return t.dtype() == DType::kF64 ? t.to_vector<double>()
                                  : ops::cast(t, DType::kF64).to_vector<double>();
}

// The frame index of each sampled row [B, S, 2] of `frames` above, checking it is of video b.
std::vector<std::vector<int>> sampled_indices(const Tensor& sampled) {
  const int64_t b = sampled.shape()[0], s = sampled.shape()[1];
  std::vector<double> v = values(sampled);
  std::vector<std::vector<int>> out(static_cast<std::size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = 0; j < s; ++j) {
      const double code = v[static_cast<std::size_t>((i * s + j) * 2)];
      EXPECT_EQ(v[static_cast<std::size_t>((i * s + j) * 2 + 1)], -code);
      EXPECT_EQ(std::floor(code / 100.0), static_cast<double>(i)) << "a frame of another video";
      out[static_cast<std::size_t>(i)].push_back(static_cast<int>(code - 100.0 * i));
    }
  }
  return out;
}

TEST_P(PkgYt8mTest, SampleRandomFramesDrawsUniformlyFromTheValidFrames) {
  Tensor x = frames(3, 10);
  Generator generator(7);
  Tensor sampled = yt8m::sample_random_frames(x, counts({10, 3, 1}), 400, generator);
  ASSERT_EQ(sampled.shape(), (Shape{3, 400, 2}));
  std::vector<std::vector<int>> idx = sampled_indices(sampled);
  const int num_frames[3] = {10, 3, 1};
  for (int b = 0; b < 3; ++b) {
    std::vector<int> histogram(static_cast<std::size_t>(num_frames[b]), 0);
    for (int t : idx[static_cast<std::size_t>(b)]) {
      ASSERT_GE(t, 0);
      ASSERT_LT(t, num_frames[b]) << "video " << b << " sampled a padding frame";
      ++histogram[static_cast<std::size_t>(t)];
    }
    // Uniform: each of the n frames about 400 / n times (a 6-sigma band).
    const double mean = 400.0 / num_frames[b];
    const double sigma = std::sqrt(400.0 * (1.0 / num_frames[b]) * (1.0 - 1.0 / num_frames[b]));
    for (int count : histogram) EXPECT_NEAR(count, mean, 6 * sigma + 1e-9) << "video " << b;
  }
  std::set<int> distinct(idx[0].begin(), idx[0].end());
  EXPECT_EQ(distinct.size(), 10u) << "with replacement over all ten frames";
}

TEST_P(PkgYt8mTest, FrameSamplingIsDeterministicBySeedAndTakesNumFramesAsColumn) {
  Tensor x = frames(2, 20);
  Tensor n = counts({20, 15});
  Tensor n_column = ops::cast(ops::reshape(n, Shape{2, 1}), DType::kI64);
  Generator a(11), b(11), c(12);
  std::vector<double> first = values(yt8m::sample_random_frames(x, n, 30, a));
  EXPECT_EQ(values(yt8m::sample_random_frames(x, n_column, 30, b)), first);
  EXPECT_NE(values(yt8m::sample_random_frames(x, n, 30, c)), first);
  EXPECT_NE(values(yt8m::sample_random_frames(x, n, 30, a)), first)
      << "the generator moves on after a draw";
}

TEST_P(PkgYt8mTest, SampleRandomSequenceTakesConsecutiveFramesFromAUniformStart) {
  // 40 copies of a 6-frame video (4 samples: starts 0, 1 or 2) and one of 2 frames (the last
  // frame repeats).
  const int64_t b = 41;
  std::vector<int32_t> n(static_cast<std::size_t>(b), 6);
  n.back() = 2;
  Generator generator(3);
  Tensor sampled = yt8m::sample_random_sequence(frames(b, 8), counts(n), 4, generator);
  ASSERT_EQ(sampled.shape(), (Shape{b, 4, 2}));
  std::vector<std::vector<int>> idx = sampled_indices(sampled);
  std::set<int> starts;
  for (int64_t i = 0; i + 1 < b; ++i) {
    const std::vector<int>& run = idx[static_cast<std::size_t>(i)];
    for (int j = 1; j < 4; ++j) EXPECT_EQ(run[j], run[0] + j) << "video " << i;
    EXPECT_GE(run[0], 0);
    EXPECT_LE(run[0], 2) << "a start past num_frames - num_samples";
    starts.insert(run[0]);
  }
  EXPECT_EQ(starts, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(idx.back(), (std::vector<int>{0, 1, 1, 1}));
}

TEST_P(PkgYt8mTest, FramePoolingAveragesMaxesOrFlattens) {
  Tensor x = Tensor::from_vector(backend(), Shape{2, 3, 2},
                                 std::vector<double>{1, 6, 2, 5, 3, 4, -1, 0, -3, 9, 4, 0});
  EXPECT_EQ(values(yt8m::frame_pooling(x, yt8m::frame_pooling_method("average"))),
            (std::vector<double>{2, 5, 0, 3}));
  EXPECT_EQ(values(yt8m::frame_pooling(x, yt8m::frame_pooling_method("max"))),
            (std::vector<double>{3, 6, 4, 9}));
  Tensor none = yt8m::frame_pooling(x, yt8m::frame_pooling_method("none"));
  EXPECT_EQ(none.shape(), (Shape{6, 2}));
  EXPECT_EQ(values(none), values(x));
  try {
    yt8m::frame_pooling_method("attention");
    FAIL() << "an unknown method was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("average, max, none"), std::string::npos) << e.what();
  }
}

TEST_P(PkgYt8mTest, GradientsReachTheSampledFrames) {
  Tensor x = Tensor::from_vector(
      backend(), Shape{2, 4, 3},
      std::vector<double>{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2,
                          1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1, 2.2, 2.3, 2.4});
  Tensor n = counts({4, 3});
  for (bool sequence : {false, true}) {
    SCOPED_TRACE(sequence ? "sample_random_sequence" : "sample_random_frames");
    auto f = [&](const std::vector<Tensor>& in) {
      Generator generator(5);  // the same frames at every evaluation
      Tensor s = sequence ? yt8m::sample_random_sequence(in[0], n, 3, generator)
                          : yt8m::sample_random_frames(in[0], n, 5, generator);
      return ops::tanh(yt8m::frame_pooling(s, yt8m::FramePoolingMethod::kMax));
    };
    testing::GradCheckResult r = testing::check_gradients(f, {x});
    EXPECT_TRUE(r.ok) << r.report;
    EXPECT_EQ(r.checked, 24u);
  }
}

TEST_P(PkgYt8mTest, RejectsInputsThatAreNotFramesAndCounts) {
  Generator generator(1);
  EXPECT_THROW(yt8m::sample_random_frames(frames(2, 3), counts({1, 2, 3}), 2, generator),
               InvalidArgument);
  EXPECT_THROW(
      yt8m::sample_random_frames(ops::zeros(backend(), Shape{2, 3}), counts({1, 2}), 2, generator),
      InvalidArgument);
  EXPECT_THROW(yt8m::sample_random_sequence(frames(2, 3), counts({1, 2}), 0, generator),
               InvalidArgument);
  EXPECT_THROW(
      yt8m::sample_random_frames(frames(2, 3), ops::zeros(backend(), Shape{2}), 2, generator),
      InvalidArgument);
  EXPECT_THROW(
      yt8m::frame_pooling(ops::zeros(backend(), Shape{2, 3}), yt8m::FramePoolingMethod::kMax),
      InvalidArgument);
}

}  // namespace
}  // namespace trainyard
