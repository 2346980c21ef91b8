// Latency of a Trainyard export through libtrainyard_infer (trainyard/infer.hpp only), for
// tests/bench/run_infer_latency.sh, which runs ONNX Runtime on the ONNX export of the same model
// beside it. Every input the session declares is filled with a fixed pattern for a batch of
// --batch, one warm-up run, then --repeats timed runs; prints one line:
//   trainyard-infer batch=B threads=T median_ms=M min_ms=N runs=R
// Threads: the CPU backend's, from OMP_NUM_THREADS (the script sets it).
//
// usage: bench_infer_latency EXPORT_DIR [--batch 1] [--repeats 10]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "trainyard/infer.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_infer_latency EXPORT_DIR [--batch 1] [--repeats 10]\n");
    return 2;
  }
  int64_t batch = 1;
  int repeats = 10;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--batch") {
      batch = std::atoll(argv[i + 1]);
    } else if (flag == "--repeats") {
      repeats = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  namespace ti = trainyard::infer;
  try {
    ti::Session session(argv[1]);
    std::vector<std::vector<float>> values;
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<ti::Input> inputs;
    values.reserve(8);
    bytes.reserve(8);
    for (const ti::TensorInfo& info : session.inputs()) {
      std::vector<int64_t> shape = info.shape;
      shape[0] = batch;
      std::size_t n = 1;
      for (int64_t d : shape) n *= static_cast<std::size_t>(d);
      if (info.dtype == TY_INFER_UINT8) {
        bytes.emplace_back(n);
        for (std::size_t i = 0; i < n; ++i) bytes.back()[i] = static_cast<uint8_t>(i * 37 % 251);
        inputs.emplace_back(info.name, shape, bytes.back());
      } else {
        values.emplace_back(n);
        for (std::size_t i = 0; i < n; ++i) values.back()[i] = std::sin(0.001f * float(i));
        inputs.emplace_back(info.name, shape, values.back());
      }
    }
    session.run_all(inputs);  // warm-up
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      session.run_all(inputs);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    std::sort(ms.begin(), ms.end());
    const char* threads = std::getenv("OMP_NUM_THREADS");
    std::printf("trainyard-infer batch=%lld threads=%s median_ms=%.2f min_ms=%.2f runs=%d\n",
                static_cast<long long>(batch), threads ? threads : "default", ms[ms.size() / 2],
                ms.front(), repeats);
  } catch (const ti::Error& e) {
    std::fprintf(stderr, "bench_infer_latency: %s\n", e.what());
    return 1;
  }
  return 0;
}
