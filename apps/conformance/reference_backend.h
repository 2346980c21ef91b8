// The conformance suite's reference for op values: a host backend ("reference") whose kernels
// are plain loops in double precision written from the op declarations (core/src/engine/ops/*.cc,
// op.h, random.h), sharing no code with the cpu backend or any other. Results are rounded to
// the output dtype once, at the end, so an f32 output is the correctly computed value rounded
// to f32: a backend under test is compared with that, whatever its own summation order or
// vector code.
//
// It covers every op the core declares for f32, f64, i32, i64, u8 and bool (not bf16/f16) and
// registers no fused composite kernels but binary_cross_entropy_grad's (which the suite calls
// by name), so composites run as their composition. Slow by design; the cases are small.
#ifndef TRAINYARD_APPS_CONFORMANCE_REFERENCE_BACKEND_H_
#define TRAINYARD_APPS_CONFORMANCE_REFERENCE_BACKEND_H_

#include "trainyard/backend.h"

namespace trainyard::conformance {

// The reference backend, created once.
Backend& independent_reference();

}  // namespace trainyard::conformance

#endif  // TRAINYARD_APPS_CONFORMANCE_REFERENCE_BACKEND_H_
