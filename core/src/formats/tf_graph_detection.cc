#include "formats/tf_graph_detection.h"

#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "formats/tf_graph.h"
#include "trainyard/error.h"

namespace trainyard::tf_internal {
namespace {

using tf::NodeDef;

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr const char* kScope = "MultiClassNonMaxSuppression/";

// Nodes of the main graph, named under kScope.
class Emitter {
 public:
  Emitter(tf::GraphDef& graph, const std::function<std::string(const std::string&)>& unique)
      : graph_(graph), unique_(unique) {}

  NodeDef* node(const std::string& op_type, std::vector<std::string> inputs) {
    return add_node(graph_, unique_(kScope + op_type), op_type, std::move(inputs));
  }
  // A node with its T attribute.
  std::string op(const std::string& op_type, std::vector<std::string> inputs, tf::DataType t) {
    NodeDef* n = node(op_type, std::move(inputs));
    set_type(n, "T", t);
    return n->name();
  }
  std::string floats(const std::vector<float>& values, const std::vector<int64_t>& dims) {
    NodeDef* n = node("Const", {});
    set_type(n, "dtype", tf::DT_FLOAT);
    tf::TensorProto* t = (*n->mutable_attr())["value"].mutable_tensor();
    t->set_dtype(tf::DT_FLOAT);
    tf::TensorShapeProto* shape = t->mutable_tensor_shape();
    for (int64_t d : dims) shape->add_dim()->set_size(d);
    for (float v : values) t->add_float_val(v);
    return n->name();
  }
  std::string ints(const std::vector<int64_t>& values, const std::vector<int64_t>& dims) {
    const std::string name = unique_(std::string(kScope) + "Const");
    add_int32_const(graph_, name, values, dims);
    return name;
  }
  std::string int64s(const std::vector<int64_t>& values, const std::vector<int64_t>& dims) {
    NodeDef* n = node("Const", {});
    set_type(n, "dtype", tf::DT_INT64);
    tf::TensorProto* t = (*n->mutable_attr())["value"].mutable_tensor();
    t->set_dtype(tf::DT_INT64);
    tf::TensorShapeProto* shape = t->mutable_tensor_shape();
    for (int64_t d : dims) shape->add_dim()->set_size(d);
    for (int64_t v : values) t->add_int64_val(v);
    return n->name();
  }
  std::string cast(const std::string& x, tf::DataType from, tf::DataType to) {
    NodeDef* n = node("Cast", {x});
    set_type(n, "SrcT", from);
    set_type(n, "DstT", to);
    set_bool(n, "Truncate", false);
    return n->name();
  }
  // GatherV2 of `indices` (int32) along `axis`, batch_dims as given.
  std::string gather(const std::string& x, const std::string& indices, int64_t axis,
                     int64_t batch_dims, tf::DataType t) {
    NodeDef* n = node("GatherV2", {x, indices, ints({axis}, {})});
    set_type(n, "Tparams", t);
    set_type(n, "Tindices", tf::DT_INT32);
    set_type(n, "Taxis", tf::DT_INT32);
    set_int(n, "batch_dims", batch_dims);
    return n->name();
  }
  std::string expand_dims(const std::string& x, int64_t axis, tf::DataType t) {
    NodeDef* n = node("ExpandDims", {x, ints({axis}, {})});
    set_type(n, "T", t);
    set_type(n, "Tdim", tf::DT_INT32);
    return n->name();
  }
  std::string select(const std::string& condition, const std::string& a, const std::string& b,
                     tf::DataType t) {
    return op("SelectV2", {condition, a, b}, t);
  }
  std::string reduce(const char* op_type, const std::string& x, const std::vector<int64_t>& axes) {
    NodeDef* n = node(op_type, {x, ints(axes, {static_cast<int64_t>(axes.size())})});
    set_type(n, "T", tf::DT_FLOAT);
    set_type(n, "Tidx", tf::DT_INT32);
    set_bool(n, "keep_dims", false);
    return n->name();
  }

 private:
  tf::GraphDef& graph_;
  const std::function<std::string(const std::string&)>& unique_;
};

// A function's nodes: inputs are "arg" or "node:output_arg:k", attributes all given (a function
// body's nodes get no defaults added on every path that loads it).
class FunctionEmitter {
 public:
  explicit FunctionEmitter(tf::FunctionDef& function) : function_(function) {}

