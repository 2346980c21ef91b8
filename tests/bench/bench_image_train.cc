// Training-step benchmark of the image classifiers: Trainyard's TrainStep (the train op
// `trainyard train` runs) on the image_classifiers plugin's lenet and resnet_20 with synthetic
// batches, for comparison with PyTorch on the same networks, batch and threads
// (tests/bench/peers/train_image_torch.py; tests/bench/peers/run_image_training_bench.sh runs
// both). bench_train.cc and bench_frame_train.cc are the YouTube-8M counterparts.
//
//   bench_image_train [--model lenet|resnet_20] [--backend cpu|cuda] [--threads N] [--steps N]
//                     [--warmup N] [--batch_size B] [--num_classes C] [--pool P]
//                     [--learning_rate LR] [--seed S] [--bound 0|1] [--trace FILE]
//
// The workloads (the plugin's defaults otherwise):
//   lenet      B 64, 28x28x1 images: conv1 5x5x32 SAME + bias + relu, max_pool 2x2/2, conv2
//              5x5x64 SAME + bias + relu, max_pool 2x2/2, flatten (NHWC order), fc3 1024 relu,
//              dropout keep 0.5, fc4 logits; no weight decay (lenet_arg_scope's default 0).
//   resnet_20  B 128, 32x32x3 images: conv1 3x3x16 + batch norm + relu; three blocks of three
//              basic units (16, 32, 64 channels; stride 2 on the last unit of blocks 1 and 2,
//              conv2d_same's explicit padding there; a 1x1 conv + batch norm shortcut on a depth
//              change, a 1x1 max_pool stride 2 on a strided unit of the same depth); global
//              average pool; 1x1 conv logits with bias. Batch norm in training mode (batch
//              statistics, moving averages updated; scale, eps 1e-5, decay 0.997); weight decay
//              1e-4 on every conv's weights (resnet_arg_scope), regularization_penalty 1.
// The step (task "classification"): forward in training mode, the model's softmax
// cross-entropy over one-hot labels averaged over the batch, the regularization loss, gradients,
// no clipping, MomentumOptimizer (momentum 0.9) at a constant learning rate 0.01, on the cpu
// backend with N threads, or with --backend cuda on the cuda backend (GPU 0; --threads then
// only sets the host's OpenMP threads, which the step does not use). Data is in memory, on the
// step's backend: a pool of P batches (images uniform in [-1, 1), one-hot labels of a uniform
// class), cycled, so the input pipeline is excluded.
//
// `warmup` untimed steps, then `steps` timed steps, each timed to the end of its work on the
// device (the step reads its loss to the host mid-step; Backend::synchronize() after it waits
// for the backward pass and the update a GPU may still be running). Then, with --bound 1 (the
// default) and the cpu backend, in the same process at the same thread count, the bound of the
// step's unavoidable work (CPU only: with --backend cuda these fields are null):
//   conv_bound_ms       raw oneDNN convolutions of every conv of the net (forward, backward data
//                       except on the images, backward weights), NHWC data as Trainyard keeps
//                       it and the weights in the layout the primitive prefers, created once and
//                       timed alone (median of 5 after one untimed call);
//   conv_bound_any_ms   the same with oneDNN choosing the data layout too (blocked nChw8c),
//                       layout conversions excluded: the best case of any layout;
//   gemm_bound_ms       dnnl_sgemm of the fully connected layers' three products (lenet);
//   fma_peak_gflops     an AVX2 FMA loop on every thread: the machine's f32 peak now.
// A strided conv2d_same counts as its convolution with the padding inside the primitive (what
// torch.nn.Conv2d(padding=1, stride=2) computes). One JSON line:
//   {"framework": "trainyard", "backend" ("cpu" or "cuda"), "workload", "threads",
//    "batch_size", "steps", "median_ms",
//    "p90_ms", "images_per_sec", "cpu_ms" (median CPU time of a step, all threads), "step_gflop",
//    "gflops", "conv_bound_ms", "conv_bound_passes_ms" (forward, backward data, backward weights),
//    "conv_bound_any_ms", "gemm_bound_ms", "bound_ms", "fraction_of_bound" (bound / step),
//    "fma_peak_gflops", "fraction_of_fma_peak", "peak_rss_mb", "time_to_first_step_s",
//    "first_loss", "last_loss"}
// step_gflop counts the convolutions' and products' FLOPs of the bound (2 per multiply-add).
// --trace FILE: one more step recorded as a Chrome trace; its ops' total times go to stderr.
#include <immintrin.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/trace.h"
#include "trainyard/core/train_step.h"
#include "trainyard/model.h"
#include "trainyard/tensor.h"

