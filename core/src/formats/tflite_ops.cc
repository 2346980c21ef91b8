// The op families of the TFLite subgraph builder (tflite_builder.h): each translator emits the
// operators of one captured op and defines its outputs.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flatbuffers/flexbuffers.h"
#include "formats/tflite_builder.h"
#include "trainyard/ops/array.h"
#include "trainyard/ops/linalg.h"
#include "trainyard/ops/nn.h"
#include "trainyard/ops/quantization.h"
#include "trainyard/ops/reduce.h"

namespace trainyard::tflite_internal {
namespace {

// TensorFlow's SAME padding of one spatial dimension: {before, after}.
std::pair<int64_t, int64_t> same_pads(int64_t in, int64_t kernel, int64_t stride,
                                      int64_t dilation) {
  const int64_t effective = (kernel - 1) * dilation + 1;
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + effective - in, 0);
  return {total / 2, total - total / 2};
}

struct Window {
  int64_t in_h, in_w, kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w;
  int64_t top, bottom, left, right;
};

// SAME or VALID when the window's explicit pads are what TensorFlow's padding gives.
std::optional<fb::Padding> padding_of(const Window& w) {
  if (w.top == 0 && w.bottom == 0 && w.left == 0 && w.right == 0) return fb::Padding_VALID;
  const auto [top, bottom] = same_pads(w.in_h, w.kernel_h, w.stride_h, w.dilation_h);
  const auto [left, right] = same_pads(w.in_w, w.kernel_w, w.stride_w, w.dilation_w);
  if (w.top == top && w.bottom == bottom && w.left == left && w.right == right) {
    return fb::Padding_SAME;
  }
  return std::nullopt;
}
// Inference batch norm as a per-channel affine map, in double: scale = gamma / sqrt(variance +
// epsilon), shift = beta - mean * scale. `p` holds gamma, beta, mean and variance.
std::pair<std::vector<double>, std::vector<double>> batch_norm_scale_shift(
    const std::vector<std::vector<float>>& p, double epsilon) {
  const std::size_t channels = p[0].size();
  std::vector<double> scale(channels), shift(channels);
  for (std::size_t c = 0; c < channels; ++c) {
    scale[c] = static_cast<double>(p[0][c]) / std::sqrt(static_cast<double>(p[3][c]) + epsilon);
    shift[c] = static_cast<double>(p[1][c]) - static_cast<double>(p[2][c]) * scale[c];
  }
  return {scale, shift};
}

}  // namespace

// The bias add that alone reads `result` (op `i`'s output) when its other input is a [channels]
// constant made before op i (slim's conv2d and fully_connected add their biases so): that add is
// skipped and `result` becomes its output.
std::optional<int> Builder::fuse_bias(std::size_t i, Tensor& result, int64_t channels,
                                      std::size_t* last) {
  *last = i;
  const std::optional<std::size_t> j = sole_reader(result, i);
  if (!j || std::string_view(ops_[*j].op->name) != "add") return std::nullopt;
  const Op& reader = ops_[*j];
  for (std::size_t side = 0; side < 2; ++side) {
    if (key_of(reader.inputs[side]) != key_of(result)) continue;
    const Tensor& other = reader.inputs[1 - side];
    auto made = producer_.find(other.storage().get());
    const bool before =
        variables_.count(other.storage().get()) > 0 || made == producer_.end() || made->second < i;
    if (!before || other.shape() != Shape{channels} ||
        reader.outputs[0].shape() != result.shape()) {
      return std::nullopt;
    }
    const Ref bias = resolve(other, &reader);
    if (bias.is_value()) return std::nullopt;
    skip_[*j] = true;
    result = reader.outputs[0];
    *last = *j;
    return constant(bias.constant, {}, std::nullopt, "", reader);
  }
  return std::nullopt;
}

