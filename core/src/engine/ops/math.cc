// The math ops. Elementwise ops: creation (fill), unary functions and their gradient helpers,
// binary arithmetic and comparisons with NumPy broadcasting, where.
#include <algorithm>
#include <array>
#include <numeric>

#include "engine/ops/common.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_MATH_OPS(X) \
  X(kNeg, "neg", 1, 1, NoAttrs, "x -> -x") \
  X(kAbs, "abs", 1, 1, NoAttrs, "x -> |x|") \
  X(kSign, "sign", 1, 1, NoAttrs, "x -> -1, 0 or 1") \
  X(kExp, "exp", 1, 1, NoAttrs, "x -> e^x") \
  X(kLog, "log", 1, 1, NoAttrs, "x -> ln x") \
  X(kLog1p, "log1p", 1, 1, NoAttrs, "x -> ln(1 + x)") \
  X(kSqrt, "sqrt", 1, 1, NoAttrs, "x -> sqrt(x)") \
  X(kRsqrt, "rsqrt", 1, 1, NoAttrs, "x -> 1 / sqrt(x)") \
  X(kSquare, "square", 1, 1, NoAttrs, "x -> x^2") \
  X(kSigmoid, "sigmoid", 1, 1, NoAttrs, "x -> 1 / (1 + e^-x)") \
  X(kTanh, "tanh", 1, 1, NoAttrs, "x -> tanh(x)") \
  X(kRelu, "relu", 1, 1, NoAttrs, "x -> max(x, 0)") \
  X(kRelu6, "relu6", 1, 1, NoAttrs, "x -> min(max(x, 0), 6)") \
  X(kElu, "elu", 1, 1, ScalarAttrs, "x, a = alpha -> x > 0 ? x : alpha * (exp(x) - 1)") \
  X(kSoftplus, "softplus", 1, 1, NoAttrs, "x -> log(1 + exp(x)), without overflow") \
  X(kPowScalar, "pow_scalar", 1, 1, ScalarAttrs, "x, a = exponent -> x^a") \
  X(kClipByValue, "clip_by_value", 1, 1, ScalarAttrs, "x, a = min, b = max -> min(max(x, a), b)") \
  X(kFill, "fill", 0, 1, FillAttrs, "() -> the output filled with value; any dtype") \
  X(kSigmoidGrad, "sigmoid_grad", 2, 1, NoAttrs, "(y, dy) -> dy * y * (1 - y)") \
  X(kTanhGrad, "tanh_grad", 2, 1, NoAttrs, "(y, dy) -> dy * (1 - y^2)") \
  X(kReluGrad, "relu_grad", 2, 1, NoAttrs, "(x, dy) -> x > 0 ? dy : 0") \
  X(kRelu6Grad, "relu6_grad", 2, 1, NoAttrs, "(x, dy) -> 0 < x < 6 ? dy : 0") \
  X(kEluGrad, "elu_grad", 2, 1, ScalarAttrs, "(x, dy), a = alpha -> x > 0 ? dy : dy * alpha * exp(x)") \
  X(kAdd, "add", 2, 1, NoAttrs, "(a, b) -> a + b, NumPy broadcasting; float, i32, i64") \
  X(kSub, "sub", 2, 1, NoAttrs, "(a, b) -> a - b, broadcasting; float, i32, i64") \
  X(kMul, "mul", 2, 1, NoAttrs, "(a, b) -> a * b, broadcasting; float, i32, i64") \
  X(kDiv, "div", 2, 1, NoAttrs, "(a, b) -> a / b, broadcasting; float") \
  X(kMaximum, "maximum", 2, 1, NoAttrs, "(a, b) -> max(a, b), broadcasting; float, i32, i64") \
  X(kMinimum, "minimum", 2, 1, NoAttrs, "(a, b) -> min(a, b), broadcasting; float, i32, i64") \
  X(kPow, "pow", 2, 1, NoAttrs, "(a, b) -> a^b, broadcasting; float") \
  X(kEqual, "equal", 2, 1, NoAttrs, "(a, b) -> bool a == b, broadcasting; any numeric or bool") \
  X(kNotEqual, "not_equal", 2, 1, NoAttrs, "(a, b) -> bool a != b, broadcasting") \
  X(kLess, "less", 2, 1, NoAttrs, "(a, b) -> bool a < b, broadcasting") \
  X(kLessEqual, "less_equal", 2, 1, NoAttrs, "(a, b) -> bool a <= b, broadcasting") \
  X(kGreater, "greater", 2, 1, NoAttrs, "(a, b) -> bool a > b, broadcasting") \
  X(kGreaterEqual, "greater_equal", 2, 1, NoAttrs, "(a, b) -> bool a >= b, broadcasting") \
  X(kWhere, "where", 3, 1, NoAttrs, "(condition bool, a, b) -> condition ? a : b, broadcasting all three")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(math, TRAINYARD_MATH_OPS)

