// The CUDA kernels of the random ops (core/src/ops/random.cc): the Philox-4x32-10 streams that
// sdk/include/trainyard/random.h specifies, drawn as the CPU backend draws them
// (backends/cpu/kernels_random.cc). Every value depends only on (seed, counter, its index), so
// the launch shape does not matter. The bits of each Philox block and the uniform values are
// exactly the CPU's; normals go through the device's double log, cos and sqrt (within an ulp
// or two of the host's), then are scaled in the output's type as on the CPU.
#include <type_traits>

#include "kernels.cuh"
#include "trainyard/random.h"

namespace trainyard::cuda {
namespace {

struct PhiloxBlock {
  uint32_t lane[4];
};

// random::philox4x32_10: ten rounds on the counter block `block` with the key `seed`.
__device__ PhiloxBlock philox4x32_10(uint64_t seed, uint64_t block) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
  uint32_t c2 = 0u, c3 = 0u;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    const uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// random::uniform_f32 and random::uniform_f64: [0, 1), exact.
__device__ float uniform_f32(uint32_t x) { return static_cast<float>(x >> 8) * 0x1.0p-24f; }

__device__ double uniform_f64(uint32_t low, uint32_t high) {
  const uint64_t u = (static_cast<uint64_t>(high) << 32) | low;
  return static_cast<double>(u >> 11) * 0x1.0p-53;
}

// random::normal_from: Box-Muller on u1 in (0, 1], u2 in [0, 1).
__device__ double normal_from(uint32_t lane_u1, uint32_t lane_u2) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const double u1 = (static_cast<double>(lane_u1) + 1.0) * 0x1.0p-32;
  const double u2 = static_cast<double>(lane_u2) * 0x1.0p-32;
  return sqrt(-2.0 * log(u1)) * cos(kTwoPi * u2);
}

// random::truncated_normal: element i of n; attempt j reads block counter + j * n + i.
__device__ double truncated_normal(uint64_t seed, uint64_t counter, uint64_t n, uint64_t i) {
  double z = 0.0;
  for (int j = 0; j < random::kTruncatedNormalAttempts; ++j) {
    const PhiloxBlock b = philox4x32_10(seed, counter + static_cast<uint64_t>(j) * n + i);
    z = normal_from(b.lane[0], b.lane[1]);
    if (fabs(z) <= 2.0) return z;
    z = normal_from(b.lane[2], b.lane[3]);
    if (fabs(z) <= 2.0) return z;
  }
  return z < 0 ? -2.0 : 2.0;
}

// a + b * c, rounded twice as the CPU's plain C++ is (never fused into one fma).
__device__ float add_mul(float a, float b, float c) { return __fadd_rn(a, __fmul_rn(b, c)); }
__device__ double add_mul(double a, double b, double c) { return __dadd_rn(a, __dmul_rn(b, c)); }

// Uniform values in [low, low + range): thread k draws Philox block counter + k and writes the
// 4 (f32) or 2 (f64) elements it covers.
template <class T>
__global__ void random_uniform_kernel(T* out, int64_t n, int64_t blocks, uint64_t seed,
                                      uint64_t counter, T low, T range) {
  constexpr int64_t kPerBlock = std::is_same_v<T, float> ? 4 : 2;
  TRAINYARD_GRID_LOOP(k, blocks) {
    const PhiloxBlock r = philox4x32_10(seed, counter + static_cast<uint64_t>(k));
    const int64_t first = k * kPerBlock;
    const int64_t count = min(kPerBlock, n - first);
    for (int64_t j = 0; j < count; ++j) {
      T u;
      if constexpr (std::is_same_v<T, float>) {
        u = uniform_f32(r.lane[j]);
      } else {
        u = uniform_f64(r.lane[2 * j], r.lane[2 * j + 1]);
      }
      out[first + j] = add_mul(low, range, u);
    }
  }
}

// mean + stddev * z, one element per thread: z is the Box-Muller normal of block counter + i
// (random_normal) or the truncated normal of element i (truncated_normal).
template <class T, bool kTruncated>
__global__ void random_normal_kernel(T* out, int64_t n, uint64_t seed, uint64_t counter, T mean,
                                     T stddev) {
  TRAINYARD_GRID_LOOP(i, n) {
    const auto index = static_cast<uint64_t>(i);
    double z;
    if constexpr (kTruncated) {
      z = truncated_normal(seed, counter, static_cast<uint64_t>(n), index);
    } else {
      const PhiloxBlock r = philox4x32_10(seed, counter + index);
      z = normal_from(r.lane[0], r.lane[1]);
    }
    out[i] = add_mul(mean, stddev, static_cast<T>(z));
  }
}

void random_uniform(Backend&, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const auto& attrs = args.get_attrs<RandomAttrs>();
  const int64_t n = out.num_elements();
  visit<DTypeSet::kFloat>(args.op, out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (n == 0) return;
    constexpr int64_t kPerBlock = std::is_same_v<T, float> ? 4 : 2;
    const int64_t blocks = (n + kPerBlock - 1) / kPerBlock;
    const T low = static_cast<T>(attrs.a);
    const T range = static_cast<T>(attrs.b) - low;
    random_uniform_kernel<T><<<blocks_for(blocks), kThreads, 0, stream_of(args)>>>(
        data<T>(out), n, blocks, attrs.seed, attrs.counter, low, range);
    check_launch(args.op);
  });
}

template <bool kTruncated>
void random_normal(Backend&, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const auto& attrs = args.get_attrs<RandomAttrs>();
  const int64_t n = out.num_elements();
  visit<DTypeSet::kFloat>(args.op, out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (n == 0) return;
    random_normal_kernel<T, kTruncated><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(out), n, attrs.seed, attrs.counter, static_cast<T>(attrs.a),
        static_cast<T>(attrs.b));
    check_launch(args.op);
  });
}

}  // namespace

void add_random_kernels(std::vector<KernelRegistration>& table) {
  const KernelRegistration kernels[] = {
      cuda_kernel<&random_uniform>("random_uniform"),
      cuda_kernel<&random_normal<false>>("random_normal"),
      cuda_kernel<&random_normal<true>>("truncated_normal"),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cuda