std::optional<std::pair<std::vector<double>, std::vector<double>>> Builder::fold_batch_norm(
    Tensor& result, int64_t channels, std::size_t* last) {
  const std::optional<std::size_t> j = sole_reader(result, *last);
  if (!j || std::string_view(ops_[*j].op->name) != "batch_norm_inference") return std::nullopt;
  const Op& norm = ops_[*j];
  if (key_of(norm.inputs[0]) != key_of(result)) return std::nullopt;
  std::vector<std::vector<float>> p;
  for (std::size_t k = 1; k < 5; ++k) {
    const Tensor& t = norm.inputs[k];
    const bool constant = variables_.count(t.storage().get()) > 0 || folded_.count(key_of(t)) > 0;
    if (!constant || t.dtype() != DType::kF32 || t.shape() != Shape{channels}) return std::nullopt;
    p.push_back(t.to_vector<float>());
  }
  skip_[*j] = true;
  result = norm.outputs[0];
  *last = *j;
  return batch_norm_scale_shift(p, norm.attributes<BatchNormAttrs>("BatchNormAttrs").epsilon);
}

int Builder::explicit_pad(int x, const Shape& shape, const std::vector<int32_t>& pads) {
  Shape padded = shape;
  for (std::size_t a = 0; a < shape.rank(); ++a) padded[a] += pads[2 * a] + pads[2 * a + 1];
  const int out = new_value(padded, "Pad");
  emit(fb::BuiltinOperator_PAD, {x, int32s(pads, {static_cast<int32_t>(shape.rank()), 2})}, {out},
       [] {
         fb::BuiltinOptionsUnion u;
         u.Set(fb::PadOptionsT{});
         return u;
       }());
  return out;
}

void Builder::conv2d(std::size_t i, const std::vector<Ref>& in) {
  const Op& op = ops_[i];
  const auto a = op.attributes<Conv2DAttrs>("Conv2DAttrs");
  if (!in[0].is_value()) unsupported(op, "convolves a constant input");
  if (in[1].is_value()) unsupported(op, "convolves with a computed filter; filters are constants");
  const int64_t kh = a.filter_shape[0], kw = a.filter_shape[1], outputs = a.filter_shape[3];
  const int64_t channels = a.input_shape[3];
  const bool depthwise =
      a.groups > 1 && a.groups == channels && a.filter_shape[2] == 1 && outputs % channels == 0;
  if (a.groups != 1 && !depthwise) {
    unsupported(op, "is a convolution of " + std::to_string(a.groups) +
                        " groups; TFLite has CONV_2D (one group) and DEPTHWISE_CONV_2D (one group "
                        "per input channel)");
  }
  int x = in[0].index;
  const Window w{a.input_shape[1], a.input_shape[2], kh,           kw,
                 a.stride_h,       a.stride_w,       a.dilation_h, a.dilation_w,
                 a.pad_top,        a.pad_bottom,     a.pad_left,   a.pad_right};
  std::optional<fb::Padding> padding = padding_of(w);
  if (!padding) {
    x = explicit_pad(x, op.inputs[0].shape(),
                     {0, 0, narrow(a.pad_top), narrow(a.pad_bottom), narrow(a.pad_left),
                      narrow(a.pad_right), 0, 0});
    padding = fb::Padding_VALID;
  }
  Tensor result = op.outputs[0];
  std::size_t last = i;
  std::optional<int> bias = fuse_bias(i, result, outputs, &last);
  // A batch norm after a conv without a bias (slim's conv2d with a normalizer) folds into the
  // filter and bias, as TensorFlow's converter folds it: w' = w * scale per output channel, b' =
  // shift.
  Constant weights = in[1].constant;
  std::string form;
  if (!bias) {
    if (const auto folded = fold_batch_norm(result, outputs, &last)) {
      const auto& [scale, shift] = *folded;
      std::vector<float> w = weights.tensor.to_vector<float>();
      for (std::size_t k = 0; k < w.size(); ++k) {
        w[k] = static_cast<float>(static_cast<double>(w[k]) *
                                  scale[k % static_cast<std::size_t>(outputs)]);
      }
      weights.tensor = Tensor::from_vector(weights.tensor.backend(), weights.tensor.shape(), w);
      form = "folded_";
      bias = floats("bias", {outputs}, std::vector<float>(shift.begin(), shift.end()));
    }
  }
  const int filter = depthwise ? constant(weights, {}, std::vector<int64_t>{1, kh, kw, outputs},
                                          form + "depthwise", op)
                               : constant(weights, {3, 0, 1, 2}, std::nullopt, form + "ohwi", op);
  if (!bias)
    bias = floats("bias", {outputs}, std::vector<float>(static_cast<std::size_t>(outputs)));
  const fb::ActivationFunctionType activation = fuse_activation(last, result);
  fb::BuiltinOptionsUnion u;
  if (depthwise) {
    fb::DepthwiseConv2DOptionsT o;
    o.padding = *padding;
    o.stride_w = narrow(a.stride_w);
    o.stride_h = narrow(a.stride_h);
    o.depth_multiplier = narrow(outputs / channels);
    o.fused_activation_function = activation;
    o.dilation_w_factor = narrow(a.dilation_w);
    o.dilation_h_factor = narrow(a.dilation_h);
    u.Set(std::move(o));
  } else {
    fb::Conv2DOptionsT o;
    o.padding = *padding;
    o.stride_w = narrow(a.stride_w);
    o.stride_h = narrow(a.stride_h);
    o.fused_activation_function = activation;
    o.dilation_w_factor = narrow(a.dilation_w);
    o.dilation_h_factor = narrow(a.dilation_h);
    u.Set(std::move(o));
  }
  const int out = define(result, scope_.empty() ? "Conv2D" : scope_ + "/Conv2D");
  emit(depthwise ? fb::BuiltinOperator_DEPTHWISE_CONV_2D : fb::BuiltinOperator_CONV_2D,
       {x, filter, *bias}, {out}, std::move(u));
}

