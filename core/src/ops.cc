// The op declarations: for every op, the checks on its inputs, the shape and dtype of its
// outputs, the kernel launch and the gradient rule, written in other ops.
#include "trainyard/ops.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "autodiff_internal.h"
#include "dispatch.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/trace.h"
#include "trainyard/error.h"
#include "trainyard/random.h"

namespace trainyard {
namespace {

using Grads = std::vector<Tensor>;
using GradOutputs = std::span<const Tensor>;

bool is_float(DType d) { return d == DType::kF32 || d == DType::kF64; }
bool is_int(DType d) { return d == DType::kI32 || d == DType::kI64; }
bool is_index(DType d) { return d == DType::kI32 || d == DType::kI64; }

[[noreturn]] void invalid(const char* op, const std::string& message) {
  throw InvalidArgument(std::string(op) + ": " + message);
}

void require_defined(const char* op, const Tensor& t, const char* role) {
  if (!t.defined()) invalid(op, std::string(role) + " is an undefined tensor");
}

Backend& common_backend(const char* op, std::initializer_list<const Tensor*> inputs) {
  Backend* backend = nullptr;
  const Tensor* first = nullptr;
  for (const Tensor* t : inputs) {
    require_defined(op, *t, "an input");
    if (backend == nullptr) {
      backend = &t->backend();
      first = t;
    } else if (&t->backend() != backend) {
      invalid(op, "inputs are on different devices: " + first->description() + " and " +
                      t->description());
    }
  }
  return *backend;
}

void require_float(const char* op, const Tensor& t) {
  if (!is_float(t.dtype())) {
    invalid(op, "expects a float tensor (f32 or f64), got " + t.description());
  }
}

void require_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    invalid(op, "dtypes differ: " + a.description() + " and " + b.description());
  }
}

void require_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) {
    invalid(op, "shapes differ: " + a.description() + " and " + b.description());
  }
}

int64_t normalize_axis(const char* op, int64_t axis, std::size_t rank, const Tensor& t) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    invalid(op, "axis " + std::to_string(axis) + " is out of range for " + t.description());
  }
  return axis < 0 ? axis + r : axis;
}

// The tensor's data without its autodiff history, for saving in a backward function (saving
// an output with its history would make the node own itself).
Tensor detached(const Tensor& t) { return t.with_shape(t.shape(), t.byte_offset()); }

void launch(Backend& backend, OpId op, std::span<const Tensor> inputs, std::span<Tensor> outputs,
            const void* attrs) {
  KernelFn fn = KernelDispatch::find(backend, op);
  if (StepTrace* trace = StepTrace::active(); trace != nullptr) [[unlikely]] {
    StepTrace::Event e;
    e.name = op_name(op);
    e.category = "op";
    auto shapes = [](std::span<const Tensor> ts) {
      std::string s = "[";
      for (std::size_t i = 0; i < ts.size(); ++i) {
        s += (i ? ", \"" : "\"") + ts[i].description() + "\"";
      }
      return s + "]";
    };
    e.args = "\"inputs\": " + shapes(inputs) +
             ", \"outputs\": " + shapes(std::span<const Tensor>(outputs.data(), outputs.size()));
    e.start_us = trace->now_us();
    fn(backend, KernelArgs{inputs, outputs, attrs});
    e.duration_us = trace->now_us() - e.start_us;
    trace->add(std::move(e));
    return;
  }
  fn(backend, KernelArgs{inputs, outputs, attrs});
}

template <std::size_t N>
Tensor run(Backend& backend, OpId op, const std::array<Tensor, N>& inputs, const void* attrs,
           const Shape& shape, DType dtype) {
  Tensor out = Tensor::empty(backend, shape, dtype);
  launch(backend, op, inputs, std::span<Tensor>(&out, 1), attrs);
  return out;
}

// The NumPy broadcast of two shapes; false when they do not broadcast.
bool broadcast_dims(const Shape& x, const Shape& y, Shape* out) {
  std::size_t rank = std::max(x.rank(), y.rank());
  std::vector<int64_t> dims(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    int64_t dx = i < rank - x.rank() ? 1 : x[i - (rank - x.rank())];
    int64_t dy = i < rank - y.rank() ? 1 : y[i - (rank - y.rank())];
    if (dx != dy && dx != 1 && dy != 1) return false;
    dims[i] = dx == 1 ? dy : dx;
  }
  *out = Shape(dims);
  return true;
}

Shape broadcast_shapes(const char* op, const Tensor& a, const Tensor& b) {
  Shape out;
  if (!broadcast_dims(a.shape(), b.shape(), &out)) {
    invalid(op,
            "shapes cannot be broadcast together: " + a.description() + " and " + b.description());
  }
  return out;
}

// Sums `g` down to `shape`, undoing a broadcast.
Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  std::vector<int64_t> axes;
  std::size_t lead = g.shape().rank() - shape.rank();
  for (std::size_t i = 0; i < g.shape().rank(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) {
      axes.push_back(static_cast<int64_t>(i));
    }
  }
  Tensor summed = axes.empty() ? g : ops::reduce_sum(g, axes, /*keepdims=*/true);
  return ops::reshape(summed, shape);
}

Tensor broadcast_to(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  return ops::add(ops::zeros(t.backend(), shape, t.dtype()), t);
}

Tensor scalar_like(const Tensor& t, double value) {
  return ops::scalar(t.backend(), value, t.dtype());
}

// ---- Unary ----

Tensor unary_kernel(OpId op, const Tensor& x, const ScalarAttrs& attrs) {
  Backend& backend = common_backend(op_name(op), {&x});
  require_float(op_name(op), x);
  return run<1>(backend, op, {x}, &attrs, x.shape(), x.dtype());
}

// Runs a unary op and records `grad(x, y, g)`.
template <class GradFn>
Tensor unary(OpId op, const Tensor& x, GradFn grad, ScalarAttrs attrs = {}) {
  Tensor y = unary_kernel(op, x, attrs);
  if (should_record({&x})) {
    Tensor xs = detached(x), ys = detached(y);
    record(op, {&x}, std::span<Tensor>(&y, 1),
           [xs, ys, grad](GradOutputs g) -> Grads { return {grad(xs, ys, g[0])}; });
  }
  return y;
}

Tensor grad_helper(OpId op, const Tensor& a, const Tensor& dy, double alpha = 0.0) {
  ScalarAttrs attrs{alpha, 0.0};
  return run<2>(a.backend(), op, {a, dy}, &attrs, dy.shape(), dy.dtype());
}

// ---- Binary ----

enum class BinaryKind { kArithmetic, kFloatOnly, kComparison };

Tensor binary_kernel(OpId op, const Tensor& a, const Tensor& b, BinaryKind kind) {
  const char* name = op_name(op);
  Backend& backend = common_backend(name, {&a, &b});
  require_same_dtype(name, a, b);
  if (kind == BinaryKind::kFloatOnly) require_float(name, a);
  if (kind == BinaryKind::kArithmetic && !is_float(a.dtype()) && !is_int(a.dtype())) {
    invalid(name, "expects a float or integer tensor, got " + a.description());
  }
  Shape shape = broadcast_shapes(name, a, b);
  DType dtype = kind == BinaryKind::kComparison ? DType::kBool : a.dtype();
  return run<2>(backend, op, {a, b}, nullptr, shape, dtype);
}

