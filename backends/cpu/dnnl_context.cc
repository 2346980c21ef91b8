#include "dnnl_context.h"

#include <string>

#include "trainyard/error.h"

namespace trainyard::cpu {

PrimitiveKey& PrimitiveKey::add(int64_t value) {
  if (size_ == kCapacity) {
    throw Error(std::string("cpu: primitive cache key of op ") + op_ + " exceeds " +
                std::to_string(kCapacity) + " values (internal error)");
  }
  values_[size_++] = value;
  return *this;
}

PrimitiveKey& PrimitiveKey::add(std::span<const int64_t> values) {
  for (int64_t value : values) add(value);
  return *this;
}

std::size_t PrimitiveKey::hash() const {
  // FNV-1a over the values.
  uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < size_; ++i) {
    h ^= static_cast<uint64_t>(values_[i]);
    h *= 1099511628211ull;
  }
  return static_cast<std::size_t>(h ^ (h >> 32));
}

DnnlContext::DnnlContext() : engine_(dnnl::engine::kind::cpu, 0) {}

DnnlContext& DnnlContext::get() {
  static DnnlContext* context = new DnnlContext();
  return *context;
}

dnnl::stream& DnnlContext::stream() {
  thread_local dnnl::stream stream(engine_);
  return stream;
}

void* DnnlContext::scratchpad(std::size_t bytes) {
  struct Buffer {
    std::byte* data = nullptr;
    std::size_t size = 0;
    ~Buffer() { ::operator delete[](data, std::align_val_t(64)); }
  };
  thread_local Buffer buffer;
  if (bytes > buffer.size) {
    ::operator delete[](buffer.data, std::align_val_t(64));
    buffer.data = nullptr;
    buffer.size = 0;
    buffer.data = static_cast<std::byte*>(::operator new[](bytes, std::align_val_t(64)));
    buffer.size = bytes;
  }
  return buffer.data;
}

std::size_t DnnlContext::cached_entries() {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.size();
}

void throw_dnnl_error(const char* op, const dnnl::error& error) {
  throw Error(std::string(op) + ": oneDNN failed: " + error.what() + " (status " +
              std::to_string(static_cast<int>(error.status)) + ")");
}

}  // namespace trainyard::cpu
