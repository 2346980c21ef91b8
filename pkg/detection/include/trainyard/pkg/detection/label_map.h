// The Object Detection API's label map: a `StringIntLabelMap` in protobuf text format
// (protos/string_int_label_map.proto), read without a protobuf dependency, and the lookups of
// utils/label_map_util.py.
//
//   # COCO's first two classes
//   item { name: "/m/01g317" id: 1 display_name: "person" }
//   item { name: '/m/0199g' id: 2 display_name: "bicycle" }
//
// The text format as protobuf's parser takes it for this message: `#` comments; fields in any
// order, optionally separated by `,` or `;`; `item {...}`, `item: {...}` or `item <...>`;
// strings in single or double quotes with C escapes (\n \t \\ \' \" \xHH, octal \NNN, \uXXXX,
// \UXXXXXXXX) and adjacent literals concatenated; integers in decimal, 0x hex or 0 octal.
// StringIntLabelMapItem fields: `name`, `id`, `display_name` are read; `ancestor_ids`,
// `descendant_ids` (repeated int32, `[a, b]` lists allowed), `frequency` (LVIS: FREQUENT,
// COMMON, RARE or its number) and `instance_count` (int32) are checked and ignored; `keypoints`
// (keypoint label maps) and every other field are an error naming the field. A singular field
// given twice is an error, as protobuf's parser makes it. The binary encoding, which
// label_map_util falls back to, is not read.
//
// Validation, as label_map_util._validate_label_map plus the uniqueness the lookups rely on:
// every id >= 0; id 0 is the background and only an item whose name or display_name is
// "background" may have it; two items with the same id, the same name or the same display name
// (an item without one uses its name) are an error naming both items' lines. A missing id is 0,
// a missing name is "" (as the proto's defaults).
//
// Untrusted files: the text is bounded (kMaxLabelMapBytes, kMaxLabelMapItems, kMaxLabelNameBytes).
// Every problem throws trainyard::ConfigError "<name_for_errors>:<line>: <what>"; a file that
// cannot be opened throws trainyard::NotFound naming it. Thread-safe: no state is shared.
#ifndef TRAINYARD_PKG_DETECTION_LABEL_MAP_H_
#define TRAINYARD_PKG_DETECTION_LABEL_MAP_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace trainyard::detection {

inline constexpr std::size_t kMaxLabelMapBytes = std::size_t{16} << 20;
inline constexpr std::size_t kMaxLabelMapItems = 100000;
inline constexpr std::size_t kMaxLabelNameBytes = 4096;

struct LabelMapItem {
  std::string name;
  int32_t id = 0;
  std::string display_name;
  bool has_display_name = false;
  int line = 0;  // of its `item` keyword, for messages

  // display_name when use_display_name and the item has one, name otherwise (as
  // label_map_util.convert_label_map_to_categories picks it).
  const std::string& label(bool use_display_name) const {
    return use_display_name && has_display_name ? display_name : name;
  }
};

struct LabelMap {
  std::string source;               // the file name (or name_for_errors)
  std::vector<LabelMapItem> items;  // in file order, validated as above
};

// One evaluation category, as label_map_util.create_categories_from_labelmap returns them.
struct Category {
  int64_t id = 0;
  std::string name;
};

LabelMap parse_label_map(std::string_view text, const std::string& name_for_errors);
LabelMap load_label_map(const std::string& path);

// label_map_util.get_label_map_dict: label (see LabelMapItem::label) -> id.
std::unordered_map<std::string, int32_t> label_map_dict(const LabelMap& map,
                                                        bool use_display_name = false);

// The id of `label`, nullopt when no item has it.
std::optional<int32_t> label_map_id(const LabelMap& map, std::string_view label,
                                    bool use_display_name = false);

// The item with `id`, nullptr when there is none.
const LabelMapItem* label_map_item(const LabelMap& map, int32_t id);

// The label of `id`; throws NotFound naming the map and the ids it has when there is none.
const std::string& label_map_name(const LabelMap& map, int32_t id, bool use_display_name = true);

// The largest id (label_map_util.get_max_label_map_index); 0 for an empty map.
int32_t label_map_max_id(const LabelMap& map);

// label_map_util.create_categories_from_labelmap: the items with id >= 1 (the background is
// left out) in file order, named by their label.
std::vector<Category> label_map_categories(const LabelMap& map, bool use_display_name = true);

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_LABEL_MAP_H_