template <class GradFn>
Tensor binary(OpId op, const Tensor& a, const Tensor& b, BinaryKind kind, GradFn grad) {
  Tensor y = binary_kernel(op, a, b, kind);
  if (is_float(y.dtype()) && should_record({&a, &b})) {
    Tensor as = detached(a), bs = detached(b), ys = detached(y);
    record(op, {&a, &b}, std::span<Tensor>(&y, 1), [as, bs, ys, grad](GradOutputs g) -> Grads {
      auto [ga, gb] = grad(as, bs, ys, g[0]);
      return {ga.defined() ? sum_to(ga, as.shape()) : ga,
              gb.defined() ? sum_to(gb, bs.shape()) : gb};
    });
  }
  return y;
}

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
Tensor reduce(OpId op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims,
              GradFn grad) {
  const char* name = op_name(op);
  Backend& backend = common_backend(name, {&x});
  if (op == OpId::kReduceSum) {
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
    record(op, {&x}, std::span<Tensor>(&y, 1), [xs, ys, plan, grad](GradOutputs g) -> Grads {
      Tensor g_kept = ops::reshape(g[0], plan.kept);
      Tensor y_kept = ops::reshape(ys, plan.kept);
      return {grad(xs, y_kept, g_kept, plan)};
    });
  }
  return y;
}

// ---- Convolution geometry (TensorFlow's rules) ----

struct Geometry {
  int64_t out = 0, pad_before = 0, pad_after = 0;
};

Geometry window_geometry(const char* op, int64_t in, int64_t window, int64_t stride,
                         int64_t dilation, PaddingType type, int64_t explicit_before,
                         int64_t explicit_after, const char* dim) {
  if (stride < 1 || dilation < 1 || window < 1) {
    invalid(op, std::string("window, stride and dilation must be >= 1 along ") + dim);
  }
  int64_t effective = (window - 1) * dilation + 1;
  Geometry g;
  switch (type) {
    case PaddingType::kValid:
      if (in < effective) {
        invalid(op, std::string("VALID padding: the ") + dim + " of the input (" +
                        std::to_string(in) + ") is smaller than the window (" +
                        std::to_string(effective) + ")");
      }
      g.out = (in - effective) / stride + 1;
      break;
    case PaddingType::kSame: {
      g.out = (in + stride - 1) / stride;
      int64_t total = std::max<int64_t>((g.out - 1) * stride + effective - in, 0);
      g.pad_before = total / 2;
      g.pad_after = total - g.pad_before;
      break;
    }
    case PaddingType::kExplicit:
      if (explicit_before < 0 || explicit_after < 0) invalid(op, "negative padding");
      g.pad_before = explicit_before;
      g.pad_after = explicit_after;
      if (in + explicit_before + explicit_after < effective) {
        invalid(op, std::string("the padded ") + dim + " is smaller than the window");
      }
      g.out = (in + explicit_before + explicit_after - effective) / stride + 1;
      break;
  }
  return g;
}

std::array<int64_t, 4> dims4(const Shape& s) { return {s[0], s[1], s[2], s[3]}; }

Tensor pool(OpId op, const Tensor& input, std::pair<int64_t, int64_t> window,
            std::pair<int64_t, int64_t> strides, Padding2D padding) {
  const char* name = op_name(op);
  Backend& backend = common_backend(name, {&input});
  require_float(name, input);
  if (input.shape().rank() != 4)
    invalid(name, "expects NHWC input of rank 4, got " + input.description());
  Geometry h = window_geometry(name, input.shape()[1], window.first, strides.first, 1, padding.type,
                               padding.top, padding.bottom, "height");
  Geometry w = window_geometry(name, input.shape()[2], window.second, strides.second, 1,
                               padding.type, padding.left, padding.right, "width");
  PoolAttrs attrs;
  attrs.window_h = window.first;
  attrs.window_w = window.second;
  attrs.stride_h = strides.first;
  attrs.stride_w = strides.second;
  attrs.pad_top = h.pad_before;
  attrs.pad_bottom = h.pad_after;
  attrs.pad_left = w.pad_before;
  attrs.pad_right = w.pad_after;
  attrs.input_shape = dims4(input.shape());
  Shape out{input.shape()[0], h.out, w.out, input.shape()[3]};
  Tensor y = run<1>(backend, op, {input}, &attrs, out, input.dtype());
  if (should_record({&input})) {
    Tensor xs = detached(input);
    record(op, {&input}, std::span<Tensor>(&y, 1), [xs, attrs, op](GradOutputs g) -> Grads {
      if (op == OpId::kMaxPool) {
        return {
            run<2>(xs.backend(), OpId::kMaxPoolGrad, {xs, g[0]}, &attrs, xs.shape(), xs.dtype())};
      }
      return {run<1>(xs.backend(), OpId::kAvgPoolGrad, {g[0]}, &attrs, xs.shape(), xs.dtype())};
    });
  }
  return y;
}

Shape reshape_target(const Tensor& x, const Shape& shape) {
  int64_t known = 1;
  int unknown = -1;
  std::vector<int64_t> dims = shape.to_vector();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (unknown >= 0) invalid("reshape", "more than one -1 in " + shape.to_string());
      unknown = static_cast<int>(i);
    } else if (dims[i] < 0) {
      invalid("reshape", "negative dimension in " + shape.to_string());
    } else {
      known *= dims[i];
    }
  }
  int64_t total = x.num_elements();
  if (unknown >= 0) {
    if (known == 0 || total % known != 0) {
      invalid("reshape", "cannot reshape " + x.description() + " to " + shape.to_string());
    }
    dims[static_cast<std::size_t>(unknown)] = total / known;
  } else if (known != total) {
    invalid("reshape", "cannot reshape " + x.description() + " (" + std::to_string(total) +
                           " elements) to " + shape.to_string());
  }
  return Shape(dims);
}

void require_update_shapes(const char* op, const Tensor& var, const Tensor& other) {
  require_same_dtype(op, var, other);
  require_same_shape(op, var, other);
}

}  // namespace

