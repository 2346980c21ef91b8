#include "formats/tf_graph.h"

#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string_view>

#include "formats/tf_graph_detection.h"
#include "trainyard/error.h"
#include "trainyard/op.h"
#include "trainyard/ops/array.h"
#include "trainyard/ops/detection.h"
#include "trainyard/ops/linalg.h"
#include "trainyard/ops/nn.h"
#include "trainyard/ops/reduce.h"

namespace trainyard::tf_internal {

using tf::NodeDef;

tf::DataType tf_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return tf::DT_FLOAT;
    case DType::kF64:
      return tf::DT_DOUBLE;
    case DType::kF16:
      return tf::DT_HALF;
    case DType::kBF16:
      return tf::DT_BFLOAT16;
    case DType::kI32:
      return tf::DT_INT32;
    case DType::kI64:
      return tf::DT_INT64;
    case DType::kU8:
      return tf::DT_UINT8;
    case DType::kBool:
      return tf::DT_BOOL;
  }
  throw Unimplemented(std::string("SavedModel export: no TensorFlow type for dtype ") +
                      dtype_name(dtype));
}

NodeDef* add_node(tf::GraphDef& graph, const std::string& name, const std::string& op,
                  std::vector<std::string> inputs) {
  NodeDef* n = graph.add_node();
  n->set_name(name);
  n->set_op(op);
  for (std::string& input : inputs) n->add_input(std::move(input));
  return n;
}

void set_type(NodeDef* node, const std::string& attr, tf::DataType type) {
  (*node->mutable_attr())[attr].set_type(type);
}
void set_int(NodeDef* node, const std::string& attr, int64_t value) {
  (*node->mutable_attr())[attr].set_i(value);
}
void set_bool(NodeDef* node, const std::string& attr, bool value) {
  (*node->mutable_attr())[attr].set_b(value);
}
void set_float(NodeDef* node, const std::string& attr, float value) {
  (*node->mutable_attr())[attr].set_f(value);
}
void set_string(NodeDef* node, const std::string& attr, const std::string& value) {
  (*node->mutable_attr())[attr].set_s(value);
}
void set_ints(NodeDef* node, const std::string& attr, const std::vector<int64_t>& values) {
  tf::AttrValue::ListValue* list = (*node->mutable_attr())[attr].mutable_list();
  for (int64_t v : values) list->add_i(v);
}
void set_types(NodeDef* node, const std::string& attr, const std::vector<tf::DataType>& types) {
  tf::AttrValue::ListValue* list = (*node->mutable_attr())[attr].mutable_list();
  for (tf::DataType t : types) list->add_type(t);
}
void set_shape(NodeDef* node, const std::string& attr, const std::vector<int64_t>& dims) {
  tf::TensorShapeProto* shape = (*node->mutable_attr())[attr].mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_size(d);
}

namespace {

tf::TensorProto* const_tensor(NodeDef* n, tf::DataType dtype, const std::vector<int64_t>& dims) {
  set_type(n, "dtype", dtype);
  tf::TensorProto* t = (*n->mutable_attr())["value"].mutable_tensor();
  t->set_dtype(dtype);
  tf::TensorShapeProto* shape = t->mutable_tensor_shape();
  for (int64_t d : dims) shape->add_dim()->set_size(d);
  return t;
}

}  // namespace

NodeDef* add_string_const(tf::GraphDef& graph, const std::string& name,
                          const std::vector<std::string>& values,
                          const std::vector<int64_t>& dims) {
  NodeDef* n = add_node(graph, name, "Const", {});
  tf::TensorProto* t = const_tensor(n, tf::DT_STRING, dims);
  for (const std::string& v : values) t->add_string_val(v);
  return n;
}

NodeDef* add_int32_const(tf::GraphDef& graph, const std::string& name,
                         const std::vector<int64_t>& values, const std::vector<int64_t>& dims) {
  NodeDef* n = add_node(graph, name, "Const", {});
  tf::TensorProto* t = const_tensor(n, tf::DT_INT32, dims);
  for (int64_t v : values) t->add_int_val(static_cast<int32_t>(v));
  return n;
}

