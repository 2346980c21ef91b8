// The training metrics of a logged YouTube-8M batch (Hit@1, PERR, GAP with top_k 20) against
// the LogisticModel training step they are logged beside, in the same run: the three
// functions one by one (what report_train_step called) and training_batch_metrics (one pass).
//
//   build/tests/bench/bench_metrics [--threads N] [Google Benchmark flags]
//   e.g. bench_metrics --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//
// The step is bench_train's LogisticModel step (1152 -> 3862, batch 1024, CrossEntropyLoss,
// L2, clipping, TF1 Adam) on the cpu backend with N threads (default 2), on in-memory batches.
// The metrics run on one thread over the host copies of a step's predictions (after 5 warm-up
// steps, so the scores are a model's, with its ties) and of its batch's labels. Each metrics
// row's counter step_fraction is its median time over the median step time measured last in
// the same run (by BM_TrainStep, or by 10 steps before the benchmarks start).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/train_step.h"
#include "trainyard/pkg/yt8m/metrics.h"
#include "trainyard/tensor.h"

namespace {

using trainyard::bench::now_seconds;
using trainyard::bench::percentile;
using trainyard::bench::SplitMix64;

constexpr int64_t kBatch = 1024;
constexpr int64_t kClasses = 3862;
constexpr int64_t kFeatures = 1152;
constexpr int64_t kPool = 4;
constexpr int64_t kTopK = 20;

int g_threads = 2;
double g_step_seconds = 0.0;  // BM_TrainStep's median, once it has run

trainyard::config::Pipeline make_pipeline() {
  using trainyard::config::Param;
  trainyard::config::Pipeline p;
  p.mutable_model()->set_class_("LogisticModel");
  p.set_num_classes(kClasses);
  trainyard::config::TrainConfig* tc = p.mutable_train_config();
  tc->set_batch_size(kBatch);
  tc->mutable_label_loss()->set_class_("CrossEntropyLoss");
  tc->mutable_optimizer()->set_class_("AdamOptimizer");
  tc->mutable_learning_rate()->mutable_constant()->set_learning_rate(0.01);
  tc->set_regularization_penalty(1.0);
  tc->set_clip_gradient_norm(1.0);
  tc->set_seed(1);
  trainyard::config::BackendConfig* backend = p.mutable_backend();
  backend->set_class_("cpu");
  backend->set_num_threads(g_threads);
  Param* threads = backend->add_params();
  threads->set_key("num_threads");
  threads->set_int_value(g_threads);
  return p;
}

// The step, its batches (bench_train's pool: L2-normalized features, 1 to 4 positives per row
// mostly among the first 500 classes) and one step's predictions and labels on the host.
struct Workload {
  trainyard::PluginRegistry registry{[] {
    trainyard::PluginRegistry::Settings settings;
    settings.use_environment = false;
    return settings;
  }()};
  std::unique_ptr<trainyard::TrainStep> step;
  std::vector<trainyard::Batch> pool;
  int64_t global_step = 0;
  std::vector<float> predictions;
  std::vector<float> labels;

  Workload() {
    std::ostringstream log;
    step = std::make_unique<trainyard::TrainStep>(registry, make_pipeline(), nullptr, log);
    trainyard::Backend& backend = step->backend();
    SplitMix64 rng(1000020);
    std::vector<std::vector<float>> host_labels;
    for (int64_t i = 0; i < kPool; ++i) {
      std::vector<float> x(static_cast<std::size_t>(kBatch * kFeatures));
      std::vector<float> y(static_cast<std::size_t>(kBatch * kClasses), 0.0f);
      for (int64_t row = 0; row < kBatch; ++row) {
        float* xr = x.data() + row * kFeatures;
        double sum = 0;
        for (int64_t j = 0; j < kFeatures; ++j) {
          xr[j] = rng.uniform(-1.0f, 1.0f);
          sum += static_cast<double>(xr[j]) * xr[j];
        }
        const auto inv = static_cast<float>(1.0 / std::sqrt(std::max(sum, 1e-12)));
        for (int64_t j = 0; j < kFeatures; ++j) xr[j] *= inv;
        float* yr = y.data() + row * kClasses;
        const int64_t positives = 1 + static_cast<int64_t>(rng.next() % 4);
        for (int64_t k = 0; k < positives; ++k) {
          const int64_t range = rng.next() % 4 == 0 ? kClasses : 500;
          yr[static_cast<int64_t>(rng.next() % static_cast<uint64_t>(range))] = 1.0f;
        }
      }
      trainyard::Batch batch;
      batch.features["features"] =
          trainyard::Tensor::from_vector(backend, trainyard::Shape{kBatch, kFeatures}, x);
      batch.labels = trainyard::Tensor::from_vector(backend, trainyard::Shape{kBatch, kClasses}, y);
      pool.push_back(std::move(batch));
      host_labels.push_back(std::move(y));
    }
    trainyard::StepResult last;
    for (int s = 0; s < 5; ++s) last = run_step();
    predictions = last.predictions.to_vector<float>();
    labels = host_labels[static_cast<std::size_t>((global_step - 1) % kPool)];
  }

