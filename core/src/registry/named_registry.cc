// The process-wide named tables (named_registry.h): one map per table of names to the stack of
// entries that hold them, and the registrations' ids to find an entry again on removal.
#include "trainyard/named_registry.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "platform/library_of.h"
#include "trainyard/error.h"

namespace trainyard {

struct NamedTables {
  struct Entry {
    uint64_t id = 0;
    std::string value_type;
    std::shared_ptr<const void> value;
    NameSharing sharing = NameSharing::kExclusive;
    std::string library;
  };
  struct Table {
    std::string family;
    std::map<std::string, std::vector<Entry>, std::less<>> names;  // no empty stacks
  };

  static NamedTables& get() {
    static auto* tables = new NamedTables();  // never destroyed: outlives static destructors
    return *tables;
  }

  std::mutex mutex;
  std::map<std::string, Table, std::less<>> tables;
  std::map<uint64_t, std::pair<std::string, std::string>> where;  // id -> (table, name)
  uint64_t next_id = 1;

  static NamedRegistration make(uint64_t id) { return NamedRegistration(id); }

  void remove(uint64_t id) {
    std::shared_ptr<const void> dropped;  // destroyed after the lock is released
    std::lock_guard<std::mutex> lock(mutex);
    auto at = where.find(id);
    if (at == where.end()) return;
    auto table = tables.find(at->second.first);
    if (table != tables.end()) {
      auto stack = table->second.names.find(at->second.second);
      if (stack != table->second.names.end()) {
        std::vector<Entry>& entries = stack->second;
        for (auto it = entries.begin(); it != entries.end(); ++it) {
          if (it->id == id) {
            dropped = std::move(it->value);
            entries.erase(it);
            break;
          }
        }
        if (entries.empty()) table->second.names.erase(stack);
      }
    }
    where.erase(at);
  }
};

NamedRegistration& NamedRegistration::operator=(NamedRegistration&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

NamedRegistration::~NamedRegistration() { reset(); }

void NamedRegistration::reset() noexcept {
  if (id_ == 0) return;
  NamedTables::get().remove(id_);
  id_ = 0;
}

namespace named_registry {
namespace {

std::string type_mismatch(const NamedTables::Table& table, std::string_view name,
                          const NamedTables::Entry& held, std::string_view asked) {
  return "the " + table.family + " '" + std::string(name) + "' is registered by " + held.library +
         " as a " + held.value_type + ", but is asked for as a " + std::string(asked) +
         " (the libraries were built against different headers)";
}

}  // namespace

NamedRegistration add(std::string_view table_key, std::string_view family,
                      std::string_view value_type, std::string name,
                      std::shared_ptr<const void> value, NameSharing sharing) {
  const std::string library = library_of(__builtin_return_address(0));
  if (name.empty()) throw InvalidArgument("a " + std::string(family) + " needs a name");
  if (value == nullptr) {
    throw InvalidArgument("the " + std::string(family) + " '" + name + "' has no value");
  }
  NamedTables& tables = NamedTables::get();
  std::lock_guard<std::mutex> lock(tables.mutex);
  auto [table_it, created] = tables.tables.try_emplace(std::string(table_key));
  NamedTables::Table& table = table_it->second;
  if (created || table.family.empty()) table.family = std::string(family);
  std::vector<NamedTables::Entry>& stack = table.names[name];
  if (!stack.empty()) {
    const NamedTables::Entry& held = stack.front();
    if (held.value_type != value_type) {
      throw InvalidArgument(type_mismatch(table, name, held, value_type));
    }
    if (held.sharing == NameSharing::kExclusive || sharing == NameSharing::kExclusive) {
      throw InvalidArgument("the " + table.family + " '" + name + "' is already registered (by " +
                            held.library + "); " + library + " cannot register it again");
    }
  }
  const uint64_t id = tables.next_id++;
  stack.push_back({id, std::string(value_type), std::move(value), sharing, library});
  tables.where.emplace(id, std::make_pair(std::string(table_key), std::move(name)));
  return NamedTables::make(id);
}

std::shared_ptr<const void> find(std::string_view table_key, std::string_view value_type,
                                 std::string_view name) {
  NamedTables& tables = NamedTables::get();
  std::lock_guard<std::mutex> lock(tables.mutex);
  auto table = tables.tables.find(table_key);
  if (table == tables.tables.end()) return nullptr;
  auto stack = table->second.names.find(name);
  if (stack == table->second.names.end()) return nullptr;
  const NamedTables::Entry& held = stack->second.front();
  if (held.value_type != value_type) {
    throw InvalidArgument(type_mismatch(table->second, name, held, value_type));
  }
  return held.value;
}

std::vector<std::string> names(std::string_view table_key) {
  NamedTables& tables = NamedTables::get();
  std::lock_guard<std::mutex> lock(tables.mutex);
  std::vector<std::string> out;
  auto table = tables.tables.find(table_key);
  if (table == tables.tables.end()) return out;
  for (const auto& [name, stack] : table->second.names) out.push_back(name);
  return out;
}

std::string owner(std::string_view table_key, std::string_view name) {
  NamedTables& tables = NamedTables::get();
  std::lock_guard<std::mutex> lock(tables.mutex);
  auto table = tables.tables.find(table_key);
  if (table == tables.tables.end()) return "";
  auto stack = table->second.names.find(name);
  return stack == table->second.names.end() ? "" : stack->second.front().library;
}

}  // namespace named_registry
}  // namespace trainyard
