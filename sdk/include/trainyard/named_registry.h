// Process-wide tables of named values (factories, builders) that every library of the process
// sees, each entry owned by the library that added it, as PyTorch's TORCH_LIBRARY registrations
// are: a plugin adds a feature extractor by name, and a meta-architecture in another plugin
// finds it. Typed views live where the value types are (pkg/detection's PartRegistry); this is
// the untyped contract they share, implemented by the core.
//
// Ownership. add() returns a NamedRegistration, the adder's hold on the entry: the entry is in
// the table while it lives, and destroying it removes the entry. A library keeps its
// registrations in its own static storage, so they are destroyed when the library is closed
// (static destructors run at dlclose, while its code is still mapped): the entries of an
// unloaded plugin are gone, and loading it again adds them afresh.
//
// Sharing. A static pkg/ library linked into several plugins adds its own entries once per copy.
// Such entries are added with NameSharing::kShared: copies of one name then stack, find() gives
// the earliest live one, and the name stays while any copy holds it. A kExclusive entry (what a
// plugin adds for itself) refuses a name that is already there, and is refused by one that is.
//
// Values are type-erased; `value_type` (the typeid name of the typed view's value) is checked
// on add and find, so two libraries that disagree on a value's type get InvalidArgument naming
// the table, the name and both types instead of a bad cast. A value found is a shared_ptr: the
// caller keeps the object alive, but its code belongs to the adding library, so nothing made
// from it may outlive that library (as any object a plugin makes must not).
//
// Thread-safe. Errors are InvalidArgument naming the table's family, the name and the library
// that holds it.
#ifndef TRAINYARD_NAMED_REGISTRY_H_
#define TRAINYARD_NAMED_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/export.h"

namespace trainyard {

enum class NameSharing {
  kExclusive,  // the name is this entry's alone
  kShared,     // copies of one static library add the same name with the same value
};

// An owner's hold on one entry. Move-only; destroying it removes the entry.
class TRAINYARD_API NamedRegistration {
 public:
  NamedRegistration() = default;
  NamedRegistration(NamedRegistration&& other) noexcept : id_(other.id_) { other.id_ = 0; }
  NamedRegistration& operator=(NamedRegistration&& other) noexcept;
  NamedRegistration(const NamedRegistration&) = delete;
  NamedRegistration& operator=(const NamedRegistration&) = delete;
  ~NamedRegistration();

  explicit operator bool() const { return id_ != 0; }
  // Removes the entry now (as the destructor does).
  void reset() noexcept;

 private:
  friend struct NamedTables;
  explicit NamedRegistration(uint64_t id) : id_(id) {}
  uint64_t id_ = 0;
};

namespace named_registry {

// Adds `value` as `name` to the table `table` ("detection.ssd_feature_extractor"), whose
// entries `family` names in messages ("SSD feature extractor"). Throws InvalidArgument when
// the name is empty, `value` null, the name taken (see Sharing) or held with another
// value_type. The library that calls add() is named in messages about the entry.
[[nodiscard]] TRAINYARD_API NamedRegistration add(std::string_view table, std::string_view family,
                                                  std::string_view value_type, std::string name,
                                                  std::shared_ptr<const void> value,
                                                  NameSharing sharing);

// The value registered as `name` in `table`, or null when there is none. Throws
// InvalidArgument when it was added with another value_type.
TRAINYARD_API std::shared_ptr<const void> find(std::string_view table, std::string_view value_type,
                                               std::string_view name);

// The names in `table`, sorted.
TRAINYARD_API std::vector<std::string> names(std::string_view table);

// The library holding `name` in `table` ("libtrainyard_models.so"), empty when none does.
TRAINYARD_API std::string owner(std::string_view table, std::string_view name);

}  // namespace named_registry
}  // namespace trainyard

#endif  // TRAINYARD_NAMED_REGISTRY_H_
