// The random ops of ops.h (core/src/engine/ops/random.cc declares and implements them).
// Counter-based random numbers (random.h), drawn from a Generator. Errors as ops.h says.
#ifndef TRAINYARD_OPS_RANDOM_H_
#define TRAINYARD_OPS_RANDOM_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The attribute structs of the random family's ops (what their kernels receive as
// KernelArgs::attrs; op.h has the family-neutral ones).
struct RandomAttrs {
  uint64_t seed = 0;     // the generator's key
  uint64_t counter = 0;  // the first Philox counter block this draw uses
  double a = 0.0;        // low or mean
  double b = 1.0;        // high or stddev
};

// A stream of random numbers: a key and a position. Each draw takes the numbers after the
// previous one, so the same seed gives the same sequence of draws (random.h).
class TRAINYARD_API Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t counter = 0) : seed_(seed), counter_(counter) {}
  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }
  void set_state(uint64_t seed, uint64_t counter) {
    seed_ = seed;
    counter_ = counter;
  }
  // Reserves `blocks` Philox blocks and returns the first.
  uint64_t take(uint64_t blocks) {
    uint64_t first = counter_;
    counter_ += blocks;
    return first;
  }

 private:
  uint64_t seed_;
  uint64_t counter_;
};

namespace ops {

// Random numbers (random.h), drawn from `generator`.
TRAINYARD_API Tensor random_uniform(Backend& backend, const Shape& shape, Generator& generator,
                                    double low = 0.0, double high = 1.0, DType dtype = DType::kF32);
TRAINYARD_API Tensor random_normal(Backend& backend, const Shape& shape, Generator& generator,
                                   double mean = 0.0, double stddev = 1.0,
                                   DType dtype = DType::kF32);
TRAINYARD_API Tensor truncated_normal(Backend& backend, const Shape& shape, Generator& generator,
                                      double mean = 0.0, double stddev = 1.0,
                                      DType dtype = DType::kF32);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_RANDOM_H_
