#include "compute_precision.h"

#include <iostream>
#include <mutex>
#include <set>

#include "dnnl_context.h"
#include "dnnl_reference_check.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "trainyard/error.h"

namespace trainyard::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kBf16 = memory::data_type::bf16;
constexpr memory::data_type kF32 = memory::data_type::f32;

// oneDNN's name of an ISA, as ONEDNN_MAX_CPU_ISA spells it.
const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "SSE41";
    case dnnl::cpu_isa::avx:
      return "AVX";
    case dnnl::cpu_isa::avx2:
      return "AVX2";
    case dnnl::cpu_isa::avx2_vnni:
      return "AVX2_VNNI";
    case dnnl::cpu_isa::avx512_core:
      return "AVX512_CORE";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "AVX512_CORE_VNNI";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "AVX512_CORE_BF16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "AVX512_CORE_AMX";
    default:
      return "another ISA";
  }
}

// The implementation oneDNN picks for a small bf16 x bf16 -> f32 problem of each kind the
// policy uses: a matmul and a 3x3 convolution.
std::string probe_bf16_primitives() {
  const dnnl::engine& engine = DnnlContext::get().engine();
  const dnnl::matmul::primitive_desc matmul(
      dnnl::matmul::desc(memory::desc({64, 64}, kBf16, Tag::ab),
                         memory::desc({64, 64}, kBf16, Tag::any),
                         memory::desc({64, 64}, kF32, Tag::ab)),
      engine);
  if (is_reference_implementation(matmul.impl_info_str())) {
    return std::string("oneDNN's bf16 matmul resolves to its reference implementation '") +
           matmul.impl_info_str() + "'";
  }
  const dnnl::convolution_forward::primitive_desc conv(
      dnnl::convolution_forward::desc(
          dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
          memory::desc({2, 16, 8, 8}, kBf16, Tag::nhwc),
          memory::desc({16, 16, 3, 3}, kBf16, Tag::any),
          memory::desc({2, 16, 8, 8}, kF32, Tag::nhwc), {1, 1}, {0, 0}, {1, 1}, {1, 1}),
      engine);
  if (is_reference_implementation(conv.impl_info_str())) {
    return std::string("oneDNN's bf16 convolution resolves to its reference implementation '") +
           conv.impl_info_str() + "'";
  }
  return "";
}

}  // namespace

const std::string& bf16_unsupported_reason() {
  static const std::string reason = []() -> std::string {
    try {
      const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
      const auto bits = static_cast<unsigned>(isa);
      const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
      if ((bits & bf16) != bf16) {
        return std::string("this CPU has no AVX-512 BF16 or AMX (oneDNN's ISA here is ") +
               isa_name(isa) + ")";
      }
      return probe_bf16_primitives();
    } catch (const dnnl::error& e) {
      return std::string("oneDNN cannot create a bf16 primitive here: ") + e.what();
    }
  }();
  return reason;
}

ComputePrecision resolve_compute_precision(std::string_view requested) {
  if (requested == "f32") return ComputePrecision::kF32;
  if (requested != "bf16" && requested != "bf16_or_f32") {
    throw InvalidArgument("cpu: option precision (--precision, backend.precision) must be " +
                          std::string(kPrecisionValues) + ", got '" + std::string(requested) + "'");
  }
  const std::string& reason = bf16_unsupported_reason();
  if (reason.empty()) return ComputePrecision::kBf16;
  if (requested == "bf16") {
    throw InvalidArgument(
        "cpu: precision bf16 (--precision=bf16, backend.precision) computes "
        "in bf16 through oneDNN, but " +
        reason +
        "; --precision=bf16_or_f32 computes in f32 there with a warning, "
        "--precision=f32 without one");
  }
  static std::once_flag warned;
  std::call_once(warned, [&] {
    std::cerr << "warning: cpu: precision bf16_or_f32 computes in f32: " << reason << "\n";
  });
  return ComputePrecision::kF32;
}

void warn_bf16_falls_back_to_f32(const char* op, const std::string& problem,
                                 std::string_view implementation) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (!warned.insert(op).second) return;
  std::cerr << "warning: cpu: precision bf16: " << problem
            << " has only oneDNN's reference bf16 implementation '" << implementation
            << "' on this CPU; it computes in f32 (further " << op
            << " problems like it are not reported)\n";
}

}  // namespace trainyard::cpu
