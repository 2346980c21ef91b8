#include "formats/tf_graph.h"

#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string_view>

#include "formats/tf_builder.h"
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

// The number of elements of one index of dimension `axis` (the product of the dimensions after it).
int64_t inner_size(const Shape& shape, std::size_t axis) {
  int64_t n = 1;
  for (std::size_t j = axis + 1; j < shape.rank(); ++j) n *= shape[j];
  return n;
}

// The ops that draw random numbers (core/src/engine/ops/random.cc).
const std::set<std::string_view> kRandomOps = {"random_uniform", "random_normal",
                                               "truncated_normal"};

}  // namespace

// ---- Liveness and resolution (as onnx_graph.cc: only what the outputs depend on) ----

void Builder::mark_live() {
  std::vector<Tensor> outputs;
  for (const auto& [name, t] : spec_.outputs) outputs.push_back(t);
  // Variables' initializers are not told apart here: build() folds them with the constant ops.
  live_ = live_ops(
              ops_, outputs, [](const Storage*) { return false; },
              [&](const Op& op) {
                unsupported(op, "writes its inputs in place during the forward pass");
              })
              .live;
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
    if (live_[i] && ops_[i].op->name == std::string_view("batch_multiclass_non_max_suppression")) {
      last_nms_ = &ops_[i];
    }
  }
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

Graph build_tf_graph(const GraphCapture& capture, const GraphSpec& spec) {
  return Builder(capture, spec).build();
}

}  // namespace trainyard::tf_internal
