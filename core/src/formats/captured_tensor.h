// What the ONNX, SavedModel and TFLite graph builders share about the tensors of a captured
// forward pass: the key that tells one captured tensor from another, which ops the graph's
// outputs depend on, and the host copy of a constant with its dimensions permuted (an NHWC
// filter written in another layout). Internal to the core.
#ifndef TRAINYARD_CORE_SRC_FORMATS_CAPTURED_TENSOR_H_
#define TRAINYARD_CORE_SRC_FORMATS_CAPTURED_TENSOR_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "trainyard/core/graph_capture.h"
#include "trainyard/tensor.h"

namespace trainyard::export_internal {

// How a captured tensor is told apart from the others: its storage, where in it it starts, its
// dimensions and its element type (two views of one storage are different tensors).
struct CapturedKey {
  const Storage* storage = nullptr;
  std::size_t offset = 0;
  std::vector<int64_t> dims;
  DType dtype = DType::kF32;
  auto operator<=>(const CapturedKey&) const = default;
};

CapturedKey key_of(const Tensor& t);

// The ops of a capture (in the order they ran) that the graph's `outputs` depend on: only those
// are exported. live[i] tells op i; uses counts, for each storage, the outputs and live ops'
// inputs that read it. An op that writes a storage `is_variable` names (a variable's
// initializer, run when the model created the variable during the capture) is not live: the
// variable is a value of its own. An op without outputs (it wrote its inputs in place) on a
// storage the outputs need is given to `in_place`, which throws: no graph can show it.
struct LiveOps {
  std::vector<bool> live;
  std::map<const Storage*, int> uses;
};
LiveOps live_ops(const std::vector<GraphCapture::Op>& ops, const std::vector<Tensor>& outputs,
                 const std::function<bool(const Storage*)>& is_variable,
                 const std::function<void(const GraphCapture::Op&)>& in_place);

// Permutes `data` (row-major, `shape`, `element` bytes each) in place so that its dimension i is
// the old dimension perm[i], and `shape` with it.
void permute_dims(std::vector<std::byte>& data, std::vector<int64_t>& shape,
                  const std::vector<int64_t>& perm, std::size_t element);

}  // namespace trainyard::export_internal

#endif  // TRAINYARD_CORE_SRC_FORMATS_CAPTURED_TENSOR_H_
