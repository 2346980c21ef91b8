// The bound of a training step's unavoidable work on the CPU, shared by the benchmarks that
// report one (bench_image_train.cc, bench_ssd.cc): raw oneDNN convolutions of a net's shapes,
// dnnl_sgemm products, and the machine's FMA peak at its widest vectors, each timed alone in the
// calling process at its OpenMP thread count (the caller sets it with omp_set_num_threads first).
#ifndef TRAINYARD_TESTS_BENCH_BENCH_BOUND_H_
#define TRAINYARD_TESTS_BENCH_BENCH_BOUND_H_

#include <immintrin.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "bench_util.h"

namespace trainyard::bench {

// One convolution of a net: NHWC input [n, h, w, c], filter [k, k, c / groups, o], symmetric
// padding `pad`, stride `stride`; `input_gradient` when backpropagation needs its backward data
// pass; `groups` c for a depthwise convolution (o a multiple of c).
struct Conv {
  int64_t n, h, w, c, k, o, stride, pad;
  bool input_gradient = true;
  int64_t groups = 1;
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
  double flops() const { return 2.0 * n * oh() * ow() * o * k * k * (c / groups); }
};

// A row-major product C[m, n] = op(A) op(B), as bench_frame_train times them.
struct Gemm {
  int64_t m, k, n;
  bool transpose_a = false;
  bool transpose_b = false;
};

inline const dnnl::engine& bound_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Median seconds of `run`, after one untimed call.
template <class Fn>
double median_seconds(int reps, Fn run) {
  run();
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const double start = now_seconds();
    run();
    times.push_back(now_seconds() - start);
  }
  return percentile(times, 0.5);
}

// Seconds of the three passes of `s` on raw oneDNN primitives (forward, backward data, 0 when
// the input needs no gradient, backward weights), each the median of `reps` after one untimed
// call; `any_data`: oneDNN picks the data layout as well as the weights' (layout conversions
// excluded), otherwise NHWC as Trainyard keeps it.
inline std::array<double, 3> time_conv(const Conv& s, bool any_data, int reps) {
  using dnnl::memory;
  using Tag = memory::format_tag;
  const dnnl::engine& engine = bound_engine();
  dnnl::stream stream(engine);
  const memory::data_type f32 = memory::data_type::f32;
  const Tag data_tag = any_data ? Tag::any : Tag::nhwc;
  const memory::desc src({s.n, s.c, s.h, s.w}, f32, data_tag);
  const memory::desc dst({s.n, s.o, s.oh(), s.ow()}, f32, data_tag);
  const memory::desc weights =
      s.groups == 1
          ? memory::desc({s.o, s.c, s.k, s.k}, f32, Tag::any)
          : memory::desc({s.groups, s.o / s.groups, s.c / s.groups, s.k, s.k}, f32, Tag::any);
  const memory::dims strides{s.stride, s.stride}, dilates{0, 0}, pad{s.pad, s.pad};
  dnnl::convolution_forward::primitive_desc fwd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, src, weights, dst,
                                      strides, dilates, pad, pad),
      engine);
  dnnl::convolution_backward_data::primitive_desc bwd_data(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src, weights, dst,
                                            strides, dilates, pad, pad),
      engine, fwd);
  dnnl::convolution_backward_weights::primitive_desc bwd_weights(
      dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src, weights,
                                               dst, strides, dilates, pad, pad),
      engine, fwd);
  auto filled = [&engine](const memory::desc& md) {
    memory m(md, engine);
    auto* p = static_cast<float*>(m.get_data_handle());
    for (std::size_t i = 0; i < md.get_size() / sizeof(float); ++i) {
      p[i] = static_cast<float>(i % 13) * 0.05f - 0.3f;
    }
    return m;
  };
  memory x = filled(fwd.src_desc()), w = filled(fwd.weights_desc()), y = filled(fwd.dst_desc());
  memory dx = filled(bwd_data.diff_src_desc()), dy = filled(bwd_weights.diff_dst_desc());
  memory dw = filled(bwd_weights.diff_weights_desc());
  auto timed = [&](const dnnl::primitive& p, const std::unordered_map<int, memory>& args) {
    return median_seconds(reps, [&] {
      p.execute(stream, args);
      stream.wait();
    });
  };
  std::array<double, 3> seconds{};
  seconds[0] = timed(dnnl::convolution_forward(fwd),
                     {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
  if (s.input_gradient) {
    seconds[1] = timed(dnnl::convolution_backward_data(bwd_data),
                       {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, dx}});
  }
  seconds[2] = timed(dnnl::convolution_backward_weights(bwd_weights),
                     {{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dw}});
  return seconds;
}

