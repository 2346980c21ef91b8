// The translators of tf_builder.h's Builder: each op family of a capture as TensorFlow's own
// ops, emitted through the bookkeeping of tf_graph.cc.
#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/tf_builder.h"
#include "formats/tf_graph_detection.h"
#include "trainyard/ops/array.h"
#include "trainyard/ops/detection.h"
#include "trainyard/ops/image.h"
#include "trainyard/ops/linalg.h"
#include "trainyard/ops/nn.h"
#include "trainyard/ops/reduce.h"

namespace trainyard::tf_internal {

using tf::NodeDef;

namespace {

// TensorFlow's SAME padding of one spatial dimension: (before, after).
std::pair<int64_t, int64_t> same_padding(int64_t in, int64_t window, int64_t stride) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + window - in, 0);
  return {total / 2, total - total / 2};
}
}  // namespace

// ---- The op families ----

// The `padding` attribute for a window op over NHWC `input` with the given explicit pads: VALID
// (none), SAME (TensorFlow's own split), or else, where `may_pad`, a Pad (PadV2 with `pad_value`)
// of x before a VALID op.
std::string Builder::padding(const Op& op, std::string& x, const std::array<int64_t, 4>& input,
                             int64_t window_h, int64_t window_w, int64_t stride_h, int64_t stride_w,
                             int64_t top, int64_t bottom, int64_t left, int64_t right,
                             double pad_value, bool may_pad) {
  if (top == 0 && bottom == 0 && left == 0 && right == 0) return "VALID";
  const auto [same_top, same_bottom] = same_padding(input[1], window_h, stride_h);
  const auto [same_left, same_right] = same_padding(input[2], window_w, stride_w);
  if (top == same_top && bottom == same_bottom && left == same_left && right == same_right) {
    return "SAME";
  }
  if (!may_pad) {
    unsupported(op, "pads [" + std::to_string(top) + ", " + std::to_string(bottom) + "] x [" +
                        std::to_string(left) + ", " + std::to_string(right) +
                        "], which is neither TensorFlow's SAME nor VALID padding");
  }
  const DType dtype = op.inputs[0].dtype();
  const std::string paddings = int32s({0, 0, top, bottom, left, right, 0, 0}, {4, 2});
  NodeDef* n = pad_value == 0.0 ? node("Pad", {x, paddings})
                                : node("PadV2", {x, paddings, scalar(pad_value, dtype)});
  set_type(n, "T", tf_dtype(dtype));
  set_type(n, "Tpaddings", tf::DT_INT32);
  x = n->name();
  return "VALID";
}

void Builder::conv2d(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<Conv2DAttrs>("Conv2DAttrs");
  if (!in[0].is_value()) unsupported(op, "convolves a constant input with a computed filter");
  const tf::DataType dtype = tf_dtype(op.inputs[0].dtype());
  std::string x = value(in[0].value).name;
  const int64_t channels = a.input_shape[3];
  const bool depthwise = a.groups > 1 && a.groups == channels && a.filter_shape[2] == 1;
  if (a.groups != 1 && !depthwise) {
    unsupported(op, "is a grouped convolution with " + std::to_string(a.groups) +
                        " groups; TensorFlow's Conv2D and DepthwiseConv2dNative express one "
                        "group or one group per input channel");
  }
  if (depthwise && (a.dilation_h != 1 || a.dilation_w != 1)) {
    unsupported(op,
                "is a dilated depthwise convolution (DepthwiseConv2dNative runs dilation 1 "
                "on the CPU)");
  }
  const std::string pad =
      padding(op, x, a.input_shape, (a.filter_shape[0] - 1) * a.dilation_h + 1,
              (a.filter_shape[1] - 1) * a.dilation_w + 1, a.stride_h, a.stride_w, a.pad_top,
              a.pad_bottom, a.pad_left, a.pad_right, 0.0, true);
  std::string filter;
  NodeDef* n = nullptr;
  if (depthwise) {
    // [KH, KW, 1, C * M] -> [KH, KW, C, M]: output channel c * M + m reads input channel c. A
    // variable already of that shape (slim's depthwise_weights, viewed as the grouped filter) is
    // read as it is.
    const std::vector<int64_t> want{a.filter_shape[0], a.filter_shape[1], channels,
                                    a.filter_shape[3] / channels};
    const Tensor* own = nullptr;
    if (!in[1].is_value() && !in[1].variable.empty()) {
      own = &variables_.at(in[1].constant.storage().get()).second;
    }
    if (own != nullptr && own->shape().to_vector() == want &&
        own->byte_offset() == in[1].constant.byte_offset()) {
      filter = variable_read(in[1].variable, *own);
    } else {
      filter = reshaped(operand(in[1]), op.inputs[1].dtype(), want);
    }
    n = node("DepthwiseConv2dNative", {x, filter});
  } else {
    filter = operand(in[1]);
    n = node("Conv2D", {x, filter});
  }
  set_type(n, "T", dtype);
  set_ints(n, "strides", {1, a.stride_h, a.stride_w, 1});
  set_ints(n, "dilations", {1, a.dilation_h, a.dilation_w, 1});
  set_string(n, "padding", pad);
  set_string(n, "data_format", "NHWC");
  define(op.outputs[0], n->name());
}

