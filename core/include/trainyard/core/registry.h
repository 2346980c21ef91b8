// The host side of the plugin boundary: finding plugin libraries, listing their classes
// without running their code, and creating objects by class name.
//
// Search order for plugin libraries (*.so directly inside each directory):
//   1. the directories given explicitly (the host's --plugin_path, colon-separated),
//   2. TRAINYARD_PLUGIN_PATH (colon-separated),
//   3. the build tree, when libtrainyard_core runs from it,
//   4. <directory of libtrainyard_core>/trainyard/plugins, which is the install location
//      and follows a relocated install.
// A library file name found in an earlier directory shadows the same file name later on.
//
// Construction reads every library's dynamic symbol table from the file, running none of its
// code (stripped libraries included); it never throws for a bad library but records a
// LibraryProblem (not a plugin, a truncated or malformed file, incompatible ABI, two libraries
// claiming one class), so the host keeps running and can report them. Lookups of an affected
// class throw.
//
// Thread safety: const methods and create() may be called concurrently.
#ifndef TRAINYARD_CORE_REGISTRY_H_
#define TRAINYARD_CORE_REGISTRY_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/export.h"
#include "trainyard/options.h"
#include "trainyard/plugin.h"

namespace trainyard {

struct PluginSearchDir {
  std::filesystem::path dir;
  std::string origin;  // "--plugin_path", "TRAINYARD_PLUGIN_PATH", "build tree", "install"
};

// A class as the library's symbol table announces it.
struct ClassInfo {
  ClassKind kind = ClassKind::kModel;
  std::string class_name;
  std::string plugin_name;
  std::string plugin_version;
  std::filesystem::path library;
  uint32_t abi_version = 0;
};

struct LibraryProblem {
  std::filesystem::path library;
  std::string message;  // full sentence naming the file
};

class TRAINYARD_API PluginRegistry {
 public:
  struct Settings {
    std::vector<std::filesystem::path> plugin_path;  // step 1
    bool use_environment = true;                     // step 2
    bool use_default_dirs = true;                    // steps 3 and 4
  };

  explicit PluginRegistry(const Settings& settings);
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // The directories searched, in order, after de-duplication.
  static std::vector<PluginSearchDir> search_dirs(const Settings& settings);

  const std::vector<PluginSearchDir>& dirs() const { return dirs_; }
  // Every usable class, sorted by kind then name.
  const std::vector<ClassInfo>& classes() const { return classes_; }
  const std::vector<LibraryProblem>& problems() const { return problems_; }

  // Finds `name` among classes of `kind`. Throws NotFound listing the known names of that kind
  // and the nearest one, or saying which kind `name` is; PluginError when two libraries claim
  // it or its library is unusable.
  const ClassInfo& find(ClassKind kind, std::string_view name) const;
  // Finds `name` in any kind (for `plugins describe NAME`).
  const ClassInfo& find_any(std::string_view name) const;

  // Loads the class's library if needed and returns a copy of its declaration.
  struct DeclaredOption {
    std::string name;
    OptionType type = OptionType::kString;
    std::string default_value;
    std::string help;
  };
  struct ClassDeclaration {
    std::string summary;
    std::vector<DeclaredOption> options;
  };
  ClassDeclaration describe(const ClassInfo& info) const;

  // Checks `given` against the class's declared options and fills in the defaults, as
  // create() does, without creating an instance. Throws InvalidArgument (see Options).
  Options resolve_options(const ClassInfo& info,
                          const std::map<std::string, OptionValue>& given) const;

  // Creates an instance with `given` options (checked against the declaration; defaults fill
  // the rest). Throws PluginError naming the plugin, library and class when loading fails or
  // the constructor throws.
  std::shared_ptr<PluginObject> create(const ClassInfo& info,
                                       const std::map<std::string, OptionValue>& given) const;
  std::shared_ptr<PluginObject> create_resolved(const ClassInfo& info,
                                                const Options& options) const;

  template <class T>
  std::shared_ptr<T> create(ClassKind kind, std::string_view name,
                            const std::map<std::string, OptionValue>& given = {}) const {
    const ClassInfo& info = find(kind, name);
    std::shared_ptr<PluginObject> object = create(info, given);
    std::shared_ptr<T> typed = std::dynamic_pointer_cast<T>(object);
    if (!typed) throw_wrong_interface(info);
    return typed;
  }

  // Number of plugin libraries currently loaded through this registry (for tests and logs).
  std::size_t loaded_library_count() const;

 private:
  struct LoadedLibrary;
  struct LibraryRecord;

  std::shared_ptr<LoadedLibrary> load(const LibraryRecord& record) const;
  const LibraryRecord& record_of(const ClassInfo& info) const;
  [[noreturn]] static void throw_wrong_interface(const ClassInfo& info);

  std::vector<PluginSearchDir> dirs_;
  std::vector<LibraryRecord> libraries_;
  std::vector<ClassInfo> classes_;
  std::vector<LibraryProblem> problems_;
  // Class names that cannot be used, with the reason (two claimants, incompatible library).
  std::map<std::string, std::string, std::less<>> blocked_classes_;

  mutable std::mutex mutex_;
  mutable std::map<std::string, std::weak_ptr<LoadedLibrary>> loaded_;
};

// Called inside a catch handler for an exception that escaped a call into `object`'s plugin
// code (`call` names the method, e.g. "forward", and may add where: "parse of f.tfrecord:17").
// Rethrows it prefixed once with "plugin 'NAME' VERSION (LIBRARY), KIND 'CLASS', CALL":
//  - an SDK error (error.h: InvalidArgument, NotFound, DataLoss, ...) keeps its type, so the
//    host's exit code and a reader's corrupt-record policy still apply;
//  - any other std::exception, and anything that is not one (`throw 42`), becomes a
//    PluginError that names its type;
//  - an exception a guard has already prefixed, and the host's own control-flow errors
//    (Stopped, NonFiniteError), pass through unchanged, so nested guards prefix once;
//  - for an object not created from a plugin (no library in its origin) SDK errors pass
//    unchanged and the rest is converted naming its C++ class;
//  - a thread cancellation is rethrown as it is.
[[noreturn]] TRAINYARD_API void rethrow_plugin_exception(const PluginObject& object,
                                                         std::string_view call);

// Runs `fn`, a call into plugin code made by `object`, and converts whatever escapes it as
// rethrow_plugin_exception does. Costs nothing when nothing is thrown (no allocation, no
// std::function): the callable is inlined. Returns what `fn` returns.
template <class Fn>
decltype(auto) guard_plugin_call(const PluginObject& object, std::string_view call, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (...) {
    rethrow_plugin_exception(object, call);
  }
}

template <class Fn>
decltype(auto) guard_plugin_call(const PluginObject& object, Fn&& fn) {
  return guard_plugin_call(object, std::string_view(), std::forward<Fn>(fn));
}

}  // namespace trainyard

#endif  // TRAINYARD_CORE_REGISTRY_H_