// Seconds of one dnnl_sgemm of `g`, the median of `reps` after one untimed call.
inline double time_sgemm(const Gemm& g, int reps) {
  std::vector<float> a(static_cast<std::size_t>(g.m * g.k), 0.5f);
  std::vector<float> b(static_cast<std::size_t>(g.k * g.n), 0.25f);
  std::vector<float> c(static_cast<std::size_t>(g.m * g.n));
  const dnnl_dim_t lda = g.transpose_a ? g.m : g.k, ldb = g.transpose_b ? g.k : g.n;
  return median_seconds(reps, [&] {
    if (dnnl_sgemm(g.transpose_a ? 'T' : 'N', g.transpose_b ? 'T' : 'N', g.m, g.n, g.k, 1.0f,
                   a.data(), lda, b.data(), ldb, 0.0f, c.data(), g.n) != dnnl_success) {
      throw std::runtime_error("dnnl_sgemm failed");
    }
  });
}

// One thread's 12 independent chains of `iterations` FMAs, 8 wide (AVX2) or 16 wide (AVX-512);
// returns the sum of their lanes so that the loop is kept. The chains are unrolled so that they
// live in registers; without that GCC keeps them in memory and the loop measures about half the
// peak.
__attribute__((target("avx2,fma"))) inline float fma256_chains(int64_t iterations) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
  }
  for (int i = 1; i < 12; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

__attribute__((target("avx512f"))) inline float fma512_chains(int64_t iterations) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
  }
  for (int i = 1; i < 12; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, acc[0]);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

// FLOP/s of `chains` (lanes wide) on `threads` threads: the f32 FMA peak of that many cores at
// that width, the best of 5 runs. By wall time, or with `by_cpu_time` by the process's CPU time
// (the cores' peak while they run it, whatever else holds them).
inline double fma_chains_gflops(int threads, bool by_cpu_time, int lanes,
                                float (*chains)(int64_t)) {
  constexpr int64_t kIterations = 4'000'000;
  auto clock = [by_cpu_time] { return by_cpu_time ? process_cpu_seconds() : now_seconds(); };
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    float sink = 0;
    const double start = clock();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += chains(kIterations);
    const double seconds = (clock() - start) / (by_cpu_time ? threads : 1);
    if (sink == 12345.0f) std::fprintf(stderr, " ");  // keeps the loop
    best = std::max(best, 2.0 * lanes * 12 * kIterations * threads / seconds * 1e-9);
  }
  return best;
}

inline double fma256_peak_gflops(int threads, bool by_cpu_time = false) {
  return fma_chains_gflops(threads, by_cpu_time, 8, &fma256_chains);
}

// Call only where __builtin_cpu_supports("avx512f").
inline double fma512_peak_gflops(int threads, bool by_cpu_time = false) {
  return fma_chains_gflops(threads, by_cpu_time, 16, &fma512_chains);
}

// The f32 FMA peak at the widest vectors this CPU has (AVX-512 where it has them, else AVX2).
inline double fma_peak_gflops(int threads) {
  return __builtin_cpu_supports("avx512f") ? fma512_peak_gflops(threads)
                                           : fma256_peak_gflops(threads);
}

}  // namespace trainyard::bench

#endif  // TRAINYARD_TESTS_BENCH_BENCH_BOUND_H_
