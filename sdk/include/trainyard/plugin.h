// The plugin boundary: what a plugin library exports and how the host recognises it.
//
// A plugin library exports exactly one entry point, `trainyard_plugin_entry`, a function that
// returns a pointer to a static PluginDescriptor. The descriptor is plain data and begins with
// the SDK ABI version and its own size, so the host can check both before it touches anything
// else. Besides the entry point, the library exports, in the ELF section "tyard", one symbol
// per class (`tyc_<kind>__<ClassName>`), one with its ABI version and compiler family
// (`tyabi_<N>_gcc`, `tyabi_<N>_clang`) and one with
// its name and version (`typlugin_<name>__<major>_<minor>_<patch>`). The host lists plugins
// by reading these symbol names from the file's dynamic symbol table (.dynsym, which stripping
// keeps) without loading it, and loads a library only when one of its classes is first asked
// for.
//
// Writing a plugin: implement one of the interfaces (model.h, reader.h, loss.h, ...), give the
// class a constructor taking `const trainyard::Options&` and, if it has parameters, a
// `static constexpr trainyard::OptionSpec kOptions[]`. Then list the classes once:
//
//   #define MY_CLASSES(X) X(model, TinyModel, my::TinyModel, "A logistic classifier")
//   TRAINYARD_PLUGIN(my_plugin, 1, 0, 0, MY_CLASSES)
//
// in exactly one source file of the library, at global scope. Each X(...) is (kind, class
// name as users write it, C++ type, one-line summary); for several classes the #define holds
// one X(...) per line, continued with backslashes. Kinds are model, detection_model, reader,
// loss, optimizer, backend, collective and task; class names are C identifiers. Build the library
// with trainyard_add_plugin() (hidden visibility; only the aliases above are exported).
//
// Exceptions: a constructor may throw; the factory catches every exception inside the library
// and the host rethrows it as a PluginError naming the plugin, the file and the class. Methods
// of a created object should throw trainyard::Error subclasses (error.h), whose type
// information lives in libtrainyard_core; the host converts anything else it catches from a
// plugin call with guard_plugin_call() (registry.h).
//
// Lifetime: every object the host creates from a plugin holds the library loaded until the
// object is destroyed (the shared_ptr's deleter owns the library handle). The library is
// closed at the registry's next call after its last object is gone, never from inside that
// object's release, which may still be running the library's code.
#ifndef TRAINYARD_PLUGIN_H_
#define TRAINYARD_PLUGIN_H_

#include <boost/dll/alias.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "trainyard/abi.h"
#include "trainyard/error.h"
#include "trainyard/export.h"
#include "trainyard/options.h"

namespace trainyard {

enum class ClassKind : uint32_t {
  kModel = 1,
  kDetectionModel = 2,
  kReader = 3,
  kLoss = 4,
  kOptimizer = 5,
  kBackend = 6,
  kCollective = 7,
  kTask = 8,
};

// "model", "detection_model", ... as used in symbol names, listings and messages.
TRAINYARD_API const char* class_kind_name(ClassKind kind);
// Inverse of class_kind_name; returns false for an unknown name.
TRAINYARD_API bool parse_class_kind(std::string_view name, ClassKind* kind);

// Where a plugin object came from; set by the host when it creates the object.
struct PluginOrigin {
  std::string plugin_name;
  std::string plugin_version;
  std::string library_path;
  std::string class_name;
  ClassKind kind = ClassKind::kModel;
};

// Base of every class a plugin provides. Objects are created only by the host
// (PluginRegistry::create) and always owned by a std::shared_ptr whose deleter keeps the
// plugin library loaded; shared_from_this() is therefore always valid.
class TRAINYARD_API PluginObject : public std::enable_shared_from_this<PluginObject> {
 public:
  PluginObject() = default;
  PluginObject(const PluginObject&) = delete;
  PluginObject& operator=(const PluginObject&) = delete;
  virtual ~PluginObject();