namespace {

using Op = GraphCapture::Op;

struct Key {
  const Storage* storage = nullptr;
  std::size_t offset = 0;
  std::vector<int64_t> dims;
  DType dtype = DType::kF32;
  auto operator<=>(const Key&) const = default;
};

Key key_of(const Tensor& t) {
  return {t.storage().get(), t.byte_offset(), t.shape().to_vector(), t.dtype()};
}

// Where a value holds the batch: in dimension `axis`, at element stride `within` inside it (1
// unless the dimension merges the batch with an inner factor, as MoE's [B * K] rows; the
// [T * B] rows of a recurrent layer's projected steps hold it inner, at stride 1).
struct Batching {
  int axis = 0;
  int64_t within = 1;
};

struct Value {
  std::string name;  // the tensor's name in the graph ("node" or "node:k")
  Shape shape;
  DType dtype = DType::kF32;
  std::size_t offset = 0;
  Batching batch;
};

// The number of elements of one index of dimension `axis` (the product of the dimensions after it).
int64_t inner_size(const Shape& shape, std::size_t axis) {
  int64_t n = 1;
  for (std::size_t j = axis + 1; j < shape.rank(); ++j) n *= shape[j];
  return n;
}

// An op's input as the graph sees it: a graph value, or a constant tensor (a variable's value
// when `variable` names one).
struct Ref {
  int value = -1;
  Tensor constant;
  std::string variable;
  bool is_value() const { return value >= 0; }
};

// TensorFlow's SAME padding of one spatial dimension: (before, after).
std::pair<int64_t, int64_t> same_padding(int64_t in, int64_t window, int64_t stride) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + window - in, 0);
  return {total / 2, total - total / 2};
}

class Builder {
 public:
  Builder(const GraphCapture& capture, const GraphSpec& spec) : ops_(capture.ops()), spec_(spec) {}

  Graph build();

 private:
  [[noreturn]] void unsupported(const Op& op, const std::string& why) const {
    throw Unimplemented("SavedModel export of " + spec_.model_name + ": op '" + op.op->name +
                        "' (" + op.op->summary + ") " + why);
  }
  [[noreturn]] void moves_batch(const Op& op, const std::string& what) const {
    unsupported(op, what +
                        "; the batch is the graph's dynamic first dimension, so an op may not "
                        "move, slice or merge it");
  }

  void mark_live();
  Ref resolve(const Tensor& t, const Op* op);
  Ref resolve_step_view(const Tensor& t, int source, const Op* op);
  // Where `target` holds the batch of a value whose batch lies at element stride `stride`; false
  // when no dimension of it holds the whole batch.
  bool locate_batch(const Shape& target, int64_t stride, Batching* out) const;
  // An operand of an elementwise op whose output has `shape` and the batch in current_: a constant
  // spanning the capture's batch must not vary along it and becomes its first row (size 1 there).
  std::string elementwise_operand(const Ref& r, const Shape& shape);
  void convert(const Op& op, const std::vector<Ref>& in);

  std::string unique(const std::string& wanted);
  NodeDef* node(const std::string& op_type, std::vector<std::string> inputs,
                const std::string& name = "");
  int define(const Tensor& t, const std::string& name);
  const Value& value(int v) const { return values_[static_cast<std::size_t>(v)]; }

  std::string operand(const Ref& r);
  std::string variable_read(const std::string& name, const Tensor& value);
  std::string constant(const Tensor& t);
  std::string int32s(const std::vector<int64_t>& values, const std::vector<int64_t>& dims);
  std::string scalar(double value, DType dtype);
  std::string padding(const Op& op, std::string& x, const std::array<int64_t, 4>& input,
                      int64_t window_h, int64_t window_w, int64_t stride_h, int64_t stride_w,
                      int64_t top, int64_t bottom, int64_t left, int64_t right, double pad_value,
                      bool may_pad);

