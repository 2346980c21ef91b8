// libFuzzer target for the label map reader, parse_label_map (pkg/detection/src/label_map.cc):
// the StringIntLabelMap text format (comments, quotes, escapes, separators, `<...>` messages,
// the ignored LVIS and hierarchy fields), its bounds and label_map_util's validation.
//
// The input is a label map's text. A rejection must be ConfigError naming the source. An
// accepted map has ids >= 0, id 0 only for the background, no two items with the same id, name
// or display name; printed back to the text format (every byte escaped) it must parse to the
// same items.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/label_map.h"

namespace trainyard::fuzz {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\%03o", c);
    out += buf;
  }
  return out + "\"";
}

std::string print(const detection::LabelMap& map) {
  std::string out;
  for (const detection::LabelMapItem& item : map.items) {
    out += "item {\n  name: " + quoted(item.name) + "\n  id: " + std::to_string(item.id) + "\n";
    if (item.has_display_name) out += "  display_name: " + quoted(item.display_name) + "\n";
    out += "}\n";
  }
  return out;
}

}  // namespace
}  // namespace trainyard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  using namespace trainyard::fuzz;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  detection::LabelMap map;
  try {
    map = detection::parse_label_map(input, "label_map.pbtxt");
  } catch (const ConfigError& e) {
    FUZZ_CHECK(std::string(e.what()).starts_with("label_map.pbtxt"),
               std::string("error without the source's name: ") + e.what());
    return 0;
  }
  std::set<int32_t> ids;
  std::set<std::string> names;
  for (const detection::LabelMapItem& item : map.items) {
    FUZZ_CHECK(item.id >= 0, "id " + std::to_string(item.id) + " accepted");
    FUZZ_CHECK(item.id != 0 || item.name == "background" || item.display_name == "background",
               "id 0 accepted for '" + item.name + "'");
    FUZZ_CHECK(ids.insert(item.id).second, "duplicate id " + std::to_string(item.id));
    FUZZ_CHECK(names.insert(item.name).second, "duplicate name '" + item.name + "'");
    FUZZ_CHECK(item.name.size() <= detection::kMaxLabelNameBytes, "name over the bound");
  }
  const std::string printed = print(map);
  detection::LabelMap again;
  try {
    again = detection::parse_label_map(printed, "printed");
  } catch (const ConfigError& e) {
    FUZZ_CHECK(false, std::string("the printed map does not parse: ") + e.what());
  }
  FUZZ_CHECK(again.items.size() == map.items.size(), "the printed map has another item count");
  for (std::size_t i = 0; i < map.items.size(); ++i) {
    const detection::LabelMapItem& a = map.items[i];
    const detection::LabelMapItem& b = again.items[i];
    FUZZ_CHECK(a.name == b.name && a.id == b.id && a.display_name == b.display_name &&
                   a.has_display_name == b.has_display_name,
               "item " + std::to_string(i) + " reads back differently");
  }
  return 0;
}
