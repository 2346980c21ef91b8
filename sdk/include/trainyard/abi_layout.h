// The layout stamp: what the host checks, besides kSdkAbiVersion, before it uses a plugin.
//
// A plugin and the host exchange C++ objects (Tensor, VariableSpec, ModelOutput, ...), so both
// must see every shared type with the same size, alignment and member offsets. A header edited
// without a kSdkAbiVersion bump, a different standard library or a packing flag changes a
// layout without changing the version; the stamp catches that (as TensorFlow's C API carries
// struct sizes). It is computed at compile time from sizeof/alignof, and offsetof where the
// type is plain data, of each type in kLayoutTypes below.
//
// A translation unit sees only the types its headers define: a loss plugin never includes
// model.h. So the stamp records which of the types were complete where it was computed (the
// TRAINYARD_PLUGIN expansion, at the end of the plugin's source file) and hashes only those;
// the host, which sees them all, hashes the same subset of its own and compares. Types a
// plugin does not see cannot be exchanged with it by value. Not covered: the order and
// signatures of virtual functions, which only kSdkAbiVersion guards.
//
// Included at the end of plugin.h; nothing here includes another SDK header, so it may be
// reached while one is only half read: the stamp is a template whose every type is dependent
// and is instantiated only where the descriptor is defined.
#ifndef TRAINYARD_ABI_LAYOUT_H_
#define TRAINYARD_ABI_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace trainyard {

// Declared here so the list below can name them before their headers are read.
struct Batch;
struct ModelOutput;
class ModelContext;
class BaseModel;
class DetectionModel;
class Tensor;
class Shape;
class Storage;
class Variable;
struct VariableSpec;
struct Initializer;
struct FeatureSpec;
struct ParsedFeature;
struct ParsedRecord;
struct RecordLocation;
class Reader;
class Loss;
struct SlotSpec;
class Optimizer;
struct AllocatorStats;
class Backend;
struct KernelArgs;
struct KernelRegistration;
class Stream;
class Event;
class Collective;
struct PreprocessedImages;
struct Groundtruth;
class ExampleTransform;
struct Metric;
struct ConfiguredClass;
struct TaskPipeline;
class Summaries;
struct TrainStepReport;
class TaskEvaluation;
class PredictionWriter;
class RunRecorder;
struct RecordedRun;
struct TaskDefaults;
class Task;
struct TaskFlagDialect;
struct CheckpointInput;
class Options;
struct OptionSpec;
class PluginObject;
struct PluginOrigin;
struct ClassEntry;
struct FactoryError;
struct PluginDescriptor;
struct NativeMemory;
struct NativeStream;

// What a descriptor stamps (PluginDescriptor::layout_types and layout_hash).
struct LayoutStamp {
  uint64_t types = 0;  // bit i: kLayoutTypes' type i was complete and is hashed
  uint64_t hash = 0;
};

namespace abi_detail {

inline constexpr uint64_t kFnvOffset = 14695981039346656037ull;
inline constexpr uint64_t kFnvPrime = 1099511628211ull;

constexpr uint64_t mix(uint64_t hash, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    hash ^= (value >> (8 * i)) & 0xffu;
    hash *= kFnvPrime;
  }
  return hash;
}

// One type's contribution: 0 when the type is incomplete here.
template <class T>
constexpr uint64_t type_layout() {
  if constexpr (requires { sizeof(T); }) {
    return mix(mix(kFnvOffset, sizeof(T)), alignof(T));
  } else {
    return 0;
  }
}

template <class T, class Anchor>
struct Dependent {
  using type = T;
};

template <class Anchor, class... T>
constexpr void type_layouts(uint64_t* out) {
  std::size_t i = 0;
  ((out[i++] = type_layout<typename Dependent<T, Anchor>::type>()), ...);
}

// The member offsets of the plain structs of the plugin boundary itself.
template <class Anchor>
constexpr uint64_t boundary_offsets() {
  using D = typename Dependent<PluginDescriptor, Anchor>::type;
  using C = typename Dependent<ClassEntry, Anchor>::type;
  using E = typename Dependent<FactoryError, Anchor>::type;
  using O = typename Dependent<OptionSpec, Anchor>::type;
  const std::size_t offsets[] = {offsetof(D, abi_version),
                                 offsetof(D, struct_size),
                                 offsetof(D, compiler_family),
                                 offsetof(D, libstdcxx_cxx11_abi),
                                 offsetof(D, flags),
                                 offsetof(D, num_classes),
                                 offsetof(D, plugin_name),
                                 offsetof(D, plugin_version),
                                 offsetof(D, classes),
                                 offsetof(D, layout_types),
                                 offsetof(D, layout_hash),
                                 offsetof(C, kind),
                                 offsetof(C, num_options),
                                 offsetof(C, class_name),
                                 offsetof(C, summary),
                                 offsetof(C, options),
                                 offsetof(C, create),
                                 offsetof(E, kind),
                                 offsetof(E, message),
                                 offsetof(O, name),
                                 offsetof(O, type),
                                 offsetof(O, default_value),
                                 offsetof(O, help)};
  uint64_t hash = kFnvOffset;
  for (std::size_t offset : offsets) hash = mix(hash, offset);
  return hash;
}

// The shared types, in a fixed order: append only (a type's bit is its index).
template <class Anchor>
constexpr void layout_table(uint64_t* out) {
  type_layouts<Anchor, PluginDescriptor, ClassEntry, FactoryError, OptionSpec, Options,
               PluginOrigin, PluginObject, Tensor, Shape, Storage, Variable, VariableSpec,
               Initializer, Batch, ModelOutput, ModelContext, BaseModel, FeatureSpec, ParsedFeature,
               ParsedRecord, RecordLocation, Reader, Loss, SlotSpec, Optimizer, AllocatorStats,
               Backend, KernelArgs, KernelRegistration, Stream, Event, Collective,
               PreprocessedImages, Groundtruth, DetectionModel, ExampleTransform, Metric,
               ConfiguredClass, TaskPipeline, Summaries, TrainStepReport, TaskEvaluation,
               PredictionWriter, RunRecorder, RecordedRun, TaskDefaults, Task, NativeMemory,
               NativeStream, TaskFlagDialect, CheckpointInput>(out);
}
inline constexpr std::size_t kLayoutTypes = 51;

}  // namespace abi_detail

// The stamp of the types complete at the point of instantiation, restricted to `wanted` (the
// host passes a plugin's `layout_types` to hash the same subset).
template <class Anchor = void>
constexpr LayoutStamp sdk_layout_stamp(uint64_t wanted = ~0ull) {
  uint64_t table[abi_detail::kLayoutTypes] = {};
  abi_detail::layout_table<Anchor>(table);
  LayoutStamp stamp;
  stamp.hash = abi_detail::mix(abi_detail::kFnvOffset, abi_detail::boundary_offsets<Anchor>());
  for (std::size_t i = 0; i < abi_detail::kLayoutTypes; ++i) {
    if (table[i] == 0 || (wanted & (1ull << i)) == 0) continue;
    stamp.types |= 1ull << i;
    stamp.hash = abi_detail::mix(abi_detail::mix(stamp.hash, i), table[i]);
  }
  return stamp;
}

}  // namespace trainyard

#endif  // TRAINYARD_ABI_LAYOUT_H_
