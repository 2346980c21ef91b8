// What the benchmarks share: the refusal of oneDNN's reference implementations (every benchmark
// on the cpu backend), and for the training benchmarks (bench_train.cc, bench_frame_train.cc,
// bench_image_train.cc, bench_ssd.cc) a seeded generator whose stream is the same on every
// platform, host tensors for the inputs they write, the clocks, the peak resident memory and the
// JSON number format of their output lines.
#ifndef TRAINYARD_TESTS_BENCH_BENCH_UTIL_H_
#define TRAINYARD_TESTS_BENCH_BENCH_UTIL_H_

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "trainyard/tensor.h"

namespace trainyard::bench {

// Makes the cpu backend refuse oneDNN's reference implementations: TRAINYARD_DNNL_REFUSE_REF=1
// unless the environment already sets it (backends/cpu/dnnl_reference_check.h). A benchmark
// whose matmul, convolution or pooling resolves to "ref:..." then fails with the op and its
// shapes instead of timing the fallback. Call it first thing in main, before any thread starts.
inline void refuse_dnnl_reference_implementations() {
  setenv("TRAINYARD_DNNL_REFUSE_REF", "1", /*overwrite=*/0);
}

// SplitMix64: a small, fast generator whose stream is the same on every platform.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(static_cast<double>(next() >> 40) * 0x1.0p-24);
  }

 private:
  uint64_t state_;
};

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

inline trainyard::Tensor to_tensor(trainyard::Backend& backend, const HostTensor& t) {
  return trainyard::Tensor::from_vector(backend, trainyard::Shape(t.shape), t.values);
}

inline HostTensor to_host_tensor(const trainyard::Tensor& t) {
  return {t.shape().to_vector(), t.to_vector<float>()};
}

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds of every thread of this process so far: unlike the wall clock, not counting the
// time another process holds the cores.
inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Seconds since this process started: field 22 of /proc/self/stat (clock ticks after boot)
// against CLOCK_BOOTTIME. Resolution one clock tick (10 ms); -1 when /proc is unavailable.
inline double seconds_since_process_start() {
  std::ifstream in("/proc/self/stat");
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  const std::size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) {
      timespec boot{};
      clock_gettime(CLOCK_BOOTTIME, &boot);
      const double start = std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
      return static_cast<double>(boot.tv_sec) + static_cast<double>(boot.tv_nsec) * 1e-9 - start;
    }
  }
  return -1;
}

inline double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

inline double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const double rank = p * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

inline std::string json_number(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

}  // namespace trainyard::bench

#endif  // TRAINYARD_TESTS_BENCH_BENCH_UTIL_H_
