// pkg/detection label maps: the StringIntLabelMap text format as protobuf's parser takes it
// (comments, quotes, escapes, field order, separators, `<...>` messages), label_map_util's
// validation and lookups, and every error path, each naming the file and the line.
#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "trainyard/error.h"
#include "trainyard/pkg/detection/label_map.h"

namespace trainyard::detection {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

LabelMap parse(const std::string& text) { return parse_label_map(text, "map.pbtxt"); }

// The ConfigError message parse() throws for `text`, "" when it parses.
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LabelMapTest, ParsesTheApiTextFormat) {
  const LabelMap map = parse(R"(# COCO, first classes
item {
  name: "/m/01g317"
  id: 1
  display_name: "person"
}
item { id: 2 display_name: 'bicycle' name: '/m/0199g' }  # fields in any order
item: { name: "car", id: 0x3; }
item < name: "a" "b" id: 04 >
)");
  ASSERT_EQ(map.items.size(), 4u);
  EXPECT_EQ(map.source, "map.pbtxt");
  EXPECT_EQ(map.items[0].name, "/m/01g317");
  EXPECT_EQ(map.items[0].id, 1);
  EXPECT_EQ(map.items[0].display_name, "person");
  EXPECT_TRUE(map.items[0].has_display_name);
  EXPECT_EQ(map.items[0].line, 2);
  EXPECT_EQ(map.items[1].name, "/m/0199g");
  EXPECT_EQ(map.items[1].display_name, "bicycle");
  EXPECT_EQ(map.items[1].line, 7);
  EXPECT_EQ(map.items[2].name, "car");
  EXPECT_EQ(map.items[2].id, 3);
  EXPECT_FALSE(map.items[2].has_display_name);
  EXPECT_EQ(map.items[3].name, "ab");  // adjacent literals join
  EXPECT_EQ(map.items[3].id, 4);       // octal
}

TEST(LabelMapTest, UnescapesStrings) {
  const LabelMap map =
      parse(R"(item { name: "q\"\'\\\n\t\x41\101\u00e9\U0001F600" id: 1 display_name: 'it\'s' })");
  EXPECT_EQ(map.items[0].name, "q\"'\\\n\tAA\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(map.items[0].display_name, "it's");
}

TEST(LabelMapTest, AcceptsAndIgnoresTheLvisAndHierarchyFields) {
  const LabelMap map = parse(R"(item {
  name: "a" id: 1 ancestor_ids: 5 ancestor_ids: [6, 7] descendant_ids: []
  frequency: RARE instance_count: 12
}
item { name: "b" id: 2 frequency: 2 })");
  ASSERT_EQ(map.items.size(), 2u);
  EXPECT_EQ(map.items[1].name, "b");
}

TEST(LabelMapTest, EmptyTextIsAnEmptyMap) {
  EXPECT_TRUE(parse("").items.empty());
  EXPECT_TRUE(parse("  # only a comment\n").items.empty());
}

TEST(LabelMapTest, BackgroundMayHaveIdZero) {
  const LabelMap map = parse(R"(item { name: "background" id: 0 }
item { name: "/m/x" display_name: "background2" id: 1 }
)");
  EXPECT_EQ(map.items[0].id, 0);
  // A display name "background" also allows id 0, as label_map_util checks either.
  EXPECT_EQ(error_of(R"(item { name: "/m/bg" display_name: "background" id: 0 })"), "");
  // The background is left out of the categories.
  const std::vector<Category> categories = label_map_categories(map);
  ASSERT_EQ(categories.size(), 1u);
  EXPECT_EQ(categories[0].id, 1);
  EXPECT_EQ(categories[0].name, "background2");
}

