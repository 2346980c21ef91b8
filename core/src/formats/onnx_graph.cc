#include "formats/onnx_graph.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>

#include "formats/onnx_builder.h"
#include "trainyard/abi.h"

namespace trainyard::onnx_internal {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;
using Op = GraphCapture::Op;

constexpr int64_t kIrVersion = 8;
constexpr const char* kBatchDim = "N";

std::vector<int64_t> to_vector(std::span<const int64_t> values) {
  return {values.begin(), values.end()};
}

// The NCHW form of an NHWC tensor has its elements in the same order when C is 1 or H * W is 1.
bool nchw_keeps_order(const Shape& nhwc) { return nhwc[3] == 1 || nhwc[1] * nhwc[2] == 1; }

}  // namespace

int32_t onnx_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return TensorProto::FLOAT;
    case DType::kF64:
      return TensorProto::DOUBLE;
    case DType::kF16:
      return TensorProto::FLOAT16;
    case DType::kBF16:
      return TensorProto::BFLOAT16;
    case DType::kI32:
      return TensorProto::INT32;
    case DType::kI64:
      return TensorProto::INT64;
    case DType::kU8:
      return TensorProto::UINT8;
    case DType::kBool:
      return TensorProto::BOOL;
  }
  throw Unimplemented(std::string("ONNX export: no ONNX type for dtype ") + dtype_name(dtype));
}

// ---- Liveness and resolution ----

// Only what the outputs depend on is exported; an in-place op (no outputs: it writes its
// inputs) on anything the outputs read is refused, since the graph could not show it.
void Builder::mark_live() {
  std::vector<Tensor> outputs;
  for (const auto& [name, t] : spec_.outputs) outputs.push_back(t);
  LiveOps l = live_ops(
      ops_, outputs, [&](const Storage* s) { return variables_.count(s) > 0; },
      [&](const Op& op) { unsupported(op, "writes its inputs in place during the forward pass"); });
  live_ = std::move(l.live);
  uses_ = std::move(l.uses);
  skip_.assign(ops_.size(), false);
  for (std::size_t i = ops_.size(); i-- > 0;) {
    for (const Tensor& t : ops_[i].outputs) producer_[t.storage().get()] = i;
  }
}

// A tensor the host reads is a constant to whatever the host computes from it; when it depends on
// the graph's inputs, that constant holds the captured example's value, and no graph can give
// the model's results for another input.
void Builder::check_host_reads(const std::vector<Tensor>& reads) const {
  if (reads.empty()) return;
  std::set<const Storage*> dependent;
  std::map<const Storage*, const Op*> producer;
  for (const auto& [name, t] : spec_.inputs) dependent.insert(t.storage().get());
  for (const Op& op : ops_) {
    bool depends = false;
    for (const Tensor& t : op.inputs)
      depends = depends || (t.defined() && dependent.count(t.storage().get()) > 0);
    for (const Tensor& t : op.outputs) {
      producer.emplace(t.storage().get(), &op);
      if (depends) dependent.insert(t.storage().get());
    }
  }
  for (const Tensor& t : reads) {
    if (!t.defined() || dependent.count(t.storage().get()) == 0) continue;
    const auto it = producer.find(t.storage().get());
    const std::string what = it == producer.end() ? "a graph input"
                                                  : "the output " + t.description() + " of op '" +
                                                        it->second->op->name + "'";
    throw Unimplemented("ONNX export of " + spec_.model_name + ": the model copies " + what +
                        " to the host and computes with it there; the graph would hold that "
                        "result as a constant of the captured example (only computations on the "
                        "backend, by ops, are exported)");
  }
}

