// The nn ops. Convolution, pooling and batch normalization (TensorFlow's NHWC layouts and padding
// rules), dropout, l2_normalize.
#include <algorithm>
#include <array>
#include <numeric>

#include "engine/ops/common.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_NN_OPS(X) \
  X(kConv2D, "conv2d", 2, 1, Conv2DAttrs, "(input [N, H, W, C], filter [KH, KW, C / groups, O]) -> [N, OH, OW, O]; output channel o reads the input channels of group o / (O / groups)") \
  X(kConv2DBackwardInput, "conv2d_backward_input", 2, 1, Conv2DAttrs, "(dy [N, OH, OW, O], filter) -> dinput of input_shape") \
  X(kConv2DBackwardFilter, "conv2d_backward_filter", 2, 1, Conv2DAttrs, "(input, dy) -> dfilter of filter_shape") \
  X(kMaxPool, "max_pool2d", 1, 1, PoolAttrs, "(input [N, H, W, C]) -> [N, OH, OW, C]; padding never wins") \
  X(kAvgPool, "avg_pool2d", 1, 1, PoolAttrs, "(input [N, H, W, C]) -> [N, OH, OW, C]; padding left out of the average (TensorFlow's SAME)") \
  X(kMaxPoolGrad, "max_pool2d_grad", 2, 1, PoolAttrs, "(input, dy) -> dinput; the first maximum of a window (row-major) gets dy") \
  X(kAvgPoolGrad, "avg_pool2d_grad", 1, 1, PoolAttrs, "(dy) -> dinput of input_shape") \
  X(kBatchNormTraining, "batch_norm_training", 3, 3, BatchNormAttrs, "(x, gamma [C], beta [C]) -> (y, batch_mean [C], batch_variance [C] biased), over the last axis") \
  X(kBatchNormInference, "batch_norm_inference", 5, 1, BatchNormAttrs, "(x, gamma, beta, mean, variance) -> y") \
  X(kBatchNormGrad, "batch_norm_grad", 5, 3, BatchNormAttrs, "(x, gamma, batch_mean, batch_variance, dy) -> (dx, dgamma, dbeta) of the training form")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(nn, TRAINYARD_NN_OPS)

namespace {
using namespace ops_internal;

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

Tensor pool(const OpDef& op, const Tensor& input, std::pair<int64_t, int64_t> window,
            std::pair<int64_t, int64_t> strides, Padding2D padding) {
  const char* name = op.name();
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
    const bool is_max = &op == &kMaxPool;
    record(
        op.name(), {&input}, std::span<Tensor>(&y, 1), [xs, attrs, is_max](GradOutputs g) -> Grads {
          if (is_max) {
            return {run<2>(xs.backend(), kMaxPoolGrad, {xs, g[0]}, &attrs, xs.shape(), xs.dtype())};
          }
          return {run<1>(xs.backend(), kAvgPoolGrad, {g[0]}, &attrs, xs.shape(), xs.dtype())};
        });
  }
  return y;
}

}  // namespace

namespace ops {
using namespace ops_internal;

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
  Tensor y = run<2>(backend, kConv2D, {input, filter}, &attrs,
                    Shape{input.shape()[0], h.out, w.out, o}, input.dtype());
  if (should_record({&input, &filter})) {
    Tensor xs = detached(input), fs = detached(filter);
    // The gradients nobody needs are not computed (an image batch needs none).
    const bool need_input = input.requires_grad(), need_filter = filter.requires_grad();
    record(kConv2D.name(), {&input, &filter}, std::span<Tensor>(&y, 1),
           [xs, fs, attrs, need_input, need_filter](GradOutputs g) -> Grads {
             Backend& b = xs.backend();
             Tensor dx, df;
             if (need_input) {
               dx = run<2>(b, kConv2DBackwardInput, {g[0], fs}, &attrs, xs.shape(), xs.dtype());
             }
             if (need_filter) {
               df = run<2>(b, kConv2DBackwardFilter, {xs, g[0]}, &attrs, fs.shape(), fs.dtype());
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
  return pool(kMaxPool, input, window, strides, padding);
}
Tensor avg_pool2d(const Tensor& input, std::pair<int64_t, int64_t> window,
                  std::pair<int64_t, int64_t> strides, Padding2D padding) {
  return pool(kAvgPool, input, window, strides, padding);
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
  launch(backend, kBatchNormTraining, inputs, outputs, &attrs);
  if (should_record({&x, &gamma, &beta})) {
    Tensor xs = detached(x), gs = detached(gamma), ms = detached(outputs[1]),
           vs = detached(outputs[2]);
    // Only y is differentiated: the batch statistics feed the moving averages, which are not.
    record(kBatchNormTraining.name(), {&x, &gamma, &beta}, std::span<Tensor>(outputs.data(), 1),
           [xs, gs, ms, vs, attrs](GradOutputs g) -> Grads {
             Backend& b = xs.backend();
             std::array<Tensor, 3> grads = {Tensor::empty(b, xs.shape(), xs.dtype()),
                                            Tensor::empty(b, gs.shape(), xs.dtype()),
                                            Tensor::empty(b, gs.shape(), xs.dtype())};
             std::array<Tensor, 5> in = {xs, gs, ms, vs, g[0]};
             launch(b, kBatchNormGrad, in, grads, &attrs);
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
  Tensor y = run<5>(backend, kBatchNormInference, {x, gamma, beta, mean, variance}, &attrs,
                    x.shape(), x.dtype());
  if (should_record({&x, &gamma, &beta})) {
    Tensor xs = detached(x), gs = detached(gamma), ms = detached(mean), vs = detached(variance);
    record(kBatchNormInference.name(), {&x, &gamma, &beta}, std::span<Tensor>(&y, 1),
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

Tensor l2_normalize(const Tensor& x, int64_t axis, double epsilon) {
  require_defined("l2_normalize", x, "the input");
  require_float("l2_normalize", x);
  Tensor sum_sq = reduce_sum(square(x), {axis}, /*keepdims=*/true);
  return mul(x, rsqrt(maximum(sum_sq, scalar_like(x, epsilon))));
}

}  // namespace ops
}  // namespace trainyard