// TensorFlow's max pool never picks padding and its average pool leaves it out of the count, as
// Trainyard's do; other explicit pads of a max pool become a PadV2 of the lowest value.
void Builder::pool(const Op& op, const std::vector<Ref>& in, bool max) {
  const auto a = op.attributes<PoolAttrs>("PoolAttrs");
  std::string x = value(in[0].value).name;
  const std::string pad =
      padding(op, x, a.input_shape, a.window_h, a.window_w, a.stride_h, a.stride_w, a.pad_top,
              a.pad_bottom, a.pad_left, a.pad_right, -std::numeric_limits<double>::infinity(), max);
  NodeDef* n = node(max ? "MaxPool" : "AvgPool", {x});
  set_type(n, "T", tf_dtype(op.inputs[0].dtype()));
  set_ints(n, "ksize", {1, a.window_h, a.window_w, 1});
  set_ints(n, "strides", {1, a.stride_h, a.stride_w, 1});
  set_string(n, "padding", pad);
  set_string(n, "data_format", "NHWC");
  define(op.outputs[0], n->name());
}

// Batch norm over the last axis: FusedBatchNormV3 in inference mode (x, scale, offset, mean,
// variance); an [N, C] value goes through [N, 1, 1, C].
void Builder::batch_norm(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<BatchNormAttrs>("BatchNormAttrs");
  if (!in[0].is_value()) unsupported(op, "normalizes a constant with computed statistics");
  const Shape shape = value(in[0].value).shape;
  if (shape.rank() != 4 && shape.rank() != 2) {
    unsupported(op, "normalizes a rank-" + std::to_string(shape.rank()) +
                        " value; FusedBatchNormV3 takes NHWC (rank 4 and rank 2 are exported)");
  }
  const DType dtype = op.inputs[0].dtype();
  std::string x = value(in[0].value).name;
  if (shape.rank() == 2) x = reshaped(x, dtype, {-1, 1, 1, shape[1]});
  std::vector<std::string> inputs{x};
  for (std::size_t k = 1; k < 5; ++k) inputs.push_back(operand(in[k]));
  NodeDef* n = node("FusedBatchNormV3", inputs);
  set_type(n, "T", tf_dtype(dtype));
  set_type(n, "U", tf_dtype(op.inputs[1].dtype()));
  set_float(n, "epsilon", static_cast<float>(a.epsilon));
  set_string(n, "data_format", "NHWC");
  set_bool(n, "is_training", false);
  std::string y = n->name();
  if (shape.rank() == 2) y = reshaped(y, dtype, {-1, shape[1]});
  define(op.outputs[0], y);
}

