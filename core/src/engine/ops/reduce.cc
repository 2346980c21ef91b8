// The reduce ops. Reductions over axes, argmax, softmax and log-softmax.
#include <algorithm>
#include <array>
#include <numeric>

#include "engine/ops/common.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_REDUCE_OPS(X) \
  X(kReduceSum, "reduce_sum", 1, 1, ReduceAttrs, "x -> sum over the masked axes (float, i32, i64; 0 when empty)") \
  X(kReduceMean, "reduce_mean", 1, 1, ReduceAttrs, "x -> mean over the masked axes (NaN when empty)") \
  X(kReduceMax, "reduce_max", 1, 1, ReduceAttrs, "x -> max over the masked axes (-inf when empty)") \
  X(kReduceMin, "reduce_min", 1, 1, ReduceAttrs, "x -> min over the masked axes (+inf when empty)") \
  X(kLogSumExp, "logsumexp", 1, 1, ReduceAttrs, "x -> log(sum(exp(x))) over the masked axes (-inf when empty)") \
  X(kArgMax, "argmax", 1, 1, AxisAttrs, "x -> i64 index of the first maximum along the axis") \
  X(kSoftmax, "softmax", 1, 1, AxisAttrs, "x -> exp(x) / sum(exp(x)) along the axis") \
  X(kLogSoftmax, "log_softmax", 1, 1, AxisAttrs, "x -> x - logsumexp(x) along the axis")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(reduce, TRAINYARD_REDUCE_OPS)

namespace {
using namespace ops_internal;

// ---- Reductions ----

struct ReducePlan {
  ReduceAttrs attrs;
  Shape kept;  // keepdims shape
  Shape out;
  int64_t count = 1;  // elements reduced into each output
  std::vector<int64_t> axes;
};

ReducePlan plan_reduce(const char* op, const Tensor& x, const std::vector<int64_t>& axes,
                       bool keepdims) {
  ReducePlan plan;
  std::size_t rank = x.shape().rank();
  if (axes.empty()) {
    for (std::size_t i = 0; i < rank; ++i) plan.attrs.axis_mask |= 1u << i;
  }
  for (int64_t axis : axes) {
    plan.attrs.axis_mask |= 1u << normalize_axis(op, axis, rank, x);
  }
  plan.attrs.keepdims = keepdims;
  std::vector<int64_t> kept, out;
  for (std::size_t i = 0; i < rank; ++i) {
    bool reduced = (plan.attrs.axis_mask >> i) & 1u;
    kept.push_back(reduced ? 1 : x.shape()[i]);
    if (reduced) {
      plan.count *= x.shape()[i];
      plan.axes.push_back(static_cast<int64_t>(i));
    } else {
      out.push_back(x.shape()[i]);
    }
  }
  plan.kept = Shape(kept);
  plan.out = keepdims ? plan.kept : Shape(out);
  return plan;
}

template <class GradFn>
Tensor reduce(const OpDef& op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims,
              GradFn grad) {
  const char* name = op.name();
  Backend& backend = common_backend(name, {&x});
  if (&op == &kReduceSum) {
    if (!is_float(x.dtype()) && !is_int(x.dtype())) {
      invalid(name, "expects a float or integer tensor, got " + x.description());
    }
  } else {
    require_float(name, x);
  }
  ReducePlan plan = plan_reduce(name, x, axes, keepdims);
  Tensor y = run<1>(backend, op, {x}, &plan.attrs, plan.out, x.dtype());
  if (is_float(x.dtype()) && should_record({&x})) {
    Tensor xs = detached(x), ys = detached(y);
    record(op.name(), {&x}, std::span<Tensor>(&y, 1), [xs, ys, plan, grad](GradOutputs g) -> Grads {
      Tensor g_kept = ops::reshape(g[0], plan.kept);
      Tensor y_kept = ops::reshape(ys, plan.kept);
      return {grad(xs, y_kept, g_kept, plan)};
    });
  }
  return y;
}

}  // namespace

