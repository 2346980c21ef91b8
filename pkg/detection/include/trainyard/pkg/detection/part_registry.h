// A table of the parts of one family (SSD feature extractors, box predictors, box coders, ...)
// by the name a pipeline.config gives them, as the Object Detection API's builders map a config
// value or oneof choice to a class (builders/model_builder.py's SSD_FEATURE_EXTRACTOR_CLASS_MAP,
// box_predictor_builder.py, box_coder_builder.py).
//
// A meta-architecture asks the registry for the factory of the name its config holds and never
// branches on the name, so a new part is a new file and a registration, with no
// meta-architecture edit. Adding and finding are thread-safe; a Factory is copied out of the
// table, so removing a name does not invalidate a factory already found.
//
// Errors: find() of an unknown name throws InvalidArgument naming the owner, the config field,
// the value and the registered names ("SSDMetaArch: feature_extractor.type is
// 'ssd_mobilenet_v2', which is not a registered SSD feature extractor; registered:
// ssd_mobilenet_v1"); add() of a name already there throws InvalidArgument naming the family.
#ifndef TRAINYARD_PKG_DETECTION_PART_REGISTRY_H_
#define TRAINYARD_PKG_DETECTION_PART_REGISTRY_H_

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainyard/error.h"

namespace trainyard::detection {

template <class Factory>
class PartRegistry {
 public:
  // `family` names one part in messages: "SSD feature extractor".
  explicit PartRegistry(std::string family) : family_(std::move(family)) {}
  PartRegistry(const PartRegistry&) = delete;
  PartRegistry& operator=(const PartRegistry&) = delete;

  const std::string& family() const { return family_; }

  void add(const std::string& name, Factory factory) {
    if (name.empty()) throw InvalidArgument("a " + family_ + " needs a name");
    std::lock_guard<std::mutex> lock(mutex_);
    if (!factories_.emplace(name, std::move(factory)).second) {
      throw InvalidArgument("the " + family_ + " '" + name + "' is already registered");
    }
  }

  // Removes `name`; returns whether it was there.
  bool remove(std::string_view name) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = factories_.find(name);
    if (it == factories_.end()) return false;
    factories_.erase(it);
    return true;
  }

  bool contains(std::string_view name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return factories_.find(name) != factories_.end();
  }

  // The factory registered as `name`, the value of config field `field` of the model `owner`.
  Factory find(std::string_view owner, std::string_view field, std::string_view name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = factories_.find(name);
    if (it != factories_.end()) return it->second;
    std::string list;
    for (const auto& [registered, factory] : factories_) {
      list += (list.empty() ? "" : ", ") + registered;
    }
    throw InvalidArgument(std::string(owner) + ": " + std::string(field) + " is '" +
                          std::string(name) + "', which is not a registered " + family_ +
                          "; registered: " + (list.empty() ? "none" : list));
  }

  // The registered names, sorted.
  std::vector<std::string> names() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    out.reserve(factories_.size());
    for (const auto& [name, factory] : factories_) out.push_back(name);
    return out;
  }

 private:
  std::string family_;
  mutable std::mutex mutex_;
  std::map<std::string, Factory, std::less<>> factories_;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_PART_REGISTRY_H_
