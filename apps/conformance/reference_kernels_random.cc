// The reference kernels of the random family: random_uniform, random_normal and
// truncated_normal, drawn element by element from random.h's specification of the Philox
// streams (the counter of element i, the lanes it takes, the f32 and f64 conversions), in double
// precision except where the specification rounds to f32.
#include <cstdint>
#include <string>

#include "reference_kernels.h"
#include "trainyard/error.h"
#include "trainyard/op.h"
#include "trainyard/random.h"

namespace trainyard::conformance::reference {
namespace {

enum class Draw { kUniform, kNormal, kTruncated };

void draw(const KernelArgs& a, Draw kind) {
  const RandomAttrs& r = a.get_attrs<RandomAttrs>();
  const Tensor& out = a.outputs[0];
  const auto n = static_cast<uint64_t>(out.num_elements());
  const bool f32 = out.dtype() == DType::kF32;
  if (!f32 && out.dtype() != DType::kF64) {
    throw Unimplemented(std::string("reference backend: ") + a.op + " of " +
                        dtype_name(out.dtype()));
  }
  Values v(n);
  for (uint64_t i = 0; i < n; ++i) {
    switch (kind) {
      case Draw::kUniform:
        if (f32) {
          const random::Block b = random::philox4x32_10(r.seed, r.counter + i / 4);
          const float u = random::uniform_f32(b[i % 4]);
          const float low = static_cast<float>(r.a), high = static_cast<float>(r.b);
          v[i] = low + (high - low) * u;
        } else {
          const random::Block b = random::philox4x32_10(r.seed, r.counter + i / 2);
          v[i] = r.a + (r.b - r.a) * random::uniform_f64(b[2 * (i % 2)], b[2 * (i % 2) + 1]);
        }
        break;
      case Draw::kNormal:
      case Draw::kTruncated: {
        double z;
        if (kind == Draw::kNormal) {
          const random::Block b = random::philox4x32_10(r.seed, r.counter + i);
          z = random::normal_from(b[0], b[1]);
        } else {
          z = random::truncated_normal(r.seed, r.counter, n, i);
        }
        v[i] = f32 ? static_cast<double>(static_cast<float>(r.a) +
                                         static_cast<float>(r.b) * static_cast<float>(z))
                   : r.a + r.b * z;
        break;
      }
    }
  }
  write(out, v);
}

void k_random_uniform(Backend&, const KernelArgs& a) { draw(a, Draw::kUniform); }
void k_random_normal(Backend&, const KernelArgs& a) { draw(a, Draw::kNormal); }
void k_truncated_normal(Backend&, const KernelArgs& a) { draw(a, Draw::kTruncated); }

constexpr KernelRegistration kRandomKernels[] = {
    {"random_uniform", &k_random_uniform},
    {"random_normal", &k_random_normal},
    {"truncated_normal", &k_truncated_normal},
};

}  // namespace

std::span<const KernelRegistration> random_kernels() { return kRandomKernels; }

}  // namespace trainyard::conformance::reference
