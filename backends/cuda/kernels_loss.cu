// The CUDA kernels of the loss ops (core/src/ops/loss.cc).
#include "kernels.cuh"

namespace trainyard::cuda {

void add_loss_kernels(std::vector<KernelRegistration>& table) { (void)table; }

}  // namespace trainyard::cuda
