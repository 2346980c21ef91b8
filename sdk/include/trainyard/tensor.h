// Tensors: a shape, an element type and a reference to memory that a backend owns.
//
// A Tensor never exposes a host pointer. Its bytes live in a Storage allocated by the Backend
// of its device; reading or writing them from the host goes through that backend's explicit
// copies (Tensor::from_host, Tensor::to_host). This is what lets the same core and plugins run
// on devices whose memory the host cannot address.
//
// Tensors are cheap handles: copying one shares the storage. Element i of a tensor with
// byte_offset() b lives at byte b + i * dtype_size(dtype()) of its storage (row-major,
// contiguous).
#ifndef TRAINYARD_TENSOR_H_
#define TRAINYARD_TENSOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "trainyard/export.h"

namespace trainyard {

class Backend;
struct AutogradMeta;  // defined by the core (autodiff.cc)

enum class DType : uint8_t { kF32, kF64, kBF16, kF16, kI32, kI64, kU8, kBool };

TRAINYARD_API std::size_t dtype_size(DType dtype);
TRAINYARD_API const char* dtype_name(DType dtype);  // "f32", "i64", ...

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kF64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kI32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kU8;
};

// Up to kMaxTensorRank dimensions, stored inline (no allocation).
inline constexpr std::size_t kMaxTensorRank = 8;

class TRAINYARD_API Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims) : Shape(std::span<const int64_t>(dims)) {}

  std::size_t rank() const { return rank_; }
  int64_t dim(std::size_t axis) const;  // throws InvalidArgument when axis >= rank
  int64_t operator[](std::size_t axis) const { return dims_[axis]; }
  int64_t& operator[](std::size_t axis) { return dims_[axis]; }
  std::span<const int64_t> dims() const { return {dims_.data(), rank_}; }
  std::vector<int64_t> to_vector() const { return {dims_.begin(), dims_.begin() + rank_}; }
  int64_t num_elements() const;   // 1 for a scalar; throws InvalidArgument on a negative dim
  std::string to_string() const;  // "[1024, 3862]"

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (std::size_t i = 0; i < a.rank_; ++i) {
      if (a.dims_[i] != b.dims_[i]) return false;
    }
    return true;
  }

 private:
  std::array<int64_t, kMaxTensorRank> dims_{};
  std::size_t rank_ = 0;
};

// ---- Native memory: for code that hands a tensor's bytes to a native library ----
//
// A collective over NCCL or MPI passes the address of a tensor's bytes to a library that reads
// and writes them itself. Storage::native_memory() says what kind of memory that is and where;
// code that needs one kind checks `kind` (never the backend's class or its name) and refuses
// the others. It is not a way to read a tensor from the host: device memory is not host
// memory, and host memory may still be written by work queued on the backend's streams.
enum class DeviceKind : uint32_t {
  kOpaque = 0,  // memory this process cannot address, or a backend that does not say
  kHost = 1,    // host memory: `data` is an ordinary pointer
  kCuda = 2,    // CUDA device memory of the GPU whose ordinal is `device_index`
};

// "opaque", "host", "cuda".
constexpr const char* device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kHost:
      return "host";
    case DeviceKind::kCuda:
      return "cuda";
    case DeviceKind::kOpaque:
      break;
  }
  return "opaque";
}

struct NativeMemory {
  DeviceKind kind = DeviceKind::kOpaque;
  int device_index = 0;  // the CUDA device ordinal for kCuda; 0 otherwise
  void* data = nullptr;  // the first byte; null for kOpaque
};

// A block of device memory. Subclassed by each backend; the host only asks for its size and
// owner. The storage keeps its backend alive.
class TRAINYARD_API Storage {
 public:
  virtual ~Storage();
  virtual std::size_t size_bytes() const = 0;
  virtual Backend& backend() const = 0;
  // Where the bytes are (see NativeMemory above); the default says kOpaque. The address stays
  // valid as long as the storage lives.
  virtual NativeMemory native_memory() const { return {}; }
};

class TRAINYARD_API Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false
  Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, std::size_t byte_offset = 0);

  // Allocates on `backend` and copies `bytes` (exactly num_elements * dtype_size) into it.
  static Tensor from_host(Backend& backend, Shape shape, DType dtype, const void* data,
                          std::size_t bytes);
  template <class T>
  static Tensor from_vector(Backend& backend, Shape shape, const std::vector<T>& values) {
    return from_host(backend, std::move(shape), DTypeOf<T>::value, values.data(),
                     values.size() * sizeof(T));
  }
  // Allocates uninitialised memory on `backend`.
  static Tensor empty(Backend& backend, Shape shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t num_elements() const { return shape_.num_elements(); }
  std::size_t size_bytes() const;
  std::size_t byte_offset() const { return byte_offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  Backend& backend() const;  // throws InvalidArgument on an undefined tensor
  // The native address of element 0: the storage's native_memory() advanced by byte_offset().
  // kOpaque with null data on an undefined tensor or a storage that does not say.
  NativeMemory native_memory() const {
    if (storage_ == nullptr) return {};
    NativeMemory memory = storage_->native_memory();
    if (memory.data != nullptr) memory.data = static_cast<std::byte*>(memory.data) + byte_offset_;
    return memory;
  }

  // Copies the tensor's bytes to `data` (exactly size_bytes() long).
  void to_host(void* data, std::size_t bytes) const;
  // Copies to a vector; throws InvalidArgument naming both dtypes when T does not match.
  template <class T>
  std::vector<T> to_vector() const {
    check_dtype(DTypeOf<T>::value, "to_vector");
    std::vector<T> out(static_cast<std::size_t>(num_elements()));
    to_host(out.data(), out.size() * sizeof(T));
    return out;
  }

  std::string description() const;  // "f32[2, 3] on cpu"

  // This tensor on `device`: itself when it is already there, else a copy (through host
  // staging memory between different backends, complete when it returns). Differentiable:
  // the gradient goes back to this tensor's device.
  Tensor to(Backend& device) const;

  // Autodiff (autodiff.h). A tensor requires a gradient when it is a leaf marked with
  // set_requires_grad(true) (a trainable variable's value), or the result of an op recorded
  // while one of its inputs required it.
  bool requires_grad() const;
  // Marks this tensor as a leaf whose gradient gradients() can compute; only float dtypes.
  void set_requires_grad(bool enabled);
  const std::shared_ptr<AutogradMeta>& autograd_meta() const { return autograd_; }
  void set_autograd_meta(std::shared_ptr<AutogradMeta> meta) { autograd_ = std::move(meta); }
  // The same storage under another shape, at `byte_offset`, with no autodiff history. Used by
  // the core to build views; records nothing.
  Tensor with_shape(Shape shape, std::size_t byte_offset) const;

 private:
  void check_dtype(DType expected, const char* what) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::kF32;
  std::size_t byte_offset_ = 0;
  std::shared_ptr<AutogradMeta> autograd_;
};

}  // namespace trainyard

#endif  // TRAINYARD_TENSOR_H_