Ref Builder::resolve(const Tensor& t, const Op* op) {
  Key key = key_of(t);
  if (auto it = value_of_.find(key); it != value_of_.end()) return {it->second, {}};
  const Storage* storage = t.storage().get();
  // A variable first: with a context that creates variables during the capture, the
  // initializer's op produced the variable's value.
  if (auto it = variables_.find(storage); it != variables_.end()) return {-1, {t, it->second}};
  if (auto it = folded_.find(key); it != folded_.end()) return {-1, {it->second, ""}};
  if (auto it = value_of_storage_.find(storage); it != value_of_storage_.end()) {
    int source_value = it->second;
    // Steps of a time-major value (a recurrent layer's last step, one step of the step rows a
    // projection gave): a Slice of its first axis.
    const std::size_t total =
        static_cast<std::size_t>(
            values_[static_cast<std::size_t>(source_value)].shape.num_elements()) *
        dtype_size(values_[static_cast<std::size_t>(source_value)].dtype);
    if (values_[static_cast<std::size_t>(source_value)].batching == Batching::kStepRows &&
        (t.byte_offset() != values_[static_cast<std::size_t>(source_value)].offset ||
         t.size_bytes() != total)) {
      source_value = time_major_form(source_value, op);
    }
    const Value& source = values_[static_cast<std::size_t>(source_value)];
    if (source.batching == Batching::kTimeMajor && t.dtype() == source.dtype &&
        source.shape[0] > 0 && t.byte_offset() >= source.offset &&
        (t.byte_offset() != source.offset || t.size_bytes() != total)) {
      const std::size_t row = total / static_cast<std::size_t>(source.shape[0]);
      const std::size_t off = t.byte_offset() - source.offset;
      if (row > 0 && off % row == 0 && t.size_bytes() % row == 0 && off + t.size_bytes() <= total) {
        const int64_t steps = static_cast<int64_t>(t.size_bytes() / row);
        const int sliced = time_slice(source_value, static_cast<int64_t>(off / row), steps);
        // One step is read batch-major (the step loop's [B, ...]; [1, B, ...] is ambiguous when
        // the capture's B is 1), several as time-major steps.
        const int v = steps > 1 && t.shape() == values_[static_cast<std::size_t>(sliced)].shape
                          ? sliced
                          : reshape(sliced, t.shape(), op);
        value_of_[key] = v;
        return {v, {}};
      }
    }
    if (t.byte_offset() != source.offset || t.dtype() != source.dtype ||
        t.num_elements() != source.shape.num_elements()) {
      unsupported(op, "the graph's output",
                  "reads " + t.description() + " at byte offset " +
                      std::to_string(t.byte_offset()) + ", a view of part of a value (" +
                      source.shape.to_string() + "); only whole-tensor reshapes are exported");
    }
    int v = reshape(it->second, t.shape(), op);
    value_of_[key] = v;
    return {v, {}};
  }
  return {-1, {t, ""}};  // a host-made tensor, or a view of a folded one
}

void Builder::fold(const Op& op) {
  for (const Tensor& t : op.outputs) {
    folded_[key_of(t)] = t;
  }
}

// ---- Names, nodes, values ----

std::string Builder::unique(const std::string& wanted) {
  std::string name = wanted;
  for (int k = 1; names_.count(name) > 0; ++k) name = wanted + "_" + std::to_string(k);
  names_.insert(name);
  return name;
}

NodeProto* Builder::node(const std::string& op_type, std::vector<std::string> inputs) {
  NodeProto* n = graph_->add_node();
  n->set_op_type(op_type);
  n->set_name(unique(scope_.empty() ? op_type : scope_ + "/" + op_type));
  for (std::string& input : inputs) n->add_input(std::move(input));
  n->add_output(unique(n->name() + ":0"));
  return n;
}

void attr(NodeProto* n, const char* name, int64_t value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}
void attr(NodeProto* n, const char* name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}
void attr_float(NodeProto* n, const char* name, double value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(value));
}

int Builder::define(const Tensor& t, const std::string& name, Layout layout, Batching batching,
                    int64_t steps) {
  Value v;
  v.name = name;
  v.layout = layout;
  v.shape = t.shape();
  v.dtype = t.dtype();
  v.offset = t.byte_offset();
  v.batching = batching;
  v.steps = steps;
  (layout == Layout::kAsIs ? v.as_is : v.nchw) = name;
  values_.push_back(std::move(v));
  const int index = static_cast<int>(values_.size() - 1);
  value_of_[key_of(t)] = index;
  value_of_storage_.emplace(t.storage().get(), index);
  return index;
}

int Builder::add_value(const std::string& name, const Shape& shape, DType dtype, std::size_t offset,
                       Batching batching, int64_t steps) {
  Value v;
  v.name = name;
  v.as_is = name;
  v.shape = shape;
  v.dtype = dtype;
  v.offset = offset;
  v.batching = batching;
  v.steps = steps;
  values_.push_back(std::move(v));
  return static_cast<int>(values_.size() - 1);
}

