// Random kernels (ops/random.h): Philox draws (random.h). Each element depends only on
// (seed, counter, its index), so the result does not depend on the number of threads.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels_common.h"
#include "trainyard/random.h"

namespace trainyard::cpu {
namespace {

void random_uniform_kernel(Backend&, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const auto& attrs = args.get_attrs<RandomAttrs>();
  const int64_t n = out.num_elements();
  visit<DTypeSet::kFloat>("random_uniform", out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int64_t kPerBlock = std::is_same_v<T, float> ? 4 : 2;
    T* p = data<T>(out);
    const T low = static_cast<T>(attrs.a);
    const T range = static_cast<T>(attrs.b) - low;
    const int64_t blocks = (n + kPerBlock - 1) / kPerBlock;
#pragma omp parallel for if (n > kCostlyThreshold)
    for (int64_t k = 0; k < blocks; ++k) {
      const random::Block r =
          random::philox4x32_10(attrs.seed, attrs.counter + static_cast<uint64_t>(k));
      const int64_t first = k * kPerBlock;
      const int64_t count = std::min(kPerBlock, n - first);
      for (int64_t j = 0; j < count; ++j) {
        T u;
        if constexpr (std::is_same_v<T, float>) {
          u = random::uniform_f32(r[static_cast<std::size_t>(j)]);
        } else {
          u = random::uniform_f64(r[static_cast<std::size_t>(2 * j)],
                                  r[static_cast<std::size_t>(2 * j + 1)]);
        }
        p[first + j] = low + range * u;
      }
    }
  });
}

template <OpLabel kOp>
void random_normal_kernel(Backend&, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const auto& attrs = args.get_attrs<RandomAttrs>();
  const int64_t n = out.num_elements();
  visit<DTypeSet::kFloat>(kOp, out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = data<T>(out);
    const T mean = static_cast<T>(attrs.a);
    const T stddev = static_cast<T>(attrs.b);
    const auto count = static_cast<uint64_t>(n);
#pragma omp parallel for if (n > kCostlyThreshold / 4)
    for (int64_t i = 0; i < n; ++i) {
      const auto index = static_cast<uint64_t>(i);
      double z;
      if constexpr (kOp == "truncated_normal") {
        z = random::truncated_normal(attrs.seed, attrs.counter, count, index);
      } else {
        const random::Block r = random::philox4x32_10(attrs.seed, attrs.counter + index);
        z = random::normal_from(r[0], r[1]);
      }
      p[i] = mean + stddev * static_cast<T>(z);
    }
  });
}

}  // namespace

void add_random_kernels(std::vector<KernelRegistration>& table) {
  const KernelRegistration kernels[] = {
      cpu_kernel<&random_uniform_kernel>("random_uniform"),
      cpu_kernel<&random_normal_kernel<"random_normal">>("random_normal"),
      cpu_kernel<&random_normal_kernel<"truncated_normal">>("truncated_normal"),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cpu