// TensorFlow's max pool never picks padding and its average pool leaves padding out of the
// count, as TFLite's SAME pools do; other explicit paddings have no TFLite form.
void Builder::pool(const Op& op, const std::vector<Ref>& in, bool max) {
  const auto a = op.attributes<PoolAttrs>("PoolAttrs");
  if (!in[0].is_value()) unsupported(op, "pools a constant");
  const Window w{a.input_shape[1], a.input_shape[2], a.window_h, a.window_w,
                 a.stride_h,       a.stride_w,       1,          1,
                 a.pad_top,        a.pad_bottom,     a.pad_left, a.pad_right};
  const std::optional<fb::Padding> padding = padding_of(w);
  if (!padding) {
    unsupported(op, "pads by (" + std::to_string(a.pad_top) + ", " + std::to_string(a.pad_bottom) +
                        ", " + std::to_string(a.pad_left) + ", " + std::to_string(a.pad_right) +
                        "), which is neither TensorFlow's SAME nor VALID; TFLite's pools pad only "
                        "so");
  }
  fb::Pool2DOptionsT o;
  o.padding = *padding;
  o.stride_w = narrow(a.stride_w);
  o.stride_h = narrow(a.stride_h);
  o.filter_width = narrow(a.window_w);
  o.filter_height = narrow(a.window_h);
  fb::BuiltinOptionsUnion u;
  u.Set(std::move(o));
  const int out = define(op.outputs[0], max ? "MaxPool" : "AvgPool");
  emit(max ? fb::BuiltinOperator_MAX_POOL_2D : fb::BuiltinOperator_AVERAGE_POOL_2D, {in[0].index},
       {out}, std::move(u));
}

// Inference batch norm over the last axis: x * scale + shift, scale = gamma / sqrt(variance +
// epsilon) and shift = beta - mean * scale computed in double, a following relu or relu6 fused
// into the ADD.
void Builder::batch_norm(std::size_t i, const std::vector<Ref>& in) {
  const Op& op = ops_[i];
  const auto a = op.attributes<BatchNormAttrs>("BatchNormAttrs");
  if (!in[0].is_value()) unsupported(op, "normalizes a constant");
  std::vector<std::vector<float>> p;
  for (std::size_t k = 1; k < 5; ++k) {
    if (in[k].is_value()) unsupported(op, "normalizes with computed statistics");
    if (in[k].constant.tensor.dtype() != DType::kF32) unsupported(op, "has non-f32 parameters");
    p.push_back(in[k].constant.tensor.to_vector<float>());
  }
  const std::size_t channels = p[0].size();
  for (const auto& v : p) {
    if (v.size() != channels) unsupported(op, "has parameters of different sizes");
  }
  const auto [scale64, shift64] = batch_norm_scale_shift(p, a.epsilon);
  const std::vector<float> scale(scale64.begin(), scale64.end());
  const std::vector<float> shift(shift64.begin(), shift64.end());
  const std::vector<int64_t> dims{static_cast<int64_t>(channels)};
  const int scaled = new_value(op.outputs[0].shape(), "BatchNorm/mul");
  fb::BuiltinOptionsUnion mul;
  mul.Set(fb::MulOptionsT{});
  emit(fb::BuiltinOperator_MUL, {in[0].index, floats("BatchNorm/scale", dims, scale)}, {scaled},
       std::move(mul));
  Tensor result = op.outputs[0];
  fb::AddOptionsT o;
  o.fused_activation_function = fuse_activation(i, result);
  fb::BuiltinOptionsUnion add;
  add.Set(std::move(o));
  const int out = define(result, scope_.empty() ? "BatchNorm" : scope_ + "/BatchNorm");
  emit(fb::BuiltinOperator_ADD, {scaled, floats("BatchNorm/shift", dims, shift)}, {out},
       std::move(add));
}