  void conv2d(const Op& op, const std::vector<Ref>& in);
  void pool(const Op& op, const std::vector<Ref>& in, bool max);
  void batch_norm(const Op& op, const std::vector<Ref>& in);
  void unary(const Op& op, const std::vector<Ref>& in, std::string_view name);
  void binary(const Op& op, const std::vector<Ref>& in, const char* op_type);
  void matmul(const Op& op, const std::vector<Ref>& in, bool with_bias);
  void softmax(const Op& op, const std::vector<Ref>& in, const char* op_type);
  void reduce(const Op& op, const std::vector<Ref>& in, const char* op_type);
  void pad(const Op& op, const std::vector<Ref>& in);
  void slice(const Op& op, const std::vector<Ref>& in);
  void concat(const Op& op, const std::vector<Ref>& in);
  void transpose(const Op& op, const std::vector<Ref>& in);
  void where(const Op& op, const std::vector<Ref>& in);
  void nms(const Op& op, const std::vector<Ref>& in);
  int reshape(int v, const Shape& target, const Op* op);
  std::string reshaped(const std::string& x, DType dtype, const std::vector<int64_t>& dims);

  const std::vector<Op>& ops_;
  const GraphSpec& spec_;
  Graph result_;
  tf::GraphDef& graph_ = result_.graph;

  std::vector<bool> live_;
  std::vector<Value> values_;
  std::map<Key, int> value_of_;
  std::map<const Storage*, int> value_of_storage_;  // the first value made in a storage
  std::map<Key, Tensor> folded_;
  std::map<const Storage*, std::pair<std::string, Tensor>> variables_;
  std::map<std::string, std::string> reads_;  // variable name -> its read's tensor
  std::map<Key, std::string> constants_;      // host-made tensors made Const nodes
  std::map<std::string, std::string> small_;  // content -> Const node
  std::set<std::string> names_;
  std::string scope_;
  std::map<int, int> time_major_;  // rows merging steps and the batch -> their [T, B, ...] form
  Batching current_;  // the batch of the op being converted: of its first graph-value input
};

// The ops that draw random numbers (core/src/engine/ops/random.cc).
const std::set<std::string_view> kRandomOps = {"random_uniform", "random_normal",
                                               "truncated_normal"};

// ---- Liveness and resolution (as onnx_graph.cc: only what the outputs depend on) ----

void Builder::mark_live() {
  std::set<const Storage*> needed;
  for (const auto& [name, t] : spec_.outputs) needed.insert(t.storage().get());
  live_.assign(ops_.size(), false);
  for (std::size_t i = ops_.size(); i-- > 0;) {
    const Op& op = ops_[i];
    bool live = false;
    for (const Tensor& t : op.outputs) live = live || needed.count(t.storage().get()) > 0;
    if (op.outputs.empty()) {
      for (const Tensor& t : op.inputs) {
        if (t.defined() && needed.count(t.storage().get()) > 0) {
          unsupported(op, "writes its inputs in place during the forward pass");
        }
      }
    }
    if (!live) continue;
    live_[i] = true;
    for (const Tensor& t : op.inputs) {
      if (t.defined()) needed.insert(t.storage().get());
    }
  }
}

Ref Builder::resolve(const Tensor& t, const Op* op) {
  const Key key = key_of(t);
  if (auto it = value_of_.find(key); it != value_of_.end()) return {it->second, {}, ""};
  const Storage* storage = t.storage().get();
  if (auto it = variables_.find(storage); it != variables_.end()) return {-1, t, it->second.first};
  if (auto it = folded_.find(key); it != folded_.end()) return {-1, it->second, ""};
  if (auto it = value_of_storage_.find(storage); it != value_of_storage_.end()) {
    const Value& source = value(it->second);
    const bool merged_rows = source.batch.axis == 0 && source.shape.rank() > 0 &&
                             source.shape[0] > spec_.capture_batch * source.batch.within;
    if ((source.batch.axis > 0 || merged_rows) && t.dtype() == source.dtype &&
        (t.byte_offset() != source.offset || t.num_elements() != source.shape.num_elements())) {
      return resolve_step_view(t, it->second, op);
    }
    if (t.byte_offset() != source.offset || t.dtype() != source.dtype ||
        t.num_elements() != source.shape.num_elements()) {
      const std::string what = "reads " + t.description() + " at byte offset " +
                               std::to_string(t.byte_offset()) + ", a view of part of a value (" +
                               source.shape.to_string() +
                               "); only whole-tensor reshapes are exported";
      if (op != nullptr) unsupported(*op, what);
      throw Unimplemented("SavedModel export of " + spec_.model_name + ": the graph's output " +
                          what);
    }
    const int v = reshape(it->second, t.shape(), op);
    value_of_[key] = v;
    return {v, {}, ""};
  }
  return {-1, t, ""};
}