Batching Builder::batching_of(const Op& op, const std::vector<Ref>& in, int64_t* steps,
                              bool elementwise) const {
  std::optional<Batching> common;
  for (const Ref& r : in) {
    if (!r.is_value()) continue;
    const Value& v = values_[static_cast<std::size_t>(r.value)];
    if (common && *common != v.batching) {
      unsupported(op,
                  "combines a time-major value (the batch second, as a recurrent layer's steps) "
                  "with a batch-major one");
    }
    common = v.batching;
    if (steps != nullptr) *steps = v.steps;
  }
  // A constant broadcast against rows that merge the batch with steps or classes must not vary
  // along the rows: in the graph their number is dynamic.
  if (elementwise && (common == Batching::kStepRows || common == Batching::kBatchRows)) {
    for (const Ref& r : in) {
      if (r.is_value()) continue;
      const Shape& shape = r.constant.tensor.shape();
      for (const Ref& v : in) {
        if (!v.is_value()) continue;
        const Shape& rows = values_[static_cast<std::size_t>(v.value)].shape;
        if (shape.rank() == rows.rank() && shape.rank() > 0 && shape[0] != 1) {
          unsupported(op, "combines " + rows.to_string() +
                              " (rows that merge the batch with steps or classes) with the "
                              "constant " +
                              shape.to_string() + ", which varies along the rows");
        }
      }
    }
  }
  return common.value_or(Batching::kFirst);
}

int Builder::time_major_form(int v, const Op* op) {
  if (values_[static_cast<std::size_t>(v)].time_major >= 0) {
    return values_[static_cast<std::size_t>(v)].time_major;
  }
  const Value source = values_[static_cast<std::size_t>(v)];
  std::vector<int64_t> dims{source.steps, source.shape[0] / source.steps};
  for (std::size_t i = 1; i < source.shape.rank(); ++i) dims.push_back(source.shape[i]);
  const int form = reshape(v, Shape(dims), op);
  values_[static_cast<std::size_t>(v)].time_major = form;
  return form;
}

// Steps [begin, begin + size) of time-major value v, a time-major value.
int Builder::time_slice(int v, int64_t begin, int64_t size) {
  const Value source = values_[static_cast<std::size_t>(v)];
  NodeProto* n = node("Slice", {as_is(v), int64s({begin}), int64s({begin + size}), int64s({0})});
  Shape shape = source.shape;
  shape[0] = size;
  const std::size_t row =
      source.shape.rank() == 0 || source.shape[0] == 0
          ? 0
          : static_cast<std::size_t>(source.shape.num_elements() / source.shape[0]) *
                dtype_size(source.dtype);
  return add_value(out(n), shape, source.dtype,
                   source.offset + static_cast<std::size_t>(begin) * row, Batching::kTimeMajor, 0);
}

// The layout an op whose output layout is free runs in: NCHW when the value has that form.
Layout Builder::natural(int v) const {
  const Value& value = values_[static_cast<std::size_t>(v)];
  return value.shape.rank() == 4 && !value.nchw.empty() ? Layout::kNchw : Layout::kAsIs;
}

std::string Builder::as_is(int v) {
  Value& value = values_[static_cast<std::size_t>(v)];
  if (value.as_is.empty()) {
    std::string source = value.nchw;
    NodeProto* n = node("Transpose", {source});
    attr(n, "perm", to_vector(kToNhwc));
    values_[static_cast<std::size_t>(v)].as_is = out(n);
  }
  return values_[static_cast<std::size_t>(v)].as_is;
}

std::string Builder::nchw(int v) {
  Value& value = values_[static_cast<std::size_t>(v)];
  if (value.nchw.empty()) {
    std::string source = value.as_is;
    NodeProto* n = node("Transpose", {source});
    attr(n, "perm", to_vector(kToNchw));
    values_[static_cast<std::size_t>(v)].nchw = out(n);
  }
  return values_[static_cast<std::size_t>(v)].nchw;
}