void Builder::unary(const Op& op, const std::vector<Ref>& in, std::string_view name) {
  if (name == "copy") {
    alias(op.outputs[0], in[0].index);
    return;
  }
  static const std::map<std::string_view, fb::BuiltinOperator> kOps = {
      {"relu", fb::BuiltinOperator_RELU},        {"relu6", fb::BuiltinOperator_RELU6},
      {"sigmoid", fb::BuiltinOperator_LOGISTIC}, {"tanh", fb::BuiltinOperator_TANH},
      {"square", fb::BuiltinOperator_SQUARE},    {"sqrt", fb::BuiltinOperator_SQRT},
      {"rsqrt", fb::BuiltinOperator_RSQRT},      {"exp", fb::BuiltinOperator_EXP},
      {"log", fb::BuiltinOperator_LOG},          {"neg", fb::BuiltinOperator_NEG},
      {"abs", fb::BuiltinOperator_ABS}};
  const int out = define(op.outputs[0], std::string(name));
  emit(kOps.at(name), {in[0].index}, {out});
}

void Builder::binary(std::size_t i, const std::vector<Ref>& in, std::string_view name) {
  const Op& op = ops_[i];
  Tensor result = op.outputs[0];
  const std::vector<int32_t> inputs{operand(in[0], op), operand(in[1], op)};
  if (name == "maximum" || name == "minimum") {  // no options, no fused activation
    const int out = define(result, std::string(name));
    emit(name == "maximum" ? fb::BuiltinOperator_MAXIMUM : fb::BuiltinOperator_MINIMUM, inputs,
         {out});
    return;
  }
  const fb::ActivationFunctionType activation = fuse_activation(i, result);
  fb::BuiltinOptionsUnion u;
  fb::BuiltinOperator code = fb::BuiltinOperator_ADD;
  if (name == "add") {
    fb::AddOptionsT o;
    o.fused_activation_function = activation;
    u.Set(std::move(o));
  } else if (name == "sub") {
    code = fb::BuiltinOperator_SUB;
    fb::SubOptionsT o;
    o.fused_activation_function = activation;
    u.Set(std::move(o));
  } else if (name == "mul") {
    code = fb::BuiltinOperator_MUL;
    fb::MulOptionsT o;
    o.fused_activation_function = activation;
    u.Set(std::move(o));
  } else {
    code = fb::BuiltinOperator_DIV;
    fb::DivOptionsT o;
    o.fused_activation_function = activation;
    u.Set(std::move(o));
  }
  const int out = define(result, std::string(name));
  emit(code, inputs, {out}, std::move(u));
}

