// The cpu backend's compute precision policy, its option `precision` (the host's --precision,
// the config's backend.precision), as Keras's `mixed_bfloat16` policy and PyTorch's CPU autocast:
//
//  - "f32" (the default): every kernel computes in its tensors' dtype.
//  - "bf16": matmul, matmul_bias_act, conv2d, conv2d_backward_input and conv2d_backward_filter
//    take and give f32 tensors as before, but convert their two multiplied inputs to bf16
//    (oneDNN reorders, rounding to nearest even) and multiply in bf16 with f32 accumulation,
//    bias, activation and result; so do the products inside the recurrent cells' fused kernels
//    (lstm_sequence, gru_sequence and their gradients: each step's state times the recurrent
//    kernel, converted once per sequence, and the kernels' gradients). Everything else stays f32: variables (the master weights),
//    optimizer slots, losses, reductions, batch norm and its statistics, and so checkpoints.
//    Each product then carries a relative error up to 2^-8 per bf16 input, 2^-7 in all (bf16
//    keeps 8 significant bits), on top of f32 accumulation. Needs a CPU on which oneDNN runs
//    bf16 natively (AVX-512 BF16, which AMX CPUs have too); creating the backend elsewhere
//    throws InvalidArgument naming the option and the flag. A problem for which oneDNN has only
//    its reference bf16 kernel computes in f32 (one warning per op on stderr), or is refused
//    with TRAINYARD_DNNL_REFUSE_REF=1 as any reference implementation is
//    (dnnl_reference_check.h).
//  - "bf16_or_f32": "bf16" where the CPU has it, else "f32" with one warning on stderr.
//
// f64 kernels, and the own loops of zero-sized problems, ignore the policy.
#ifndef TRAINYARD_BACKENDS_CPU_COMPUTE_PRECISION_H_
#define TRAINYARD_BACKENDS_CPU_COMPUTE_PRECISION_H_

#include <string>
#include <string_view>

namespace trainyard::cpu {

enum class ComputePrecision { kF32, kBf16 };

// The option's declared values, for its help and errors.
inline constexpr const char* kPrecisionValues = "f32, bf16 or bf16_or_f32";

// Why oneDNN cannot compute in bf16 natively on this CPU, or "" when it can: the effective ISA
// (which ONEDNN_MAX_CPU_ISA may lower) lacks AVX-512 BF16, or oneDNN's bf16 matmul or
// convolution resolves to a reference implementation. Computed once per process.
const std::string& bf16_unsupported_reason();

// The policy for the option's value `requested`. Throws InvalidArgument for a value other than
// kPrecisionValues, and for "bf16" on a CPU without bf16 (naming the option, the flag, the reason
// and "bf16_or_f32"); "bf16_or_f32" there warns once per process on stderr and gives kF32.
ComputePrecision resolve_compute_precision(std::string_view requested);

// Says on stderr, once per op and process, that `problem` ("conv2d input [..] ...") has only
// oneDNN's reference bf16 implementation `implementation` and computes in f32.
void warn_bf16_falls_back_to_f32(const char* op, const std::string& problem,
                                 std::string_view implementation);

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_COMPUTE_PRECISION_H_