namespace ops {

// ---- Creation ----

Tensor full(Backend& backend, const Shape& shape, double value, DType dtype) {
  FillAttrs attrs{value};
  Tensor out = Tensor::empty(backend, shape, dtype);
  launch(backend, OpId::kFill, {}, std::span<Tensor>(&out, 1), &attrs);
  return out;
}
Tensor zeros(Backend& backend, const Shape& shape, DType dtype) {
  return full(backend, shape, 0.0, dtype);
}
Tensor ones(Backend& backend, const Shape& shape, DType dtype) {
  return full(backend, shape, 1.0, dtype);
}
Tensor scalar(Backend& backend, double value, DType dtype) {
  return full(backend, Shape{}, value, dtype);
}
Tensor zeros_like(const Tensor& x) {
  require_defined("zeros_like", x, "the input");
  return zeros(x.backend(), x.shape(), x.dtype());
}
Tensor ones_like(const Tensor& x) {
  require_defined("ones_like", x, "the input");
  return ones(x.backend(), x.shape(), x.dtype());
}

// ---- Unary ----

Tensor neg(const Tensor& x) {
  return unary(OpId::kNeg, x, [](const Tensor&, const Tensor&, const Tensor& g) { return neg(g); });
}
Tensor abs(const Tensor& x) {
  return unary(OpId::kAbs, x,
               [](const Tensor& x, const Tensor&, const Tensor& g) { return mul(g, sign(x)); });
}
Tensor sign(const Tensor& x) { return unary_kernel(OpId::kSign, x, {}); }
Tensor exp(const Tensor& x) {
  return unary(OpId::kExp, x,
               [](const Tensor&, const Tensor& y, const Tensor& g) { return mul(g, y); });
}
Tensor log(const Tensor& x) {
  return unary(OpId::kLog, x,
               [](const Tensor& x, const Tensor&, const Tensor& g) { return div(g, x); });
}
Tensor log1p(const Tensor& x) {
  return unary(OpId::kLog1p, x,
               [](const Tensor& x, const Tensor&, const Tensor& g) { return div(g, add(x, 1.0)); });
}
Tensor sqrt(const Tensor& x) {
  return unary(OpId::kSqrt, x,
               [](const Tensor&, const Tensor& y, const Tensor& g) { return div(g, mul(y, 2.0)); });
}
Tensor rsqrt(const Tensor& x) {
  return unary(OpId::kRsqrt, x, [](const Tensor&, const Tensor& y, const Tensor& g) {
    return mul(mul(g, mul(y, mul(y, y))), -0.5);
  });
}
Tensor square(const Tensor& x) {
  return unary(OpId::kSquare, x,
               [](const Tensor& x, const Tensor&, const Tensor& g) { return mul(g, mul(x, 2.0)); });
}
Tensor sigmoid(const Tensor& x) {
  return unary(OpId::kSigmoid, x, [](const Tensor&, const Tensor& y, const Tensor& g) {
    return grad_helper(OpId::kSigmoidGrad, y, g);
  });
}
Tensor tanh(const Tensor& x) {
  return unary(OpId::kTanh, x, [](const Tensor&, const Tensor& y, const Tensor& g) {
    return grad_helper(OpId::kTanhGrad, y, g);
  });
}
Tensor relu(const Tensor& x) {
  return unary(OpId::kRelu, x, [](const Tensor& x, const Tensor&, const Tensor& g) {
    return grad_helper(OpId::kReluGrad, x, g);
  });
}
Tensor relu6(const Tensor& x) {
  return unary(OpId::kRelu6, x, [](const Tensor& x, const Tensor&, const Tensor& g) {
    return grad_helper(OpId::kRelu6Grad, x, g);
  });
}
Tensor elu(const Tensor& x, double alpha) {
  return unary(OpId::kElu, x,
               [alpha](const Tensor& x, const Tensor&, const Tensor& g) {
                 return grad_helper(OpId::kEluGrad, x, g, alpha);
               },
               {alpha, 0.0});
}
Tensor softplus(const Tensor& x) {
  return unary(OpId::kSoftplus, x,
               [](const Tensor& x, const Tensor&, const Tensor& g) { return mul(g, sigmoid(x)); });
}
Tensor pow(const Tensor& x, double exponent) {
  return unary(OpId::kPowScalar, x,
               [exponent](const Tensor& x, const Tensor&, const Tensor& g) {
                 return mul(g, mul(pow(x, exponent - 1.0), exponent));
               },
               {exponent, 0.0});
}
Tensor clip_by_value(const Tensor& x, double min_value, double max_value) {
  if (min_value > max_value) {
    invalid("clip_by_value",
            "min " + std::to_string(min_value) + " exceeds max " + std::to_string(max_value));
  }
  return unary(OpId::kClipByValue, x,
               [min_value, max_value](const Tensor& x, const Tensor&, const Tensor& g) {
                 Tensor inside = mul(cast(greater_equal(x, scalar_like(x, min_value)), x.dtype()),
                                     cast(less_equal(x, scalar_like(x, max_value)), x.dtype()));
                 return mul(g, inside);
               },
               {min_value, max_value});
}

// ---- Binary ----

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(OpId::kAdd, a, b, BinaryKind::kArithmetic,
                [](const Tensor&, const Tensor&, const Tensor&, const Tensor& g) {
                  return std::pair{g, g};
                });
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(OpId::kSub, a, b, BinaryKind::kArithmetic,
                [](const Tensor&, const Tensor&, const Tensor&, const Tensor& g) {
                  return std::pair{g, neg(g)};
                });
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(OpId::kMul, a, b, BinaryKind::kArithmetic,
                [](const Tensor& a, const Tensor& b, const Tensor&, const Tensor& g) {
                  return std::pair{mul(g, b), mul(g, a)};
                });
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary(OpId::kDiv, a, b, BinaryKind::kFloatOnly,
                [](const Tensor&, const Tensor& b, const Tensor& y, const Tensor& g) {
                  Tensor ga = div(g, b);
                  return std::pair{ga, neg(mul(ga, y))};
                });
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary(OpId::kMaximum, a, b, BinaryKind::kArithmetic,
                [](const Tensor& a, const Tensor& b, const Tensor&, const Tensor& g) {
                  Tensor take_a = cast(greater_equal(a, b), g.dtype());
                  return std::pair{mul(g, take_a), sub(g, mul(g, take_a))};
                });
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary(OpId::kMinimum, a, b, BinaryKind::kArithmetic,
                [](const Tensor& a, const Tensor& b, const Tensor&, const Tensor& g) {
                  Tensor take_a = cast(less_equal(a, b), g.dtype());
                  return std::pair{mul(g, take_a), sub(g, mul(g, take_a))};
                });
}
Tensor pow(const Tensor& a, const Tensor& b) {
  return binary(OpId::kPow, a, b, BinaryKind::kFloatOnly,
                [](const Tensor& a, const Tensor& b, const Tensor& y, const Tensor& g) {
                  Tensor ga = mul(g, mul(b, pow(a, sub(b, scalar_like(b, 1.0)))));
                  // d/db a^b = a^b log(a), taken as 0 where a <= 0 (TensorFlow's choice).
                  Tensor positive = greater(a, scalar_like(a, 0.0));
                  Tensor safe_a = where(positive, a, ones_like(a));
                  Tensor gb = mul(g, mul(y, log(safe_a)));
                  return std::pair{ga, where(positive, gb, zeros_like(gb))};
                });
}

Tensor equal(const Tensor& a, const Tensor& b) {
  return binary_kernel(OpId::kEqual, a, b, BinaryKind::kComparison);
}
Tensor not_equal(const Tensor& a, const Tensor& b) {
  return binary_kernel(OpId::kNotEqual, a, b, BinaryKind::kComparison);
}
Tensor less(const Tensor& a, const Tensor& b) {
  return binary_kernel(OpId::kLess, a, b, BinaryKind::kComparison);
}
Tensor less_equal(const Tensor& a, const Tensor& b) {
  return binary_kernel(OpId::kLessEqual, a, b, BinaryKind::kComparison);
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return binary_kernel(OpId::kGreater, a, b, BinaryKind::kComparison);
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return binary_kernel(OpId::kGreaterEqual, a, b, BinaryKind::kComparison);
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  const char* name = "where";
  Backend& backend = common_backend(name, {&condition, &a, &b});
  if (condition.dtype() != DType::kBool) {
    invalid(name, "the condition must be bool, got " + condition.description());
  }
  require_same_dtype(name, a, b);
  Shape ab = broadcast_shapes(name, a, b);
  Shape shape;
  if (!broadcast_dims(condition.shape(), ab, &shape)) {
    invalid(name, "shapes cannot be broadcast together: " + condition.description() + ", " +
                      a.description() + " and " + b.description());
  }
  Tensor y = run<3>(backend, OpId::kWhere, {condition, a, b}, nullptr, shape, a.dtype());
  if (is_float(a.dtype()) && should_record({&a, &b})) {
    Tensor cs = detached(condition), as = detached(a), bs = detached(b);
    record(OpId::kWhere, {nullptr, &a, &b}, std::span<Tensor>(&y, 1),
           [cs, as, bs](GradOutputs g) -> Grads {
             Tensor zero = zeros_like(g[0]);
             return {Tensor(), sum_to(where(cs, g[0], zero), as.shape()),
                     sum_to(where(cs, zero, g[0]), bs.shape())};
           });
  }
  return y;
}

Tensor add(const Tensor& a, double b) {
  require_defined("add", a, "the input");
  return add(a, scalar_like(a, b));
}
Tensor mul(const Tensor& a, double b) {
  require_defined("mul", a, "the input");
  return mul(a, scalar_like(a, b));
}

// ---- Reductions ----