  NodeDef* node(const std::string& op_type, std::vector<std::string> inputs) {
    NodeDef* n = function_.add_node_def();
    n->set_name(op_type + "_" + std::to_string(count_++));
    n->set_op(op_type);
    for (std::string& input : inputs) n->add_input(std::move(input));
    return n;
  }
  std::string int32s(const std::vector<int64_t>& values, const std::vector<int64_t>& dims) {
    NodeDef* n = node("Const", {});
    set_type(n, "dtype", tf::DT_INT32);
    tf::TensorProto* t = (*n->mutable_attr())["value"].mutable_tensor();
    t->set_dtype(tf::DT_INT32);
    tf::TensorShapeProto* shape = t->mutable_tensor_shape();
    for (int64_t d : dims) shape->add_dim()->set_size(d);
    for (int64_t v : values) t->add_int_val(static_cast<int32_t>(v));
    return n->name() + ":output:0";
  }
  std::string float_scalar(float value) {
    NodeDef* n = node("Const", {});
    set_type(n, "dtype", tf::DT_FLOAT);
    tf::TensorProto* t = (*n->mutable_attr())["value"].mutable_tensor();
    t->set_dtype(tf::DT_FLOAT);
    t->mutable_tensor_shape();
    t->add_float_val(value);
    return n->name() + ":output:0";
  }
  std::string gather(const std::string& x, const std::string& index, tf::DataType t) {
    NodeDef* n = node("GatherV2", {x, index, int32s({0}, {})});
    set_type(n, "Tparams", t);
    set_type(n, "Tindices", tf::DT_INT32);
    set_type(n, "Taxis", tf::DT_INT32);
    set_int(n, "batch_dims", 0);
    return n->name() + ":output:0";
  }
  std::string expand_dims(const std::string& x, int64_t axis, tf::DataType t) {
    NodeDef* n = node("ExpandDims", {x, int32s({axis}, {})});
    set_type(n, "T", t);
    set_type(n, "Tdim", tf::DT_INT32);
    return n->name() + ":output:0";
  }
  std::string scatter_update(const std::string& x, const std::string& indices,
                             const std::string& updates) {
    NodeDef* n = node("TensorScatterUpdate", {x, indices, updates});
    set_type(n, "T", tf::DT_FLOAT);
    set_type(n, "Tindices", tf::DT_INT32);
    return n->name() + ":output:0";
  }

