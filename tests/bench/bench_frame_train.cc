// Training-step benchmark of the YouTube-8M frame-level models: Trainyard's TrainStep (the train
// op `trainyard train` runs) on DbofModel, LstmModel, GruModel and NetVLADModelLF, for
// comparison with PyTorch on the same initial weights and data
// (tests/bench/peers/train_frame_torch.py; tests/bench/peers/run_frame_training_bench.sh runs
// both). bench_train.cc is the video-level counterpart.
//
//   bench_frame_train [--model DbofModel|LstmModel|GruModel|NetVLADModelLF] [--threads N]
//                     [--steps N] [--warmup N] [--batch_size B] [--frames T]
//                     [--feature_size D] [--num_classes C] [--clusters K] [--hidden_size H]
//                     [--cells U] [--num_mixtures M] [--pool P] [--learning_rate LR] [--seed S]
//                     [--inputs DIR] [--losses N] [--trace FILE]
//                     [--rnn_implementation sequence|per_step]
//   bench_frame_train --write_inputs DIR [shape flags]
//
// The workloads (a shape flag left out takes the model's value here):
//   DbofModel       B 128, T 30 frames, K 8192 clusters, H 1024 hidden, sigmoid, max pooling,
//                   batch norm on; iterations = T and sample_random_frames=false.
//   NetVLADModelLF  B 80, T 300 frames, K 64 clusters (audio 32), H 1024 hidden, batch norm
//                   and ReLU6 on, no Context Gating; iterations = T and
//                   sample_random_frames=false.
//   LstmModel       B 32, T 300 frames, 1 BasicLSTMCell layer of U 512 (the starter code's:
//                   the final h into the classifier).
//   GruModel        B 32, T 300 frames, 1 GRUCell layer of U 512 (WILLOW's).
// Every model ends in a MoE of M 2 mixtures over C 3862 classes (moe_l2 1e-8); D 1152 features
// per frame (rgb 1024 + audio 128). The step: forward in training mode (batch norm on batch
// statistics), CrossEntropyLoss, the regularization loss with penalty 1, gradients, clipping by
// norm 1 per tensor, TF1 Adam at a constant learning rate, on the cpu backend with N threads.
//
// Frame sampling is random in the originals. Here every DbofModel and NetVLADModelLF video has
// exactly T = iterations valid frames and the models run SampleRandomSequence
// (sample_random_frames=false), whose start is drawn from [0, num_frames - iterations] = {0}:
// the sample is the identity, deterministic, and the peer feeds the frames as they are. The
// recurrent models see videos of varying length (num_frames: the first video of a batch T, then
// three in four T and one in four uniform in [T/2, T)), padded with zero frames, so
// dynamic_rnn's sequence-length masking is exercised.
//
// Data is in memory: a pool of P batches (features [B, T, D], each valid frame uniform in
// [-1, 1) then L2-normalized, as the trainer normalizes its input; num_frames [B]; labels
// [B, C] multi-hot, 1 to 4 classes per video, most among the first 500), cycled.
//
// --write_inputs DIR writes, for every side: DIR/init.safetensors (the model's trained variables
// and batch-norm moving statistics by the originals' TensorFlow names, with metadata "trained"
// (the trained variables, in creation order) and "l2" (name=penalty of each regularized one));
// DIR/init.index + .data-00000-of-00001 (the same and global_step 0, the checkpoint TrainStep
// restores); DIR/data.safetensors ("features" [P, B, T, D], "num_frames" [P, B] as f32,
// "labels" [P, B, C]). The initial values are the model's own initializers (seeded): one step at
// learning rate 0 on the first batch creates them (Adam at rate 0 leaves them unchanged; the
// moving statistics are written as their initial zeros and ones).
//
// Default mode: `warmup` steps, then `steps` timed steps; then, in the same process at the same
// thread count, the GEMM bound: raw dnnl_sgemm of the products the step cannot avoid (listed per
// model in gemm_bound(); a product repeated per time step or per example is timed once and
// multiplied by its count) and a 1024^3 dnnl_sgemm for the machine's GEMM rate. One JSON line:
//   {"framework": "trainyard", "workload", "threads", "batch_size", "steps", "median_ms",
//    "p90_ms", "cpu_ms" (median CPU time of a step, all threads), "examples_per_sec", "step_gflop",
//    "gflops", "gemm_bound_ms", "fraction_of_gemm_bound" (bound / step), "gemm_peak_gflops",
//    "peak_rss_mb", "time_to_first_step_s", "last_loss"}
// --losses N: N steps from the inputs, printing {"framework": "trainyard", "workload", "losses"}.
// --trace FILE: one more step recorded as a Chrome trace; its ops' total times go to stderr.
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
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench_host_env.h"
#include "bench_util.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/safetensors.h"
#include "trainyard/core/trace.h"
#include "trainyard/core/train_step.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
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
  std::string model = "DbofModel";
  int threads = 1;
  std::string precision = "f32";  // the cpu backend's policy (--precision)
  int steps = 10;
  int warmup = 2;
  int64_t batch_size = -1;  // -1: the model's workload
  int64_t frames = -1;
  int64_t feature_size = 1152;
  int64_t num_classes = 3862;
  int64_t clusters = -1;
  int64_t hidden_size = 1024;
  int64_t cells = 512;
  int64_t num_mixtures = 2;
  int64_t pool = -1;
  double learning_rate = 0.001;
  uint64_t seed = 1;
  std::string inputs;
  std::string write_inputs;
  int losses = 0;
  std::string trace;
  std::string rnn_implementation = "sequence";  // LstmModel, GruModel
};

