// The cuda backend's ops against the raw libraries on the same GPU, in one process: matmul
// against cublasSgemm, conv2d (forward, backward data, backward filter) against cuDNN, and the
// host cost of one op (core + kernel launch) against the runtime's cheapest call.
// tests/bench/peers/run_cuda_bench.sh runs it with the training benchmarks.
//
//   bench_cuda_ops [--backend cuda|cpu] [--small 0|1] [--reps N] [--inner N] [--warmup N]
//                  [--launches N] [--sections matmul,conv,launch]
//
// The backend ("cuda", GPU 0) is created through the plugin registry as the trainers create it.
// Without a usable GPU the first allocation throws Unimplemented: the program prints "no usable
// CUDA device" and exits 0. --backend cpu runs the Trainyard side on the cpu backend with the
// raw side left out (null): a check of this program on a machine without a GPU; --small 1 gives
// it shapes a CPU runs in seconds.
//
// Timing: every side (Trainyard's, each raw library call) first runs once untimed and, with its
// result, is checked against the raw f32 result (max |difference| / max |raw|); then `warmup`
// untimed calls, then `reps` rounds, each timing `inner` back-to-back calls of every side in
// turn (interleaved, so a change of clocks hits every side alike) up to a host synchronisation
// (Backend::synchronize, cudaStreamSynchronize): the median over rounds of the seconds per call.
//   matmul   f32 [M, K] x [K, N] row-major: ops::matmul on cuda tensors against cublasSgemm on
//            cudaMalloc'd buffers of the same shapes in cuBLAS's default math (no TF32, as the
//            backend), and for reference cublasSgemm with CUBLAS_TF32_TENSOR_OP_MATH.
//   conv2d   f32 NHWC, ResNet-50's shapes at N 64 (filters HWIO on Trainyard's side, KRSC, the
//            NHWC filter layout, on cuDNN's): forward through ops::conv2d; backward data and
//            backward filter through the backend's conv2d_backward_input / _filter kernels,
//            called by name from Backend::kernels() with the attributes and the output the
//            core's gradient rule passes (as bench_conv does on the CPU). cuDNN: the algorithms
//            cudnnFind*Algorithm lists, each timed here with its own workspace, in
//            CUDNN_FMA_MATH (true f32, the backend's math): the fastest ("cudnn"), the fastest
//            deterministic one ("cudnn_deterministic", what the backend may use), and in
//            CUDNN_DEFAULT_MATH, which allows TF32 tensor cores, for reference ("cudnn_tf32").
//   launch   ops::add of two 1-element tensors `launches` times, then one synchronisation:
//            microseconds per op, host enqueue only (host_us_per_op) and to completion
//            (us_per_op); the floor: as many cudaMemsetAsync of 4 bytes on one stream.
// Output: one JSON line per measurement ({"bench": "device" | "matmul" | "conv2d" | "launch",
// ...}; "ratio" is the raw time over Trainyard's, Trainyard's share of the raw speed; a side
// that fails has null times and an "error"), then a table of them.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cmath>  // before bench_util.h, which uses std::floor
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/op.h"
#include "trainyard/ops.h"
#include "trainyard/tensor.h"

namespace {

using trainyard::Backend;
using trainyard::DType;
using trainyard::Shape;
using trainyard::Tensor;
using trainyard::bench::json_number;
using trainyard::bench::now_seconds;
using trainyard::bench::percentile;
using trainyard::bench::SplitMix64;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Args {
  std::string backend = "cuda";
  bool small = false;
  int reps = 7;
  int inner = 5;
  int warmup = 3;
  int launches = 10000;
  std::string sections = "matmul,conv,launch";
};

[[noreturn]] void usage(const std::string& message) {
  std::cerr << "bench_cuda_ops: " << message
            << "\nusage: bench_cuda_ops [--backend cuda|cpu] [--small 0|1] [--reps N] [--inner N] "
               "[--warmup N] [--launches N] [--sections matmul,conv,launch]\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    try {
      if (flag == "--backend") {
        a.backend = value;
      } else if (flag == "--small") {
        a.small = std::stoi(value) != 0;
      } else if (flag == "--reps") {
        a.reps = std::stoi(value);
      } else if (flag == "--inner") {
        a.inner = std::stoi(value);
      } else if (flag == "--warmup") {
        a.warmup = std::stoi(value);
      } else if (flag == "--launches") {
        a.launches = std::stoi(value);
      } else if (flag == "--sections") {
        a.sections = value;
      } else {
        usage("unknown flag " + flag);
      }
    } catch (const std::logic_error&) {
      usage("bad value '" + value + "' for " + flag);
    }
  }
  if (a.backend != "cuda" && a.backend != "cpu") usage("--backend is cuda or cpu");
  if (a.reps < 1 || a.inner < 1 || a.warmup < 0 || a.launches < 1) usage("bad counts");
  return a;
}

bool section(const Args& a, const std::string& name) {
  return ("," + a.sections + ",").find("," + name + ",") != std::string::npos;
}

