// Op cases of the reduce family (op_cases.h; the ops are declared in
// core/src/engine/ops/reduce.cc): reductions, argmax and softmax.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

void add_reduce_cases(std::vector<OpCase>& c) {
  using namespace ops;
  // Reductions and softmax.
  auto reduction = [&](const std::string& op, std::string name,
                       std::function<Tensor(const Tensor&)> f, InputSpec in = f32(Shape{4, 6}),
                       bool differentiable = true) {
    Tolerance tol = in.integers ? kExact : kAccumulating;
    c.push_back({op,
                 std::move(name),
                 {std::move(in)},
                 [f](Backend&, const Inputs& x) { return Outputs{f(x[0])}; },
                 tol,
                 differentiable});
  };
  reduction("reduce_sum", "reduce_sum_axis1", [](const Tensor& x) { return reduce_sum(x, {1}); });
  reduction(
      "reduce_sum", "reduce_sum_all", [](const Tensor& x) { return reduce_sum(x); },
      f32(Shape{3, 50, 7}));
  reduction(
      "reduce_sum", "reduce_sum_keepdims_rank3",
      [](const Tensor& x) {
        return reduce_sum(x, {0, 2}, true);
      },
      f32(Shape{3, 4, 5}));
  reduction(
      "reduce_sum", "reduce_sum_i64", [](const Tensor& x) { return reduce_sum(x, {0}); },
      ints(Shape{5, 3}, -100, 100, DType::kI64), false);
  reduction("reduce_mean", "reduce_mean", [](const Tensor& x) { return reduce_mean(x, {0}); });
  reduction("reduce_max", "reduce_max", [](const Tensor& x) { return reduce_max(x, {-1}); });
  reduction("reduce_min", "reduce_min_keepdims",
            [](const Tensor& x) { return reduce_min(x, {0}, true); });
  reduction(
      "logsumexp", "reduce_logsumexp", [](const Tensor& x) { return reduce_logsumexp(x, {1}); },
      f32(Shape{4, 6}, -30, 30));
  reduction(
      "argmax", "argmax", [](const Tensor& x) { return argmax(x, 1); }, f32(Shape{5, 7}), false);
  c.back().tolerance = kExact;
  reduction(
      "softmax", "softmax", [](const Tensor& x) { return softmax(x, -1); },
      f32(Shape{4, 6}, -10, 10));
  reduction("softmax", "softmax_axis0", [](const Tensor& x) { return softmax(x, 0); });
  reduction(
      "log_softmax", "log_softmax", [](const Tensor& x) { return log_softmax(x); },
      f32(Shape{4, 6}, -10, 10));
}

}  // namespace trainyard::conformance