// FULLY_CONNECTED: weights [units, inputs], the bias (zeros without one), relu fused; sigmoid
// and tanh follow as their own ops.
void Builder::matmul(std::size_t i, const std::vector<Ref>& in, bool with_bias) {
  const Op& op = ops_[i];
  const auto a = op.attributes<MatMulAttrs>("MatMulAttrs");
  if (!in[0].is_value() || op.inputs[0].shape().rank() != 2 || a.transpose_a) {
    unsupported(op, "is not a product of a computed [batch, inputs] value and constant weights");
  }
  if (in[1].is_value()) unsupported(op, "multiplies by computed weights; weights are constants");
  const int weights = a.transpose_b
                          ? constant(in[1].constant, {}, std::nullopt, "", op)
                          : constant(in[1].constant, {1, 0}, std::nullopt, "transposed", op);
  const int64_t units = op.outputs[0].shape()[1];
  Tensor result = op.outputs[0];
  std::size_t last = i;
  std::optional<int> bias;
  if (with_bias) {
    if (in[2].is_value()) unsupported(op, "adds a computed bias; biases are constants");
    bias = constant(in[2].constant, {}, std::nullopt, "", op);
  } else {
    bias = fuse_bias(i, result, units, &last);
  }
  if (!bias) bias = floats("bias", {units}, std::vector<float>(static_cast<std::size_t>(units)));
  fb::ActivationFunctionType activation = fb::ActivationFunctionType_NONE;
  if (a.activation == Activation::kRelu) activation = fb::ActivationFunctionType_RELU;
  const bool separate = a.activation == Activation::kSigmoid || a.activation == Activation::kTanh;
  if (a.activation == Activation::kNone) activation = fuse_activation(last, result);
  fb::FullyConnectedOptionsT o;
  o.fused_activation_function = activation;
  fb::BuiltinOptionsUnion u;
  u.Set(std::move(o));
  const int out = separate ? new_value(result.shape(), "MatMul")
                           : define(result, scope_.empty() ? "MatMul" : scope_ + "/MatMul");
  emit(fb::BuiltinOperator_FULLY_CONNECTED, {in[0].index, weights, *bias}, {out}, std::move(u));
  if (separate) {
    const int activated = define(result, a.activation == Activation::kTanh ? "Tanh" : "Sigmoid");
    emit(
        a.activation == Activation::kTanh ? fb::BuiltinOperator_TANH : fb::BuiltinOperator_LOGISTIC,
        {out}, {activated});
  }
}

void Builder::softmax(const Op& op, const std::vector<Ref>& in) {
  const int64_t axis = op.attributes<AxisAttrs>("AxisAttrs").axis;
  const auto rank = static_cast<int64_t>(op.inputs[0].shape().rank());
  if (rank < 2) unsupported(op, "normalizes over the batch (a rank-1 value)");
  if (axis != rank - 1) {
    unsupported(op, "normalizes over axis " + std::to_string(axis) + " of a rank-" +
                        std::to_string(rank) + " value; TFLite's SOFTMAX normalizes the last axis");
  }
  fb::SoftmaxOptionsT o;
  o.beta = 1.0f;
  fb::BuiltinOptionsUnion u;
  u.Set(std::move(o));
  const int out = define(op.outputs[0], "Softmax");
  emit(fb::BuiltinOperator_SOFTMAX, {in[0].index}, {out}, std::move(u));
}

// MEAN, SUM or REDUCE_MAX over axes other than the first (the batch's).
void Builder::reduce(const Op& op, const std::vector<Ref>& in, std::string_view name) {
  const auto a = op.attributes<ReduceAttrs>("ReduceAttrs");
  if ((a.axis_mask & 1u) != 0) unsupported(op, "reduces over the first dimension, the batch's");
  std::vector<int32_t> axes;
  for (std::size_t axis = 0; axis < op.inputs[0].shape().rank(); ++axis) {
    if ((a.axis_mask >> axis) & 1u) axes.push_back(static_cast<int32_t>(axis));
  }
  fb::ReducerOptionsT o;
  o.keep_dims = a.keepdims;
  fb::BuiltinOptionsUnion u;
  u.Set(std::move(o));
  const fb::BuiltinOperator code = name == "reduce_sum"   ? fb::BuiltinOperator_SUM
                                   : name == "reduce_max" ? fb::BuiltinOperator_REDUCE_MAX
                                                          : fb::BuiltinOperator_MEAN;
  const int out = define(op.outputs[0], name == "reduce_sum"   ? "Sum"
                                        : name == "reduce_max" ? "Max"
                                                               : "Mean");
  emit(code, {in[0].index, int32s(axes)}, {out}, std::move(u));
}

