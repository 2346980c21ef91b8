// The kernel interface backends implement, the attribute structs shared by several op families
// (each family's own are in trainyard/ops/<family>.h), and the list of ops the core declares.
//
// An op is declared once, in its family's file in the core (core/src/engine/ops/<family>.cc): its
// name, inputs, outputs, attribute struct, a one-line summary, the checks on its inputs, the
// shape and dtype of its outputs and its gradient written in other ops. `trainyard plugins
// describe cpu` and declared_ops() list them. A backend registers kernels by op name
// (Backend::kernels()); the core binds them to its own op table, which lives outside every SDK
// type, so adding an op to the core changes no layout here and a backend built before the op
// existed still loads (the op is then Unimplemented on its device). A kernel registered for a
// name the core does not declare is refused when the backend is created.
//
// Before calling a kernel the core has checked every input, computed the output shapes and
// dtypes and allocated the outputs on the kernel's backend; a kernel only computes. Every
// tensor a kernel sees is contiguous and row-major, starting at its byte_offset() in its
// storage, and lives on the kernel's own backend. A kernel runs on KernelArgs::stream: a
// backend with asynchronous streams queues the work there and returns.
//
// Layout conventions (TensorFlow's): images are NHWC; conv2d filters are
// [filter_height, filter_width, in_channels / groups, out_channels]; batch norm normalizes the
// last axis.
#ifndef TRAINYARD_OP_H_
#define TRAINYARD_OP_H_

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/tensor.h"

namespace trainyard {

class Backend;
class Stream;

inline constexpr std::size_t kMaxRank = kMaxTensorRank;

// The attribute structs of several families; each family's own are in its header,
// trainyard/ops/<family>.h (included by trainyard/ops.h).

// The attribute struct of ops that have none.
struct NoAttrs {};

// Up to two scalars (math's elementwise ops with parameters, the loss composites' epsilon).
struct ScalarAttrs {
  double a = 0.0;
  double b = 0.0;
};

// One axis (the reduce and array families).
struct AxisAttrs {
  int64_t axis = 0;  // already non-negative
};

// What a kernel receives. `attrs` points to the op's attribute struct (OpInfo::attrs names
// it; null for ops without attributes), `attrs_size` bytes of plain data that live only during
// the call: a kernel that runs its work later copies them. Outputs are allocated and have
// their final shapes. `op` is the op's name, for error messages. `stream` is where the
// kernel's work goes (never null when the core calls a kernel).
struct KernelArgs {
  std::span<const Tensor> inputs;
  std::span<Tensor> outputs;
  const void* attrs = nullptr;
  Stream* stream = nullptr;
  const char* op = "";
  std::size_t attrs_size = 0;

  template <class T>
  const T& get_attrs() const {
    return *static_cast<const T*>(attrs);
  }
};

// A kernel throws Unimplemented for a dtype it does not support, naming the op and dtype.
using KernelFn = void (*)(Backend& backend, const KernelArgs& args);

// Flags in KernelRegistration::flags.
enum KernelFlags : uint32_t {
  // The kernel computes a composite (composite.h) in one pass instead of its composition.
  // Composites may be declared by plugins loaded after the backend, so the core binds such a
  // kernel when the composite is declared and never refuses its name.
  kFusedComposite = 1u << 0,
};

// One kernel: the name of the op it computes (an op the core declares, or a composite with
// kFusedComposite), and the function. `op` must stay valid as long as the backend lives.
struct KernelRegistration {
  const char* op;
  KernelFn fn;
  uint32_t flags = 0;
};

// An op or composite the core knows, as declared in its family's file.
struct OpInfo {
  const char* name;        // "add", "conv2d_backward_input", "binary_cross_entropy"
  const char* family;      // "math", "reduce", "linalg", "nn", "loss", "array", "random", ...
  int num_inputs;          // -1: any number (concat)
  int num_outputs;         // 0 for the in-place updates (apply_*), which write their inputs
  const char* attrs;       // the attribute struct's name in this header ("NoAttrs" for none)
  const char* summary;     // inputs -> outputs and the formula
  bool composite;          // defined by other ops; a backend may register a fused kernel
  std::size_t attrs_size;  // sizeof the attribute struct, 0 for none
};

// Every op and composite declared so far, in declaration order (the core's ops first, then
// composites as plugins declare them).
TRAINYARD_API std::vector<OpInfo> declared_ops();
// The op or composite named `name`, or null.
TRAINYARD_API const OpInfo* find_op(std::string_view name);

}  // namespace trainyard

#endif  // TRAINYARD_OP_H_