void Builder::unary(const Op& op, const std::vector<Ref>& in, std::string_view name) {
  const std::string x = value(in[0].value).name;
  const DType dtype = op.inputs[0].dtype();
  static const std::map<std::string_view, const char*> kSame = {
      {"neg", "Neg"},           {"abs", "Abs"},         {"sign", "Sign"},   {"exp", "Exp"},
      {"log", "Log"},           {"sqrt", "Sqrt"},       {"rsqrt", "Rsqrt"}, {"square", "Square"},
      {"tanh", "Tanh"},         {"sigmoid", "Sigmoid"}, {"relu", "Relu"},   {"relu6", "Relu6"},
      {"softplus", "Softplus"}, {"copy", "Identity"}};
  NodeDef* n = nullptr;
  if (auto it = kSame.find(name); it != kSame.end()) {
    n = node(it->second, {x});
  } else if (name == "elu") {
    const double alpha = op.attributes<ScalarAttrs>("ScalarAttrs").a;
    if (alpha != 1.0) {
      unsupported(op, "has alpha " + std::to_string(alpha) + "; TensorFlow's Elu has alpha 1");
    }
    n = node("Elu", {x});
  } else if (name == "clip_by_value") {
    const auto a = op.attributes<ScalarAttrs>("ScalarAttrs");
    n = node("ClipByValue", {x, scalar(a.a, dtype), scalar(a.b, dtype)});
  } else if (name == "cast") {
    n = node("Cast", {x});
    set_type(n, "SrcT", tf_dtype(dtype));
    set_type(n, "DstT", tf_dtype(op.attributes<CastAttrs>("CastAttrs").dtype));
    set_bool(n, "Truncate", false);
    define(op.outputs[0], n->name());
    return;
  } else {
    unsupported(op, "has no TensorFlow form in the exporter");
  }
  set_type(n, "T", tf_dtype(dtype));
  define(op.outputs[0], n->name());
}

// NumPy broadcasting, as TensorFlow's binary ops have it. An add of a per-channel vector (a
// variable or constant of the last dimension's size) to a computed value is slim's BiasAdd.
void Builder::binary(const Op& op, const std::vector<Ref>& in, const char* op_type) {
  const tf::DataType dtype = tf_dtype(op.inputs[0].dtype());
  if (std::string_view(op_type) == "AddV2") {
    for (std::size_t side = 0; side < 2; ++side) {
      const Ref& x = in[side];
      const Ref& bias = in[1 - side];
      if (!x.is_value() || bias.is_value()) continue;
      const Shape& shape = value(x.value).shape;
      if (shape.rank() >= 2 && bias.constant.shape() == Shape{shape[shape.rank() - 1]} &&
          current_.axis + 1 < static_cast<int>(shape.rank()) && op.outputs[0].shape() == shape) {
        NodeDef* n = node("BiasAdd", {value(x.value).name, operand(bias)});
        set_type(n, "T", dtype);
        set_string(n, "data_format", "NHWC");
        define(op.outputs[0], n->name());
        return;
      }
    }
  }
  const Shape& shape = op.outputs[0].shape();
  NodeDef* n =
      node(op_type, {elementwise_operand(in[0], shape), elementwise_operand(in[1], shape)});
  set_type(n, "T", dtype);
  define(op.outputs[0], n->name());
}

// where(condition, a, b): SelectV2, which broadcasts as NumPy does.
void Builder::where(const Op& op, const std::vector<Ref>& in) {
  const Shape& shape = op.outputs[0].shape();
  NodeDef* n =
      node("SelectV2", {elementwise_operand(in[0], shape), elementwise_operand(in[1], shape),
                        elementwise_operand(in[2], shape)});
  set_type(n, "T", tf_dtype(op.inputs[1].dtype()));
  define(op.outputs[0], n->name());
}

