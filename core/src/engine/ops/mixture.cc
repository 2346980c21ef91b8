// moe_mixture (ops/nn.h): MoeModel's gated sum and its gradient as composites of the core, so
// that their declaration lives as long as the process whatever plugins come and go.
#include <string>
#include <vector>

#include "engine/ops/common.h"
#include "trainyard/composite.h"

namespace trainyard {
namespace {
using namespace ops_internal;
using namespace ops;

// gate_logits [N, M + 1] and expert_logits [N, M] of one float dtype; returns M.
int64_t check_mixture(const char* name, const Tensor& gates, const Tensor& experts) {
  require_float(name, gates);
  require_same_dtype(name, gates, experts);
  const Shape& g = gates.shape();
  const Shape& e = experts.shape();
  if (g.rank() != 2 || e.rank() != 2 || g[0] != e[0] || e[1] < 1 || g[1] != e[1] + 1) {
    invalid(name, "gate_logits " + gates.description() + " and expert_logits " +
                      experts.description() + " do not agree; expected [N, M + 1] and [N, M]");
  }
  return e[1];
}

// (gate_logits, expert_logits) -> (gates [N, M + 1], the real gates [N, M], experts [N, M]).
struct Mixed {
  Tensor gates, real_gates, experts;
};
Mixed mix(const char* name, const Tensor& gate_logits, const Tensor& expert_logits) {
  const int64_t m = check_mixture(name, gate_logits, expert_logits);
  Mixed out;
  out.gates = softmax(gate_logits);
  out.experts = sigmoid(expert_logits);
  // The dummy expert's gate (column M) takes probability mass and contributes nothing.
  out.real_gates = slice(out.gates, {0, 0}, {-1, m});
  return out;
}

const Composite& moe_mixture_grad_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = "moe_mixture_grad",
      .num_inputs = 3,
      .num_outputs = 2,
      .attrs_size = 0,
      .summary = "(gate_logits [N, M + 1], expert_logits [N, M], dp [N]) -> (d gate_logits, "
                 "d expert_logits): the gradient of moe_mixture",
      .compose =
          [](const CompositeCall& c) {
            const Tensor &a = c.inputs[0], &b = c.inputs[1], &dp = c.inputs[2];
            const Mixed x = mix("moe_mixture_grad", a, b);
            const int64_t n = a.shape()[0];
            Tensor p = reshape(reduce_sum(mul(x.real_gates, x.experts), {1}), Shape{n, 1});
            Tensor d = reshape(dp, Shape{n, 1});
            Tensor dgates = mul(mul(d, x.gates), sub(pad(x.experts, {{0, 0}, {0, 1}}), p));
            Tensor dexperts = mul(mul(d, mul(x.real_gates, x.experts)), add(neg(x.experts), 1.0));
            return std::vector<Tensor>{dgates, dexperts};
          },
      .infer =
          [](const CompositeCall& c) {
            check_mixture("moe_mixture_grad", c.inputs[0], c.inputs[1]);
            const Tensor& dp = c.inputs[2];
            if (dp.dtype() != c.inputs[0].dtype() || dp.shape() != Shape{c.inputs[0].shape()[0]}) {
              invalid("moe_mixture_grad", "dp is " + dp.description() + "; expected [" +
                                              std::to_string(c.inputs[0].shape()[0]) + "] " +
                                              dtype_name(c.inputs[0].dtype()));
            }
            return std::vector<TensorType>{{c.inputs[0].shape(), c.inputs[0].dtype()},
                                           {c.inputs[1].shape(), c.inputs[1].dtype()}};
          },
      .gradient = {},
  });
  return *composite;
}

const Composite& moe_mixture_composite() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = "moe_mixture",
      .num_inputs = 2,
      .num_outputs = 1,
      .attrs_size = 0,
      .summary = "(gate_logits [N, M + 1], expert_logits [N, M]) -> [N]: sum_{j<M} "
                 "softmax(gate_logits)[j] * sigmoid(expert_logits)[j] (a mixture of experts)",
      .compose =
          [](const CompositeCall& c) {
            const Mixed x = mix("moe_mixture", c.inputs[0], c.inputs[1]);
            return std::vector<Tensor>{reduce_sum(mul(x.real_gates, x.experts), {1})};
          },
      .infer =
          [](const CompositeCall& c) {
            check_mixture("moe_mixture", c.inputs[0], c.inputs[1]);
            return std::vector<TensorType>{{Shape{c.inputs[0].shape()[0]}, c.inputs[0].dtype()}};
          },
      .gradient =
          [](const CompositeGrad& g) {
            std::vector<Tensor> d = moe_mixture_grad_composite()(
                {g.call.inputs[0], g.call.inputs[1], g.grad_outputs[0]});
            for (std::size_t i = 0; i < d.size(); ++i) {
              if (!g.needs_grad(i)) d[i] = Tensor();
            }
            return d;
          },
  });
  return *composite;
}

}  // namespace

namespace ops {

Tensor moe_mixture(const Tensor& gate_logits, const Tensor& expert_logits) {
  // The gradient composite first: the mixture's gradient rule calls it.
  moe_mixture_grad_composite();
  return moe_mixture_composite()({gate_logits, expert_logits})[0];
}

}  // namespace ops
}  // namespace trainyard