Tensor reduce_sum(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(OpId::kReduceSum, x, axes, keepdims,
                [](const Tensor& x, const Tensor&, const Tensor& g, const ReducePlan&) {
                  return broadcast_to(g, x.shape());
                });
}
Tensor reduce_mean(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(OpId::kReduceMean, x, axes, keepdims,
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
  return reduce(OpId::kReduceMax, x, axes, keepdims, extremum_grad);
}
Tensor reduce_min(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(OpId::kReduceMin, x, axes, keepdims, extremum_grad);
}
Tensor reduce_logsumexp(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(OpId::kLogSumExp, x, axes, keepdims,
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
  return run<1>(backend, OpId::kArgMax, {x}, &attrs, Shape(dims), DType::kI64);
}

Tensor softmax(const Tensor& x, int64_t axis) {
  Backend& backend = common_backend("softmax", {&x});
  require_float("softmax", x);
  AxisAttrs attrs{normalize_axis("softmax", axis, x.shape().rank(), x)};
  Tensor y = run<1>(backend, OpId::kSoftmax, {x}, &attrs, x.shape(), x.dtype());
  if (should_record({&x})) {
    Tensor ys = detached(y);
    record(OpId::kSoftmax, {&x}, std::span<Tensor>(&y, 1), [ys, attrs](GradOutputs g) -> Grads {
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
  Tensor y = run<1>(backend, OpId::kLogSoftmax, {x}, &attrs, x.shape(), x.dtype());
  if (should_record({&x})) {
    Tensor ys = detached(y);
    record(OpId::kLogSoftmax, {&x}, std::span<Tensor>(&y, 1), [ys, attrs](GradOutputs g) -> Grads {
      return {sub(g[0], mul(exp(ys), reduce_sum(g[0], {attrs.axis}, true)))};
    });
  }
  return y;
}

// ---- Linear algebra ----

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  const char* name = "matmul";
  Backend& backend = common_backend(name, {&a, &b});
  require_float(name, a);
  require_same_dtype(name, a, b);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (sa.rank() < 2 || sb.rank() < 2) {
    invalid(name,
            "expects tensors of rank >= 2, got " + a.description() + " and " + b.description());
  }
  std::size_t ra = sa.rank(), rb = sb.rank();
  int64_t m = transpose_a ? sa[ra - 1] : sa[ra - 2];
  int64_t ka = transpose_a ? sa[ra - 2] : sa[ra - 1];
  int64_t kb = transpose_b ? sb[rb - 1] : sb[rb - 2];
  int64_t n = transpose_b ? sb[rb - 2] : sb[rb - 1];
  if (ka != kb) {
    invalid(name, "inner dimensions differ: " + a.description() +
                      (transpose_a ? " (transposed)" : "") + " has " + std::to_string(ka) + ", " +
                      b.description() + (transpose_b ? " (transposed)" : "") + " has " +
                      std::to_string(kb));
  }
  // Batch dims: equal, or one side is rank 2 and shared by every batch of the other.
  bool shared_a = ra == 2 && rb > 2;
  bool shared_b = rb == 2 && ra > 2;
  if (!shared_a && !shared_b) {
    bool same = ra == rb;
    for (std::size_t i = 0; same && i + 2 < ra; ++i) same = sa[i] == sb[i];
    if (!same) {
      invalid(name, "batch dimensions differ: " + a.description() + " and " + b.description() +
                        " (either side may also be rank 2, shared by every batch)");
    }
  }
  const Shape& batched = shared_a ? sb : sa;
  std::vector<int64_t> dims(batched.dims().begin(), batched.dims().end() - 2);
  dims.push_back(m);
  dims.push_back(n);
  MatMulAttrs attrs{transpose_a, transpose_b, Activation::kNone};
  Tensor y = run<2>(backend, OpId::kMatMul, {a, b}, &attrs, Shape(dims), a.dtype());
  if (should_record({&a, &b})) {
    Tensor as = detached(a), bs = detached(b);
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    record(OpId::kMatMul, {&a, &b}, std::span<Tensor>(&y, 1),
           [as, bs, transpose_a, transpose_b, shared_a, shared_b, need_a,
            need_b](GradOutputs grads) -> Grads {
             const Tensor& g = grads[0];
             Tensor da, db;
             if (!transpose_a && !transpose_b) {
               if (need_a) da = matmul(g, bs, false, true);
               if (need_b) db = matmul(as, g, true, false);
             } else if (transpose_a && !transpose_b) {
               if (need_a) da = matmul(bs, g, false, true);
               if (need_b) db = matmul(as, g, false, false);
             } else if (!transpose_a && transpose_b) {
               if (need_a) da = matmul(g, bs, false, false);
               if (need_b) db = matmul(g, as, true, false);
             } else {
               if (need_a) da = matmul(bs, g, true, true);
               if (need_b) db = matmul(g, as, true, true);
             }
             // A side shared by every batch gets the sum over the batches.
             auto sum_batches = [](const Tensor& t) {
               std::vector<int64_t> axes(t.shape().rank() - 2);
               std::iota(axes.begin(), axes.end(), 0);
               return reduce_sum(t, axes);
             };
             if (shared_a && da.defined()) da = sum_batches(da);
             if (shared_b && db.defined()) db = sum_batches(db);
             return {da, db};
           });
  }
  return y;
}

Tensor matmul_bias_act(const Tensor& x, const Tensor& w, const Tensor& bias,
                       Activation activation) {
  const char* name = "matmul_bias_act";
  Backend& backend = common_backend(name, {&x, &w, &bias});
  require_float(name, x);
  require_same_dtype(name, x, w);
  require_same_dtype(name, x, bias);
  if (x.shape().rank() != 2 || w.shape().rank() != 2 || bias.shape().rank() != 1 ||
      x.shape()[1] != w.shape()[0] || bias.shape()[0] != w.shape()[1]) {
    invalid(name, "expects x [M, K], w [K, N], bias [N]; got " + x.description() + ", " +
                      w.description() + ", " + bias.description());
  }
  MatMulAttrs attrs{false, false, activation};
  Tensor y = run<3>(backend, OpId::kMatMulBiasAct, {x, w, bias}, &attrs,
                    Shape{x.shape()[0], w.shape()[1]}, x.dtype());
  if (should_record({&x, &w, &bias})) {
    Tensor xs = detached(x), ws = detached(w), ys = detached(y);
    const std::array<bool, 3> need = {x.requires_grad(), w.requires_grad(), bias.requires_grad()};
    record(OpId::kMatMulBiasAct, {&x, &w, &bias}, std::span<Tensor>(&y, 1),
           [xs, ws, ys, activation, need](GradOutputs grads) -> Grads {
             Tensor g = grads[0];
             switch (activation) {
               case Activation::kNone:
                 break;
               case Activation::kRelu:
                 g = grad_helper(OpId::kReluGrad, ys, g);
                 break;
               case Activation::kSigmoid:
                 g = grad_helper(OpId::kSigmoidGrad, ys, g);
                 break;
               case Activation::kTanh:
                 g = grad_helper(OpId::kTanhGrad, ys, g);
                 break;
             }
             // Input features need no gradient: their matmul is the step's third.
             return {need[0] ? matmul(g, ws, false, true) : Tensor(),
                     need[1] ? matmul(xs, g, true, false) : Tensor(),
                     need[2] ? reduce_sum(g, {0}) : Tensor()};
           });
  }
  return y;
}

// ---- Convolution and pooling ----

Tensor conv2d(const Tensor& input, const Tensor& filter, std::pair<int64_t, int64_t> strides,
              Padding2D padding, std::pair<int64_t, int64_t> dilations, int64_t groups) {
  const char* name = "conv2d";
  Backend& backend = common_backend(name, {&input, &filter});
  require_float(name, input);
  require_same_dtype(name, input, filter);
  if (input.shape().rank() != 4 || filter.shape().rank() != 4) {
    invalid(name, "expects NHWC input and [KH, KW, C / groups, O] filter, got " +
                      input.description() + " and " + filter.description());
  }
  int64_t c = input.shape()[3], o = filter.shape()[3];
  if (groups < 1 || c % groups != 0 || o % groups != 0 || filter.shape()[2] * groups != c) {
    invalid(name, "input channels " + std::to_string(c) + ", filter " + filter.description() +
                      " and groups " + std::to_string(groups) +
                      " do not fit (filter dim 2 must be C / groups)");
  }
  Geometry h =
      window_geometry(name, input.shape()[1], filter.shape()[0], strides.first, dilations.first,
                      padding.type, padding.top, padding.bottom, "height");
  Geometry w =
      window_geometry(name, input.shape()[2], filter.shape()[1], strides.second, dilations.second,
                      padding.type, padding.left, padding.right, "width");
  Conv2DAttrs attrs;
  attrs.stride_h = strides.first;
  attrs.stride_w = strides.second;
  attrs.dilation_h = dilations.first;
  attrs.dilation_w = dilations.second;
  attrs.pad_top = h.pad_before;
  attrs.pad_bottom = h.pad_after;
  attrs.pad_left = w.pad_before;
  attrs.pad_right = w.pad_after;
  attrs.groups = groups;
  attrs.input_shape = dims4(input.shape());
  attrs.filter_shape = dims4(filter.shape());
  Tensor y = run<2>(backend, OpId::kConv2D, {input, filter}, &attrs,
                    Shape{input.shape()[0], h.out, w.out, o}, input.dtype());
  if (should_record({&input, &filter})) {
    Tensor xs = detached(input), fs = detached(filter);
    // The gradients nobody needs are not computed (an image batch needs none).
    const bool need_input = input.requires_grad(), need_filter = filter.requires_grad();
    record(
        OpId::kConv2D, {&input, &filter}, std::span<Tensor>(&y, 1),
        [xs, fs, attrs, need_input, need_filter](GradOutputs g) -> Grads {
          Backend& b = xs.backend();
          Tensor dx, df;
          if (need_input) {
            dx = run<2>(b, OpId::kConv2DBackwardInput, {g[0], fs}, &attrs, xs.shape(), xs.dtype());
          }
          if (need_filter) {
            df = run<2>(b, OpId::kConv2DBackwardFilter, {xs, g[0]}, &attrs, fs.shape(), fs.dtype());
          }
          return {dx, df};
        });
  }
  return y;
}

Tensor depthwise_conv2d(const Tensor& input, const Tensor& filter,
                        std::pair<int64_t, int64_t> strides, Padding2D padding,
                        std::pair<int64_t, int64_t> dilations) {
  require_defined("depthwise_conv2d", filter, "the filter");
  require_defined("depthwise_conv2d", input, "the input");
  if (filter.shape().rank() != 4 || input.shape().rank() != 4 ||
      filter.shape()[2] != input.shape()[3]) {
    invalid("depthwise_conv2d", "expects NHWC input and a [KH, KW, C, multiplier] filter, got " +
                                    input.description() + " and " + filter.description());
  }
  const Shape& f = filter.shape();
  Tensor grouped = reshape(filter, Shape{f[0], f[1], 1, f[2] * f[3]});
  return conv2d(input, grouped, strides, padding, dilations, f[2]);
}

Tensor max_pool2d(const Tensor& input, std::pair<int64_t, int64_t> window,
                  std::pair<int64_t, int64_t> strides, Padding2D padding) {
  return pool(OpId::kMaxPool, input, window, strides, padding);
}
Tensor avg_pool2d(const Tensor& input, std::pair<int64_t, int64_t> window,
                  std::pair<int64_t, int64_t> strides, Padding2D padding) {
  return pool(OpId::kAvgPool, input, window, strides, padding);
}

// ---- Batch normalization ----

namespace {
void check_batch_norm(const char* name, const Tensor& x,
                      std::initializer_list<const Tensor*> params) {
  require_float(name, x);
  if (x.shape().rank() < 2) invalid(name, "expects rank >= 2, got " + x.description());
  int64_t c = x.shape()[x.shape().rank() - 1];
  for (const Tensor* p : params) {
    require_same_dtype(name, x, *p);
    if (p->shape() != Shape{c}) {
      invalid(name, "per-channel parameters must be [" + std::to_string(c) + "] for " +
                        x.description() + ", got " + p->description());
    }
  }
}
std::vector<int64_t> all_but_last(const Tensor& x) {
  std::vector<int64_t> axes(x.shape().rank() - 1);
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}
}  // namespace

BatchNormResult batch_norm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    double epsilon) {
  const char* name = "batch_norm_training";
  Backend& backend = common_backend(name, {&x, &gamma, &beta});
  check_batch_norm(name, x, {&gamma, &beta});
  BatchNormAttrs attrs{epsilon};
  Shape c{gamma.shape()[0]};
  std::array<Tensor, 3> outputs = {Tensor::empty(backend, x.shape(), x.dtype()),
                                   Tensor::empty(backend, c, x.dtype()),
                                   Tensor::empty(backend, c, x.dtype())};
  std::array<Tensor, 3> inputs = {x, gamma, beta};
  launch(backend, OpId::kBatchNormTraining, inputs, outputs, &attrs);
  if (should_record({&x, &gamma, &beta})) {
    Tensor xs = detached(x), gs = detached(gamma), ms = detached(outputs[1]),
           vs = detached(outputs[2]);
    // Only y is differentiated: the batch statistics feed the moving averages, which are not.
    record(OpId::kBatchNormTraining, {&x, &gamma, &beta}, std::span<Tensor>(outputs.data(), 1),
           [xs, gs, ms, vs, attrs](GradOutputs g) -> Grads {
             Backend& b = xs.backend();
             std::array<Tensor, 3> grads = {Tensor::empty(b, xs.shape(), xs.dtype()),
                                            Tensor::empty(b, gs.shape(), xs.dtype()),
                                            Tensor::empty(b, gs.shape(), xs.dtype())};
             std::array<Tensor, 5> in = {xs, gs, ms, vs, g[0]};
             launch(b, OpId::kBatchNormGrad, in, grads, &attrs);
             return {grads[0], grads[1], grads[2]};
           });
  }
  return {outputs[0], outputs[1], outputs[2]};
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon) {
  const char* name = "batch_norm_inference";
  Backend& backend = common_backend(name, {&x, &gamma, &beta, &mean, &variance});
  check_batch_norm(name, x, {&gamma, &beta, &mean, &variance});
  BatchNormAttrs attrs{epsilon};
  Tensor y = run<5>(backend, OpId::kBatchNormInference, {x, gamma, beta, mean, variance}, &attrs,
                    x.shape(), x.dtype());
  if (should_record({&x, &gamma, &beta})) {
    Tensor xs = detached(x), gs = detached(gamma), ms = detached(mean), vs = detached(variance);
    record(OpId::kBatchNormInference, {&x, &gamma, &beta}, std::span<Tensor>(&y, 1),
           [xs, gs, ms, vs, epsilon](GradOutputs g) -> Grads {
             Tensor inv_std = rsqrt(add(vs, epsilon));
             Tensor normalized = mul(sub(xs, ms), inv_std);
             std::vector<int64_t> axes = all_but_last(xs);
             return {mul(g[0], mul(gs, inv_std)), reduce_sum(mul(g[0], normalized), axes),
                     reduce_sum(g[0], axes)};
           });
  }
  return y;
}

void assign_moving_average(Tensor& moving, const Tensor& value, double decay) {
  common_backend("assign_moving_average", {&moving, &value});
  require_float("assign_moving_average", moving);
  require_update_shapes("assign_moving_average", moving, value);
  NoGradScope no_grad;
  Tensor updated = add(mul(moving, decay), mul(value, 1.0 - decay));
  assign(moving, updated);
}

Tensor dropout(const Tensor& x, double rate, Generator& generator, bool training) {
  require_defined("dropout", x, "the input");
  if (!(rate >= 0.0 && rate < 1.0)) {
    invalid("dropout", "rate must be in [0, 1), got " + std::to_string(rate));
  }
  if (!training || rate == 0.0) return x;
  require_float("dropout", x);
  Tensor u = random_uniform(x.backend(), x.shape(), generator, 0.0, 1.0, x.dtype());
  Tensor keep = cast(greater_equal(u, scalar_like(x, rate)), x.dtype());
  return mul(x, mul(keep, 1.0 / (1.0 - rate)));
}

// ---- Shapes and data movement ----

Tensor reshape(const Tensor& x, const Shape& shape) {
  require_defined("reshape", x, "the input");
  Shape target = reshape_target(x, shape);
  Tensor y = x.with_shape(target, x.byte_offset());
  if (should_record({&x})) {
    Shape original = x.shape();
    record(OpId::kCopy, {&x}, std::span<Tensor>(&y, 1),
           [original](GradOutputs g) -> Grads { return {reshape(g[0], original)}; });
  }
  return y;
}

Tensor slice_outer(const Tensor& x, int64_t begin, int64_t size) {
  require_defined("slice_outer", x, "the input");
  if (x.shape().rank() == 0) invalid("slice_outer", "cannot slice a scalar");
  int64_t n = x.shape()[0];
  if (begin < 0 || size < 0 || begin + size > n) {
    invalid("slice_outer", "rows [" + std::to_string(begin) + ", " + std::to_string(begin + size) +
                               ") are out of range for " + x.description());
  }
  Shape shape = x.shape();
  shape[0] = size;
  std::size_t row_bytes = n == 0 ? 0 : x.size_bytes() / static_cast<std::size_t>(n);
  Tensor y = x.with_shape(shape, x.byte_offset() + static_cast<std::size_t>(begin) * row_bytes);
  if (should_record({&x})) {
    std::vector<std::pair<int64_t, int64_t>> pads(x.shape().rank(), {0, 0});
    pads[0] = {begin, n - begin - size};
    record(OpId::kSlice, {&x}, std::span<Tensor>(&y, 1),
           [pads](GradOutputs g) -> Grads { return {pad(g[0], pads)}; });
  }
  return y;
}

Tensor slice(const Tensor& x, std::vector<int64_t> begin, std::vector<int64_t> size) {
  Backend& backend = common_backend("slice", {&x});
  std::size_t rank = x.shape().rank();
  if (begin.size() != rank || size.size() != rank) {
    invalid("slice",
            "begin and size need " + std::to_string(rank) + " entries for " + x.description());
  }
  SliceAttrs attrs;
  std::vector<int64_t> dims(rank);
  bool outer_only = true;
  for (std::size_t i = 0; i < rank; ++i) {
    int64_t d = x.shape()[i];
    int64_t s = size[i] == -1 ? d - begin[i] : size[i];
    if (begin[i] < 0 || s < 0 || begin[i] + s > d) {
      invalid("slice", "dimension " + std::to_string(i) + ": [" + std::to_string(begin[i]) + ", " +
                           std::to_string(begin[i] + s) + ") is out of range for " +
                           x.description());
    }
    attrs.begin[i] = begin[i];
    attrs.size[i] = s;
    dims[i] = s;
    if (i > 0 && (begin[i] != 0 || s != d)) outer_only = false;
  }
  if (rank > 0 && outer_only) return slice_outer(x, begin[0], dims[0]);
  Tensor y = run<1>(backend, OpId::kSlice, {x}, &attrs, Shape(dims), x.dtype());
  if (is_float(x.dtype()) && should_record({&x})) {
    std::vector<std::pair<int64_t, int64_t>> pads(rank);
    for (std::size_t i = 0; i < rank; ++i) pads[i] = {begin[i], x.shape()[i] - begin[i] - dims[i]};
    record(OpId::kSlice, {&x}, std::span<Tensor>(&y, 1),
           [pads](GradOutputs g) -> Grads { return {pad(g[0], pads)}; });
  }
  return y;
}

Tensor concat(std::span<const Tensor> inputs, int64_t axis) {
  if (inputs.empty()) invalid("concat", "needs at least one input");
  Backend* backend = nullptr;
  for (const Tensor& t : inputs) {
    require_defined("concat", t, "an input");
    if (backend == nullptr) backend = &t.backend();
    if (&t.backend() != backend) {
      invalid("concat", "inputs are on different devices: " + inputs[0].description() + " and " +
                            t.description());
    }
  }
  const Tensor& first = inputs[0];
  std::size_t rank = first.shape().rank();
  if (rank == 0) invalid("concat", "cannot concatenate scalars");
  AxisAttrs attrs{normalize_axis("concat", axis, rank, first)};
  std::size_t a = static_cast<std::size_t>(attrs.axis);
  Shape out = first.shape();
  out[a] = 0;
  for (const Tensor& t : inputs) {
    require_same_dtype("concat", first, t);
    bool fits = t.shape().rank() == rank;
    for (std::size_t i = 0; fits && i < rank; ++i)
      fits = i == a || t.shape()[i] == first.shape()[i];
    if (!fits) {
      invalid("concat", "shapes differ outside axis " + std::to_string(attrs.axis) + ": " +
                            first.description() + " and " + t.description());
    }
    out[a] += t.shape()[a];
  }
  Tensor y = Tensor::empty(*backend, out, first.dtype());
  launch(*backend, OpId::kConcat, inputs, std::span<Tensor>(&y, 1), &attrs);
  if (is_float(first.dtype()) && should_record(inputs)) {
    std::vector<int64_t> sizes;
    for (const Tensor& t : inputs) sizes.push_back(t.shape()[a]);
    record(OpId::kConcat, inputs, std::span<Tensor>(&y, 1),
           [sizes, attrs](GradOutputs g) -> Grads { return split(g[0], sizes, attrs.axis); });
  }
  return y;
}

std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t axis) {
  require_defined("split", x, "the input");
  std::size_t rank = x.shape().rank();
  std::size_t a = static_cast<std::size_t>(normalize_axis("split", axis, rank, x));
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != x.shape()[a]) {
    invalid("split", "sizes add up to " + std::to_string(total) + " but axis " + std::to_string(a) +
                         " of " + x.description() + " has " + std::to_string(x.shape()[a]));
  }
  std::vector<Tensor> parts;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    std::vector<int64_t> begin(rank, 0), size = x.shape().to_vector();
    begin[a] = offset;
    size[a] = s;
    parts.push_back(slice(x, begin, size));
    offset += s;
  }
  return parts;
}

