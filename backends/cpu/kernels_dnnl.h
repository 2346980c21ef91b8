// What the oneDNN-backed kernels share (kernels_linalg.cc, kernels_nn.cc): primitive keys,
// tensors wrapped as oneDNN memory, execution on the calling thread's stream, and ceil_div.
#ifndef TRAINYARD_BACKENDS_CPU_KERNELS_DNNL_H_
#define TRAINYARD_BACKENDS_CPU_KERNELS_DNNL_H_

#include <cstdint>
#include <unordered_map>

#include "dnnl_context.h"
#include "kernels.h"

namespace trainyard::cpu {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The cache key of an f32 primitive of `op`; the caller adds shapes and attributes.
inline PrimitiveKey f32_key(const char* op) {
  PrimitiveKey key(op);
  key.add(static_cast<int64_t>(DType::kF32));
  return key;
}

// Wraps a tensor's memory (no copy).
inline dnnl::memory wrap(const dnnl::memory::desc& md, const Tensor& t) {
  return dnnl::memory(md, DnnlContext::get().engine(), data<float>(t));
}

inline dnnl::memory wrap(const dnnl::memory::desc& md, void* ptr) {
  return dnnl::memory(md, DnnlContext::get().engine(), ptr);
}

inline void execute(const dnnl::primitive& primitive,
                    const std::unordered_map<int, dnnl::memory>& args) {
  dnnl::stream& stream = DnnlContext::get().stream();
  primitive.execute(stream, args);
  stream.wait();
}

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_KERNELS_DNNL_H_