// ---------------------------------------------------------------------------------------------
// Output.

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A number, or null for NaN (a side not measured).
std::string num(double v) { return std::isnan(v) ? "null" : json_number(v); }

// One JSON line, built field by field.
class Line {
 public:
  explicit Line(const std::string& bench) { add_raw("bench", json_string(bench)); }
  Line& add(const std::string& key, double v) { return add_raw(key, num(v)); }
  Line& add(const std::string& key, const std::string& v) { return add_raw(key, json_string(v)); }
  Line& add(const std::string& key, const char* v) { return add_raw(key, json_string(v)); }
  Line& add_raw(const std::string& key, const std::string& json) {
    text_ += (text_.empty() ? "{" : ", ") + json_string(key) + ": " + json;
    return *this;
  }
  void print() const {
    std::printf("%s}\n", text_.c_str());
    std::fflush(stdout);
  }

 private:
  std::string text_;
};

std::vector<std::string> g_table;  // the final table's rows

std::string fixed(double v, int digits) {
  if (std::isnan(v)) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}

// ---------------------------------------------------------------------------------------------
// The raw side: a stream, cuBLAS and cuDNN handles, device buffers.

void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(what + ": " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
  }
}

void check_cublas(cublasStatus_t status, const std::string& what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(what + ": cuBLAS " + cublasGetStatusName(status));
  }
}

