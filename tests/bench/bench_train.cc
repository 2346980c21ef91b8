// Training-step benchmark: Trainyard's TrainStep (the train op `trainyard train` runs) on
// YouTube-8M video-level workloads, for comparison with PyTorch and TensorFlow on the same
// initial weights and data (tests/bench/peers/train_torch.py, train_tf.py;
// tests/bench/peers/run_training_bench.sh runs all three).
//
//   bench_train [--model LogisticModel|MoeModel] [--backend cpu|cuda] [--threads N] [--steps N]
//               [--warmup N] [--batch_size B] [--num_classes C] [--feature_size D]
//               [--num_mixtures M] [--pool P] [--learning_rate LR] [--seed S] [--inputs DIR]
//               [--losses N] [--trace FILE]
//   bench_train --write_inputs DIR [shape flags]
//
// The step: the model's forward pass, CrossEntropyLoss (epsilon 1e-5), the models' L2
// regularization (l2_penalty 1e-8, regularization_penalty 1), gradients, clipping by norm per
// tensor (clip_gradient_norm 1) and TF1 Adam at a constant learning rate, on the cpu backend
// with N threads, or with --backend cuda on the cuda backend (GPU 0; --threads then only sets
// the host's OpenMP threads, which the step does not use). Data is in memory, on the step's
// backend: a pool of P distinct batches (features [B, D] with L2-normalized rows, labels
// [B, C] multi-hot f32), cycled, so the input pipeline is excluded (bench_input measures it).
//
// --write_inputs DIR generates the initial weights (glorot uniform, zero biases, seeded) and the
// pool and writes them for every side: DIR/init.safetensors (the variables by Trainyard's
// names), DIR/init.index + DIR/init.data-00000-of-00001 (the same variables and global_step 0,
// as a checkpoint TrainStep restores), DIR/data.safetensors ("features" [P, B, D], "labels"
// [P, B, C]). With --inputs DIR the run starts from those files; without it, from generated
// data and the model's own seeded initializers.
//
// Default mode: `warmup` steps, then `steps` timed steps, each timed to the end of its work on
// the device (the step reads its loss to the host mid-step; Backend::synchronize() after it
// waits for the backward pass and the update a GPU may still be running); then, on the cpu
// backend, in the same process and at the same thread count, the raw dnnl_sgemm products the
// step cannot avoid (per weight matrix [D, N]: the forward x w and the weight gradient x^T g)
// and a 1024^3 dnnl_sgemm for the machine's GEMM rate (CPU only: with --backend cuda the
// fields from raw_forward_gemm_ms to fraction_of_peak are null). Prints one JSON line:
//   {"framework": "trainyard", "backend": "cpu" or "cuda", "workload": ..., "threads": ...,
//    "median_ms": ..., "p90_ms": ..., "cpu_ms" (median CPU time of a step, all threads),
//    "examples_per_sec": ..., "step_gflop": ..., "gflops": ..., "raw_forward_gemm_ms": ...,
//    "raw_weight_gradient_gemm_ms": ..., "matmul_bound_ms": ...,
//    "step_over_matmul_bound": ..., "gemm_peak_gflops": ..., "fraction_of_peak": ...,
//    "peak_rss_mb": ..., "time_to_first_step_s": ...}
// step_gflop counts the matmul FLOPs of a step (4 B D N over the weight matrices: the forward
// product and the weight gradient; the input needs no gradient). time_to_first_step_s runs
// from the process's start (/proc/self/stat) to the end of the first step.
//
// --trace FILE: after the timed steps, one more step is recorded as a Chrome trace in FILE
// (chrome://tracing, Perfetto) and its ops' total times are printed to stderr, longest first.
//
// --losses N: runs N steps from the inputs and prints {"framework": "trainyard", "workload":
// ..., "losses": [label loss of each step]} for the equivalence check.
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/safetensors.h"
#include "trainyard/core/trace.h"
#include "trainyard/core/trainer.h"
#include "trainyard/model.h"
#include "trainyard/tensor.h"