// SLICE of axes other than the first (which it keeps whole, as size -1).
void Builder::slice(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<SliceAttrs>("SliceAttrs");
  const Shape& shape = op.inputs[0].shape();
  if (a.begin[0] != 0 || a.size[0] != shape[0]) {
    unsupported(op, "slices the first dimension, the batch's");
  }
  std::vector<int32_t> begin, size;
  for (std::size_t axis = 0; axis < shape.rank(); ++axis) {
    begin.push_back(narrow(a.begin[axis]));
    size.push_back(axis == 0 ? -1 : narrow(a.size[axis]));
  }
  const int out = define(op.outputs[0], "Slice");
  emit(fb::BuiltinOperator_SLICE, {in[0].index, int32s(begin), int32s(size)}, {out});
}

void Builder::pad(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<PadAttrs>("PadAttrs");
  if (a.value != 0.0) unsupported(op, "pads with a non-zero value; TFLite's PAD pads with zeros");
  if (a.before[0] != 0 || a.after[0] != 0) unsupported(op, "pads the first dimension, the batch's");
  const Shape& shape = op.inputs[0].shape();
  std::vector<int32_t> pads;
  for (std::size_t axis = 0; axis < shape.rank(); ++axis) {
    pads.push_back(narrow(a.before[axis]));
    pads.push_back(narrow(a.after[axis]));
  }
  fb::BuiltinOptionsUnion u;
  u.Set(fb::PadOptionsT{});
  const int out = define(op.outputs[0], "Pad");
  emit(fb::BuiltinOperator_PAD,
       {in[0].index, int32s(pads, {static_cast<int32_t>(shape.rank()), 2})}, {out}, std::move(u));
}

void Builder::concat(const Op& op, const std::vector<Ref>& in) {
  fb::ConcatenationOptionsT o;
  o.axis = narrow(op.attributes<AxisAttrs>("AxisAttrs").axis);
  if (o.axis == 0) unsupported(op, "concatenates along the first dimension, the batch's");
  std::vector<int32_t> inputs;
  for (const Ref& r : in) inputs.push_back(operand(r, op));
  fb::BuiltinOptionsUnion u;
  u.Set(std::move(o));
  const int out = define(op.outputs[0], "Concat");
  emit(fb::BuiltinOperator_CONCATENATION, inputs, {out}, std::move(u));
}

// CAST between f32, i32 and bool (as TensorFlow's Cast: bool to 0 or 1, f32 to i32 toward zero).
void Builder::cast(const Op& op, const std::vector<Ref>& in) {
  if (!in[0].is_value()) unsupported(op, "casts a constant");
  const int out = define(op.outputs[0], "Cast");
  emit(fb::BuiltinOperator_CAST, {in[0].index}, {out});
}

// LESS, GREATER, ... with broadcasting: a bool value.
void Builder::compare(const Op& op, const std::vector<Ref>& in, std::string_view name) {
  static const std::map<std::string_view, fb::BuiltinOperator> kOps = {
      {"less", fb::BuiltinOperator_LESS},
      {"less_equal", fb::BuiltinOperator_LESS_EQUAL},
      {"greater", fb::BuiltinOperator_GREATER},
      {"greater_equal", fb::BuiltinOperator_GREATER_EQUAL},
      {"equal", fb::BuiltinOperator_EQUAL},
      {"not_equal", fb::BuiltinOperator_NOT_EQUAL}};
  const std::vector<int32_t> inputs{operand(in[0], op), operand(in[1], op)};
  const int out = define(op.outputs[0], std::string(name));
  emit(kOps.at(name), inputs, {out});
}

// where(condition, a, b) as SELECT_V2 (broadcasting all three).
void Builder::select(const Op& op, const std::vector<Ref>& in) {
  const std::vector<int32_t> inputs{operand(in[0], op), operand(in[1], op), operand(in[2], op)};
  const int out = define(op.outputs[0], "Select");
  emit(fb::BuiltinOperator_SELECT_V2, inputs, {out});
}

