#include "dnnl_reference_check.h"

#include <cstdlib>

#include "trainyard/error.h"

namespace trainyard::cpu {

bool is_reference_implementation(std::string_view implementation) {
  return implementation.starts_with("ref");
}

bool refuses_reference_implementations() {
  const char* value = std::getenv(kRefuseReferenceVariable);
  return value != nullptr && std::string_view(value) == "1";
}

std::string dims_string(std::initializer_list<int64_t> dims) {
  std::string s = "[";
  for (int64_t d : dims) {
    if (s.size() > 1) s += ", ";
    s += std::to_string(d);
  }
  return s + "]";
}

void throw_reference_implementation(const std::string& problem, std::string_view implementation) {
  throw Error("cpu backend: " + problem + " resolved to oneDNN's reference implementation '" +
              std::string(implementation) + "' (" + kRefuseReferenceVariable +
              "=1): none of oneDNN's optimized kernels takes this problem on this CPU, and the "
              "reference one runs many times slower; ONEDNN_VERBOSE=1 shows the primitive, and "
              "running without " +
              kRefuseReferenceVariable + " accepts it");
}

}  // namespace trainyard::cpu