namespace {

using trainyard::bench::HostTensor;
using trainyard::bench::json_number;
using trainyard::bench::now_seconds;
using trainyard::bench::peak_rss_mb;
using trainyard::bench::percentile;
using trainyard::bench::process_cpu_seconds;
using trainyard::bench::seconds_since_process_start;
using trainyard::bench::SplitMix64;
using trainyard::bench::to_host_tensor;
using trainyard::bench::to_tensor;

struct Args {
  std::string model = "LogisticModel";
  std::string backend = "cpu";
  int threads = 1;
  std::string precision = "f32";  // the cpu backend's policy (--precision)
  int steps = 30;
  int warmup = 5;
  int64_t batch_size = 1024;
  int64_t num_classes = 3862;
  int64_t feature_size = 1152;
  int64_t num_mixtures = 2;
  int64_t pool = 4;
  double learning_rate = 0.01;
  uint64_t seed = 1;
  std::string inputs;
  std::string write_inputs;
  int losses = 0;
  std::string trace;
};

[[noreturn]] void usage(const std::string& message) {
  std::cerr << "bench_train: " << message
            << "\nusage: bench_train [--model LogisticModel|MoeModel] [--backend cpu|cuda] "
               "[--threads N] [--precision f32|bf16] [--steps N] [--warmup N] [--batch_size B] "
               "[--num_classes C] "
               "[--feature_size D] [--num_mixtures M] [--pool P] [--learning_rate LR] [--seed S] "
               "[--inputs DIR] [--losses N] [--trace FILE] | --write_inputs DIR\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    try {
      if (flag == "--model") {
        args.model = value;
      } else if (flag == "--backend") {
        args.backend = value;
      } else if (flag == "--threads") {
        args.threads = std::stoi(value);
      } else if (flag == "--precision") {
        args.precision = value;
      } else if (flag == "--steps") {
        args.steps = std::stoi(value);
      } else if (flag == "--warmup") {
        args.warmup = std::stoi(value);
      } else if (flag == "--batch_size") {
        args.batch_size = std::stoll(value);
      } else if (flag == "--num_classes") {
        args.num_classes = std::stoll(value);
      } else if (flag == "--feature_size") {
        args.feature_size = std::stoll(value);
      } else if (flag == "--num_mixtures") {
        args.num_mixtures = std::stoll(value);
      } else if (flag == "--pool") {
        args.pool = std::stoll(value);
      } else if (flag == "--learning_rate") {
        args.learning_rate = std::stod(value);
      } else if (flag == "--seed") {
        args.seed = std::stoull(value);
      } else if (flag == "--inputs") {
        args.inputs = value;
      } else if (flag == "--write_inputs") {
        args.write_inputs = value;
      } else if (flag == "--losses") {
        args.losses = std::stoi(value);
      } else if (flag == "--trace") {
        args.trace = value;
      } else {
        usage("unknown flag " + flag);
      }
    } catch (const std::logic_error&) {
      usage("bad value '" + value + "' for " + flag);
    }
  }
  if (args.model != "LogisticModel" && args.model != "MoeModel") {
    usage("--model is LogisticModel or MoeModel, got " + args.model);
  }
  if (args.backend != "cpu" && args.backend != "cuda") {
    usage("--backend is cpu or cuda, got " + args.backend);
  }
  if (args.threads < 1) usage("--threads must be >= 1");
  if (args.steps < 1 || args.warmup < 0 || args.losses < 0) usage("bad step counts");
  if (args.batch_size < 1 || args.num_classes < 1 || args.feature_size < 1 ||
      args.num_mixtures < 1 || args.pool < 1) {
    usage("shapes and --pool must be positive");
  }
  return args;
}

// ---------------------------------------------------------------------------------------------
// Deterministic inputs.

// The pool: features [P, B, D] with rows uniform in [-1, 1) then L2-normalized (as the trainer
// normalizes its input); labels [P, B, C] with 1 to 4 distinct positive classes per row, most
// from the first 500 classes (YouTube-8M's labels are skewed towards its frequent classes).
std::pair<HostTensor, HostTensor> make_pool(const Args& a) {
  SplitMix64 rng(a.seed * 1000003 + 17);
  HostTensor features{{a.pool, a.batch_size, a.feature_size}, {}};
  HostTensor labels{{a.pool, a.batch_size, a.num_classes}, {}};
  features.values.resize(static_cast<std::size_t>(a.pool * a.batch_size * a.feature_size));
  labels.values.assign(static_cast<std::size_t>(a.pool * a.batch_size * a.num_classes), 0.0f);
  for (int64_t row = 0; row < a.pool * a.batch_size; ++row) {
    float* x = features.values.data() + row * a.feature_size;
    double sum = 0;
    for (int64_t j = 0; j < a.feature_size; ++j) {
      x[j] = rng.uniform(-1.0f, 1.0f);
      sum += static_cast<double>(x[j]) * x[j];
    }
    const auto inv = static_cast<float>(1.0 / std::sqrt(std::max(sum, 1e-12)));
    for (int64_t j = 0; j < a.feature_size; ++j) x[j] *= inv;
    float* y = labels.values.data() + row * a.num_classes;
    const int64_t positives = 1 + static_cast<int64_t>(rng.next() % 4);
    const int64_t frequent = std::min<int64_t>(a.num_classes, 500);
    for (int64_t k = 0; k < positives; ++k) {
      const int64_t range = rng.next() % 4 == 0 ? a.num_classes : frequent;
      y[static_cast<int64_t>(rng.next() % static_cast<uint64_t>(range))] = 1.0f;
    }
  }
  return {std::move(features), std::move(labels)};
}