// Quantization-aware training's fake quantization of a computed value (an activation; the
// weights' is folded, its inputs being constants) as FAKE_QUANT, whose range is the stored
// [min, max], as TensorFlow's converter keeps FakeQuant in a float model. TFLite's kernel nudges
// the range as TensorFlow does but always over [0, 2^bits - 1]: a narrow range is refused.
QuantRange Builder::fake_quant_range(const Op& op, const std::vector<Ref>& in) const {
  const auto a = op.attributes<FakeQuantAttrs>("FakeQuantAttrs");
  if (in[1].is_value() || in[2].is_value()) {
    unsupported(op, "quantizes with a range the graph computes; FAKE_QUANT takes a fixed range");
  }
  if (spec_.uint8 && a.num_bits != 8) {
    unsupported(op, "quantizes to " + std::to_string(a.num_bits) +
                        " bits; the uint8 export takes 8-bit quantization (weight_bits and "
                        "activation_bits 8)");
  }
  return {in[1].constant.tensor.to_vector<float>().at(0),
          in[2].constant.tensor.to_vector<float>().at(0), a.narrow_range};
}

// A fake quantization of a computed value: a FAKE_QUANT with the stored range in a float model;
// in a uint8 model nothing, its input standing for its output with that range (TOCO's).
void Builder::fake_quant(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<FakeQuantAttrs>("FakeQuantAttrs");
  const QuantRange range = fake_quant_range(op, in);
  if (a.narrow_range) {
    unsupported(op,
                "quantizes a computed value to the narrow range [1, 2^bits - 1], which "
                "TFLite's FAKE_QUANT does not take");
  }
  if (spec_.uint8) {
    ranges_[in[0].index] = range;
    alias(op.outputs[0], in[0].index);
    return;
  }
  fb::FakeQuantOptionsT options;
  options.min = static_cast<float>(range.min);
  options.max = static_cast<float>(range.max);
  options.num_bits = static_cast<int32_t>(a.num_bits);
  options.narrow_range = false;
  const int out = define(op.outputs[0], "FakeQuant");
  fb::BuiltinOptionsUnion u;
  u.Set(std::move(options));
  emit(fb::BuiltinOperator_FAKE_QUANT, {in[0].index}, {out}, std::move(u));
}

void Builder::convert(std::size_t i, const std::vector<Ref>& in) {
  const Op& op = ops_[i];
  const std::string_view name = op.op->name;
  static const std::set<std::string_view> kMapped = {
      "conv2d",     "max_pool2d", "avg_pool2d",  "batch_norm_inference",
      "add",        "sub",        "mul",         "div",
      "maximum",    "minimum",    "matmul",      "matmul_bias_act",
      "concat",     "relu",       "relu6",       "sigmoid",
      "tanh",       "square",     "sqrt",        "rsqrt",
      "exp",        "log",        "neg",         "abs",
      "copy",       "softmax",    "reduce_mean", "reduce_sum",
      "reduce_max", "slice",      "pad",         "cast",
      "less",       "less_equal", "greater",     "greater_equal",
      "equal",      "not_equal",  "where",       "fake_quant_with_min_max_vars"};
  // The ops whose outputs may be other than f32 (frame counts and masks).
  static const std::set<std::string_view> kAnyType = {"copy",       "cast",      "less",
                                                      "less_equal", "greater",   "greater_equal",
                                                      "equal",      "not_equal", "where"};
  if (kMapped.count(name) == 0) {
    std::string mapped;
    for (std::string_view m : kMapped) mapped += std::string(mapped.empty() ? "" : ", ") += m;
    unsupported(
        op, "has no TFLite mapping in the exporter (mapped: " + mapped + ", and reshape views)");
  }
  for (const Tensor& t : op.outputs) {
    if (t.dtype() != DType::kF32 && (kAnyType.count(name) == 0 || !tflite_type(t.dtype()))) {
      unsupported(op, std::string("computes a ") + dtype_name(t.dtype()) +
                          " value; the export writes float32 models (int32 and bool only for "
                          "casts, comparisons and selects)");
    }
  }
  if (name == "conv2d") return conv2d(i, in);
  if (name == "max_pool2d" || name == "avg_pool2d") return pool(op, in, name == "max_pool2d");
  if (name == "batch_norm_inference") return batch_norm(i, in);
  if (name == "add" || name == "sub" || name == "mul" || name == "div" || name == "maximum" ||
      name == "minimum") {
    return binary(i, in, name);
  }
  if (name == "matmul") return matmul(i, in, false);
  if (name == "matmul_bias_act") return matmul(i, in, true);
  if (name == "concat") return concat(op, in);
  if (name == "cast") return cast(op, in);
  if (name == "where") return select(op, in);
  if (name != "copy" && kAnyType.count(name) > 0) return compare(op, in, name);
  if (!in[0].is_value()) unsupported(op, "reads a constant first input next to computed ones");
  if (name == "softmax") return softmax(op, in);
  if (name == "fake_quant_with_min_max_vars") return fake_quant(op, in);
  if (name == "reduce_mean" || name == "reduce_sum" || name == "reduce_max") {
    return reduce(op, in, name);
  }
  if (name == "slice") return slice(op, in);
  if (name == "pad") return pad(op, in);
  return unary(op, in, name);
}