  // Empty until the host has finished creating the object (not yet set in constructors).
  const PluginOrigin& plugin_origin() const { return origin_; }

 private:
  friend class PluginRegistry;
  PluginOrigin origin_;
};

// Why a factory failed: the trainyard::Error subclass it caught (so the host can rethrow the
// same type) and its message, NUL-terminated.
struct FactoryError {
  enum Kind : uint32_t {
    kForeign = 0,  // not a trainyard::Error: the host reports a PluginError
    kError = 1,
    kInvalidArgument = 2,
    kNotFound = 3,
    kUnimplemented = 4,
    kDataLoss = 5,
    kConfigError = 6,
    kPluginError = 7,
  };
  uint32_t kind = kForeign;
  char message[2044] = {0};
};

// Creates an instance. Never throws: on failure returns nullptr and fills `error`.
using FactoryFn = PluginObject* (*)(const Options& options, FactoryError* error) noexcept;

// One class a library provides. Plain data, append-only (see PluginDescriptor).
struct ClassEntry {
  ClassKind kind;
  uint32_t num_options;
  const char* class_name;
  const char* summary;
  const OptionSpec* options;  // num_options entries; may be null when there are none
  FactoryFn create;
};

// Flags in PluginDescriptor::flags.
inline constexpr uint32_t kPluginNeverUnload = 1u << 0;  // e.g. GPU runtimes: pin until exit

// What `trainyard_plugin_entry` returns. The host reads abi_version and struct_size first and
// refuses the library when either is wrong; fields are only ever appended, so a larger
// struct_size from a newer minor SDK is accepted. Then it checks the compiler family, the
// libstdc++ string ABI and the layout stamp, each refusal naming the file.
struct PluginDescriptor {
  uint32_t abi_version;          // kSdkAbiVersion of the SDK the plugin was built against
  uint32_t struct_size;          // sizeof(PluginDescriptor) in that SDK
  uint32_t compiler_family;      // CompilerFamily
  uint32_t libstdcxx_cxx11_abi;  // _GLIBCXX_USE_CXX11_ABI
  uint32_t flags;                // kPluginNeverUnload, ...
  uint32_t num_classes;
  const char* plugin_name;
  const char* plugin_version;
  const ClassEntry* classes;  // num_classes entries
  // sdk_layout_stamp() where the descriptor was compiled (abi_layout.h): the host refuses the
  // library when its own layouts of the same types hash differently.
  uint64_t layout_types;
  uint64_t layout_hash;
};

using PluginEntryFn = const PluginDescriptor*();

// Symbol names and the section they live in (at most 8 bytes, a Boost.DLL limit).
inline constexpr const char* kPluginSection = "tyard";
inline constexpr const char* kPluginEntrySymbol = "trainyard_plugin_entry";
inline constexpr const char* kClassSymbolPrefix = "tyc_";
inline constexpr const char* kAbiSymbolPrefix = "tyabi_";
inline constexpr const char* kPluginSymbolPrefix = "typlugin_";

class BaseModel;
class DetectionModel;
class Reader;
class Loss;
class Optimizer;
class Backend;
class Collective;
class Task;

namespace plugin_detail {

template <class T>
constexpr std::span<const OptionSpec> declared_options() {
  if constexpr (requires { T::kOptions; }) {
    return std::span<const OptionSpec>(T::kOptions);
  } else {
    return {};
  }
}

inline void write_error(FactoryError* error, FactoryError::Kind kind,
                        const char* message) noexcept {
  if (error == nullptr) return;
  error->kind = kind;
  std::size_t n = std::strlen(message);
  if (n >= sizeof(error->message)) n = sizeof(error->message) - 1;
  std::memcpy(error->message, message, n);
  error->message[n] = '\0';
}

template <class T>
PluginObject* create_checked(const Options& options, FactoryError* error) noexcept {
  try {
    return new T(options);
  } catch (const InvalidArgument& e) {
    write_error(error, FactoryError::kInvalidArgument, e.what());
  } catch (const NotFound& e) {
    write_error(error, FactoryError::kNotFound, e.what());
  } catch (const Unimplemented& e) {
    write_error(error, FactoryError::kUnimplemented, e.what());
  } catch (const DataLoss& e) {
    write_error(error, FactoryError::kDataLoss, e.what());
  } catch (const ConfigError& e) {
    write_error(error, FactoryError::kConfigError, e.what());
  } catch (const PluginError& e) {
    write_error(error, FactoryError::kPluginError, e.what());
  } catch (const Error& e) {
    write_error(error, FactoryError::kError, e.what());
  } catch (const std::exception& e) {
    write_error(error, FactoryError::kForeign, e.what());
  } catch (...) {
    write_error(error, FactoryError::kForeign, "an exception that is not a std::exception");
  }
  return nullptr;
}

template <class T>
PluginObject* create_instance(const Options& options, FactoryError* error) noexcept {
  // A class the TRAINYARD_PLUGIN checks refuse gets only their message, not this one's too.
  if constexpr (std::is_abstract_v<T> || !std::is_constructible_v<T, const Options&>) {
    return nullptr;
  } else {
    return create_checked<T>(options, error);
  }
}

}  // namespace plugin_detail
}  // namespace trainyard