[[noreturn]] void usage(const std::string& message) {
  std::cerr << "bench_frame_train: " << message
            << "\nusage: bench_frame_train [--model DbofModel|LstmModel|GruModel|NetVLADModelLF] "
               "[--threads N] [--precision f32|bf16] [--steps N] [--warmup N] [--batch_size B] "
               "[--frames T] "
               "[--feature_size D] [--num_classes C] [--clusters K] [--hidden_size H] "
               "[--cells U] [--num_mixtures M] [--pool P] [--learning_rate LR] [--seed S] "
               "[--inputs DIR] [--losses N] [--trace FILE] "
               "[--rnn_implementation sequence|per_step] | --write_inputs DIR\n";
  std::exit(2);
}

bool is_recurrent(const Args& a) { return a.model == "LstmModel" || a.model == "GruModel"; }

Args parse_args(int argc, char** argv) {
  Args a;
  const std::map<std::string, int64_t*> ints = {{"--batch_size", &a.batch_size},
                                                {"--frames", &a.frames},
                                                {"--feature_size", &a.feature_size},
                                                {"--num_classes", &a.num_classes},
                                                {"--clusters", &a.clusters},
                                                {"--hidden_size", &a.hidden_size},
                                                {"--cells", &a.cells},
                                                {"--num_mixtures", &a.num_mixtures},
                                                {"--pool", &a.pool}};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    try {
      if (auto it = ints.find(flag); it != ints.end()) {
        *it->second = std::stoll(value);
      } else if (flag == "--model") {
        a.model = value;
      } else if (flag == "--threads") {
        a.threads = std::stoi(value);
      } else if (flag == "--precision") {
        a.precision = value;
      } else if (flag == "--steps") {
        a.steps = std::stoi(value);
      } else if (flag == "--warmup") {
        a.warmup = std::stoi(value);
      } else if (flag == "--learning_rate") {
        a.learning_rate = std::stod(value);
      } else if (flag == "--seed") {
        a.seed = std::stoull(value);
      } else if (flag == "--inputs") {
        a.inputs = value;
      } else if (flag == "--write_inputs") {
        a.write_inputs = value;
      } else if (flag == "--losses") {
        a.losses = std::stoi(value);
      } else if (flag == "--trace") {
        a.trace = value;
      } else if (flag == "--rnn_implementation") {
        a.rnn_implementation = value;
      } else {
        usage("unknown flag " + flag);
      }
    } catch (const std::logic_error&) {
      usage("bad value '" + value + "' for " + flag);
    }
  }
  const bool dbof = a.model == "DbofModel", vlad = a.model == "NetVLADModelLF";
  if (!dbof && !vlad && !is_recurrent(a)) {
    usage("--model is DbofModel, LstmModel, GruModel or NetVLADModelLF, got " + a.model);
  }
  if (a.batch_size < 0) a.batch_size = dbof ? 128 : vlad ? 80 : 32;
  if (a.frames < 0) a.frames = dbof ? 30 : 300;
  if (a.clusters < 0) a.clusters = dbof ? 8192 : 64;
  if (a.pool < 0) a.pool = vlad ? 2 : 4;
  if (a.threads < 1) usage("--threads must be >= 1");
  if (a.steps < 1 || a.warmup < 0 || a.losses < 0) usage("bad step counts");
  for (const auto& [flag, value] : ints) {
    if (*value < 1) usage(flag + " must be positive");
  }
  if (vlad && (a.feature_size <= 1024 || a.clusters < 2)) {
    usage("NetVLADModelLF here needs --feature_size > 1024 (rgb 1024 + audio) and --clusters >= 2");
  }
  return a;
}