// A view of whole outer rows of a value that holds the batch inside its rows (steps of a
// time-major [T, B, ...] value, as a recurrent layer's last step): a Slice of those rows, then a
// reshape to the view's shape.
Ref Builder::resolve_step_view(const Tensor& t, int source_value, const Op* op) {
  if (value(source_value).batch.axis == 0) {
    // Rows [T * B, ...] that merge steps with the batch: their [T, B, ...] form first.
    const Value merged = value(source_value);
    const int64_t group = spec_.capture_batch * merged.batch.within;
    std::vector<int64_t> dims = merged.shape.to_vector();
    dims[0] = group;
    dims.insert(dims.begin(), merged.shape[0] / group);
    if (auto it = time_major_.find(source_value); it != time_major_.end()) {
      source_value = it->second;
    } else {
      const int form = reshape(source_value, Shape(dims), op);
      time_major_[source_value] = form;
      source_value = form;
    }
  }
  const Value source = value(source_value);
  const int64_t row = inner_size(source.shape, 0);
  const std::size_t element = t.size_bytes() / std::max<std::size_t>(t.num_elements(), 1);
  const std::size_t begin_bytes = t.byte_offset() - source.offset;
  if (t.byte_offset() < source.offset || element == 0 || begin_bytes % element != 0 ||
      static_cast<int64_t>(begin_bytes / element) % row != 0 || t.num_elements() % row != 0 ||
      t.num_elements() == 0) {
    const std::string what = "reads " + t.description() + " at byte offset " +
                             std::to_string(t.byte_offset()) + ", a view of part of a value (" +
                             source.shape.to_string() + ") that is not whole rows of it";
    if (op != nullptr) unsupported(*op, what);
    throw Unimplemented("SavedModel export of " + spec_.model_name + ": the graph's output " +
                        what);
  }
  const int64_t first = static_cast<int64_t>(begin_bytes / element) / row;
  const int64_t rows = t.num_elements() / row;
  const int64_t rank = static_cast<int64_t>(source.shape.rank());
  std::vector<int64_t> begin(static_cast<std::size_t>(rank), 0), size = source.shape.to_vector();
  std::vector<int64_t> dims = size;
  begin[0] = first;
  size[0] = rows;
  dims[0] = rows;
  size[static_cast<std::size_t>(source.batch.axis)] = -1;
  NodeDef* n = node("Slice", {source.name, int32s(begin, {rank}), int32s(size, {rank})});
  set_type(n, "T", tf_dtype(source.dtype));
  set_type(n, "Index", tf::DT_INT32);
  values_.push_back({n->name(), Shape(dims), source.dtype, t.byte_offset(), source.batch});
  int v = static_cast<int>(values_.size() - 1);
  if (Shape(dims) != t.shape()) v = reshape(v, t.shape(), op);
  value_of_[key_of(t)] = v;
  return {v, {}, ""};
}

bool Builder::locate_batch(const Shape& target, int64_t stride, Batching* out) const {
  const int64_t batch = spec_.capture_batch;
  for (std::size_t j = 0; j < target.rank(); ++j) {
    const int64_t step = inner_size(target, j);
    if (step <= stride && stride % step == 0 && (step * target[j]) % (stride * batch) == 0) {
      *out = {static_cast<int>(j), stride / step};
      return true;
    }
  }
  return false;
}

