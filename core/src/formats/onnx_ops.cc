// The op families of the ONNX graph builder (onnx_builder.h): each translator emits the nodes
// of one captured op and defines its outputs.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "formats/onnx_builder.h"
#include "formats/onnx_nms.h"
#include "trainyard/ops/array.h"
#include "trainyard/ops/detection.h"
#include "trainyard/ops/image.h"
#include "trainyard/ops/linalg.h"
#include "trainyard/ops/nn.h"
#include "trainyard/ops/reduce.h"

namespace trainyard::onnx_internal {

using onnx::NodeProto;

void Builder::conv2d(std::size_t i, const std::vector<Ref>& in) {
  const Op& op = ops_[i];
  const auto a = op.attributes<Conv2DAttrs>("Conv2DAttrs");
  if (!in[0].is_value()) unsupported(op, "convolves a constant input with a computed filter");
  const std::vector<int64_t> to_oihw{3, 2, 0, 1};
  std::string filter;
  if (in[1].is_value()) {
    NodeProto* t = node("Transpose", {as_is(in[1].value)});
    attr(t, "perm", to_oihw);
    filter = out(t);
  } else {
    filter = initializer(in[1].constant, to_oihw, std::nullopt, "oihw");
  }
  std::vector<std::string> inputs{nchw(in[0].value), filter};
  Tensor result = op.outputs[0];
  // slim's conv2d adds its biases to the convolution (creating the biases may launch ops in
  // between): when that add is the convolution's only reader and the biases are a variable or a
  // constant made before the convolution, one Conv with a bias input.
  const Storage* conv_storage = result.storage().get();
  for (std::size_t j = i + 1; uses_[conv_storage] == 1 && j < ops_.size(); ++j) {
    const Op& reader = ops_[j];
    if (!live_[j] || std::none_of(reader.inputs.begin(), reader.inputs.end(), [&](const Tensor& t) {
          return t.defined() && t.storage().get() == conv_storage;
        })) {
      continue;
    }
    for (std::size_t side = 0; side < 2 && std::string_view(reader.op->name) == "add"; ++side) {
      const Tensor& other = reader.inputs[1 - side];
      if (key_of(reader.inputs[side]) != key_of(result)) continue;
      auto made = producer_.find(other.storage().get());
      const bool before = variables_.count(other.storage().get()) > 0 || made == producer_.end() ||
                          made->second < i;
      const Ref bias = before ? resolve(other, &reader) : Ref{};
      if (before && !bias.is_value() && bias.constant.tensor.shape() == Shape{a.filter_shape[3]} &&
          reader.outputs[0].shape() == result.shape()) {
        inputs.push_back(initializer(bias.constant, {}, std::nullopt, ""));
        skip_[j] = true;
        result = reader.outputs[0];
      }
      break;
    }
    break;
  }
  NodeProto* n = node("Conv", inputs);
  attr(n, "kernel_shape", std::vector<int64_t>{a.filter_shape[0], a.filter_shape[1]});
  attr(n, "strides", std::vector<int64_t>{a.stride_h, a.stride_w});
  attr(n, "dilations", std::vector<int64_t>{a.dilation_h, a.dilation_w});
  attr(n, "pads", std::vector<int64_t>{a.pad_top, a.pad_left, a.pad_bottom, a.pad_right});
  attr(n, "group", a.groups);
  const auto [batching, steps] = batching_of_value(in);
  define(result, out(n), Layout::kNchw, batching, steps);
}

// TensorFlow's max pool never picks padding and its average pool leaves padding out of the
// count: ONNX's MaxPool pads and count_include_pad 0.
void Builder::pool(const Op& op, const std::vector<Ref>& in, bool max) {
  const auto a = op.attributes<PoolAttrs>("PoolAttrs");
  NodeProto* n = node(max ? "MaxPool" : "AveragePool", {nchw(in[0].value)});
  attr(n, "kernel_shape", std::vector<int64_t>{a.window_h, a.window_w});
  attr(n, "strides", std::vector<int64_t>{a.stride_h, a.stride_w});
  attr(n, "pads", std::vector<int64_t>{a.pad_top, a.pad_left, a.pad_bottom, a.pad_right});
  if (!max) attr(n, "count_include_pad", int64_t{0});
  const auto [batching, steps] = batching_of_value(in);
  define(op.outputs[0], out(n), Layout::kNchw, batching, steps);
}

// Batch norm over the last axis: ONNX's over axis 1, of an NCHW value or an [N, C] one.
void Builder::batch_norm(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<BatchNormAttrs>("BatchNormAttrs");
  if (!in[0].is_value()) unsupported(op, "normalizes a constant with computed statistics");
  const std::size_t rank = values_[static_cast<std::size_t>(in[0].value)].shape.rank();
  if (rank != 4 && rank != 2) {
    unsupported(op, "normalizes a rank-" + std::to_string(rank) +
                        " value; ONNX's BatchNormalization needs the channels on axis 1 (rank 4 "
                        "NHWC and rank 2 are exported)");
  }
  const Layout layout = rank == 4 ? Layout::kNchw : Layout::kAsIs;
  std::vector<std::string> inputs{layout == Layout::kNchw ? nchw(in[0].value) : as_is(in[0].value)};
  for (std::size_t k = 1; k < 5; ++k) inputs.push_back(operand(in[k], Layout::kAsIs, false, op));
  NodeProto* n = node("BatchNormalization", inputs);
  attr_float(n, "epsilon", a.epsilon);
  const auto [batching, steps] = batching_of_value(in);
  define(op.outputs[0], out(n), layout, batching, steps);
}

void Builder::unary(const Op& op, const std::vector<Ref>& in, std::string_view name) {
  const int v = in[0].value;
  const Layout layout = natural(v);
  const std::string x = layout == Layout::kNchw ? nchw(v) : as_is(v);
  const DType dtype = op.inputs[0].dtype();
  static const std::map<std::string_view, const char*> kSame = {
      {"neg", "Neg"},   {"abs", "Abs"},           {"sign", "Sign"},    {"exp", "Exp"},
      {"log", "Log"},   {"sqrt", "Sqrt"},         {"tanh", "Tanh"},    {"sigmoid", "Sigmoid"},
      {"relu", "Relu"}, {"softplus", "Softplus"}, {"copy", "Identity"}};
  NodeProto* n = nullptr;
  if (auto it = kSame.find(name); it != kSame.end()) {
    n = node(it->second, {x});
  } else if (name == "relu6") {
    n = node("Clip", {x, scalar(0.0, dtype), scalar(6.0, dtype)});
  } else if (name == "clip_by_value") {
    const auto a = op.attributes<ScalarAttrs>("ScalarAttrs");
    n = node("Clip", {x, scalar(a.a, dtype), scalar(a.b, dtype)});
  } else if (name == "elu") {
    n = node("Elu", {x});
    attr_float(n, "alpha", op.attributes<ScalarAttrs>("ScalarAttrs").a);
  } else if (name == "rsqrt") {
    n = node("Reciprocal", {out(node("Sqrt", {x}))});
  } else if (name == "square") {
    n = node("Mul", {x, x});
  } else if (name == "cast") {
    n = node("Cast", {x});
    attr(n, "to", int64_t{onnx_type(op.attributes<CastAttrs>("CastAttrs").dtype)});
  } else {
    unsupported(op, "has no ONNX form in the exporter");
  }
  int64_t steps = 0;
  const Batching batching = batching_of(op, in, &steps);
  define(op.outputs[0], out(n), layout, batching, steps);
}

// NumPy broadcasting as ONNX has it; a 4-D result in NCHW when a computed input has that form.
void Builder::binary(const Op& op, const std::vector<Ref>& in, const char* op_type) {
  Layout layout = Layout::kAsIs;
  if (op.outputs[0].shape().rank() == 4) {
    for (const Ref& r : in) {
      if (r.is_value() && natural(r.value) == Layout::kNchw) layout = Layout::kNchw;
    }
  }
  NodeProto* n =
      node(op_type, {operand(in[0], layout, true, op), operand(in[1], layout, true, op)});
  int64_t steps = 0;
  const Batching batching = batching_of(op, in, &steps, true);
  define(op.outputs[0], out(n), layout, batching, steps);
}

// A comparison (bool); not_equal as Not(Equal).
void Builder::compare(const Op& op, const std::vector<Ref>& in, const char* op_type, bool negate) {
  int64_t steps = 0;
  const Batching batching = batching_of(op, in, &steps, true);
  NodeProto* n = node(
      op_type, {operand(in[0], Layout::kAsIs, true, op), operand(in[1], Layout::kAsIs, true, op)});
  if (negate) n = node("Not", {out(n)});
  define(op.outputs[0], out(n), Layout::kAsIs, batching, steps);
}

void Builder::where(const Op& op, const std::vector<Ref>& in) {
  int64_t steps = 0;
  const Batching batching = batching_of(op, in, &steps, true);
  NodeProto* n = node(
      "Where", {operand(in[0], Layout::kAsIs, true, op), operand(in[1], Layout::kAsIs, true, op),
                operand(in[2], Layout::kAsIs, true, op)});
  define(op.outputs[0], out(n), Layout::kAsIs, batching, steps);
}

// batch_multiclass_non_max_suppression: the exact composition of onnx_nms.h.
void Builder::nms(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<MultiClassNmsAttrs>("MultiClassNmsAttrs");
  const Shape& boxes = op.inputs[0].shape();
  const Shape& scores = op.inputs[1].shape();
  const std::string why = nms_unsupported(a, boxes[2], scores[2], op.inputs.size() > 2);
  if (!why.empty()) unsupported(op, why);
  if (!in[0].is_value() || !in[1].is_value()) {
    unsupported(op, "reads boxes or scores that do not depend on the graph's inputs");
  }
  const bool last = &op == &ops_[last_nms_];
  const NmsGraphOutputs o = add_multiclass_nms(
      *graph_, [this](const std::string& wanted) { return unique(wanted); }, as_is(in[0].value),
      as_is(in[1].value), boxes[1], scores[2], boxes[2], a,
      last ? spec_.nms_clip_windows : std::string());
  const std::string* names[] = {&o.boxes, &o.scores, &o.classes, &o.num_detections,
                                &o.anchor_indices};
  for (std::size_t k = 0; k < op.outputs.size() && k < 5; ++k) {
    define(op.outputs[k], *names[k], Layout::kAsIs);
  }
}

std::pair<Batching, int64_t> Builder::batching_of_value(const std::vector<Ref>& in) const {
  for (const Ref& r : in) {
    if (!r.is_value()) continue;
    const Value& v = values_[static_cast<std::size_t>(r.value)];
    return {v.batching, v.steps};
  }
  return {Batching::kFirst, 0};
}

// Where each box's `count` samples along an axis of `size` pixels fall, as TensorFlow's
// CropAndResize kernel computes them from the box's edges lo_edge and hi_edge (f32 [R, 1]): in
// f32, start = lo * (size - 1), scale = (hi - lo) * (size - 1) / (count - 1), sample i at
// start + i * scale; one sample at 0.5 * (lo + hi) * (size - 1), which TensorFlow computes in
// double. A sample outside [0, size - 1] (or NaN) reads the extrapolation value; its pixel
// indices are made 0 so that the gathers stay inside the image.
Builder::CropAxis Builder::crop_axis(const std::string& lo_edge, const std::string& hi_edge,
                                     int64_t size, int64_t count) {
  const std::string last = scalar(static_cast<double>(size - 1), DType::kF32);
  std::string v;
  if (count > 1) {
    std::vector<float> steps;
    for (int64_t i = 0; i < count; ++i) steps.push_back(static_cast<float>(i));
    const std::string start = out(node("Mul", {lo_edge, last}));
    const std::string scale =
        out(node("Div", {out(node("Mul", {out(node("Sub", {hi_edge, lo_edge})), last})),
                         scalar(static_cast<double>(count - 1), DType::kF32)}));
    v = out(node("Add", {start, out(node("Mul", {floats(steps), scale}))}));  // [R, count]
  } else {
    NodeProto* sum = node("Cast", {out(node("Add", {lo_edge, hi_edge}))});
    attr(sum, "to", int64_t{onnx::TensorProto::DOUBLE});
    const std::string mid = out(node("Mul", {out(node("Mul", {out(sum), scalar(0.5, DType::kF64)})),
                                             scalar(static_cast<double>(size - 1), DType::kF64)}));
    NodeProto* f32 = node("Cast", {mid});
    attr(f32, "to", int64_t{onnx::TensorProto::FLOAT});
    v = out(f32);
  }
  CropAxis axis;
  axis.inside = out(node("And", {out(node("GreaterOrEqual", {v, scalar(0.0, DType::kF32)})),
                                 out(node("LessOrEqual", {v, last}))}));
  const std::string at = out(node("Where", {axis.inside, v, scalar(0.0, DType::kF32)}));
  const std::string lo = out(node("Floor", {at}));
  axis.lerp = out(node("Sub", {at, lo}));
  auto index = [&](const std::string& x) {
    NodeProto* n = node("Cast", {x});
    attr(n, "to", int64_t{onnx::TensorProto::INT64});
    return out(n);
  };
  axis.lo = index(lo);
  axis.hi = index(out(node("Ceil", {at})));
  return axis;
}

// crop_and_resize: TensorFlow's CropAndResize (bilinear) as ONNX ops, with the kernel's
// arithmetic (crop_axis; then top = tl + (tr - tl) * x_lerp, bottom likewise, top + (bottom -
// top) * y_lerp), so that ONNX Runtime gives Trainyard's crops (ONNX's RoiAlign averages over
// bins from pixel centres instead). The four pixels of each sample are gathered from the image
// flattened to [N * H * W, C], at (image * H + y) * W + x. Boxes that hold the batch in their
// rows (Faster R-CNN's [B * M, 4] proposals: rows that merge the batch with M) crop image
// row / M, which the capture recorded as a constant of its batch: the graph computes it from a
// Range of the rows. Constant boxes that are one box for each of the image's rows (Mask R-CNN's
// resize of its features, box_ind = row) are that box expanded over the rows. Either after
// checking that the captured box_ind is that.
void Builder::crop_and_resize(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<CropAndResizeAttrs>("CropAndResizeAttrs");
  if (a.nearest) unsupported(op, "samples the nearest pixel (only bilinear crops are exported)");
  if (!in[0].is_value() || in[2].is_value() || op.inputs[0].dtype() != DType::kF32) {
    unsupported(op,
                "crops an image that does not depend on the graph's inputs or is not f32, or "
                "with image indices the graph computes");
  }
  const int image = in[0].value;
  const Value& source = values_[static_cast<std::size_t>(image)];
  const int64_t rows = op.inputs[1].shape()[0];
  const int64_t height = source.shape[1], width = source.shape[2], depth = source.shape[3];
  int64_t per_image = 1;
  std::string boxes;
  std::pair<Batching, int64_t> batching{Batching::kFirst, 0};
  if (in[1].is_value()) {
    const Value& b = values_[static_cast<std::size_t>(in[1].value)];
    if (source.batching != Batching::kFirst ||
        (b.batching != Batching::kFirst && b.batching != Batching::kBatchRows)) {
      unsupported(op, "crops an image or boxes that do not hold the batch in their rows");
    }
    per_image = b.batching == Batching::kBatchRows ? b.steps : 1;
    boxes = as_is(in[1].value);
    batching = {b.batching, b.steps};
  } else {
    const std::vector<float> values = in[1].constant.tensor.to_vector<float>();
    bool one_box = !values.empty();
    for (std::size_t i = 4; i < values.size(); ++i) one_box = one_box && values[i] == values[i % 4];
    if (source.batching == Batching::kTimeMajor || rows != source.shape[0] || !one_box) {
      unsupported(op, "crops constant boxes other than one box of each of the image's rows");
    }
    const std::string rows_of_image = out(
        node("Slice", {out(node("Shape", {as_is(image)})), int64s({0}), int64s({1}), int64s({0})}));
    NodeProto* shape = node("Concat", {rows_of_image, int64s({4})});
    attr(shape, "axis", int64_t{0});
    boxes = out(
        node("Expand", {out(node("Reshape", {floats({values[0], values[1], values[2], values[3]}),
                                             int64s({1, 4})})),
                        out(shape)}));
    batching = {source.batching, source.steps};
  }
  std::vector<int32_t> expected;
  for (int64_t r = 0; r < rows; ++r) expected.push_back(static_cast<int32_t>(r / per_image));
  if (in[2].constant.tensor.to_vector<int32_t>() != expected) {
    unsupported(op,
                "crops boxes of other images than the ones their rows hold (box_ind is not "
                "row / " +
                    std::to_string(per_image) + ")");
  }
  auto column = [&](int64_t k) {
    NodeProto* n = node("Gather", {boxes, int64s({k})});
    attr(n, "axis", int64_t{1});
    return out(n);  // [R, 1]
  };
  const CropAxis y = crop_axis(column(0), column(2), height, a.crop_height);  // [R, ch]
  const CropAxis x = crop_axis(column(1), column(3), width, a.crop_width);    // [R, cw]
  // Each box's first pixel: image (row / per_image) times H * W, as [R, 1, 1].
  const std::string count =
      out(node("Slice", {out(node("Shape", {boxes})), int64s({0}), int64s({1}), int64s({0})}));
  const std::string range =
      out(node("Range", {scalar(0, DType::kI64), out(node("Squeeze", {count, int64s({0})})),
                         scalar(1, DType::kI64)}));  // the rows 0 .. R - 1
  const std::string first = out(node(
      "Unsqueeze",
      {out(node("Mul", {out(node("Div", {range, int64s({per_image})})), int64s({height * width})})),
       int64s({1, 2})}));
  const std::string y_lo =
      out(node("Unsqueeze", {out(node("Mul", {y.lo, int64s({width})})), int64s({2})}));
  const std::string y_hi =
      out(node("Unsqueeze", {out(node("Mul", {y.hi, int64s({width})})), int64s({2})}));
  const std::string x_lo = out(node("Unsqueeze", {x.lo, int64s({1})}));
  const std::string x_hi = out(node("Unsqueeze", {x.hi, int64s({1})}));
  const std::string flat = out(node("Reshape", {as_is(image), int64s({-1, depth})}));
  auto pixels = [&](const std::string& row, const std::string& col) {  // [R, ch, cw, C]
    NodeProto* n = node("Gather", {flat, out(node("Add", {out(node("Add", {first, row})), col}))});
    attr(n, "axis", int64_t{0});
    return out(n);
  };
  const std::string tl = pixels(y_lo, x_lo), tr = pixels(y_lo, x_hi);
  const std::string bl = pixels(y_hi, x_lo), br = pixels(y_hi, x_hi);
  const std::string x_lerp = out(node("Unsqueeze", {x.lerp, int64s({1, 3})}));  // [R, 1, cw, 1]
  const std::string y_lerp = out(node("Unsqueeze", {y.lerp, int64s({2, 3})}));  // [R, ch, 1, 1]
  auto lerp = [&](const std::string& p, const std::string& q, const std::string& w) {
    return out(node("Add", {p, out(node("Mul", {out(node("Sub", {q, p})), w}))}));
  };
  const std::string value = lerp(lerp(tl, tr, x_lerp), lerp(bl, br, x_lerp), y_lerp);
  const std::string inside = out(node("And", {out(node("Unsqueeze", {y.inside, int64s({2, 3})})),
                                              out(node("Unsqueeze", {x.inside, int64s({1, 3})}))}));
  NodeProto* n = node("Where", {inside, value, scalar(a.extrapolation_value, DType::kF32)});
  define(op.outputs[0], out(n), Layout::kAsIs, batching.first, batching.second);
}

void Builder::matmul(const Op& op, const std::vector<Ref>& in, bool with_bias) {
  const auto a = op.attributes<MatMulAttrs>("MatMulAttrs");
  auto side = [&](const Ref& r, bool transposed) {
    if (!transposed) return operand(r, Layout::kAsIs, false, op);
    const std::size_t rank = r.is_value() ? values_[static_cast<std::size_t>(r.value)].shape.rank()
                                          : r.constant.tensor.shape().rank();
    std::vector<int64_t> perm(rank);
    for (std::size_t k = 0; k < rank; ++k) perm[k] = static_cast<int64_t>(k);
    std::swap(perm[rank - 1], perm[rank - 2]);
    if (!r.is_value()) return initializer(r.constant, perm, std::nullopt, "transposed");
    NodeProto* t = node("Transpose", {as_is(r.value)});
    attr(t, "perm", perm);
    return out(t);
  };
  std::vector<std::string> inputs{side(in[0], a.transpose_a), side(in[1], a.transpose_b)};
  NodeProto* n = nullptr;
  if (!with_bias) {
    n = node("MatMul", inputs);
  } else {
    inputs.push_back(operand(in[2], Layout::kAsIs, false, op));
    n = node("Gemm", inputs);
    switch (a.activation) {
      case Activation::kNone:
        break;
      case Activation::kRelu:
        n = node("Relu", {out(n)});
        break;
      case Activation::kSigmoid:
        n = node("Sigmoid", {out(n)});
        break;
      case Activation::kTanh:
        n = node("Tanh", {out(n)});
        break;
    }
  }
  int64_t steps = 0;
  const Batching batching = batching_of(op, in, &steps);
  define(op.outputs[0], out(n), Layout::kAsIs, batching, steps);
}

void Builder::softmax(const Op& op, const std::vector<Ref>& in, const char* op_type) {
  const int64_t axis = op.attributes<AxisAttrs>("AxisAttrs").axis;
  const Layout layout = natural(in[0].value);
  int64_t steps = 0;
  const Batching batching = batching_of(op, in, &steps);
  if (batching != Batching::kFirst &&
      (axis == 0 || axis == -static_cast<int64_t>(op.inputs[0].shape().rank()))) {
    moves_batch(op, "normalizes over rows that hold the batch");
  }
  NodeProto* n = node(op_type, {layout == Layout::kNchw ? nchw(in[0].value) : as_is(in[0].value)});
  attr(n, "axis", layout == Layout::kNchw ? kNchwAxis[static_cast<std::size_t>(axis)] : axis);
  define(op.outputs[0], out(n), layout, batching, steps);
}

// Reductions keep an NCHW input's layout; without keepdims the result is in Trainyard's layout,
// which the NCHW input gives directly when the kept axes are in the same order (a global pool).
void Builder::reduce(const Op& op, const std::vector<Ref>& in, const char* op_type) {
  const auto a = op.attributes<ReduceAttrs>("ReduceAttrs");
  const int v = in[0].value;
  const std::size_t rank = values_[static_cast<std::size_t>(v)].shape.rank();
  if ((a.axis_mask & 1u) != 0) moves_batch(op, "reduces over the first dimension");
  auto reduced = [&](int64_t axis) { return ((a.axis_mask >> axis) & 1u) != 0; };
  Layout layout = natural(v);
  if (layout == Layout::kNchw && !a.keepdims) {
    std::vector<int64_t> kept;
    for (int64_t axis : kToNchw) {
      if (!reduced(axis)) kept.push_back(axis);
    }
    if (!std::is_sorted(kept.begin(), kept.end())) layout = Layout::kAsIs;
  }
  std::vector<int64_t> axes;
  for (std::size_t axis = 0; axis < rank; ++axis) {
    if (!reduced(static_cast<int64_t>(axis))) continue;
    axes.push_back(layout == Layout::kNchw ? kNchwAxis[axis] : static_cast<int64_t>(axis));
  }
  std::sort(axes.begin(), axes.end());
  const std::string x = layout == Layout::kNchw ? nchw(v) : as_is(v);
  NodeProto* n = nullptr;
  if (std::string_view(op_type) == "ReduceSum") {  // axes became an input at opset 13
    n = node(op_type, {x, int64s(axes)});
  } else {  // and at opset 18 for the others
    n = node(op_type, {x});
    attr(n, "axes", axes);
  }
  attr(n, "keepdims", int64_t{a.keepdims ? 1 : 0});
  int64_t steps = 0;
  const Batching batching = batching_of(op, in, &steps);
  define(op.outputs[0], out(n), a.keepdims ? layout : Layout::kAsIs, batching, steps);
}

void Builder::pad(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<PadAttrs>("PadAttrs");
  const int v = in[0].value;
  const std::size_t rank = values_[static_cast<std::size_t>(v)].shape.rank();
  if (a.before[0] != 0 || a.after[0] != 0) moves_batch(op, "pads the first dimension");
  const Layout layout = natural(v);
  std::vector<int64_t> pads(2 * rank);
  for (std::size_t j = 0; j < rank; ++j) {
    const auto axis = static_cast<std::size_t>(layout == Layout::kNchw ? kToNchw[j] : j);
    pads[j] = a.before[axis];
    pads[rank + j] = a.after[axis];
  }
  std::vector<std::string> inputs{layout == Layout::kNchw ? nchw(v) : as_is(v), int64s(pads)};
  const DType dtype = op.inputs[0].dtype();
  if (dtype == DType::kF32 || dtype == DType::kF64) {
    inputs.push_back(scalar(a.value, dtype));
  } else if (a.value != 0.0) {
    unsupported(op, std::string("pads a ") + dtype_name(dtype) + " value with a non-zero value");
  }
  const auto [batching, steps] = batching_of_value(in);
  define(op.outputs[0], out(node("Pad", inputs)), layout, batching, steps);
}

void Builder::slice(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<SliceAttrs>("SliceAttrs");
  const int v = in[0].value;
  const Shape shape = values_[static_cast<std::size_t>(v)].shape;
  // The batch: the first dimension, or the second of a time-major value (whose steps may be
  // sliced).
  const Batching batching = values_[static_cast<std::size_t>(v)].batching;
  const std::size_t batch_axis = batching == Batching::kTimeMajor ? 1 : 0;
  if (batching == Batching::kStepRows || batching == Batching::kBatchRows) {
    if (a.begin[0] != 0 || a.size[0] != shape[0]) {
      moves_batch(op, "slices the rows of a value whose rows hold the batch");
    }
  }
  if (a.begin[batch_axis] != 0 || a.size[batch_axis] != shape[batch_axis]) {
    moves_batch(op, "slices the batch dimension");
  }
  const Layout layout = natural(v);
  std::vector<int64_t> starts, ends, axes;
  for (std::size_t axis = 0; axis < shape.rank(); ++axis) {
    if (axis == batch_axis) continue;
    if (a.begin[axis] == 0 && a.size[axis] == shape[axis]) continue;
    starts.push_back(a.begin[axis]);
    ends.push_back(a.begin[axis] + a.size[axis]);
    axes.push_back(layout == Layout::kNchw ? kNchwAxis[axis] : static_cast<int64_t>(axis));
  }
  const std::string x = layout == Layout::kNchw ? nchw(v) : as_is(v);
  NodeProto* n = axes.empty() ? node("Identity", {x})
                              : node("Slice", {x, int64s(starts), int64s(ends), int64s(axes)});
  define(op.outputs[0], out(n), layout, batching, values_[static_cast<std::size_t>(v)].steps);
}

void Builder::concat(const Op& op, const std::vector<Ref>& in) {
  const int64_t axis = op.attributes<AxisAttrs>("AxisAttrs").axis;
  // Steps stacked along the first dimension of time-major values: [1, B, ...] reshapes of
  // batch-major values (each Unsqueezed) or time-major values.
  if (axis == 0) {
    std::vector<std::string> inputs;
    for (const Ref& r : in) {
      const Value* v = r.is_value() ? &values_[static_cast<std::size_t>(r.value)] : nullptr;
      if (v != nullptr && v->batching == Batching::kTimeMajor) {
        inputs.push_back(as_is(r.value));
      } else if (v != nullptr && v->unsqueezed_of >= 0) {
        inputs.push_back(out(node("Unsqueeze", {as_is(v->unsqueezed_of), int64s({0})})));
      } else {
        moves_batch(op, "concatenates along the first dimension");
      }
    }
    NodeProto* n = node("Concat", inputs);
    attr(n, "axis", int64_t{0});
    define(op.outputs[0], out(n), Layout::kAsIs, Batching::kTimeMajor);
    return;
  }
  const Batching batching = batching_of(op, in);
  if (batching == Batching::kTimeMajor && axis == 1) {
    moves_batch(op, "concatenates along the batch of time-major values");
  }
  Layout layout = Layout::kAsIs;
  if (op.outputs[0].shape().rank() == 4) {
    for (const Ref& r : in) {
      if (r.is_value() && natural(r.value) == Layout::kNchw) layout = Layout::kNchw;
    }
  }
  std::vector<std::string> inputs;
  for (const Ref& r : in) inputs.push_back(operand(r, layout, false, op));
  NodeProto* n = node("Concat", inputs);
  attr(n, "axis", layout == Layout::kNchw ? kNchwAxis[static_cast<std::size_t>(axis)] : axis);
  int64_t steps = 0;
  batching_of(op, in, &steps);
  define(op.outputs[0], out(n), layout, batching, steps);
}

void Builder::transpose(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<PermAttrs>("PermAttrs");
  const int v = in[0].value;
  const std::size_t rank = values_[static_cast<std::size_t>(v)].shape.rank();
  // [B, T, ...] <-> [T, B, ...]: to and from time-major (a recurrent layer's steps).
  const Batching batching = values_[static_cast<std::size_t>(v)].batching;
  bool swaps_first_two = rank >= 2 && a.perm[0] == 1 && a.perm[1] == 0;
  for (std::size_t i = 2; i < rank; ++i) {
    swaps_first_two = swaps_first_two && a.perm[i] == static_cast<int64_t>(i);
  }
  // Rows that hold the batch (merged with steps or classes) stay the rows when the first
  // dimension stays first.
  Batching result = batching;
  if (swaps_first_two && (batching == Batching::kFirst || batching == Batching::kTimeMajor)) {
    result = batching == Batching::kFirst ? Batching::kTimeMajor : Batching::kFirst;
  } else if (batching == Batching::kTimeMajor && (a.perm[0] != 0 || a.perm[1] != 1)) {
    moves_batch(op, "transposes a time-major value other than back to batch-major");
  } else if (a.perm[0] != 0) {
    moves_batch(op, "moves the first dimension");
  }
  const Layout layout = swaps_first_two ? Layout::kAsIs : natural(v);
  std::vector<int64_t> perm;
  for (std::size_t i = 0; i < rank; ++i) {
    perm.push_back(layout == Layout::kNchw ? kNchwAxis[static_cast<std::size_t>(a.perm[i])]
                                           : a.perm[i]);
  }
  NodeProto* n = node("Transpose", {layout == Layout::kNchw ? nchw(v) : as_is(v)});
  attr(n, "perm", perm);
  define(op.outputs[0], out(n), Layout::kAsIs, result,
         result == batching ? values_[static_cast<std::size_t>(v)].steps : 0);
}

void Builder::convert(std::size_t i, const std::vector<Ref>& in) {
  const Op& op = ops_[i];
  const std::string_view name = op.op->name;
  // Time-major values and step rows (a recurrent layer's) go only into ops that keep the batch
  // where it is: elementwise ones, products, slices and concatenations of steps, transposes.
  static const std::set<std::string_view> kAnyBatching = {
      "add",           "sub",        "mul",
      "div",           "maximum",    "minimum",
      "pow",           "matmul",     "matmul_bias_act",
      "slice",         "concat",     "transpose",
      "where",         "equal",      "not_equal",
      "less",          "less_equal", "greater",
      "greater_equal", "neg",        "abs",
      "sign",          "exp",        "log",
      "sqrt",          "rsqrt",      "square",
      "sigmoid",       "tanh",       "relu",
      "relu6",         "elu",        "clip_by_value",
      "softplus",      "copy",       "cast"};
  // Row-wise ones also on rows that merge the batch with steps or classes (and convolutions,
  // pools, batch norms and pads, for which each row is an image: Faster R-CNN's second stage on
  // its [B * M, ...] crops).
  static const std::set<std::string_view> kRowWise = {"softmax",
                                                      "log_softmax",
                                                      "reduce_mean",
                                                      "reduce_sum",
                                                      "reduce_max",
                                                      "reduce_min",
                                                      "logsumexp",
                                                      "conv2d",
                                                      "max_pool2d",
                                                      "avg_pool2d",
                                                      "batch_norm_inference",
                                                      "pad",
                                                      "crop_and_resize"};
  if (kAnyBatching.count(name) == 0) {
    for (const Ref& r : in) {
      const Batching batching =
          r.is_value() ? values_[static_cast<std::size_t>(r.value)].batching : Batching::kFirst;
      if (batching == Batching::kStepRows || batching == Batching::kBatchRows) {
        if (kRowWise.count(name) > 0) continue;
        unsupported(op,
                    "reads a value whose rows merge the batch with steps or classes; only "
                    "row-wise ops are exported on those");
      }
      if (batching != Batching::kFirst) {
        unsupported(op,
                    "reads a time-major value (the batch second, as a recurrent layer's "
                    "steps); only elementwise ops, products, slices and concatenations of "
                    "steps are exported on those");
      }
    }
  }
  if (name == "conv2d") return conv2d(i, in);
  if (name == "max_pool2d") return pool(op, in, true);
  if (name == "avg_pool2d") return pool(op, in, false);
  if (name == "batch_norm_inference") return batch_norm(op, in);
  if (name == "add") return binary(op, in, "Add");
  if (name == "sub") return binary(op, in, "Sub");
  if (name == "mul") return binary(op, in, "Mul");
  if (name == "div") return binary(op, in, "Div");
  if (name == "maximum") return binary(op, in, "Max");
  if (name == "minimum") return binary(op, in, "Min");
  if (name == "pow") return binary(op, in, "Pow");
  if (name == "equal") return compare(op, in, "Equal", false);
  if (name == "not_equal") return compare(op, in, "Equal", true);
  if (name == "less") return compare(op, in, "Less", false);
  if (name == "less_equal") return compare(op, in, "LessOrEqual", false);
  if (name == "greater") return compare(op, in, "Greater", false);
  if (name == "greater_equal") return compare(op, in, "GreaterOrEqual", false);
  if (name == "where") return where(op, in);
  if (name == "batch_multiclass_non_max_suppression") return nms(op, in);
  if (name == "matmul") return matmul(op, in, false);
  if (name == "matmul_bias_act") return matmul(op, in, true);
  if (name == "softmax") return softmax(op, in, "Softmax");
  if (name == "log_softmax") return softmax(op, in, "LogSoftmax");
  if (name == "reduce_mean") return reduce(op, in, "ReduceMean");
  if (name == "reduce_sum") return reduce(op, in, "ReduceSum");
  if (name == "reduce_max") return reduce(op, in, "ReduceMax");
  if (name == "reduce_min") return reduce(op, in, "ReduceMin");
  if (name == "logsumexp") return reduce(op, in, "ReduceLogSumExp");
  if (name == "pad") return pad(op, in);
  if (name == "slice") return slice(op, in);
  if (name == "concat") return concat(op, in);
  if (name == "transpose") return transpose(op, in);
  if (name == "crop_and_resize") return crop_and_resize(op, in);
  static const std::set<std::string_view> kUnary = {
      "neg",  "abs",  "sign",  "exp", "log",           "sqrt",     "rsqrt", "square", "sigmoid",
      "tanh", "relu", "relu6", "elu", "clip_by_value", "softplus", "copy",  "cast"};
  if (kUnary.count(name) > 0) return unary(op, in, name);
  unsupported(op,
              "has no ONNX form in the exporter (it maps conv2d, max_pool2d, avg_pool2d, "
              "batch_norm_inference, matmul, matmul_bias_act, softmax, log_softmax, "
              "reductions, pad, slice, concat, transpose, elementwise arithmetic, comparisons, "
              "where, activations, crop_and_resize and batch_multiclass_non_max_suppression)");
}

}  // namespace trainyard::onnx_internal