// The model's variables, as the model names and shapes them, in creation order.
std::vector<std::pair<std::string, std::vector<int64_t>>> variable_shapes(const Args& a) {
  const int64_t d = a.feature_size, c = a.num_classes, m = a.num_mixtures;
  if (a.model == "LogisticModel")
    return {{"fully_connected/weights", {d, c}}, {"fully_connected/biases", {c}}};
  return {{"gates/weights", {d, c * (m + 1)}},
          {"experts/weights", {d, c * m}},
          {"experts/biases", {c * m}}};
}

// The weight matrices [D, N] of the model: what the step's GEMMs multiply.
std::vector<int64_t> weight_columns(const Args& a) {
  std::vector<int64_t> columns;
  for (const auto& [name, shape] : variable_shapes(a)) {
    if (shape.size() == 2) columns.push_back(shape[1]);
  }
  return columns;
}

// Glorot-uniform weights (as slim.fully_connected), zero biases.
std::vector<std::pair<std::string, HostTensor>> make_initial_weights(const Args& a) {
  SplitMix64 rng(a.seed * 7919 + 3);
  std::vector<std::pair<std::string, HostTensor>> out;
  for (const auto& [name, shape] : variable_shapes(a)) {
    HostTensor t{shape, {}};
    int64_t n = 1;
    for (int64_t dim : shape) n *= dim;
    t.values.assign(static_cast<std::size_t>(n), 0.0f);
    if (shape.size() == 2) {
      const auto limit =
          static_cast<float>(std::sqrt(6.0 / static_cast<double>(shape[0] + shape[1])));
      for (float& v : t.values) v = rng.uniform(-limit, limit);
    }
    out.emplace_back(name, std::move(t));
  }
  return out;
}

void write_inputs(const Args& a, trainyard::Backend& backend) {
  namespace fs = std::filesystem;
  fs::create_directories(a.write_inputs);
  const fs::path dir(a.write_inputs);
  std::vector<std::pair<std::string, trainyard::Tensor>> weights;
  for (const auto& [name, t] : make_initial_weights(a)) {
    weights.emplace_back(name, to_tensor(backend, t));
  }
  const std::map<std::string, std::string> metadata = {
      {"model", a.model},
      {"num_mixtures", std::to_string(a.num_mixtures)},
      {"seed", std::to_string(a.seed)}};
  trainyard::write_safetensors((dir / "init.safetensors").string(), weights, metadata);
  std::vector<std::pair<std::string, trainyard::Tensor>> checkpoint = weights;
  checkpoint.emplace_back("global_step", trainyard::Tensor::from_vector(backend, trainyard::Shape{},
                                                                        std::vector<int64_t>{0}));
  trainyard::write_checkpoint((dir / "init").string(), checkpoint);
  auto [features, labels] = make_pool(a);
  trainyard::write_safetensors(
      (dir / "data.safetensors").string(),
      {{"features", to_tensor(backend, features)}, {"labels", to_tensor(backend, labels)}});
}

// ---------------------------------------------------------------------------------------------
// Measurements.

// Median seconds of `reps` row-major dnnl_sgemm calls C[m, n] = op(A) B, op(A) = A^T with
// `transpose_a` (A stored [k, m]), after one untimed call.
double time_sgemm(int64_t m, int64_t k, int64_t n, bool transpose_a, int reps) {
  std::vector<float> a(static_cast<std::size_t>(m * k), 0.5f);
  std::vector<float> b(static_cast<std::size_t>(k * n), 0.25f);
  std::vector<float> c(static_cast<std::size_t>(m * n));
  const dnnl_dim_t lda = transpose_a ? m : k;
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {
    const double start = now_seconds();
    const dnnl_status_t status = dnnl_sgemm(transpose_a ? 'T' : 'N', 'N', m, n, k, 1.0f, a.data(),
                                            lda, b.data(), n, 0.0f, c.data(), n);
    if (status != dnnl_success) throw std::runtime_error("dnnl_sgemm failed");
    if (r > 0) times.push_back(now_seconds() - start);
  }
  return percentile(times, 0.5);
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
  std::fprintf(stderr, "bench_train: traced step %lld: %.1f ms, written to %s\n",
               static_cast<long long>(global_step), static_cast<double>(step_us) * 1e-3,
               path.c_str());
  for (const auto& [name, totals] : sorted) {
    std::fprintf(stderr, "  %-28s %9.2f ms %4d launches\n", name.c_str(),
                 static_cast<double>(totals.first) * 1e-3, totals.second);
  }
}

