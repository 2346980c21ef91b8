// Op cases of the math family (op_cases.h; the ops are declared in core/src/engine/ops/math.cc):
// elementwise math: unary and binary ops, comparisons, their gradient helpers.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

void add_math_cases(std::vector<OpCase>& c) {
  using namespace ops;
  // Elementwise unary.
  unary(c, "neg", "neg", [](const Tensor& x) { return neg(x); });
  unary(c, "abs", "abs", [](const Tensor& x) { return abs(x); });
  unary(
      c, "sign", "sign", [](const Tensor& x) { return sign(x); }, -2, 2, false);
  c.push_back({"sign",
               "sign_with_zeros",
               {ints(Shape{12}, -2, 2)},
               [](Backend&, const Inputs& x) { return Outputs{sign(x[0])}; },
               kExact});
  unary(
      c, "exp", "exp", [](const Tensor& x) { return exp(x); }, -5, 5);
  c.push_back({"exp",
               "exp_f64",
               {of(DType::kF64, Shape{7}, -5, 5)},
               [](Backend&, const Inputs& x) { return Outputs{exp(x[0])}; },
               {1e-12, 1e-12}});
  unary(
      c, "log", "log", [](const Tensor& x) { return log(x); }, 0.1, 5);
  unary(
      c, "log1p", "log1p", [](const Tensor& x) { return log1p(x); }, -0.9, 5);
  unary(
      c, "sqrt", "sqrt", [](const Tensor& x) { return sqrt(x); }, 0.1, 5);
  unary(
      c, "rsqrt", "rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.1, 5);
  unary(c, "square", "square", [](const Tensor& x) { return square(x); });
  unary(
      c, "sigmoid", "sigmoid", [](const Tensor& x) { return sigmoid(x); }, -8, 8);
  unary(
      c, "tanh", "tanh", [](const Tensor& x) { return tanh(x); }, -4, 4);
  unary(c, "relu", "relu", [](const Tensor& x) { return relu(x); });
  unary(
      c, "relu6", "relu6", [](const Tensor& x) { return relu6(x); }, -2, 8);
  unary(c, "elu", "elu", [](const Tensor& x) { return elu(x, 0.7); });
  unary(
      c, "softplus", "softplus", [](const Tensor& x) { return softplus(x); }, -30, 30);
  unary(
      c, "pow_scalar", "pow_scalar", [](const Tensor& x) { return pow(x, 2.5); }, 0.1, 3);
  unary(c, "clip_by_value", "clip_by_value",
        [](const Tensor& x) { return clip_by_value(x, -1.0, 0.5); });
  c.push_back({"fill",
               "fill_f32",
               {},
               [](Backend& b, const Inputs&) {
                 return Outputs{full(b, Shape{3, 4}, 2.5)};
               },
               kExact});
  c.push_back(
      {"fill",
       "fill_i64",
       {},
       [](Backend& b, const Inputs&) { return Outputs{full(b, Shape{5}, -7.0, DType::kI64)}; },
       kExact});

  // Gradient helpers, through the kernel table: (y or x, dy) -> like dy.
  auto helper = [&](const std::string& op, std::string name, InputSpec first,
                    const void* attrs = nullptr) {
    c.push_back(
        {op, std::move(name), {first, f32(first.shape)}, [op, attrs](Backend& b, const Inputs& x) {
           return call_kernel(b, op, x, {{x[1].shape(), x[1].dtype()}}, attrs);
         }});
  };
  static const ScalarAttrs kEluAlpha{0.7, 0.0};
  helper("sigmoid_grad", "sigmoid_grad", f32(Shape{3, 5}, 0.05, 0.95));
  helper("tanh_grad", "tanh_grad", f32(Shape{3, 5}, -0.95, 0.95));
  helper("relu_grad", "relu_grad", f32(Shape{3, 5}));
  helper("relu6_grad", "relu6_grad", f32(Shape{3, 5}, -2, 8));
  helper("elu_grad", "elu_grad", f32(Shape{3, 5}), &kEluAlpha);

  // Elementwise binary.
  binary(
      c, "add", "add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, f32(Shape{3, 4}),
      f32(Shape{3, 4}));
  binary(
      c, "add", "add_broadcast", [](const Tensor& a, const Tensor& b) { return add(a, b); },
      f32(Shape{2, 3, 4}), f32(Shape{3, 1}));
  binary(
      c, "add", "add_scalar", [](const Tensor& a, const Tensor&) { return add(a, 1.5); },
      f32(Shape{7}), f32(Shape{1}));
  binary(
      c, "add", "add_i32", [](const Tensor& a, const Tensor& b) { return add(a, b); },
      ints(Shape{2, 5}, -100, 100, DType::kI32), ints(Shape{5}, -100, 100, DType::kI32), kExact,
      false);
  binary(c, "add", "add_f64", [](const Tensor& a, const Tensor& b) { return add(a, b); },
         of(DType::kF64, Shape{4, 3}), of(DType::kF64, Shape{4, 3}), {1e-14, 1e-14});
  binary(
      c, "sub", "sub_broadcast", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
      f32(Shape{3, 1}), f32(Shape{1, 4}));
  binary(
      c, "sub", "sub_i64", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
      ints(Shape{6}, -1000, 1000, DType::kI64), ints(Shape{6}, -1000, 1000, DType::kI64), kExact,
      false);
  binary(
      c, "mul", "mul_broadcast", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
      f32(Shape{3, 4}), f32(Shape{3, 1}));
  binary(
      c, "mul", "mul_scalar", [](const Tensor& a, const Tensor&) { return mul(a, -0.5); },
      f32(Shape{2, 3}), f32(Shape{1}));
  binary(
      c, "mul", "mul_i32", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
      ints(Shape{8}, -50, 50, DType::kI32), ints(Shape{8}, -50, 50, DType::kI32), kExact, false);
  binary(
      c, "div", "div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, f32(Shape{3, 4}),
      f32(Shape{4}, 0.5, 2.0));
  binary(
      c, "maximum", "maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
      f32(Shape{3, 4}), f32(Shape{3, 4}));
  binary(
      c, "maximum", "maximum_i64", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
      ints(Shape{6}, -9, 9, DType::kI64), ints(Shape{6}, -9, 9, DType::kI64), kExact, false);
  binary(
      c, "minimum", "minimum_broadcast",
      [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, f32(Shape{3, 4}),
      f32(Shape{4}));
  binary(
      c, "pow", "pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
      f32(Shape{3, 4}, 0.2, 3.0), f32(Shape{3, 4}, -2, 2));
  // Comparisons on integer-valued floats, so that ties occur.
  struct Cmp {
    std::string op;  // the op or composite name
    const char* name;
    Tensor (*f)(const Tensor&, const Tensor&);
  };
  for (const Cmp& cmp : {Cmp{"equal", "equal", &equal}, Cmp{"not_equal", "not_equal", &not_equal},
                         Cmp{"less", "less", &less}, Cmp{"less_equal", "less_equal", &less_equal},
                         Cmp{"greater", "greater", &greater},
                         Cmp{"greater_equal", "greater_equal", &greater_equal}}) {
    auto f = cmp.f;
    binary(
        c, cmp.op, cmp.name, [f](const Tensor& a, const Tensor& b) { return f(a, b); },
        ints(Shape{4, 5}, -2, 2), ints(Shape{5}, -2, 2), kExact, false);
  }
  binary(
      c, "equal", "equal_i32", [](const Tensor& a, const Tensor& b) { return equal(a, b); },
      ints(Shape{12}, 0, 3, DType::kI32), ints(Shape{12}, 0, 3, DType::kI32), kExact, false);
  c.push_back({"where",
               "where_broadcast",
               {ints(Shape{3, 4}, 0, 1, DType::kBool), f32(Shape{3, 4}), f32(Shape{4})},
               [](Backend&, const Inputs& x) { return Outputs{where(x[0], x[1], x[2])}; },
               kExact,
               true});
}

}  // namespace trainyard::conformance