void Builder::matmul(const Op& op, const std::vector<Ref>& in, bool with_bias) {
  const auto a = op.attributes<MatMulAttrs>("MatMulAttrs");
  const tf::DataType dtype = tf_dtype(op.inputs[0].dtype());
  const bool plain = op.inputs[0].shape().rank() == 2 && op.inputs[1].shape().rank() == 2;
  NodeDef* n = nullptr;
  if (plain) {
    n = node("MatMul", {operand(in[0]), operand(in[1])});
    set_bool(n, "transpose_a", a.transpose_a);
    set_bool(n, "transpose_b", a.transpose_b);
  } else {
    if (with_bias) unsupported(op, "multiplies batched matrices with a bias");
    n = node("BatchMatMulV2", {operand(in[0]), operand(in[1])});
    set_bool(n, "adj_x", a.transpose_a);
    set_bool(n, "adj_y", a.transpose_b);
  }
  set_type(n, "T", dtype);
  if (with_bias) {
    n = node("BiasAdd", {n->name(), operand(in[2])});
    set_type(n, "T", dtype);
    set_string(n, "data_format", "NHWC");
    const char* activation = nullptr;
    switch (a.activation) {
      case Activation::kNone:
        break;
      case Activation::kRelu:
        activation = "Relu";
        break;
      case Activation::kSigmoid:
        activation = "Sigmoid";
        break;
      case Activation::kTanh:
        activation = "Tanh";
        break;
    }
    if (activation != nullptr) {
      n = node(activation, {n->name()});
      set_type(n, "T", dtype);
    }
  }
  define(op.outputs[0], n->name());
}

void Builder::softmax(const Op& op, const std::vector<Ref>& in, const char* op_type) {
  const int64_t axis = op.attributes<AxisAttrs>("AxisAttrs").axis;
  const int64_t rank = static_cast<int64_t>(op.inputs[0].shape().rank());
  if (axis != -1 && axis != rank - 1) {
    unsupported(op, "runs over axis " + std::to_string(axis) + " of a rank-" +
                        std::to_string(rank) + " value; TensorFlow's " + op_type +
                        " runs over the last axis");
  }
  if (current_.axis == rank - 1) moves_batch(op, "runs over the dimension that holds the batch");
  NodeDef* n = node(op_type, {value(in[0].value).name});
  set_type(n, "T", tf_dtype(op.inputs[0].dtype()));
  define(op.outputs[0], n->name());
}

void Builder::reduce(const Op& op, const std::vector<Ref>& in, const char* op_type) {
  const auto a = op.attributes<ReduceAttrs>("ReduceAttrs");
  const Batching batch = value(in[0].value).batch;
  if (((a.axis_mask >> batch.axis) & 1u) != 0) {
    moves_batch(op, "reduces over the dimension that holds the batch");
  }
  const std::size_t rank = op.inputs[0].shape().rank();
  std::vector<int64_t> axes;
  current_ = batch;
  for (std::size_t axis = 0; axis < rank; ++axis) {
    if (((a.axis_mask >> axis) & 1u) == 0) continue;
    axes.push_back(static_cast<int64_t>(axis));
    if (!a.keepdims && static_cast<int>(axis) < batch.axis) --current_.axis;
  }
  NodeDef* n =
      node(op_type, {value(in[0].value).name, int32s(axes, {static_cast<int64_t>(axes.size())})});
  set_type(n, "T", tf_dtype(op.inputs[0].dtype()));
  set_type(n, "Tidx", tf::DT_INT32);
  set_bool(n, "keep_dims", a.keepdims);
  define(op.outputs[0], n->name());
}

void Builder::pad(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<PadAttrs>("PadAttrs");
  const std::size_t rank = op.inputs[0].shape().rank();
  const auto b = static_cast<std::size_t>(current_.axis);
  if (a.before[b] != 0 || a.after[b] != 0) moves_batch(op, "pads the dimension of the batch");
  std::vector<int64_t> paddings;
  for (std::size_t j = 0; j < rank; ++j) {
    paddings.push_back(a.before[j]);
    paddings.push_back(a.after[j]);
  }
  const DType dtype = op.inputs[0].dtype();
  const std::string p = int32s(paddings, {static_cast<int64_t>(rank), 2});
  NodeDef* n = nullptr;
  if (a.value == 0.0) {
    n = node("Pad", {value(in[0].value).name, p});
  } else {
    n = node("PadV2", {value(in[0].value).name, p, scalar(a.value, dtype)});
  }
  set_type(n, "T", tf_dtype(dtype));
  set_type(n, "Tpaddings", tf::DT_INT32);
  define(op.outputs[0], n->name());
}