Tensor transpose(const Tensor& x, std::vector<int64_t> perm) {
  Backend& backend = common_backend("transpose", {&x});
  std::size_t rank = x.shape().rank();
  if (perm.size() != rank) {
    invalid("transpose",
            "perm has " + std::to_string(perm.size()) + " entries for " + x.description());
  }
  PermAttrs attrs;
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> dims(rank), inverse(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    int64_t p = normalize_axis("transpose", perm[i], rank, x);
    if (seen[static_cast<std::size_t>(p)])
      invalid("transpose", "perm repeats axis " + std::to_string(p));
    seen[static_cast<std::size_t>(p)] = true;
    attrs.perm[i] = p;
    dims[i] = x.shape()[static_cast<std::size_t>(p)];
    inverse[static_cast<std::size_t>(p)] = static_cast<int64_t>(i);
  }
  Tensor y = run<1>(backend, OpId::kTranspose, {x}, &attrs, Shape(dims), x.dtype());
  if (is_float(x.dtype()) && should_record({&x})) {
    record(OpId::kTranspose, {&x}, std::span<Tensor>(&y, 1),
           [inverse](GradOutputs g) -> Grads { return {transpose(g[0], inverse)}; });
  }
  return y;
}

Tensor pad(const Tensor& x, std::vector<std::pair<int64_t, int64_t>> paddings, double value) {
  Backend& backend = common_backend("pad", {&x});
  std::size_t rank = x.shape().rank();
  if (paddings.size() != rank) {
    invalid("pad",
            "needs " + std::to_string(rank) + " (before, after) pairs for " + x.description());
  }
  PadAttrs attrs;
  attrs.value = value;
  std::vector<int64_t> dims(rank), begin(rank), size(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    if (paddings[i].first < 0 || paddings[i].second < 0) {
      invalid("pad", "negative padding on dimension " + std::to_string(i));
    }
    attrs.before[i] = paddings[i].first;
    attrs.after[i] = paddings[i].second;
    dims[i] = x.shape()[i] + paddings[i].first + paddings[i].second;
    begin[i] = paddings[i].first;
    size[i] = x.shape()[i];
  }
  Tensor y = run<1>(backend, OpId::kPad, {x}, &attrs, Shape(dims), x.dtype());
  if (is_float(x.dtype()) && should_record({&x})) {
    record(OpId::kPad, {&x}, std::span<Tensor>(&y, 1),
           [begin, size](GradOutputs g) -> Grads { return {slice(g[0], begin, size)}; });
  }
  return y;
}

Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis) {
  Backend& backend = common_backend("gather", {&params, &indices});
  if (!is_index(indices.dtype())) {
    invalid("gather", "indices must be i32 or i64, got " + indices.description());
  }
  std::size_t rank = params.shape().rank();
  if (rank == 0) invalid("gather", "cannot gather from a scalar");
  AxisAttrs attrs{normalize_axis("gather", axis, rank, params)};
  std::size_t a = static_cast<std::size_t>(attrs.axis);
  std::vector<int64_t> dims(params.shape().dims().begin(), params.shape().dims().begin() + a);
  for (int64_t d : indices.shape().dims()) dims.push_back(d);
  for (std::size_t i = a + 1; i < rank; ++i) dims.push_back(params.shape()[i]);
  Tensor y = run<2>(backend, OpId::kGather, {params, indices}, &attrs, Shape(dims), params.dtype());
  if (is_float(params.dtype()) && should_record({&params})) {
    Tensor is = detached(indices);
    Shape shape = params.shape();
    record(OpId::kGather, {&params, nullptr}, std::span<Tensor>(&y, 1),
           [is, shape, attrs](GradOutputs g) -> Grads {
             return {scatter_add(g[0], is, attrs.axis, shape), Tensor()};
           });
  }
  return y;
}

