// What the oneDNN-backed kernels share (kernels_linalg.cc, kernels_nn.cc): primitive keys,
// tensors wrapped as oneDNN memory, execution on the calling thread's stream, the check that a
// new primitive is not one of oneDNN's reference implementations (dnnl_reference_check.h), and
// ceil_div.
#ifndef TRAINYARD_BACKENDS_CPU_KERNELS_DNNL_H_
#define TRAINYARD_BACKENDS_CPU_KERNELS_DNNL_H_

#include <cstdint>
#include <unordered_map>

#include "dnnl_context.h"
#include "dnnl_reference_check.h"
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

// The attributes every primitive is created with: `attr` with a user-managed scratchpad, which
// execute() provides from the executing thread's buffer.
inline dnnl::primitive_attr dnnl_attr(dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Runs `primitive` on the calling thread's stream and waits, giving it that thread's scratchpad.
inline void execute(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory> args) {
  DnnlContext& context = DnnlContext::get();
  const dnnl_memory_desc_t* md =
      dnnl_primitive_desc_query_md(primitive.get_primitive_desc(), dnnl_query_scratchpad_md, 0);
  if (md != nullptr) {
    dnnl::memory::desc desc(*md);
    const std::size_t bytes = desc.get_size();
    if (bytes > 0) {
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory(desc, context.engine(), context.scratchpad(bytes)));
    }
  }
  dnnl::stream& stream = context.stream();
  primitive.execute(stream, args);
  stream.wait();
}

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_KERNELS_DNNL_H_
