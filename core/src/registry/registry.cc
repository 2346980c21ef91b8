#include "trainyard/core/registry.h"

#include <cxxabi.h>
#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <set>
#include <sstream>
#include <typeinfo>

#include "engine/dispatch.h"
#include "registry/elf_symbols.h"
#include "trainyard/abi.h"
#include "trainyard/backend.h"
#include "trainyard/collective.h"
#include "trainyard/core/stop_signals.h"
#include "trainyard/core/train_step.h"
#include "trainyard/detection_model.h"
#include "trainyard/loss.h"
#include "trainyard/model.h"
#include "trainyard/names.h"
#include "trainyard/op.h"
#include "trainyard/optimizer.h"
#include "trainyard/reader.h"
#include "trainyard/stream.h"
#include "trainyard/task.h"
#include "trainyard/transform.h"

namespace trainyard {

namespace fs = std::filesystem;

struct PluginRegistry::LibraryRecord {
  fs::path path;
  std::string plugin_name;
  std::string plugin_version;
  uint32_t abi_version = 0;
  std::string compiler;  // from tyabi_<N>_<compiler>; empty from an SDK that did not say
  std::vector<std::pair<ClassKind, std::string>> announced;  // from the symbol table
};

struct PluginRegistry::LoadedLibrary {
  std::shared_ptr<boost::dll::shared_library> library;
  const PluginDescriptor* descriptor = nullptr;
  fs::path path;

