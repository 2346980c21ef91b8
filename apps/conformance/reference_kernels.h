// What the reference backend's kernel files share (reference_backend.h states the backend's
// rules): tensors read as doubles and written rounded to their dtype, row-major index
// arithmetic, and each family's table of kernels kept in its own file
// (reference_kernels_<family>.cc), which reference_backend.cc joins to its own.
#ifndef TRAINYARD_APPS_CONFORMANCE_REFERENCE_KERNELS_H_
#define TRAINYARD_APPS_CONFORMANCE_REFERENCE_KERNELS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard::conformance::reference {

using Values = std::vector<double>;
using Dims = std::vector<int64_t>;

Dims dims_of(const Tensor& t);
int64_t count(const Dims& dims);
// Row-major: the index of a flat position in dims, and back.
Dims unravel(int64_t flat, const Dims& dims);
int64_t ravel(const Dims& index, const Dims& dims);

// Every element as a double.
Values read(const Tensor& t);
// v rounded to t's dtype (integers truncate toward zero, bool is != 0) and copied into t;
// throws when the counts differ.
void write(const Tensor& t, const Values& v);
// Throws Unimplemented for bf16/f16 inputs, which the reference does not cover.
void check_dtypes(const KernelArgs& a);

// The families whose kernels live in their own files.
std::span<const KernelRegistration> training_kernels();
std::span<const KernelRegistration> detection_kernels();
std::span<const KernelRegistration> image_kernels();
std::span<const KernelRegistration> random_kernels();

}  // namespace trainyard::conformance::reference

#endif  // TRAINYARD_APPS_CONFORMANCE_REFERENCE_KERNELS_H_
