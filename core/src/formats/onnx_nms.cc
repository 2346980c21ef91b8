#include "formats/onnx_nms.h"

#include <limits>
#include <utility>
#include <vector>

namespace trainyard::onnx_internal {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

class Emitter {
 public:
  Emitter(onnx::GraphProto& graph, const std::function<std::string(const std::string&)>& unique)
      : graph_(graph), unique_(unique) {}

  NodeProto* node(const std::string& op_type, const std::vector<std::string>& inputs) {
    NodeProto* n = graph_.add_node();
    n->set_op_type(op_type);
    n->set_name(unique_("MultiClassNonMaxSuppression/" + op_type));
    for (const std::string& input : inputs) n->add_input(input);
    n->add_output(unique_(n->name() + ":0"));
    return n;
  }
  std::string op(const std::string& op_type, const std::vector<std::string>& inputs) {
    return node(op_type, inputs)->output(0);
  }
  static void attr(NodeProto* n, const char* name, int64_t value) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  static void attr(NodeProto* n, const char* name, const std::vector<int64_t>& values) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  // An f32 [1] tensor attribute (ConstantOfShape's value).
  static void value_attr(NodeProto* n, float value) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    TensorProto* t = a->mutable_t();
    t->set_data_type(TensorProto::FLOAT);
    t->add_dims(1);
    t->add_float_data(value);
  }

