// Helpers for writing kernels (op.h), shared by the CPU and CUDA backends instead of a copy in
// each and available to any backend plugin: dtype dispatch (Tag, DTypeSet, visit_dtype,
// visit_bits), the encoding of a scalar attribute as an element of any dtype (pad's constant,
// one_hot's values) and the shape products that reductions and data movement walk by. Header
// only, host code only: nvcc compiles it into the .cu files' host side; device code keeps its
// own helpers (backends/cuda/kernels.cuh).
//
// Each backend wraps visit_dtype in its own namespace with its device name
// (backends/cpu/kernels_common.h, backends/cuda/kernels.cuh), so an unsupported dtype is an
// Unimplemented error naming the op, the dtype and the device.
#ifndef TRAINYARD_KERNEL_UTILS_H_
#define TRAINYARD_KERNEL_UTILS_H_

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "trainyard/error.h"
#include "trainyard/tensor.h"

namespace trainyard::kernel_utils {

[[noreturn]] inline void unsupported_dtype(const char* op, DType dtype, const char* device) {
  throw Unimplemented(std::string("op ") + op + " has no " + dtype_name(dtype) + " kernel on " +
                      device);
}

// ---------------------------------------------------------------------------------------------
// Dtype dispatch: calls f(Tag<T>{}) with the C++ type of `dtype`, or throws Unimplemented.

template <class T>
struct Tag {
  using type = T;
};

enum class DTypeSet {
  kFloat,    // f32, f64
  kNumeric,  // + i32, i64
  kAll,      // + u8, bool (as uint8_t)
};

template <DTypeSet kSet, class F>
void visit_dtype(const char* op, DType dtype, const char* device, F&& f) {
  switch (dtype) {
    case DType::kF32:
      return f(Tag<float>{});
    case DType::kF64:
      return f(Tag<double>{});
    case DType::kI32:
      if constexpr (kSet != DTypeSet::kFloat) return f(Tag<int32_t>{});
      break;
    case DType::kI64:
      if constexpr (kSet != DTypeSet::kFloat) return f(Tag<int64_t>{});
      break;
    case DType::kU8:
    case DType::kBool:
      if constexpr (kSet == DTypeSet::kAll) return f(Tag<uint8_t>{});
      break;
    default:
      break;
  }
  unsupported_dtype(op, dtype, device);
}

// Calls f(Tag<U>{}) with U the unsigned integer of an element of `dtype` (every dtype has 1, 2,
// 4 or 8 bytes): data movement that copies bits.
template <class F>
void visit_bits(DType dtype, F&& f) {
  switch (dtype_size(dtype)) {
    case 1:
      return f(Tag<uint8_t>{});
    case 2:
      return f(Tag<uint16_t>{});
    case 4:
      return f(Tag<uint32_t>{});
    default:
      return f(Tag<uint64_t>{});
  }
}

// ---------------------------------------------------------------------------------------------
// Scalars of any dtype as an element's bytes (pad's constant, one_hot's on and off values):
// through f32 for bf16 and f16, rounding to nearest even; integers truncate toward zero, bool
// is value != 0.

inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exponent = (x >> 23) & 0xffu;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  const int32_t e = static_cast<int32_t>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t half;
  uint32_t rest;
  uint32_t midpoint;
  if (e <= 0) {  // subnormal half (or zero)
    if (e < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    half = mantissa >> shift;
    rest = mantissa & ((1u << shift) - 1u);
    midpoint = 1u << (shift - 1u);
  } else {
    half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
    rest = mantissa & 0x1fffu;
    midpoint = 0x1000u;
  }
  if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;  // to nearest even
  return static_cast<uint16_t>(sign | half);
}

inline uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);  // to nearest even
  return static_cast<uint16_t>(x >> 16);
}

// The element's bytes in the first dtype_size(dtype) bytes, the rest zero.
using ScalarBytes = std::array<std::byte, 8>;

inline ScalarBytes encode_scalar(DType dtype, double value) {
  ScalarBytes out{};
  auto put = [&out](auto v) { std::memcpy(out.data(), &v, sizeof v); };
  switch (dtype) {
    case DType::kF32:
      put(static_cast<float>(value));
      break;
    case DType::kF64:
      put(value);
      break;
    case DType::kBF16:
      put(float_to_bfloat16(static_cast<float>(value)));
      break;
    case DType::kF16:
      put(float_to_half(static_cast<float>(value)));
      break;
    case DType::kI32:
      put(static_cast<int32_t>(value));
      break;
    case DType::kI64:
      put(static_cast<int64_t>(value));
      break;
    case DType::kU8:
      put(static_cast<uint8_t>(value));
      break;
    case DType::kBool:
      put(static_cast<uint8_t>(value != 0.0 ? 1 : 0));
      break;
  }
  return out;
}

// The same as the element's bits in the low bytes of a uint64_t (little-endian hosts, as the
// backends are), for a kernel that takes the value as an argument.
inline uint64_t encode_scalar_bits(DType dtype, double value) {
  const ScalarBytes bytes = encode_scalar(dtype, value);
  uint64_t bits = 0;
  std::memcpy(&bits, bytes.data(), sizeof bits);
  return bits;
}

// ---------------------------------------------------------------------------------------------
// Reductions and data movement see a tensor as [outer, dim, inner]: the product of the dims
// [begin, end) of `shape`.
inline int64_t product(const Shape& shape, std::size_t begin, std::size_t end) {
  int64_t n = 1;
  for (std::size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

}  // namespace trainyard::kernel_utils

#endif  // TRAINYARD_KERNEL_UTILS_H_
