// The core's per-backend state, kept outside Backend's layout (which holds only a pointer to
// it): the kernel table indexed by OpDef::index, bound by name on first use, and the default
// stream of host-synchronous backends.
#ifndef TRAINYARD_CORE_SRC_OPS_BACKEND_CORE_H_
#define TRAINYARD_CORE_SRC_OPS_BACKEND_CORE_H_

#include <array>
#include <atomic>

#include "engine/ops/op_def.h"
#include "trainyard/backend.h"
#include "trainyard/stream.h"

namespace trainyard {

// Marks a kernel slot not yet looked up (null means looked up and absent).
void unbound_kernel(Backend&, const KernelArgs&);

struct BackendCoreState {
  explicit BackendCoreState(Backend& backend) : default_stream(backend) {
    for (std::atomic<KernelFn>& k : kernels) k.store(&unbound_kernel, std::memory_order_relaxed);
  }
  SynchronousStream default_stream;
  std::array<std::atomic<KernelFn>, kMaxOps> kernels;
};

struct BackendCore {
  static BackendCoreState& state(Backend& backend) { return *backend.core_; }
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_OPS_BACKEND_CORE_H_