  // Initializers: `dims` empty is a scalar.
  std::string floats(const std::vector<float>& values, std::vector<int64_t> dims) {
    TensorProto* t = graph_.add_initializer();
    t->set_name(unique_("MultiClassNonMaxSuppression/const"));
    t->set_data_type(TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return t->name();
  }
  std::string int64s(const std::vector<int64_t>& values, std::vector<int64_t> dims) {
    TensorProto* t = graph_.add_initializer();
    t->set_name(unique_("MultiClassNonMaxSuppression/const"));
    t->set_data_type(TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return t->name();
  }
  std::string cast(const std::string& x, int32_t to) {
    NodeProto* n = node("Cast", {x});
    attr(n, "to", int64_t{to});
    return n->output(0);
  }
  // Coordinate k of boxes [..., 4] whose last axis is `axis`: [...].
  std::string column(const std::string& x, int64_t k, int64_t axis) {
    NodeProto* n = node("Gather", {x, int64s({k}, {})});
    attr(n, "axis", axis);
    return n->output(0);
  }
  // Column k of [K, 3]: [K, 1].
  std::string column2(const std::string& x, int64_t k) {
    NodeProto* n = node("Gather", {x, int64s({k}, {1})});
    attr(n, "axis", int64_t{1});
    return n->output(0);
  }
  std::string minus_inf_like(const std::string& shape) {
    NodeProto* n = node("ConstantOfShape", {shape});
    value_attr(n, kMinusInf);
    return n->output(0);
  }

 private:
  onnx::GraphProto& graph_;
  const std::function<std::string(const std::string&)>& unique_;
};

}  // namespace

std::string nms_unsupported(const MultiClassNmsAttrs& attrs, int64_t q, int64_t classes,
                            bool has_num_valid_boxes) {
  if (attrs.soft_nms_sigma > 0.0f) {
    return "with soft_nms_sigma " + std::to_string(attrs.soft_nms_sigma) +
           " (soft NMS decays the scores, which ONNX's NonMaxSuppression cannot give); set "
           "soft_nms_sigma 0 for the ONNX export";
  }
  if (attrs.use_class_agnostic_nms) {
    return "with use_class_agnostic_nms (class-agnostic NMS has no exact ONNX form in the "
           "exporter)";
  }
  if (attrs.use_combined_nms) {
    return "with use_combined_nms (combined NMS has no exact ONNX form in the exporter)";
  }
  if (q != 1 && q != classes) {
    return "with " + std::to_string(q) + " boxes an anchor for " + std::to_string(classes) +
           " classes (one box an anchor, or one per class)";
  }
  if (has_num_valid_boxes) return "with num_valid_boxes (no ONNX form in the exporter)";
  return "";
}

NmsGraphOutputs add_multiclass_nms(onnx::GraphProto& graph,
                                   const std::function<std::string(const std::string&)>& unique,
                                   const std::string& boxes, const std::string& scores,
                                   int64_t anchors, int64_t classes, int64_t q,
                                   const MultiClassNmsAttrs& attrs,
                                   const std::string& clip_windows) {
  Emitter e(graph, unique);
  const int64_t m = attrs.max_total_detections;
  // The boxes as [N, A, 4] (one an anchor) or [N, A, C, 4] (one per class).
  const std::string boxes_in =
      q == 1 ? e.op("Reshape", {boxes, e.int64s({0, anchors, 4}, {3})}) : boxes;
  NodeProto* t = e.node("Transpose", {scores});
  Emitter::attr(t, "perm", std::vector<int64_t>{0, 2, 1});
  const std::string by_class = t->output(0);  // [N, C, A]

  // Per image and class: the kept (image, class, anchor) rows. With a box per class, each
  // image's classes are images of their own to NonMaxSuppression (boxes [N * C, A, 4] of class
  // c at row n * C + c, scores [N * C, 1, A]), its rows (n * C + c, 0, a) made (n, c, a).
  std::string selected;
  const std::string per_class = e.int64s({attrs.max_detections_per_class}, {});
  const std::string iou = e.floats({attrs.iou_threshold}, {});
  const std::string threshold = e.floats({attrs.score_threshold}, {});
  if (q == 1) {
    selected = e.op("NonMaxSuppression", {boxes_in, by_class, per_class, iou, threshold});
  } else {
    NodeProto* class_major = e.node("Transpose", {boxes_in});
    Emitter::attr(class_major, "perm", std::vector<int64_t>{0, 2, 1, 3});
    const std::string class_boxes =
        e.op("Reshape", {class_major->output(0), e.int64s({-1, anchors, 4}, {3})});
    const std::string class_scores = e.op("Reshape", {by_class, e.int64s({-1, 1, anchors}, {3})});
    const std::string rows =
        e.op("NonMaxSuppression", {class_boxes, class_scores, per_class, iou, threshold});
    const std::string c = e.int64s({classes}, {});
    const std::string row = e.column2(rows, 0);  // [K, 1]
    const std::string image = e.op("Div", {row, c});
    NodeProto* cat =
        e.node("Concat", {image, e.op("Sub", {row, e.op("Mul", {image, c})}), e.column2(rows, 2)});
    Emitter::attr(cat, "axis", int64_t{1});
    selected = cat->output(0);
  }
  const std::string kept_scores = e.op("GatherND", {by_class, selected});
  const std::string dense =
      e.op("ScatterND", {e.minus_inf_like(e.op("Shape", {by_class})), selected, kept_scores});

  // The clip window as [lo, hi] per coordinate: the options' window, else the extent of all the
  // batch's boxes (extent_of: the least ymin and xmin, the greatest ymax and xmax).
  std::string lo, hi;
  if (!clip_windows.empty()) {  // each image's: [N, 1, 4] (or [N, 1, 1, 4]) over its boxes
    auto corners = [&](std::vector<int64_t> k) {
      NodeProto* g = e.node("Gather", {clip_windows, e.int64s(k, {4})});
      Emitter::attr(g, "axis", int64_t{1});
      return e.op("Unsqueeze", {g->output(0), q == 1 ? e.int64s({1}, {1}) : e.int64s({1, 2}, {2})});
    };
    lo = corners({0, 1, 0, 1});
    hi = corners({2, 3, 2, 3});
  } else if (attrs.has_clip_window) {
    const auto& w = attrs.clip_window;
    lo = e.floats({w[0], w[1], w[0], w[1]}, {4});
    hi = e.floats({w[2], w[3], w[2], w[3]}, {4});
  } else {
    const std::vector<int64_t> all =
        q == 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0, 1, 2};
    NodeProto* least = e.node("ReduceMin", {boxes_in});
    Emitter::attr(least, "axes", all);
    Emitter::attr(least, "keepdims", int64_t{0});
    NodeProto* greatest = e.node("ReduceMax", {boxes_in});
    Emitter::attr(greatest, "axes", all);
    Emitter::attr(greatest, "keepdims", int64_t{0});
    lo = e.op("Gather", {least->output(0), e.int64s({0, 1, 0, 1}, {4})});
    hi = e.op("Gather", {greatest->output(0), e.int64s({2, 3, 2, 3}, {4})});
  }
  const std::string clipped = e.op("Max", {e.op("Min", {boxes_in, hi}), lo});
  // Boxes whose clipped box has no area are dropped (their slots -inf).
  const int64_t last = q == 1 ? 2 : 3;
  const std::string area =
      e.op("Mul", {e.op("Sub", {e.column(clipped, 2, last), e.column(clipped, 0, last)}),
                   e.op("Sub", {e.column(clipped, 3, last), e.column(clipped, 1, last)})});
  const std::string has_area = e.op("Greater", {area, e.floats({0.0f}, {})});  // [N, A(, C)]
  std::string area_by_class;                                                   // [N, 1 or C, A]
  if (q == 1) {
    area_by_class = e.op("Unsqueeze", {has_area, e.int64s({1}, {1})});
  } else {
    NodeProto* by = e.node("Transpose", {has_area});
    Emitter::attr(by, "perm", std::vector<int64_t>{0, 2, 1});
    area_by_class = by->output(0);
  }
  const std::string masked = e.op("Where", {area_by_class, dense, e.floats({kMinusInf}, {})});
  std::string flat = e.op("Reshape", {masked, e.int64s({0, -1}, {2})});  // slot c * A + a
  if (classes * anchors < m) {  // at least M slots, the rest -inf
    const std::string rows =
        e.op("Slice", {e.op("Shape", {flat}), e.int64s({0}, {1}), e.int64s({1}, {1})});
    NodeProto* shape = e.node("Concat", {rows, e.int64s({m - classes * anchors}, {1})});
    Emitter::attr(shape, "axis", int64_t{0});
    const std::string padding = e.minus_inf_like(shape->output(0));
    NodeProto* cat = e.node("Concat", {flat, padding});
    Emitter::attr(cat, "axis", int64_t{1});
    flat = cat->output(0);
  }
  NodeProto* top = e.node("TopK", {flat, e.int64s({m}, {1})});
  Emitter::attr(top, "axis", int64_t{1});
  Emitter::attr(top, "largest", int64_t{1});
  Emitter::attr(top, "sorted", int64_t{1});
  top->add_output(unique(top->name() + ":1"));
  const std::string values = top->output(0);
  const std::string slots = top->output(1);
  const std::string valid = e.op("Greater", {values, e.floats({kMinusInf}, {})});
  const std::string a = e.int64s({anchors}, {});
  const std::string cls = e.op("Div", {slots, a});
  const std::string anchor = e.op("Sub", {slots, e.op("Mul", {cls, a})});

