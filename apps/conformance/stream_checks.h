// Stream checks: what every backend must do with streams, events, device and host copies, and
// Tensor::to (sdk/include/trainyard/stream.h, backend.h). Registered beside the op checks.
#ifndef TRAINYARD_APPS_CONFORMANCE_STREAM_CHECKS_H_
#define TRAINYARD_APPS_CONFORMANCE_STREAM_CHECKS_H_

#include "trainyard/core/registry.h"

namespace trainyard::conformance {

void register_stream_checks(const ClassInfo& info);

}  // namespace trainyard::conformance

#endif  // TRAINYARD_APPS_CONFORMANCE_STREAM_CHECKS_H_