Tensor scatter_add(const Tensor& updates, const Tensor& indices, int64_t axis,
                   const Shape& output_shape) {
  Backend& backend = common_backend("scatter_add", {&updates, &indices});
  require_float("scatter_add", updates);
  if (!is_index(indices.dtype())) {
    invalid("scatter_add", "indices must be i32 or i64, got " + indices.description());
  }
  std::size_t rank = output_shape.rank();
  if (rank == 0) invalid("scatter_add", "the output cannot be a scalar");
  ScatterAttrs attrs;
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    invalid("scatter_add", "axis " + std::to_string(axis) + " is out of range for the output " +
                               output_shape.to_string());
  }
  attrs.axis = axis < 0 ? axis + r : axis;
  attrs.output_rank = rank;
  for (std::size_t i = 0; i < rank; ++i) attrs.output_shape[i] = output_shape[i];
  // updates must be output[:axis] + indices.shape + output[axis+1:]
  std::size_t a = static_cast<std::size_t>(attrs.axis);
  std::vector<int64_t> expected(output_shape.dims().begin(), output_shape.dims().begin() + a);
  for (int64_t d : indices.shape().dims()) expected.push_back(d);
  for (std::size_t i = a + 1; i < rank; ++i) expected.push_back(output_shape[i]);
  if (updates.shape() != Shape(expected)) {
    invalid("scatter_add", "updates " + updates.description() + " must have shape " +
                               Shape(expected).to_string() + " for indices " +
                               indices.description() + " into " + output_shape.to_string());
  }
  Tensor y =
      run<2>(backend, OpId::kScatterAdd, {updates, indices}, &attrs, output_shape, updates.dtype());
  if (should_record({&updates})) {
    Tensor is = detached(indices);
    record(OpId::kScatterAdd, {&updates, nullptr}, std::span<Tensor>(&y, 1),
           [is, attrs](GradOutputs g) -> Grads {
             return {gather(g[0], is, attrs.axis), Tensor()};
           });
  }
  return y;
}

Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value,
               DType dtype) {
  Backend& backend = common_backend("one_hot", {&indices});
  if (!is_index(indices.dtype())) {
    invalid("one_hot", "indices must be i32 or i64, got " + indices.description());
  }
  if (depth < 0) invalid("one_hot", "depth must be >= 0, got " + std::to_string(depth));
  OneHotAttrs attrs{depth, on_value, off_value, dtype};
  std::vector<int64_t> dims = indices.shape().to_vector();
  dims.push_back(depth);
  return run<1>(backend, OpId::kOneHot, {indices}, &attrs, Shape(dims), dtype);
}

