#include "formats/tflite_graph.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>

#include "formats/tflite_builder.h"
#include "trainyard/abi.h"

namespace trainyard::tflite_internal {
namespace {

using Op = GraphCapture::Op;

constexpr uint32_t kSchemaVersion = 3;
// What the constants may take of a flatbuffer's 2 GiB (its offsets are 32-bit), leaving room for
// the rest.
constexpr std::size_t kMaxConstantBytes = std::size_t{2000} << 20;

}  // namespace

std::optional<fb::TensorType> tflite_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return fb::TensorType_FLOAT32;
    case DType::kI32:
      return fb::TensorType_INT32;
    case DType::kBool:
      return fb::TensorType_BOOL;
    default:
      return std::nullopt;
  }
}

int32_t narrow(int64_t v) {
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    throw Unimplemented("TFLite export: the size " + std::to_string(v) +
                        " does not fit TFLite's int32");
  }
  return static_cast<int32_t>(v);
}

std::string dims_text(const std::vector<int32_t>& dims) {
  std::string out;
  for (int32_t d : dims) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "[" + out + "]";
}

std::vector<int32_t> int32_dims(const Shape& shape) {
  std::vector<int32_t> dims;
  for (int64_t d : shape.dims()) dims.push_back(narrow(d));
  return dims;
}

// ---- Liveness and resolution ----

