#include "formats/tflite_graph.h"

#include <algorithm>
#include <cmath>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>

#include "tflite_schema_generated.h"
#include "trainyard/abi.h"
#include "trainyard/error.h"
#include "trainyard/op.h"
#include "trainyard/ops/array.h"
#include "trainyard/ops/linalg.h"
#include "trainyard/ops/nn.h"
#include "trainyard/ops/reduce.h"

namespace trainyard::tflite_internal {
namespace {

namespace fb = trainyard::tflite;
using Op = GraphCapture::Op;

constexpr uint32_t kSchemaVersion = 3;

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

// A tensor no op of the subgraph computes: a variable's value (`base` its name), another
// host-made tensor or a folded result (`base` empty).
struct Constant {
  Tensor tensor;
  std::string base;
};

// An op's input as the subgraph sees it: a tensor it computes (index >= 0) or a constant.
struct Ref {
  int index = -1;
  Constant constant;
  bool is_value() const { return index >= 0; }
};

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

int32_t narrow(int64_t v) {
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    throw Unimplemented("TFLite export: the size " + std::to_string(v) +
                        " does not fit TFLite's int32");
  }
  return static_cast<int32_t>(v);
}

std::vector<int32_t> int32_dims(const Shape& shape) {
  std::vector<int32_t> dims;
  for (int64_t d : shape.dims()) dims.push_back(narrow(d));
  return dims;
}

class Builder {
 public:
  Builder(const GraphCapture& capture, const GraphSpec& spec) : ops_(capture.ops()), spec_(spec) {}
  std::string build();

 private:
  [[noreturn]] void unsupported(const Op& op, const std::string& why) const {
    throw Unimplemented("TFLite export of " + spec_.model_name + ": op '" + op.op->name + "' (" +
                        op.op->summary + ") " + why);
  }

  void mark_live();
  Ref resolve(const Tensor& t, const Op* op);
  void convert(std::size_t i, const std::vector<Ref>& in);

  // Tensors, buffers, operators.
  std::string unique(const std::string& wanted);
  int add_tensor(const std::string& name, const std::vector<int32_t>& shape, fb::TensorType type,
                 std::vector<uint8_t> data);
  int define(const Tensor& t, const std::string& name);
  int new_value(const Shape& shape, const std::string& name);
  int constant(const Constant& c, const std::vector<int64_t>& perm,
               std::optional<std::vector<int64_t>> dims, const std::string& form, const Op& op);
  int floats(const std::string& name, const std::vector<int64_t>& dims,
             const std::vector<float>& values);
  // An int32 constant of `shape` (1-D when empty).
  int int32s(const std::vector<int32_t>& values, std::vector<int32_t> shape = {});
  int explicit_pad(int x, const Shape& shape, const std::vector<int32_t>& pads);
  std::optional<int> fuse_bias(std::size_t i, Tensor& result, int64_t channels, std::size_t* last);
  int operand(const Ref& r, const Op& op);
  void emit(fb::BuiltinOperator code, std::vector<int32_t> inputs, std::vector<int32_t> outputs,
            fb::BuiltinOptionsUnion options = {});
  int reshape(int index, const Shape& target);

  // The only live op after `after` that reads `t`'s storage, when `t` has one reader.
  std::optional<std::size_t> sole_reader(const Tensor& t, std::size_t after) const;
  // The activation a relu or relu6 that alone reads `result` (op `i`'s output) fuses into op i;
  // `result` becomes that op's output and the op is skipped.
  fb::ActivationFunctionType fuse_activation(std::size_t i, Tensor& result);

  // The op families.
  void conv2d(std::size_t i, const std::vector<Ref>& in);
  void pool(const Op& op, const std::vector<Ref>& in, bool max);
  void batch_norm(std::size_t i, const std::vector<Ref>& in);
  void unary(const Op& op, const std::vector<Ref>& in, std::string_view name);
  void binary(std::size_t i, const std::vector<Ref>& in, std::string_view name);
  void matmul(std::size_t i, const std::vector<Ref>& in, bool with_bias);
  void softmax(const Op& op, const std::vector<Ref>& in);
  void reduce_mean(const Op& op, const std::vector<Ref>& in);
  void pad(const Op& op, const std::vector<Ref>& in);
  void concat(const Op& op, const std::vector<Ref>& in);