// An input of an op that runs in `layout`. A constant of lower rank meant to broadcast against a
// 4-D NCHW value is padded to rank 4 with leading 1s, permuted and stripped of its leading 1s
// again ([C] -> [C, 1, 1]); with `broadcast` false it must be 4-D itself.
std::string Builder::operand(const Ref& r, Layout layout, bool broadcast, const Op& op) {
  if (r.is_value()) {
    const Value& v = values_[static_cast<std::size_t>(r.value)];
    if (layout == Layout::kAsIs) return as_is(r.value);
    if (v.shape.rank() == 4) return nchw(r.value);
    unsupported(op, "broadcasts the computed value " + v.shape.to_string() +
                        " against a 4-D one; only constants may have the lower rank");
  }
  const Shape& shape = r.constant.tensor.shape();
  if (layout == Layout::kAsIs) return initializer(r.constant, {}, std::nullopt, "");
  if (shape.rank() > 4 || (!broadcast && shape.rank() != 4)) {
    unsupported(op, "combines " + r.constant.tensor.description() + " with a 4-D value");
  }
  std::vector<int64_t> padded(4 - shape.rank(), 1);
  for (int64_t d : shape.dims()) padded.push_back(d);
  std::vector<int64_t> dims;
  for (int64_t a : kToNchw) dims.push_back(padded[static_cast<std::size_t>(a)]);
  if (broadcast) {
    std::size_t lead = 0;
    while (lead < dims.size() && dims[lead] == 1 && dims.size() - lead > shape.rank()) ++lead;
    dims.erase(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(lead));
  }
  // Permuting the padded shape moves the same elements as permuting the constant's own.
  Constant padded_constant{
      r.constant.tensor.with_shape(Shape(padded), r.constant.tensor.byte_offset()),
      r.constant.base};
  return initializer(padded_constant, to_vector(kToNchw), dims,
                     broadcast ? "nchw_broadcast" : "nchw");
}

// ---- Initializers ----

// The constant, permuted by `perm` (none when empty) and then given `dims` (its permuted shape
// when empty), as an initializer named by its variable ("const_K" for others; "<name>/<form>"
// when the variable is used in a second form).
std::string Builder::initializer(const Constant& c, const std::vector<int64_t>& perm,
                                 std::optional<std::vector<int64_t>> dims,
                                 const std::string& form) {
  auto cache_key = std::make_pair(key_of(c.tensor), form + (perm.empty() ? "" : "/p"));
  if (auto it = initializers_.find(cache_key); it != initializers_.end()) return it->second;
  const Tensor& t = c.tensor;
  std::vector<std::byte> data(t.size_bytes());
  t.to_host(data.data(), data.size());
  std::vector<int64_t> shape = t.shape().to_vector();
  if (!perm.empty()) {
    export_internal::permute_dims(data, shape, perm, dtype_size(t.dtype()));
  }
  if (!dims) dims = shape;
  std::string name;
  if (c.base.empty()) {
    name = unique("const");
  } else {
    name = names_.count(c.base) == 0 ? c.base : c.base + "/" + (form.empty() ? "value" : form);
    name = unique(name);
  }
  TensorProto* proto = graph_->add_initializer();
  proto->set_name(name);
  proto->set_data_type(onnx_type(t.dtype()));
  for (int64_t d : *dims) proto->add_dims(d);
  proto->set_raw_data(data.data(), data.size());
  initializers_[cache_key] = name;
  return name;
}

std::string Builder::int64s(const std::vector<int64_t>& values) {
  std::string content = "i64:";
  for (int64_t v : values) content += std::to_string(v) + ",";
  if (auto it = small_constants_.find(content); it != small_constants_.end()) return it->second;
  std::string name = unique("const");
  TensorProto* proto = graph_->add_initializer();
  proto->set_name(name);
  proto->set_data_type(TensorProto::INT64);
  proto->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) proto->add_int64_data(v);
  small_constants_[content] = name;
  return name;
}

namespace {

// A value written exactly (hexadecimal floating point), to key constants by their content.
std::string exact(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%a", value);
  return text;
}

}  // namespace

std::string Builder::floats(const std::vector<float>& values) {
  std::string content = "f32:";
  for (float v : values) content += exact(v) + ",";
  if (auto it = small_constants_.find(content); it != small_constants_.end()) return it->second;
  std::string name = unique("const");
  TensorProto* proto = graph_->add_initializer();
  proto->set_name(name);
  proto->set_data_type(TensorProto::FLOAT);
  proto->add_dims(static_cast<int64_t>(values.size()));
  for (float v : values) proto->add_float_data(v);
  small_constants_[content] = name;
  return name;
}

std::string Builder::scalar(double value, DType dtype) {
  std::string content = std::string(dtype_name(dtype)) + ":" + exact(value);
  if (auto it = small_constants_.find(content); it != small_constants_.end()) return it->second;
  std::string name = unique("const");
  TensorProto* proto = graph_->add_initializer();
  proto->set_name(name);
  proto->set_data_type(onnx_type(dtype));
  if (dtype == DType::kF32) {
    proto->add_float_data(static_cast<float>(value));
  } else if (dtype == DType::kF64) {
    proto->add_double_data(value);
  } else if (dtype == DType::kI64) {
    proto->add_int64_data(static_cast<int64_t>(value));
  } else {
    throw Unimplemented("ONNX export of " + spec_.model_name + ": a " + dtype_name(dtype) +
                        " scalar bound (only f32, f64 and i64 are exported)");
  }
  small_constants_[content] = name;
  return name;
}