namespace {

using trainyard::bench::json_number;
using trainyard::bench::now_seconds;
using trainyard::bench::peak_rss_mb;
using trainyard::bench::percentile;
using trainyard::bench::seconds_since_process_start;
using trainyard::bench::SplitMix64;

struct Args {
  std::string model = "resnet_20";
  std::string backend = "cpu";
  int threads = 1;
  int steps = 10;
  int warmup = 3;
  int64_t batch_size = -1;  // -1: the model's workload
  int64_t num_classes = 10;
  int64_t pool = 4;
  double learning_rate = 0.01;
  uint64_t seed = 1;
  bool bound = true;
  std::string trace;
};

[[noreturn]] void usage(const std::string& message) {
  std::cerr << "bench_image_train: " << message
            << "\nusage: bench_image_train [--model lenet|resnet_20] [--backend cpu|cuda] "
               "[--threads N] [--steps N] [--warmup N] [--batch_size B] [--num_classes C] "
               "[--pool P] [--learning_rate LR] [--seed S] [--bound 0|1] [--trace FILE]\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    try {
      if (flag == "--model") {
        a.model = value;
      } else if (flag == "--backend") {
        a.backend = value;
      } else if (flag == "--threads") {
        a.threads = std::stoi(value);
      } else if (flag == "--steps") {
        a.steps = std::stoi(value);
      } else if (flag == "--warmup") {
        a.warmup = std::stoi(value);
      } else if (flag == "--batch_size") {
        a.batch_size = std::stoll(value);
      } else if (flag == "--num_classes") {
        a.num_classes = std::stoll(value);
      } else if (flag == "--pool") {
        a.pool = std::stoll(value);
      } else if (flag == "--learning_rate") {
        a.learning_rate = std::stod(value);
      } else if (flag == "--seed") {
        a.seed = std::stoull(value);
      } else if (flag == "--bound") {
        a.bound = std::stoi(value) != 0;
      } else if (flag == "--trace") {
        a.trace = value;
      } else {
        usage("unknown flag " + flag);
      }
    } catch (const std::logic_error&) {
      usage("bad value '" + value + "' for " + flag);
    }
  }
  if (a.model != "lenet" && a.model != "resnet_20") {
    usage("--model is lenet or resnet_20, got " + a.model);
  }
  if (a.backend != "cpu" && a.backend != "cuda") {
    usage("--backend is cpu or cuda, got " + a.backend);
  }
  if (a.batch_size < 0) a.batch_size = a.model == "lenet" ? 64 : 128;
  if (a.threads < 1) usage("--threads must be >= 1");
  if (a.steps < 1 || a.warmup < 0) usage("bad step counts");
  if (a.batch_size < 1 || a.num_classes < 1 || a.pool < 1) {
    usage("--batch_size, --num_classes and --pool must be positive");
  }
  return a;
}

// Image [height, width, channels] of the workload.
std::vector<int64_t> image_shape(const Args& a) {
  return a.model == "lenet" ? std::vector<int64_t>{28, 28, 1} : std::vector<int64_t>{32, 32, 3};
}

// CPU seconds of every thread of this process so far: unlike the wall clock, not counting the
// time another process holds the cores.
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// ---------------------------------------------------------------------------------------------
// Inputs and the pipeline.

std::vector<trainyard::Batch> make_pool(const Args& a, trainyard::Backend& backend) {
  SplitMix64 rng(a.seed * 1000003 + 29);
  const std::vector<int64_t> hwc = image_shape(a);
  const int64_t b = a.batch_size, c = a.num_classes;
  std::vector<trainyard::Batch> pool;
  for (int64_t p = 0; p < a.pool; ++p) {
    std::vector<float> images(static_cast<std::size_t>(b * hwc[0] * hwc[1] * hwc[2]));
    for (float& v : images) v = rng.uniform(-1.0f, 1.0f);
    std::vector<float> labels(static_cast<std::size_t>(b * c), 0.0f);
    for (int64_t e = 0; e < b; ++e) {
      labels[static_cast<std::size_t>(e * c) + rng.next() % static_cast<uint64_t>(c)] = 1.0f;
    }
    trainyard::Batch batch;
    batch.features["image"] = trainyard::Tensor::from_vector(
        backend, trainyard::Shape{b, hwc[0], hwc[1], hwc[2]}, images);
    batch.labels = trainyard::Tensor::from_vector(backend, trainyard::Shape{b, c}, labels);
    pool.push_back(std::move(batch));
  }
  return pool;
}

