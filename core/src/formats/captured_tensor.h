// What the ONNX, SavedModel and TFLite graph builders share about the tensors of a captured
// forward pass: the key that tells one captured tensor from another, and the host copy of a
// constant with its dimensions permuted (an NHWC filter written in another layout). Internal to
// the core.
#ifndef TRAINYARD_CORE_SRC_FORMATS_CAPTURED_TENSOR_H_
#define TRAINYARD_CORE_SRC_FORMATS_CAPTURED_TENSOR_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <vector>

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

// Permutes `data` (row-major, `shape`, `element` bytes each) in place so that its dimension i is
// the old dimension perm[i], and `shape` with it.
void permute_dims(std::vector<std::byte>& data, std::vector<int64_t>& shape,
                  const std::vector<int64_t>& perm, std::size_t element);

}  // namespace trainyard::export_internal

#endif  // TRAINYARD_CORE_SRC_FORMATS_CAPTURED_TENSOR_H_