// ---- The whole model ----

onnx::ModelProto Builder::build() {
  if (spec_.opset < 13 || spec_.opset > 17) {
    throw InvalidArgument("ONNX export: opset " + std::to_string(spec_.opset) +
                          " is not supported; choose 13 to 17");
  }
  model_.set_ir_version(kIrVersion);
  model_.set_producer_name("trainyard");
  model_.set_producer_version(TRAINYARD_VERSION_STRING);
  onnx::OperatorSetIdProto* opset = model_.add_opset_import();
  opset->set_domain("");
  opset->set_version(spec_.opset);
  graph_->set_name(spec_.model_name);

  auto value_info = [&](onnx::ValueInfoProto* info, const std::string& name, const Tensor& t) {
    info->set_name(name);
    onnx::TypeProto::Tensor* type = info->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx_type(t.dtype()));
    onnx::TensorShapeProto* shape = type->mutable_shape();
    for (std::size_t i = 0; i < t.shape().rank(); ++i) {
      if (i == 0) {
        shape->add_dim()->set_dim_param(kBatchDim);
      } else {
        shape->add_dim()->set_dim_value(t.shape()[i]);
      }
    }
  };
  for (const auto& [name, t] : spec_.variables) variables_.emplace(t.storage().get(), name);
  for (const auto& [name, t] : spec_.inputs) {
    if (t.shape().rank() == 0) {
      throw InvalidArgument("ONNX export of " + spec_.model_name + ": the input '" + name +
                            "' is a scalar; inputs have the batch as their first dimension");
    }
    define(t, unique(name), Layout::kAsIs);
    value_info(graph_->add_input(), name, t);
  }
  for (const auto& [name, t] : spec_.outputs) names_.insert(name);

  if (spec_.refuse_host_reads) check_host_reads(host_reads_);
  mark_live();
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (live_[i] && std::string_view(ops_[i].op->name) == "batch_multiclass_non_max_suppression") {
      last_nms_ = i;
    }
  }
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (!live_[i] || skip_[i]) continue;
    const Op& op = ops_[i];
    std::vector<Ref> in;
    bool all_constant = true;
    scope_.clear();
    for (const Tensor& t : op.inputs) {
      if (!t.defined()) unsupported(op, "has an undefined input");
      in.push_back(resolve(t, &op));
      all_constant = all_constant && !in.back().is_value();
      const std::string& base = in.back().constant.base;
      if (scope_.empty() && !base.empty()) scope_ = base.substr(0, base.rfind('/'));
    }
    if (std::string_view(op.op->family) == "random") {
      unsupported(op,
                  "draws random numbers in the forward pass (as DbofModel's frame sampling "
                  "does in inference too); ONNX Runtime's generators cannot give Trainyard's "
                  "draws, so no ONNX graph computes the same predictions");
    }
    if (all_constant) {
      fold(op);
      continue;
    }
    convert(i, in);
  }

  scope_.clear();
  for (const auto& [name, t] : spec_.outputs) {
    Ref r = resolve(t, nullptr);
    if (!r.is_value()) {
      throw Unimplemented("ONNX export of " + spec_.model_name + ": the output '" + name +
                          "' does not depend on the inputs");
    }
    if (values_[static_cast<std::size_t>(r.value)].batching != Batching::kFirst) {
      throw Unimplemented("ONNX export of " + spec_.model_name + ": the output '" + name + "' (" +
                          t.shape().to_string() +
                          ") holds the batch merged into its rows or second; outputs keep the "
                          "batch as the first dimension (the graph's dynamic one)");
    }
    NodeProto* n = graph_->add_node();
    n->set_op_type("Identity");
    n->set_name(name);
    n->add_input(as_is(r.value));
    n->add_output(name);
    value_info(graph_->add_output(), name, t);
  }
  // The inputs no node reads (a batch feature the model ignores) are left out.
  std::set<std::string> read;
  for (const NodeProto& n : graph_->node()) read.insert(n.input().begin(), n.input().end());
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
  for (const onnx::ValueInfoProto& input : graph_->input()) {
    if (read.count(input.name()) > 0) *inputs.Add() = input;
  }
  if (inputs.empty()) {
    throw Unimplemented("ONNX export of " + spec_.model_name +
                        ": the outputs depend on none of the inputs");
  }
  graph_->mutable_input()->Swap(&inputs);
  return std::move(model_);
}

// ---- Reshape views ----

