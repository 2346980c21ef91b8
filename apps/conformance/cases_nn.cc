// Op cases of the nn family (op_cases.h; the ops are declared in core/src/engine/ops/nn.cc):
// convolution, pooling and batch normalization, with their backward kernels.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

void add_nn_cases(std::vector<OpCase>& c) {
  using namespace ops;
  // Convolution and pooling.
  auto conv = [&](std::string name, Shape input, Shape filter,
                  std::function<Tensor(const Tensor&, const Tensor&)> f) {
    binary(c, "conv2d", std::move(name), std::move(f), f32(std::move(input)),
           f32(std::move(filter)), kAccumulating);
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
}

}  // namespace trainyard::conformance