#define TRAINYARD_DETAIL_KIND_model ::trainyard::ClassKind::kModel
#define TRAINYARD_DETAIL_KIND_detection_model ::trainyard::ClassKind::kDetectionModel
#define TRAINYARD_DETAIL_KIND_reader ::trainyard::ClassKind::kReader
#define TRAINYARD_DETAIL_KIND_loss ::trainyard::ClassKind::kLoss
#define TRAINYARD_DETAIL_KIND_optimizer ::trainyard::ClassKind::kOptimizer
#define TRAINYARD_DETAIL_KIND_backend ::trainyard::ClassKind::kBackend
#define TRAINYARD_DETAIL_KIND_collective ::trainyard::ClassKind::kCollective
#define TRAINYARD_DETAIL_KIND_task ::trainyard::ClassKind::kTask

#define TRAINYARD_DETAIL_BASE_model ::trainyard::BaseModel
#define TRAINYARD_DETAIL_BASE_detection_model ::trainyard::DetectionModel
#define TRAINYARD_DETAIL_BASE_reader ::trainyard::Reader
#define TRAINYARD_DETAIL_BASE_loss ::trainyard::Loss
#define TRAINYARD_DETAIL_BASE_optimizer ::trainyard::Optimizer
#define TRAINYARD_DETAIL_BASE_backend ::trainyard::Backend
#define TRAINYARD_DETAIL_BASE_collective ::trainyard::Collective
#define TRAINYARD_DETAIL_BASE_task ::trainyard::Task

#define TRAINYARD_DETAIL_CAT2(a, b) a##b
#define TRAINYARD_DETAIL_CAT(a, b) TRAINYARD_DETAIL_CAT2(a, b)

// tyabi_<N>_<compiler>: the ABI version and compiler family, readable without loading.
#if defined(__clang__)
#define TRAINYARD_DETAIL_COMPILER_SUFFIX _clang
#elif defined(__GNUC__)
#define TRAINYARD_DETAIL_COMPILER_SUFFIX _gcc
#else
#define TRAINYARD_DETAIL_COMPILER_SUFFIX _unknown
#endif
#define TRAINYARD_DETAIL_ABI_SYMBOL                                             \
  TRAINYARD_DETAIL_CAT(TRAINYARD_DETAIL_CAT(tyabi_, TRAINYARD_SDK_ABI_VERSION), \
                       TRAINYARD_DETAIL_COMPILER_SUFFIX)

#define TRAINYARD_DETAIL_CLASS_ENTRY(kind, Name, Class, summary)                           \
  ::trainyard::ClassEntry{                                                                 \
      TRAINYARD_DETAIL_KIND_##kind,                                                        \
      static_cast<uint32_t>(::trainyard::plugin_detail::declared_options<Class>().size()), \
      #Name,                                                                               \
      summary,                                                                             \
      ::trainyard::plugin_detail::declared_options<Class>().data(),                        \
      &::trainyard::plugin_detail::create_instance<Class>},

