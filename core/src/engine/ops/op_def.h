// How the core declares its ops, and the table they are registered in.
//
// The op families are listed once, in sdk/include/trainyard/ops/families.h
// (TRAINYARD_OP_FAMILIES). Each family has one file, core/src/engine/ops/<family>.cc, that
// starts with the list of its ops:
//
//   #define TRAINYARD_MATH_OPS(X) X(kNeg, "neg", 1, 1, NoAttrs, "x -> -x") ...
//     (one X(variable, name, inputs, outputs, attribute struct, summary) per op)
//   TRAINYARD_DEFINE_OP_FAMILY(math, TRAINYARD_MATH_OPS)
//
// which defines one OpDef per op (kNeg, kElu, ...) and the family's table math_ops(). The rest
// of the file implements the ops of ops/<family>.h: the checks, the output shapes and dtypes,
// the kernel launch and the gradient rule, naming the OpDef. The op registry (op_registry.cc)
// numbers every op of every listed family once, at first use, in the list's order; kernels are
// found by that number.
//
// Adding an op edits only its family's files: this core file, sdk ops/<family>.h, the
// backends' kernels_<family>.cc and the conformance cases_<family>.cc. Adding a family adds
// one row to families.h and the family's files; the declarations below, the registry's table,
// the backends' registration calls, the reference backend, the conformance case list and the
// CMake source lists follow from the row (docs/adding_ops.md).
#ifndef TRAINYARD_CORE_SRC_OPS_OP_DEF_H_
#define TRAINYARD_CORE_SRC_OPS_OP_DEF_H_

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include "trainyard/op.h"
#include "trainyard/ops/families.h"

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

// Each listed family's table (families that declare ops) and the function declaring its
// composites (families whose composites are declared up front; rnn.cc's family has only
// composites). composites_on_use families (mixture.cc) declare each composite the first time
// it is called.
#define TRAINYARD_OP_FAMILY_DECLS_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF_OPS(core, std::span<OpDef* const> family##_ops();)         \
  TRAINYARD_OP_FAMILY_IF_DECLARES(core, void declare_##family##_composites();)
TRAINYARD_OP_FAMILIES(TRAINYARD_OP_FAMILY_DECLS_)
#undef TRAINYARD_OP_FAMILY_DECLS_

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
