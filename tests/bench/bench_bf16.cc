// The cpu backend's bf16 precision policy against its f32 kernels, op by op, in one run
// (backends/cpu/compute_precision.h): the products of the YouTube-8M models and ResNet-20's
// convolutions, each through the backend's kernels with --precision f32 and bf16, beside raw
// oneDNN primitives on inputs already in their type (no conversion), and the machine's f32 FMA
// and bf16 dot-product peaks. The training steps are bench_train, bench_frame_train and
// bench_image_train with --precision (tests/bench/run_bf16_bench.sh runs everything).
//
//   bench_bf16 [--threads N] [--reps N]
//
// Rows, one line each:
//   gemm <name> m k n: ops::matmul on f32 tensors under NoGradScope, f32 and bf16 backends
//     (bf16: both operands converted every call, as in training); raw_f32: dnnl_sgemm; raw_bf16:
//     a oneDNN bf16 x bf16 -> f32 matmul on bf16 inputs, the weights in the primitive's layout.
//   conv <name>: conv2d forward and both gradients (gradients() of the output for a given output
//     gradient), f32 and bf16 backends.
// Each time is the median of --reps runs after two untimed ones, wall and CPU (all threads: with
// one thread the CPU time does not count the time other processes hold the core). Ratios are
// f32 / bf16 time.
// On a CPU without AVX-512 BF16 the bf16 rows are left out, saying why.
#include <immintrin.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_bound.h"
#include "bench_util.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

using bench::HostTensor;
using bench::process_cpu_seconds;

// Medians of a call's wall and CPU (all threads) seconds.
struct Timing {
  double wall = 0, cpu = 0;
};

// `run` twice untimed, then `reps` times timed.
template <class Fn>
Timing measure(int reps, Fn run) {
  run();
  run();
  std::vector<double> wall, cpu;
  for (int r = 0; r < reps; ++r) {
    const double start = bench::now_seconds(), cpu_start = process_cpu_seconds();
    run();
    wall.push_back(bench::now_seconds() - start);
    cpu.push_back(process_cpu_seconds() - cpu_start);
  }
  return {bench::percentile(wall, 0.5), bench::percentile(cpu, 0.5)};
}

struct Args {
  int threads = 2;
  int reps = 7;
};

std::shared_ptr<Backend> cpu(const std::string& precision, int threads) {
  PluginRegistry::Settings settings;
  settings.use_environment = false;
  PluginRegistry registry(settings);
  return registry.create<Backend>(ClassKind::kBackend, "cpu",
                                  {{"precision", precision}, {"num_threads", int64_t{threads}}});
}

Tensor random_tensor(Backend& backend, std::vector<int64_t> shape, uint64_t seed) {
  bench::SplitMix64 rng(seed);
  HostTensor t{shape, {}};
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  t.values.resize(static_cast<std::size_t>(n));
  for (float& v : t.values) v = rng.uniform(-1.0f, 1.0f);
  return bench::to_tensor(backend, t);
}

// bf16 peak: vdpbf16ps (16 lanes, each two bf16 products added to an f32: 64 FLOP), GFLOP/s by
// CPU time.
__attribute__((target("avx512f,avx512bf16"))) double dpbf16_peak_gflops(int threads) {
  constexpr int64_t kIterations = 4'000'000;
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    float sink = 0;
    const double start = process_cpu_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      __m512 acc[12];
      for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
      const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
      const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-2f), _mm512_set1_ps(3e-3f));
      for (int64_t it = 0; it < kIterations; ++it) {
#pragma GCC unroll 12  // so that the 12 chains live in registers
        for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
      }
      __m512 total = acc[0];
      for (int i = 1; i < 12; ++i) total = _mm512_add_ps(total, acc[i]);
      float lanes[16];
      _mm512_storeu_ps(lanes, total);
      for (float v : lanes) sink += v;
    }
    const double seconds = (process_cpu_seconds() - start) / threads;
    if (sink == 12345.0f) std::fprintf(stderr, " ");
    best = std::max(best, 64.0 * 12 * kIterations * threads / seconds * 1e-9);
  }
  return best;
}

