#include "platform/library_of.h"

#include <dlfcn.h>

namespace trainyard {

std::string library_of(const void* address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr ||
      info.dli_fname[0] == '\0') {
    return "an unknown library";
  }
  std::string path = info.dli_fname;
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace trainyard
