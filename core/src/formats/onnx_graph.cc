#include "formats/onnx_graph.h"

#include <algorithm>
#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "formats/onnx_nms.h"
#include "trainyard/abi.h"
#include "trainyard/error.h"
#include "trainyard/op.h"
#include "trainyard/ops/array.h"
#include "trainyard/ops/detection.h"
#include "trainyard/ops/linalg.h"
#include "trainyard/ops/nn.h"
#include "trainyard/ops/reduce.h"

namespace trainyard::onnx_internal {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;
using Op = GraphCapture::Op;

constexpr int64_t kIrVersion = 8;
constexpr const char* kBatchDim = "N";

// How a captured tensor is told apart from the others.
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

// Graph values are in Trainyard's own layout, or (4-D only) NCHW.
enum class Layout { kAsIs, kNchw };
// Axis a of an NHWC tensor is axis kNchwAxis[a] of its NCHW form; axis j of the NCHW form is
// axis kToNchw[j] of the NHWC one.
constexpr std::array<int64_t, 4> kNchwAxis{0, 2, 3, 1};
constexpr std::array<int64_t, 4> kToNchw{0, 3, 1, 2};
constexpr std::array<int64_t, 4> kToNhwc{0, 2, 3, 1};

std::vector<int64_t> to_vector(std::span<const int64_t> values) {
  return {values.begin(), values.end()};
}

// The NCHW form of an NHWC tensor has its elements in the same order when C is 1 or H * W is 1.
bool nchw_keeps_order(const Shape& nhwc) { return nhwc[3] == 1 || nhwc[1] * nhwc[2] == 1; }

// `src` (dims, row-major, `element` bytes each) with its dimensions permuted: output dimension i
// is input dimension perm[i].
std::vector<std::byte> permuted(const std::vector<std::byte>& src, const std::vector<int64_t>& dims,
                                const std::vector<int64_t>& perm, std::size_t element) {
  const std::size_t rank = dims.size();
  std::vector<int64_t> in_strides(rank, 1), out_dims(rank), index(rank, 0);
  for (std::size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * dims[i];
  for (std::size_t i = 0; i < rank; ++i) out_dims[i] = dims[static_cast<std::size_t>(perm[i])];
  std::vector<std::byte> out(src.size());
  const std::size_t count = element == 0 ? 0 : src.size() / element;
  for (std::size_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (std::size_t i = 0; i < rank; ++i) {
      offset += index[i] * in_strides[static_cast<std::size_t>(perm[i])];
    }
    std::memcpy(out.data() + n * element, src.data() + static_cast<std::size_t>(offset) * element,
                element);
    for (std::size_t i = rank; i-- > 0;) {
      if (++index[i] < out_dims[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

// Where a value holds the batch (onnx_graph.h): as its first dimension, as the second of a
// time-major [T, B, ...] value, merged with the steps in the rows of a [T * B, ...] one (step
// major), or as the outer factor of the rows of a [B * K, ...] one (K rows per example, as
// MoE's [B * classes, mixtures]).
enum class Batching { kFirst, kTimeMajor, kStepRows, kBatchRows };

struct Value {
  std::string name;  // in `layout`
  Layout layout = Layout::kAsIs;
  Shape shape;  // Trainyard's
  DType dtype = DType::kF32;
  std::size_t offset = 0;
  std::string as_is, nchw;  // the value in that layout, once a consumer needed it
  Batching batching = Batching::kFirst;
  int64_t steps = 0;       // kStepRows: T; kBatchRows: K
  int unsqueezed_of = -1;  // a [1, B, ...] reshape of the [B, ...] value: one time-major step
  int time_major = -1;     // kStepRows: the value's [T, B, ...] form, once made
};

// A tensor no graph node computes: a variable's value (`base` is its name), another host-made
// tensor or a folded result (`base` empty).
struct Constant {
  Tensor tensor;
  std::string base;
};

// An op's input as the graph sees it.
struct Ref {
  int value = -1;  // a graph value, or
  Constant constant;
  bool is_value() const { return value >= 0; }
};

class Builder {
 public:
  Builder(const GraphCapture& capture, const GraphSpec& spec)
      : ops_(capture.ops()),
        host_reads_(capture.host_reads()),
        spec_(spec),
        graph_(model_.mutable_graph()) {}

  onnx::ModelProto build();

 private:
  [[noreturn]] void unsupported(const Op& op, const std::string& why) const {
    throw Unimplemented("ONNX export of " + spec_.model_name + ": op '" + op.op->name + "' (" +
                        op.op->summary + ") " + why);
  }
  [[noreturn]] void unsupported(const Op* op, const std::string& what,
                                const std::string& why) const {
    if (op != nullptr) unsupported(*op, why);
    throw Unimplemented("ONNX export of " + spec_.model_name + ": " + what + " " + why);
  }
  [[noreturn]] void moves_batch(const Op& op, const std::string& what) const {
    unsupported(op, what +
                        "; the batch is the graph's dynamic first dimension, so an op may not "
                        "move, slice or merge it");
  }

  void mark_live();
  // Throws when the host read a tensor that depends on the graph's inputs.
  void check_host_reads(const std::vector<Tensor>& reads) const;
  // `op` reads `t` (null: a graph output).
  Ref resolve(const Tensor& t, const Op* op);
  void convert(std::size_t i, const std::vector<Ref>& in);
  void fold(const Op& op);

  // Names and nodes.
  std::string unique(const std::string& wanted);
  NodeProto* node(const std::string& op_type, std::vector<std::string> inputs);
  std::string out(const NodeProto* n) const { return n->output(0); }
  int define(const Tensor& t, const std::string& name, Layout layout,
             Batching batching = Batching::kFirst, int64_t steps = 0);
  // The batching the value inputs of `op` share (kFirst when it has none); an error when they
  // differ.
  // With `elementwise`, a constant broadcast against row forms must not vary along the rows.
  Batching batching_of(const Op& op, const std::vector<Ref>& in, int64_t* steps = nullptr,
                       bool elementwise = false) const;
  int add_value(const std::string& name, const Shape& shape, DType dtype, std::size_t offset,
                Batching batching, int64_t steps);
  int time_slice(int v, int64_t begin, int64_t size);
  // The [T, B, ...] form of step rows [T * B, ...] (made once).
  int time_major_form(int v, const Op* op);

  // Values in a layout.
  Layout natural(int v) const;
  std::string as_is(int v);
  std::string nchw(int v);
  std::string operand(const Ref& r, Layout layout, bool broadcast, const Op& op);

  // Initializers.
  std::string initializer(const Constant& c, const std::vector<int64_t>& perm,
                          std::optional<std::vector<int64_t>> dims, const std::string& form);
  std::string int64s(const std::vector<int64_t>& values);
  std::string scalar(double value, DType dtype);

  // The op families.
  void conv2d(std::size_t i, const std::vector<Ref>& in);
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
  int reshape(int v, const Shape& target, const Op* op);
  void compare(const Op& op, const std::vector<Ref>& in, const char* op_type, bool negate);
  void where(const Op& op, const std::vector<Ref>& in);
  void nms(const Op& op, const std::vector<Ref>& in);

  const std::vector<Op>& ops_;
  const std::vector<Tensor> host_reads_;  // those of the capture, before the builder's own
  const GraphSpec& spec_;
  onnx::ModelProto model_;
  onnx::GraphProto* graph_;

  std::vector<bool> live_, skip_;
  std::map<const Storage*, int> uses_;              // by live ops and the graph's outputs
  std::map<const Storage*, std::size_t> producer_;  // the first op that wrote a storage
  std::vector<Value> values_;
  std::map<Key, int> value_of_;
  std::map<const Storage*, int> value_of_storage_;  // the first value made in a storage
  std::map<Key, Tensor> folded_;
  std::map<const Storage*, std::string> variables_;
  std::map<std::pair<Key, std::string>, std::string> initializers_;  // (tensor, form) -> name
  std::map<std::string, std::string> small_constants_;               // content -> name
  std::set<std::string> names_;
  std::string scope_;  // the variable scope of the op being converted, for node names
};

// ---- Liveness and resolution ----

// Only what the outputs depend on is exported; an in-place op (no outputs: it writes its
// inputs) on anything the outputs read is refused, since the graph could not show it.
void Builder::mark_live() {
  std::set<const Storage*> needed;
  for (const auto& [name, t] : spec_.outputs) {
    needed.insert(t.storage().get());
    ++uses_[t.storage().get()];
  }
  live_.assign(ops_.size(), false);
  skip_.assign(ops_.size(), false);
  for (std::size_t i = ops_.size(); i-- > 0;) {
    const Op& op = ops_[i];
    for (const Tensor& t : op.outputs) producer_[t.storage().get()] = i;
    bool live = false;
    // A variable's initializer (run when a context creates the variable during the capture) is
    // not part of the graph: the variable is an initializer of its own.
    for (const Tensor& t : op.outputs) {
      live =
          live || (needed.count(t.storage().get()) > 0 && variables_.count(t.storage().get()) == 0);
    }
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
      if (!t.defined()) continue;
      needed.insert(t.storage().get());
      ++uses_[t.storage().get()];
    }
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
    data = permuted(data, shape, perm, dtype_size(t.dtype()));
    std::vector<int64_t> permuted_shape;
    for (int64_t p : perm) permuted_shape.push_back(shape[static_cast<std::size_t>(p)]);
    shape = permuted_shape;
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

std::string Builder::scalar(double value, DType dtype) {
  std::string content = std::string(dtype_name(dtype)) + ":" + std::to_string(value);
  if (auto it = small_constants_.find(content); it != small_constants_.end()) return it->second;
  std::string name = unique("const");
  TensorProto* proto = graph_->add_initializer();
  proto->set_name(name);
  proto->set_data_type(onnx_type(dtype));
  if (dtype == DType::kF32) {
    proto->add_float_data(static_cast<float>(value));
  } else if (dtype == DType::kF64) {
    proto->add_double_data(value);
  } else {
    throw Unimplemented("ONNX export of " + spec_.model_name + ": a " + dtype_name(dtype) +
                        " scalar bound (only f32 and f64 are exported)");
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

// ---- The op families ----

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
  define(result, out(n), Layout::kNchw);
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
  define(op.outputs[0], out(n), Layout::kNchw);
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
  define(op.outputs[0], out(n), layout);
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
  const std::string why = nms_unsupported(a, boxes[2], op.inputs.size() > 2);
  if (!why.empty()) unsupported(op, why);
  if (!in[0].is_value() || !in[1].is_value()) {
    unsupported(op, "reads boxes or scores that do not depend on the graph's inputs");
  }
  const NmsGraphOutputs o = add_multiclass_nms(
      *graph_, [this](const std::string& wanted) { return unique(wanted); }, as_is(in[0].value),
      as_is(in[1].value), boxes[1], scores[2], a);
  const std::string* names[] = {&o.boxes, &o.scores, &o.classes, &o.num_detections,
                                &o.anchor_indices};
  for (std::size_t k = 0; k < op.outputs.size() && k < 5; ++k) {
    define(op.outputs[k], *names[k], Layout::kAsIs);
  }
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
  define(op.outputs[0], out(node("Pad", inputs)), layout);
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
  Batching result = batching;
  if (swaps_first_two && batching != Batching::kStepRows) {
    result = batching == Batching::kFirst ? Batching::kTimeMajor : Batching::kFirst;
  } else if (batching != Batching::kFirst) {
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
  define(op.outputs[0], out(n), Layout::kAsIs, result);
}

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
  // Row-wise ones also on rows that merge the batch with steps or classes.
  static const std::set<std::string_view> kRowWise = {"softmax",    "log_softmax", "reduce_mean",
                                                      "reduce_sum", "reduce_max",  "reduce_min",
                                                      "logsumexp"};
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
  static const std::set<std::string_view> kUnary = {
      "neg",  "abs",  "sign",  "exp", "log",           "sqrt",     "rsqrt", "square", "sigmoid",
      "tanh", "relu", "relu6", "elu", "clip_by_value", "softplus", "copy",  "cast"};
  if (kUnary.count(name) > 0) return unary(op, in, name);
  unsupported(op,
              "has no ONNX form in the exporter (it maps conv2d, max_pool2d, avg_pool2d, "
              "batch_norm_inference, matmul, matmul_bias_act, softmax, log_softmax, "
              "reductions, pad, slice, concat, transpose, elementwise arithmetic, comparisons, "
              "where, activations and batch_multiclass_non_max_suppression)");
}

}  // namespace

onnx::ModelProto build_onnx_model(const GraphCapture& capture, const GraphSpec& spec) {
  return Builder(capture, spec).build();
}

}  // namespace trainyard::onnx_internal
