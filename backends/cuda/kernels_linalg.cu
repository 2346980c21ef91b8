// The CUDA kernels of the linalg ops (core/src/ops/linalg.cc).
#include "kernels.cuh"

namespace trainyard::cuda {

void add_linalg_kernels(std::vector<KernelRegistration>& table) { (void)table; }

}  // namespace trainyard::cuda