trainyard::config::Pipeline make_pipeline(const Args& a) {
  using trainyard::config::Param;
  trainyard::config::Pipeline p;
  p.mutable_model()->set_class_(a.model);
  if (a.model == "MoeModel") {
    Param* mixtures = p.mutable_model()->add_params();
    mixtures->set_key("moe_num_mixtures");
    mixtures->set_int_value(a.num_mixtures);
  }
  p.set_num_classes(a.num_classes);
  trainyard::config::TrainConfig* tc = p.mutable_train_config();
  tc->set_batch_size(a.batch_size);
  tc->mutable_label_loss()->set_class_("CrossEntropyLoss");
  tc->mutable_optimizer()->set_class_("AdamOptimizer");
  tc->mutable_learning_rate()->mutable_constant()->set_learning_rate(a.learning_rate);
  tc->set_regularization_penalty(1.0);
  tc->set_clip_gradient_norm(1.0);
  tc->set_seed(a.seed);
  trainyard::config::BackendConfig* backend = p.mutable_backend();
  backend->set_class_(a.backend);
  if (a.backend == "cpu") {  // the cuda backend takes no thread count (GPU 0 by default)
    backend->set_num_threads(a.threads);
    Param* threads = backend->add_params();
    threads->set_key("num_threads");
    threads->set_int_value(a.threads);
    backend->set_precision(a.precision);
  }
  return p;
}