std::string Builder::elementwise_operand(const Ref& r, const Shape& shape) {
  const int64_t batch = spec_.capture_batch;
  if (r.is_value() || !r.variable.empty() || batch == 1) return operand(r);
  const Tensor& t = r.constant;
  const int64_t axis = current_.axis - static_cast<int64_t>(shape.rank() - t.shape().rank());
  if (axis < 0 || t.shape()[static_cast<std::size_t>(axis)] == 1) return operand(r);
  const auto a = static_cast<std::size_t>(axis);
  if (current_.within != 1 || t.shape()[a] != batch) {
    throw Unimplemented("SavedModel export of " + spec_.model_name + ": a constant " +
                        t.description() + " spans the rows that merge the batch with other values");
  }
  // The capture's batch of equal rows (a zero state): one row, broadcast over the graph's batch.
  std::string bytes(t.size_bytes(), '\0');
  t.to_host(bytes.data(), bytes.size());
  const std::size_t inner =
      static_cast<std::size_t>(inner_size(t.shape(), a)) * (bytes.size() / t.num_elements());
  const std::size_t outer = bytes.size() / (inner * static_cast<std::size_t>(batch));
  std::string first;
  for (std::size_t o = 0; o < outer; ++o) {
    const std::size_t base = o * inner * static_cast<std::size_t>(batch);
    for (int64_t b = 1; b < batch; ++b) {
      if (bytes.compare(base + static_cast<std::size_t>(b) * inner, inner, bytes, base, inner) !=
          0) {
        throw Unimplemented("SavedModel export of " + spec_.model_name + ": a constant " +
                            t.description() +
                            " differs between the examples of the capture's batch; the graph's "
                            "batch is dynamic");
      }
    }
    first.append(bytes, base, inner);
  }
  NodeDef* n = node("Const", {});
  const tf::DataType dtype = tf_dtype(t.dtype());
  set_type(n, "dtype", dtype);
  tf::TensorProto* proto = (*n->mutable_attr())["value"].mutable_tensor();
  proto->set_dtype(dtype);
  for (std::size_t j = 0; j < t.shape().rank(); ++j) {
    proto->mutable_tensor_shape()->add_dim()->set_size(j == a ? 1 : t.shape()[j]);
  }
  proto->set_tensor_content(std::move(first));
  return n->name();
}

// ---- Names, nodes, values ----

std::string Builder::unique(const std::string& wanted) {
  std::string name = wanted;
  for (int k = 1; names_.count(name) > 0; ++k) name = wanted + "_" + std::to_string(k);
  names_.insert(name);
  return name;
}

NodeDef* Builder::node(const std::string& op_type, std::vector<std::string> inputs,
                       const std::string& name) {
  const std::string wanted = !name.empty()    ? name
                             : scope_.empty() ? op_type
                                              : scope_ + "/" + op_type;
  return add_node(graph_, unique(wanted), op_type, std::move(inputs));
}

int Builder::define(const Tensor& t, const std::string& name) {
  values_.push_back({name, t.shape(), t.dtype(), t.byte_offset(), current_});
  const int index = static_cast<int>(values_.size() - 1);
  value_of_[key_of(t)] = index;
  value_of_storage_.emplace(t.storage().get(), index);
  return index;
}

std::string Builder::operand(const Ref& r) {
  if (r.is_value()) return value(r.value).name;
  if (!r.variable.empty()) {
    const Tensor& own = variables_.at(r.constant.storage().get()).second;
    const std::string read = variable_read(r.variable, own);
    if (r.constant.shape() == own.shape() && r.constant.byte_offset() == own.byte_offset()) {
      return read;
    }
    if (r.constant.byte_offset() != own.byte_offset() ||
        r.constant.num_elements() != own.num_elements()) {
      // Whole rows of the variable (the input or recurrent half of an RNN cell's kernel): a Slice
      // of its read.
      const std::size_t element = own.size_bytes() / std::max<std::size_t>(own.num_elements(), 1);
      const int64_t row = own.shape().rank() > 0 ? inner_size(own.shape(), 0) : 0;
      const std::size_t skip = r.constant.byte_offset() - own.byte_offset();
      if (row > 0 && r.constant.byte_offset() >= own.byte_offset() && skip % element == 0 &&
          static_cast<int64_t>(skip / element) % row == 0 && r.constant.num_elements() % row == 0 &&
          r.constant.dtype() == own.dtype()) {
        const int64_t rank = static_cast<int64_t>(own.shape().rank());
        std::vector<int64_t> begin(static_cast<std::size_t>(rank), 0);
        std::vector<int64_t> size = own.shape().to_vector();
        begin[0] = static_cast<int64_t>(skip / element) / row;
        size[0] = r.constant.num_elements() / row;
        NodeDef* n = node("Slice", {read, int32s(begin, {rank}), int32s(size, {rank})});
        set_type(n, "T", tf_dtype(own.dtype()));
        set_type(n, "Index", tf::DT_INT32);
        if (Shape(size) == r.constant.shape()) return n->name();
        return reshaped(n->name(), own.dtype(), r.constant.shape().to_vector());
      }
      throw Unimplemented("SavedModel export of " + spec_.model_name + ": a part of variable '" +
                          r.variable + "' is read; only the whole variable is exported");
    }
    return reshaped(read, own.dtype(), r.constant.shape().to_vector());
  }
  return constant(r.constant);
}

