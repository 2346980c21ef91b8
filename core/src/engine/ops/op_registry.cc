// The op registry: every op of every family and every composite, numbered once; the kernel
// table of each backend, bound by name; streams' defaults and guards; Tensor::to.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/backend_core.h"
#include "engine/ops/common.h"
#include "engine/ops/op_def.h"
#include "trainyard/abi.h"
#include "trainyard/backend.h"
#include "trainyard/composite.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

// The families that declare ops, in the order of TRAINYARD_OP_FAMILIES (ops/families.h).
#define TRAINYARD_OP_FAMILY_TABLE_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF_OPS(core, family##_ops, )
constexpr OpFamilyFn kFamilies[] = {TRAINYARD_OP_FAMILIES(TRAINYARD_OP_FAMILY_TABLE_)};
#undef TRAINYARD_OP_FAMILY_TABLE_

class OpTable {
 public:
  static OpTable& get() {
    static OpTable* table = new OpTable();  // never destroyed: ops outlive static destructors
    return *table;
  }

  void add(OpDef* def) {
    if (by_name_.count(def->info.name) != 0) {
      throw InvalidArgument(std::string("op '") + def->info.name +
                            "' is declared twice (an op or composite of that name exists)");
    }
    if (defs_.size() >= kMaxOps) {
      throw InvalidArgument("cannot declare op '" + std::string(def->info.name) + "': more than " +
                            std::to_string(kMaxOps) + " ops and composites");
    }
    def->index = static_cast<uint32_t>(defs_.size());
    defs_.push_back(def);
    by_name_.emplace(def->info.name, def);
  }

  // A withdrawn composite keeps its OpDef (and number) for the next declaration of its name.
  static bool withdrawn(const OpDef* def) {
    return def->info.composite && def->composite == nullptr;
  }

  OpDef* find_any(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : it->second;
  }

  const OpDef* find(std::string_view name) const {
    const OpDef* def = find_any(name);
    return def == nullptr || withdrawn(def) ? nullptr : def;
  }

  std::vector<const OpDef*> all() const {
    std::vector<const OpDef*> out;
    for (const OpDef* def : defs_) {
      if (!withdrawn(def)) out.push_back(def);
    }
    return out;
  }

  std::mutex& mutex() { return mutex_; }

 private:
  OpTable() {
    for (OpFamilyFn family : kFamilies) {
      for (OpDef* def : family()) add(def);
    }
  }

  std::mutex mutex_;  // guards defs_ and by_name_ after construction (composites)
  std::vector<OpDef*> defs_;
  std::unordered_map<std::string, OpDef*> by_name_;
};

// The core's composites are declared the first time anything asks for the whole list.
void ensure_core_composites() {
  static std::once_flag once;
  std::call_once(once, [] {
#define TRAINYARD_OP_FAMILY_DECLARE_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF_DECLARES(core, declare_##family##_composites();)
    TRAINYARD_OP_FAMILIES(TRAINYARD_OP_FAMILY_DECLARE_)
#undef TRAINYARD_OP_FAMILY_DECLARE_
  });
}

thread_local std::vector<std::pair<Backend*, Stream*>> t_stream_stack;
// Live StreamGuards in the process: while there are none, every thread's current stream is the
// default one and launches skip the thread-local lookup.
std::atomic<int> g_stream_guards{0};

std::string backend_label(const Backend& backend) {
  const PluginOrigin& origin = backend.plugin_origin();
  std::string label = "backend '" + backend.device_name() + "'";
  if (!origin.plugin_name.empty()) {
    label += " (plugin " + origin.plugin_name + ", " + origin.library_path + ")";
  }
  return label;
}

class HeapHostBuffer final : public HostBuffer {
 public:
  explicit HeapHostBuffer(std::size_t bytes)
      : bytes_(bytes), data_(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64)) {
    if (data_ == nullptr) throw std::bad_alloc();
  }
  ~HeapHostBuffer() override { std::free(data_); }
  void* data() const override { return data_; }
  std::size_t size_bytes() const override { return bytes_; }

 private:
  std::size_t bytes_;
  void* data_;
};

void check_range(const Storage& storage, std::size_t offset, std::size_t bytes, const char* what) {
  if (offset > storage.size_bytes() || bytes > storage.size_bytes() - offset) {
    throw InvalidArgument(std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " +
                          std::to_string(offset) + " overruns storage of " +
                          std::to_string(storage.size_bytes()) + " bytes on " +
                          storage.backend().device_name());
  }
}

}  // namespace

// ---- The core's per-backend state ----

namespace {
void delete_core_state(BackendCoreState* state) { delete state; }

KernelFn bind_kernel(Backend& backend, const OpDef& op) {
  KernelFn found = nullptr;
  for (const KernelRegistration& k : backend.kernels()) {
    if (k.op != nullptr && std::strcmp(k.op, op.info.name) == 0) {
      found = k.fn;
      break;
    }
  }
  BackendCore::state(backend).kernels[op.index].store(found, std::memory_order_release);
  return found;
}
}  // namespace

void unbound_kernel(Backend&, const KernelArgs&) {}

KernelFn KernelDispatch::bind(Backend& backend, const OpDef& op) {
  return bind_kernel(backend, op);
}

Backend::Backend() : core_(new BackendCoreState(*this), &delete_core_state) {}
Backend::~Backend() = default;

