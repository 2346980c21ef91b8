// The CUDA kernels of the math ops (core/src/ops/math.cc).
#include "kernels.cuh"

namespace trainyard::cuda {

void add_math_kernels(std::vector<KernelRegistration>& table) { (void)table; }

}  // namespace trainyard::cuda