// The variable as tf.Variable makes it in a TF1 graph: "name" (VariableV2) and "name/read".
std::string Builder::variable_read(const std::string& name, const Tensor& value) {
  if (auto it = reads_.find(name); it != reads_.end()) return it->second;
  if (names_.count(name) > 0) {
    throw Unimplemented("SavedModel export of " + spec_.model_name + ": the variable name '" +
                        name + "' is also the name of another node of the graph");
  }
  names_.insert(name);
  NodeDef* v = add_node(graph_, name, "VariableV2", {});
  set_type(v, "dtype", tf_dtype(value.dtype()));
  set_shape(v, "shape", value.shape().to_vector());
  set_string(v, "container", "");
  set_string(v, "shared_name", "");
  NodeDef* read = add_node(graph_, unique(name + "/read"), "Identity", {name});
  set_type(read, "T", tf_dtype(value.dtype()));
  result_.variables.emplace_back(name, value);
  reads_[name] = read->name();
  return read->name();
}

std::string Builder::constant(const Tensor& t) {
  const Key key = key_of(t);
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  NodeDef* n = node("Const", {});
  const tf::DataType dtype = tf_dtype(t.dtype());
  set_type(n, "dtype", dtype);
  tf::TensorProto* proto = (*n->mutable_attr())["value"].mutable_tensor();
  proto->set_dtype(dtype);
  for (int64_t d : t.shape().dims()) proto->mutable_tensor_shape()->add_dim()->set_size(d);
  std::string bytes(t.size_bytes(), '\0');
  t.to_host(bytes.data(), bytes.size());
  proto->set_tensor_content(std::move(bytes));
  constants_[key] = n->name();
  return n->name();
}

std::string Builder::int32s(const std::vector<int64_t>& values, const std::vector<int64_t>& dims) {
  std::string content = "i32:";
  for (int64_t v : values) content += std::to_string(v) + ",";
  content += "/";
  for (int64_t d : dims) content += std::to_string(d) + ",";
  if (auto it = small_.find(content); it != small_.end()) return it->second;
  for (int64_t v : values) {
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      throw Unimplemented("SavedModel export of " + spec_.model_name + ": the index " +
                          std::to_string(v) + " does not fit TensorFlow's int32 shape operands");
    }
  }
  const std::string name = unique(scope_.empty() ? "Const" : scope_ + "/Const");
  add_int32_const(graph_, name, values, dims);
  small_[content] = name;
  return name;
}

std::string Builder::scalar(double value, DType dtype) {
  const std::string content = std::string(dtype_name(dtype)) + ":" + std::to_string(value);
  if (auto it = small_.find(content); it != small_.end()) return it->second;
  NodeDef* n = node("Const", {});
  set_type(n, "dtype", tf_dtype(dtype));
  tf::TensorProto* proto = (*n->mutable_attr())["value"].mutable_tensor();
  proto->set_dtype(tf_dtype(dtype));
  proto->mutable_tensor_shape();
  if (dtype == DType::kF32) {
    proto->add_float_val(static_cast<float>(value));
  } else if (dtype == DType::kF64) {
    proto->add_double_val(value);
  } else {
    throw Unimplemented("SavedModel export of " + spec_.model_name + ": a " + dtype_name(dtype) +
                        " scalar operand (only f32 and f64 are exported)");
  }
  small_[content] = n->name();
  return n->name();
}

