// Engine benchmarks: Trainyard's ops against raw oneDNN on the same shapes in the same run, and
// the framework's per-op overhead on tiny tensors.
//
//   build/bin/bench_engine --benchmark_counters_tabular=true
//
// Counters: GFLOPs is achieved GFLOP/s; compare a Trainyard row with the raw row of the same
// shape in the same run (ratios, not absolute times, are what carry across machines).
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <memory>
#include <vector>

#include "bench_util.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

Backend& cpu() {
  static std::shared_ptr<Backend> backend = [] {
    PluginRegistry::Settings settings;
    settings.use_environment = false;
    PluginRegistry registry(settings);
    return registry.create<Backend>(ClassKind::kBackend, "cpu");
  }();
  return *backend;
}

struct GemmShape {
  int64_t m, k, n;
  bool ta, tb;
};

// The YouTube-8M LogisticModel step (batch 1024, 1152 -> 3862): forward and the two backward
// products; then a square 1024^3.
const GemmShape kShapes[] = {
    {1024, 1152, 3862, false, false},  // logits = x w
    {1024, 3862, 1152, false, true},   // dx = g w^T
    {1152, 1024, 3862, true, false},   // dw = x^T g
    {1024, 1024, 1024, false, false},
};

void set_flops(benchmark::State& state, const GemmShape& s) {
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * s.m * s.n * s.k * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void BM_TrainyardMatMul(benchmark::State& state) {
  const GemmShape& s = kShapes[state.range(0)];
  NoGradScope no_grad;
  Generator g(1);
  Tensor a = ops::random_uniform(cpu(), s.ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, g);
  Tensor b = ops::random_uniform(cpu(), s.tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, g);
  for (auto _ : state) {
    Tensor c = ops::matmul(a, b, s.ta, s.tb);
    benchmark::DoNotOptimize(c);
  }
  set_flops(state, s);
}

void BM_RawDnnlSgemm(benchmark::State& state) {
  const GemmShape& s = kShapes[state.range(0)];
  std::vector<float> a(static_cast<std::size_t>(s.m * s.k), 0.5f);
  std::vector<float> b(static_cast<std::size_t>(s.k * s.n), 0.25f);
  std::vector<float> c(static_cast<std::size_t>(s.m * s.n));
  dnnl_dim_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  for (auto _ : state) {
    dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(),
               ldb, 0.0f, c.data(), s.n);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, s);
}

// The machine's measured f32 peak: independent AVX-512 FMA chains on every thread, no memory
// traffic. GEMM rows are read as a fraction of this.
__attribute__((target("avx512f"))) double fma_loop(int64_t iterations) {
  // Twelve named accumulators so they stay in registers: enough independent chains to cover
  // the FMA latency on two ports.
  __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(0.1f), c2 = _mm512_set1_ps(0.2f),
         c3 = _mm512_set1_ps(0.3f), c4 = _mm512_set1_ps(0.4f), c5 = _mm512_set1_ps(0.5f),
         c6 = _mm512_set1_ps(0.6f), c7 = _mm512_set1_ps(0.7f), c8 = _mm512_set1_ps(0.8f),
         c9 = _mm512_set1_ps(0.9f), c10 = _mm512_set1_ps(1.0f), c11 = _mm512_set1_ps(1.1f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    c0 = _mm512_fmadd_ps(c0, a, b);
    c1 = _mm512_fmadd_ps(c1, a, b);
    c2 = _mm512_fmadd_ps(c2, a, b);
    c3 = _mm512_fmadd_ps(c3, a, b);
    c4 = _mm512_fmadd_ps(c4, a, b);
    c5 = _mm512_fmadd_ps(c5, a, b);
    c6 = _mm512_fmadd_ps(c6, a, b);
    c7 = _mm512_fmadd_ps(c7, a, b);
    c8 = _mm512_fmadd_ps(c8, a, b);
    c9 = _mm512_fmadd_ps(c9, a, b);
    c10 = _mm512_fmadd_ps(c10, a, b);
    c11 = _mm512_fmadd_ps(c11, a, b);
  }
  __m512 sum =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                    _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)),
                                  _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11))));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

void BM_PeakFmaF32(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("no AVX-512");
    return;
  }
  const int64_t iterations = 1 << 22;
  int threads = omp_get_max_threads();
  for (auto _ : state) {
    double sink = 0;
#pragma omp parallel reduction(+ : sink)
    sink += fma_loop(iterations);
    benchmark::DoNotOptimize(sink);
  }
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * 16 * 12 * static_cast<double>(iterations) * threads * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
}
BENCHMARK(BM_PeakFmaF32)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK(BM_TrainyardMatMul)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RawDnnlSgemm)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

// Framework overhead: an add of two 1-element tensors, no gradient recorded.
void BM_TinyAdd(benchmark::State& state) {
  NoGradScope no_grad;
  Tensor a = ops::scalar(cpu(), 1.0);
  Tensor b = ops::scalar(cpu(), 2.0);
  for (auto _ : state) {
    Tensor c = ops::add(a, b);
    benchmark::DoNotOptimize(c);
  }
  state.counters["us_per_op"] = benchmark::Counter(
      1e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TinyAdd);

// A 20-op chain on 1-element tensors with its backward pass (recording, then gradients).
void BM_TinyChainWithBackward(benchmark::State& state) {
  Tensor x = ops::scalar(cpu(), 0.5);
  x.set_requires_grad(true);
  Tensor c = ops::scalar(cpu(), 1.001);
  for (auto _ : state) {
    Tensor h = x;
    for (int i = 0; i < 10; ++i) h = ops::tanh(ops::mul(h, c));
    std::vector<Tensor> g = gradients(h, std::vector<Tensor>{x});
    benchmark::DoNotOptimize(g);
  }
  // 20 forward ops; the backward adds its own ops, counted in the same time.
  state.counters["us_per_forward_op"] = benchmark::Counter(
      20e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TinyChainWithBackward);

}  // namespace
}  // namespace trainyard

// BENCHMARK_MAIN, refusing oneDNN's reference implementations in the cpu backend first
// (bench_util.h): a row that would time the fallback fails instead.
int main(int argc, char** argv) {
  trainyard::bench::refuse_dnnl_reference_implementations();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
