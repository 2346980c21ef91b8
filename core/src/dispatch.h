// Finding a backend's kernel for an op: an array lookup after the first call.
#ifndef TRAINYARD_CORE_SRC_DISPATCH_H_
#define TRAINYARD_CORE_SRC_DISPATCH_H_

#include "trainyard/backend.h"
#include "trainyard/op.h"

namespace trainyard {

struct KernelDispatch {
  // The kernel of `op` on `backend`; Unimplemented naming the op and the device when the
  // backend has none.
  static KernelFn find(Backend& backend, OpId op);
  // Whether `backend` has a kernel for `op` (fused ops fall back to composed ones without).
  static bool has(Backend& backend, OpId op);

 private:
  static void fill_table(Backend& backend);
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_DISPATCH_H_