std::string Builder::reshaped(const std::string& x, DType dtype, const std::vector<int64_t>& dims) {
  NodeDef* n = node("Reshape", {x, int32s(dims, {static_cast<int64_t>(dims.size())})});
  set_type(n, "T", tf_dtype(dtype));
  set_type(n, "Tshape", tf::DT_INT32);
  return n->name();
}

// ---- The whole graph ----

Graph Builder::build() {
  graph_.mutable_versions()->set_producer(kGraphDefProducer);
  for (const auto& [name, t] : spec_.variables)
    variables_.emplace(t.storage().get(), std::make_pair(name, t));
  for (const auto& [name, t] : spec_.inputs) {
    if (t.shape().rank() == 0) {
      throw InvalidArgument("SavedModel export of " + spec_.model_name + ": the input '" + name +
                            "' is a scalar; inputs have the batch as their first dimension");
    }
    names_.insert(name);
    if (auto source = spec_.input_sources.find(name); source != spec_.input_sources.end()) {
      NodeDef* n = add_node(graph_, name, "Identity", {source->second});
      set_type(n, "T", tf_dtype(t.dtype()));
      define(t, name);
      continue;
    }
    NodeDef* n = add_node(graph_, name, "Placeholder", {});
    set_type(n, "dtype", tf_dtype(t.dtype()));
    std::vector<int64_t> dims = t.shape().to_vector();
    dims[0] = -1;
    set_shape(n, "shape", dims);
    define(t, name);
  }
  for (const auto& [name, t] : spec_.outputs) names_.insert(name);

  mark_live();
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (!live_[i]) continue;
    const Op& op = ops_[i];
    std::vector<Ref> in;
    bool all_constant = true;
    scope_.clear();
    for (const Tensor& t : op.inputs) {
      if (!t.defined()) unsupported(op, "has an undefined input");
      in.push_back(resolve(t, &op));
      all_constant = all_constant && !in.back().is_value();
      const std::string& base = in.back().variable;
      if (scope_.empty() && !base.empty()) scope_ = base.substr(0, base.rfind('/'));
    }
    current_ = {};
    for (std::size_t k = 0; k < in.size(); ++k) {
      if (!in[k].is_value() || op.outputs.empty()) continue;
      const Value& first = value(in[k].value);
      const int64_t shift = static_cast<int64_t>(op.outputs[0].shape().rank()) -
                            static_cast<int64_t>(first.shape.rank());
      current_ = {static_cast<int>(std::max<int64_t>(first.batch.axis + shift, 0)),
                  first.batch.within};
      break;
    }
    if (all_constant) {
      // A draw of random numbers is no constant: folded, the graph would replay the capture's.
      // (A variable's initializer, run when the forward first reads it, is the variable's.)
      bool initializes_variable = false;
      for (const Tensor& t : op.outputs) {
        initializes_variable = initializes_variable || variables_.count(t.storage().get()) > 0;
      }
      if (kRandomOps.count(op.op->name) > 0 && !initializes_variable) {
        unsupported(op,
                    "draws random numbers; TensorFlow's random ops draw other numbers than "
                    "Trainyard's generator, so the exported graph could not compute the same "
                    "predictions (a model that samples at inference has no exact SavedModel)");
      }
      for (const Tensor& t : op.outputs) folded_[key_of(t)] = t;
      continue;
    }
    convert(op, in);
  }

  scope_.clear();
  for (const auto& [name, t] : spec_.outputs) {
    const Ref r = resolve(t, nullptr);
    if (!r.is_value()) {
      throw Unimplemented("SavedModel export of " + spec_.model_name + ": the output '" + name +
                          "' does not depend on the inputs");
    }
    if (value(r.value).batch.axis != 0 || value(r.value).batch.within != 1) {
      throw Unimplemented("SavedModel export of " + spec_.model_name + ": the output '" + name +
                          "' " + t.description() + " does not hold the batch first");
    }
    NodeDef* n = add_node(graph_, name, "Identity", {value(r.value).name});
    set_type(n, "T", tf_dtype(t.dtype()));
  }
  return std::move(result_);
}

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

