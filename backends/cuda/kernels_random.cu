// The CUDA kernels of the random ops (core/src/ops/random.cc).
#include "kernels.cuh"

namespace trainyard::cuda {

void add_random_kernels(std::vector<KernelRegistration>& table) { (void)table; }

}  // namespace trainyard::cuda
