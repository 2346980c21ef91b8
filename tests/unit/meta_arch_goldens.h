// What the meta-architecture golden tests (ssd_meta_arch_golden_test.cc,
// faster_rcnn_meta_arch_golden_test.cc) share with tests/fixtures/detection/
// make_meta_arch_goldens.py: the variable values and images that script sets in the API's model,
// restated bit for bit (the same integer hash of the name and the element's index, the same
// double arithmetic, one rounding to float32), and a comparison that reports the largest errors.
#ifndef TRAINYARD_TESTS_UNIT_META_ARCH_GOLDENS_H_
#define TRAINYARD_TESTS_UNIT_META_ARCH_GOLDENS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/tensor.h"

namespace trainyard::test {

inline uint64_t fnv1a64(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char b : text) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

// make_meta_arch_goldens.py's unit_values: `count` values in [-1, 1).
inline std::vector<double> unit_values(const std::string& name, int64_t count) {
  const uint64_t seed = fnv1a64(name);
  std::vector<double> out(static_cast<std::size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    uint64_t z = seed + static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    out[static_cast<std::size_t>(k)] =
        static_cast<double>(z >> 11) * std::ldexp(1.0, -53) * 2.0 - 1.0;
  }
  return out;
}

// make_meta_arch_goldens.py's variable_value: the value of the variable `name`, or nothing for a
// variable the script leaves alone.
inline std::optional<std::vector<double>> variable_value(const std::string& name,
                                                         const Shape& shape) {
  int64_t count = 1;
  for (std::size_t i = 0; i < shape.rank(); ++i) count *= shape[i];
  const std::string leaf = name.substr(name.rfind('/') + 1);
  std::vector<double> u = unit_values(name, count);
  auto scaled = [&](double scale, double offset) {
    for (double& v : u) v = v * scale + offset;
    return u;
  };
  // Keras layers name them depthwise_kernel, kernel and bias.
  if (leaf == "depthwise_weights" || leaf == "depthwise_kernel") {
    return scaled(std::sqrt(6.0 / static_cast<double>(shape[0] * shape[1])), 0.0);
  }
  if (leaf == "weights" || leaf == "pointwise_weights" || leaf == "kernel") {
    int64_t fan_in = 1;
    for (std::size_t i = 0; i + 1 < shape.rank(); ++i) fan_in *= shape[i];
    return scaled(std::sqrt(6.0 / static_cast<double>(fan_in)), 0.0);
  }
  if (leaf == "biases" || leaf == "bias") return scaled(0.1, 0.0);
  if (leaf == "gamma") return scaled(0.25, 1.0);
  if (leaf == "beta") return scaled(0.2, 0.0);
  if (leaf == "moving_mean") return scaled(0.2, 0.0);
  if (leaf == "moving_variance") return scaled(0.5, 1.0);
  return std::nullopt;
}

// make_meta_arch_goldens.py's image_values: [batch, height, width, 3] pixels in [0, 255].
inline std::vector<float> image_values(int64_t batch, int64_t height, int64_t width) {
  const int64_t n = batch * height * width * 3;
  const std::vector<double> u = unit_values("images", n);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double smooth =
        (u[static_cast<std::size_t>(i)] + u[static_cast<std::size_t>((i + 1) % n)]) * 0.5;
    out[static_cast<std::size_t>(i)] = static_cast<float>(smooth * 127.5 + 127.5);
  }
  return out;
}

// Expects |got - want| <= tolerance * max(1, |want|) elementwise (absolute below 1, relative
// above) and prints the largest absolute error and the largest relative one among values of at
// least 0.01, so a run states its figures.
inline void expect_close(const std::string& what, const std::vector<double>& got,
                         const std::vector<double>& want, double tolerance = 1e-4) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_abs = 0.0, max_rel = 0.0;
  std::size_t worst = 0;
  double worst_excess = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    const double scale = std::max(1.0, std::abs(want[i]));
    max_abs = std::max(max_abs, err);
    if (std::abs(want[i]) >= 1e-2) max_rel = std::max(max_rel, err / std::abs(want[i]));
    if (err / scale > worst_excess) {
      worst_excess = err / scale;
      worst = i;
    }
  }
  std::printf("  %-90s max abs %.3g, max rel %.3g\n", what.c_str(), max_abs, max_rel);
  EXPECT_LE(worst_excess, tolerance)
      << what << ": element " << worst << " is " << got[worst] << ", the API's " << want[worst]
      << " (tolerance " << tolerance << " x max(1, |value|))";
}

}  // namespace trainyard::test

#endif  // TRAINYARD_TESTS_UNIT_META_ARCH_GOLDENS_H_
