#include "dispatch.h"

#include "trainyard/error.h"

namespace trainyard {

KernelFn KernelDispatch::find(Backend& backend, OpId op) {
  std::call_once(backend.dispatch_once_, [&backend] {
    for (const KernelRegistration& k : backend.kernels()) {
      auto index = static_cast<std::size_t>(k.op);
      if (index < kOpCount) backend.dispatch_[index] = k.fn;
    }
  });
  KernelFn fn = backend.dispatch_[static_cast<std::size_t>(op)];
  if (fn == nullptr) {
    throw Unimplemented(std::string("op ") + op_name(op) + " is not implemented on device " +
                        backend.device_name());
  }
  return fn;
}

}  // namespace trainyard