TEST(LabelMapTest, Lookups) {
  const LabelMap map = parse(R"(item { name: "/m/01g317" id: 1 display_name: "person" }
item { name: "/m/0199g" id: 7 display_name: "bicycle" }
item { name: "car" id: 3 })");
  const auto by_name = label_map_dict(map);
  EXPECT_EQ(by_name.at("/m/01g317"), 1);
  EXPECT_EQ(by_name.at("car"), 3);
  EXPECT_EQ(by_name.count("person"), 0u);
  const auto by_display = label_map_dict(map, /*use_display_name=*/true);
  EXPECT_EQ(by_display.at("person"), 1);
  EXPECT_EQ(by_display.at("car"), 3);  // no display_name: its name
  EXPECT_EQ(label_map_id(map, "bicycle", true), 7);
  EXPECT_EQ(label_map_id(map, "bicycle", false), std::nullopt);
  EXPECT_EQ(label_map_name(map, 7), "bicycle");
  EXPECT_EQ(label_map_name(map, 7, false), "/m/0199g");
  EXPECT_EQ(label_map_item(map, 2), nullptr);
  try {
    label_map_name(map, 2);
    ADD_FAILURE() << "no NotFound";
  } catch (const NotFound& e) {
    EXPECT_THAT(e.what(), HasSubstr("map.pbtxt has no id 2; its ids are 1..7 (3 items)"));
  }
  EXPECT_EQ(label_map_max_id(map), 7);
  const std::vector<Category> categories = label_map_categories(map, false);
  ASSERT_EQ(categories.size(), 3u);
  EXPECT_EQ(categories[1].id, 7);
  EXPECT_EQ(categories[1].name, "/m/0199g");
}

TEST(LabelMapTest, SyntaxErrorsNameTheFileAndLine) {
  const struct {
    const char* text;
    const char* error;
  } cases[] = {
      {"items { }", "map.pbtxt:1: StringIntLabelMap has no field 'items'"},
      {"\n\n{ }", "map.pbtxt:3: expected a field name (item), found '{'"},
      {"item name", "map.pbtxt:1: expected '{' after 'item', found 'name'"},
      {"item {\n name: \"a\"\n id: 1\n", "map.pbtxt:1: item is not closed with '}'"},
      {"item < name: \"a\" id: 1 }", "expected a field name or '>' in item, found '}'"},
      {"item {\n\n keypoints { id: 0 label: \"nose\" } }",
       "map.pbtxt:3: StringIntLabelMapItem field 'keypoints' is not supported"},
      {"item { colour: \"red\" }", "StringIntLabelMapItem has no field 'colour'"},
      {"item { name \"a\" }", "expected ':' after 'name', found a string"},
      {"item { name: 5 }", "field 'name' takes a string, found '5'"},
      {"item { id: \"5\" }", "field 'id' takes an integer, found a string"},
      {"item { id: 1.5 }", "field 'id' takes an integer, found '1.5'"},
      {"item { id: 09 }", "field 'id' takes an integer, found '09'"},
      {"item { id: - }", "field 'id' takes an integer, found '-'"},
      {"item { id: 2147483648 }", "field 'id': 2147483648 is out of int32 range"},
      {"item { id: 99999999999999999999999 }", "is out of int32 range"},
      {"item {\n name: \"a\" id: 1\n name: \"b\" }",
       "map.pbtxt:3: StringIntLabelMapItem field 'name' given twice (first on line 2)"},
      {"item { name: \"a\" id: 1 id: 2 }", "field 'id' given twice"},
      {"item { display_name: \"a\" display_name: \"b\" }", "field 'display_name' given twice"},
      {"item { name: \"a }", "map.pbtxt:1: string literal is not closed before the end of"},
      {"item { name: \"a\nb\" }", "string literal is not closed"},
      {"item { name: \"a\\", "string literal ends in a lone backslash"},
      {"item { name: \"\\q\" }", "invalid escape sequence \\q"},
      {"item { name: \"\\x\" }", "\\x escape without hex digits"},
      {"item { name: \"\\u12\" }", "\\u escape needs 4 hex digits"},
      {"item { name: \"\\uD800\" }", "\\u escape is not a Unicode code point"},
      {"item { name: \"\\777\" }", "octal escape above \\377"},
      {"item { name: \"a\" id: 1 } @", "unexpected character '@'"},
      {"item { name: \"a\" id: 1 } \x01", "unexpected byte 0x01"},
      {"item { ancestor_ids: [1 2] }", "expected ',' or ']' in the list of 'ancestor_ids'"},
      {"item { frequency: SOMETIMES }", "field 'frequency' takes UNSPECIFIED, FREQUENT"},
      {"item { frequency: 9 }", "field 'frequency': 9 is not a LVISFrequency value"},
      {"item { instance_count: 1 instance_count: 2 }", "field 'instance_count' given twice"},
  };
  for (const auto& c : cases) {
    const std::string error = error_of(c.text);
    EXPECT_THAT(error, HasSubstr(c.error)) << "text: " << c.text;
    EXPECT_THAT(error, StartsWith("map.pbtxt:")) << "text: " << c.text;
  }
}

