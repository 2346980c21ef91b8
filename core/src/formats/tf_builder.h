// The TensorFlow graph builder of tf_graph.h, shared by the two files that implement it:
// internal to them. tf_graph.cc holds the bookkeeping (liveness, resolving a captured tensor to a
// graph value or a constant, where each value holds the batch, names, variables and their reads,
// constants, reshape views and the graph around the nodes); tf_ops.cc holds the translators, one
// per op family, which emit an op's TensorFlow nodes through that bookkeeping and define its
// outputs.
#ifndef TRAINYARD_CORE_SRC_TF_BUILDER_H_
#define TRAINYARD_CORE_SRC_TF_BUILDER_H_

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/captured_tensor.h"
#include "formats/tf_graph.h"
#include "trainyard/error.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard::tf_internal {

using Op = GraphCapture::Op;

using Key = export_internal::CapturedKey;
using export_internal::key_of;
using export_internal::live_ops;
using export_internal::LiveOps;

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
// An op's input as the graph sees it: a graph value, or a constant tensor (a variable's value
// when `variable` names one).
struct Ref {
  int value = -1;
  Tensor constant;
  std::string variable;
  bool is_value() const { return value >= 0; }
};

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
  tf::NodeDef* node(const std::string& op_type, std::vector<std::string> inputs,
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
  void crop_and_resize(const Op& op, const std::vector<Ref>& in);
  int reshape(int v, const Shape& target, const Op* op);
  std::string reshaped(const std::string& x, DType dtype, const std::vector<int64_t>& dims);

  const std::vector<Op>& ops_;
  // The last live batch_multiclass_non_max_suppression of the forward (the detections'), which
  // spec_.nms_clip_windows applies to; null when there is none.
  const Op* last_nms_ = nullptr;
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

}  // namespace trainyard::tf_internal

#endif  // TRAINYARD_CORE_SRC_TF_BUILDER_H_