// ---------------------------------------------------------------------------------------------
// Deterministic inputs.

struct Pool {
  HostTensor features;    // [P, B, T, D]
  HostTensor num_frames;  // [P, B], f32
  HostTensor labels;      // [P, B, C]
};

Pool make_pool(const Args& a) {
  SplitMix64 rng(a.seed * 1000003 + 17);
  const int64_t p = a.pool, b = a.batch_size, t = a.frames, d = a.feature_size;
  const int64_t c = a.num_classes;
  Pool pool{{{p, b, t, d}, {}}, {{p, b}, {}}, {{p, b, c}, {}}};
  pool.features.values.assign(static_cast<std::size_t>(p * b * t * d), 0.0f);
  pool.num_frames.values.resize(static_cast<std::size_t>(p * b));
  pool.labels.values.assign(static_cast<std::size_t>(p * b * c), 0.0f);
  for (int64_t row = 0; row < p * b; ++row) {
    int64_t n = t;
    if (is_recurrent(a) && row % b != 0 && rng.next() % 4 == 0) {
      n = t / 2 + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(t - t / 2));
    }
    pool.num_frames.values[static_cast<std::size_t>(row)] = static_cast<float>(n);
    for (int64_t f = 0; f < n; ++f) {
      float* x = pool.features.values.data() + (row * t + f) * d;
      double sum = 0;
      for (int64_t j = 0; j < d; ++j) {
        x[j] = rng.uniform(-1.0f, 1.0f);
        sum += static_cast<double>(x[j]) * x[j];
      }
      const auto inv = static_cast<float>(1.0 / std::sqrt(std::max(sum, 1e-12)));
      for (int64_t j = 0; j < d; ++j) x[j] *= inv;
    }
    float* y = pool.labels.values.data() + row * c;
    const int64_t positives = 1 + static_cast<int64_t>(rng.next() % 4);
    const int64_t frequent = std::min<int64_t>(c, 500);
    for (int64_t k = 0; k < positives; ++k) {
      const int64_t range = rng.next() % 4 == 0 ? c : frequent;
      y[static_cast<int64_t>(rng.next() % static_cast<uint64_t>(range))] = 1.0f;
    }
  }
  return pool;
}