 private:
  tf::FunctionDef& function_;
  int count_ = 0;
};

void add_arg(tf::OpDef::ArgDef* arg, const std::string& name, tf::DataType type) {
  arg->set_name(name);
  arg->set_type(type);
}

using LoopVars = std::vector<std::pair<std::string, tf::DataType>>;

// The NMS loop's variables: (i, n, boxes [N, q, A, 4], scores [N, C, A], kept [N, C, A]).
const LoopVars kLoopVars = {{"i", tf::DT_INT32},
                            {"n", tf::DT_INT32},
                            {"boxes", tf::DT_FLOAT},
                            {"scores", tf::DT_FLOAT},
                            {"kept", tf::DT_FLOAT}};

// The image decoding loop's variables: (i, n, strings [N], images, a TensorList of uint8 images).
const LoopVars kDecodingVars = {{"i", tf::DT_INT32},
                                {"n", tf::DT_INT32},
                                {"strings", tf::DT_STRING},
                                {"images", tf::DT_VARIANT}};

tf::FunctionDef* loop_function(tf::GraphDef& graph, const std::string& name, bool cond,
                               const LoopVars& vars = kLoopVars) {
  tf::FunctionDef* f = graph.mutable_library()->add_function();
  f->mutable_signature()->set_name(name);
  for (const auto& [arg, type] : vars) {
    add_arg(f->mutable_signature()->add_input_arg(), arg, type);
    if (!cond) add_arg(f->mutable_signature()->add_output_arg(), arg + "_next", type);
  }
  if (cond) add_arg(f->mutable_signature()->add_output_arg(), "more", tf::DT_BOOL);
  return f;
}

// cond: i < n.
void add_cond(tf::GraphDef& graph, const std::string& name, const LoopVars& vars = kLoopVars) {
  tf::FunctionDef* f = loop_function(graph, name, true, vars);
  FunctionEmitter e(*f);
  NodeDef* less = e.node("Less", {"i", "n"});
  set_type(less, "T", tf::DT_INT32);
  (*f->mutable_ret())["more"] = less->name() + ":z:0";
}

// body: image i's per-class NMS (NonMaxSuppressionV5 of each class, on the class's boxes where
// q > 1), its kept scores written into kept[i] (-inf elsewhere); i + 1.
void add_body(tf::GraphDef& graph, const std::string& name, int64_t anchors, int64_t classes,
              int64_t q, const MultiClassNmsAttrs& attrs) {
  tf::FunctionDef* f = loop_function(graph, name, false);
  FunctionEmitter e(*f);
  const std::string image_boxes = e.gather("boxes", "i", tf::DT_FLOAT);  // [q, A, 4]
  const std::string scores = e.gather("scores", "i", tf::DT_FLOAT);      // [C, A]
  const std::string max_output = e.int32s({attrs.max_detections_per_class}, {});
  const std::string iou = e.float_scalar(attrs.iou_threshold);
  const std::string threshold = e.float_scalar(attrs.score_threshold);
  const std::string sigma = e.float_scalar(0.0f);
  NodeDef* fill = e.node("Fill", {e.int32s({anchors}, {1}), e.float_scalar(kMinusInf)});
  set_type(fill, "T", tf::DT_FLOAT);
  set_type(fill, "index_type", tf::DT_INT32);
  const std::string none_kept = fill->name() + ":output:0";
  std::vector<std::string> rows;
  for (int64_t c = 0; c < classes; ++c) {
    const std::string class_scores = e.gather(scores, e.int32s({c}, {}), tf::DT_FLOAT);
    const std::string boxes =
        e.gather(image_boxes, e.int32s({q == 1 ? 0 : c}, {}), tf::DT_FLOAT);  // [A, 4]
    NodeDef* nms =
        e.node("NonMaxSuppressionV5", {boxes, class_scores, max_output, iou, threshold, sigma});
    set_type(nms, "T", tf::DT_FLOAT);
    set_bool(nms, "pad_to_max_output_size", false);
    rows.push_back(e.scatter_update(
        none_kept, e.expand_dims(nms->name() + ":selected_indices:0", 1, tf::DT_INT32),
        nms->name() + ":selected_scores:0"));
  }
  NodeDef* pack = e.node("Pack", rows);
  set_int(pack, "N", classes);
  set_type(pack, "T", tf::DT_FLOAT);
  set_int(pack, "axis", 0);
  NodeDef* at = e.node("Reshape", {"i", e.int32s({1, 1}, {2})});
  set_type(at, "T", tf::DT_INT32);
  set_type(at, "Tshape", tf::DT_INT32);
  const std::string kept = e.scatter_update(
      "kept", at->name() + ":output:0", e.expand_dims(pack->name() + ":output:0", 0, tf::DT_FLOAT));
  NodeDef* next = e.node("AddV2", {"i", e.int32s({1}, {})});
  set_type(next, "T", tf::DT_INT32);
  auto& ret = *f->mutable_ret();
  ret["i_next"] = next->name() + ":z:0";
  ret["n_next"] = "n";
  ret["boxes_next"] = "boxes";
  ret["scores_next"] = "scores";
  ret["kept_next"] = kept;
}

// The decoding loop's body: images[i] = DecodeImage(strings[i]) (channels 3, animations not
// expanded); i + 1.
void add_decoding_body(tf::GraphDef& graph, const std::string& name) {
  tf::FunctionDef* f = loop_function(graph, name, false, kDecodingVars);
  FunctionEmitter e(*f);
  const std::string encoded = e.gather("strings", "i", tf::DT_STRING);
  NodeDef* decode = e.node("DecodeImage", {encoded});
  set_int(decode, "channels", 3);
  set_type(decode, "dtype", tf::DT_UINT8);
  set_bool(decode, "expand_animations", false);
  NodeDef* set = e.node("TensorListSetItem", {"images", "i", decode->name() + ":image:0"});
  set_type(set, "element_dtype", tf::DT_UINT8);
  NodeDef* next = e.node("AddV2", {"i", e.int32s({1}, {})});
  set_type(next, "T", tf::DT_INT32);
  auto& ret = *f->mutable_ret();
  ret["i_next"] = next->name() + ":z:0";
  ret["n_next"] = "n";
  ret["strings_next"] = "strings";
  ret["images_next"] = set->name() + ":output_handle:0";
}

}  // namespace

std::string tf_nms_unsupported(const MultiClassNmsAttrs& attrs, bool has_num_valid_boxes) {
  if (attrs.soft_nms_sigma > 0.0f) {
    return "with soft_nms_sigma " + std::to_string(attrs.soft_nms_sigma) +
           " (soft NMS has no exact form in the SavedModel exporter); set soft_nms_sigma 0";
  }
  if (attrs.use_class_agnostic_nms) {
    return "with use_class_agnostic_nms (class-agnostic NMS has no form in the SavedModel "
           "exporter)";
  }
  if (attrs.use_combined_nms) {
    return "with use_combined_nms (TensorFlow's CombinedNonMaxSuppression orders equal scores "
           "arbitrarily, so the exporter has no exact form of it)";
  }
  if (has_num_valid_boxes) return "with num_valid_boxes (no form in the SavedModel exporter)";
  return "";
}

TfNmsOutputs add_tf_multiclass_nms(tf::GraphDef& graph,
                                   const std::function<std::string(const std::string&)>& unique,
                                   const std::string& boxes, const std::string& scores,
                                   int64_t anchors, int64_t q, int64_t classes,
                                   const MultiClassNmsAttrs& attrs,
                                   const std::string& clip_windows) {
  Emitter e(graph, unique);
  const int64_t m = attrs.max_total_detections;
  NodeDef* reshape = e.node("Reshape", {boxes, e.ints({-1, anchors, q, 4}, {4})});
  set_type(reshape, "T", tf::DT_FLOAT);
  set_type(reshape, "Tshape", tf::DT_INT32);
  const std::string boxes4 = reshape->name();  // [N, A, q, 4]
  NodeDef* by_set = e.node("Transpose", {boxes4, e.ints({0, 2, 1, 3}, {4})});
  set_type(by_set, "T", tf::DT_FLOAT);
  set_type(by_set, "Tperm", tf::DT_INT32);  // [N, q, A, 4]: the loop's boxes
  NodeDef* transpose = e.node("Transpose", {scores, e.ints({0, 2, 1}, {3})});
  set_type(transpose, "T", tf::DT_FLOAT);
  set_type(transpose, "Tperm", tf::DT_INT32);
  const std::string by_class = transpose->name();  // [N, C, A]

  // The loop over the batch: kept [N, C, A], the kept scores, -inf elsewhere.
  NodeDef* shape = e.node("Shape", {by_class});
  set_type(shape, "T", tf::DT_FLOAT);
  set_type(shape, "out_type", tf::DT_INT32);
  NodeDef* batch =
      e.node("StridedSlice", {shape->name(), e.ints({0}, {1}), e.ints({1}, {1}), e.ints({1}, {1})});
  set_type(batch, "T", tf::DT_INT32);
  set_type(batch, "Index", tf::DT_INT32);
  set_int(batch, "shrink_axis_mask", 1);
  NodeDef* fill = e.node("Fill", {shape->name(), e.floats({kMinusInf}, {})});
  set_type(fill, "T", tf::DT_FLOAT);
  set_type(fill, "index_type", tf::DT_INT32);
  const std::string cond = unique("MultiClassNonMaxSuppression_while_cond");
  const std::string body = unique("MultiClassNonMaxSuppression_while_body");
  add_cond(graph, cond);
  add_body(graph, body, anchors, classes, q, attrs);
  NodeDef* loop =
      e.node("While", {e.ints({0}, {}), batch->name(), by_set->name(), by_class, fill->name()});
  std::vector<tf::DataType> types;
  for (const auto& [arg, type] : kLoopVars) types.push_back(type);
  set_types(loop, "T", types);
  (*loop->mutable_attr())["cond"].mutable_func()->set_name(cond);
  (*loop->mutable_attr())["body"].mutable_func()->set_name(body);
  set_int(loop, "parallel_iterations", 10);
  tf::AttrValue::ListValue* shapes = (*loop->mutable_attr())["output_shapes"].mutable_list();
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
           {}, {}, {-1, q, anchors, 4}, {-1, classes, anchors}, {-1, classes, anchors}}) {
    tf::TensorShapeProto* s = shapes->add_shape();
    for (int64_t d : dims) s->add_dim()->set_size(d);
  }
  const std::string kept = loop->name() + ":4";

  // The clip window as [lo, hi] per coordinate: the options' window, else the extent of all the
  // batch's boxes (the least ymin and xmin, the greatest ymax and xmax).
  std::string lo, hi;
  if (!clip_windows.empty()) {  // each image's window: [N, 1, 1, 4], broadcast over its boxes
    auto corners = [&](std::vector<int64_t> k) {
      const std::string row = e.gather(clip_windows, e.ints(k, {4}), 1, 0, tf::DT_FLOAT);
      return e.expand_dims(e.expand_dims(row, 1, tf::DT_FLOAT), 1, tf::DT_FLOAT);
    };
    lo = corners({0, 1, 0, 1});
    hi = corners({2, 3, 2, 3});
  } else if (attrs.has_clip_window) {
    const auto& w = attrs.clip_window;
    lo = e.floats({w[0], w[1], w[0], w[1]}, {4});
    hi = e.floats({w[2], w[3], w[2], w[3]}, {4});
  } else {
    lo =
        e.gather(e.reduce("Min", boxes4, {0, 1, 2}), e.ints({0, 1, 0, 1}, {4}), 0, 0, tf::DT_FLOAT);
    hi =
        e.gather(e.reduce("Max", boxes4, {0, 1, 2}), e.ints({2, 3, 2, 3}, {4}), 0, 0, tf::DT_FLOAT);
  }
  const std::string clipped =
      e.op("Maximum", {e.op("Minimum", {boxes4, hi}, tf::DT_FLOAT), lo}, tf::DT_FLOAT);
  auto column = [&](int64_t k) { return e.gather(clipped, e.ints({k}, {}), 3, 0, tf::DT_FLOAT); };
  // Boxes whose clipped box has no area are dropped (their slots -inf): [N, A, q] as [N, q, A],
  // which broadcasts over the classes' rows of kept.
  const std::string area = e.op("Mul",
                                {e.op("Sub", {column(2), column(0)}, tf::DT_FLOAT),
                                 e.op("Sub", {column(3), column(1)}, tf::DT_FLOAT)},
                                tf::DT_FLOAT);
  NodeDef* area_by_set = e.node("Transpose", {area, e.ints({0, 2, 1}, {3})});
  set_type(area_by_set, "T", tf::DT_FLOAT);
  set_type(area_by_set, "Tperm", tf::DT_INT32);
  const std::string has_area =
      e.op("Greater", {area_by_set->name(), e.floats({0.0f}, {})}, tf::DT_FLOAT);
  const std::string masked = e.select(has_area, kept, e.floats({kMinusInf}, {}), tf::DT_FLOAT);
  NodeDef* flat = e.node("Reshape", {masked, e.ints({-1, classes * anchors}, {2})});
  set_type(flat, "T", tf::DT_FLOAT);
  set_type(flat, "Tshape", tf::DT_INT32);
  std::string slots = flat->name();  // slot c * A + a
  if (classes * anchors < m) {       // at least M slots, the rest -inf
    NodeDef* pad = e.node("PadV2", {slots, e.ints({0, 0, 0, m - classes * anchors}, {2, 2}),
                                    e.floats({kMinusInf}, {})});
    set_type(pad, "T", tf::DT_FLOAT);
    set_type(pad, "Tpaddings", tf::DT_INT32);
    slots = pad->name();
  }
  NodeDef* top = e.node("TopKV2", {slots, e.ints({m}, {})});
  set_type(top, "T", tf::DT_FLOAT);
  set_bool(top, "sorted", true);
  const std::string values = top->name();
  const std::string indices = top->name() + ":1";
  const std::string valid =
      e.op("Greater", {values, e.floats({kMinusInf}, {})}, tf::DT_FLOAT);  // [N, M]
  const std::string a = e.ints({anchors}, {});
  const std::string cls = e.op("FloorDiv", {indices, a}, tf::DT_INT32);
  const std::string anchor =
      e.op("Sub", {indices, e.op("Mul", {cls, a}, tf::DT_INT32)}, tf::DT_INT32);

  std::string framed = clipped;
  if (!clip_windows.empty()) {  // (clipped - window min) * (1 / window size), in f32
    const std::string scale =
        e.op("RealDiv", {e.floats({1.0f}, {}), e.op("Sub", {hi, lo}, tf::DT_FLOAT)}, tf::DT_FLOAT);
    framed = e.op("Mul", {e.op("Sub", {clipped, lo}, tf::DT_FLOAT), scale}, tf::DT_FLOAT);
  } else if (attrs.change_coordinate_frame) {  // (clipped - window min) * (1 / window size), in f32
    const auto& w = attrs.clip_window;
    const float ys = 1.0f / (w[2] - w[0]), xs = 1.0f / (w[3] - w[1]);
    framed =
        e.op("Mul", {e.op("Sub", {clipped, lo}, tf::DT_FLOAT), e.floats({ys, xs, ys, xs}, {4})},
             tf::DT_FLOAT);
  }
  // The detection's box: row anchor * q (+ its class where q > 1) of the [N, A * q, 4] boxes.
  NodeDef* rows = e.node("Reshape", {framed, e.ints({-1, anchors * q, 4}, {3})});
  set_type(rows, "T", tf::DT_FLOAT);
  set_type(rows, "Tshape", tf::DT_INT32);
  // (The padding slots past classes * anchors have a class past the last: clamped, and their
  // rows are zeros below.)
  std::string row = anchor;
  if (q > 1) {
    const std::string set = e.op("Minimum", {cls, e.ints({q - 1}, {})}, tf::DT_INT32);
    row = e.op("AddV2", {e.op("Mul", {anchor, e.ints({q}, {})}, tf::DT_INT32), set}, tf::DT_INT32);
  }
  const std::string gathered = e.gather(rows->name(), row, 1, 1, tf::DT_FLOAT);  // [N, M, 4]
  const std::string zero = e.floats({0.0f}, {});
  TfNmsOutputs out;
  out.boxes = e.select(e.expand_dims(valid, 2, tf::DT_BOOL), gathered, zero, tf::DT_FLOAT);
  out.scores = e.select(valid, values, zero, tf::DT_FLOAT);
  out.classes = e.select(valid, e.cast(cls, tf::DT_INT32, tf::DT_FLOAT), zero, tf::DT_FLOAT);
  out.anchor_indices =
      e.select(valid, e.cast(anchor, tf::DT_INT32, tf::DT_INT64), e.int64s({-1}, {}), tf::DT_INT64);
  const std::string count = e.reduce("Sum", e.cast(valid, tf::DT_BOOL, tf::DT_FLOAT), {1});
  out.num_detections = e.cast(count, tf::DT_FLOAT, tf::DT_INT32);
  return out;
}