  ~LoadedLibrary();
  const ClassEntry& entry(ClassKind kind, const std::string& class_name) const;
};

namespace {

// Libraries that asked never to be unloaded (GPU runtimes) are parked here until exit.
std::vector<std::shared_ptr<boost::dll::shared_library>>& late_unload_registry() {
  static auto* pinned = new std::vector<std::shared_ptr<boost::dll::shared_library>>();
  return *pinned;
}
std::mutex& late_unload_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Libraries whose last object has died. They are closed later, from the registry, never from
// inside the release itself: the last reference often drops while the library's own code is
// still on the stack (a backend's Storage destructor releasing its backend), and closing the
// library there would return into unmapped code.
std::vector<std::shared_ptr<boost::dll::shared_library>>& pending_unloads() {
  static auto* pending = new std::vector<std::shared_ptr<boost::dll::shared_library>>();
  return *pending;
}

void close_pending_unloads() {
  std::vector<std::shared_ptr<boost::dll::shared_library>> closing;
  {
    std::lock_guard<std::mutex> lock(late_unload_mutex());
    closing.swap(pending_unloads());
  }
  closing.clear();
}

std::vector<fs::path> split_path_list(std::string_view list) {
  std::vector<fs::path> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t colon = list.find(':', start);
    std::string_view part = list.substr(start, colon - start);
    if (!part.empty()) out.emplace_back(part);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  return out;
}

std::string library_name(const fs::path& path) { return path.filename().string(); }

std::string describe_source(const ClassInfo& info) {
  return "plugin '" + info.plugin_name + "' " + info.plugin_version + ", " + info.library.string();
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// "typlugin_<name>__<major>_<minor>_<patch>" -> name, "major.minor.patch"
void parse_plugin_symbol(std::string_view symbol, std::string* name, std::string* version) {
  std::string_view rest = symbol.substr(std::string_view(kPluginSymbolPrefix).size());
  std::size_t sep = rest.rfind("__");
  if (sep == std::string_view::npos) {
    *name = std::string(rest);
    return;
  }
  *name = std::string(rest.substr(0, sep));
  std::string v(rest.substr(sep + 2));
  std::replace(v.begin(), v.end(), '_', '.');
  *version = v;
}

}  // namespace

PluginRegistry::LoadedLibrary::~LoadedLibrary() {
  if (!library) return;
  std::lock_guard<std::mutex> lock(late_unload_mutex());
  if (descriptor != nullptr && (descriptor->flags & kPluginNeverUnload) != 0) {
    late_unload_registry().push_back(std::move(library));
  } else {
    pending_unloads().push_back(std::move(library));
  }
}

const ClassEntry& PluginRegistry::LoadedLibrary::entry(ClassKind kind,
                                                       const std::string& class_name) const {
  for (uint32_t i = 0; i < descriptor->num_classes; ++i) {
    const ClassEntry& e = descriptor->classes[i];
    if (e.kind == kind && e.class_name != nullptr && class_name == e.class_name) return e;
  }
  throw PluginError("plugin library " + path.string() + " announces " + class_kind_name(kind) +
                    " class '" + class_name +
                    "' in its symbol table, but its descriptor does not provide it; the library "
                    "was not built with TRAINYARD_PLUGIN");
}

std::vector<PluginSearchDir> PluginRegistry::search_dirs(const Settings& settings) {
  std::vector<PluginSearchDir> dirs;
  for (const fs::path& dir : settings.plugin_path) dirs.push_back({dir, "--plugin_path"});
  if (settings.use_environment) {
    if (const char* env = std::getenv("TRAINYARD_PLUGIN_PATH")) {
      for (const fs::path& dir : split_path_list(env)) {
        dirs.push_back({dir, "TRAINYARD_PLUGIN_PATH"});
      }
    }
  }
  if (settings.use_default_dirs) {
    std::error_code ec;
    fs::path core_dir = boost::dll::this_line_location(ec).parent_path();
#ifdef TRAINYARD_BUILD_LIB_DIR
    if (!ec && fs::equivalent(core_dir, fs::path(TRAINYARD_BUILD_LIB_DIR), ec)) {
      dirs.push_back({fs::path(TRAINYARD_BUILD_LIB_DIR) / "trainyard" / "plugins", "build tree"});
    }
#endif
    if (!core_dir.empty()) dirs.push_back({core_dir / "trainyard" / "plugins", "install"});
  }
  // De-duplicate, keeping the first (highest-priority) occurrence.
  std::vector<PluginSearchDir> unique;
  for (const PluginSearchDir& d : dirs) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(d.dir, ec);
    if (ec) canonical = d.dir;
    bool seen = false;
    for (const PluginSearchDir& u : unique) {
      std::error_code ec2;
      fs::path other = fs::weakly_canonical(u.dir, ec2);
      if ((ec2 ? u.dir : other) == canonical) seen = true;
    }
    if (!seen) unique.push_back({canonical, d.origin});
  }
  return unique;
}

PluginRegistry::PluginRegistry(const Settings& settings) : dirs_(search_dirs(settings)) {
  std::set<std::string> seen_names;
  for (const PluginSearchDir& dir : dirs_) {
    std::error_code ec;
    if (!fs::is_directory(dir.dir, ec)) {
      if (dir.origin == "--plugin_path" || dir.origin == "TRAINYARD_PLUGIN_PATH") {
        problems_.push_back({dir.dir, "plugin directory " + dir.dir.string() + " (from " +
                                          dir.origin + ") does not exist"});
      }
      continue;
    }
    std::vector<fs::path> files;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir.dir, ec)) {
      if (entry.is_regular_file(ec) && entry.path().extension() == ".so") {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      if (!seen_names.insert(library_name(file)).second) continue;  // shadowed
      // Read from the file, never by loading it: listing runs no plugin code.
      std::optional<elf::SymbolTable> table;
      try {
        table = elf::read_symbols(file);
      } catch (const Error& e) {  // names the file and what is wrong with it
        problems_.push_back({file, e.what()});
        continue;
      } catch (const std::exception& e) {
        problems_.push_back(
            {file, "cannot read the symbol table of " + file.string() + ": " + e.what()});
        continue;
      }
      if (!table) {
        problems_.push_back({file, file.string() +
                                       " is not a Trainyard plugin: it is not an ELF shared "
                                       "library (it does not begin with the ELF magic number)"});
        continue;
      }
      const std::vector<std::string> symbols =
          elf::exported_names_in_section(*table, kPluginSection);
      LibraryRecord record;
      record.path = file;
      bool has_entry = false;
      for (const std::string& symbol : symbols) {
        if (symbol == kPluginEntrySymbol) {
          has_entry = true;
        } else if (starts_with(symbol, kAbiSymbolPrefix)) {
          char* end = nullptr;
          record.abi_version = static_cast<uint32_t>(
              std::strtoul(symbol.c_str() + std::string_view(kAbiSymbolPrefix).size(), &end, 10));
          if (end != nullptr && *end == '_') record.compiler = end + 1;
        } else if (starts_with(symbol, kPluginSymbolPrefix)) {
          parse_plugin_symbol(symbol, &record.plugin_name, &record.plugin_version);
        } else if (starts_with(symbol, kClassSymbolPrefix)) {
          std::string_view rest =
              std::string_view(symbol).substr(std::string_view(kClassSymbolPrefix).size());
          std::size_t sep = rest.find("__");
          ClassKind kind;
          if (sep == std::string_view::npos || !parse_class_kind(rest.substr(0, sep), &kind)) {
            problems_.push_back(
                {file, file.string() + " exports a malformed class symbol '" + symbol + "'"});
            continue;
          }
          record.announced.emplace_back(kind, std::string(rest.substr(sep + 2)));
        }
      }
      if (!has_entry) {
        problems_.push_back({file, file.string() + " is not a Trainyard plugin: it exports no '" +
                                       std::string(kPluginEntrySymbol) +
                                       "' entry point in section '" + kPluginSection +
                                       "' (build it with TRAINYARD_PLUGIN and "
                                       "trainyard_add_plugin)"});
        continue;
      }
      if (record.abi_version != kSdkAbiVersion) {
        std::string message = file.string() + " was built against Trainyard SDK ABI " +
                              (record.abi_version == 0 ? std::string("(unknown)")
                                                       : std::to_string(record.abi_version)) +
                              ", but this host uses ABI " + std::to_string(kSdkAbiVersion) +
                              "; rebuild the plugin against this SDK";
        problems_.push_back({file, message});
        for (const auto& [kind, name] : record.announced) blocked_classes_.emplace(name, message);
        continue;
      }
      const CompilerFamily family = record.compiler == "gcc"     ? CompilerFamily::kGcc
                                    : record.compiler == "clang" ? CompilerFamily::kClang
                                                                 : CompilerFamily::kUnknown;
      if (!record.compiler.empty() && family != kThisCompilerFamily) {
        const std::string host_compiler = compiler_family_name(kThisCompilerFamily);
        std::string message =
            file.string() + " was built with " +
            (family == CompilerFamily::kUnknown ? "'" + record.compiler + "'"
                                                : std::string(compiler_family_name(family))) +
            " but this host with " + host_compiler +
            "; C++ plugin classes need the same compiler family: rebuild the "
            "plugin with " +
            host_compiler + " (CMAKE_CXX_COMPILER)";
        problems_.push_back({file, message});
        for (const auto& [kind, name] : record.announced) blocked_classes_.emplace(name, message);
        continue;
      }
      libraries_.push_back(std::move(record));
    }
  }