std::pair<Tensor, Tensor> top_k(const Tensor& x, int64_t k) {
  Backend& backend = common_backend("top_k", {&x});
  if (!is_float(x.dtype()) && !is_int(x.dtype())) {
    invalid("top_k", "expects a float or integer tensor, got " + x.description());
  }
  if (x.shape().rank() == 0) invalid("top_k", "needs rank >= 1, got " + x.description());
  int64_t n = x.shape()[x.shape().rank() - 1];
  if (k < 0 || k > n) {
    invalid("top_k", "k = " + std::to_string(k) + " is out of range for " + x.description());
  }
  TopKAttrs attrs{k};
  Shape out = x.shape();
  out[out.rank() - 1] = k;
  std::array<Tensor, 2> outputs = {Tensor::empty(backend, out, x.dtype()),
                                   Tensor::empty(backend, out, DType::kI64)};
  std::array<Tensor, 1> inputs = {x};
  launch(backend, OpId::kTopK, inputs, outputs, &attrs);
  return {outputs[0], outputs[1]};
}

Tensor cast(const Tensor& x, DType dtype) {
  Backend& backend = common_backend("cast", {&x});
  if (x.dtype() == dtype) return x;
  CastAttrs attrs{dtype};
  Tensor y = run<1>(backend, OpId::kCast, {x}, &attrs, x.shape(), dtype);
  if (is_float(x.dtype()) && is_float(dtype) && should_record({&x})) {
    DType original = x.dtype();
    record(OpId::kCast, {&x}, std::span<Tensor>(&y, 1),
           [original](GradOutputs g) -> Grads { return {cast(g[0], original)}; });
  }
  return y;
}

Tensor copy(const Tensor& x) {
  Backend& backend = common_backend("copy", {&x});
  Tensor y = run<1>(backend, OpId::kCopy, {x}, nullptr, x.shape(), x.dtype());
  if (is_float(x.dtype()) && should_record({&x})) {
    record(OpId::kCopy, {&x}, std::span<Tensor>(&y, 1),
           [](GradOutputs g) -> Grads { return {g[0]}; });
  }
  return y;
}

Tensor l2_normalize(const Tensor& x, int64_t axis, double epsilon) {
  require_defined("l2_normalize", x, "the input");
  require_float("l2_normalize", x);
  Tensor sum_sq = reduce_sum(square(x), {axis}, /*keepdims=*/true);
  return mul(x, rsqrt(maximum(sum_sq, scalar_like(x, epsilon))));
}

Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const char* name = "sigmoid_cross_entropy_with_logits";
  Backend& backend = common_backend(name, {&labels, &logits});
  require_float(name, logits);
  require_same_dtype(name, logits, labels);
  require_same_shape(name, logits, labels);
  Tensor y = run<2>(backend, OpId::kSigmoidCrossEntropyWithLogits, {logits, labels}, nullptr,
                    logits.shape(), logits.dtype());
  if (should_record({&labels, &logits})) {
    Tensor ls = detached(labels), xs = detached(logits);
    record(OpId::kSigmoidCrossEntropyWithLogits, {&labels, &logits}, std::span<Tensor>(&y, 1),
           [ls, xs](GradOutputs g) -> Grads {
             Tensor dlogits = run<3>(xs.backend(), OpId::kSigmoidCrossEntropyWithLogitsGrad,
                                     {xs, ls, g[0]}, nullptr, xs.shape(), xs.dtype());
             return {neg(mul(g[0], xs)), dlogits};
           });
  }
  return y;
}