std::string add_image_decoding(tf::GraphDef& graph, const std::string& strings) {
  const std::string scope = "map/";
  const std::string cond_name = "map_while_cond";
  const std::string body_name = "map_while_body";
  add_cond(graph, cond_name, kDecodingVars);
  add_decoding_body(graph, body_name);
  auto int32s = [&](const std::string& name, const std::vector<int64_t>& values,
                    const std::vector<int64_t>& dims) {
    add_int32_const(graph, scope + name, values, dims);
    return scope + name;
  };
  NodeDef* shape = add_node(graph, scope + "Shape", "Shape", {strings});
  set_type(shape, "T", tf::DT_STRING);
  set_type(shape, "out_type", tf::DT_INT32);
  NodeDef* n =
      add_node(graph, scope + "strided_slice", "StridedSlice",
               {shape->name(), int32s("strided_slice/begin", {0}, {1}),
                int32s("strided_slice/end", {1}, {1}), int32s("strided_slice/strides", {1}, {1})});
  set_type(n, "T", tf::DT_INT32);
  set_type(n, "Index", tf::DT_INT32);
  set_int(n, "shrink_axis_mask", 1);
  const std::string element_shape = int32s("element_shape", {-1, -1, 3}, {3});
  NodeDef* reserve =
      add_node(graph, scope + "TensorListReserve", "TensorListReserve", {element_shape, n->name()});
  set_type(reserve, "element_dtype", tf::DT_UINT8);
  set_type(reserve, "shape_type", tf::DT_INT32);
  NodeDef* loop = add_node(graph, scope + "while", "While",
                           {int32s("while/i", {0}, {}), n->name(), strings, reserve->name()});
  std::vector<tf::DataType> types;
  for (const auto& [arg, type] : kDecodingVars) types.push_back(type);
  set_types(loop, "T", types);
  (*loop->mutable_attr())["cond"].mutable_func()->set_name(cond_name);
  (*loop->mutable_attr())["body"].mutable_func()->set_name(body_name);
  set_int(loop, "parallel_iterations", 32);
  tf::AttrValue::ListValue* shapes = (*loop->mutable_attr())["output_shapes"].mutable_list();
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {}, {-1}, {}}) {
    tf::TensorShapeProto* s = shapes->add_shape();
    for (int64_t d : dims) s->add_dim()->set_size(d);
  }
  NodeDef* stack = add_node(graph, scope + "TensorListStack", "TensorListStack",
                            {loop->name() + ":3", element_shape});
  set_type(stack, "element_dtype", tf::DT_UINT8);
  set_int(stack, "num_elements", -1);
  return stack->name();
}