void Builder::slice(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<SliceAttrs>("SliceAttrs");
  const Shape shape = op.inputs[0].shape();
  const auto b = static_cast<std::size_t>(current_.axis);
  if (a.begin[b] != 0 || a.size[b] != shape[b]) {
    moves_batch(op, "slices the dimension that holds the batch");
  }
  std::vector<int64_t> begin, size;
  for (std::size_t axis = 0; axis < shape.rank(); ++axis) {
    begin.push_back(a.begin[axis]);
    size.push_back(axis == b ? -1 : a.size[axis]);
  }
  const int64_t rank = static_cast<int64_t>(shape.rank());
  NodeDef* n =
      node("Slice", {value(in[0].value).name, int32s(begin, {rank}), int32s(size, {rank})});
  set_type(n, "T", tf_dtype(op.inputs[0].dtype()));
  set_type(n, "Index", tf::DT_INT32);
  define(op.outputs[0], n->name());
}

void Builder::concat(const Op& op, const std::vector<Ref>& in) {
  const int64_t axis = op.attributes<AxisAttrs>("AxisAttrs").axis;
  const int64_t rank = static_cast<int64_t>(op.outputs[0].shape().rank());
  if ((axis + rank) % rank == current_.axis) {
    moves_batch(op, "concatenates along the dimension that holds the batch");
  }
  std::vector<std::string> inputs;
  for (const Ref& r : in) {
    if (r.is_value() && (value(r.value).batch.axis != current_.axis ||
                         value(r.value).batch.within != current_.within)) {
      moves_batch(op, "concatenates values that hold the batch in different dimensions");
    }
    inputs.push_back(operand(r));
  }
  inputs.push_back(int32s({axis}, {}));
  NodeDef* n = node("ConcatV2", inputs);
  set_int(n, "N", static_cast<int64_t>(in.size()));
  set_type(n, "T", tf_dtype(op.inputs[0].dtype()));
  set_type(n, "Tidx", tf::DT_INT32);
  define(op.outputs[0], n->name());
}

void Builder::transpose(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<PermAttrs>("PermAttrs");
  const std::size_t rank = op.inputs[0].shape().rank();
  std::vector<int64_t> perm(a.perm.begin(), a.perm.begin() + static_cast<std::ptrdiff_t>(rank));
  const Batching batch = value(in[0].value).batch;
  for (std::size_t j = 0; j < rank; ++j) {
    if (perm[j] == batch.axis) current_ = {static_cast<int>(j), batch.within};
  }
  NodeDef* n =
      node("Transpose", {value(in[0].value).name, int32s(perm, {static_cast<int64_t>(rank)})});
  set_type(n, "T", tf_dtype(op.inputs[0].dtype()));
  set_type(n, "Tperm", tf::DT_INT32);
  define(op.outputs[0], n->name());
}