Tensor binary_cross_entropy(const Tensor& predictions, const Tensor& labels, double epsilon) {
  const char* name = "binary_cross_entropy";
  Backend& backend = common_backend(name, {&predictions, &labels});
  require_float(name, predictions);
  require_same_dtype(name, predictions, labels);
  require_same_shape(name, predictions, labels);
  if (predictions.shape().rank() == 0) invalid(name, "expects [..., classes], got a scalar");
  if (!KernelDispatch::has(backend, OpId::kBinaryCrossEntropy) ||
      !KernelDispatch::has(backend, OpId::kBinaryCrossEntropyGrad)) {
    // The same terms, composed: 1 - p is computed before eps is added, as the original's
    // left-to-right float arithmetic does.
    Tensor positive = mul(labels, log(add(predictions, epsilon)));
    Tensor one_minus_p = add(neg(predictions), 1.0);
    Tensor negative = mul(add(neg(labels), 1.0), log(add(one_minus_p, epsilon)));
    return reduce_sum(neg(add(positive, negative)), {-1});
  }
  std::vector<int64_t> dims = predictions.shape().to_vector();
  dims.pop_back();
  ScalarAttrs attrs{epsilon, 0.0};
  Tensor y = run<2>(backend, OpId::kBinaryCrossEntropy, {predictions, labels}, &attrs, Shape(dims),
                    predictions.dtype());
  if (should_record({&predictions, &labels})) {
    Tensor ps = detached(predictions), ls = detached(labels);
    const bool labels_need_grad = should_record({&labels});
    record(OpId::kBinaryCrossEntropy, {&predictions, &labels}, std::span<Tensor>(&y, 1),
           [ps, ls, epsilon, labels_need_grad](GradOutputs g) -> Grads {
             ScalarAttrs a{epsilon, 0.0};
             Tensor dp = run<3>(ps.backend(), OpId::kBinaryCrossEntropyGrad, {ps, ls, g[0]}, &a,
                                ps.shape(), ps.dtype());
             if (!labels_need_grad) return {dp, Tensor()};
             // d/dy: log((1 - p) + eps) - log(p + eps), per element, times the upstream.
             std::vector<int64_t> kept = g[0].shape().to_vector();
             kept.push_back(1);
             Tensor upstream = reshape(g[0], Shape(kept));
             Tensor dy =
                 mul(upstream, sub(log(add(add(neg(ps), 1.0), epsilon)), log(add(ps, epsilon))));
             return {dp, dy};
           });
  }
  return y;
}

Tensor l2_loss(const Tensor& x) {
  const char* name = "l2_loss";
  Backend& backend = common_backend(name, {&x});
  require_float(name, x);
  if (!KernelDispatch::has(backend, OpId::kL2Loss)) return mul(reduce_sum(square(x)), 0.5);
  Tensor y = run<1>(backend, OpId::kL2Loss, {x}, nullptr, Shape{}, x.dtype());
  if (should_record({&x})) {
    Tensor xs = detached(x);
    record(OpId::kL2Loss, {&x}, std::span<Tensor>(&y, 1),
           [xs](GradOutputs g) -> Grads { return {mul(xs, g[0])}; });
  }
  return y;
}

Tensor clip_by_norm(const Tensor& x, double clip) {
  const char* name = "clip_by_norm";
  Backend& backend = common_backend(name, {&x});
  require_float(name, x);
  if (!(clip > 0)) invalid(name, "clip_norm must be positive, got " + std::to_string(clip));
  if (!KernelDispatch::has(backend, OpId::kClipByNorm) || should_record({&x})) {
    // Composed (and differentiable): t * clip / max(||t||, clip).
    Tensor norm = sqrt(reduce_sum(square(x)));
    Tensor c = scalar_like(x, clip);
    return mul(x, div(c, maximum(norm, c)));
  }
  ScalarAttrs attrs{clip, 0.0};
  return run<1>(backend, OpId::kClipByNorm, {x}, &attrs, x.shape(), x.dtype());
}

// ---- Random ----

namespace {
Tensor random(OpId op, Backend& backend, const Shape& shape, Generator& generator, double a,
              double b, DType dtype) {
  if (!is_float(dtype)) {
    invalid(op_name(op), std::string("dtype must be f32 or f64, got ") + dtype_name(dtype));
  }
  uint64_t n = static_cast<uint64_t>(shape.num_elements());
  RandomAttrs attrs{generator.seed(), generator.take(random::random_blocks_used(op, dtype, n)), a,
                    b};
  Tensor out = Tensor::empty(backend, shape, dtype);
  launch(backend, op, {}, std::span<Tensor>(&out, 1), &attrs);
  return out;
}
}  // namespace

Tensor random_uniform(Backend& backend, const Shape& shape, Generator& generator, double low,
                      double high, DType dtype) {
  if (!(low < high)) invalid("random_uniform", "low must be below high");
  return random(OpId::kRandomUniform, backend, shape, generator, low, high, dtype);
}
Tensor random_normal(Backend& backend, const Shape& shape, Generator& generator, double mean,
                     double stddev, DType dtype) {
  return random(OpId::kRandomNormal, backend, shape, generator, mean, stddev, dtype);
}
Tensor truncated_normal(Backend& backend, const Shape& shape, Generator& generator, double mean,
                        double stddev, DType dtype) {
  return random(OpId::kTruncatedNormal, backend, shape, generator, mean, stddev, dtype);
}

// ---- Optimizer updates ----

void apply_gradient_descent(Tensor& var, const Tensor& grad, double learning_rate) {
  Backend& backend = common_backend("apply_gradient_descent", {&var, &grad});
  require_float("apply_gradient_descent", var);
  require_update_shapes("apply_gradient_descent", var, grad);
  OptimizerAttrs attrs;
  attrs.learning_rate = learning_rate;
  std::array<Tensor, 2> in = {var, grad};
  launch(backend, OpId::kApplyGradientDescent, in, {}, &attrs);
}

void apply_momentum(Tensor& var, Tensor& accum, const Tensor& grad, double learning_rate,
                    double momentum, bool use_nesterov) {
  Backend& backend = common_backend("apply_momentum", {&var, &accum, &grad});
  require_float("apply_momentum", var);
  require_update_shapes("apply_momentum", var, accum);
  require_update_shapes("apply_momentum", var, grad);
  OptimizerAttrs attrs;
  attrs.learning_rate = learning_rate;
  attrs.momentum = momentum;
  attrs.use_nesterov = use_nesterov;
  std::array<Tensor, 3> in = {var, accum, grad};
  launch(backend, OpId::kApplyMomentum, in, {}, &attrs);
}

void apply_adam(Tensor& var, Tensor& m, Tensor& v, const Tensor& grad, double learning_rate,
                double beta1, double beta2, double epsilon, int64_t step) {
  Backend& backend = common_backend("apply_adam", {&var, &m, &v, &grad});
  require_float("apply_adam", var);
  require_update_shapes("apply_adam", var, m);
  require_update_shapes("apply_adam", var, v);
  require_update_shapes("apply_adam", var, grad);
  if (step < 1) invalid("apply_adam", "step must be >= 1, got " + std::to_string(step));
  OptimizerAttrs attrs;
  attrs.learning_rate = learning_rate;
  attrs.beta1 = beta1;
  attrs.beta2 = beta2;
  attrs.epsilon = epsilon;
  attrs.beta1_power = std::pow(beta1, static_cast<double>(step));
  attrs.beta2_power = std::pow(beta2, static_cast<double>(step));
  std::array<Tensor, 4> in = {var, m, v, grad};
  launch(backend, OpId::kApplyAdam, in, {}, &attrs);
}

void assign(Tensor& target, const Tensor& value) {
  Backend& backend = common_backend("assign", {&target, &value});
  require_update_shapes("assign", target, value);
  std::array<Tensor, 1> in = {value};
  launch(backend, OpId::kCopy, in, std::span<Tensor>(&target, 1), nullptr);
}

}  // namespace ops
}  // namespace trainyard
