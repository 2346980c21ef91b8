// Backend's out-of-line members for the fuzz targets, in place of
// core/src/engine/ops/op_registry.cc's, which would bring every op family and composite with it.
// Backend here has no core state (no kernel table, no default stream): the readers the targets
// cover only allocate storage and copy bytes to and from the host, and anything else aborts as a
// broken harness.
#include <cstddef>
#include <memory>

#include "fuzz_check.h"
#include "trainyard/backend.h"

namespace trainyard {
namespace {

void no_core_state(BackendCoreState*) {}

[[noreturn]] void not_in_fuzz_targets(const char* what) {
  fuzz::check_failed(__FILE__, __LINE__, what, "not available to the fuzz targets");
}

}  // namespace

Backend::Backend() : core_(nullptr, &no_core_state) {}
Backend::~Backend() = default;

Stream& Backend::default_stream() { not_in_fuzz_targets("Backend::default_stream"); }
std::shared_ptr<Stream> Backend::create_stream() { not_in_fuzz_targets("Backend::create_stream"); }
std::shared_ptr<Event> Backend::create_event() { not_in_fuzz_targets("Backend::create_event"); }
void Backend::copy_device_to_device(const Storage&, std::size_t, Storage&, std::size_t, std::size_t,
                                    Stream&) {
  not_in_fuzz_targets("Backend::copy_device_to_device");
}
void Backend::copy_from_host_async(Storage&, std::size_t, const void*, std::size_t, Stream&) {
  not_in_fuzz_targets("Backend::copy_from_host_async");
}
void Backend::copy_to_host_async(const Storage&, std::size_t, void*, std::size_t, Stream&) {
  not_in_fuzz_targets("Backend::copy_to_host_async");
}
std::unique_ptr<HostBuffer> Backend::allocate_host_staging(std::size_t) {
  not_in_fuzz_targets("Backend::allocate_host_staging");
}

}  // namespace trainyard