namespace ops {
using namespace ops_internal;

// ---- Reductions ----

Tensor reduce_sum(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(kReduceSum, x, axes, keepdims,
                [](const Tensor& x, const Tensor&, const Tensor& g, const ReducePlan&) {
                  return broadcast_to(g, x.shape());
                });
}
Tensor reduce_mean(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(kReduceMean, x, axes, keepdims,
                [](const Tensor& x, const Tensor&, const Tensor& g, const ReducePlan& plan) {
                  return broadcast_to(mul(g, 1.0 / static_cast<double>(plan.count)), x.shape());
                });
}
namespace {
Tensor extremum_grad(const Tensor& x, const Tensor& y, const Tensor& g, const ReducePlan& plan) {
  Tensor hits = cast(equal(x, y), x.dtype());
  Tensor count = reduce_sum(hits, plan.axes, /*keepdims=*/true);
  return mul(hits, div(g, count));  // ties share the gradient, as in TensorFlow
}
}  // namespace
Tensor reduce_max(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(kReduceMax, x, axes, keepdims, extremum_grad);
}
Tensor reduce_min(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(kReduceMin, x, axes, keepdims, extremum_grad);
}
Tensor reduce_logsumexp(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(kLogSumExp, x, axes, keepdims,
                [](const Tensor& x, const Tensor& y, const Tensor& g, const ReducePlan&) {
                  return mul(g, exp(sub(x, y)));
                });
}

Tensor argmax(const Tensor& x, int64_t axis) {
  Backend& backend = common_backend("argmax", {&x});
  if (!is_float(x.dtype()) && !is_int(x.dtype())) {
    invalid("argmax", "expects a float or integer tensor, got " + x.description());
  }
  AxisAttrs attrs{normalize_axis("argmax", axis, x.shape().rank(), x)};
  if (x.shape()[static_cast<std::size_t>(attrs.axis)] == 0) {
    invalid("argmax", "cannot take the argmax of an empty axis of " + x.description());
  }
  std::vector<int64_t> dims;
  for (std::size_t i = 0; i < x.shape().rank(); ++i) {
    if (static_cast<int64_t>(i) != attrs.axis) dims.push_back(x.shape()[i]);
  }
  return run<1>(backend, kArgMax, {x}, &attrs, Shape(dims), DType::kI64);
}

Tensor softmax(const Tensor& x, int64_t axis) {
  Backend& backend = common_backend("softmax", {&x});
  require_float("softmax", x);
  AxisAttrs attrs{normalize_axis("softmax", axis, x.shape().rank(), x)};
  Tensor y = run<1>(backend, kSoftmax, {x}, &attrs, x.shape(), x.dtype());
  if (should_record({&x})) {
    Tensor ys = detached(y);
    record(kSoftmax.name(), {&x}, std::span<Tensor>(&y, 1), [ys, attrs](GradOutputs g) -> Grads {
      Tensor dot = reduce_sum(mul(g[0], ys), {attrs.axis}, true);
      return {mul(ys, sub(g[0], dot))};
    });
  }
  return y;
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  Backend& backend = common_backend("log_softmax", {&x});
  require_float("log_softmax", x);
  AxisAttrs attrs{normalize_axis("log_softmax", axis, x.shape().rank(), x)};
  Tensor y = run<1>(backend, kLogSoftmax, {x}, &attrs, x.shape(), x.dtype());
  if (should_record({&x})) {
    Tensor ys = detached(y);
    record(kLogSoftmax.name(), {&x}, std::span<Tensor>(&y, 1), [ys, attrs](GradOutputs g) -> Grads {
      return {sub(g[0], mul(exp(ys), reduce_sum(g[0], {attrs.axis}, true)))};
    });
  }
  return y;
}

}  // namespace ops
}  // namespace trainyard
