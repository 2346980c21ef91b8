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
//   fma_peak_gflops     an FMA loop on every thread at the widest vectors the CPU has (AVX-512,
//                       else AVX2): the machine's f32 peak now.
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

#include "bench_bound.h"
#include "bench_host_env.h"
#include "bench_util.h"
#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/trace.h"
#include "trainyard/core/train_step.h"
#include "trainyard/model.h"
#include "trainyard/tensor.h"

namespace {

using trainyard::bench::Conv;
using trainyard::bench::fma_peak_gflops;
using trainyard::bench::Gemm;
using trainyard::bench::json_number;
using trainyard::bench::now_seconds;
using trainyard::bench::peak_rss_mb;
using trainyard::bench::percentile;
using trainyard::bench::process_cpu_seconds;
using trainyard::bench::seconds_since_process_start;
using trainyard::bench::SplitMix64;
using trainyard::bench::time_conv;
using trainyard::bench::time_sgemm;

struct Args {
  std::string model = "resnet_20";
  std::string backend = "cpu";
  int threads = 1;
  std::string precision = "f32";  // the cpu backend's policy (--precision)
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
               "[--threads N] [--precision f32|bf16] [--steps N] [--warmup N] [--batch_size B] "
               "[--num_classes C] "
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
      } else if (flag == "--precision") {
        a.precision = value;
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
    backend->set_precision(a.precision);
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// The bound.

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
  trainyard::bench::apply_host_compute_thread_wait(argv);  // what the host does (issue 41)
  trainyard::bench::refuse_dnnl_reference_implementations();
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "bench_image_train: " << e.what() << "\n";
    return 1;
  }
}
