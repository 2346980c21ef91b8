// The ONNX graph builder of onnx_graph.h, shared by the two files that implement it: internal
// to them. onnx_graph.cc holds the bookkeeping (liveness, resolving a captured tensor to a graph
// value or a constant, names, values in their layouts and batchings, initializers, reshape views
// and the model around the nodes); onnx_ops.cc holds the translators, one per op family, which
// emit an op's nodes through that bookkeeping and define its outputs. The layouts and batchings
// are those onnx_graph.h describes.
#ifndef TRAINYARD_CORE_SRC_ONNX_BUILDER_H_
#define TRAINYARD_CORE_SRC_ONNX_BUILDER_H_

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/captured_tensor.h"
#include "formats/onnx_graph.h"
#include "trainyard/error.h"
#include "trainyard/op.h"
#include "trainyard/proto/onnx.pb.h"
#include "trainyard/tensor.h"

namespace trainyard::onnx_internal {

using Key = export_internal::CapturedKey;
using export_internal::key_of;
using export_internal::live_ops;
using export_internal::LiveOps;

// Throws Unimplemented for a dtype ONNX has no type for.
int32_t onnx_type(DType dtype);

// Graph values are in Trainyard's own layout, or (4-D only) NCHW.
enum class Layout { kAsIs, kNchw };
// Axis a of an NHWC tensor is axis kNchwAxis[a] of its NCHW form; axis j of the NCHW form is
// axis kToNchw[j] of the NHWC one.
inline constexpr std::array<int64_t, 4> kNchwAxis{0, 2, 3, 1};
inline constexpr std::array<int64_t, 4> kToNchw{0, 3, 1, 2};
inline constexpr std::array<int64_t, 4> kToNhwc{0, 2, 3, 1};

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

void attr(onnx::NodeProto* n, const char* name, int64_t value);
void attr(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& values);
void attr_float(onnx::NodeProto* n, const char* name, double value);

// One model's conversion: construct, then build() once. The capture and the spec must outlive it.
class Builder {
 public:
  using NodeProto = onnx::NodeProto;
  using Op = GraphCapture::Op;

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
  std::string floats(const std::vector<float>& values);  // f32 [size]
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
  void crop_and_resize(const Op& op, const std::vector<Ref>& in);
  // crop_and_resize's sample positions along one axis (onnx_ops.cc).
  struct CropAxis {
    std::string inside;  // bool, the samples in [0, size - 1]
    std::string lo, hi;  // i64 pixel indices (0 outside)
    std::string lerp;    // f32 weight of hi
  };
  CropAxis crop_axis(const std::string& lo_edge, const std::string& hi_edge, int64_t size,
                     int64_t count);
  // The batching and steps of a value (of the first value input: kFirst without one).
  std::pair<Batching, int64_t> batching_of_value(const std::vector<Ref>& in) const;

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
  std::string scope_;         // the variable scope of the op being converted, for node names
  std::size_t last_nms_ = 0;  // the last batch_multiclass_non_max_suppression (nms_clip_windows)
};

}  // namespace trainyard::onnx_internal

#endif  // TRAINYARD_CORE_SRC_ONNX_BUILDER_H_