trainyard::config::Pipeline make_pipeline(const Args& a) {
  trainyard::config::Pipeline p;
  p.set_task("classification");
  p.mutable_model()->set_class_(a.model);
  p.set_num_classes(a.num_classes);
  trainyard::config::TrainConfig* tc = p.mutable_train_config();
  tc->set_batch_size(a.batch_size);
  trainyard::config::PluginSpec* optimizer = tc->mutable_optimizer();
  optimizer->set_class_("MomentumOptimizer");
  trainyard::config::Param* momentum = optimizer->add_params();
  momentum->set_key("momentum");
  momentum->set_float_value(0.9);
  tc->mutable_learning_rate()->mutable_constant()->set_learning_rate(a.learning_rate);
  tc->set_regularization_penalty(1.0);
  tc->set_clip_gradient_norm(0.0);
  tc->set_seed(a.seed);
  trainyard::config::BackendConfig* backend = p.mutable_backend();
  backend->set_class_(a.backend);
  if (a.backend == "cpu") {  // the cuda backend takes no thread count (GPU 0 by default)
    backend->set_num_threads(a.threads);
    trainyard::config::Param* threads = backend->add_params();
    threads->set_key("num_threads");
    threads->set_int_value(a.threads);
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// The bound.

// One convolution of the net: NHWC input [n, h, w, c], filter [k, k, c, o], symmetric padding
// `pad`, stride `stride`; `input_gradient` when backpropagation needs its backward data pass.
struct Conv {
  int64_t n, h, w, c, k, o, stride, pad;
  bool input_gradient = true;
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
  double flops() const { return 2.0 * n * oh() * ow() * o * k * k * c; }
};

// A row-major product C[m, n] = op(A) op(B), as bench_frame_train times them.
struct Gemm {
  int64_t m, k, n;
  bool transpose_a = false;
  bool transpose_b = false;
};

std::vector<Conv> net_convs(const Args& a) {
  const int64_t b = a.batch_size;
  if (a.model == "lenet") {
    return {{b, 28, 28, 1, 5, 32, 1, 2, false}, {b, 14, 14, 32, 5, 64, 1, 2}};
  }
  std::vector<Conv> convs = {{b, 32, 32, 3, 3, 16, 1, 1, false}};
  int64_t size = 32, depth = 16;
  for (int64_t block_depth : {16, 32, 64}) {
    for (int unit = 0; unit < 3; ++unit) {
      const int64_t stride = unit == 2 && block_depth != 64 ? 2 : 1;
      if (depth != block_depth) convs.push_back({b, size, size, depth, 1, block_depth, stride, 0});
      convs.push_back({b, size, size, depth, 3, block_depth, stride, 1});  // conv1
      size = (size + 2 - 3) / stride + 1;
      convs.push_back({b, size, size, block_depth, 3, block_depth, 1, 1});  // conv2
      depth = block_depth;
    }
  }
  convs.push_back({b, 1, 1, depth, 1, a.num_classes, 1, 0});  // logits
  return convs;
}

std::vector<Gemm> net_gemms(const Args& a) {
  if (a.model != "lenet") return {};
  const int64_t b = a.batch_size;
  std::vector<Gemm> g;
  for (const auto& [in, out] :
       {std::pair<int64_t, int64_t>{7 * 7 * 64, 1024}, {1024, a.num_classes}}) {
    g.push_back({b, in, out, false, false});  // x W
    g.push_back({in, b, out, true, false});   // x^T dy
    g.push_back({b, out, in, false, true});   // dy W^T
  }
  return g;
}

using dnnl::memory;
using Tag = memory::format_tag;

const dnnl::engine& engine() {
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
// the input needs no gradient, backward weights); `any_data`: oneDNN picks the data layout as
// well as the weights'.
std::array<double, 3> time_conv(const Conv& s, bool any_data, int reps) {
  dnnl::stream stream(engine());
  const memory::data_type f32 = memory::data_type::f32;
  const Tag data_tag = any_data ? Tag::any : Tag::nhwc;
  const memory::desc src({s.n, s.c, s.h, s.w}, f32, data_tag);
  const memory::desc dst({s.n, s.o, s.oh(), s.ow()}, f32, data_tag);
  const memory::desc weights({s.o, s.c, s.k, s.k}, f32, Tag::any);
  const memory::dims strides{s.stride, s.stride}, dilates{0, 0}, pad{s.pad, s.pad};
  dnnl::convolution_forward::primitive_desc fwd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, src, weights, dst,
                                      strides, dilates, pad, pad),
      engine());
  dnnl::convolution_backward_data::primitive_desc bwd_data(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src, weights, dst,
                                            strides, dilates, pad, pad),
      engine(), fwd);
  dnnl::convolution_backward_weights::primitive_desc bwd_weights(
      dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src, weights,
                                               dst, strides, dilates, pad, pad),
      engine(), fwd);
  auto filled = [](const memory::desc& md) {
    memory m(md, engine());
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

double time_sgemm(const Gemm& g, int reps) {
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

// FLOP/s of 12 independent chains of 8-wide FMAs per thread: the f32 peak of `threads` cores.
__attribute__((target("avx2,fma"))) double fma_peak_gflops(int threads) {
  constexpr int64_t kIterations = 4'000'000;
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    float sink = 0;
    const double start = now_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      __m256 acc[12];
      for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
      const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
      for (int64_t it = 0; it < kIterations; ++it) {
        for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
      }
      __m256 total = acc[0];
      for (int i = 1; i < 12; ++i) total = _mm256_add_ps(total, acc[i]);
      float lanes[8];
      _mm256_storeu_ps(lanes, total);
      for (float v : lanes) sink += v;
    }
    const double seconds = now_seconds() - start;
    if (sink == 12345.0f) std::fprintf(stderr, " ");  // keeps the loop
    best = std::max(best, 2.0 * 8 * 12 * kIterations * threads / seconds * 1e-9);
  }
  return best;
}

