// The op cases of the backend checks (backend_checks.cc): for every op the core declares, a
// few small cases (inputs drawn from a seeded range, the op applied through ops:: or straight
// through the kernel table, a tolerance against the reference, whether it is differentiable).
// One file per op family, mirroring core/src/engine/ops/<family>.cc: cases_<family>.cc for each
// family whose row in trainyard/ops/families.h says `cases`. Adding an op adds its cases to its
// family's file.
#ifndef TRAINYARD_APPS_CONFORMANCE_OP_CASES_H_
#define TRAINYARD_APPS_CONFORMANCE_OP_CASES_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/ops/families.h"
#include "trainyard/tensor.h"

namespace trainyard::conformance {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;

struct Tolerance {
  double atol = 1e-6;
  double rtol = 1e-5;
};

inline constexpr Tolerance kExact{0.0, 0.0};
inline constexpr Tolerance kElementwise{1e-6, 1e-5};
inline constexpr Tolerance kAccumulating{1e-5, 1e-4};  // matmul, conv, reductions: summation order
inline constexpr Tolerance kGradient{1e-5, 1e-4};

struct InputSpec {
  Shape shape;
  DType dtype = DType::kF32;
  double low = -2.0;
  double high = 2.0;
  bool integers = false;       // round to integers (ties for comparisons, indices)
  std::vector<double> values;  // explicit values (indices); overrides the range
};

struct OpCase {
  std::string op;  // the op or composite name
  std::string name;
  std::vector<InputSpec> inputs;
  std::function<Outputs(Backend&, const Inputs&)> run;
  Tolerance tolerance = kElementwise;
  bool differentiable = false;
};

inline InputSpec f32(Shape shape, double low = -2.0, double high = 2.0) {
  return {std::move(shape), DType::kF32, low, high, false, {}};
}
inline InputSpec of(DType dtype, Shape shape, double low = -2.0, double high = 2.0) {
  return {std::move(shape), dtype, low, high, dtype != DType::kF32 && dtype != DType::kF64, {}};
}
inline InputSpec ints(Shape shape, double low, double high, DType dtype = DType::kF32) {
  return {std::move(shape), dtype, low, high, true, {}};
}
inline InputSpec fixed(Shape shape, DType dtype, std::vector<double> values) {
  return {std::move(shape), dtype, 0, 0, false, std::move(values)};
}

inline constexpr const char* kNoKernel = "conformance: the kernel table has no ";

// Calls `op`'s kernel on `backend` directly, with outputs of the given shapes and dtypes;
// Unimplemented (starting with kNoKernel) when the backend has none.
Outputs call_kernel(Backend& backend, const std::string& op, const Inputs& inputs,
                    const std::vector<std::pair<Shape, DType>>& outputs, const void* attrs);

// A case of a one-input op on f32 [3, 5] in [low, high).
void unary(std::vector<OpCase>& c, const std::string& op, std::string name,
           std::function<Tensor(const Tensor&)> f, double low = -2.0, double high = 2.0,
           bool differentiable = true);
// A case of a two-input op.
void binary(std::vector<OpCase>& c, const std::string& op, std::string name,
            std::function<Tensor(const Tensor&, const Tensor&)> f, InputSpec a, InputSpec b,
            Tolerance tol = kElementwise, bool differentiable = true);

// Each family's cases, for every family whose row in TRAINYARD_OP_FAMILIES
// (trainyard/ops/families.h) says it has conformance cases: cases_<family>.cc defines
// add_<family>_cases.
#define TRAINYARD_CONFORMANCE_CASES_DECL_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF(conformance, void add_##family##_cases(std::vector<OpCase>& c);)
TRAINYARD_OP_FAMILIES(TRAINYARD_CONFORMANCE_CASES_DECL_)
#undef TRAINYARD_CONFORMANCE_CASES_DECL_

// Every family's cases, built once.
const std::vector<OpCase>& all_cases();

}  // namespace trainyard::conformance

#endif  // TRAINYARD_APPS_CONFORMANCE_OP_CASES_H_
