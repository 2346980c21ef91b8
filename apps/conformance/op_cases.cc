// What the family files of op cases share (op_cases.h).
#include "op_cases.h"

#include "trainyard/error.h"
#include "trainyard/op.h"

namespace trainyard::conformance {

Outputs call_kernel(Backend& backend, const std::string& op, const Inputs& inputs,
                    const std::vector<std::pair<Shape, DType>>& outputs, const void* attrs) {
  KernelFn fn = nullptr;
  for (const KernelRegistration& k : backend.kernels()) {
    if (op == k.op) fn = k.fn;
  }
  if (fn == nullptr) {
    throw Unimplemented(std::string(kNoKernel) + op + " on device " + backend.device_name());
  }
  Outputs out;
  for (const auto& [shape, dtype] : outputs) out.push_back(Tensor::empty(backend, shape, dtype));
  const OpInfo* info = find_op(op);
  fn(backend, KernelArgs{inputs, out, attrs, &backend.current_stream(), op.c_str(),
                         info != nullptr ? info->attrs_size : 0});
  backend.synchronize();  // an asynchronous backend's error surfaces here
  return out;
}

void unary(std::vector<OpCase>& c, const std::string& op, std::string name,
           std::function<Tensor(const Tensor&)> f, double low, double high, bool differentiable) {
  c.push_back({op,
               std::move(name),
               {f32(Shape{3, 5}, low, high)},
               [f](Backend&, const Inputs& x) { return Outputs{f(x[0])}; },
               kElementwise,
               differentiable});
}

void binary(std::vector<OpCase>& c, const std::string& op, std::string name,
            std::function<Tensor(const Tensor&, const Tensor&)> f, InputSpec a, InputSpec b,
            Tolerance tol, bool differentiable) {
  c.push_back({op,
               std::move(name),
               {std::move(a), std::move(b)},
               [f](Backend&, const Inputs& x) { return Outputs{f(x[0], x[1])}; },
               tol,
               differentiable});
}

const std::vector<OpCase>& all_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> c;
#define TRAINYARD_CONFORMANCE_ADD_CASES_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF(conformance, add_##family##_cases(c);)
    TRAINYARD_OP_FAMILIES(TRAINYARD_CONFORMANCE_ADD_CASES_)
#undef TRAINYARD_CONFORMANCE_ADD_CASES_
    return c;
  }();
  return cases;
}

}  // namespace trainyard::conformance
