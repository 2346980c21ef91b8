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

std::string library_path_of(const void* address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

std::shared_ptr<void> pin_loaded_library(const std::string& path) {
  static const std::string core = library_path_of(reinterpret_cast<const void*>(&library_of));
  if (path.empty() || path == core || path.find('/') == std::string::npos) return nullptr;
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  return std::shared_ptr<void>(handle, [](void* h) { dlclose(h); });
}

}  // namespace trainyard
