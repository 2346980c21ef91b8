// The TFLite subgraph builder of tflite_graph.h, shared by the two files that implement it:
// internal to them. tflite_graph.cc holds the bookkeeping (liveness, resolving a captured tensor
// to a subgraph tensor or a constant, names, buffers, reshape views, fusion of the op that alone
// reads a result, the model around the operators); tflite_ops.cc holds the translators, one per
// op family, which emit an op's operators through that bookkeeping and define its outputs.
#ifndef TRAINYARD_CORE_SRC_TFLITE_BUILDER_H_
#define TRAINYARD_CORE_SRC_TFLITE_BUILDER_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/captured_tensor.h"
#include "formats/tflite_graph.h"
#include "formats/tflite_quantize.h"
#include "tflite_schema_generated.h"
#include "trainyard/error.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard::tflite_internal {

namespace fb = trainyard::tflite;

using Key = export_internal::CapturedKey;
using export_internal::key_of;
using export_internal::live_ops;
using export_internal::LiveOps;

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

// TFLite's type for f32, i32 and bool; nullopt for another dtype.
std::optional<fb::TensorType> tflite_type(DType dtype);

// v as TFLite's int32 (Unimplemented when it does not fit).
int32_t narrow(int64_t v);
std::vector<int32_t> int32_dims(const Shape& shape);
// "[1, 96, 4]", for messages.
std::string dims_text(const std::vector<int32_t>& dims);

class Builder {
 public:
  using Op = GraphCapture::Op;

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
  // `t` (and reshape views of its storage) stands for subgraph tensor `index`.
  void alias(const Tensor& t, int index);
  int new_value(const Shape& shape, const std::string& name,
                fb::TensorType type = fb::TensorType_FLOAT32);
  int constant(const Constant& c, const std::vector<int64_t>& perm,
               std::optional<std::vector<int64_t>> dims, const std::string& form, const Op& op);
  int floats(const std::string& name, const std::vector<int64_t>& dims,
             const std::vector<float>& values);
  // An int32 constant of `shape` (1-D when empty).
  int int32s(const std::vector<int32_t>& values, std::vector<int32_t> shape = {});
  int explicit_pad(int x, const Shape& shape, const std::vector<int32_t>& pads);
  std::optional<int> fuse_bias(std::size_t i, Tensor& result, int64_t channels, std::size_t* last);
  // The inference batch norm that alone reads `result` (op `last`'s output) over its `channels`,
  // when its parameters are constants: skipped, `result` and `last` become its output and op.
  // Returns its per-channel {scale, shift} (batch_norm_scale_shift).
  std::optional<std::pair<std::vector<double>, std::vector<double>>> fold_batch_norm(
      Tensor& result, int64_t channels, std::size_t* last);
  int operand(const Ref& r, const Op& op);
  void emit(fb::BuiltinOperator code, std::vector<int32_t> inputs, std::vector<int32_t> outputs,
            fb::BuiltinOptionsUnion options = {});
  // A CUSTOM operator named `custom_code` with flexbuffer `options`.
  void emit_custom(const std::string& custom_code, std::vector<int32_t> inputs,
                   std::vector<int32_t> outputs, std::vector<uint8_t> options);
  uint32_t opcode_index(fb::BuiltinOperator code, const std::string& custom_code);
  int reshape(int index, const Shape& target);

  // Computed tensors' first dimension over the batch, with shape_signature -1 there
  // (GraphSpec::batch).
  void make_batch_dynamic();

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
  void reduce(const Op& op, const std::vector<Ref>& in, std::string_view name);
  void slice(const Op& op, const std::vector<Ref>& in);
  void cast(const Op& op, const std::vector<Ref>& in);
  void compare(const Op& op, const std::vector<Ref>& in, std::string_view name);
  void select(const Op& op, const std::vector<Ref>& in);
  void pad(const Op& op, const std::vector<Ref>& in);
  void concat(const Op& op, const std::vector<Ref>& in);
  void fake_quant(const Op& op, const std::vector<Ref>& in);
  // The range of a fake quantization whose min and max are constants.
  QuantRange fake_quant_range(const Op& op, const std::vector<Ref>& in) const;
  // GraphSpec::detection_postprocess after the outputs `raw` (the box encodings, the class
  // scores): returns the subgraph's outputs, its four.
  std::vector<int32_t> detection_postprocess(const std::vector<int32_t>& raw);

  const std::vector<Op>& ops_;
  const GraphSpec& spec_;
  fb::ModelT model_;
  std::unique_ptr<fb::SubGraphT> graph_ = std::make_unique<fb::SubGraphT>();
  std::map<std::pair<fb::BuiltinOperator, std::string>, uint32_t> opcodes_;

  std::vector<bool> live_, skip_;
  std::map<const Storage*, int> uses_;  // by live ops and the outputs
  std::map<Key, int> tensor_of_;
  std::map<const Storage*, int> first_of_storage_;       // the first tensor made in a storage
  std::map<int, std::size_t> offset_of_;                 // a computed tensor's byte offset
  std::map<const Storage*, std::size_t> alias_offsets_;  // the byte offset of an alias()
  std::map<const Storage*, std::string> inputs_;         // graph inputs, by storage
  std::map<const Storage*, std::string> variables_;
  std::map<Key, Tensor> folded_;
  std::vector<int> values_;  // the computed tensors (and inputs), by index
  std::map<std::pair<Key, std::string>, int> constants_;  // (tensor, form) -> tensor index
  std::map<std::pair<std::vector<int32_t>, std::vector<int32_t>>, int> int32_constants_;
  std::map<const Storage*, std::size_t> producer_;  // the first op that wrote a storage
  std::set<std::string> names_;
  std::size_t constant_bytes_ = 0;
  std::string scope_;  // the variable scope of the op being converted, for tensor names
  // With GraphSpec::uint8: the fake quantizations' ranges, of the folded results of those with
  // constant inputs (the weights', by storage: views of them, as a depthwise filter reshaped for
  // the grouped convolution, lie on the same grid) and by tensor index (computed values, weight
  // constants).
  std::map<const Storage*, QuantRange> folded_ranges_;
  std::map<int, QuantRange> ranges_;
};

}  // namespace trainyard::tflite_internal

#endif  // TRAINYARD_CORE_SRC_TFLITE_BUILDER_H_
