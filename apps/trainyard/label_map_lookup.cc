#include "label_map_lookup.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/names.h"

namespace trainyard::app {

LabelMapLookup::LabelMapLookup(const std::string& path, Match match)
    : path_(path),
      match_(match),
      map_(detection::load_label_map(path)),
      by_name_(detection::label_map_dict(map_, /*use_display_name=*/false)) {
  if (match_ == Match::kNameOrDisplayName) {
    by_display_name_ = detection::label_map_dict(map_, /*use_display_name=*/true);
  }
}

int32_t LabelMapLookup::id(const std::string& name, const std::string& where) const {
  std::optional<int32_t> id;
  for (const auto* table : {&by_name_, &by_display_name_}) {
    const auto found = table->find(name);
    if (found != table->end()) id = std::max(id.value_or(found->second), found->second);
  }
  if (id) return *id;
  std::vector<std::string> names;
  for (const detection::LabelMapItem& item : map_.items) {
    names.push_back(item.name);
    if (match_ == Match::kNameOrDisplayName && item.has_display_name) {
      names.push_back(item.display_name);
    }
  }
  // A map of COCO's or Open Images' size would fill the screen: the first names say what kind
  // of names it holds.
  constexpr std::size_t kShown = 30;
  std::string known = join_names(std::vector<std::string>(
      names.begin(), names.begin() + static_cast<std::ptrdiff_t>(std::min(names.size(), kShown))));
  if (names.size() > kShown) known += ", ... (" + std::to_string(names.size()) + " in all)";
  const std::string nearest = nearest_name(name, names);
  throw InvalidArgument(where + ": class '" + name + "' is not in the label map " + path_ +
                        " (its classes: " + known + ")" +
                        (nearest.empty() ? "" : "; did you mean '" + nearest + "'?"));
}

}  // namespace trainyard::app