// The main method of each kind, as `Class` must declare it to override the interface's. A
// method of that name with another signature hides the interface's without overriding it.
#define TRAINYARD_DETAIL_OVERRIDE_model(C)     \
  static_cast<::trainyard::ModelOutput (C::*)( \
      ::trainyard::ModelContext&, const ::trainyard::Batch&, ::trainyard::Mode)>(&C::forward)
#define TRAINYARD_DETAIL_OVERRIDE_NAME_model \
  "forward(ModelContext&, const Batch&, Mode) -> ModelOutput"
#define TRAINYARD_DETAIL_OVERRIDE_loss(C)                                                        \
  static_cast<::trainyard::Tensor (C::*)(const ::trainyard::Tensor&, const ::trainyard::Tensor&, \
                                         const std::optional<::trainyard::Tensor>&)>(            \
      &C::calculate_loss)
#define TRAINYARD_DETAIL_OVERRIDE_NAME_loss                                                       \
  "calculate_loss(const Tensor& predictions, const Tensor& labels, const std::optional<Tensor>& " \
  "weights) -> Tensor"
#define TRAINYARD_DETAIL_OVERRIDE_reader(C)     \
  static_cast<::trainyard::ParsedRecord (C::*)( \
      std::string_view, const ::trainyard::RecordLocation&) const>(&C::parse)
#define TRAINYARD_DETAIL_OVERRIDE_NAME_reader \
  "parse(std::string_view, const RecordLocation&) const -> ParsedRecord"
#define TRAINYARD_DETAIL_OVERRIDE_optimizer(C)                                \
  static_cast<void (C::*)(::trainyard::Variable&, const ::trainyard::Tensor&, \
                          std::span<::trainyard::Variable*>, double, int64_t)>(&C::apply)
#define TRAINYARD_DETAIL_OVERRIDE_NAME_optimizer                                                \
  "apply(Variable&, const Tensor& gradient, std::span<Variable*> slots, double learning_rate, " \
  "int64_t step)"
#define TRAINYARD_DETAIL_OVERRIDE_detection_model(C) \
  static_cast<int64_t (C::*)() const>(&C::num_classes)
#define TRAINYARD_DETAIL_OVERRIDE_NAME_detection_model "num_classes() const -> int64_t"
#define TRAINYARD_DETAIL_OVERRIDE_backend(C) \
  static_cast<std::string (C::*)() const>(&C::device_name)
#define TRAINYARD_DETAIL_OVERRIDE_NAME_backend "device_name() const -> std::string"
#define TRAINYARD_DETAIL_OVERRIDE_collective(C) static_cast<int (C::*)() const>(&C::rank)
#define TRAINYARD_DETAIL_OVERRIDE_NAME_collective "rank() const -> int"
#define TRAINYARD_DETAIL_OVERRIDE_task(C) \
  static_cast<::trainyard::TaskDefaults (C::*)() const>(&C::defaults)
#define TRAINYARD_DETAIL_OVERRIDE_NAME_task "defaults() const -> TaskDefaults"