// Batch i of the pool.
std::vector<trainyard::Batch> make_batches(trainyard::Backend& backend, const Pool& pool) {
  const std::vector<int64_t>& fs = pool.features.shape;
  const int64_t b = fs[1], t = fs[2], d = fs[3], c = pool.labels.shape[2];
  std::vector<trainyard::Batch> batches;
  for (int64_t i = 0; i < fs[0]; ++i) {
    const auto xs = static_cast<std::size_t>(b * t * d), ys = static_cast<std::size_t>(b * c);
    trainyard::Batch batch;
    batch.features["features"] =
        trainyard::Tensor::from_host(backend, trainyard::Shape{b, t, d}, trainyard::DType::kF32,
                                     pool.features.values.data() + i * xs, xs * sizeof(float));
    batch.labels =
        trainyard::Tensor::from_host(backend, trainyard::Shape{b, c}, trainyard::DType::kF32,
                                     pool.labels.values.data() + i * ys, ys * sizeof(float));
    std::vector<int32_t> n(static_cast<std::size_t>(b));
    for (int64_t e = 0; e < b; ++e) {
      n[static_cast<std::size_t>(e)] =
          static_cast<int32_t>(pool.num_frames.values[static_cast<std::size_t>(i * b + e)]);
    }
    batch.num_frames = trainyard::Tensor::from_vector(backend, trainyard::Shape{b}, n);
    batches.push_back(std::move(batch));
  }
  return batches;
}

// ---------------------------------------------------------------------------------------------
// The pipeline.

void add_param(trainyard::config::Pipeline& p, const std::string& key, int64_t value) {
  trainyard::config::Param* param = p.mutable_model()->add_params();
  param->set_key(key);
  param->set_int_value(value);
}

void add_param(trainyard::config::Pipeline& p, const std::string& key, bool value) {
  trainyard::config::Param* param = p.mutable_model()->add_params();
  param->set_key(key);
  param->set_bool_value(value);
}

void add_param(trainyard::config::Pipeline& p, const std::string& key, const std::string& value) {
  trainyard::config::Param* param = p.mutable_model()->add_params();
  param->set_key(key);
  param->set_string_value(value);
}