int run(const Args& a) {
  trainyard::PluginRegistry::Settings settings;
  settings.use_environment = false;
  trainyard::PluginRegistry registry(settings);
  const trainyard::config::Pipeline pipeline = make_pipeline(a);

  std::unique_ptr<trainyard::CheckpointReader> restore;
  if (!a.inputs.empty()) {
    restore = std::make_unique<trainyard::CheckpointReader>(
        (std::filesystem::path(a.inputs) / "init").string());
  }
  std::ostringstream log;
  trainyard::TrainStep step(registry, pipeline, restore.get(), log);
  trainyard::Backend& backend = step.backend();

  if (!a.write_inputs.empty()) {
    write_inputs(a, backend);
    return 0;
  }

  // The pool, as one Batch per distinct batch.
  HostTensor features, labels;
  if (a.inputs.empty()) {
    std::tie(features, labels) = make_pool(a);
  } else {
    trainyard::SafetensorsFile data = trainyard::read_safetensors(
        (std::filesystem::path(a.inputs) / "data.safetensors").string(), backend);
    for (auto& [name, t] : data.tensors)
      (name == "features" ? features : labels) = to_host_tensor(t);
  }
  if (features.shape.size() != 3 || labels.shape.size() != 3 || features.shape[1] != a.batch_size ||
      features.shape[2] != a.feature_size || labels.shape[2] != a.num_classes) {
    usage("the inputs' shapes do not match --batch_size, --feature_size and --num_classes");
  }
  std::vector<trainyard::Batch> pool;
  for (int64_t i = 0; i < features.shape[0]; ++i) {
    const std::size_t xs = static_cast<std::size_t>(a.batch_size * a.feature_size);
    const std::size_t ys = static_cast<std::size_t>(a.batch_size * a.num_classes);
    trainyard::Batch batch;
    batch.features["features"] = trainyard::Tensor::from_host(
        backend, trainyard::Shape{a.batch_size, a.feature_size}, trainyard::DType::kF32,
        features.values.data() + i * xs, xs * sizeof(float));
    batch.labels = trainyard::Tensor::from_host(
        backend, trainyard::Shape{a.batch_size, a.num_classes}, trainyard::DType::kF32,
        labels.values.data() + i * ys, ys * sizeof(float));
    pool.push_back(std::move(batch));
  }
  features = {};
  labels = {};

  if (a.losses > 0) {
    std::string out = "{\"framework\": \"trainyard\", \"backend\": \"" + a.backend +
                      "\", \"workload\": \"" + a.model +
                      "\", \"threads\": " + std::to_string(a.threads) + ", \"losses\": [";
    for (int s = 0; s < a.losses; ++s) {
      const trainyard::StepResult r = step.run(pool[static_cast<std::size_t>(s) % pool.size()], s);
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%s%.9g", s ? ", " : "", r.loss);
      out += buffer;
    }
    std::printf("%s]}\n", out.c_str());
    return 0;
  }

  std::vector<double> step_seconds, step_cpu_seconds;
  double time_to_first_step = -1;
  double last_loss = 0;
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    const double start = now_seconds(), cpu_start = process_cpu_seconds();
    last_loss = step.run(pool[static_cast<std::size_t>(s) % pool.size()], s).loss;
    backend.synchronize();  // the backward pass and the update may still run on a GPU
    const double elapsed = now_seconds() - start;
    if (s == 0) time_to_first_step = seconds_since_process_start();
    if (s >= a.warmup) {
      step_seconds.push_back(elapsed);
      step_cpu_seconds.push_back(process_cpu_seconds() - cpu_start);
    }
  }

  if (!a.trace.empty()) trace_step(step, pool, a.warmup + a.steps, a.trace);

  // The GEMM bound, same process, same thread count: oneDNN on the CPU, so only on the cpu
  // backend.
  const bool cpu = a.backend == "cpu";
  const int reps = 5;
  double forward_gemm = 0, weight_gradient_gemm = 0, peak_gflops = 0;
  double step_flop = 0;
  if (cpu) omp_set_num_threads(a.threads);
  for (int64_t n : weight_columns(a)) {
    if (cpu) {
      forward_gemm += time_sgemm(a.batch_size, a.feature_size, n, false, reps);         // x w
      weight_gradient_gemm += time_sgemm(a.feature_size, a.batch_size, n, true, reps);  // x^T g
    }
    step_flop += 4.0 * static_cast<double>(a.batch_size * a.feature_size * n);
  }
  const double matmul_bound = forward_gemm + weight_gradient_gemm;
  if (cpu) {
    peak_gflops = 2.0 * 1024 * 1024 * 1024 / time_sgemm(1024, 1024, 1024, false, 10) * 1e-9;
  }

  const double median = percentile(step_seconds, 0.5);
  const double gflops = step_flop / median * 1e-9;
  auto cpu_number = [cpu](double v) { return cpu ? json_number(v) : std::string("null"); };
  std::printf(
      "{\"framework\": \"trainyard\", \"backend\": \"%s\", \"workload\": \"%s\", \"threads\": "
      "%d, \"batch_size\": %lld, \"steps\": %d, \"median_ms\": %s, \"p90_ms\": %s, \"cpu_ms\": %s, "
      "\"examples_per_sec\": %s, "
      "\"step_gflop\": %s, \"gflops\": %s, \"raw_forward_gemm_ms\": %s, "
      "\"raw_weight_gradient_gemm_ms\": %s, \"matmul_bound_ms\": %s, \"step_over_matmul_bound\": "
      "%s, \"gemm_peak_gflops\": %s, \"fraction_of_peak\": %s, \"peak_rss_mb\": %s, "
      "\"time_to_first_step_s\": %s, \"last_loss\": %s}\n",
      a.backend.c_str(), a.model.c_str(), a.threads, static_cast<long long>(a.batch_size), a.steps,
      json_number(median * 1e3).c_str(), json_number(percentile(step_seconds, 0.9) * 1e3).c_str(),
      json_number(percentile(step_cpu_seconds, 0.5) * 1e3).c_str(),
      json_number(static_cast<double>(a.batch_size) / median).c_str(),
      json_number(step_flop * 1e-9).c_str(), json_number(gflops).c_str(),
      cpu_number(forward_gemm * 1e3).c_str(), cpu_number(weight_gradient_gemm * 1e3).c_str(),
      cpu_number(matmul_bound * 1e3).c_str(), cpu_number(median / matmul_bound).c_str(),
      cpu_number(peak_gflops).c_str(), cpu_number(gflops / peak_gflops).c_str(),
      json_number(peak_rss_mb()).c_str(), json_number(time_to_first_step).c_str(),
      json_number(last_loss).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  trainyard::bench::refuse_dnnl_reference_implementations();
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "bench_train: " << e.what() << "\n";
    return 1;
  }
}