// crop_and_resize: CropAndResize, its box indices computed in the graph from the rows it gets.
// Boxes that hold the batch in their rows (Faster R-CNN's [B * M, 4] proposals, batch at stride
// M) crop image row / M, which the capture recorded as a constant of its batch: the graph makes
// it a FloorDiv of a Range. Constant boxes that are one box for every image, each cropped once
// (box_ind = row: Mask R-CNN's resize of its features as a crop of the whole image) are that box
// tiled over the graph's images. Either after checking that the captured box_ind is that.
void Builder::crop_and_resize(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<CropAndResizeAttrs>("CropAndResizeAttrs");
  if (!in[0].is_value() || in[2].is_value() || !in[2].variable.empty()) {
    unsupported(op,
                "crops an image that does not depend on the graph's inputs, or with image "
                "indices the graph computes");
  }
  const Value image = value(in[0].value);
  const int64_t rows = op.inputs[1].shape()[0];
  int64_t per_image = 1;
  std::string boxes;
  Batching batching;
  NodeDef* count = nullptr;
  auto rows_of = [&](const std::string& x, tf::DataType type) {
    NodeDef* shape = node("Shape", {x});
    set_type(shape, "T", type);
    set_type(shape, "out_type", tf::DT_INT32);
    NodeDef* n =
        node("StridedSlice", {shape->name(), int32s({0}, {1}), int32s({1}, {1}), int32s({1}, {1})});
    set_type(n, "T", tf::DT_INT32);
    set_type(n, "Index", tf::DT_INT32);
    set_int(n, "shrink_axis_mask", 1);
    return n;
  };
  if (in[1].is_value()) {
    const Value b = value(in[1].value);
    if (b.batch.axis != 0) unsupported(op, "crops boxes that do not hold the batch in their rows");
    per_image = b.batch.within;
    boxes = b.name;
    batching = b.batch;
    count = rows_of(boxes, tf::DT_FLOAT);
  } else {
    const std::vector<float> values = in[1].constant.to_vector<float>();
    bool one_box = !values.empty();
    for (std::size_t i = 4; i < values.size(); ++i) one_box = one_box && values[i] == values[i % 4];
    if (image.batch.axis != 0 || rows != image.shape[0] || !one_box) {
      unsupported(op, "crops constant boxes other than one box of every image");
    }
    count = rows_of(image.name, tf_dtype(op.inputs[0].dtype()));
    NodeDef* multiples = node("Pack", {count->name(), int32s({1}, {})});
    set_int(multiples, "N", 2);
    set_type(multiples, "T", tf::DT_INT32);
    set_int(multiples, "axis", 0);
    NodeDef* tile =
        node("Tile",
             {constant(Tensor::from_vector(in[1].constant.backend(), Shape{1, 4},
                                           std::vector<float>(values.begin(), values.begin() + 4))),
              multiples->name()});
    set_type(tile, "T", tf::DT_FLOAT);
    set_type(tile, "Tmultiples", tf::DT_INT32);
    boxes = tile->name();
    batching = image.batch;
  }
  std::vector<int32_t> expected;
  for (int64_t r = 0; r < rows; ++r) expected.push_back(static_cast<int32_t>(r / per_image));
  if (in[2].constant.to_vector<int32_t>() != expected) {
    unsupported(op,
                "crops boxes of other images than the ones their rows hold (box_ind is not "
                "row / " +
                    std::to_string(per_image) + ")");
  }
  NodeDef* range = node("Range", {int32s({0}, {}), count->name(), int32s({1}, {})});
  set_type(range, "Tidx", tf::DT_INT32);
  NodeDef* box_ind = node("FloorDiv", {range->name(), int32s({per_image}, {})});
  set_type(box_ind, "T", tf::DT_INT32);
  NodeDef* n = node("CropAndResize", {image.name, boxes, box_ind->name(),
                                      int32s({a.crop_height, a.crop_width}, {2})});
  set_type(n, "T", tf_dtype(op.inputs[0].dtype()));
  set_string(n, "method", a.nearest ? "nearest" : "bilinear");
  set_float(n, "extrapolation_value", static_cast<float>(a.extrapolation_value));
  current_ = batching;
  define(op.outputs[0], n->name());
}