Stream& Backend::default_stream() { return core_->default_stream; }
std::shared_ptr<Stream> Backend::create_stream() {
  return std::make_shared<SynchronousStream>(*this);
}
std::shared_ptr<Event> Backend::create_event() { return std::make_shared<SynchronousEvent>(); }

void Backend::copy_device_to_device(const Storage& src, std::size_t src_offset, Storage& dst,
                                    std::size_t dst_offset, std::size_t bytes, Stream& stream) {
  check_range(src, src_offset, bytes, "copy_device_to_device: the source range");
  check_range(dst, dst_offset, bytes, "copy_device_to_device: the destination range");
  stream.synchronize();
  std::unique_ptr<HostBuffer> staging = allocate_host_staging(bytes);
  copy_to_host(src, src_offset, staging->data(), bytes);
  copy_from_host(dst, dst_offset, staging->data(), bytes);
}
void Backend::copy_from_host_async(Storage& storage, std::size_t offset, const void* src,
                                   std::size_t bytes, Stream&) {
  copy_from_host(storage, offset, src, bytes);
}
void Backend::copy_to_host_async(const Storage& storage, std::size_t offset, void* dst,
                                 std::size_t bytes, Stream&) {
  copy_to_host(storage, offset, dst, bytes);
}
std::unique_ptr<HostBuffer> Backend::allocate_host_staging(std::size_t bytes) {
  return std::make_unique<HeapHostBuffer>(bytes);
}

Stream& Backend::current_stream() {
  if (g_stream_guards.load(std::memory_order_relaxed) == 0) return default_stream();
  for (auto it = t_stream_stack.rbegin(); it != t_stream_stack.rend(); ++it) {
    if (it->first == this) return *it->second;
  }
  return default_stream();
}

StreamGuard::StreamGuard(Stream& stream) : backend_(&stream.backend()), stream_(&stream) {
  t_stream_stack.emplace_back(backend_, &stream);
  g_stream_guards.fetch_add(1, std::memory_order_relaxed);
}
StreamGuard::~StreamGuard() {
  g_stream_guards.fetch_sub(1, std::memory_order_relaxed);
  // Guards nest on a thread; remove this one's entry (the innermost for its backend).
  for (auto it = t_stream_stack.rbegin(); it != t_stream_stack.rend(); ++it) {
    if (it->first == backend_ && it->second == stream_) {
      t_stream_stack.erase(std::next(it).base());
      return;
    }
  }
}

Stream::~Stream() = default;
Event::~Event() = default;
HostBuffer::~HostBuffer() = default;

// ---- Dispatch ----

void KernelDispatch::throw_unimplemented(Backend& backend, const OpDef& op) {
  throw Unimplemented(std::string("op ") + op.info.name + " is not implemented on device " +
                      backend.device_name());
}

void check_backend_kernels(Backend& backend) {
  ensure_core_composites();
  std::map<std::string, int> seen;
  for (const KernelRegistration& k : backend.kernels()) {
    if (k.op == nullptr || k.fn == nullptr) {
      throw PluginError(backend_label(backend) +
                        " registers a kernel without an op name or "
                        "function");
    }
    if (++seen[k.op] > 1) {
      throw PluginError(backend_label(backend) + " registers two kernels for op '" + k.op + "'");
    }
    if ((k.flags & kFusedComposite) != 0) continue;
    const OpDef* def = find_op_def(k.op);
    if (def == nullptr || def->composite != nullptr) {
      throw PluginError(backend_label(backend) + " registers a kernel for '" + k.op +
                        "', which this core (Trainyard " TRAINYARD_VERSION_STRING
                        ") does not declare as an op" +
                        (def != nullptr ? " (it is a composite: register its kernel with "
                                          "kFusedComposite)"
                                        : ""));
    }
  }
}

// ---- Declarations ----

const OpDef& register_composite_def(const OpInfo& info, const Composite* composite) {
  OpTable& table = OpTable::get();
  std::lock_guard<std::mutex> lock(table.mutex());
  if (OpDef* old = table.find_any(info.name); old != nullptr && OpTable::withdrawn(old)) {
    old->info = info;  // declared again: same number, so kernels bound by name stay right
    old->composite = composite;
    return *old;
  }
  auto* def = new OpDef{info};  // lives as long as the process, as the table does
  def->composite = composite;
  try {
    table.add(def);
  } catch (...) {
    delete def;
    throw;
  }
  return *def;
}

void withdraw_composite_def(const OpDef& def) {
  OpTable& table = OpTable::get();
  std::lock_guard<std::mutex> lock(table.mutex());
  if (OpDef* found = table.find_any(def.info.name); found == &def) found->composite = nullptr;
}

const OpDef* find_op_def(std::string_view name) {
  OpTable& table = OpTable::get();
  std::lock_guard<std::mutex> lock(table.mutex());
  return table.find(name);
}

std::vector<OpInfo> declared_ops() {
  ensure_core_composites();
  OpTable& table = OpTable::get();
  std::lock_guard<std::mutex> lock(table.mutex());
  std::vector<OpInfo> out;
  for (const OpDef* def : table.all()) out.push_back(def->info);
  return out;
}

const OpInfo* find_op(std::string_view name) {
  ensure_core_composites();
  const OpDef* def = find_op_def(name);
  return def == nullptr ? nullptr : &def->info;
}

}  // namespace trainyard