// Compile-time checks of one listed class, each saying what to change.
#define TRAINYARD_DETAIL_CLASS_CHECK(kind, Name, Class, summary)                                  \
  static_assert(std::is_base_of_v<TRAINYARD_DETAIL_BASE_##kind, Class>,                           \
                #Name " is listed as a " #kind " but does not derive from its interface");        \
  namespace trainyard_plugin_detail {                                                             \
  template <class C>                                                                              \
  inline constexpr bool kOverridesMain_##Name = requires {                                        \
    TRAINYARD_DETAIL_OVERRIDE_##kind(C);                                                          \
  };                                                                                              \
  }                                                                                               \
  static_assert(trainyard_plugin_detail::kOverridesMain_##Name<Class>,                            \
                #Name " is abstract: it does not override " TRAINYARD_DETAIL_OVERRIDE_NAME_##kind \
                "; its method of that name has another signature (compare parameter "             \
                "types, const and the return type with the interface, and mark it "               \
                "`override`)");                                                                   \
  static_assert(!std::is_abstract_v<Class>, #Name                                                 \
                " is abstract: it does not override every pure virtual function of the " #kind    \
                " interface; check each override's signature against the "                        \
                "interface's (parameter types, const, return type) and mark it `override`");      \
  static_assert(                                                                                  \
      std::is_abstract_v<Class> || std::is_constructible_v<Class, const ::trainyard::Options&>,   \
      #Name                                                                                       \
      " needs a public constructor taking const trainyard::Options&, from which it reads the "    \
      "options it declares in static constexpr trainyard::OptionSpec kOptions[]");

#define TRAINYARD_DETAIL_CLASS_SYMBOL(kind, Name, Class, summary)                                \
  BOOST_DLL_ALIAS_SECTIONED(trainyard_plugin_detail::trainyard_plugin_get, tyc_##kind##__##Name, \
                            tyard)

// Defines the library's descriptor and exported symbols. `name` is an identifier, the version
// three integers, `CLASSES` an X-macro as shown at the top of this file.
#define TRAINYARD_PLUGIN_WITH_FLAGS(name, major, minor, patch, flags, CLASSES)                     \
  CLASSES(TRAINYARD_DETAIL_CLASS_CHECK)                                                            \
  namespace trainyard_plugin_detail {                                                              \
  inline constexpr ::trainyard::ClassEntry kTrainyardClasses[] = {                                 \
      CLASSES(TRAINYARD_DETAIL_CLASS_ENTRY)};                                                      \
  inline constexpr ::trainyard::PluginDescriptor kTrainyardDescriptor = {                          \
      ::trainyard::kSdkAbiVersion,                                                                 \
      static_cast<uint32_t>(sizeof(::trainyard::PluginDescriptor)),                                \
      static_cast<uint32_t>(::trainyard::kThisCompilerFamily),                                     \
      ::trainyard::kThisLibstdcxxCxx11Abi,                                                         \
      (flags),                                                                                     \
      static_cast<uint32_t>(sizeof(kTrainyardClasses) / sizeof(kTrainyardClasses[0])),             \
      #name,                                                                                       \
      #major "." #minor "." #patch,                                                                \
      kTrainyardClasses,                                                                           \
      ::trainyard::sdk_layout_stamp().types,                                                       \
      ::trainyard::sdk_layout_stamp().hash};                                                       \
  inline const ::trainyard::PluginDescriptor* trainyard_plugin_get() {                             \
    return &kTrainyardDescriptor;                                                                  \
  }                                                                                                \
  }                                                                                                \
  BOOST_DLL_ALIAS_SECTIONED(trainyard_plugin_detail::trainyard_plugin_get, trainyard_plugin_entry, \
                            tyard)                                                                 \
  BOOST_DLL_ALIAS_SECTIONED(trainyard_plugin_detail::trainyard_plugin_get,                         \
                            TRAINYARD_DETAIL_ABI_SYMBOL, tyard)                                    \
  BOOST_DLL_ALIAS_SECTIONED(trainyard_plugin_detail::trainyard_plugin_get,                         \
                            typlugin_##name##__##major##_##minor##_##patch, tyard)                 \
  CLASSES(TRAINYARD_DETAIL_CLASS_SYMBOL)

#define TRAINYARD_PLUGIN(name, major, minor, patch, CLASSES) \
  TRAINYARD_PLUGIN_WITH_FLAGS(name, major, minor, patch, 0u, CLASSES)

#include "trainyard/abi_layout.h"  // sdk_layout_stamp(), used by TRAINYARD_PLUGIN

#endif  // TRAINYARD_PLUGIN_H_
