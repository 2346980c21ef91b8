// Op cases of the linalg family (op_cases.h; the ops are declared in
// core/src/engine/ops/linalg.cc): matrix products.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

void add_linalg_cases(std::vector<OpCase>& c) {
  using namespace ops;
  // Linear algebra.
  auto mm = [&](std::string name, Shape a, Shape b, bool ta, bool tb) {
    binary(
        c, "matmul", std::move(name),
        [ta, tb](const Tensor& x, const Tensor& y) { return matmul(x, y, ta, tb); }, f32(a), f32(b),
        kAccumulating);
  };
  mm("matmul", Shape{3, 4}, Shape{4, 5}, false, false);
  mm("matmul_large", Shape{17, 65}, Shape{65, 33}, false, false);
  mm("matmul_transpose_a", Shape{4, 3}, Shape{4, 5}, true, false);
  mm("matmul_transpose_b", Shape{3, 4}, Shape{5, 4}, false, true);
  mm("matmul_transpose_both", Shape{4, 3}, Shape{5, 4}, true, true);
  mm("matmul_batched", Shape{2, 3, 4}, Shape{2, 4, 5}, false, false);
  mm("matmul_shared_b", Shape{2, 3, 4}, Shape{4, 5}, false, false);
  binary(c, "matmul", "matmul_f64", [](const Tensor& x, const Tensor& y) { return matmul(x, y); },
         of(DType::kF64, Shape{5, 6}), of(DType::kF64, Shape{6, 3}), {1e-12, 1e-12});
  for (auto [act, name] : {std::pair{Activation::kNone, "matmul_bias_act_none"},
                           std::pair{Activation::kRelu, "matmul_bias_act_relu"},
                           std::pair{Activation::kSigmoid, "matmul_bias_act_sigmoid"},
                           std::pair{Activation::kTanh, "matmul_bias_act_tanh"}}) {
    Activation a = act;
    c.push_back(
        {"matmul_bias_act",
         name,
         {f32(Shape{5, 7}), f32(Shape{7, 6}), f32(Shape{6})},
         [a](Backend&, const Inputs& x) { return Outputs{matmul_bias_act(x[0], x[1], x[2], a)}; },
         kAccumulating,
         true});
  }
}

}  // namespace trainyard::conformance
