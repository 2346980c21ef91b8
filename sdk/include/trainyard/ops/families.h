// The op families: the one list from which every per-family table of the tree is generated.
//
// An op family is a group of ops declared together, with the same file name in each layer:
//   core/src/engine/ops/<family>.cc              the declarations (op_def.h)
//   sdk/include/trainyard/ops/<family>.h         the ops:: functions and attribute structs
//   backends/cpu/kernels_<family>.cc             the CPU kernels: add_<family>_kernels()
//   backends/cuda/kernels_<family>.cu (or .cc)   the CUDA kernels: add_<family>_kernels()
//   apps/conformance/cases_<family>.cc           the conformance cases: add_<family>_cases()
// Each row says which of them the family has; a backend that lacks a family says so here
// (`none`), never by leaving it out of a list elsewhere. The core's op registry, the
// backends' kernel tables, the reference backend, the conformance case list and the CMake
// source lists are all generated from this list (CMake reads the rows of this file:
// cmake/TrainyardOpFamilies.cmake), so adding a family is one row here plus the family's own
// files; tests/tree/check_op_families.sh fails on a family file that is not listed.
//
// A row is X(family, core, cpu, cuda, reference, conformance):
//   core         ops             <family>.cc declares ops (TRAINYARD_DEFINE_OP_FAMILY),
//                                numbered by the registry in the order of this list
//                ops_composites  ops, and composites declared by declare_<family>_composites()
//                composites      only composites, declared by declare_<family>_composites()
//                composites_on_use  only composites, each declared the first time it is called
//   cpu, cuda    kernels | none  whether that backend has kernels_<family> (none: the ops and
//                                composites run unfused or are Unimplemented on that device)
//   reference    kernels | none  whether the conformance suite's reference backend has
//                                reference::<family>_kernels() (none: composites only)
//   conformance  cases | none    whether apps/conformance has cases_<family>.cc
//
// One row per line, as `  X(...) \`: CMake parses them.
#ifndef TRAINYARD_OPS_FAMILIES_H_
#define TRAINYARD_OPS_FAMILIES_H_

// clang-format off
#define TRAINYARD_CORE_OP_FAMILIES(X)                                  \
  X(math,      ops,               kernels, kernels, kernels, cases)    \
  X(reduce,    ops,               kernels, kernels, kernels, cases)    \
  X(linalg,    ops,               kernels, kernels, kernels, cases)    \
  X(nn,        ops,               kernels, kernels, kernels, cases)    \
  X(loss,      ops_composites,    kernels, kernels, kernels, cases)    \
  X(array,     ops,               kernels, kernels, kernels, cases)    \
  X(random,    ops,               kernels, kernels, kernels, cases)    \
  X(training,  ops_composites,    kernels, kernels, kernels, cases)    \
  X(rnn,       composites,        kernels, none,    none,    cases)    \
  X(detection, ops,               kernels, kernels, kernels, cases)    \
  X(image,     ops,               kernels, kernels, kernels, cases)    \
  X(quantization, ops,            kernels, kernels, kernels, cases)    \
  X(mixture,   composites_on_use, kernels, none,    none,    none)
// clang-format on
// rnn: the CUDA backend has no fused LSTM/GRU cell yet; the cells run as their composites.
// mixture: moe_mixture (ops/nn.h) runs as its composite on CUDA and the reference; the suite
// has no case for it (its fused CPU kernel is checked by tests/unit/ops_moe_mixture_test.cc).

// Every family. A build that adds test-only families defines TRAINYARD_EXTRA_OP_FAMILIES(X)
// with rows of the same form before including this header.
#ifndef TRAINYARD_EXTRA_OP_FAMILIES
#define TRAINYARD_EXTRA_OP_FAMILIES(X)
#endif
#define TRAINYARD_OP_FAMILIES(X) TRAINYARD_CORE_OP_FAMILIES(X) TRAINYARD_EXTRA_OP_FAMILIES(X)

// TRAINYARD_OP_FAMILY_IF(column value, code...): the code when a row's cpu, cuda, reference
// or conformance column is `kernels` or `cases`, nothing when it is `none`. Another value does
// not compile.
#define TRAINYARD_OP_FAMILY_IF(value, ...) TRAINYARD_OP_FAMILY_IF_##value(__VA_ARGS__)
#define TRAINYARD_OP_FAMILY_IF_kernels(...) __VA_ARGS__
#define TRAINYARD_OP_FAMILY_IF_cases(...) __VA_ARGS__
#define TRAINYARD_OP_FAMILY_IF_none(...)

// TRAINYARD_OP_FAMILY_IF_OPS(core column, code...) and TRAINYARD_OP_FAMILY_IF_DECLARES(core
// column, code...): the code when the family declares ops, or has a
// declare_<family>_composites().
#define TRAINYARD_OP_FAMILY_IF_OPS(core, ...) TRAINYARD_OP_FAMILY_IF_OPS_##core(__VA_ARGS__)
#define TRAINYARD_OP_FAMILY_IF_OPS_ops(...) __VA_ARGS__
#define TRAINYARD_OP_FAMILY_IF_OPS_ops_composites(...) __VA_ARGS__
#define TRAINYARD_OP_FAMILY_IF_OPS_composites(...)
#define TRAINYARD_OP_FAMILY_IF_OPS_composites_on_use(...)
#define TRAINYARD_OP_FAMILY_IF_DECLARES(core, ...) \
  TRAINYARD_OP_FAMILY_IF_DECLARES_##core(__VA_ARGS__)
#define TRAINYARD_OP_FAMILY_IF_DECLARES_ops(...)
#define TRAINYARD_OP_FAMILY_IF_DECLARES_ops_composites(...) __VA_ARGS__
#define TRAINYARD_OP_FAMILY_IF_DECLARES_composites(...) __VA_ARGS__
#define TRAINYARD_OP_FAMILY_IF_DECLARES_composites_on_use(...)

#endif  // TRAINYARD_OPS_FAMILIES_H_