// batch_multiclass_non_max_suppression: the composition of tf_graph_detection.h.
void Builder::nms(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<MultiClassNmsAttrs>("MultiClassNmsAttrs");
  const Shape& boxes = op.inputs[0].shape();
  const Shape& scores = op.inputs[1].shape();
  const std::string why = tf_nms_unsupported(a, boxes[2], op.inputs.size() > 2);
  if (!why.empty()) unsupported(op, why);
  if (!in[0].is_value() || !in[1].is_value()) {
    unsupported(op, "reads boxes or scores that do not depend on the graph's inputs");
  }
  const TfNmsOutputs o = add_tf_multiclass_nms(
      graph_, [this](const std::string& wanted) { return unique(wanted); }, value(in[0].value).name,
      value(in[1].value).name, boxes[1], scores[2], a);
  const std::string* names[] = {&o.boxes, &o.scores, &o.classes, &o.num_detections,
                                &o.anchor_indices};
  for (std::size_t k = 0; k < op.outputs.size() && k < 5; ++k) define(op.outputs[k], *names[k]);
}

// A reshape view of value v: the dimension of `target` that holds the batch (the one that keeps
// the batch's elements whole; at a capture batch of 1, the first, which must keep its size) is -1
// in the shape operand. Row-major order is kept, so a merge of the batch with steps ([T, B, D] to
// [T * B, D]) and its undoing are followed.
int Builder::reshape(int v, const Shape& target, const Op* op) {
  const Value source = value(v);
  Batching batch;
  bool found = false;
  if (target.rank() > 0 && source.shape.rank() > 0) {
    if (spec_.capture_batch > 1) {
      const int64_t stride = inner_size(source.shape, static_cast<std::size_t>(source.batch.axis)) *
                             source.batch.within;
      found = locate_batch(target, stride, &batch);
    } else {
      found = source.batch.axis == 0 && target[0] == source.shape[0];
    }
  }
  if (!found) {
    const std::string view = "a reshape of " + source.shape.to_string() + " to " +
                             target.to_string() +
                             ", which does not keep the batch in one dimension (the graph's "
                             "dynamic one)";
    if (op != nullptr) unsupported(*op, "reads " + view);
    throw Unimplemented("SavedModel export of " + spec_.model_name + ": the graph's output is " +
                        view);
  }
  std::vector<int64_t> dims = target.to_vector();
  dims[static_cast<std::size_t>(batch.axis)] = -1;
  values_.push_back(
      {reshaped(source.name, source.dtype, dims), target, source.dtype, source.offset, batch});
  return static_cast<int>(values_.size() - 1);
}

void Builder::convert(const Op& op, const std::vector<Ref>& in) {
  const std::string_view name = op.op->name;
  static const std::set<std::string_view> kBatchFirst = {
      "conv2d", "max_pool2d", "avg_pool2d", "batch_norm_inference", "matmul", "matmul_bias_act"};
  if (kBatchFirst.count(name) > 0 && (current_.axis != 0 || current_.within != 1) &&
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
  static const std::set<std::string_view> kUnary = {
      "neg",  "abs",  "sign",  "exp", "log",           "sqrt",     "rsqrt", "square", "sigmoid",
      "tanh", "relu", "relu6", "elu", "clip_by_value", "softplus", "copy",  "cast"};
  if (kUnary.count(name) > 0) return unary(op, in, name);
  unsupported(op,
              "has no TensorFlow form in the SavedModel exporter (it maps conv2d, max_pool2d, "
              "avg_pool2d, batch_norm_inference, matmul, matmul_bias_act, softmax, log_softmax, "
              "reduce_mean/sum/max/min, pad, slice, concat, transpose, elementwise arithmetic, "
              "less, where and activations)");
}

}  // namespace

Graph build_tf_graph(const GraphCapture& capture, const GraphSpec& spec) {
  return Builder(capture, spec).build();
}

}  // namespace trainyard::tf_internal
