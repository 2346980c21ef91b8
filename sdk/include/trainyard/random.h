// Counter-based random numbers: Philox-4x32-10 (Salmon et al., SC'11), the generator
// TensorFlow's stateless random ops use. Every backend draws the same numbers for the same
// (seed, counter), so results do not depend on the device or on the number of threads.
//
// Element i of a draw of n elements starting at counter c uses:
//   uniform f32: block c + i / 4, lane i % 4, as (x >> 8) * 2^-24               in [0, 1)
//   uniform f64: block c + i / 2, lanes 2(i % 2) (low) and 2(i % 2) + 1 (high),
//                as (u64 >> 11) * 2^-53                                         in [0, 1)
//   normal:      block c + i; Box-Muller on u1 = (lane0 + 1) * 2^-32, u2 = lane1 * 2^-32
//   truncated normal: attempt j (0..15) uses block c + j * n + i, Box-Muller candidates from
//                lanes (0, 1) then (2, 3); the first within two stddev wins; after 16 attempts
//                the last candidate is clamped to the bound.
// Scaling is done in the output's type: for f32, u and z are converted to float first, then
// low + (high - low) * u and mean + stddev * z are computed in float (so a uniform f32 draw may
// round up to `high` when high - low is not a power of two, as in TensorFlow).
// random_blocks_used() says how far a draw advances the counter.
#ifndef TRAINYARD_RANDOM_H_
#define TRAINYARD_RANDOM_H_

#include <array>
#include <cmath>
#include <cstdint>

#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard::random {

using Block = std::array<uint32_t, 4>;

inline Block philox4x32_10(uint64_t seed, uint64_t block) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  Block c = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u};
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0)};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

inline float uniform_f32(uint32_t x) { return static_cast<float>(x >> 8) * 0x1.0p-24f; }

inline double uniform_f64(uint32_t low, uint32_t high) {
  uint64_t u = (static_cast<uint64_t>(high) << 32) | low;
  return static_cast<double>(u >> 11) * 0x1.0p-53;
}

// Box-Muller on two 32-bit lanes: u1 in (0, 1], u2 in [0, 1).
inline double normal_from(uint32_t lane_u1, uint32_t lane_u2) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  double u1 = (static_cast<double>(lane_u1) + 1.0) * 0x1.0p-32;
  double u2 = static_cast<double>(lane_u2) * 0x1.0p-32;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

inline constexpr int kTruncatedNormalAttempts = 16;

// A standard normal restricted to [-2, 2], for element i of n.
inline double truncated_normal(uint64_t seed, uint64_t counter, uint64_t n, uint64_t i) {
  double z = 0.0;
  for (int j = 0; j < kTruncatedNormalAttempts; ++j) {
    Block b = philox4x32_10(seed, counter + static_cast<uint64_t>(j) * n + i);
    z = normal_from(b[0], b[1]);
    if (std::abs(z) <= 2.0) return z;
    z = normal_from(b[2], b[3]);
    if (std::abs(z) <= 2.0) return z;
  }
  return z < 0 ? -2.0 : 2.0;
}

enum class Distribution { kUniform, kNormal, kTruncatedNormal };

// The Philox blocks a draw of n values takes (random_uniform, random_normal,
// truncated_normal).
inline uint64_t random_blocks_used(Distribution distribution, DType dtype, uint64_t n) {
  switch (distribution) {
    case Distribution::kUniform:
      return dtype == DType::kF64 ? (n + 1) / 2 : (n + 3) / 4;
    case Distribution::kNormal:
      return n;
    case Distribution::kTruncatedNormal:
      return n * kTruncatedNormalAttempts;
  }
  return 0;
}

}  // namespace trainyard::random

#endif  // TRAINYARD_RANDOM_H_
