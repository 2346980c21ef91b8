// Backend checks: every op the backend registers, run on the backend and on the independent
// reference backend (reference_backend.h: plain double-precision loops sharing no code with
// any backend) with the same inputs, benchdnn's way: forward outputs within per-case
// tolerances, the gradient rule (which runs the backward ops on each backend) against the
// reference's, and a rerun that must reproduce every output bit for bit. Plus memory round
// trips. The cpu backend is checked against the reference like any other.
//
// Ops the core exposes are called through ops::; the gradient helpers that only gradient rules
// use (sigmoid_grad, conv2d_backward_input, ...) are called through the backend's kernel table
// with outputs allocated here, as the core would.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "conformance.h"
#include "reference_backend.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {
namespace {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;

struct Tolerance {
  double atol = 1e-6;
  double rtol = 1e-5;
};

constexpr Tolerance kExact{0.0, 0.0};
constexpr Tolerance kElementwise{1e-6, 1e-5};
constexpr Tolerance kAccumulating{1e-5, 1e-4};  // matmul, conv, reductions: summation order
constexpr Tolerance kGradient{1e-5, 1e-4};

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

InputSpec f32(Shape shape, double low = -2.0, double high = 2.0) {
  return {std::move(shape), DType::kF32, low, high, false, {}};
}
InputSpec of(DType dtype, Shape shape, double low = -2.0, double high = 2.0) {
  return {std::move(shape), dtype, low, high, dtype != DType::kF32 && dtype != DType::kF64, {}};
}
InputSpec ints(Shape shape, double low, double high, DType dtype = DType::kF32) {
  return {std::move(shape), dtype, low, high, true, {}};
}
InputSpec fixed(Shape shape, DType dtype, std::vector<double> values) {
  return {std::move(shape), dtype, 0, 0, false, std::move(values)};
}

constexpr const char* kNoKernel = "conformance: the kernel table has no ";

// Calls `op`'s kernel on `backend` directly, with outputs of the given shapes and dtypes.
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

std::vector<OpCase> make_cases() {
  using namespace ops;
  std::vector<OpCase> c;
  auto unary = [&](const std::string& op, std::string name, std::function<Tensor(const Tensor&)> f,
                   double low = -2.0, double high = 2.0, bool differentiable = true) {
    c.push_back({op,
                 std::move(name),
                 {f32(Shape{3, 5}, low, high)},
                 [f](Backend&, const Inputs& x) { return Outputs{f(x[0])}; },
                 kElementwise,
                 differentiable});
  };
  auto binary = [&](const std::string& op, std::string name,
                    std::function<Tensor(const Tensor&, const Tensor&)> f, InputSpec a, InputSpec b,
                    Tolerance tol = kElementwise, bool differentiable = true) {
    c.push_back({op,
                 std::move(name),
                 {std::move(a), std::move(b)},
                 [f](Backend&, const Inputs& x) { return Outputs{f(x[0], x[1])}; },
                 tol,
                 differentiable});
  };

  // Elementwise unary.
  unary("neg", "neg", [](const Tensor& x) { return neg(x); });
  unary("abs", "abs", [](const Tensor& x) { return abs(x); });
  unary(
      "sign", "sign", [](const Tensor& x) { return sign(x); }, -2, 2, false);
  c.push_back({"sign",
               "sign_with_zeros",
               {ints(Shape{12}, -2, 2)},
               [](Backend&, const Inputs& x) { return Outputs{sign(x[0])}; },
               kExact});
  unary(
      "exp", "exp", [](const Tensor& x) { return exp(x); }, -5, 5);
  c.push_back({"exp",
               "exp_f64",
               {of(DType::kF64, Shape{7}, -5, 5)},
               [](Backend&, const Inputs& x) { return Outputs{exp(x[0])}; },
               {1e-12, 1e-12}});
  unary(
      "log", "log", [](const Tensor& x) { return log(x); }, 0.1, 5);
  unary(
      "log1p", "log1p", [](const Tensor& x) { return log1p(x); }, -0.9, 5);
  unary(
      "sqrt", "sqrt", [](const Tensor& x) { return sqrt(x); }, 0.1, 5);
  unary(
      "rsqrt", "rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.1, 5);
  unary("square", "square", [](const Tensor& x) { return square(x); });
  unary(
      "sigmoid", "sigmoid", [](const Tensor& x) { return sigmoid(x); }, -8, 8);
  unary(
      "tanh", "tanh", [](const Tensor& x) { return tanh(x); }, -4, 4);
  unary("relu", "relu", [](const Tensor& x) { return relu(x); });
  unary(
      "relu6", "relu6", [](const Tensor& x) { return relu6(x); }, -2, 8);
  unary("elu", "elu", [](const Tensor& x) { return elu(x, 0.7); });
  unary(
      "softplus", "softplus", [](const Tensor& x) { return softplus(x); }, -30, 30);
  unary(
      "pow_scalar", "pow_scalar", [](const Tensor& x) { return pow(x, 2.5); }, 0.1, 3);
  unary("clip_by_value", "clip_by_value",
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
      "add", "add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, f32(Shape{3, 4}),
      f32(Shape{3, 4}));
  binary(
      "add", "add_broadcast", [](const Tensor& a, const Tensor& b) { return add(a, b); },
      f32(Shape{2, 3, 4}), f32(Shape{3, 1}));
  binary(
      "add", "add_scalar", [](const Tensor& a, const Tensor&) { return add(a, 1.5); },
      f32(Shape{7}), f32(Shape{1}));
  binary(
      "add", "add_i32", [](const Tensor& a, const Tensor& b) { return add(a, b); },
      ints(Shape{2, 5}, -100, 100, DType::kI32), ints(Shape{5}, -100, 100, DType::kI32), kExact,
      false);
  binary("add", "add_f64", [](const Tensor& a, const Tensor& b) { return add(a, b); },
         of(DType::kF64, Shape{4, 3}), of(DType::kF64, Shape{4, 3}), {1e-14, 1e-14});
  binary(
      "sub", "sub_broadcast", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
      f32(Shape{3, 1}), f32(Shape{1, 4}));
  binary(
      "sub", "sub_i64", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
      ints(Shape{6}, -1000, 1000, DType::kI64), ints(Shape{6}, -1000, 1000, DType::kI64), kExact,
      false);
  binary(
      "mul", "mul_broadcast", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
      f32(Shape{3, 4}), f32(Shape{3, 1}));
  binary(
      "mul", "mul_scalar", [](const Tensor& a, const Tensor&) { return mul(a, -0.5); },
      f32(Shape{2, 3}), f32(Shape{1}));
  binary(
      "mul", "mul_i32", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
      ints(Shape{8}, -50, 50, DType::kI32), ints(Shape{8}, -50, 50, DType::kI32), kExact, false);
  binary(
      "div", "div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, f32(Shape{3, 4}),
      f32(Shape{4}, 0.5, 2.0));
  binary(
      "maximum", "maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
      f32(Shape{3, 4}), f32(Shape{3, 4}));
  binary(
      "maximum", "maximum_i64", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
      ints(Shape{6}, -9, 9, DType::kI64), ints(Shape{6}, -9, 9, DType::kI64), kExact, false);
  binary(
      "minimum", "minimum_broadcast",
      [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, f32(Shape{3, 4}),
      f32(Shape{4}));
  binary(
      "pow", "pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
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
        cmp.op, cmp.name, [f](const Tensor& a, const Tensor& b) { return f(a, b); },
        ints(Shape{4, 5}, -2, 2), ints(Shape{5}, -2, 2), kExact, false);
  }
  binary(
      "equal", "equal_i32", [](const Tensor& a, const Tensor& b) { return equal(a, b); },
      ints(Shape{12}, 0, 3, DType::kI32), ints(Shape{12}, 0, 3, DType::kI32), kExact, false);
  c.push_back({"where",
               "where_broadcast",
               {ints(Shape{3, 4}, 0, 1, DType::kBool), f32(Shape{3, 4}), f32(Shape{4})},
               [](Backend&, const Inputs& x) { return Outputs{where(x[0], x[1], x[2])}; },
               kExact,
               true});

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

  // Linear algebra.
  auto mm = [&](std::string name, Shape a, Shape b, bool ta, bool tb) {
    binary(
        "matmul", std::move(name),
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
  binary("matmul", "matmul_f64", [](const Tensor& x, const Tensor& y) { return matmul(x, y); },
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

  // Convolution and pooling.
  auto conv = [&](std::string name, Shape input, Shape filter,
                  std::function<Tensor(const Tensor&, const Tensor&)> f) {
    binary("conv2d", std::move(name), std::move(f), f32(std::move(input)), f32(std::move(filter)),
           kAccumulating);
  };
  conv("conv2d_valid", Shape{2, 5, 5, 3}, Shape{3, 3, 3, 4},
       [](const Tensor& x, const Tensor& w) { return conv2d(x, w); });
  conv("conv2d_same_stride2", Shape{1, 7, 6, 2}, Shape{3, 2, 2, 3},
       [](const Tensor& x, const Tensor& w) {
         return conv2d(x, w, {2, 2}, Padding2D::same());
       });
  conv("conv2d_dilated_groups", Shape{1, 6, 6, 4}, Shape{2, 2, 2, 4},
       [](const Tensor& x, const Tensor& w) {
         return conv2d(x, w, {1, 1}, Padding2D::explicit_pads(1, 0, 0, 1), {2, 2}, 2);
       });
  conv("depthwise_conv2d", Shape{1, 5, 5, 3}, Shape{3, 3, 3, 2},
       [](const Tensor& x, const Tensor& w) {
         return depthwise_conv2d(x, w, {1, 1}, Padding2D::same());
       });
  // The backward kernels, stride 1 with padding 1, and stride 2 valid with two groups.
  static const Conv2DAttrs kConvPad1 = [] {
    Conv2DAttrs a;
    a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 1;
    a.input_shape = {2, 5, 5, 3};
    a.filter_shape = {3, 3, 3, 4};
    return a;
  }();
  static const Conv2DAttrs kConvStride2Groups = [] {
    Conv2DAttrs a;
    a.stride_h = a.stride_w = 2;
    a.groups = 2;
    a.input_shape = {2, 7, 6, 4};
    a.filter_shape = {3, 2, 2, 6};
    return a;
  }();
  for (auto [attrs, suffix, dy] :
       {std::tuple{&kConvPad1, "pad1", Shape{2, 5, 5, 4}},
        std::tuple{&kConvStride2Groups, "stride2_groups", Shape{2, 3, 3, 6}}}) {
    const Conv2DAttrs* a = attrs;
    Shape input(a->input_shape), filter(a->filter_shape);
    c.push_back({"conv2d_backward_input",
                 std::string("conv2d_backward_input_") + suffix,
                 {f32(dy), f32(filter)},
                 [a, input](Backend& b, const Inputs& x) {
                   return call_kernel(b, "conv2d_backward_input", x, {{input, DType::kF32}}, a);
                 },
                 kAccumulating});
    c.push_back({"conv2d_backward_filter",
                 std::string("conv2d_backward_filter_") + suffix,
                 {f32(input), f32(dy)},
                 [a, filter](Backend& b, const Inputs& x) {
                   return call_kernel(b, "conv2d_backward_filter", x, {{filter, DType::kF32}}, a);
                 },
                 kAccumulating});
  }
  c.push_back({"max_pool2d",
               "max_pool2d",
               {f32(Shape{2, 4, 4, 3})},
               [](Backend&, const Inputs& x) {
                 return Outputs{max_pool2d(x[0], {2, 2}, {2, 2})};
               },
               kExact,
               true});
  c.push_back({"max_pool2d",
               "max_pool2d_same",
               {f32(Shape{1, 5, 5, 2})},
               [](Backend&, const Inputs& x) {
                 return Outputs{max_pool2d(x[0], {3, 3}, {2, 2}, Padding2D::same())};
               },
               kExact,
               true});
  c.push_back({"avg_pool2d",
               "avg_pool2d_same",
               {f32(Shape{1, 5, 4, 2})},
               [](Backend&, const Inputs& x) {
                 return Outputs{avg_pool2d(x[0], {3, 3}, {2, 2}, Padding2D::same())};
               },
               kElementwise,
               true});
  c.push_back({"avg_pool2d",
               "avg_pool2d_valid",
               {f32(Shape{2, 6, 6, 3})},
               [](Backend&, const Inputs& x) {
                 return Outputs{avg_pool2d(x[0], {2, 3}, {2, 3})};
               },
               kElementwise,
               true});
  static const PoolAttrs kPool2x2 = [] {
    PoolAttrs a;
    a.window_h = a.window_w = a.stride_h = a.stride_w = 2;
    a.input_shape = {2, 4, 4, 3};
    return a;
  }();
  static const PoolAttrs kPool3x3Same = [] {
    PoolAttrs a;
    a.window_h = a.window_w = 3;
    a.stride_h = a.stride_w = 2;
    a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 1;
    a.input_shape = {1, 5, 5, 2};
    return a;
  }();
  for (auto [attrs, suffix, dy] : {std::tuple{&kPool2x2, "2x2", Shape{2, 2, 2, 3}},
                                   std::tuple{&kPool3x3Same, "3x3_padded", Shape{1, 3, 3, 2}}}) {
    const PoolAttrs* a = attrs;
    Shape input(a->input_shape);
    c.push_back({"max_pool2d_grad",
                 std::string("max_pool_grad_") + suffix,
                 {f32(input), f32(dy)},
                 [a, input](Backend& b, const Inputs& x) {
                   return call_kernel(b, "max_pool2d_grad", x, {{input, DType::kF32}}, a);
                 },
                 kElementwise});
    c.push_back({"avg_pool2d_grad",
                 std::string("avg_pool_grad_") + suffix,
                 {f32(dy)},
                 [a, input](Backend& b, const Inputs& x) {
                   return call_kernel(b, "avg_pool2d_grad", x, {{input, DType::kF32}}, a);
                 },
                 kElementwise});
  }

  // Batch normalization.
  c.push_back({"batch_norm_training",
               "batch_norm_training",
               {f32(Shape{6, 4}), f32(Shape{4}, 0.5, 1.5), f32(Shape{4})},
               [](Backend&, const Inputs& x) {
                 BatchNormResult r = batch_norm_training(x[0], x[1], x[2], 1e-3);
                 return Outputs{r.y, r.batch_mean, r.batch_variance};
               },
               kAccumulating,
               true});
  c.push_back({"batch_norm_training",
               "batch_norm_training_rank4",
               {f32(Shape{2, 3, 3, 5}), f32(Shape{5}, 0.5, 1.5), f32(Shape{5})},
               [](Backend&, const Inputs& x) {
                 BatchNormResult r = batch_norm_training(x[0], x[1], x[2], 1e-3);
                 return Outputs{r.y, r.batch_mean, r.batch_variance};
               },
               kAccumulating,
               true});
  c.push_back({"batch_norm_inference",
               "batch_norm_inference",
               {f32(Shape{6, 4}), f32(Shape{4}, 0.5, 1.5), f32(Shape{4}), f32(Shape{4}),
                f32(Shape{4}, 0.5, 2.0)},
               [](Backend&, const Inputs& x) {
                 return Outputs{batch_norm_inference(x[0], x[1], x[2], x[3], x[4], 1e-3)};
               },
               kElementwise,
               true});
  static const BatchNormAttrs kBatchNorm{1e-3};
  c.push_back({"batch_norm_grad",
               "batch_norm_grad",
               {f32(Shape{6, 4}), f32(Shape{4}, 0.5, 1.5), f32(Shape{4}, -0.5, 0.5),
                f32(Shape{4}, 0.5, 2.0), f32(Shape{6, 4})},
               [](Backend& b, const Inputs& x) {
                 return call_kernel(b, "batch_norm_grad", x,
                                    {{x[0].shape(), DType::kF32},
                                     {x[1].shape(), DType::kF32},
                                     {x[1].shape(), DType::kF32}},
                                    &kBatchNorm);
               },
               kAccumulating});

  // The fused loss.
  binary(
      "sigmoid_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
      [](const Tensor& labels, const Tensor& logits) {
        return sigmoid_cross_entropy_with_logits(labels, logits);
      },
      f32(Shape{3, 5}, 0.0, 1.0), f32(Shape{3, 5}, -20, 20));
  c.push_back({"sigmoid_cross_entropy_with_logits_grad",
               "sigmoid_cross_entropy_with_logits_grad",
               {f32(Shape{3, 5}, -20, 20), f32(Shape{3, 5}, 0.0, 1.0), f32(Shape{3, 5})},
               [](Backend& b, const Inputs& x) {
                 return call_kernel(b, "sigmoid_cross_entropy_with_logits_grad", x,
                                    {{x[0].shape(), DType::kF32}}, nullptr);
               }});

  // The fused losses and norms on probabilities (YouTube-8M CrossEntropyLoss, tf.nn.l2_loss,
  // tf.clip_by_norm). Without a kernel the core composes them of other ops.
  binary(
      "binary_cross_entropy", "binary_cross_entropy",
      [](const Tensor& p, const Tensor& y) { return binary_cross_entropy(p, y, 1e-5); },
      f32(Shape{3, 5}, 0.02, 0.98), ints(Shape{3, 5}, 0, 1), kAccumulating);
  static const ScalarAttrs kBceEpsilon{1e-5, 0.0};
  c.push_back({"binary_cross_entropy_grad",
               "binary_cross_entropy_grad",
               {f32(Shape{3, 5}, 0.02, 0.98), ints(Shape{3, 5}, 0, 1), f32(Shape{3})},
               [](Backend& b, const Inputs& x) {
                 return call_kernel(b, "binary_cross_entropy_grad", x,
                                    {{x[0].shape(), DType::kF32}}, &kBceEpsilon);
               }});
  c.push_back({"l2_loss",
               "l2_loss",
               {f32(Shape{7, 9})},
               [](Backend&, const Inputs& x) { return Outputs{l2_loss(x[0])}; },
               kAccumulating,
               true});
  for (double clip : {1.0, 100.0}) {
    c.push_back({"clip_by_norm",
                 clip < 10 ? "clip_by_norm_clipped" : "clip_by_norm_unclipped",
                 {f32(Shape{4, 5})},
                 [clip](Backend&, const Inputs& x) { return Outputs{clip_by_norm(x[0], clip)}; },
                 kAccumulating,
                 true});
  }

  // Data movement.
  c.push_back({"concat",
               "concat_axis1",
               {f32(Shape{2, 3}), f32(Shape{2, 2})},
               [](Backend&, const Inputs& x) { return Outputs{concat(x, 1)}; },
               kExact,
               true});
  c.push_back({"concat",
               "concat_axis0_i32",
               {ints(Shape{1, 3}, -9, 9, DType::kI32), ints(Shape{2, 3}, -9, 9, DType::kI32),
                ints(Shape{1, 3}, -9, 9, DType::kI32)},
               [](Backend&, const Inputs& x) { return Outputs{concat(x, 0)}; },
               kExact});
  c.push_back({"slice",
               "slice",
               {f32(Shape{3, 4, 2})},
               [](Backend&, const Inputs& x) {
                 return Outputs{slice(x[0], {1, 1, 0}, {2, -1, 1})};
               },
               kExact,
               true});
  c.push_back({"transpose",
               "transpose_rank3",
               {f32(Shape{2, 3, 4})},
               [](Backend&, const Inputs& x) {
                 return Outputs{transpose(x[0], {2, 0, 1})};
               },
               kExact,
               true});
  c.push_back({"transpose",
               "transpose_u8",
               {of(DType::kU8, Shape{3, 5}, 0, 255)},
               [](Backend&, const Inputs& x) {
                 return Outputs{transpose(x[0], {1, 0})};
               },
               kExact});
  c.push_back({"pad",
               "pad",
               {f32(Shape{2, 3})},
               [](Backend&, const Inputs& x) {
                 return Outputs{pad(x[0], {{1, 0}, {0, 2}}, 0.5)};
               },
               kExact,
               true});
  c.push_back({"gather",
               "gather_axis0_i64",
               {f32(Shape{4, 3}), fixed(Shape{2, 2}, DType::kI64, {3, 0, 3, 1})},
               [](Backend&, const Inputs& x) { return Outputs{gather(x[0], x[1], 0)}; },
               kExact,
               true});
  c.push_back({"gather",
               "gather_axis1_i32",
               {f32(Shape{2, 5}), fixed(Shape{3}, DType::kI32, {4, 4, 0})},
               [](Backend&, const Inputs& x) { return Outputs{gather(x[0], x[1], 1)}; },
               kExact,
               true});
  c.push_back({"scatter_add",
               "scatter_add",
               {f32(Shape{2, 4}), fixed(Shape{4}, DType::kI64, {1, 0, 1, 2})},
               [](Backend&, const Inputs& x) {
                 return Outputs{scatter_add(x[0], x[1], 1, Shape{2, 3})};
               },
               kElementwise,
               true});
  c.push_back({"one_hot",
               "one_hot",
               {fixed(Shape{2, 2}, DType::kI64, {0, 3, 4, 1})},
               [](Backend&, const Inputs& x) { return Outputs{one_hot(x[0], 5, 2.0, -1.0)}; },
               kExact});
  c.push_back({"top_k",
               "top_k",
               {f32(Shape{3, 9})},
               [](Backend&, const Inputs& x) {
                 auto [values, indices] = top_k(x[0], 4);
                 return Outputs{values, indices};
               },
               kExact});
  c.push_back({"top_k",
               "top_k_ties",
               {ints(Shape{2, 8}, 0, 2)},
               [](Backend&, const Inputs& x) {
                 auto [values, indices] = top_k(x[0], 5);
                 return Outputs{values, indices};
               },
               kExact});
  for (auto [from, to, name] : {std::tuple{DType::kF32, DType::kI32, "cast_f32_i32"},
                                std::tuple{DType::kF32, DType::kF64, "cast_f32_f64"},
                                std::tuple{DType::kI32, DType::kF32, "cast_i32_f32"},
                                std::tuple{DType::kF32, DType::kBool, "cast_f32_bool"},
                                std::tuple{DType::kF32, DType::kI64, "cast_f32_i64"},
                                std::tuple{DType::kU8, DType::kF32, "cast_u8_f32"}}) {
    DType target = to;
    InputSpec in = from == DType::kF32 ? f32(Shape{3, 5}, -5, 5) : of(from, Shape{3, 5}, 0, 200);
    if (to == DType::kBool) in = ints(Shape{3, 5}, -1, 1);
    c.push_back({"cast",
                 name,
                 {in},
                 [target](Backend&, const Inputs& x) { return Outputs{cast(x[0], target)}; },
                 kExact});
  }
  c.push_back({"copy",
               "copy",
               {f32(Shape{5, 3})},
               [](Backend&, const Inputs& x) { return Outputs{copy(x[0])}; },
               kExact,
               true});

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

  // Optimizer updates, in place: the outputs are the updated inputs.
  c.push_back({"apply_gradient_descent",
               "apply_gradient_descent",
               {f32(Shape{3, 4}), f32(Shape{3, 4})},
               [](Backend&, const Inputs& x) {
                 Tensor var = x[0];
                 apply_gradient_descent(var, x[1], 0.1);
                 return Outputs{var};
               }});
  for (bool nesterov : {false, true}) {
    c.push_back({"apply_momentum",
                 nesterov ? "apply_momentum_nesterov" : "apply_momentum",
                 {f32(Shape{3, 4}), f32(Shape{3, 4}), f32(Shape{3, 4})},
                 [nesterov](Backend&, const Inputs& x) {
                   Tensor var = x[0], accum = x[1];
                   apply_momentum(var, accum, x[2], 0.1, 0.9, nesterov);
                   return Outputs{var, accum};
                 }});
  }
  c.push_back({"apply_adam",
               "apply_adam",
               {f32(Shape{3, 4}), f32(Shape{3, 4}), f32(Shape{3, 4}, 0.0, 1.0), f32(Shape{3, 4})},
               [](Backend&, const Inputs& x) {
                 Tensor var = x[0], m = x[1], v = x[2];
                 apply_adam(var, m, v, x[3], 0.01, 0.9, 0.999, 1e-8, 3);
                 return Outputs{var, m, v};
               }});
  return c;
}

const std::vector<OpCase>& all_cases() {
  static const std::vector<OpCase> cases = make_cases();
  return cases;
}

std::vector<double> input_values(const InputSpec& spec, uint64_t seed) {
  if (!spec.values.empty()) return spec.values;
  const std::size_t n = static_cast<std::size_t>(spec.shape.num_elements());
  std::vector<double> v =
      uniform_values(seed, n, spec.low, spec.integers ? spec.high + 1 : spec.high);
  if (spec.integers) {
    for (double& x : v) x = std::min(std::floor(x), spec.high);
  }
  return v;
}

bool is_float(DType d) {
  return d == DType::kF32 || d == DType::kF64 || d == DType::kBF16 || d == DType::kF16;
}

// One case's inputs, generated once on the host and uploaded to any backend.
struct HostInputs {
  std::vector<std::vector<double>> values;
  const OpCase* op_case = nullptr;

  Inputs upload(Backend& backend, bool requires_grad = false) const {
    Inputs out;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const InputSpec& spec = op_case->inputs[i];
      Tensor t = make_tensor(backend, spec.shape, spec.dtype, values[i]);
      if (requires_grad && is_float(spec.dtype)) t.set_requires_grad(true);
      out.push_back(t);
    }
    return out;
  }
};

uint64_t case_seed(const OpCase& c) { return suite().seed ^ name_hash(c.name); }

HostInputs host_inputs(const OpCase& c) {
  HostInputs h;
  h.op_case = &c;
  uint64_t seed = case_seed(c);
  for (const InputSpec& spec : c.inputs) h.values.push_back(input_values(spec, seed++));
  return h;
}

std::string describe_inputs(const OpCase& c) {
  if (c.inputs.empty()) return "no inputs";
  std::string out;
  for (const InputSpec& spec : c.inputs) {
    if (!out.empty()) out += ", ";
    out += std::string(dtype_name(spec.dtype)) + spec.shape.to_string();
  }
  return out;
}

std::string case_detail(const std::string& device, const OpCase& c) {
  std::ostringstream out;
  out << "device " << device << ", op " << c.op << ", case " << c.name << ", inputs "
      << describe_inputs(c) << ", case seed " << case_seed(c);
  return out.str();
}

// The gradients of sum(outputs[0] * w) with respect to every float input, w a fixed random
// projection of outputs[0]'s shape; undefined where the output does not depend on an input.
Outputs run_gradient(Backend& backend, const OpCase& c, const HostInputs& host) {
  Inputs inputs = host.upload(backend, /*requires_grad=*/true);
  Outputs outputs = c.run(backend, inputs);
  const Tensor& y = outputs.at(0);
  std::vector<double> w =
      uniform_values(case_seed(c) + 1000, static_cast<std::size_t>(y.num_elements()), 0.5, 1.5);
  Tensor projection = make_tensor(backend, y.shape(), y.dtype(), w);
  Tensor loss = ops::reduce_sum(ops::mul(y, projection));
  Inputs sources;
  for (const Tensor& t : inputs) {
    if (t.requires_grad()) sources.push_back(t);
  }
  return gradients(loss, sources);
}

// Compares two sets of outputs; returns "" or a report of what differs.
std::string compare_outputs(const Outputs& actual, const Outputs& expected, Tolerance tol,
                            const char* what) {
  std::ostringstream out;
  if (actual.size() != expected.size()) {
    out << "  " << what << ": got " << actual.size() << " tensors, expected " << expected.size()
        << "\n";
    return out.str();
  }
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const Tensor& a = actual[i];
    const Tensor& e = expected[i];
    if (a.defined() != e.defined()) {
      out << "  " << what << " " << i << ": " << (a.defined() ? "defined" : "undefined")
          << ", the reference's is " << (e.defined() ? "defined" : "undefined") << "\n";
      continue;
    }
    if (!a.defined()) continue;
    if (a.shape() != e.shape() || a.dtype() != e.dtype()) {
      out << "  " << what << " " << i << ": got " << dtype_name(a.dtype()) << a.shape().to_string()
          << ", expected " << dtype_name(e.dtype()) << e.shape().to_string() << "\n";
      continue;
    }
    std::string diff = compare_values(host_values(a), host_values(e), tol.atol, tol.rtol);
    if (!diff.empty()) out << "  " << what << " " << i << " " << a.description() << ":\n" << diff;
  }
  return out.str();
}

// MISTRUSTED in benchdnn's sense: a reference output that is almost all zeros proves little.
bool mistrusted(const Outputs& reference) {
  for (const Tensor& t : reference) {
    if (!t.defined() || !is_float(t.dtype()) || t.num_elements() < 4) continue;
    std::vector<double> v = host_values(t);
    auto zeros = std::count(v.begin(), v.end(), 0.0);
    if (zeros * 10 >= static_cast<long>(v.size()) * 9) return true;
  }
  return false;
}

std::string bitwise_difference(const Outputs& first, const Outputs& second) {
  if (first.size() != second.size()) return "  the reruns returned different numbers of tensors\n";
  std::ostringstream out;
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (first[i].defined() != second[i].defined()) {
      out << "  tensor " << i << " is defined in one run only\n";
      continue;
    }
    if (!first[i].defined()) continue;
    if (host_bytes(first[i]) != host_bytes(second[i])) {
      std::vector<double> a = host_values(first[i]), b = host_values(second[i]);
      out << "  tensor " << i << " " << first[i].description() << " differs between runs:\n"
          << compare_values(b, a, 0.0, 0.0);
    }
  }
  return out.str();
}

// One instance per class, created on first use and kept for the whole run.
Backend& backend_under_test(const std::string& class_name) {
  static std::map<std::string, std::shared_ptr<Backend>> instances;
  std::shared_ptr<Backend>& b = instances[class_name];
  if (!b) b = create_default<Backend>(suite().registry->find(ClassKind::kBackend, class_name));
  return *b;
}

enum class Check { kForward, kGradient, kDeterminism };

// Runs the check on every case of `op`. Cases the backend answers with Unimplemented (a dtype
// it leaves out) are listed; the check fails when no case ran at all.
void run_op_check(const std::string& device_class, const std::string& op, Check check) {
  Backend* backend = &backend_under_test(device_class);
  Backend& reference = independent_reference();
  std::size_t ran = 0;
  std::vector<std::string> unimplemented;
  for (const OpCase& c : all_cases()) {
    if (c.op != op) continue;
    if (check == Check::kGradient && !c.differentiable) continue;
    HostInputs host = host_inputs(c);
    const std::string detail = case_detail(backend->device_name(), c);
    try {
      switch (check) {
        case Check::kForward: {
          Outputs expected = c.run(reference, host.upload(reference));
          Outputs actual = c.run(*backend, host.upload(*backend));
          ++ran;
          std::string diff = compare_outputs(actual, expected, c.tolerance, "output");
          if (!diff.empty()) {
            ADD_FAILURE() << "forward of " << op << " on " << backend->device_name()
                          << " differs from the reference (case " << c.name << "):\n"
                          << diff << repro_line(detail);
          } else if (mistrusted(expected)) {
            std::cout << "  MISTRUSTED " << c.name << ": the reference output is mostly zeros\n";
          }
          break;
        }
        case Check::kGradient: {
          Outputs expected = run_gradient(reference, c, host);
          Outputs actual = run_gradient(*backend, c, host);
          ++ran;
          Tolerance tol = c.tolerance.atol == 0.0
                              ? kGradient
                              : Tolerance{std::max(c.tolerance.atol, kGradient.atol),
                                          std::max(c.tolerance.rtol, kGradient.rtol)};
          std::string diff = compare_outputs(actual, expected, tol, "gradient of input");
          if (!diff.empty()) {
            ADD_FAILURE() << "gradient of " << op << " on " << backend->device_name()
                          << " differs from the reference's (case " << c.name
                          << ", d sum(w * output 0) / d input):\n"
                          << diff << repro_line(detail);
          }
          break;
        }
        case Check::kDeterminism: {
          Outputs first = c.run(*backend, host.upload(*backend));
          Outputs second = c.run(*backend, host.upload(*backend));
          ++ran;
          std::string diff = bitwise_difference(first, second);
          if (c.differentiable && diff.empty()) {
            try {
              diff = bitwise_difference(run_gradient(*backend, c, host),
                                        run_gradient(*backend, c, host));
              if (!diff.empty()) diff = "  (gradients)\n" + diff;
            } catch (const Unimplemented&) {
              // The gradient check reports a missing backward op.
            }
          }
          if (!diff.empty()) {
            ADD_FAILURE() << op << " on " << backend->device_name()
                          << " is not deterministic: two runs on the same inputs differ (case "
                          << c.name << "):\n"
                          << diff << repro_line(detail);
          }
          break;
        }
      }
    } catch (const Unimplemented& e) {
      unimplemented.push_back(c.name + ": " + e.what());
    }
  }
  for (const std::string& u : unimplemented) std::cout << "  UNIMPLEMENTED " << u << "\n";
  if (ran == 0) {
    std::string list;
    for (const std::string& u : unimplemented) list += "\n  " + u;
    if (check == Check::kGradient) {
      GTEST_SKIP() << "no gradient case of " << op << " runs on this backend:" << list;
    }
    FAIL() << op << " is registered by the backend, but no case of it ran:" << list << "\n"
           << repro_line();
  }
}

// Host -> device -> host copies, at offsets, and the contract's InvalidArgument for a copy
// beyond the storage.
void check_memory(const std::string& device_class) {
  Backend* backend = &backend_under_test(device_class);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{4099}}) {
    std::vector<double> values = uniform_values(suite().seed + n, n, -1e6, 1e6);
    Tensor t = make_tensor(*backend, Shape{static_cast<int64_t>(n)}, DType::kF64, values);
    std::vector<double> back = host_values(t);
    EXPECT_EQ(back, values) << "a host -> " << backend->device_name() << " -> host copy of " << n
                            << " doubles changed them\n"
                            << repro_line();
  }
  std::shared_ptr<Storage> storage = backend->allocate(256);
  ASSERT_NE(storage, nullptr);
  EXPECT_GE(storage->size_bytes(), 256u);
  EXPECT_EQ(&storage->backend(), backend) << "storage does not name its backend";
  std::vector<uint8_t> pattern(100);
  std::iota(pattern.begin(), pattern.end(), uint8_t{7});
  backend->copy_from_host(*storage, 50, pattern.data(), pattern.size());
  std::vector<uint8_t> back(100);
  backend->copy_to_host(*storage, 50, back.data(), back.size());
  backend->synchronize();
  EXPECT_EQ(back, pattern) << "copy_from_host / copy_to_host at offset 50 changed the bytes\n"
                           << repro_line();
  bool threw_invalid_argument = false;
  try {
    backend->copy_to_host(*storage, storage->size_bytes() - 10, back.data(), back.size());
  } catch (const InvalidArgument&) {
    threw_invalid_argument = true;
  }
  EXPECT_TRUE(threw_invalid_argument)
      << "copy_to_host of 100 bytes at " << storage->size_bytes() - 10 << " of a storage of "
      << storage->size_bytes() << " bytes should throw InvalidArgument (backend.h)\n"
      << repro_line();
}

}  // namespace

