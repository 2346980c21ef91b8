#include "trainyard/tensor.h"

#include "trainyard/backend.h"
#include "trainyard/core/graph_capture.h"
#include "trainyard/error.h"

namespace trainyard {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kU8:
      return 1;
    case DType::kBool:
      return 1;
  }
  throw InvalidArgument("unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kU8:
      return "u8";
    case DType::kBool:
      return "bool";
  }
  return "unknown";
}

Shape::Shape(std::initializer_list<int64_t> dims)
    : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  if (dims.size() > kMaxTensorRank) {
    throw InvalidArgument("rank " + std::to_string(dims.size()) + " exceeds the maximum of " +
                          std::to_string(kMaxTensorRank));
  }
  rank_ = dims.size();
  for (std::size_t i = 0; i < rank_; ++i) dims_[i] = dims[i];
}

int64_t Shape::dim(std::size_t axis) const {
  if (axis >= rank_) {
    throw InvalidArgument("axis " + std::to_string(axis) + " is out of range for shape " +
                          to_string());
  }
  return dims_[axis];
}

int64_t Shape::num_elements() const {
  bool empty = false;
  for (int64_t d : dims()) {
    if (d < 0) throw InvalidArgument("shape " + to_string() + " has a negative dimension");
    if (d == 0) empty = true;
  }
  if (empty) return 0;  // whatever the other dimensions are
  int64_t n = 1;
  for (int64_t d : dims()) {
    if (__builtin_mul_overflow(n, d, &n)) {
      throw InvalidArgument("shape " + to_string() +
                            " has more elements than an int64 holds (2^63 - 1)");
    }
  }
  return n;
}

std::string Shape::to_string() const {
  std::string out = "[";
  for (std::size_t i = 0; i < rank_; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(dims_[i]);
  }
  return out + "]";
}

Storage::~Storage() = default;

namespace {

// num_elements * dtype_size, or InvalidArgument naming the tensor type when it overflows.
std::size_t checked_size_bytes(const Shape& shape, DType dtype) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(shape.num_elements()), dtype_size(dtype),
                             &bytes)) {
    throw InvalidArgument(std::string(dtype_name(dtype)) + shape.to_string() +
                          " has more bytes than a 64-bit size holds");
  }
  return bytes;
}

}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, std::size_t byte_offset)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      dtype_(dtype),
      byte_offset_(byte_offset) {
  if (storage_ && (byte_offset_ > storage_->size_bytes() ||
                   size_bytes() > storage_->size_bytes() - byte_offset_)) {
    throw InvalidArgument("tensor " + description() + " at byte offset " +
                          std::to_string(byte_offset_) + " does not fit its storage of " +
                          std::to_string(storage_->size_bytes()) + " bytes");
  }
}

Tensor Tensor::empty(Backend& backend, Shape shape, DType dtype) {
  const std::size_t bytes = checked_size_bytes(shape, dtype);
  return Tensor(backend.allocate(bytes), std::move(shape), dtype);
}

Tensor Tensor::from_host(Backend& backend, Shape shape, DType dtype, const void* data,
                         std::size_t bytes) {
  const std::size_t expected = checked_size_bytes(shape, dtype);
  if (bytes != expected) {
    throw InvalidArgument("Tensor::from_host: " + std::string(dtype_name(dtype)) +
                          shape.to_string() + " needs " + std::to_string(expected) +
                          " bytes, got " + std::to_string(bytes));
  }
  Tensor t = empty(backend, std::move(shape), dtype);
  if (bytes > 0) backend.copy_from_host(*t.storage_, t.byte_offset_, data, bytes);
  return t;
}

std::size_t Tensor::size_bytes() const { return checked_size_bytes(shape_, dtype_); }

Backend& Tensor::backend() const {
  if (!storage_) throw InvalidArgument("undefined tensor has no backend");
  return storage_->backend();
}

void Tensor::to_host(void* data, std::size_t bytes) const {
  if (bytes != size_bytes()) {
    throw InvalidArgument("Tensor::to_host: " + description() + " holds " +
                          std::to_string(size_bytes()) + " bytes, destination has " +
                          std::to_string(bytes));
  }
  if (GraphCapture* capture = GraphCapture::active()) capture->record_host_read(*this);
  if (bytes > 0) backend().copy_to_host(*storage_, byte_offset_, data, bytes);
}

void Tensor::check_dtype(DType expected, const char* what) const {
  if (dtype_ != expected) {
    throw InvalidArgument(std::string(what) + ": tensor " + description() + " is " +
                          dtype_name(dtype_) + ", requested " + dtype_name(expected));
  }
}

std::string Tensor::description() const {
  std::string out = std::string(dtype_name(dtype_)) + shape_.to_string();
  if (storage_) out += " on " + storage_->backend().device_name();
  return out;
}

}  // namespace trainyard

namespace trainyard {

Tensor Tensor::with_shape(Shape shape, std::size_t byte_offset) const {
  return Tensor(storage_, std::move(shape), dtype_, byte_offset);
}

}  // namespace trainyard