trainyard::config::Pipeline make_pipeline(const Args& a, double learning_rate) {
  trainyard::config::Pipeline p;
  p.mutable_model()->set_class_(a.model);
  add_param(p, "moe_num_mixtures", a.num_mixtures);
  if (a.model == "DbofModel") {
    add_param(p, "iterations", a.frames);
    add_param(p, "sample_random_frames", false);
    add_param(p, "dbof_cluster_size", a.clusters);
    add_param(p, "dbof_hidden_size", a.hidden_size);
  } else if (a.model == "NetVLADModelLF") {
    add_param(p, "iterations", a.frames);
    add_param(p, "sample_random_frames", false);
    add_param(p, "netvlad_cluster_size", a.clusters);
    add_param(p, "netvlad_hidden_size", a.hidden_size);
  } else if (a.model == "LstmModel") {
    add_param(p, "lstm_cells", a.cells);
    add_param(p, "lstm_layers", int64_t{1});
    add_param(p, "rnn_implementation", a.rnn_implementation);
  } else {
    add_param(p, "gru_cells", a.cells);
    add_param(p, "gru_layers", int64_t{1});
    add_param(p, "rnn_implementation", a.rnn_implementation);
  }
  p.set_num_classes(a.num_classes);
  trainyard::config::TrainConfig* tc = p.mutable_train_config();
  tc->set_batch_size(a.batch_size);
  tc->mutable_label_loss()->set_class_("CrossEntropyLoss");
  tc->mutable_optimizer()->set_class_("AdamOptimizer");
  tc->mutable_learning_rate()->mutable_constant()->set_learning_rate(learning_rate);
  tc->set_regularization_penalty(1.0);
  tc->set_clip_gradient_norm(1.0);
  tc->set_seed(a.seed);
  trainyard::config::BackendConfig* backend = p.mutable_backend();
  backend->set_class_("cpu");
  backend->set_num_threads(a.threads);
  trainyard::config::Param* threads = backend->add_params();
  threads->set_key("num_threads");
  threads->set_int_value(a.threads);
  backend->set_precision(a.precision);
  return p;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The model's initial variables, by one step at learning rate 0 (see the header).
void write_inputs(const Args& a, const trainyard::PluginRegistry& registry) {
  namespace fs = std::filesystem;
  const fs::path dir(a.write_inputs);
  fs::create_directories(dir);
  std::ostringstream log;
  trainyard::TrainStep step(registry, make_pipeline(a, 0.0), nullptr, log);
  trainyard::Backend& backend = step.backend();
  Pool pool = make_pool(a);
  std::vector<trainyard::Batch> batches = make_batches(backend, pool);
  step.run(batches[0], 0);

  std::set<std::string> trained;
  std::string trained_list, l2_list;
  for (const trainyard::Variable* v : step.trained()) {
    trained.insert(v->name());
    trained_list += (trained_list.empty() ? "" : ",") + v->name();
    if (v->spec().l2_regularization > 0) {
      char penalty[32];
      std::snprintf(penalty, sizeof penalty, "%.17g", v->spec().l2_regularization);
      l2_list += (l2_list.empty() ? "" : ",") + v->name() + "=" + penalty;
    }
  }
  std::vector<std::pair<std::string, trainyard::Tensor>> weights;
  for (auto& [name, value] : step.state(0)) {
    if (trained.count(name) != 0) {
      weights.emplace_back(name, value);
    } else if (ends_with(name, "/moving_mean")) {
      weights.emplace_back(name, trainyard::ops::zeros_like(value));
    } else if (ends_with(name, "/moving_variance")) {
      weights.emplace_back(name, trainyard::ops::ones_like(value));
    }
  }
  const std::map<std::string, std::string> metadata = {{"model", a.model},
                                                       {"seed", std::to_string(a.seed)},
                                                       {"trained", trained_list},
                                                       {"l2", l2_list}};
  trainyard::write_safetensors((dir / "init.safetensors").string(), weights, metadata);
  weights.emplace_back("global_step", trainyard::Tensor::from_vector(backend, trainyard::Shape{},
                                                                     std::vector<int64_t>{0}));
  trainyard::write_checkpoint((dir / "init").string(), weights);
  trainyard::write_safetensors((dir / "data.safetensors").string(),
                               {{"features", to_tensor(backend, pool.features)},
                                {"num_frames", to_tensor(backend, pool.num_frames)},
                                {"labels", to_tensor(backend, pool.labels)}});
}

// ---------------------------------------------------------------------------------------------
// Measurements.

// A row-major product C[m, n] = op(A) op(B), A [m, k] (stored [k, m] when transpose_a), B [k, n]
// (stored [n, k] when transpose_b), `count` times in a step.
struct Gemm {
  int64_t m, k, n;
  bool transpose_a = false;
  bool transpose_b = false;
  int64_t count = 1;
};

// Median seconds of one dnnl_sgemm of `g`, after one untimed call.
double time_sgemm(const Gemm& g, int reps) {
  std::vector<float> a(static_cast<std::size_t>(g.m * g.k), 0.5f);
  std::vector<float> b(static_cast<std::size_t>(g.k * g.n), 0.25f);
  std::vector<float> c(static_cast<std::size_t>(g.m * g.n));
  const dnnl_dim_t lda = g.transpose_a ? g.m : g.k, ldb = g.transpose_b ? g.k : g.n;
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {
    const double start = now_seconds();
    const dnnl_status_t status =
        dnnl_sgemm(g.transpose_a ? 'T' : 'N', g.transpose_b ? 'T' : 'N', g.m, g.n, g.k, 1.0f,
                   a.data(), lda, b.data(), ldb, 0.0f, c.data(), g.n);
    if (status != dnnl_success) throw std::runtime_error("dnnl_sgemm failed");
    if (r > 0) times.push_back(now_seconds() - start);
  }
  return percentile(times, 0.5);
}

// Forward x W, weight gradient x^T g and (when the input needs a gradient) g W^T of x [rows, in]
// times W [in, out].
void dense(std::vector<Gemm>& out, int64_t rows, int64_t in, int64_t width, bool input_gradient,
           int64_t count = 1) {
  out.push_back({rows, in, width, false, false, count});
  out.push_back({in, rows, width, true, false, count});
  if (input_gradient) out.push_back({rows, width, in, false, true, count});
}

// The products a step cannot avoid. Every layer's input gradient is needed except the first
// product on the data, unless batch norm's trained beta and gamma sit before it (DbofModel's and
// NetVLADModelLF's input_bn). A recurrent layer's T - 1 products h W_h (and their input
// gradients) are sequential; its weight gradient is one product over all steps.
std::vector<Gemm> gemm_bound(const Args& a) {
  const int64_t b = a.batch_size, t = a.frames, d = a.feature_size, c = a.num_classes;
  const int64_t m = a.num_mixtures;
  std::vector<Gemm> g;
  int64_t classifier_in = 0;
  if (a.model == "DbofModel") {
    dense(g, b * t, d, a.clusters, true);
    dense(g, b, a.clusters, a.hidden_size, true);
    classifier_in = a.hidden_size;
  } else if (a.model == "NetVLADModelLF") {
    const int64_t video = 1024, audio = d - video;
    for (const auto& [width, k] :
         {std::pair{video, a.clusters}, std::pair{audio, a.clusters / 2}}) {
      dense(g, b * t, width, k, true);
      g.push_back({width, t, k, true, false, b});   // V = x^T a per video
      g.push_back({t, k, width, false, true, b});   // dx = a dV^T
      g.push_back({t, width, k, false, false, b});  // da = x dV
    }
    dense(g, b, video * a.clusters + audio * (a.clusters / 2), a.hidden_size, true);
    classifier_in = a.hidden_size;
  } else {
    const int64_t u = a.cells;
    const std::vector<int64_t> widths =
        a.model == "LstmModel" ? std::vector<int64_t>{4 * u} : std::vector<int64_t>{2 * u, u};
    for (int64_t width : widths) {
      dense(g, b * t, d, width, false);
      g.push_back({b, u, width, false, false, t - 1});  // h W_h per step
      g.push_back({b, width, u, false, true, t - 1});   // its input gradient per step
      g.push_back({u, b * (t - 1), width, true, false, 1});
    }
    classifier_in = u;
  }
  dense(g, b, classifier_in, c * (m + 1), true);
  dense(g, b, classifier_in, c * m, true);
  return g;
}

// One step under a StepTrace: writes the Chrome trace and prints the ops' total times.
void trace_step(trainyard::TrainStep& step, const std::vector<trainyard::Batch>& pool,
                int64_t global_step, const std::string& path) {
  std::map<std::string, std::pair<int64_t, int>> ops;  // name -> (total us, launches)
  int64_t step_us = 0;
  {
    trainyard::StepTrace trace;
    const int64_t start = trace.now_us();
    step.run(pool[static_cast<std::size_t>(global_step) % pool.size()], global_step);
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
  std::fprintf(stderr, "bench_frame_train: traced step %lld: %.1f ms, written to %s\n",
               static_cast<long long>(global_step), static_cast<double>(step_us) * 1e-3,
               path.c_str());
  for (const auto& [name, totals] : sorted) {
    std::fprintf(stderr, "  %-28s %9.2f ms %5d launches\n", name.c_str(),
                 static_cast<double>(totals.first) * 1e-3, totals.second);
  }
}

int run(const Args& a) {
  trainyard::PluginRegistry::Settings settings;
  settings.use_environment = false;
  trainyard::PluginRegistry registry(settings);
  if (!a.write_inputs.empty()) {
    write_inputs(a, registry);
    return 0;
  }

  std::unique_ptr<trainyard::CheckpointReader> restore;
  if (!a.inputs.empty()) {
    restore = std::make_unique<trainyard::CheckpointReader>(
        (std::filesystem::path(a.inputs) / "init").string());
  }
  std::ostringstream log;
  trainyard::TrainStep step(registry, make_pipeline(a, a.learning_rate), restore.get(), log);
  trainyard::Backend& backend = step.backend();

  std::vector<trainyard::Batch> pool;
  {
    Pool host;
    if (a.inputs.empty()) {
      host = make_pool(a);
    } else {
      trainyard::SafetensorsFile data = trainyard::read_safetensors(
          (std::filesystem::path(a.inputs) / "data.safetensors").string(), backend);
      for (auto& [name, t] : data.tensors) {
        HostTensor& slot = name == "features" ? host.features
                           : name == "labels" ? host.labels
                                              : host.num_frames;
        slot = to_host_tensor(t);
        t = trainyard::Tensor();
      }
    }
    const std::vector<int64_t>& fs = host.features.shape;
    if (fs.size() != 4 || fs[1] != a.batch_size || fs[2] != a.frames || fs[3] != a.feature_size ||
        host.labels.shape.size() != 3 || host.labels.shape[2] != a.num_classes) {
      usage(
          "the inputs' shapes do not match --batch_size, --frames, --feature_size and "
          "--num_classes");
    }
    pool = make_batches(backend, host);
  }

  if (a.losses > 0) {
    std::string out = "{\"framework\": \"trainyard\", \"workload\": \"" + a.model +
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
    const double elapsed = now_seconds() - start;
    if (s == 0) time_to_first_step = seconds_since_process_start();
    if (s >= a.warmup) {
      step_seconds.push_back(elapsed);
      step_cpu_seconds.push_back(process_cpu_seconds() - cpu_start);
    }
  }
  if (!a.trace.empty()) trace_step(step, pool, a.warmup + a.steps, a.trace);
  const double rss = peak_rss_mb();  // before the bound's buffers

  omp_set_num_threads(a.threads);
  double bound = 0, step_flop = 0;
  for (const Gemm& g : gemm_bound(a)) {
    bound += time_sgemm(g, g.count > 1 ? 20 : 5) * static_cast<double>(g.count);
    step_flop += 2.0 * static_cast<double>(g.m * g.k * g.n * g.count);
  }
  const double peak_gflops = 2.0 * 1024 * 1024 * 1024 / time_sgemm({1024, 1024, 1024}, 10) * 1e-9;

  const double median = percentile(step_seconds, 0.5);
  std::printf(
      "{\"framework\": \"trainyard\", \"workload\": \"%s\", \"threads\": %d, \"batch_size\": "
      "%lld, \"steps\": %d, \"median_ms\": %s, \"p90_ms\": %s, \"cpu_ms\": %s, "
      "\"examples_per_sec\": %s, "
      "\"step_gflop\": %s, \"gflops\": %s, \"gemm_bound_ms\": %s, \"fraction_of_gemm_bound\": %s, "
      "\"gemm_peak_gflops\": %s, \"peak_rss_mb\": %s, \"time_to_first_step_s\": %s, "
      "\"last_loss\": %s}\n",
      a.model.c_str(), a.threads, static_cast<long long>(a.batch_size), a.steps,
      json_number(median * 1e3).c_str(), json_number(percentile(step_seconds, 0.9) * 1e3).c_str(),
      json_number(percentile(step_cpu_seconds, 0.5) * 1e3).c_str(),
      json_number(static_cast<double>(a.batch_size) / median).c_str(),
      json_number(step_flop * 1e-9).c_str(), json_number(step_flop / median * 1e-9).c_str(),
      json_number(bound * 1e3).c_str(), json_number(bound / median).c_str(),
      json_number(peak_gflops).c_str(), json_number(rss).c_str(),
      json_number(time_to_first_step).c_str(), json_number(last_loss).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  trainyard::bench::apply_host_compute_thread_wait(argv);  // what the host does (issue 41)
  trainyard::bench::refuse_dnnl_reference_implementations();
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "bench_frame_train: " << e.what() << "\n";
    return 1;
  }
}