  trainyard::StepResult run_step() {
    trainyard::StepResult r =
        step->run(pool[static_cast<std::size_t>(global_step % kPool)], global_step);
    ++global_step;
    return r;
  }
};

Workload& workload() {
  static Workload w;
  return w;
}

void set_step_fraction(benchmark::State& state, const std::vector<double>& seconds) {
  if (g_step_seconds > 0 && !seconds.empty()) {
    state.counters["step_fraction"] = percentile(seconds, 0.5) / g_step_seconds;
  }
}

void BM_TrainStep(benchmark::State& state) {
  Workload& w = workload();
  std::vector<double> seconds;
  for (auto _ : state) {
    const double start = now_seconds();
    benchmark::DoNotOptimize(w.run_step().loss);
    seconds.push_back(now_seconds() - start);
  }
  g_step_seconds = percentile(seconds, 0.5);
  state.counters["median_ms"] = g_step_seconds * 1e3;
}

// What report_train_step computed: the three functions one after the other.
void BM_MetricsThreeFunctions(benchmark::State& state) {
  Workload& w = workload();
  std::vector<double> seconds;
  for (auto _ : state) {
    const double start = now_seconds();
    benchmark::DoNotOptimize(
        trainyard::metrics::hit_at_one(w.predictions, w.labels, kBatch, kClasses));
    benchmark::DoNotOptimize(trainyard::metrics::precision_at_equal_recall_rate(
        w.predictions, w.labels, kBatch, kClasses));
    benchmark::DoNotOptimize(
        trainyard::metrics::gap(w.predictions, w.labels, kBatch, kClasses, kTopK));
    seconds.push_back(now_seconds() - start);
  }
  state.counters["median_ms"] = percentile(seconds, 0.5) * 1e3;
  set_step_fraction(state, seconds);
}

void BM_MetricsOnePass(benchmark::State& state) {
  Workload& w = workload();
  std::vector<double> seconds;
  for (auto _ : state) {
    const double start = now_seconds();
    benchmark::DoNotOptimize(trainyard::metrics::training_batch_metrics(w.predictions, w.labels,
                                                                        kBatch, kClasses, kTopK));
    seconds.push_back(now_seconds() - start);
  }
  state.counters["median_ms"] = percentile(seconds, 0.5) * 1e3;
  set_step_fraction(state, seconds);
}

BENCHMARK(BM_TrainStep)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_MetricsThreeFunctions)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_MetricsOnePass)->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) {
  trainyard::bench::refuse_dnnl_reference_implementations();
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--threads" && i + 1 < argc) {
      g_threads = std::atoi(argv[++i]);
    } else {
      std::cerr << "bench_metrics: unknown flag " << flag << " (only --threads N)\n";
      return 2;
    }
  }
  if (g_threads < 1) {
    std::cerr << "bench_metrics: --threads must be >= 1\n";
    return 2;
  }
  // The step and the metrics' inputs before anything is timed, and a first step time for
  // step_fraction (BM_TrainStep's median replaces it each time it runs).
  Workload& w = workload();
  std::vector<double> seconds;
  for (int s = 0; s < 10; ++s) {
    const double start = now_seconds();
    w.run_step();
    seconds.push_back(now_seconds() - start);
  }
  g_step_seconds = percentile(seconds, 0.5);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
