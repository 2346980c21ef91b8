// What the oneDNN-backed kernels share (kernels_linalg.cc, kernels_nn.cc): primitive keys,
// tensors wrapped as oneDNN memory, scratch memory, execution on the calling thread's stream, the
// check that a new primitive is not one of oneDNN's reference implementations
// (dnnl_reference_check.h), the f32 -> bf16 conversion of the bf16 precision policy
// (compute_precision.h), and ceil_div.
#ifndef TRAINYARD_BACKENDS_CPU_KERNELS_DNNL_H_
#define TRAINYARD_BACKENDS_CPU_KERNELS_DNNL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "compute_precision.h"
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

// Scratch memory from the backend's caching allocator (no system allocation once warm).
inline std::shared_ptr<Storage> scratch(Backend& backend, std::size_t bytes) {
  return backend.allocate(bytes);
}

inline void* scratch_data(const std::shared_ptr<Storage>& storage) {
  return static_cast<CpuStorage*>(storage.get())->data();
}

// True when `backend`'s matmul and convolution kernels compute in bf16 (compute_precision.h).
inline bool computes_in_bf16(const Backend& backend) {
  return static_cast<const CpuBackend&>(backend).precision() == ComputePrecision::kBf16;
}

// Whether to use `pd`, a bf16 primitive of `op` created for the bf16 policy: yes for one of
// oneDNN's optimized implementations. A reference one is refused as check_not_reference does
// (TRAINYARD_DNNL_REFUSE_REF=1), or else the caller creates the f32 primitive instead, with a
// warning once per op.
template <class Describe>
bool use_bf16_implementation(const dnnl::primitive_desc_base& pd, const char* op,
                             Describe&& describe) {
  const char* implementation = pd.impl_info_str();
  if (!is_reference_implementation(implementation)) return true;
  check_not_reference(pd, describe);
  warn_bf16_falls_back_to_f32(op, describe(), implementation);
  return false;
}

// An f32 tensor that a bf16 primitive reads: the reorder from the tensor's f32 layout `from` to
// the primitive's bf16 layout `to` (oneDNN rounds to nearest even).
struct Bf16Operand {
  dnnl::memory::desc from, to;
  dnnl::reorder reorder;
};

inline Bf16Operand bf16_operand(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  const dnnl::engine& engine = DnnlContext::get().engine();
  return {from, to,
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, from, engine, to, dnnl_attr()))};
}

// The f32 memory at `f32` converted to bf16 in scratch storage from `backend`, which `holder`
// keeps until the primitive that reads it has run.
inline dnnl::memory to_bf16(const Bf16Operand& operand, Backend& backend, void* f32,
                            std::shared_ptr<Storage>& holder) {
  holder = scratch(backend, operand.to.get_size());
  dnnl::memory converted = wrap(operand.to, scratch_data(holder));
  execute(operand.reorder, {{DNNL_ARG_FROM, wrap(operand.from, f32)}, {DNNL_ARG_TO, converted}});
  return converted;
}

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_KERNELS_DNNL_H_