  std::string framed = clipped;
  if (!clip_windows.empty()) {  // (clipped - window min) * (1 / window size), in f32
    const std::string scale = e.op("Div", {e.floats({1.0f}, {}), e.op("Sub", {hi, lo})});
    framed = e.op("Mul", {e.op("Sub", {clipped, lo}), scale});
  } else if (attrs.change_coordinate_frame) {  // (clipped - window min) * (1 / window size), in f32
    const auto& w = attrs.clip_window;
    const float ys = 1.0f / (w[2] - w[0]), xs = 1.0f / (w[3] - w[1]);
    framed = e.op("Mul", {e.op("Sub", {clipped, lo}), e.floats({ys, xs, ys, xs}, {4})});
  }
  // Each detection's box: its anchor's, or its anchor's of its class.
  std::string where = e.op("Unsqueeze", {anchor, e.int64s({2}, {1})});
  if (q != 1) {  // the padding slots past C * A (M > C * A) clamped to the last class
    const std::string box_class = e.op("Min", {cls, e.int64s({classes - 1}, {})});
    NodeProto* pair = e.node("Concat", {where, e.op("Unsqueeze", {box_class, e.int64s({2}, {1})})});
    Emitter::attr(pair, "axis", int64_t{2});
    where = pair->output(0);
  }
  NodeProto* gather = e.node("GatherND", {framed, where});
  Emitter::attr(gather, "batch_dims", int64_t{1});
  const std::string zero = e.floats({0.0f}, {});
  NmsGraphOutputs out;
  out.boxes =
      e.op("Where", {e.op("Unsqueeze", {valid, e.int64s({2}, {1})}), gather->output(0), zero});
  out.scores = e.op("Where", {valid, values, zero});
  out.classes = e.op("Where", {valid, e.cast(cls, TensorProto::FLOAT), zero});
  out.anchor_indices = e.op("Where", {valid, anchor, e.int64s({-1}, {})});
  NodeProto* count = e.node("ReduceSum", {e.cast(valid, TensorProto::FLOAT), e.int64s({1}, {1})});
  Emitter::attr(count, "keepdims", int64_t{0});
  out.num_detections = e.cast(count->output(0), TensorProto::INT32);
  return out;
}

}  // namespace trainyard::onnx_internal
