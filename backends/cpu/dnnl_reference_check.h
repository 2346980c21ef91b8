// Refusing oneDNN's reference implementations. oneDNN falls back to its reference kernels
// ("ref:any") for a problem none of its jit, gemm or brgemm kernels takes on this CPU; those run
// many times slower, so a benchmark that lands on one measures the fallback, not the backend. With
// TRAINYARD_DNNL_REFUSE_REF=1 in the environment (the benchmarks set it) creating such a
// primitive fails, naming the op and its shapes; without it nothing changes and nothing is
// printed.
//
// The check runs where a primitive descriptor is created, which DnnlContext caches: once per
// op, shape and attributes, never in a steady-state step.
#ifndef TRAINYARD_BACKENDS_CPU_DNNL_REFERENCE_CHECK_H_
#define TRAINYARD_BACKENDS_CPU_DNNL_REFERENCE_CHECK_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "oneapi/dnnl/dnnl.hpp"

namespace trainyard::cpu {

// The environment variable that turns the check on; only the value "1" does.
inline constexpr const char* kRefuseReferenceVariable = "TRAINYARD_DNNL_REFUSE_REF";

// True when `implementation` (primitive_desc_base::impl_info_str()) names one of oneDNN's
// reference implementations: "ref:any", "ref_int8:any", ...
bool is_reference_implementation(std::string_view implementation);

// True when TRAINYARD_DNNL_REFUSE_REF is 1, read at each call (tests set and unset it).
bool refuses_reference_implementations();

// "[1024, 1152]".
std::string dims_string(std::initializer_list<int64_t> dims);

// Throws Error: "cpu backend: <problem> resolved to oneDNN's reference implementation
// '<implementation>' (TRAINYARD_DNNL_REFUSE_REF=1): ...".
[[noreturn]] void throw_reference_implementation(const std::string& problem,
                                                 std::string_view implementation);

// Throws Error (throw_reference_implementation) when `pd` resolved to a reference
// implementation and refuses_reference_implementations(); otherwise does nothing. `describe()`
// returns the op and its shapes ("matmul [1024, 1152] x [1152, 3862]") and is called only to
// build the message.
template <class Describe>
void check_not_reference(const dnnl::primitive_desc_base& pd, Describe&& describe) {
  const char* implementation = pd.impl_info_str();
  if (is_reference_implementation(implementation) && refuses_reference_implementations()) {
    throw_reference_implementation(describe(), implementation);
  }
}

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_DNNL_REFERENCE_CHECK_H_
