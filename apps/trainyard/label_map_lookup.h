// A label map as the Object Detection API's dataset scripts and decoder use it: a class name to
// its id, with an error a user can act on for a name the map lacks.
#ifndef TRAINYARD_APPS_TRAINYARD_LABEL_MAP_LOOKUP_H_
#define TRAINYARD_APPS_TRAINYARD_LABEL_MAP_LOOKUP_H_

#include <cstdint>
#include <string>
#include <unordered_map>

#include "trainyard/pkg/detection/label_map.h"

namespace trainyard::app {

class LabelMapLookup {
 public:
  enum class Match {
    // An item's `name` (label_map_util.get_label_map_dict(path), as create_pascal_tf_record).
    kName,
    // An item's `name` or its `display_name`, the larger id where both match (tf_example_decoder's
    // _ClassTensorHandler: tf.maximum of the two tables' lookups of image/object/class/text).
    kNameOrDisplayName,
  };

  // Loads the label map `path` with pkg/detection's parser (its errors name the file and line).
  LabelMapLookup(const std::string& path, Match match);

  // The id of `name`. Throws InvalidArgument "<where>: class '<name>' is not in the label map
  // <path> (its classes: ...; did you mean '...'?)".
  int32_t id(const std::string& name, const std::string& where) const;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  Match match_;
  detection::LabelMap map_;
  std::unordered_map<std::string, int32_t> by_name_;
  std::unordered_map<std::string, int32_t> by_display_name_;
};

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_LABEL_MAP_LOOKUP_H_