void check_cudnn(cudnnStatus_t status, const std::string& what) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error(what + ": cuDNN " + cudnnGetErrorString(status));
  }
}

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) check_cuda(cudaMalloc(&data_, bytes), "cudaMalloc");
  }
  // A copy of `host` on the device.
  explicit DeviceBuffer(const std::vector<float>& host) : DeviceBuffer(host.size() * 4) {
    check_cuda(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) {
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  float* f() const { return static_cast<float*>(data_); }
  void* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  std::vector<float> to_host() const {
    std::vector<float> out(bytes_ / 4);
    check_cuda(cudaMemcpy(out.data(), data_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return out;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

struct Raw {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;

  Raw() {
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cublas(cublasCreate(&cublas), "cublasCreate");
    check_cublas(cublasSetStream(cublas, stream), "cublasSetStream");
    check_cublas(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    check_cudnn(cudnnCreate(&cudnn), "cudnnCreate");
    check_cudnn(cudnnSetStream(cudnn, stream), "cudnnSetStream");
  }
  ~Raw() {
    cudaStreamSynchronize(stream);
    cudnnDestroy(cudnn);
    cublasDestroy(cublas);
    cudaStreamDestroy(stream);
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  void sync() const { check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
};

// ---------------------------------------------------------------------------------------------
// Timing.

// One contender: `launch` queues one call, `sync` waits for every call queued.
struct Side {
  explicit Side(std::string n, std::function<void()> l = {}, std::function<void()> s = {})
      : name(std::move(n)), launch(std::move(l)), sync(std::move(s)) {}
  std::string name;
  std::function<void()> launch;
  std::function<void()> sync;
  double seconds = kNaN;  // median seconds per call; NaN when it failed
  std::string error;
};

// Runs each side once (a side that throws keeps its error and is left out), then `warmup`
// calls of each, then `reps` rounds of `inner` calls of every side in turn, each ended by its
// sync: the median seconds per call of each side.
void time_sides(const Args& a, std::vector<Side*> sides) {
  std::vector<Side*> ok;
  for (Side* s : sides) {
    try {
      s->launch();
      s->sync();
      ok.push_back(s);
    } catch (const std::exception& e) {
      s->error = e.what();
    }
  }
  std::vector<std::vector<double>> times(ok.size());
  for (std::size_t i = 0; i < ok.size(); ++i) {
    try {
      for (int w = 0; w < a.warmup; ++w) ok[i]->launch();
      ok[i]->sync();
    } catch (const std::exception& e) {
      ok[i]->error = e.what();
    }
  }
  for (int r = 0; r < a.reps; ++r) {
    for (std::size_t i = 0; i < ok.size(); ++i) {
      if (!ok[i]->error.empty()) continue;
      try {
        const double start = now_seconds();
        for (int c = 0; c < a.inner; ++c) ok[i]->launch();
        ok[i]->sync();
        times[i].push_back((now_seconds() - start) / a.inner);
      } catch (const std::exception& e) {
        ok[i]->error = e.what();
      }
    }
  }
  for (std::size_t i = 0; i < ok.size(); ++i) {
    if (ok[i]->error.empty()) ok[i]->seconds = percentile(times[i], 0.5);
  }
}

// max |a - b| / max |b|; NaN when either is missing or their sizes differ.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || a.size() != b.size()) return kNaN;
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

std::vector<float> uniform(std::size_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

void add_error(Line& line, const std::string& key, const Side& side) {
  if (!side.error.empty()) line.add(key, side.error);
}

// ---------------------------------------------------------------------------------------------
// matmul

void bench_matmul(const Args& a, Backend& backend, Raw* raw) {
  struct Mnk {
    int64_t m, k, n;
  };
  const std::vector<Mnk> shapes = a.small ? std::vector<Mnk>{{256, 256, 256}, {128, 512, 96}}
                                          : std::vector<Mnk>{{4096, 4096, 4096},
                                                             {1024, 1024, 1024},
                                                             {8192, 1024, 3862},
                                                             {1024, 1152, 3862},
                                                             {1152, 1024, 3862}};
  g_table.push_back("");
  g_table.push_back(
      "matmul f32 [M, K] x [K, N]        Trainyard TFLOP/s   cuBLAS TFLOP/s   ratio"
      "   cuBLAS TF32 TFLOP/s   max rel diff");
  for (const Mnk& s : shapes) {
    const std::vector<float> ha = uniform(static_cast<std::size_t>(s.m * s.k), 11);
    const std::vector<float> hb = uniform(static_cast<std::size_t>(s.k * s.n), 12);
    const double flop =
        2.0 * static_cast<double>(s.m) * static_cast<double>(s.k) * static_cast<double>(s.n);
    Tensor ta = Tensor::from_vector(backend, Shape{s.m, s.k}, ha);
    Tensor tb = Tensor::from_vector(backend, Shape{s.k, s.n}, hb);
    Tensor last;
    Side ty(
        "trainyard", [&] { last = trainyard::ops::matmul(ta, tb); },
        [&] { backend.synchronize(); });
    Side cublas("cublas"), tf32("cublas_tf32");
    DeviceBuffer da, db, dc;
    std::vector<Side*> sides = {&ty};
    if (raw != nullptr) {
      da = DeviceBuffer(ha);
      db = DeviceBuffer(hb);
      dc = DeviceBuffer(static_cast<std::size_t>(s.m * s.n) * 4);
      // Row-major C = A B is column-major C^T = B^T A^T.
      auto sgemm = [&, raw](cublasMath_t math) {
        check_cublas(cublasSetMathMode(raw->cublas, math), "cublasSetMathMode");
        const float one = 1.0f, zero = 0.0f;
        check_cublas(cublasSgemm(raw->cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(s.n),
                                 static_cast<int>(s.m), static_cast<int>(s.k), &one, db.f(),
                                 static_cast<int>(s.n), da.f(), static_cast<int>(s.k), &zero,
                                 dc.f(), static_cast<int>(s.n)),
                     "cublasSgemm");
      };
      cublas.launch = [sgemm] { sgemm(CUBLAS_DEFAULT_MATH); };
      tf32.launch = [sgemm] { sgemm(CUBLAS_TF32_TENSOR_OP_MATH); };
      cublas.sync = tf32.sync = [raw] { raw->sync(); };
      sides.push_back(&cublas);
      sides.push_back(&tf32);
    }
    time_sides(a, sides);
    double diff = kNaN;
    if (raw != nullptr && cublas.error.empty() && ty.error.empty()) {
      try {
        cublas.launch();
        raw->sync();
        diff = max_rel_diff(last.to_vector<float>(), dc.to_host());
      } catch (const std::exception& e) {
        cublas.error = e.what();
      }
    }
    const double ratio = cublas.seconds / ty.seconds;
    Line line("matmul");
    line.add("backend", a.backend)
        .add("m", static_cast<double>(s.m))
        .add("k", static_cast<double>(s.k))
        .add("n", static_cast<double>(s.n))
        .add("trainyard_ms", ty.seconds * 1e3)
        .add("trainyard_tflops", flop / ty.seconds * 1e-12)
        .add("cublas_ms", cublas.seconds * 1e3)
        .add("cublas_tflops", flop / cublas.seconds * 1e-12)
        .add("ratio", ratio)
        .add("cublas_tf32_ms", tf32.seconds * 1e3)
        .add("cublas_tf32_tflops", flop / tf32.seconds * 1e-12)
        .add("max_rel_diff", diff);
    add_error(line, "trainyard_error", ty);
    add_error(line, "cublas_error", cublas);
    add_error(line, "cublas_tf32_error", tf32);
    line.print();
    char row[256];
    std::snprintf(row, sizeof row, "  %5lld x %5lld x %5lld            %16s %16s %7s %21s %14s",
                  static_cast<long long>(s.m), static_cast<long long>(s.k),
                  static_cast<long long>(s.n), fixed(flop / ty.seconds * 1e-12, 2).c_str(),
                  fixed(flop / cublas.seconds * 1e-12, 2).c_str(), fixed(ratio, 3).c_str(),
                  fixed(flop / tf32.seconds * 1e-12, 2).c_str(),
                  std::isnan(diff) ? "-" : json_number(diff).c_str());
    g_table.push_back(row);
    if (!ty.error.empty()) g_table.push_back("    trainyard: " + ty.error);
  }
}

// ---------------------------------------------------------------------------------------------
// conv2d

struct ConvShape {
  std::string name;
  int64_t n, h, w, c, k, o, stride, pad;
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
  double flops() const {
    return 2.0 * static_cast<double>(n * oh() * ow() * o) * static_cast<double>(k * k * c);
  }
};

enum class Pass { kForward, kBackwardData, kBackwardFilter };
const char* pass_name(Pass p) {
  return p == Pass::kForward ? "fwd" : p == Pass::kBackwardData ? "bwd_data" : "bwd_filter";
}

// cuDNN's descriptors of one convolution, NHWC, filter KRSC; `conv` in CUDNN_FMA_MATH, `conv_tf32`
// in CUDNN_DEFAULT_MATH.
struct CudnnConv {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr, conv_tf32 = nullptr;

  explicit CudnnConv(const ConvShape& s) {
    auto i = [](int64_t v) { return static_cast<int>(v); };
    check_cudnn(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(s.n), i(s.c),
                                           i(s.h), i(s.w)),
                "cudnnSetTensor4dDescriptor x");
    check_cudnn(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(s.n), i(s.o),
                                           i(s.oh()), i(s.ow())),
                "cudnnSetTensor4dDescriptor y");
    check_cudnn(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, i(s.o), i(s.c),
                                           i(s.k), i(s.k)),
                "cudnnSetFilter4dDescriptor");
    for (auto [d, math] : {std::pair{&conv, CUDNN_FMA_MATH}, {&conv_tf32, CUDNN_DEFAULT_MATH}}) {
      check_cudnn(cudnnCreateConvolutionDescriptor(d), "cudnnCreateConvolutionDescriptor");
      check_cudnn(cudnnSetConvolution2dDescriptor(*d, i(s.pad), i(s.pad), i(s.stride), i(s.stride),
                                                  1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                  "cudnnSetConvolution2dDescriptor");
      check_cudnn(cudnnSetConvolutionMathType(*d, math), "cudnnSetConvolutionMathType");
    }
  }
  ~CudnnConv() {
    cudnnDestroyConvolutionDescriptor(conv_tf32);
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;
};

// One cuDNN algorithm of a pass: its id, whether cuDNN calls it deterministic, its workspace.
struct Algo {
  int algo = -1;
  bool deterministic = false;
  std::size_t workspace = 0;
  double seconds = kNaN;  // quick median of single calls, for the choice
};

// The raw buffers of one convolution: x, w (KRSC), dy, and the outputs y, dx, dw.
struct ConvBuffers {
  DeviceBuffer x, w, dy, y, dx, dw, workspace;
};

// Queues `algo` of `pass` in descriptor `conv`; returns cuDNN's status.
cudnnStatus_t cudnn_pass(Raw& raw, CudnnConv& d, cudnnConvolutionDescriptor_t conv, Pass pass,
                         int algo, ConvBuffers& b, std::size_t workspace) {
  const float one = 1.0f, zero = 0.0f;
  switch (pass) {
    case Pass::kForward:
      return cudnnConvolutionForward(raw.cudnn, &one, d.x, b.x.get(), d.w, b.w.get(), conv,
                                     static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                     b.workspace.get(), workspace, &zero, d.y, b.y.get());
    case Pass::kBackwardData:
      return cudnnConvolutionBackwardData(raw.cudnn, &one, d.w, b.w.get(), d.y, b.dy.get(), conv,
                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
                                          b.workspace.get(), workspace, &zero, d.x, b.dx.get());
    case Pass::kBackwardFilter:
      return cudnnConvolutionBackwardFilter(raw.cudnn, &one, d.x, b.x.get(), d.y, b.dy.get(), conv,
                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
                                            b.workspace.get(), workspace, &zero, d.w, b.dw.get());
  }
  return CUDNN_STATUS_BAD_PARAM;
}

// The algorithms cudnnFind*Algorithm lists for `pass` in `conv` (successful ones), each with
// its workspace there.
std::vector<Algo> find_algos(Raw& raw, CudnnConv& d, cudnnConvolutionDescriptor_t conv, Pass pass) {
  std::vector<Algo> out;
  auto keep = [&](auto& results, int returned, auto workspace) {
    for (int i = 0; i < returned; ++i) {
      const auto& r = results[static_cast<std::size_t>(i)];
      if (r.status != CUDNN_STATUS_SUCCESS) continue;
      const int id = static_cast<int>(r.algo);
      if (std::any_of(out.begin(), out.end(), [id](const Algo& x) { return x.algo == id; })) {
        continue;
      }
      Algo algo;
      algo.algo = id;
      algo.deterministic = r.determinism == CUDNN_DETERMINISTIC;
      if (workspace(r.algo, &algo.workspace) != CUDNN_STATUS_SUCCESS) continue;
      out.push_back(algo);
    }
  };
  int returned = 0;
  switch (pass) {
    case Pass::kForward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> r{};
      check_cudnn(
          cudnnFindConvolutionForwardAlgorithm(raw.cudnn, d.x, d.w, conv, d.y,
                                               static_cast<int>(r.size()), &returned, r.data()),
          "cudnnFindConvolutionForwardAlgorithm");
      keep(r, returned, [&](cudnnConvolutionFwdAlgo_t algo, std::size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(raw.cudnn, d.x, d.w, conv, d.y, algo, bytes);
      });
      break;
    }
    case Pass::kBackwardData: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> r{};
      check_cudnn(
          cudnnFindConvolutionBackwardDataAlgorithm(
              raw.cudnn, d.w, d.y, conv, d.x, static_cast<int>(r.size()), &returned, r.data()),
          "cudnnFindConvolutionBackwardDataAlgorithm");
      keep(r, returned, [&](cudnnConvolutionBwdDataAlgo_t algo, std::size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(raw.cudnn, d.w, d.y, conv, d.x, algo,
                                                            bytes);
      });
      break;
    }
    case Pass::kBackwardFilter: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> r{};
      check_cudnn(
          cudnnFindConvolutionBackwardFilterAlgorithm(
              raw.cudnn, d.x, d.y, conv, d.w, static_cast<int>(r.size()), &returned, r.data()),
          "cudnnFindConvolutionBackwardFilterAlgorithm");
      keep(r, returned, [&](cudnnConvolutionBwdFilterAlgo_t algo, std::size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(raw.cudnn, d.x, d.y, conv, d.w, algo,
                                                              bytes);
      });
      break;
    }
  }
  return out;
}

// Times every listed algorithm (median of 3 single calls after one untimed) with its own
// workspace (up to 4 GiB; one that cannot be allocated or run is skipped); returns the fastest,
// and the fastest deterministic one, in `best` and `best_deterministic` (algo -1 when none ran).
void choose_algos(Raw& raw, CudnnConv& d, cudnnConvolutionDescriptor_t conv, Pass pass,
                  ConvBuffers& b, Algo* best, Algo* best_deterministic) {
  constexpr std::size_t kMaxWorkspace = std::size_t{4} << 30;
  for (Algo algo : find_algos(raw, d, conv, pass)) {
    if (algo.workspace > kMaxWorkspace) continue;
    try {
      if (b.workspace.bytes() < algo.workspace) {
        b.workspace = DeviceBuffer();  // the old one first
        b.workspace = DeviceBuffer(algo.workspace);
      }
      if (cudnn_pass(raw, d, conv, pass, algo.algo, b, algo.workspace) != CUDNN_STATUS_SUCCESS) {
        continue;
      }
      raw.sync();
      std::vector<double> t;
      for (int r = 0; r < 3; ++r) {
        const double start = now_seconds();
        check_cudnn(cudnn_pass(raw, d, conv, pass, algo.algo, b, algo.workspace), "cudnn pass");
        raw.sync();
        t.push_back(now_seconds() - start);
      }
      algo.seconds = percentile(t, 0.5);
    } catch (const std::exception&) {
      cudaGetLastError();  // an allocation failure is not sticky
      continue;
    }
    if (best->algo < 0 || algo.seconds < best->seconds) *best = algo;
    if (algo.deterministic &&
        (best_deterministic->algo < 0 || algo.seconds < best_deterministic->seconds)) {
      *best_deterministic = algo;
    }
  }
}

trainyard::KernelFn find_kernel(Backend& backend, const char* op) {
  for (const trainyard::KernelRegistration& k : backend.kernels()) {
    if (std::string(op) == k.op) return k.fn;
  }
  return nullptr;
}

void bench_conv(const Args& a, Backend& backend, Raw* raw) {
  const std::vector<ConvShape> shapes =
      a.small ? std::vector<ConvShape>{{"14x14x16->16 3x3", 2, 14, 14, 16, 3, 16, 1, 1},
                                       {"7x7x32->32 3x3 s2", 2, 7, 7, 32, 3, 32, 2, 1},
                                       {"14x14x16->64 1x1", 2, 14, 14, 16, 1, 64, 1, 0}}
              : std::vector<ConvShape>{{"56x56x64->64 3x3", 64, 56, 56, 64, 3, 64, 1, 1},
                                       {"28x28x128->128 3x3", 64, 28, 28, 128, 3, 128, 1, 1},
                                       {"14x14x256->256 3x3", 64, 14, 14, 256, 3, 256, 1, 1},
                                       {"56x56x64->256 1x1", 64, 56, 56, 64, 1, 256, 1, 0}};
  g_table.push_back("");
  g_table.push_back(
      "conv2d f32 NHWC            pass         Trainyard ms   cuDNN ms (algo)   ratio"
      "   cuDNN determ. ms (algo)   ratio   cuDNN TF32 ms   max rel diff");
  for (const ConvShape& s : shapes) {
    const Shape x_shape{s.n, s.h, s.w, s.c}, y_shape{s.n, s.oh(), s.ow(), s.o};
    const Shape f_shape{s.k, s.k, s.c, s.o};
    const std::vector<float> hx = uniform(static_cast<std::size_t>(x_shape.num_elements()), 21);
    const std::vector<float> hf = uniform(static_cast<std::size_t>(f_shape.num_elements()), 22);
    const std::vector<float> hdy = uniform(static_cast<std::size_t>(y_shape.num_elements()), 23);
    Tensor x = Tensor::from_vector(backend, x_shape, hx);
    Tensor f = Tensor::from_vector(backend, f_shape, hf);
    Tensor dy = Tensor::from_vector(backend, y_shape, hdy);
    trainyard::Conv2DAttrs attrs;
    attrs.stride_h = attrs.stride_w = s.stride;
    attrs.pad_top = attrs.pad_bottom = attrs.pad_left = attrs.pad_right = s.pad;
    attrs.input_shape = {s.n, s.h, s.w, s.c};
    attrs.filter_shape = {s.k, s.k, s.c, s.o};

    std::unique_ptr<CudnnConv> desc;
    ConvBuffers b;
    if (raw != nullptr) {
      desc = std::make_unique<CudnnConv>(s);
      // The filter HWIO [k, k, c, o] as KRSC [o, k, k, c].
      std::vector<float> krsc(hf.size());
      for (int64_t r = 0; r < s.k * s.k; ++r) {
        for (int64_t ci = 0; ci < s.c; ++ci) {
          for (int64_t oi = 0; oi < s.o; ++oi) {
            krsc[static_cast<std::size_t>((oi * s.k * s.k + r) * s.c + ci)] =
                hf[static_cast<std::size_t>((r * s.c + ci) * s.o + oi)];
          }
        }
      }
      b.x = DeviceBuffer(hx);
      b.w = DeviceBuffer(krsc);
      b.dy = DeviceBuffer(hdy);
      b.y = DeviceBuffer(hdy.size() * 4);
      b.dx = DeviceBuffer(hx.size() * 4);
      b.dw = DeviceBuffer(hf.size() * 4);
    }

    for (Pass pass : {Pass::kForward, Pass::kBackwardData, Pass::kBackwardFilter}) {
      Tensor last;
      Side ty("trainyard", {}, [&] { backend.synchronize(); });
      if (pass == Pass::kForward) {
        ty.launch = [&] {
          trainyard::NoGradScope no_grad;
          last = trainyard::ops::conv2d(
              x, f, {s.stride, s.stride},
              trainyard::Padding2D::explicit_pads(s.pad, s.pad, s.pad, s.pad));
        };
      } else {
        const char* op =
            pass == Pass::kBackwardData ? "conv2d_backward_input" : "conv2d_backward_filter";
        trainyard::KernelFn fn = find_kernel(backend, op);
        const std::array<Tensor, 2> inputs = pass == Pass::kBackwardData
                                                 ? std::array<Tensor, 2>{dy, f}
                                                 : std::array<Tensor, 2>{x, dy};
        const Shape out_shape = pass == Pass::kBackwardData ? x_shape : f_shape;
        ty.launch = [&backend, &last, &attrs, fn, op, inputs, out_shape] {
          if (fn == nullptr) {
            throw trainyard::Unimplemented(std::string("no kernel for ") + op + " on " +
                                           backend.device_name());
          }
          last = Tensor::empty(backend, out_shape, DType::kF32);  // as the core's gradient rule
          fn(backend, trainyard::KernelArgs{inputs, std::span<Tensor>(&last, 1), &attrs,
                                            &backend.current_stream(), op, sizeof(attrs)});
        };
      }
      Side cudnn("cudnn"), det("cudnn_deterministic"), tf32("cudnn_tf32");
      Algo best, best_det, best_tf32, ignored;
      std::vector<Side*> sides = {&ty};
      std::string find_error;
      if (raw != nullptr) {
        try {
          choose_algos(*raw, *desc, desc->conv, pass, b, &best, &best_det);
          choose_algos(*raw, *desc, desc->conv_tf32, pass, b, &best_tf32, &ignored);
        } catch (const std::exception& e) {
          find_error = e.what();
        }
        auto side = [&](Side& target, cudnnConvolutionDescriptor_t conv, const Algo& algo) {
          if (algo.algo < 0) {
            target.error = find_error.empty() ? "no algorithm ran" : find_error;
            return;
          }
          target.launch = [&, conv, algo] {
            check_cudnn(cudnn_pass(*raw, *desc, conv, pass, algo.algo, b, algo.workspace),
                        std::string("cuDNN ") + pass_name(pass));
          };
          target.sync = [raw] { raw->sync(); };
          sides.push_back(&target);
        };
        side(cudnn, desc->conv, best);
        // The deterministic one only when it is another algorithm: else the same numbers.
        if (best_det.algo != best.algo) {
          side(det, desc->conv, best_det);
        }
        side(tf32, desc->conv_tf32, best_tf32);
      }
      time_sides(a, sides);
      if (raw != nullptr && best_det.algo == best.algo && best.algo >= 0) {
        det.seconds = cudnn.seconds;
        det.error = cudnn.error;
      }

      double diff = kNaN;
      if (raw != nullptr && ty.error.empty() && cudnn.error.empty() && best.algo >= 0) {
        try {
          cudnn.launch();  // the f32 result, last in its buffer
          raw->sync();
          const std::vector<float> got = last.to_vector<float>();
          if (pass == Pass::kForward) {
            diff = max_rel_diff(got, b.y.to_host());
          } else if (pass == Pass::kBackwardData) {
            diff = max_rel_diff(got, b.dx.to_host());
          } else {  // Trainyard's HWIO against cuDNN's KRSC
            const std::vector<float> krsc = b.dw.to_host();
            std::vector<float> hwio(krsc.size());
            for (int64_t r = 0; r < s.k * s.k; ++r) {
              for (int64_t ci = 0; ci < s.c; ++ci) {
                for (int64_t oi = 0; oi < s.o; ++oi) {
                  hwio[static_cast<std::size_t>((r * s.c + ci) * s.o + oi)] =
                      krsc[static_cast<std::size_t>((oi * s.k * s.k + r) * s.c + ci)];
                }
              }
            }
            diff = max_rel_diff(got, hwio);
          }
        } catch (const std::exception& e) {
          cudnn.error = e.what();
        }
      }

      const double flop = s.flops();
      const double ratio = cudnn.seconds / ty.seconds, ratio_det = det.seconds / ty.seconds;
      Line line("conv2d");
      line.add("backend", a.backend)
          .add("shape", s.name)
          .add("pass", pass_name(pass))
          .add("n", static_cast<double>(s.n))
          .add("h", static_cast<double>(s.h))
          .add("w", static_cast<double>(s.w))
          .add("c", static_cast<double>(s.c))
          .add("kernel", static_cast<double>(s.k))
          .add("o", static_cast<double>(s.o))
          .add("stride", static_cast<double>(s.stride))
          .add("pad", static_cast<double>(s.pad))
          .add("gflop", flop * 1e-9)
          .add("trainyard_ms", ty.seconds * 1e3)
          .add("trainyard_tflops", flop / ty.seconds * 1e-12)
          .add("cudnn_ms", cudnn.seconds * 1e3)
          .add("cudnn_algo", best.algo < 0 ? kNaN : best.algo)
          .add("cudnn_algo_deterministic", best.algo < 0        ? kNaN
                                           : best.deterministic ? 1.0
                                                                : 0.0)
          .add("cudnn_workspace_mb",
               best.algo < 0 ? kNaN : static_cast<double>(best.workspace) / 1048576.0)
          .add("ratio", ratio)
          .add("cudnn_deterministic_ms", det.seconds * 1e3)
          .add("cudnn_deterministic_algo", best_det.algo < 0 ? kNaN : best_det.algo)
          .add("ratio_deterministic", ratio_det)
          .add("cudnn_tf32_ms", tf32.seconds * 1e3)
          .add("cudnn_tf32_algo", best_tf32.algo < 0 ? kNaN : best_tf32.algo)
          .add("max_rel_diff", diff);
      add_error(line, "trainyard_error", ty);
      add_error(line, "cudnn_error", cudnn);
      add_error(line, "cudnn_deterministic_error", det);
      add_error(line, "cudnn_tf32_error", tf32);
      line.print();
      auto algo_text = [](const Algo& x) {
        return x.algo < 0 ? std::string("") : " (" + std::to_string(x.algo) + ")";
      };
      char row[320];
      std::snprintf(
          row, sizeof row, "  %-24s %-10s %14s %17s %7s %25s %7s %15s %14s", s.name.c_str(),
          pass_name(pass), fixed(ty.seconds * 1e3, 3).c_str(),
          (fixed(cudnn.seconds * 1e3, 3) + algo_text(best)).c_str(), fixed(ratio, 3).c_str(),
          (fixed(det.seconds * 1e3, 3) + algo_text(best_det)).c_str(), fixed(ratio_det, 3).c_str(),
          fixed(tf32.seconds * 1e3, 3).c_str(), std::isnan(diff) ? "-" : json_number(diff).c_str());
      g_table.push_back(row);
      if (!ty.error.empty()) g_table.push_back("    trainyard: " + ty.error);
      if (!cudnn.error.empty()) g_table.push_back("    cudnn: " + cudnn.error);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Launch overhead.

void bench_launch(const Args& a, Backend& backend, Raw* raw) {
  g_table.push_back("");
  g_table.push_back("per-op cost, " + std::to_string(a.launches) +
                    " calls then one synchronisation    host us/op   us/op to completion");
  struct Result {
    double host_us = kNaN, us = kNaN;
    std::string error;
  };
  // Median over 3 rounds (after one untimed) of the host's time per call up to the last call
  // and up to the end of `sync`.
  auto measure = [&](const std::function<void()>& call, const std::function<void()>& sync) {
    Result out;
    try {
      std::vector<double> host, total;
      for (int round = 0; round < 4; ++round) {
        const double start = now_seconds();
        for (int i = 0; i < a.launches; ++i) call();
        const double queued = now_seconds();
        sync();
        const double done = now_seconds();
        if (round == 0) continue;
        host.push_back((queued - start) / a.launches * 1e6);
        total.push_back((done - start) / a.launches * 1e6);
      }
      out.host_us = percentile(host, 0.5);
      out.us = percentile(total, 0.5);
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    return out;
  };
  auto report = [&](const std::string& what, const Result& r) {
    Line line("launch");
    line.add("backend", a.backend)
        .add("what", what)
        .add("ops", static_cast<double>(a.launches))
        .add("host_us_per_op", r.host_us)
        .add("us_per_op", r.us);
    if (!r.error.empty()) line.add("error", r.error);
    line.print();
    char row[256];
    std::snprintf(row, sizeof row, "  %-52s %10s %21s", what.c_str(), fixed(r.host_us, 2).c_str(),
                  fixed(r.us, 2).c_str());
    g_table.push_back(row);
    if (!r.error.empty()) g_table.push_back("    " + r.error);
  };

  {
    const Tensor x = Tensor::from_vector(backend, Shape{1}, std::vector<float>{1.0f});
    const Tensor y = Tensor::from_vector(backend, Shape{1}, std::vector<float>{2.0f});
    trainyard::NoGradScope no_grad;
    report("trainyard ops::add, 1 element (result dropped)",
           measure([&] { Tensor z = trainyard::ops::add(x, y); }, [&] { backend.synchronize(); }));
    Tensor z = x;
    report("trainyard ops::add, 1 element, chained (z = z + y)",
           measure([&] { z = trainyard::ops::add(z, y); }, [&] { backend.synchronize(); }));
  }
  if (raw != nullptr) {
    DeviceBuffer d(4);
    report("raw cudaMemsetAsync, 4 bytes, one stream (the floor)",
           measure([&] { check_cuda(cudaMemsetAsync(d.get(), 0, 4, raw->stream), "memset"); },
                   [&] { raw->sync(); }));
  }
}

// ---------------------------------------------------------------------------------------------

void print_device(const Args& a, Backend& backend, Raw* raw) {
  Line line("device");
  line.add("backend", a.backend).add("device_name", backend.device_name());
  if (raw != nullptr) {
    int device = 0, runtime = 0, driver = 0, cublas = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    cublasGetVersion(raw->cublas, &cublas);
    line.add("gpu", prop.name)
        .add("sm_count", static_cast<double>(prop.multiProcessorCount))
        .add("compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor))
        .add("memory_gb", static_cast<double>(prop.totalGlobalMem) / 1e9)
        .add("cuda_runtime", static_cast<double>(runtime))
        .add("cuda_driver", static_cast<double>(driver))
        .add("cublas", static_cast<double>(cublas))
        .add("cudnn", static_cast<double>(cudnnGetVersion()));
    g_table.push_back(std::string("device: ") + prop.name + ", " +
                      std::to_string(prop.multiProcessorCount) + " SMs; CUDA runtime " +
                      std::to_string(runtime) + ", driver " + std::to_string(driver) + ", cuBLAS " +
                      std::to_string(cublas) + ", cuDNN " + std::to_string(cudnnGetVersion()));
  } else {
    g_table.push_back("device: " + backend.device_name() + " (no raw side)");
  }
  line.print();
}

int run(const Args& a) {
  trainyard::PluginRegistry::Settings settings;
  settings.use_environment = false;
  trainyard::PluginRegistry registry(settings);
  std::shared_ptr<Backend> backend =
      registry.create<Backend>(trainyard::ClassKind::kBackend, a.backend);
  try {
    Tensor probe = Tensor::empty(*backend, Shape{1}, DType::kF32);
  } catch (const trainyard::Unimplemented& e) {
    std::printf("bench_cuda_ops: no usable CUDA device, nothing measured (%s)\n", e.what());
    return 0;
  }
  std::unique_ptr<Raw> raw;
  if (a.backend == "cuda") {
    try {
      raw = std::make_unique<Raw>();
    } catch (const std::exception& e) {  // the Trainyard side still runs
      Line("raw").add("error", e.what()).print();
      g_table.push_back(std::string("raw side: ") + e.what());
    }
  }

  print_device(a, *backend, raw.get());
  // A section that fails is reported and the next one runs.
  const std::pair<const char*, void (*)(const Args&, Backend&, Raw*)> sections[] = {
      {"matmul", bench_matmul}, {"conv", bench_conv}, {"launch", bench_launch}};
  for (const auto& [name, bench] : sections) {
    if (!section(a, name)) continue;
    try {
      bench(a, *backend, raw.get());
    } catch (const std::exception& e) {
      Line(name).add("backend", a.backend).add("error", e.what()).print();
      g_table.push_back(std::string(name) + ": failed: " + e.what());
    }
  }
  std::printf("\n");
  for (const std::string& row : g_table) std::printf("%s\n", row.c_str());
  std::printf(
      "\nratio: the raw library's time over Trainyard's (Trainyard's share of its speed; target "
      ">= 0.9).\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "bench_cuda_ops: " << e.what() << "\n";
    return 1;
  }
}