// ---------------------------------------------------------------------------------------------

// One step under a StepTrace: writes the Chrome trace and prints the ops' total times.
void trace_step(trainyard::TrainStep& step, const std::vector<trainyard::Batch>& pool,
                int64_t global_step, const std::string& path) {
  std::map<std::string, std::pair<int64_t, int>> ops;  // name -> (total us, launches)
  int64_t step_us = 0;
  {
    trainyard::StepTrace trace;
    const int64_t start = trace.now_us();
    step.run(pool[static_cast<std::size_t>(global_step) % pool.size()], global_step);
    step.backend().synchronize();
    step_us = trace.now_us() - start;
    trace.write_json(path);
    for (const trainyard::StepTrace::Event& e : trace.events()) {
      if (e.category != "op") continue;
      ops[e.name].first += e.duration_us;
      ops[e.name].second += 1;
    }
  }
  std::vector<std::pair<std::string, std::pair<int64_t, int>>> sorted(ops.begin(), ops.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& x, const auto& y) { return x.second.first > y.second.first; });
  std::fprintf(stderr, "bench_image_train: traced step %lld: %.1f ms, written to %s\n",
               static_cast<long long>(global_step), static_cast<double>(step_us) * 1e-3,
               path.c_str());
  for (const auto& [name, totals] : sorted) {
    std::fprintf(stderr, "  %-28s %9.2f ms %5d launches %5.1f%%\n", name.c_str(),
                 static_cast<double>(totals.first) * 1e-3, totals.second,
                 100.0 * static_cast<double>(totals.first) / static_cast<double>(step_us));
  }
}

