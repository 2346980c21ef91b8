// The random ops. Counter-based random numbers (Philox-4x32-10, random.h).
#include <algorithm>
#include <array>
#include <numeric>

#include "engine/ops/common.h"
#include "trainyard/random.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_RANDOM_OPS(X) \
  X(kRandomUniform, "random_uniform", 0, 1, RandomAttrs, "() -> uniform in [low, high), Philox-4x32-10 at (seed, counter); f32 or f64") \
  X(kRandomNormal, "random_normal", 0, 1, RandomAttrs, "() -> normal(mean, stddev), Philox-4x32-10 at (seed, counter)") \
  X(kTruncatedNormal, "truncated_normal", 0, 1, RandomAttrs, "() -> normal(mean, stddev) redrawn beyond two stddev")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(random, TRAINYARD_RANDOM_OPS)

namespace ops {
using namespace ops_internal;

// ---- Random ----

namespace {
Tensor random(const OpDef& op, random::Distribution distribution, Backend& backend,
              const Shape& shape, Generator& generator, double a, double b, DType dtype) {
  if (!is_float(dtype)) {
    invalid(op.name(), std::string("dtype must be f32 or f64, got ") + dtype_name(dtype));
  }
  uint64_t n = static_cast<uint64_t>(shape.num_elements());
  RandomAttrs attrs{generator.seed(),
                    generator.take(random::random_blocks_used(distribution, dtype, n)), a, b};
  Tensor out = Tensor::empty(backend, shape, dtype);
  launch(backend, op, {}, std::span<Tensor>(&out, 1), &attrs);
  return out;
}
}  // namespace

Tensor random_uniform(Backend& backend, const Shape& shape, Generator& generator, double low,
                      double high, DType dtype) {
  if (!(low < high)) invalid("random_uniform", "low must be below high");
  return random(kRandomUniform, random::Distribution::kUniform, backend, shape, generator, low,
                high, dtype);
}
Tensor random_normal(Backend& backend, const Shape& shape, Generator& generator, double mean,
                     double stddev, DType dtype) {
  return random(kRandomNormal, random::Distribution::kNormal, backend, shape, generator, mean,
                stddev, dtype);
}
Tensor truncated_normal(Backend& backend, const Shape& shape, Generator& generator, double mean,
                        double stddev, DType dtype) {
  return random(kTruncatedNormal, random::Distribution::kTruncatedNormal, backend, shape, generator,
                mean, stddev, dtype);
}

}  // namespace ops
}  // namespace trainyard
