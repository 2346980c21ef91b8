// Finding a backend's kernel for an op: an array lookup after the first call per op.
#ifndef TRAINYARD_CORE_SRC_DISPATCH_H_
#define TRAINYARD_CORE_SRC_DISPATCH_H_

#include "engine/ops/backend_core.h"
#include "engine/ops/op_def.h"
#include "trainyard/backend.h"
#include "trainyard/op.h"

namespace trainyard {

struct KernelDispatch {
  // The kernel of `op` on `backend`; Unimplemented naming the op and the device when the
  // backend has none.
  static KernelFn find(Backend& backend, const OpDef& op) {
    KernelFn fn = find_or_null(backend, op);
    if (fn == nullptr) [[unlikely]]
      throw_unimplemented(backend, op);
    return fn;
  }
  // The kernel, or null when the backend has none: one load after the first call.
  static KernelFn find_or_null(Backend& backend, const OpDef& op) {
    KernelFn fn = BackendCore::state(backend).kernels[op.index].load(std::memory_order_acquire);
    if (fn == &unbound_kernel) [[unlikely]]
      fn = bind(backend, op);
    return fn;
  }
  static bool has(Backend& backend, const OpDef& op) {
    return find_or_null(backend, op) != nullptr;
  }

 private:
  static KernelFn bind(Backend& backend, const OpDef& op);  // looks the name up, once
  [[noreturn]] static void throw_unimplemented(Backend& backend, const OpDef& op);
};

// Checks a newly created backend's kernel list: every name an op the core declares (or a
// composite kernel, flagged kFusedComposite), none twice. Throws PluginError naming the op,
// the plugin and the core's version.
void check_backend_kernels(Backend& backend);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_DISPATCH_H_