namespace {
using namespace ops_internal;

// ---- Unary ----

Tensor unary_kernel(const OpDef& op, const Tensor& x, const ScalarAttrs& attrs) {
  Backend& backend = common_backend(op.name(), {&x});
  require_float(op.name(), x);
  return run<1>(backend, op, {x}, &attrs, x.shape(), x.dtype());
}

// Runs a unary op and records `grad(x, y, g)`.
template <class GradFn>
Tensor unary(const OpDef& op, const Tensor& x, GradFn grad, ScalarAttrs attrs = {}) {
  Tensor y = unary_kernel(op, x, attrs);
  if (should_record({&x})) {
    Tensor xs = detached(x), ys = detached(y);
    record(op.name(), {&x}, std::span<Tensor>(&y, 1),
           [xs, ys, grad](GradOutputs g) -> Grads { return {grad(xs, ys, g[0])}; });
  }
  return y;
}

Tensor grad_helper(const OpDef& op, const Tensor& a, const Tensor& dy, double alpha = 0.0) {
  ScalarAttrs attrs{alpha, 0.0};
  return run<2>(a.backend(), op, {a, dy}, &attrs, dy.shape(), dy.dtype());
}

// ---- Binary ----

enum class BinaryKind { kArithmetic, kFloatOnly, kComparison };

Tensor binary_kernel(const OpDef& op, const Tensor& a, const Tensor& b, BinaryKind kind) {
  const char* name = op.name();
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
Tensor binary(const OpDef& op, const Tensor& a, const Tensor& b, BinaryKind kind, GradFn grad) {
  Tensor y = binary_kernel(op, a, b, kind);
  if (is_float(y.dtype()) && should_record({&a, &b})) {
    Tensor as = detached(a), bs = detached(b), ys = detached(y);
    record(op.name(), {&a, &b}, std::span<Tensor>(&y, 1),
           [as, bs, ys, grad](GradOutputs g) -> Grads {
             auto [ga, gb] = grad(as, bs, ys, g[0]);
             return {ga.defined() ? sum_to(ga, as.shape()) : ga,
                     gb.defined() ? sum_to(gb, bs.shape()) : gb};
           });
  }
  return y;
}

}  // namespace

Tensor ops_internal::activation_grad(Activation activation, const Tensor& y, const Tensor& dy) {
  switch (activation) {
    case Activation::kNone:
      return dy;
    case Activation::kRelu:
      return grad_helper(kReluGrad, y, dy);
    case Activation::kSigmoid:
      return grad_helper(kSigmoidGrad, y, dy);
    case Activation::kTanh:
      return grad_helper(kTanhGrad, y, dy);
  }
  return dy;
}

namespace ops {
using namespace ops_internal;

// ---- Creation ----

Tensor full(Backend& backend, const Shape& shape, double value, DType dtype) {
  FillAttrs attrs{value};
  Tensor out = Tensor::empty(backend, shape, dtype);
  launch(backend, kFill, {}, std::span<Tensor>(&out, 1), &attrs);
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
  return unary(kNeg, x, [](const Tensor&, const Tensor&, const Tensor& g) { return neg(g); });
}
Tensor abs(const Tensor& x) {
  return unary(kAbs, x,
               [](const Tensor& x, const Tensor&, const Tensor& g) { return mul(g, sign(x)); });
}
Tensor sign(const Tensor& x) { return unary_kernel(kSign, x, {}); }
Tensor exp(const Tensor& x) {
  return unary(kExp, x, [](const Tensor&, const Tensor& y, const Tensor& g) { return mul(g, y); });
}
Tensor log(const Tensor& x) {
  return unary(kLog, x, [](const Tensor& x, const Tensor&, const Tensor& g) { return div(g, x); });
}
Tensor log1p(const Tensor& x) {
  return unary(kLog1p, x,
               [](const Tensor& x, const Tensor&, const Tensor& g) { return div(g, add(x, 1.0)); });
}
Tensor sqrt(const Tensor& x) {
  return unary(kSqrt, x,
               [](const Tensor&, const Tensor& y, const Tensor& g) { return div(g, mul(y, 2.0)); });
}
Tensor rsqrt(const Tensor& x) {
  return unary(kRsqrt, x, [](const Tensor&, const Tensor& y, const Tensor& g) {
    return mul(mul(g, mul(y, mul(y, y))), -0.5);
  });
}
Tensor square(const Tensor& x) {
  return unary(kSquare, x,
               [](const Tensor& x, const Tensor&, const Tensor& g) { return mul(g, mul(x, 2.0)); });
}
Tensor sigmoid(const Tensor& x) {
  return unary(kSigmoid, x, [](const Tensor&, const Tensor& y, const Tensor& g) {
    return grad_helper(kSigmoidGrad, y, g);
  });
}
Tensor tanh(const Tensor& x) {
  return unary(kTanh, x, [](const Tensor&, const Tensor& y, const Tensor& g) {
    return grad_helper(kTanhGrad, y, g);
  });
}
Tensor relu(const Tensor& x) {
  return unary(kRelu, x, [](const Tensor& x, const Tensor&, const Tensor& g) {
    return grad_helper(kReluGrad, x, g);
  });
}
Tensor relu6(const Tensor& x) {
  return unary(kRelu6, x, [](const Tensor& x, const Tensor&, const Tensor& g) {
    return grad_helper(kRelu6Grad, x, g);
  });
}
Tensor elu(const Tensor& x, double alpha) {
  return unary(kElu, x,
               [alpha](const Tensor& x, const Tensor&, const Tensor& g) {
                 return grad_helper(kEluGrad, x, g, alpha);
               },
               {alpha, 0.0});
}
Tensor softplus(const Tensor& x) {
  return unary(kSoftplus, x,
               [](const Tensor& x, const Tensor&, const Tensor& g) { return mul(g, sigmoid(x)); });
}
Tensor pow(const Tensor& x, double exponent) {
  return unary(kPowScalar, x,
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
  return unary(kClipByValue, x,
               [min_value, max_value](const Tensor& x, const Tensor&, const Tensor& g) {
                 Tensor inside = mul(cast(greater_equal(x, scalar_like(x, min_value)), x.dtype()),
                                     cast(less_equal(x, scalar_like(x, max_value)), x.dtype()));
                 return mul(g, inside);
               },
               {min_value, max_value});
}

// ---- Binary ----

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(kAdd, a, b, BinaryKind::kArithmetic,
                [](const Tensor&, const Tensor&, const Tensor&, const Tensor& g) {
                  return std::pair{g, g};
                });
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(kSub, a, b, BinaryKind::kArithmetic,
                [](const Tensor&, const Tensor&, const Tensor&, const Tensor& g) {
                  return std::pair{g, neg(g)};
                });
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(kMul, a, b, BinaryKind::kArithmetic,
                [](const Tensor& a, const Tensor& b, const Tensor&, const Tensor& g) {
                  return std::pair{mul(g, b), mul(g, a)};
                });
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary(kDiv, a, b, BinaryKind::kFloatOnly,
                [](const Tensor&, const Tensor& b, const Tensor& y, const Tensor& g) {
                  Tensor ga = div(g, b);
                  return std::pair{ga, neg(mul(ga, y))};
                });
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary(kMaximum, a, b, BinaryKind::kArithmetic,
                [](const Tensor& a, const Tensor& b, const Tensor&, const Tensor& g) {
                  Tensor take_a = cast(greater_equal(a, b), g.dtype());
                  return std::pair{mul(g, take_a), sub(g, mul(g, take_a))};
                });
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary(kMinimum, a, b, BinaryKind::kArithmetic,
                [](const Tensor& a, const Tensor& b, const Tensor&, const Tensor& g) {
                  Tensor take_a = cast(less_equal(a, b), g.dtype());
                  return std::pair{mul(g, take_a), sub(g, mul(g, take_a))};
                });
}
Tensor pow(const Tensor& a, const Tensor& b) {
  return binary(kPow, a, b, BinaryKind::kFloatOnly,
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
  return binary_kernel(kEqual, a, b, BinaryKind::kComparison);
}
Tensor not_equal(const Tensor& a, const Tensor& b) {
  return binary_kernel(kNotEqual, a, b, BinaryKind::kComparison);
}
Tensor less(const Tensor& a, const Tensor& b) {
  return binary_kernel(kLess, a, b, BinaryKind::kComparison);
}
Tensor less_equal(const Tensor& a, const Tensor& b) {
  return binary_kernel(kLessEqual, a, b, BinaryKind::kComparison);
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return binary_kernel(kGreater, a, b, BinaryKind::kComparison);
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return binary_kernel(kGreaterEqual, a, b, BinaryKind::kComparison);
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
  Tensor y = run<3>(backend, kWhere, {condition, a, b}, nullptr, shape, a.dtype());
  if (is_float(a.dtype()) && should_record({&a, &b})) {
    Tensor cs = detached(condition), as = detached(a), bs = detached(b);
    record(kWhere.name(), {nullptr, &a, &b}, std::span<Tensor>(&y, 1),
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

}  // namespace ops
}  // namespace trainyard
