#include "dispatch.h"

#include "trainyard/error.h"

namespace trainyard {

void KernelDispatch::fill_table(Backend& backend) {
  std::call_once(backend.dispatch_once_, [&backend] {
    for (const KernelRegistration& k : backend.kernels()) {
      auto index = static_cast<std::size_t>(k.op);
      if (index < kOpCount) backend.dispatch_[index] = k.fn;
    }
  });
}

bool KernelDispatch::has(Backend& backend, OpId op) {
  fill_table(backend);
  return backend.dispatch_[static_cast<std::size_t>(op)] != nullptr;
}

KernelFn KernelDispatch::find(Backend& backend, OpId op) {
  fill_table(backend);
  KernelFn fn = backend.dispatch_[static_cast<std::size_t>(op)];
  if (fn == nullptr) {
    throw Unimplemented(std::string("op ") + op_name(op) + " is not implemented on device " +
                        backend.device_name());
  }
  return fn;
}

}  // namespace trainyard
