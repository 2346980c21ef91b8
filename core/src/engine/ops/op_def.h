// How the core declares its ops, and the table they are registered in.
//
// Each op family has one file, core/src/engine/ops/<family>.cc, that starts with the list of its
// ops:
//
//   #define TRAINYARD_MATH_OPS(X) X(kNeg, "neg", 1, 1, NoAttrs, "x -> -x") ...
//     (one X(variable, name, inputs, outputs, attribute struct, summary) per op)
//   TRAINYARD_DEFINE_OP_FAMILY(math, TRAINYARD_MATH_OPS)
//
// which defines one OpDef per op (kNeg, kElu, ...) and the family's table math_ops(). The rest
// of the file implements the ops of ops.h: the checks, the output shapes and dtypes, the kernel
// launch and the gradient rule, naming the OpDef. The op registry (op_registry.cc) numbers
// every op of every family once, at first use; kernels are found by that number. Adding an op
// edits only its family's files (here, the backends' kernels_<family>.cc and the conformance
// cases_<family>.cc); adding a family also adds it to the list in op_registry.cc.
#ifndef TRAINYARD_CORE_SRC_OPS_OP_DEF_H_
#define TRAINYARD_CORE_SRC_OPS_OP_DEF_H_

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include "trainyard/op.h"

namespace trainyard {

class Composite;

struct OpDef {
  OpInfo info;
  // The op's number in the registry (its kernel's slot); assigned once, at registration.
  uint32_t index = std::numeric_limits<uint32_t>::max();
  const Composite* composite = nullptr;  // set for composites

  const char* name() const { return info.name; }
};

// A family's table, as TRAINYARD_DEFINE_OP_FAMILY defines it.
using OpFamilyFn = std::span<OpDef* const> (*)();

#define TRAINYARD_OP_DEF_(var, name, num_inputs, num_outputs, attrs, summary)  \
  OpDef var{{name, kOpFamily, num_inputs, num_outputs, #attrs, summary, false, \
             std::is_empty_v<attrs> ? std::size_t{0} : sizeof(attrs)}};
#define TRAINYARD_OP_PTR_(var, name, num_inputs, num_outputs, attrs, summary) &var,

// Defines the OpDefs of LIST and `std::span<OpDef* const> family##_ops()` returning them, in
// the enclosing namespace.
#define TRAINYARD_DEFINE_OP_FAMILY(family, LIST)             \
  namespace {                                                \
  constexpr const char kOpFamily[] = #family;                \
  LIST(TRAINYARD_OP_DEF_)                                    \
  }                                                          \
  std::span<OpDef* const> family##_ops() {                   \
    static OpDef* const table[] = {LIST(TRAINYARD_OP_PTR_)}; \
    return table;                                            \
  }

// The families, each defined in core/src/engine/ops/<family>.cc.
std::span<OpDef* const> math_ops();
std::span<OpDef* const> reduce_ops();
std::span<OpDef* const> linalg_ops();
std::span<OpDef* const> nn_ops();
std::span<OpDef* const> loss_ops();
std::span<OpDef* const> array_ops();
std::span<OpDef* const> random_ops();
std::span<OpDef* const> training_ops();
std::span<OpDef* const> detection_ops();
std::span<OpDef* const> image_ops();

// The core's composites (fused kernels may exist for them), declared on first use: each
// family that has some provides a function that declares them all (rnn.cc's family has only
// composites).
void declare_loss_composites();
void declare_training_composites();
void declare_rnn_composites();

// Every op's number is assigned before the first kernel lookup; the number of ops and
// composites a process can declare.
inline constexpr uint32_t kMaxOps = 4096;

// Registers a composite's declaration (composite.cc); throws InvalidArgument when the name
// is taken.
const OpDef& register_composite_def(const OpInfo& info, const Composite* composite);
// Withdraws a composite's declaration (its last owner went): find_op_def no longer finds it;
// declaring the name again reuses the OpDef and its number.
void withdraw_composite_def(const OpDef& def);
// The declaration named `name`, or null.
const OpDef* find_op_def(std::string_view name);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_OPS_OP_DEF_H_
