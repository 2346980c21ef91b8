// A table of the parts of one family (SSD feature extractors, box predictors, box coders, ...)
// by the name a pipeline.config gives them, as the Object Detection API's builders map a config
// value or oneof choice to a class (builders/model_builder.py's SSD_FEATURE_EXTRACTOR_CLASS_MAP,
// box_predictor_builder.py, box_coder_builder.py).
//
// A meta-architecture asks the registry for the factory of the name its config holds and never
// branches on the name, so a new part is a new file and a registration, with no
// meta-architecture edit.
//
// One table per family for the whole process. pkg/detection is a static library, so each
// plugin linking it has its own PartRegistry object; every one of them is a typed view of the
// core's process-wide table of that family (trainyard/named_registry.h), so a part a third
// party's plugin adds is found by SSDMetaArch in the models plugin. add() returns the adder's
// NamedRegistration: keep it in the adding library's static storage; the part is removed when
// it is destroyed, which happens when that library is closed. pkg/detection's own parts, added
// by each copy of the library, are added with NameSharing::kShared; a plugin's own parts are
// exclusive. A Factory is copied out of the table, so removing a name does not invalidate a
// factory already found, but the factory's code is the adding library's: nothing built from
// it may outlive that library.
//
// Errors: find() of an unknown name throws InvalidArgument naming the owner, the config field,
// the value and the registered names ("SSDMetaArch: feature_extractor.type is
// 'ssd_mobilenet_v2', which is not a registered SSD feature extractor; registered:
// ssd_mobilenet_v1"); add() of a name already there throws InvalidArgument naming the family
// and the library that holds it.
#ifndef TRAINYARD_PKG_DETECTION_PART_REGISTRY_H_
#define TRAINYARD_PKG_DETECTION_PART_REGISTRY_H_

#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/named_registry.h"

namespace trainyard::detection {

template <class Factory>
class PartRegistry {
 public:
  // `table` keys the process-wide table ("detection.ssd_feature_extractor"); `family` names
  // one part in messages: "SSD feature extractor".
  PartRegistry(std::string table, std::string family)
      : table_(std::move(table)), family_(std::move(family)) {}
  PartRegistry(const PartRegistry&) = delete;
  PartRegistry& operator=(const PartRegistry&) = delete;

  const std::string& family() const { return family_; }

  // Adds `factory` as `name`, held by the returned registration (see above).
  [[nodiscard]] NamedRegistration add(const std::string& name, Factory factory,
                                      NameSharing sharing = NameSharing::kExclusive) const {
    return named_registry::add(table_, family_, typeid(Factory).name(), name,
                               std::make_shared<const Factory>(std::move(factory)), sharing);
  }

  bool contains(std::string_view name) const {
    return named_registry::find(table_, typeid(Factory).name(), name) != nullptr;
  }

  // The factory registered as `name`, the value of config field `field` of the model `owner`.
  Factory find(std::string_view owner, std::string_view field, std::string_view name) const {
    std::shared_ptr<const void> found = named_registry::find(table_, typeid(Factory).name(), name);
    if (found != nullptr) return *static_cast<const Factory*>(found.get());
    std::string list;
    for (const std::string& registered : names()) list += (list.empty() ? "" : ", ") + registered;
    throw InvalidArgument(std::string(owner) + ": " + std::string(field) + " is '" +
                          std::string(name) + "', which is not a registered " + family_ +
                          "; registered: " + (list.empty() ? "none" : list));
  }

  // The registered names, sorted.
  std::vector<std::string> names() const { return named_registry::names(table_); }

 private:
  std::string table_;
  std::string family_;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_PART_REGISTRY_H_