// A reshape view of value v: a Reshape node that keeps the batch where the value has it. A
// batch-major value keeps the batch first; a time-major [T, B, ...] one stays time-major
// ([T, B, ...] -> [T, B, ...']), gives one step batch-major ([1, B, ...] -> [B, ...']) or merges
// the steps into the rows ([T, B, ...] -> [T * B, ...']), which split again into [T, B, ...'].
// An NCHW value is reshaped from its NHWC form, which is its own element order when C or H * W
// is 1.
int Builder::reshape(int v, const Shape& target, const Op* op) {
  const Value source = values_[static_cast<std::size_t>(v)];
  auto refuse = [&](const std::string& why) -> int {
    const std::string view =
        "a reshape of " + source.shape.to_string() + " to " + target.to_string() + ", which " + why;
    unsupported(op, "the graph's output is", op != nullptr ? "reads " + view : view);
  };
  if (target.rank() == 0 || source.shape.rank() == 0) {
    refuse("does not keep the batch (the graph's dynamic dimension)");
  }
  auto product = [](const Shape& shape, std::size_t from) {
    int64_t p = 1;
    for (std::size_t i = from; i < shape.rank(); ++i) p *= shape[i];
    return p;
  };
  std::vector<int64_t> dims = target.to_vector();
  Batching batching = Batching::kFirst;
  int64_t steps = 0;
  switch (source.batching) {
    case Batching::kFirst:
      if (target[0] == source.shape[0]) {
        dims[0] = 0;  // Reshape's "as the input": the dynamic batch
      } else if (source.shape[0] > 0 && target[0] > source.shape[0] &&
                 target[0] % source.shape[0] == 0) {
        dims[0] = -1;  // [B, ...] -> [B * K, ...']
        batching = Batching::kBatchRows;
        steps = target[0] / source.shape[0];
      } else {
        refuse("does not keep the batch as the first dimension (the graph's dynamic one)");
      }
      break;
    case Batching::kBatchRows:
      if (target[0] * source.steps == source.shape[0]) {
        dims[0] = -1;  // [B * K, ...] -> [B, ...']
      } else if (target[0] == source.shape[0]) {
        dims[0] = 0;
        batching = Batching::kBatchRows;
        steps = source.steps;
      } else {
        refuse("does not keep the rows of each example together");
      }
      break;
    case Batching::kTimeMajor:
      if (source.shape.rank() >= 2 && source.shape[0] == 1 && target[0] == source.shape[1] &&
          product(target, 1) == product(source.shape, 2)) {
        dims[0] = -1;  // one step: [1, B, ...] -> [B, ...']
      } else if (target.rank() >= 2 && source.shape.rank() >= 2 && target[0] == source.shape[0] &&
                 target[1] == source.shape[1]) {
        dims[1] = 0;
        batching = Batching::kTimeMajor;
      } else if (source.shape.rank() >= 2 && target[0] == source.shape[0] * source.shape[1]) {
        dims[0] = -1;
        batching = Batching::kStepRows;
        steps = source.shape[0];
      } else {
        refuse("does not keep the batch of a time-major value (the second dimension)");
      }
      break;
    case Batching::kStepRows:
      if (target.rank() >= 2 && target[0] == source.steps &&
          target[0] * target[1] == source.shape[0]) {
        dims[1] = -1;
        batching = Batching::kTimeMajor;
      } else if (target[0] == source.shape[0]) {
        dims[0] = 0;
        batching = Batching::kStepRows;
        steps = source.steps;
      } else {
        refuse("does not keep the steps and the batch merged in the first dimension");
      }
      break;
  }
  std::string input = source.as_is;
  if (input.empty()) input = nchw_keeps_order(source.shape) ? source.nchw : as_is(v);
  NodeProto* n = node("Reshape", {input, int64s(dims)});
  const int reshaped = add_value(out(n), target, source.dtype, source.offset, batching, steps);
  // [B, ...] -> [1, B, ...]: also one step of a time-major value (stacked by a concat).
  if (source.batching == Batching::kFirst && target.rank() == source.shape.rank() + 1 &&
      target[0] == 1 && product(target, 1) == product(source.shape, 0) &&
      target[1] == source.shape[0]) {
    values_[static_cast<std::size_t>(reshaped)].unsqueezed_of = v;
  }
  return reshaped;
}

onnx::ModelProto build_onnx_model(const GraphCapture& capture, const GraphSpec& spec) {
  return Builder(capture, spec).build();
}

}  // namespace trainyard::onnx_internal
