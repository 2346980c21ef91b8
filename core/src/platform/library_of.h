// The file name of the loaded library (or executable) that holds an address, for messages that
// name who registered something.
#ifndef TRAINYARD_CORE_SRC_PLATFORM_LIBRARY_OF_H_
#define TRAINYARD_CORE_SRC_PLATFORM_LIBRARY_OF_H_

#include <memory>
#include <string>

namespace trainyard {

// "libtrainyard_models.so" for an address in that library's code or data; "an unknown
// library" when the dynamic linker cannot tell.
std::string library_of(const void* address);

// The path the dynamic linker loaded the library (or executable) holding `address` from; empty
// when it cannot tell.
std::string library_path_of(const void* address);

// A hold on the loaded library at `path`: while it lives, the library stays mapped (dlopen with
// RTLD_NOLOAD, so nothing is loaded anew), even when its loader closes it; releasing the last
// hold unloads it then. Null when `path` is empty, is this core's own library or the main
// program, or is not loaded.
std::shared_ptr<void> pin_loaded_library(const std::string& path);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_PLATFORM_LIBRARY_OF_H_
