#include "kernels.h"

namespace trainyard::cpu {

void add_nn_kernels(std::vector<KernelRegistration>& table) { (void)table; }

}  // namespace trainyard::cpu