std::string add_tf_example_parsing(tf::GraphDef& graph, const std::string& serialized) {
  const std::string scope = "ParseExample/";
  auto strings = [&](const std::string& name, const std::vector<std::string>& values) {
    return add_string_const(graph, scope + name, values, {static_cast<int64_t>(values.size())})
        ->name();
  };
  // The API's TfExampleDecoder reads image/encoded with default_value='': an Example without it
  // parses to the empty string (which the decoding then refuses, as the API's does).
  const std::string empty_default = add_string_const(graph, scope + "default", {""}, {})->name();
  NodeDef* parse = add_node(
      graph, scope + "ParseExampleV2", "ParseExampleV2",
      {serialized, strings("names", {}), strings("sparse_keys", {}),
       strings("dense_keys", {"image/encoded"}), strings("ragged_keys", {}), empty_default});
  set_int(parse, "num_sparse", 0);
  set_types(parse, "Tdense", {tf::DT_STRING});
  for (const char* attr : {"sparse_types", "ragged_value_types", "ragged_split_types"}) {
    (*parse->mutable_attr())[attr].mutable_list();
  }
  (*parse->mutable_attr())["dense_shapes"].mutable_list()->add_shape();  // a scalar per example
  return parse->name();
}

void refuse_host_reads(const GraphCapture& capture,
                       const std::vector<std::pair<std::string, Tensor>>& inputs,
                       const std::string& model_name) {
  if (capture.host_reads().empty()) return;
  std::set<const Storage*> dependent;
  std::map<const Storage*, const GraphCapture::Op*> producer;
  for (const auto& [name, t] : inputs) dependent.insert(t.storage().get());
  for (const GraphCapture::Op& op : capture.ops()) {
    bool depends = false;
    for (const Tensor& t : op.inputs) {
      depends = depends || (t.defined() && dependent.count(t.storage().get()) > 0);
    }
    for (const Tensor& t : op.outputs) {
      producer.emplace(t.storage().get(), &op);
      if (depends) dependent.insert(t.storage().get());
    }
  }
  for (const Tensor& t : capture.host_reads()) {
    if (!t.defined() || dependent.count(t.storage().get()) == 0) continue;
    const auto it = producer.find(t.storage().get());
    const std::string what = it == producer.end() ? "a graph input"
                                                  : "the output " + t.description() + " of op '" +
                                                        it->second->op->name + "'";
    throw Unimplemented("SavedModel export of " + model_name + ": the model copies " + what +
                        " to the host and computes with it there; the graph would hold that "
                        "result as a constant of the captured example (only computations on the "
                        "backend, by ops, are exported)");
  }
}

}  // namespace trainyard::tf_internal
