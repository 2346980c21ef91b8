// What the reference backend's kernel files share (reference_backend.h states the backend's
// rules): tensors read as doubles and written rounded to their dtype, row-major index
// arithmetic, and each family's table of kernels, which reference_backend.cc joins.
#ifndef TRAINYARD_APPS_CONFORMANCE_REFERENCE_KERNELS_H_
#define TRAINYARD_APPS_CONFORMANCE_REFERENCE_KERNELS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/op.h"
#include "trainyard/ops.h"  // the families' attribute structs
#include "trainyard/ops/families.h"
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

// Each family's table of kernels, for every family whose row in TRAINYARD_OP_FAMILIES
// (trainyard/ops/families.h) says the reference has kernels: reference_backend.cc defines the
// math, reduce, linalg, nn, loss and array families', reference_kernels_<family>.cc the others'.
#define TRAINYARD_REFERENCE_KERNELS_DECL_(family, core, cpu, cuda, ref, conformance) \
  TRAINYARD_OP_FAMILY_IF(ref, std::span<const KernelRegistration> family##_kernels();)
TRAINYARD_OP_FAMILIES(TRAINYARD_REFERENCE_KERNELS_DECL_)
#undef TRAINYARD_REFERENCE_KERNELS_DECL_

}  // namespace trainyard::conformance::reference

#endif  // TRAINYARD_APPS_CONFORMANCE_REFERENCE_KERNELS_H_