std::vector<int32_t> Builder::detection_postprocess(const std::vector<int32_t>& raw) {
  const DetectionPostProcess& p = *spec_.detection_postprocess;
  const std::string what =
      "TFLite export of " + spec_.model_name + ": TFLite_Detection_PostProcess";
  if (raw.size() != 2) {
    throw InvalidArgument(what + " reads two outputs (box encodings, class scores), given " +
                          std::to_string(raw.size()));
  }
  const std::vector<int32_t>& boxes = graph_->tensors[static_cast<std::size_t>(raw[0])]->shape;
  const std::vector<int32_t>& scores = graph_->tensors[static_cast<std::size_t>(raw[1])]->shape;
  const auto anchors = static_cast<int64_t>(p.anchors.size() / 4);
  const int32_t classes = scores.size() == 3 ? scores[2] : 0;
  if (boxes.size() != 3 || boxes[0] != 1 || boxes[1] != anchors || boxes[2] != 4 ||
      scores.size() != 3 || scores[0] != 1 || scores[1] != anchors ||
      (classes != p.num_classes && classes != p.num_classes + 1) || p.anchors.size() % 4 != 0) {
    throw InvalidArgument(what + " takes box encodings [1, anchors, 4] and class scores [1, " +
                          "anchors, num_classes (+ 1)] of one image; the model gives " +
                          dims_text(boxes) + " and " + dims_text(scores) + " for " +
                          std::to_string(anchors) + " anchors and " +
                          std::to_string(p.num_classes) + " classes");
  }
  std::vector<uint8_t> anchor_bytes(p.anchors.size() * sizeof(float));
  std::memcpy(anchor_bytes.data(), p.anchors.data(), anchor_bytes.size());
  const int anchor_tensor = add_tensor(unique("anchors"), {narrow(anchors), 4},
                                       fb::TensorType_FLOAT32, std::move(anchor_bytes));
  // The node attributes export_tflite_ssd_graph.py sets, which the kernel reads by name.
  flexbuffers::Builder options;
  options.Map([&] {
    options.Int("max_detections", p.max_detections);
    options.Int("max_classes_per_detection", p.max_classes_per_detection);
    options.Int("detections_per_class", p.detections_per_class);
    options.Bool("use_regular_nms", p.use_regular_nms);
    options.Float("nms_score_threshold", p.nms_score_threshold);
    options.Float("nms_iou_threshold", p.nms_iou_threshold);
    options.Int("num_classes", p.num_classes);
    options.Float("y_scale", p.y_scale);
    options.Float("x_scale", p.x_scale);
    options.Float("h_scale", p.h_scale);
    options.Float("w_scale", p.w_scale);
  });
  options.Finish();
  const int32_t detections = narrow(int64_t{p.max_detections} * p.max_classes_per_detection);
  const std::string name = "TFLite_Detection_PostProcess";
  const std::vector<int32_t> outputs{
      add_tensor(unique(name), {1, detections, 4}, fb::TensorType_FLOAT32, {}),
      add_tensor(unique(name + ":1"), {1, detections}, fb::TensorType_FLOAT32, {}),
      add_tensor(unique(name + ":2"), {1, detections}, fb::TensorType_FLOAT32, {}),
      add_tensor(unique(name + ":3"), {1}, fb::TensorType_FLOAT32, {})};
  emit_custom(name, {raw[0], raw[1], anchor_tensor}, outputs, options.GetBuffer());
  return outputs;
}

}  // namespace trainyard::tflite_internal
