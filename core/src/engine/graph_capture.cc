#include "trainyard/core/graph_capture.h"

#include <atomic>
#include <cstring>
#include <string>

#include "trainyard/error.h"

namespace trainyard {
namespace {

// How many threads capture: launches on a process that captures nothing skip the thread-local
// look-up.
std::atomic<int> g_capturing{0};
thread_local GraphCapture* t_capture = nullptr;

}  // namespace

void GraphCapture::Op::check_attributes(const char* type_name, std::size_t size) const {
  if (std::strcmp(op->attrs, type_name) != 0 || size != attrs.size()) {
    throw InvalidArgument(std::string("op '") + op->name + "' has attributes " + op->attrs + " (" +
                          std::to_string(attrs.size()) + " bytes), read as " + type_name + " (" +
                          std::to_string(size) + " bytes)");
  }
}

GraphCapture::GraphCapture() {
  if (t_capture != nullptr) throw Error("this thread already captures a graph");
  t_capture = this;
  g_capturing.fetch_add(1, std::memory_order_relaxed);
}

GraphCapture::~GraphCapture() {
  if (t_capture == this) {
    t_capture = nullptr;
    g_capturing.fetch_sub(1, std::memory_order_relaxed);
  }
}

GraphCapture* GraphCapture::active() {
  if (g_capturing.load(std::memory_order_relaxed) == 0) return nullptr;
  return t_capture;
}

void GraphCapture::record(const OpInfo& op, std::span<const Tensor> inputs,
                          std::span<const Tensor> outputs, const void* attrs) {
  Op recorded;
  recorded.op = &op;
  if (attrs != nullptr && op.attrs_size > 0) {
    const auto* bytes = static_cast<const std::byte*>(attrs);
    recorded.attrs.assign(bytes, bytes + op.attrs_size);
  }
  // Handles without autodiff history: the capture keeps buffers alive, not tapes.
  auto handle = [](const Tensor& t) {
    return t.defined() ? t.with_shape(t.shape(), t.byte_offset()) : Tensor();
  };
  for (const Tensor& t : inputs) recorded.inputs.push_back(handle(t));
  for (const Tensor& t : outputs) recorded.outputs.push_back(handle(t));
  ops_.push_back(std::move(recorded));
}

void GraphCapture::record_host_read(const Tensor& t) {
  host_reads_.push_back(t.with_shape(t.shape(), t.byte_offset()));
}

}  // namespace trainyard