  // Index the classes and find names claimed more than once.
  std::map<std::string, std::vector<const LibraryRecord*>> claims;
  for (const LibraryRecord& record : libraries_) {
    for (const auto& [kind, name] : record.announced) claims[name].push_back(&record);
  }
  for (const LibraryRecord& record : libraries_) {
    for (const auto& [kind, name] : record.announced) {
      const auto& claimants = claims[name];
      if (claimants.size() > 1) {
        if (claimants.front() == &record) {
          std::vector<std::string> files;
          for (const LibraryRecord* r : claimants) files.push_back(r->path.string());
          std::string message = "class '" + name +
                                "' is claimed by more than one plugin "
                                "library: " +
                                join_names(files, " and ") +
                                "; remove one of them from the plugin path";
          blocked_classes_.insert_or_assign(name, message);
          problems_.push_back({record.path, message});
        }
        continue;
      }
      classes_.push_back(
          {kind, name, record.plugin_name, record.plugin_version, record.path, record.abi_version});
    }
  }
  std::sort(classes_.begin(), classes_.end(), [](const ClassInfo& a, const ClassInfo& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.class_name < b.class_name;
  });
}

PluginRegistry::~PluginRegistry() { close_pending_unloads(); }

const ClassInfo& PluginRegistry::find(ClassKind kind, std::string_view name) const {
  auto blocked = blocked_classes_.find(name);
  if (blocked != blocked_classes_.end()) throw PluginError(blocked->second);
  const ClassInfo* other_kind = nullptr;
  std::vector<std::string> same_kind;
  for (const ClassInfo& info : classes_) {
    if (info.class_name == name) {
      if (info.kind == kind) return info;
      other_kind = &info;
    }
    if (info.kind == kind) same_kind.push_back(info.class_name);
  }
  const std::string kind_name = class_kind_name(kind);
  if (other_kind != nullptr) {
    throw NotFound("'" + std::string(name) + "' is a " + class_kind_name(other_kind->kind) +
                   " class (" + describe_source(*other_kind) + "), not a " + kind_name + " class");
  }
  std::string message = "unknown " + kind_name + " class '" + std::string(name) + "'.";
  if (same_kind.empty()) {
    std::vector<std::string> dirs;
    for (const PluginSearchDir& d : dirs_) dirs.push_back(d.dir.string());
    message += " No " + kind_name + " classes were found; searched " +
               (dirs.empty() ? std::string("no directories") : join_names(dirs)) + ".";
  } else {
    message += " Known " + kind_name + " classes: " + join_names(same_kind) + ".";
    std::string nearest = nearest_name(name, same_kind);
    if (!nearest.empty()) message += " Did you mean '" + nearest + "'?";
  }
  throw NotFound(message);
}

