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
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_DISPATCH_H_