TEST(LabelMapTest, ValidationErrorsNameBothItems) {
  EXPECT_THAT(error_of("item { name: \"a\" id: -1 }"),
              HasSubstr("map.pbtxt:1: label map ids must be >= 0, item 'a' has id -1"));
  EXPECT_THAT(error_of("item { name: \"a\" }"),
              HasSubstr("map.pbtxt:1: label map id 0 is reserved for the background label, "
                        "item 'a' has it"));
  EXPECT_THAT(error_of("item { name: \"a\" id: 1 }\n\nitem { name: \"b\" id: 1 }"),
              HasSubstr("map.pbtxt:3: duplicate id 1: item 'b' and item 'a' (the item on line "
                        "1)"));
  EXPECT_THAT(error_of("item { name: \"a\" id: 1 }\nitem { name: \"a\" id: 2 }"),
              HasSubstr("map.pbtxt:2: duplicate name 'a': item with id 2 and item with id 1 "
                        "(the item on line 1)"));
  EXPECT_THAT(error_of("item { name: \"a\" id: 1 display_name: \"x\" }\n"
                       "item { name: \"b\" id: 2 display_name: \"x\" }"),
              HasSubstr("map.pbtxt:2: duplicate display name 'x'"));
  EXPECT_THAT(error_of("item { name: \"a\" id: 1 display_name: \"b\" }\n"
                       "item { name: \"b\" id: 2 }"),
              HasSubstr("duplicate display name 'b'"));
}

TEST(LabelMapTest, BoundsAreChecked) {
  std::string many;
  for (std::size_t i = 0; i <= kMaxLabelMapItems; ++i) many += "item{}";
  EXPECT_THAT(error_of(many), HasSubstr("more than 100000 items in the label map"));
  const std::string long_name(kMaxLabelNameBytes + 1, 'n');
  EXPECT_THAT(error_of("item { name: \"" + long_name + "\" id: 1 }"),
              HasSubstr("map.pbtxt:1: string longer than 4096 bytes"));
  EXPECT_THAT(error_of("item { " + long_name + ": 1 }"), HasSubstr("identifier too long"));
  EXPECT_THAT(error_of("item { id: 1" + std::string(80, '0') + " }"), HasSubstr("number too long"));
  const std::string huge(kMaxLabelMapBytes + 1, ' ');
  EXPECT_THAT(error_of(huge), HasSubstr("map.pbtxt: label map of 16777217 bytes is larger"));
}

TEST(LabelMapTest, LoadsFilesAndNamesThemInErrors) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("label_map_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.pbtxt").string();
  const std::string bad = (dir / "bad.pbtxt").string();
  std::ofstream(good) << "item { name: \"cat\" id: 1 }\n";
  std::ofstream(bad) << "item { name: \"cat\" id: 1 }\nitem { name: \"dog\" }\n";
  const LabelMap map = load_label_map(good);
  EXPECT_EQ(map.source, good);
  EXPECT_EQ(map.items.at(0).name, "cat");
  try {
    load_label_map(bad);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), StartsWith(bad + ":2: label map id 0 is reserved"));
  }
  try {
    load_label_map((dir / "missing.pbtxt").string());
    ADD_FAILURE() << "no NotFound";
  } catch (const NotFound& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot open label map " + (dir / "missing.pbtxt").string()));
  }
  std::filesystem::remove_all(dir);
}

// A FIFO as label_map_path blocked `open` forever (and the run ignored SIGTERM in it): it is
// refused at once, naming it. alarm(): a blocking open ends the test with SIGALRM.
TEST(LabelMapTest, AFifoIsRefusedWithoutBlocking) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("label_map_fifo_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "label_map.pbtxt").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ::alarm(10);
  try {
    load_label_map(fifo);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "label map " + fifo + " is a FIFO, not a regular file; it was not read");
  }
  ::alarm(0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainyard::detection