  const std::vector<Op>& ops_;
  const GraphSpec& spec_;
  fb::ModelT model_;
  std::unique_ptr<fb::SubGraphT> graph_ = std::make_unique<fb::SubGraphT>();
  std::map<fb::BuiltinOperator, uint32_t> opcodes_;

  std::vector<bool> live_, skip_;
  std::map<const Storage*, int> uses_;  // by live ops and the outputs
  std::map<Key, int> tensor_of_;
  std::map<const Storage*, int> first_of_storage_;  // the first tensor made in a storage
  std::map<int, std::size_t> offset_of_;            // a computed tensor's byte offset
  std::map<const Storage*, std::string> inputs_;    // graph inputs, by storage
  std::map<const Storage*, std::string> variables_;
  std::map<Key, Tensor> folded_;
  std::map<std::pair<Key, std::string>, int> constants_;  // (tensor, form) -> tensor index
  std::map<std::pair<std::vector<int32_t>, std::vector<int32_t>>, int> int32_constants_;
  std::map<const Storage*, std::size_t> producer_;  // the first op that wrote a storage
  std::set<std::string> names_;
  std::string scope_;  // the variable scope of the op being converted, for tensor names
};

// ---- Liveness and resolution ----

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
    bool live = false;
    // A variable's initializer (run when a context creates it during the capture) is not part of
    // the subgraph: the variable is a constant of its own.
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

Ref Builder::resolve(const Tensor& t, const Op* op) {
  const Key key = key_of(t);
  if (auto it = tensor_of_.find(key); it != tensor_of_.end()) return {it->second, {}};
  const Storage* storage = t.storage().get();
  if (auto it = inputs_.find(storage); it != inputs_.end()) {
    // A graph input, made when first read (inputs no op reads stay out of the subgraph).
    if (first_of_storage_.count(storage) == 0) {
      for (const auto& [name, input] : spec_.inputs) {
        if (input.storage().get() != storage) continue;
        if (input.dtype() != DType::kF32) {
          throw Unimplemented("TFLite export of " + spec_.model_name + ": the input '" + name +
                              "' is " + dtype_name(input.dtype()) +
                              "; only f32 inputs are written");
        }
        const int index = define(input, name);
        graph_->tensors[static_cast<std::size_t>(index)]->name = name;  // reserved in build()
        graph_->inputs.push_back(index);
      }
      if (auto again = tensor_of_.find(key); again != tensor_of_.end()) return {again->second, {}};
    }
  }
  if (auto it = variables_.find(storage); it != variables_.end()) return {-1, {t, it->second}};
  if (auto it = folded_.find(key); it != folded_.end()) return {-1, {it->second, ""}};
  if (auto it = first_of_storage_.find(storage); it != first_of_storage_.end()) {
    const fb::TensorT& source = *graph_->tensors[static_cast<std::size_t>(it->second)];
    int64_t count = 1;
    for (int32_t d : source.shape) count *= d;
    if (t.byte_offset() != offset_of_[it->second] || t.num_elements() != count ||
        t.dtype() != DType::kF32) {
      const std::string who =
          op != nullptr ? "op '" + std::string(op->op->name) + "'" : "the output";
      throw Unimplemented("TFLite export of " + spec_.model_name + ": " + who + " reads " +
                          t.description() + ", a view of part of a computed value; only " +
                          "whole-tensor reshapes are exported");
    }
    const int v = reshape(it->second, t.shape());
    tensor_of_[key] = v;
    return {v, {}};
  }
  return {-1, {t, ""}};
}

// ---- Tensors, buffers, operators ----

std::string Builder::unique(const std::string& wanted) {
  std::string name = wanted;
  for (int k = 1; names_.count(name) > 0; ++k) name = wanted + "_" + std::to_string(k);
  names_.insert(name);
  return name;
}

int Builder::add_tensor(const std::string& name, const std::vector<int32_t>& shape,
                        fb::TensorType type, std::vector<uint8_t> data) {
  auto tensor = std::make_unique<fb::TensorT>();
  tensor->shape = shape;
  tensor->type = type;
  tensor->name = name;
  tensor->buffer = 0;
  if (!data.empty()) {
    auto buffer = std::make_unique<fb::BufferT>();
    buffer->data = std::move(data);
    model_.buffers.push_back(std::move(buffer));
    tensor->buffer = static_cast<uint32_t>(model_.buffers.size() - 1);
  }
  graph_->tensors.push_back(std::move(tensor));
  return static_cast<int>(graph_->tensors.size() - 1);
}

int Builder::define(const Tensor& t, const std::string& name) {
  const int index = add_tensor(unique(name), int32_dims(t.shape()), fb::TensorType_FLOAT32, {});
  offset_of_[index] = t.byte_offset();
  tensor_of_[key_of(t)] = index;
  first_of_storage_.emplace(t.storage().get(), index);
  return index;
}

int Builder::new_value(const Shape& shape, const std::string& name) {
  return add_tensor(unique(scope_.empty() ? name : scope_ + "/" + name), int32_dims(shape),
                    fb::TensorType_FLOAT32, {});
}

// The constant, permuted by `perm` (none when empty) and given `dims` (its permuted shape when
// none), as a tensor named by its variable ("const" for others; "<name>/<form>" when the variable
// is used in a second form). f32 only.
int Builder::constant(const Constant& c, const std::vector<int64_t>& perm,
                      std::optional<std::vector<int64_t>> dims, const std::string& form,
                      const Op& op) {
  const auto cache_key = std::make_pair(key_of(c.tensor), form);
  if (auto it = constants_.find(cache_key); it != constants_.end()) return it->second;
  const Tensor& t = c.tensor;
  if (t.dtype() != DType::kF32) {
    unsupported(op, std::string("reads the ") + dtype_name(t.dtype()) + " constant " +
                        t.description() + "; only f32 constants are written");
  }
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
  std::string name =
      c.base.empty()
          ? "const"
          : (names_.count(c.base) == 0 ? c.base : c.base + "/" + (form.empty() ? "value" : form));
  std::vector<int32_t> shape32;
  for (int64_t d : *dims) shape32.push_back(narrow(d));
  std::vector<uint8_t> bytes(data.size());
  std::memcpy(bytes.data(), data.data(), data.size());
  if (bytes.empty()) unsupported(op, "reads the empty constant " + t.description());
  const int index = add_tensor(unique(name), shape32, fb::TensorType_FLOAT32, std::move(bytes));
  constants_[cache_key] = index;
  return index;
}

int Builder::floats(const std::string& name, const std::vector<int64_t>& dims,
                    const std::vector<float>& values) {
  std::vector<int32_t> shape32;
  for (int64_t d : dims) shape32.push_back(narrow(d));
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return add_tensor(unique(scope_.empty() ? name : scope_ + "/" + name), shape32,
                    fb::TensorType_FLOAT32, std::move(bytes));
}

int Builder::int32s(const std::vector<int32_t>& values, std::vector<int32_t> shape) {
  if (shape.empty()) shape = {static_cast<int32_t>(values.size())};
  const auto cache_key = std::make_pair(values, shape);
  if (auto it = int32_constants_.find(cache_key); it != int32_constants_.end()) return it->second;
  std::vector<uint8_t> bytes(values.size() * sizeof(int32_t));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  const int index =
      add_tensor(unique("const_int32"), shape, fb::TensorType_INT32, std::move(bytes));
  int32_constants_[cache_key] = index;
  return index;
}

int Builder::operand(const Ref& r, const Op& op) {
  return r.is_value() ? r.index : constant(r.constant, {}, std::nullopt, "", op);
}

void Builder::emit(fb::BuiltinOperator code, std::vector<int32_t> inputs,
                   std::vector<int32_t> outputs, fb::BuiltinOptionsUnion options) {
  auto [it, added] = opcodes_.emplace(code, static_cast<uint32_t>(model_.operator_codes.size()));
  if (added) {
    auto opcode = std::make_unique<fb::OperatorCodeT>();
    opcode->builtin_code = code;
    // Readers take the larger of the two; the byte field holds codes below 127.
    opcode->deprecated_builtin_code = static_cast<int8_t>(std::min<int32_t>(code, 127));
    opcode->version = 1;
    model_.operator_codes.push_back(std::move(opcode));
  }
  auto op = std::make_unique<fb::OperatorT>();
  op->opcode_index = it->second;
  op->inputs = std::move(inputs);
  op->outputs = std::move(outputs);
  op->builtin_options = std::move(options);
  graph_->operators.push_back(std::move(op));
}

// A reshape view of computed tensor `index`: RESHAPE with the target shape as its input and
// option.
int Builder::reshape(int index, const Shape& target) {
  const std::vector<int32_t> dims = int32_dims(target);
  const int out =
      new_value(target, graph_->tensors[static_cast<std::size_t>(index)]->name + "/reshape");
  offset_of_[out] = offset_of_[index];
  fb::ReshapeOptionsT options;
  options.new_shape = dims;
  fb::BuiltinOptionsUnion u;
  u.Set(std::move(options));
  emit(fb::BuiltinOperator_RESHAPE, {index, int32s(dims)}, {out}, std::move(u));
  return out;
}

std::optional<std::size_t> Builder::sole_reader(const Tensor& t, std::size_t after) const {
  const Storage* storage = t.storage().get();
  auto uses = uses_.find(storage);
  if (uses == uses_.end() || uses->second != 1) return std::nullopt;
  for (std::size_t j = after + 1; j < ops_.size(); ++j) {
    if (!live_[j]) continue;
    for (const Tensor& input : ops_[j].inputs) {
      if (input.defined() && input.storage().get() == storage) {
        if (key_of(input) != key_of(t)) return std::nullopt;  // a view: not fused
        return j;
      }
    }
  }
  return std::nullopt;
}

fb::ActivationFunctionType Builder::fuse_activation(std::size_t i, Tensor& result) {
  const std::optional<std::size_t> j = sole_reader(result, i);
  if (!j) return fb::ActivationFunctionType_NONE;
  const std::string_view name = ops_[*j].op->name;
  fb::ActivationFunctionType fused = fb::ActivationFunctionType_NONE;
  if (name == "relu") fused = fb::ActivationFunctionType_RELU;
  if (name == "relu6") fused = fb::ActivationFunctionType_RELU6;
  if (fused == fb::ActivationFunctionType_NONE) return fused;
  skip_[*j] = true;
  result = ops_[*j].outputs[0];
  return fused;
}

// ---- The op families ----

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
  const int filter = depthwise ? constant(in[1].constant, {},
                                          std::vector<int64_t>{1, kh, kw, outputs}, "depthwise", op)
                               : constant(in[1].constant, {3, 0, 1, 2}, std::nullopt, "ohwi", op);
  Tensor result = op.outputs[0];
  std::size_t last = i;
  std::optional<int> bias = fuse_bias(i, result, outputs, &last);
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
  std::vector<float> scale(channels), shift(channels);
  for (std::size_t c = 0; c < channels; ++c) {
    const double s =
        static_cast<double>(p[0][c]) / std::sqrt(static_cast<double>(p[3][c]) + a.epsilon);
    scale[c] = static_cast<float>(s);
    shift[c] = static_cast<float>(static_cast<double>(p[1][c]) - static_cast<double>(p[2][c]) * s);
  }
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
    tensor_of_[key_of(op.outputs[0])] = in[0].index;
    return;
  }
  static const std::map<std::string_view, fb::BuiltinOperator> kOps = {
      {"relu", fb::BuiltinOperator_RELU},
      {"relu6", fb::BuiltinOperator_RELU6},
      {"sigmoid", fb::BuiltinOperator_LOGISTIC},
      {"tanh", fb::BuiltinOperator_TANH}};
  const int out = define(op.outputs[0], std::string(name));
  emit(kOps.at(name), {in[0].index}, {out});
}

