// Finding a backend's kernel for an op: an array lookup after the first call per op.
#ifndef TRAINYARD_CORE_SRC_DISPATCH_H_
#define TRAINYARD_CORE_SRC_DISPATCH_H_

#include "ops/op_def.h"
#include "trainyard/backend.h"
#include "trainyard/op.h"

namespace trainyard {

struct KernelDispatch {
  // The kernel of `op` on `backend`; Unimplemented naming the op and the device when the
  // backend has none.
  static KernelFn find(Backend& backend, const OpDef& op);
  // The kernel, or null when the backend has none.
  static KernelFn find_or_null(Backend& backend, const OpDef& op);
  static bool has(Backend& backend, const OpDef& op);
};

// Checks a newly created backend's kernel list: every name an op the core declares (or a
// composite kernel, flagged kFusedComposite), none twice. Throws PluginError naming the op,
// the plugin and the core's version.
void check_backend_kernels(Backend& backend);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_DISPATCH_H_
