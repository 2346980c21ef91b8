// The oneDNN state the CPU kernels share: one CPU engine, a stream per calling thread, and a
// cache of primitives keyed by everything that determines them (op, dtype, shapes, attributes),
// so that a steady-state training step creates no primitive.
//
// Thread safety: every member may be called from several threads. Cached entries are immutable
// once created and are shared by the threads that execute them (oneDNN primitives may execute
// concurrently); each thread executes on its own stream, with its own scratchpad. Primitives
// are created with a user-managed scratchpad (dnnl_attr() in kernels_dnnl.h): oneDNN's own is
// sized in the creating thread, so a primitive cached by one thread and run by another overran
// the runner's.
#ifndef TRAINYARD_BACKENDS_CPU_DNNL_CONTEXT_H_
#define TRAINYARD_BACKENDS_CPU_DNNL_CONTEXT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>

#include "oneapi/dnnl/dnnl.hpp"
#include "trainyard/op.h"

namespace trainyard::cpu {

// What identifies a cached primitive: the op first, then the integers (dtype, dims, attributes)
// that the op's kernel adds. Fixed capacity, so building one allocates nothing.
class PrimitiveKey {
 public:
  static constexpr std::size_t kCapacity = 40;

  // `op` is the op's name, a string with static storage (its address is part of the key).
  explicit PrimitiveKey(const char* op) : op_(op) { add(reinterpret_cast<intptr_t>(op)); }

  // Throws Error (an internal error naming the op) when the capacity is exceeded.
  PrimitiveKey& add(int64_t value);
  PrimitiveKey& add(std::span<const int64_t> values);

  std::size_t hash() const;
  friend bool operator==(const PrimitiveKey& a, const PrimitiveKey& b) {
    if (a.size_ != b.size_) return false;
    for (std::size_t i = 0; i < a.size_; ++i) {
      if (a.values_[i] != b.values_[i]) return false;
    }
    return true;
  }

 private:
  const char* op_;
  std::array<int64_t, kCapacity> values_{};
  std::size_t size_ = 0;
};

class DnnlContext {
 public:
  // The process-wide context (created on first use, never destroyed, so that no primitive
  // outlives oneDNN at exit).
  static DnnlContext& get();

  const dnnl::engine& engine() const { return engine_; }
  // The calling thread's stream on engine().
  dnnl::stream& stream();
  // The calling thread's scratchpad for primitives, at least `bytes` long, 64-byte aligned;
  // valid until this thread asks again.
  void* scratchpad(std::size_t bytes);

  // The entry cached under `key`, made by `make()` (which returns an Entry) on first use.
  // Entries of different types must never share a key; the op at the key's front ensures it
  // as long as each op caches one Entry type.
  template <class Entry, class Make>
  std::shared_ptr<const Entry> find_or_create(const PrimitiveKey& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return std::static_pointer_cast<const Entry>(it->second);
    if (cache_.size() >= kMaxEntries) cache_.clear();  // entries in use stay alive
    auto entry = std::make_shared<const Entry>(make());
    cache_.emplace(key, entry);
    return entry;
  }

  // Number of cached entries (for tests: a steady-state step must not grow it).
  std::size_t cached_entries();

 private:
  DnnlContext();

  struct KeyHash {
    std::size_t operator()(const PrimitiveKey& key) const { return key.hash(); }
  };
  static constexpr std::size_t kMaxEntries = 4096;

  dnnl::engine engine_;
  std::mutex mutex_;
  std::unordered_map<PrimitiveKey, std::shared_ptr<const void>, KeyHash> cache_;
};

// Throws trainyard::Error: "<op>: oneDNN failed: <what oneDNN said> (status <n>)".
[[noreturn]] void throw_dnnl_error(const char* op, const dnnl::error& error);

// Runs `fn`, converting oneDNN's errors into trainyard::Error naming the op.
template <class Fn>
void with_dnnl_errors(const char* op, Fn&& fn) {
  try {
    fn();
  } catch (const dnnl::error& error) {
    throw_dnnl_error(op, error);
  }
}

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_DNNL_CONTEXT_H_
