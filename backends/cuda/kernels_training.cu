// The CUDA kernels of the training ops (core/src/ops/training.cc).
#include "kernels.cuh"

namespace trainyard::cuda {

void add_training_kernels(std::vector<KernelRegistration>& table) { (void)table; }

}  // namespace trainyard::cuda