int run(const Args& a) {
  trainyard::PluginRegistry::Settings settings;
  settings.use_environment = false;
  trainyard::PluginRegistry registry(settings);
  std::ostringstream log;
  trainyard::TrainStep step(registry, make_pipeline(a), nullptr, log);
  const std::vector<trainyard::Batch> pool = make_pool(a, step.backend());

  std::vector<double> step_seconds, step_cpu_seconds;
  double time_to_first_step = -1, first_loss = 0, last_loss = 0;
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    const double start = now_seconds(), cpu_start = process_cpu_seconds();
    last_loss = step.run(pool[static_cast<std::size_t>(s) % pool.size()], s).loss;
    step.backend().synchronize();  // the backward pass and the update may still run on a GPU
    const double elapsed = now_seconds() - start, cpu = process_cpu_seconds() - cpu_start;
    if (s == 0) {
      time_to_first_step = seconds_since_process_start();
      first_loss = last_loss;
    }
    if (s >= a.warmup) {
      step_seconds.push_back(elapsed);
      step_cpu_seconds.push_back(cpu);
    }
  }
  if (!a.trace.empty()) trace_step(step, pool, a.warmup + a.steps, a.trace);
  const double rss = peak_rss_mb();  // before the bound's buffers

  double step_flop = 0;
  for (const Conv& c : net_convs(a)) step_flop += c.flops() * (c.input_gradient ? 3 : 2);
  for (const Gemm& g : net_gemms(a)) step_flop += 2.0 * static_cast<double>(g.m * g.k * g.n);
  double conv_bound = 0, conv_bound_any = 0, gemm_bound = 0, fma_peak = 0;
  std::array<double, 3> conv_passes{};  // NHWC, per pass
  const bool cpu = a.backend == "cpu";
  if (a.bound && cpu) {
    omp_set_num_threads(a.threads);
    for (const Conv& c : net_convs(a)) {
      const std::array<double, 3> nhwc = time_conv(c, false, 5), any = time_conv(c, true, 5);
      for (int i = 0; i < 3; ++i) {
        conv_passes[i] += nhwc[i];
        conv_bound += nhwc[i];
        conv_bound_any += any[i];
      }
    }
    for (const Gemm& g : net_gemms(a)) gemm_bound += time_sgemm(g, 5);
    fma_peak = fma_peak_gflops(a.threads);
  }
  const double bound = conv_bound + gemm_bound;

  const double median = percentile(step_seconds, 0.5);
  const double gflops = step_flop / median * 1e-9;
  // The oneDNN and FMA bounds measure the CPU: null on another backend.
  auto cpu_number = [cpu](double v) { return cpu ? json_number(v) : std::string("null"); };
  std::printf(
      "{\"framework\": \"trainyard\", \"backend\": \"%s\", \"workload\": \"%s\", \"threads\": "
      "%d, \"batch_size\": %lld, \"steps\": %d, \"median_ms\": %s, \"p90_ms\": %s, "
      "\"images_per_sec\": %s, "
      "\"cpu_ms\": %s, \"step_gflop\": %s, \"gflops\": %s, \"conv_bound_ms\": %s, "
      "\"conv_bound_passes_ms\": [%s, %s, %s], \"conv_bound_any_ms\": %s, "
      "\"gemm_bound_ms\": %s, \"bound_ms\": %s, \"fraction_of_bound\": %s, "
      "\"fma_peak_gflops\": %s, \"fraction_of_fma_peak\": %s, \"peak_rss_mb\": %s, "
      "\"time_to_first_step_s\": %s, \"first_loss\": %s, \"last_loss\": %s}\n",
      a.backend.c_str(), a.model.c_str(), a.threads, static_cast<long long>(a.batch_size), a.steps,
      json_number(median * 1e3).c_str(), json_number(percentile(step_seconds, 0.9) * 1e3).c_str(),
      json_number(static_cast<double>(a.batch_size) / median).c_str(),
      json_number(percentile(step_cpu_seconds, 0.5) * 1e3).c_str(),
      json_number(step_flop * 1e-9).c_str(), json_number(gflops).c_str(),
      cpu_number(conv_bound * 1e3).c_str(), cpu_number(conv_passes[0] * 1e3).c_str(),
      cpu_number(conv_passes[1] * 1e3).c_str(), cpu_number(conv_passes[2] * 1e3).c_str(),
      cpu_number(conv_bound_any * 1e3).c_str(), cpu_number(gemm_bound * 1e3).c_str(),
      cpu_number(bound * 1e3).c_str(), cpu_number(bound / median).c_str(),
      cpu_number(fma_peak).c_str(), cpu_number(fma_peak > 0 ? gflops / fma_peak : 0).c_str(),
      json_number(rss).c_str(), json_number(time_to_first_step).c_str(),
      json_number(first_loss).c_str(), json_number(last_loss).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  trainyard::bench::refuse_dnnl_reference_implementations();
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "bench_image_train: " << e.what() << "\n";
    return 1;
  }
}