void register_backend_checks(const ClassInfo& info) {
  const std::string suite_name = "Backend/" + info.class_name;
  Backend* backend = nullptr;
  try {
    backend = &backend_under_test(info.class_name);
  } catch (const Error& e) {
    // A device that is absent here (no GPU: the backend throws Unimplemented) is a skip,
    // anything else a failure.
    std::string message = e.what();
    bool absent = dynamic_cast<const Unimplemented*>(&e) != nullptr;
    std::cout << "    cannot create backend " << info.class_name << ": " << message << "\n";
    register_check(suite_name, "Creates", [message, absent] {
      if (absent) GTEST_SKIP() << "device not available here: " << message;
      FAIL() << "creating the backend with its default options threw: " << message << "\n"
             << repro_line();
    });
    return;
  }
  std::set<std::string> registered;
  std::set<std::string> fused;  // kernels for composites
  for (const KernelRegistration& k : backend->kernels()) {
    registered.insert(k.op);
    if ((k.flags & kFusedComposite) != 0) fused.insert(k.op);
  }
  std::set<std::string> covered;
  for (const OpCase& c : all_cases()) covered.insert(c.op);
  std::vector<std::string> missing;
  std::size_t num_ops = 0;
  for (const OpInfo& op : declared_ops()) {
    if (op.composite) continue;  // a fused kernel for a composite is optional
    ++num_ops;
    if (!registered.count(op.name)) missing.push_back(op.name);
  }
  std::cout << "    device " << backend->device_name() << ": " << registered.size() - fused.size()
            << " of " << num_ops << " ops registered, " << fused.size() << " fused composites";
  if (!missing.empty() && missing.size() < 20) {
    std::cout << "; not registered:";
    for (const std::string& m : missing) std::cout << " " << m;
  }
  std::cout << "\n";
  const std::string name = info.class_name;
  register_check(suite_name, "MemoryRoundTrip", [name] { check_memory(name); });
  if (!missing.empty()) {
    register_check(suite_name, "UnregisteredOpIsUnimplemented", [name, registered] {
      // Through the core's dispatch, an op the backend leaves out must be a clean
      // Unimplemented naming the op and the device.
      Backend& b = backend_under_test(name);
      for (const OpCase& c : all_cases()) {
        if (registered.count(c.op)) continue;
        std::string message;
        try {
          c.run(b, host_inputs(c).upload(b));
          continue;  // a composite that does not reach the op directly
        } catch (const Unimplemented& e) {
          message = e.what();
        }
        if (message.rfind(kNoKernel, 0) == 0) continue;  // the suite's own direct call
        EXPECT_NE(message.find(b.device_name()), std::string::npos)
            << "using op " << c.op << ", which " << name
            << " does not register, threw Unimplemented without naming the device: " << message;
        return;
      }
      GTEST_SKIP() << "no case reaches an unregistered op through the core";
    });
  }
  for (const std::string& op : registered) {
    const std::string op_str = op;
    if (!covered.count(op) && fused.count(op)) {
      register_check(suite_name, "Forward/" + op_str, [op_str] {
        GTEST_SKIP() << "fused kernel for composite " << op_str
                     << ": the suite has no case for it; the composite's own tests cover it";
      });
      continue;
    }
    if (!covered.count(op)) {
      register_check(suite_name, "Forward/" + op_str,
                     [op_str] { FAIL() << "the conformance suite has no case for op " << op_str; });
      continue;
    }
    bool differentiable = false;
    for (const OpCase& c : all_cases()) differentiable |= c.op == op && c.differentiable;
    register_check(suite_name, "Forward/" + op_str,
                   [name, op] { run_op_check(name, op, Check::kForward); });
    if (differentiable) {
      register_check(suite_name, "Gradient/" + op_str,
                     [name, op] { run_op_check(name, op, Check::kGradient); });
    }
    register_check(suite_name, "Deterministic/" + op_str,
                   [name, op] { run_op_check(name, op, Check::kDeterminism); });
  }
}

}  // namespace trainyard::conformance
