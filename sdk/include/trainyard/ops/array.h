// The array ops of ops.h (core/src/engine/ops/array.cc declares and implements them). Shapes and
// data movement; reshape and slice_outer are views sharing their input's storage. Errors as ops.h
// says.
#ifndef TRAINYARD_OPS_ARRAY_H_
#define TRAINYARD_OPS_ARRAY_H_

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The attribute structs of the array family's ops (what their kernels receive as
// KernelArgs::attrs; op.h has the family-neutral ones).
struct SliceAttrs {
  std::array<int64_t, kMaxRank> begin{};
  std::array<int64_t, kMaxRank> size{};
};

struct PermAttrs {
  std::array<int64_t, kMaxRank> perm{};
};

struct PadAttrs {
  std::array<int64_t, kMaxRank> before{};
  std::array<int64_t, kMaxRank> after{};
  double value = 0.0;
};

struct ScatterAttrs {
  int64_t axis = 0;
  std::array<int64_t, kMaxRank> output_shape{};
  std::size_t output_rank = 0;
};

struct OneHotAttrs {
  int64_t depth = 0;
  double on_value = 1.0;
  double off_value = 0.0;
  DType dtype = DType::kF32;
};

struct TopKAttrs {
  int64_t k = 1;
};

struct CastAttrs {
  DType dtype = DType::kF32;
};

namespace ops {

// Shapes and data movement.
TRAINYARD_API Tensor reshape(const Tensor& x, const Shape& shape);  // one dim may be -1; a view
TRAINYARD_API Tensor slice_outer(const Tensor& x, int64_t begin, int64_t size);  // a view
TRAINYARD_API Tensor slice(const Tensor& x, std::vector<int64_t> begin,
                           std::vector<int64_t> size);  // size -1: to the end
TRAINYARD_API Tensor concat(std::span<const Tensor> inputs, int64_t axis);
TRAINYARD_API std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t axis);
TRAINYARD_API Tensor transpose(const Tensor& x, std::vector<int64_t> perm);
TRAINYARD_API Tensor pad(const Tensor& x, std::vector<std::pair<int64_t, int64_t>> paddings,
                         double value = 0.0);
TRAINYARD_API Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis = 0);
TRAINYARD_API Tensor scatter_add(const Tensor& updates, const Tensor& indices, int64_t axis,
                                 const Shape& output_shape);
TRAINYARD_API Tensor one_hot(const Tensor& indices, int64_t depth, double on_value = 1.0,
                             double off_value = 0.0, DType dtype = DType::kF32);
TRAINYARD_API std::pair<Tensor, Tensor> top_k(const Tensor& x, int64_t k);
TRAINYARD_API Tensor cast(const Tensor& x, DType dtype);
TRAINYARD_API Tensor copy(const Tensor& x);
// Copies `value` into `target` (same shape and dtype, same backend), in place.
TRAINYARD_API void assign(Tensor& target, const Tensor& value);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_ARRAY_H_
