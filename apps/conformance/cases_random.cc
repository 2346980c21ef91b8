// Op cases of the random family (op_cases.h; the ops are declared in
// core/src/engine/ops/random.cc): counter-based random numbers.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

void add_random_cases(std::vector<OpCase>& c) {
  using namespace ops;
  // Counter-based random numbers: every backend draws the same numbers (random.h).
  constexpr Tolerance kRandom{1e-6, 1e-5};
  for (DType dtype : {DType::kF32, DType::kF64}) {
    std::string suffix = dtype == DType::kF32 ? "_f32" : "_f64";
    c.push_back({"random_uniform",
                 "random_uniform" + suffix,
                 {},
                 [dtype](Backend& b, const Inputs&) {
                   Generator g(77, 5);
                   return Outputs{random_uniform(b, Shape{37}, g, -1.0, 3.0, dtype)};
                 },
                 kRandom});
    c.push_back({"random_normal",
                 "random_normal" + suffix,
                 {},
                 [dtype](Backend& b, const Inputs&) {
                   Generator g(78, 3);
                   return Outputs{random_normal(b, Shape{5, 7}, g, 0.5, 2.0, dtype)};
                 },
                 kRandom});
    c.push_back({"truncated_normal",
                 "truncated_normal" + suffix,
                 {},
                 [dtype](Backend& b, const Inputs&) {
                   Generator g(79, 0);
                   return Outputs{truncated_normal(b, Shape{41}, g, -1.0, 0.5, dtype)};
                 },
                 kRandom});
  }
}

}  // namespace trainyard::conformance
