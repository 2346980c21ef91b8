// The CUDA kernels of the array ops (core/src/ops/array.cc).
#include "kernels.cuh"

namespace trainyard::cuda {

void add_array_kernels(std::vector<KernelRegistration>& table) { (void)table; }

}  // namespace trainyard::cuda