const ClassInfo& PluginRegistry::find_any(std::string_view name) const {
  auto blocked = blocked_classes_.find(name);
  if (blocked != blocked_classes_.end()) throw PluginError(blocked->second);
  std::vector<std::string> all;
  for (const ClassInfo& info : classes_) {
    if (info.class_name == name) return info;
    all.push_back(info.class_name);
  }
  std::string message = "unknown class '" + std::string(name) + "'.";
  if (!all.empty()) message += " Known classes: " + join_names(all) + ".";
  std::string nearest = nearest_name(name, all);
  if (!nearest.empty()) message += " Did you mean '" + nearest + "'?";
  throw NotFound(message);
}

const PluginRegistry::LibraryRecord& PluginRegistry::record_of(const ClassInfo& info) const {
  for (const LibraryRecord& record : libraries_) {
    if (record.path == info.library) return record;
  }
  throw NotFound("no plugin library " + info.library.string() + " in this registry");
}

std::shared_ptr<PluginRegistry::LoadedLibrary> PluginRegistry::load(
    const LibraryRecord& record) const {
  close_pending_unloads();
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = record.path.string();
  if (auto cached = loaded_[key].lock()) return cached;

  auto loaded = std::make_shared<LoadedLibrary>();
  loaded->path = record.path;
  try {
    loaded->library = std::make_shared<boost::dll::shared_library>(
        record.path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw PluginError("cannot load plugin library " + key + ": " + e.what());
  }
  if (!loaded->library->has(kPluginEntrySymbol)) {
    throw PluginError(key + " is not a Trainyard plugin: no '" + std::string(kPluginEntrySymbol) +
                      "' symbol");
  }
  PluginEntryFn& entry = loaded->library->get_alias<PluginEntryFn>(kPluginEntrySymbol);
  const PluginDescriptor* d = entry();
  if (d == nullptr) throw PluginError(key + ": the plugin entry point returned no descriptor");
  // The two leading fields are checked before any other field is read.
  if (d->abi_version != kSdkAbiVersion) {
    throw PluginError(key + " was built against Trainyard SDK ABI " +
                      std::to_string(d->abi_version) + ", but this host uses ABI " +
                      std::to_string(kSdkAbiVersion) + "; rebuild the plugin against this SDK");
  }
  if (d->struct_size < sizeof(PluginDescriptor)) {
    throw PluginError(key + " has a plugin descriptor of " + std::to_string(d->struct_size) +
                      " bytes; this host needs at least " +
                      std::to_string(sizeof(PluginDescriptor)) + "; rebuild the plugin");
  }
  if (d->compiler_family != static_cast<uint32_t>(kThisCompilerFamily)) {
    throw PluginError(key + " was built with " +
                      compiler_family_name(static_cast<CompilerFamily>(d->compiler_family)) +
                      " but this host with " + compiler_family_name(kThisCompilerFamily) +
                      "; C++ plugin classes need the same compiler family");
  }
  if (d->libstdcxx_cxx11_abi != kThisLibstdcxxCxx11Abi) {
    throw PluginError(
        key + " was built with _GLIBCXX_USE_CXX11_ABI=" + std::to_string(d->libstdcxx_cxx11_abi) +
        " but this host with " + std::to_string(kThisLibstdcxxCxx11Abi) +
        "; std::string layouts differ, rebuild the plugin");
  }
  // The same subset of the shared types, as this host lays them out (abi_layout.h); every one
  // of them is complete here.
  static_assert(sdk_layout_stamp().types == (uint64_t{1} << abi_detail::kLayoutTypes) - 1,
                "registry.cc must include every SDK header whose types abi_layout.h stamps");
  const LayoutStamp host_stamp = sdk_layout_stamp(d->layout_types);
  if (host_stamp.types != d->layout_types || host_stamp.hash != d->layout_hash) {
    std::ostringstream hashes;
    hashes << std::hex << "layout hash 0x" << d->layout_hash << ", this host's 0x"
           << host_stamp.hash;
    throw PluginError(key +
                      " was built against SDK headers whose shared types (Tensor, "
                      "VariableSpec, ModelOutput, the plugin descriptor, ...) have another "
                      "size, alignment or member offsets than this host's (" +
                      hashes.str() + "), although both say ABI " + std::to_string(kSdkAbiVersion) +
                      "; rebuild the plugin against this SDK (the headers installed with this "
                      "host)");
  }
  if (d->num_classes > 0 && d->classes == nullptr) {
    throw PluginError(key + ": the plugin descriptor lists classes but gives no class table");
  }
  loaded->descriptor = d;
  loaded_[key] = loaded;
  return loaded;
}

PluginRegistry::ClassDeclaration PluginRegistry::describe(const ClassInfo& info) const {
  std::shared_ptr<LoadedLibrary> loaded = load(record_of(info));
  const ClassEntry& entry = loaded->entry(info.kind, info.class_name);
  ClassDeclaration declaration;
  declaration.summary = entry.summary ? entry.summary : "";
  for (uint32_t i = 0; i < entry.num_options; ++i) {
    const OptionSpec& spec = entry.options[i];
    declaration.options.push_back({spec.name ? spec.name : "", spec.type,
                                   spec.default_value ? spec.default_value : "",
                                   spec.help ? spec.help : ""});
  }
  return declaration;
}

Options PluginRegistry::resolve_options(const ClassInfo& info,
                                        const std::map<std::string, OptionValue>& given) const {
  std::shared_ptr<LoadedLibrary> loaded = load(record_of(info));
  const ClassEntry& entry = loaded->entry(info.kind, info.class_name);
  return Options::resolve(info.class_name,
                          std::span<const OptionSpec>(entry.options, entry.num_options), given);
}

std::shared_ptr<PluginObject> PluginRegistry::create(
    const ClassInfo& info, const std::map<std::string, OptionValue>& given) const {
  return create_resolved(info, resolve_options(info, given));
}

std::shared_ptr<PluginObject> PluginRegistry::create_resolved(const ClassInfo& info,
                                                              const Options& options) const {
  std::shared_ptr<LoadedLibrary> loaded = load(record_of(info));
  const ClassEntry& entry = loaded->entry(info.kind, info.class_name);
  if (entry.create == nullptr) {
    throw PluginError(describe_source(info) + ": " + class_kind_name(info.kind) + " class '" +
                      info.class_name + "' has no factory");
  }
  FactoryError error;
  PluginObject* raw = entry.create(options, &error);
  if (raw == nullptr) {
    error.message[sizeof(error.message) - 1] = '\0';
    std::string message = describe_source(info) + ": creating " + class_kind_name(info.kind) +
                          " '" + info.class_name +
                          "' failed: " + (error.message[0] ? error.message : "no reason given");
    // Errors the core defines keep their type; anything else is the plugin's fault.
    switch (static_cast<FactoryError::Kind>(error.kind)) {
      case FactoryError::kInvalidArgument:
        throw InvalidArgument(message);
      case FactoryError::kNotFound:
        throw NotFound(message);
      case FactoryError::kUnimplemented:
        throw Unimplemented(message);
      case FactoryError::kDataLoss:
        throw DataLoss(message);
      case FactoryError::kConfigError:
        throw ConfigError(message);
      default:
        throw PluginError(message);
    }
  }
  // The deleter runs in the core and owns the library, so the library outlives the object. It
  // lets go of the library right after the delete: weak_ptrs to the object keep the control
  // block, and with it the deleter, alive for longer.
  std::shared_ptr<PluginObject> object(raw, [loaded](PluginObject* p) mutable {
    delete p;
    loaded.reset();
  });
  object->origin_ = {loaded->descriptor->plugin_name ? loaded->descriptor->plugin_name : "",
                     loaded->descriptor->plugin_version ? loaded->descriptor->plugin_version : "",
                     info.library.string(), info.class_name, info.kind};
  if (info.kind == ClassKind::kBackend) {
    auto* backend = dynamic_cast<Backend*>(object.get());
    if (backend == nullptr) throw_wrong_interface(info);
    guard_plugin_call(*backend, "kernels", [&] { static_cast<void>(backend->kernels()); });
    check_backend_kernels(*backend);  // refuses kernels for ops this core does not declare
  }
  return object;
}

std::size_t PluginRegistry::loaded_library_count() const {
  close_pending_unloads();
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (const auto& [path, weak] : loaded_) n += weak.expired() ? 0 : 1;
  return n;
}

void PluginRegistry::throw_wrong_interface(const ClassInfo& info) {
  throw PluginError(describe_source(info) + ": '" + info.class_name + "' is registered as a " +
                    class_kind_name(info.kind) +
                    " but does not implement the interface the caller asked for");
}

namespace {

// Marks an exception a guard has already prefixed, so an enclosing guard passes it on.
class PrefixedByGuard {
 public:
  virtual ~PrefixedByGuard() = default;
};

template <class E>
class Prefixed final : public E, public PrefixedByGuard {
 public:
  using E::E;
};

std::string demangled(const std::type_info* type) {
  if (type == nullptr) return "unknown type";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(type->name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type->name());
}

// Rethrows the trainyard::Error being handled as the same SDK type, its message prefixed with
// `where`; the host's control-flow errors (Stopped, NonFiniteError) pass unchanged.
[[noreturn]] void rethrow_prefixed(const std::string& where) {
  try {
    throw;
  } catch (const Stopped&) {
    throw;
  } catch (const NonFiniteError&) {
    throw;
  } catch (const DataLoss& e) {
    throw Prefixed<DataLoss>(where + ": " + e.what());
  } catch (const InvalidArgument& e) {
    throw Prefixed<InvalidArgument>(where + ": " + e.what());
  } catch (const NotFound& e) {
    throw Prefixed<NotFound>(where + ": " + e.what());
  } catch (const Unimplemented& e) {
    throw Prefixed<Unimplemented>(where + ": " + e.what());
  } catch (const ConfigError& e) {
    throw Prefixed<ConfigError>(where + ": " + e.what());
  } catch (const PluginError& e) {
    throw Prefixed<PluginError>(where + ": " + e.what());
  } catch (const Error& e) {
    throw Prefixed<Error>(where + ": " + e.what());
  }
}

}  // namespace

void rethrow_plugin_exception(const PluginObject& object, std::string_view call) {
  const PluginOrigin& o = object.plugin_origin();
  std::string where = o.library_path.empty()
                          ? demangled(&typeid(object)) + " (not created from a plugin)"
                          : "plugin '" + o.plugin_name + "' " + o.plugin_version + " (" +
                                o.library_path + "), " + class_kind_name(o.kind) + " '" +
                                o.class_name + "'";
  if (!call.empty()) where += ", " + std::string(call);
  try {
    throw;
  } catch (const abi::__forced_unwind&) {
    throw;  // thread cancellation must keep unwinding
  } catch (const PrefixedByGuard&) {
    throw;
  } catch (const Error&) {
    // The host's own objects (a reader or model made in-process, in tests or by the host)
    // report their errors themselves; only what is not an Error needs saying.
    if (o.library_path.empty()) throw;
    rethrow_prefixed(where);
  } catch (const std::exception& e) {
    throw Prefixed<PluginError>(where + " threw " + demangled(&typeid(e)) + ": " + e.what());
  } catch (...) {
    throw Prefixed<PluginError>(where + " threw an exception of type " +
                                demangled(abi::__cxa_current_exception_type()) +
                                ", which is not a std::exception");
  }
}

}  // namespace trainyard