// batch_multiclass_non_max_suppression: the composition of tf_graph_detection.h.
void Builder::nms(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<MultiClassNmsAttrs>("MultiClassNmsAttrs");
  const Shape& boxes = op.inputs[0].shape();
  const Shape& scores = op.inputs[1].shape();
  const std::string why = tf_nms_unsupported(a, op.inputs.size() > 2);
  if (!why.empty()) unsupported(op, why);
  if (!in[0].is_value() || !in[1].is_value()) {
    unsupported(op, "reads boxes or scores that do not depend on the graph's inputs");
  }
  const TfNmsOutputs o = add_tf_multiclass_nms(
      graph_, [this](const std::string& wanted) { return unique(wanted); }, value(in[0].value).name,
      value(in[1].value).name, boxes[1], boxes[2], scores[2], a,
      &op == last_nms_ ? spec_.nms_clip_windows : std::string());
  const std::string* names[] = {&o.boxes, &o.scores, &o.classes, &o.num_detections,
                                &o.anchor_indices};
  for (std::size_t k = 0; k < op.outputs.size() && k < 5; ++k) define(op.outputs[k], *names[k]);
}

void Builder::convert(const Op& op, const std::vector<Ref>& in) {
  const std::string_view name = op.op->name;
  static const std::set<std::string_view> kBatchFirst = {
      "conv2d", "max_pool2d", "avg_pool2d", "batch_norm_inference", "matmul", "matmul_bias_act"};
  // Their rows are independent, so rows that merge the batch with another factor (a detector's
  // boxes of each image, at stride `within`) are as good as a batch of their own.
  if (kBatchFirst.count(name) > 0 && current_.axis != 0 &&
      !(name.starts_with("matmul") &&
        current_.axis + 1 < static_cast<int>(op.inputs[0].shape().rank()))) {
    moves_batch(op, "reads a value that holds the batch in another dimension than the first");
  }
  if (name == "conv2d") return conv2d(op, in);
  if (name == "max_pool2d") return pool(op, in, true);
  if (name == "avg_pool2d") return pool(op, in, false);
  if (name == "batch_norm_inference") return batch_norm(op, in);
  if (name == "add") return binary(op, in, "AddV2");
  if (name == "sub") return binary(op, in, "Sub");
  if (name == "mul") return binary(op, in, "Mul");
  if (name == "div") return binary(op, in, "RealDiv");
  if (name == "maximum") return binary(op, in, "Maximum");
  if (name == "less") return binary(op, in, "Less");
  if (name == "minimum") return binary(op, in, "Minimum");
  if (name == "pow") return binary(op, in, "Pow");
  if (name == "matmul") return matmul(op, in, false);
  if (name == "matmul_bias_act") return matmul(op, in, true);
  if (name == "softmax") return softmax(op, in, "Softmax");
  if (name == "log_softmax") return softmax(op, in, "LogSoftmax");
  if (name == "reduce_mean") return reduce(op, in, "Mean");
  if (name == "reduce_sum") return reduce(op, in, "Sum");
  if (name == "reduce_max") return reduce(op, in, "Max");
  if (name == "reduce_min") return reduce(op, in, "Min");
  if (name == "pad") return pad(op, in);
  if (name == "slice") return slice(op, in);
  if (name == "concat") return concat(op, in);
  if (name == "transpose") return transpose(op, in);
  if (name == "where") return where(op, in);
  if (name == "batch_multiclass_non_max_suppression") return nms(op, in);
  if (name == "crop_and_resize") return crop_and_resize(op, in);
  static const std::set<std::string_view> kUnary = {
      "neg",  "abs",  "sign",  "exp", "log",           "sqrt",     "rsqrt", "square", "sigmoid",
      "tanh", "relu", "relu6", "elu", "clip_by_value", "softplus", "copy",  "cast"};
  if (kUnary.count(name) > 0) return unary(op, in, name);
  unsupported(
      op,
      "has no TensorFlow form in the SavedModel exporter (it maps conv2d, max_pool2d, "
      "avg_pool2d, batch_norm_inference, matmul, matmul_bias_act, softmax, log_softmax, "
      "reduce_mean/sum/max/min, pad, slice, concat, transpose, elementwise arithmetic, "
      "less, where, crop_and_resize, batch_multiclass_non_max_suppression and activations)");
}

}  // namespace trainyard::tf_internal
