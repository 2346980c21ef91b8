// The CUDA kernels of the nn ops (core/src/ops/nn.cc).
#include "kernels.cuh"

namespace trainyard::cuda {

void add_nn_kernels(std::vector<KernelRegistration>& table) { (void)table; }

}  // namespace trainyard::cuda
