// The file name of the loaded library (or executable) that holds an address, for messages that
// name who registered something.
#ifndef TRAINYARD_CORE_SRC_PLATFORM_LIBRARY_OF_H_
#define TRAINYARD_CORE_SRC_PLATFORM_LIBRARY_OF_H_

#include <string>

namespace trainyard {

// "libtrainyard_models.so" for an address in that library's code or data; "an unknown
// library" when the dynamic linker cannot tell.
std::string library_of(const void* address);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_PLATFORM_LIBRARY_OF_H_