// A raw oneDNN bf16 x bf16 -> f32 matmul of `g` on bf16 inputs (b in the primitive's layout).
Timing time_raw_bf16_matmul(const bench::Gemm& g, int reps) {
  using dnnl::memory;
  const dnnl::engine& engine = bench::bound_engine();
  dnnl::stream stream(engine);
  const memory::data_type bf16 = memory::data_type::bf16;
  const memory::desc a({g.m, g.k}, bf16,
                       g.transpose_a ? memory::dims{1, g.m} : memory::dims{g.k, 1});
  const memory::desc b({g.k, g.n}, bf16, memory::format_tag::any);
  const memory::desc c({g.m, g.n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine);
  memory am(pd.src_desc(), engine), bm(pd.weights_desc(), engine), cm(pd.dst_desc(), engine);
  std::fill_n(static_cast<uint16_t*>(am.get_data_handle()), a.get_size() / 2, uint16_t{0x3f00});
  std::fill_n(static_cast<uint16_t*>(bm.get_data_handle()), pd.weights_desc().get_size() / 2,
              uint16_t{0x3e80});
  const dnnl::matmul matmul(pd);
  return measure(reps, [&] {
    matmul.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
  });
}

// dnnl_sgemm of `g` on f32 inputs.
Timing time_raw_sgemm(const bench::Gemm& g, int reps) {
  std::vector<float> a(static_cast<std::size_t>(g.m * g.k), 0.5f);
  std::vector<float> b(static_cast<std::size_t>(g.k * g.n), 0.25f);
  std::vector<float> c(static_cast<std::size_t>(g.m * g.n));
  const dnnl_dim_t lda = g.transpose_a ? g.m : g.k, ldb = g.transpose_b ? g.k : g.n;
  return measure(reps, [&] {
    if (dnnl_sgemm(g.transpose_a ? 'T' : 'N', g.transpose_b ? 'T' : 'N', g.m, g.n, g.k, 1.0f,
                   a.data(), lda, b.data(), ldb, 0.0f, c.data(), g.n) != dnnl_success) {
      throw std::runtime_error("dnnl_sgemm failed");
    }
  });
}

struct NamedGemm {
  const char* name;
  bench::Gemm gemm;
};

// The products of a LogisticModel step (batch 1024, 1152 -> 3862) and of MoeModel's hidden-layer
// input gradient, as the backend computes them (a [m, k] row-major; transpose_a stores a as
// [k, m]).
const NamedGemm kGemms[] = {
    {"logistic_forward", {1024, 1152, 3862, false, false}},
    {"logistic_weight_grad", {1152, 1024, 3862, true, false}},
    {"input_grad", {1024, 3862, 1152, false, true}},
};

struct NamedConv {
  const char* name;
  bench::Conv conv;
};

// ResNet-20's 3x3 convolutions at batch 128, one of each depth.
const NamedConv kConvs[] = {
    {"resnet20_32x32x16", {128, 32, 32, 16, 3, 16, 1, 1}},
    {"resnet20_16x16x32", {128, 16, 16, 32, 3, 32, 1, 1}},
    {"resnet20_8x8x64", {128, 8, 8, 64, 3, 64, 1, 1}},
};

Timing time_matmul(Backend& backend, const bench::Gemm& g, int reps) {
  const Tensor a = random_tensor(
      backend, g.transpose_a ? std::vector<int64_t>{g.k, g.m} : std::vector<int64_t>{g.m, g.k}, 1);
  const Tensor b = random_tensor(
      backend, g.transpose_b ? std::vector<int64_t>{g.n, g.k} : std::vector<int64_t>{g.k, g.n}, 2);
  NoGradScope no_grad;
  return measure(reps, [&] {
    const Tensor c = ops::matmul(a, b, g.transpose_a, g.transpose_b);
    backend.synchronize();
  });
}

Timing time_conv_training(Backend& backend, const bench::Conv& c, int reps) {
  const Tensor x = random_tensor(backend, {c.n, c.h, c.w, c.c}, 3);
  const Tensor w = random_tensor(backend, {c.k, c.k, c.c, c.o}, 4);
  const Tensor dy = random_tensor(backend, {c.n, c.oh(), c.ow(), c.o}, 5);
  auto step = [&] {
    Tensor xs = x, ws = w;
    xs.set_requires_grad(true);
    ws.set_requires_grad(true);
    const Tensor y = ops::conv2d(xs, ws, {c.stride, c.stride}, Padding2D::same());
    const Tensor sources[] = {xs, ws};
    const std::vector<Tensor> grads = gradients(y, sources, dy);
    backend.synchronize();
  };
  return measure(reps, step);
}

void row(const std::string& kind, const std::string& name, double flop, Timing f32, Timing bf16,
         Timing raw_f32, Timing raw_bf16) {
  std::printf(
      "%-4s %-26s f32 %7.2f ms %6.1f GFLOP/s | bf16 %7.2f ms %6.1f GFLOP/s | f32/bf16 %.2f "
      "(CPU time %.2f)",
      kind.c_str(), name.c_str(), f32.wall * 1e3, flop / f32.wall * 1e-9, bf16.wall * 1e3,
      flop / bf16.wall * 1e-9, f32.wall / bf16.wall, f32.cpu / bf16.cpu);
  if (raw_f32.wall > 0) {
    std::printf(" | raw sgemm %.2f ms, raw bf16 %.2f ms: %.2f (CPU %.2f)", raw_f32.wall * 1e3,
                raw_bf16.wall * 1e3, raw_f32.wall / raw_bf16.wall, raw_f32.cpu / raw_bf16.cpu);
  }
  std::printf("\n");
  std::fflush(stdout);
}

int run(const Args& a) {
  omp_set_num_threads(a.threads);
  std::shared_ptr<Backend> f32 = cpu("f32", a.threads);
  std::shared_ptr<Backend> bf16;
  try {
    bf16 = cpu("bf16", a.threads);
  } catch (const Error& e) {
    std::printf("no bf16 rows: %s\n", e.what());
  }
  std::printf("bench_bf16: %d threads, oneDNN ISA %d, median of %d\n", a.threads,
              static_cast<int>(dnnl::get_effective_cpu_isa()), a.reps);
  const double fma = bench::fma512_peak_gflops(a.threads, /*by_cpu_time=*/true);
  const double dp = bf16 ? dpbf16_peak_gflops(a.threads) : 0;
  std::printf("peak: f32 512-bit FMA %.1f GFLOP/s, bf16 vdpbf16ps %.1f GFLOP/s (ratio %.2f)\n", fma,
              dp, dp / fma);
  if (!bf16) return 0;
  for (const NamedGemm& g : kGemms) {
    const double flop = 2.0 * g.gemm.m * g.gemm.k * g.gemm.n;
    const Timing t32 = time_matmul(*f32, g.gemm, a.reps);
    const Timing t16 = time_matmul(*bf16, g.gemm, a.reps);
    const Timing raw32 = time_raw_sgemm(g.gemm, a.reps);
    const Timing raw16 = time_raw_bf16_matmul(g.gemm, a.reps);
    row("gemm", g.name, flop, t32, t16, raw32, raw16);
  }
  for (const NamedConv& c : kConvs) {
    const double flop = 3 * c.conv.flops();
    const Timing t32 = time_conv_training(*f32, c.conv, a.reps);
    const Timing t16 = time_conv_training(*bf16, c.conv, a.reps);
    row("conv", std::string(c.name) + " fwd+bwd", flop, t32, t16, {}, {});
  }
  return 0;
}

}  // namespace
}  // namespace trainyard

int main(int argc, char** argv) {
  trainyard::bench::refuse_dnnl_reference_implementations();
  trainyard::Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") {
      a.threads = std::stoi(argv[i + 1]);
    } else if (flag == "--reps") {
      a.reps = std::stoi(argv[i + 1]);
    } else {
      std::cerr << "usage: bench_bf16 [--threads N] [--reps N]\n";
      return 2;
    }
  }
  try {
    return trainyard::run(a);
  } catch (const std::exception& e) {
    std::cerr << "bench_bf16: " << e.what() << "\n";
    return 1;
  }
}