void Builder::binary(std::size_t i, const std::vector<Ref>& in, std::string_view name) {
  const Op& op = ops_[i];
  Tensor result = op.outputs[0];
  const std::vector<int32_t> inputs{operand(in[0], op), operand(in[1], op)};
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

void Builder::reduce_mean(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<ReduceAttrs>("ReduceAttrs");
  std::vector<int32_t> axes;
  for (std::size_t axis = 0; axis < op.inputs[0].shape().rank(); ++axis) {
    if ((a.axis_mask >> axis) & 1u) axes.push_back(static_cast<int32_t>(axis));
  }
  fb::ReducerOptionsT o;
  o.keep_dims = a.keepdims;
  fb::BuiltinOptionsUnion u;
  u.Set(std::move(o));
  const int out = define(op.outputs[0], "Mean");
  emit(fb::BuiltinOperator_MEAN, {in[0].index, int32s(axes)}, {out}, std::move(u));
}

void Builder::pad(const Op& op, const std::vector<Ref>& in) {
  const auto a = op.attributes<PadAttrs>("PadAttrs");
  if (a.value != 0.0) unsupported(op, "pads with a non-zero value; TFLite's PAD pads with zeros");
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
  std::vector<int32_t> inputs;
  for (const Ref& r : in) inputs.push_back(operand(r, op));
  fb::BuiltinOptionsUnion u;
  u.Set(std::move(o));
  const int out = define(op.outputs[0], "Concat");
  emit(fb::BuiltinOperator_CONCATENATION, inputs, {out}, std::move(u));
}

void Builder::convert(std::size_t i, const std::vector<Ref>& in) {
  const Op& op = ops_[i];
  const std::string_view name = op.op->name;
  static const std::set<std::string_view> kMapped = {"conv2d",     "max_pool2d",
                                                     "avg_pool2d", "batch_norm_inference",
                                                     "add",        "sub",
                                                     "mul",        "div",
                                                     "matmul",     "matmul_bias_act",
                                                     "concat",     "relu",
                                                     "relu6",      "sigmoid",
                                                     "tanh",       "copy",
                                                     "softmax",    "reduce_mean",
                                                     "pad"};
  if (kMapped.count(name) == 0) {
    unsupported(op,
                "has no TFLite mapping in the exporter (mapped: conv2d, max_pool2d, avg_pool2d, "
                "batch_norm_inference, add, sub, mul, div, matmul, matmul_bias_act, concat, relu, "
                "relu6, sigmoid, tanh, copy, softmax, reduce_mean, pad, and reshape views)");
  }
  for (const Tensor& t : op.outputs) {
    if (t.dtype() != DType::kF32) {
      unsupported(op, std::string("computes a ") + dtype_name(t.dtype()) +
                          " value; the export writes float32 models");
    }
  }
  if (name == "conv2d") return conv2d(i, in);
  if (name == "max_pool2d" || name == "avg_pool2d") return pool(op, in, name == "max_pool2d");
  if (name == "batch_norm_inference") return batch_norm(i, in);
  if (name == "add" || name == "sub" || name == "mul" || name == "div") return binary(i, in, name);
  if (name == "matmul") return matmul(i, in, false);
  if (name == "matmul_bias_act") return matmul(i, in, true);
  if (name == "concat") return concat(op, in);
  if (!in[0].is_value()) unsupported(op, "reads a constant first input next to computed ones");
  if (name == "softmax") return softmax(op, in);
  if (name == "reduce_mean") return reduce_mean(op, in);
  if (name == "pad") return pad(op, in);
  return unary(op, in, name);
}

// ---- The whole model ----

std::string Builder::build() {
  model_.version = kSchemaVersion;
  model_.description = "trainyard " TRAINYARD_VERSION_STRING;
  model_.buffers.push_back(std::make_unique<fb::BufferT>());  // buffer 0: empty, by convention
  for (const auto& [name, t] : spec_.variables) variables_.emplace(t.storage().get(), name);
  for (const auto& [name, t] : spec_.inputs) {
    if (t.shape().rank() == 0) {
      throw InvalidArgument("TFLite export of " + spec_.model_name + ": the input '" + name +
                            "' is a scalar; inputs have the batch as their first dimension");
    }
    inputs_.emplace(t.storage().get(), name);
    names_.insert(name);
  }
  for (const auto& [name, t] : spec_.outputs) names_.insert(name);
  for (std::size_t i = ops_.size(); i-- > 0;) {
    for (const Tensor& t : ops_[i].outputs) producer_[t.storage().get()] = i;
  }
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
      unsupported(op, "draws random numbers in the forward pass; TFLite cannot give its draws");
    }
    if (all_constant) {  // computed from constants only: Trainyard's result is a constant too
      for (const Tensor& t : op.outputs) folded_[key_of(t)] = t;
      continue;
    }
    convert(i, in);
  }
  scope_.clear();
  for (const auto& [name, t] : spec_.outputs) {
    const Ref r = resolve(t, nullptr);
    if (!r.is_value()) {
      throw Unimplemented("TFLite export of " + spec_.model_name + ": the output '" + name +
                          "' does not depend on the inputs");
    }
    graph_->tensors[static_cast<std::size_t>(r.index)]->name = name;
    graph_->outputs.push_back(r.index);
  }
  if (graph_->inputs.empty()) {
    throw Unimplemented("TFLite export of " + spec_.model_name +
                        ": the outputs depend on none of the inputs");
  }
  graph_->name = spec_.model_name;
  model_.subgraphs.push_back(std::move(graph_));
  flatbuffers::FlatBufferBuilder fbb;
  fb::FinishModelBuffer(fbb, fb::Model::Pack(fbb, &model_));
  return {reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()};
}

}  // namespace

std::string build_tflite_model(const GraphCapture& capture, const GraphSpec& spec) {
  return Builder(capture, spec).build();
}

}  // namespace trainyard::tflite_internal