void Builder::mark_live() {
  std::vector<Tensor> outputs;
  for (const auto& [name, t] : spec_.outputs) outputs.push_back(t);
  LiveOps l = live_ops(
      ops_, outputs, [&](const Storage* s) { return variables_.count(s) > 0; },
      [&](const Op& op) { unsupported(op, "writes its inputs in place during the forward pass"); });
  live_ = std::move(l.live);
  uses_ = std::move(l.uses);
  skip_.assign(ops_.size(), false);
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
        if (input.dtype() != DType::kF32 && input.dtype() != DType::kI32) {
          throw Unimplemented("TFLite export of " + spec_.model_name + ": the input '" + name +
                              "' is " + dtype_name(input.dtype()) +
                              "; only f32 and i32 inputs are written");
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
    const auto alias = alias_offsets_.find(storage);
    const std::size_t offset =
        alias != alias_offsets_.end() ? alias->second : offset_of_[it->second];
    if (t.byte_offset() != offset || t.num_elements() != count ||
        tflite_type(t.dtype()) != source.type) {
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
  const std::optional<fb::TensorType> type = tflite_type(t.dtype());
  if (!type) {
    throw Unimplemented("TFLite export of " + spec_.model_name + ": the value '" + name + "' is " +
                        dtype_name(t.dtype()) + "; f32, i32 and bool values are written");
  }
  const int index = add_tensor(unique(name), int32_dims(t.shape()), *type, {});
  values_.push_back(index);
  offset_of_[index] = t.byte_offset();
  tensor_of_[key_of(t)] = index;
  first_of_storage_.emplace(t.storage().get(), index);
  return index;
}

void Builder::alias(const Tensor& t, int index) {
  tensor_of_[key_of(t)] = index;
  if (first_of_storage_.emplace(t.storage().get(), index).second) {
    alias_offsets_[t.storage().get()] = t.byte_offset();
  }
}

int Builder::new_value(const Shape& shape, const std::string& name, fb::TensorType type) {
  const int index =
      add_tensor(unique(scope_.empty() ? name : scope_ + "/" + name), int32_dims(shape), type, {});
  values_.push_back(index);
  return index;
}

// The constant, permuted by `perm` (none when empty) and given `dims` (its permuted shape when
// none), as a tensor named by its variable ("const" for others; "<name>/<form>" when the variable
// is used in a second form). f32, i32 or bool.
int Builder::constant(const Constant& c, const std::vector<int64_t>& perm,
                      std::optional<std::vector<int64_t>> dims, const std::string& form,
                      const Op& op) {
  const auto cache_key = std::make_pair(key_of(c.tensor), form);
  if (auto it = constants_.find(cache_key); it != constants_.end()) return it->second;
  const Tensor& t = c.tensor;
  const std::optional<fb::TensorType> type = tflite_type(t.dtype());
  if (!type) {
    unsupported(op, std::string("reads the ") + dtype_name(t.dtype()) + " constant " +
                        t.description() + "; f32, i32 and bool constants are written");
  }
  std::vector<std::byte> data(t.size_bytes());
  t.to_host(data.data(), data.size());
  std::vector<int64_t> shape = t.shape().to_vector();
  if (!perm.empty()) {
    export_internal::permute_dims(data, shape, perm, dtype_size(t.dtype()));
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
  constant_bytes_ += bytes.size();
  if (constant_bytes_ > kMaxConstantBytes) {
    throw Unimplemented("TFLite export of " + spec_.model_name + ": the weights exceed " +
                        std::to_string(kMaxConstantBytes >> 20) +
                        " MiB; a TFLite flatbuffer holds less than 2 GiB");
  }
  const int index = add_tensor(unique(name), shape32, *type, std::move(bytes));
  constants_[cache_key] = index;
  if (auto range = folded_ranges_.find(t.storage().get()); range != folded_ranges_.end()) {
    ranges_[index] = range->second;  // a weight's fake quantization, on its grid
  }
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

uint32_t Builder::opcode_index(fb::BuiltinOperator code, const std::string& custom_code) {
  auto [it, added] = opcodes_.emplace(std::make_pair(code, custom_code),
                                      static_cast<uint32_t>(model_.operator_codes.size()));
  if (added) {
    auto opcode = std::make_unique<fb::OperatorCodeT>();
    opcode->builtin_code = code;
    // Readers take the larger of the two; the byte field holds codes below 127.
    opcode->deprecated_builtin_code = static_cast<int8_t>(std::min<int32_t>(code, 127));
    opcode->custom_code = custom_code;
    opcode->version = 1;
    model_.operator_codes.push_back(std::move(opcode));
  }
  return it->second;
}

void Builder::emit(fb::BuiltinOperator code, std::vector<int32_t> inputs,
                   std::vector<int32_t> outputs, fb::BuiltinOptionsUnion options) {
  auto op = std::make_unique<fb::OperatorT>();
  op->opcode_index = opcode_index(code, "");
  op->inputs = std::move(inputs);
  op->outputs = std::move(outputs);
  op->builtin_options = std::move(options);
  graph_->operators.push_back(std::move(op));
}

void Builder::emit_custom(const std::string& custom_code, std::vector<int32_t> inputs,
                          std::vector<int32_t> outputs, std::vector<uint8_t> options) {
  auto op = std::make_unique<fb::OperatorT>();
  op->opcode_index = opcode_index(fb::BuiltinOperator_CUSTOM, custom_code);
  op->inputs = std::move(inputs);
  op->outputs = std::move(outputs);
  op->custom_options = std::move(options);
  op->custom_options_format = fb::CustomOptionsFormat_FLEXBUFFERS;
  graph_->operators.push_back(std::move(op));
}

// A reshape view of computed tensor `index`: RESHAPE with the target shape as its input and
// option, the first dimension (the batch's rows, as every computed tensor's) as -1.
int Builder::reshape(int index, const Shape& target) {
  std::vector<int32_t> dims = int32_dims(target);
  if (!dims.empty() && dims[0] > 0 && dims[0] % spec_.batch == 0) dims[0] = -1;
  const fb::TensorT& source = *graph_->tensors[static_cast<std::size_t>(index)];
  const int out = new_value(target, source.name + "/reshape", source.type);
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

// ---- The whole model ----

void Builder::make_batch_dynamic() {
  for (int index : values_) {
    fb::TensorT& t = *graph_->tensors[static_cast<std::size_t>(index)];
    if (t.shape.empty() || t.shape[0] <= 0 || t.shape[0] % spec_.batch != 0) {
      throw Unimplemented("TFLite export of " + spec_.model_name + ": the value '" + t.name + "' " +
                          dims_text(t.shape) + " does not keep the batch (" +
                          std::to_string(spec_.batch) +
                          " in the captured pass) in its first dimension, the model's dynamic "
                          "one");
    }
    t.shape[0] /= static_cast<int32_t>(spec_.batch);
    t.shape_signature = t.shape;
    t.shape_signature[0] = -1;
  }
}

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
      if (spec_.uint8 && std::string_view(op.op->name) == "fake_quant_with_min_max_vars") {
        folded_ranges_[op.outputs[0].storage().get()] = fake_quant_range(op, in);
      }
      continue;
    }
    convert(i, in);
  }
  scope_.clear();
  std::vector<int32_t> outputs;
  for (const auto& [name, t] : spec_.outputs) {
    const Ref r = resolve(t, nullptr);
    if (!r.is_value()) {
      throw Unimplemented("TFLite export of " + spec_.model_name + ": the output '" + name +
                          "' does not depend on the inputs");
    }
    graph_->tensors[static_cast<std::size_t>(r.index)]->name = name;
    outputs.push_back(r.index);
  }
  if (graph_->inputs.empty()) {
    throw Unimplemented("TFLite export of " + spec_.model_name +
                        ": the outputs depend on none of the inputs");
  }
  if (spec_.dynamic_batch) make_batch_dynamic();
  graph_->outputs = spec_.detection_postprocess ? detection_postprocess(outputs) : outputs;
  graph_->name = spec_.model_name;
  model_.subgraphs.push_back(std::move(graph_));
  if (spec_.uint8) quantize_uint8(model_, ranges_, *spec_.uint8, spec_.model_name);
  flatbuffers::FlatBufferBuilder fbb;
  fb::FinishModelBuffer(fbb, fb::Model::Pack(fbb, &model_));
  return {reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()};
}

std::string build_tflite_model(const GraphCapture& capture, const GraphSpec& spec) {
  return Builder(capture, spec).build();
}

}  // namespace trainyard::tflite_internal
