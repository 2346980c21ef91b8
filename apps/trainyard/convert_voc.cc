#include "convert_voc.h"

#include <boost/property_tree/detail/rapidxml.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <type_traits>
#include <utility>

#include "detection_record.h"
#include "label_map_lookup.h"
#include "record_shards.h"
#include "trainyard/core/progress.h"
#include "trainyard/error.h"
#include "trainyard/user_file.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard::app {
namespace {

namespace fs = std::filesystem;
namespace pt = boost::property_tree;

// A set list of VOC2012 (11,540 trainval ids) is about 200 KB.
constexpr uint64_t kMaxSetListBytes = uint64_t{64} << 20;

// An element of the annotation being read, with its path for messages
// ("annotation/object[2]/bndbox").
struct Element {
  const pt::ptree& node;
  std::string path;
};

class AnnotationReader {
 public:
  explicit AnnotationReader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw DataLoss(source_ + ": " + path + ": " + what);
  }

  // The one child `name` of `parent`; missing or repeated is an error.
  Element child(const Element& parent, const std::string& name) const {
    const std::string path = parent.path + "/" + name;
    const std::size_t count = parent.node.count(name);
    if (count == 0) fail(parent.path, "missing element <" + name + ">");
    if (count > 1) {
      fail(path,
           "appears " + std::to_string(count) + " times in <" + parent.path + ">; expected once");
    }
    return {parent.node.get_child(name), path};
  }

  // The text of a leaf element, without surrounding white space.
  std::string text(const Element& element) const {
    for (const auto& [key, value] : element.node) {
      if (key != "<xmlattr>") fail(element.path, "expected text, found element <" + key + ">");
    }
    return element.node.data();
  }

  std::string text_of(const Element& parent, const std::string& name) const {
    return text(child(parent, name));
  }

  // The text of `parent`'s child `name` as a T: an integer as Python's int() reads it, or a
  // finite number as float() does (a leading '+' allowed, white space trimmed already).
  template <typename T>
  T number_of(const Element& parent, const std::string& name) const {
    const Element element = child(parent, name);
    const std::string value = text(element);
    std::string_view digits = value;
    if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
    T result{};
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), result);
    bool read = !value.empty() && ec == std::errc() && end == digits.data() + digits.size();
    if constexpr (std::is_floating_point_v<T>) read = read && std::isfinite(result);
    if (!read) {
      fail(element.path,
           "'" + value + "' is not " + (std::is_integral_v<T> ? "an integer" : "a finite number"));
    }
    return result;
  }

 private:
  const std::string& source_;
};

constexpr const char* kYears[] = {"VOC2007", "VOC2012", "merged"};
constexpr const char* kSets[] = {"train", "val", "trainval", "test"};

template <std::size_t N>
bool one_of(const std::string& value, const char* const (&choices)[N]) {
  for (const char* choice : choices) {
    if (value == choice) return true;
  }
  return false;
}

// The ids of a set list: the first word of each line that is not blank
// (dataset_util.read_examples_list).
std::vector<std::string> read_set_list(const std::string& path) {
  const std::string text = read_user_file(path, "convert-voc: set list", kMaxSetListBytes);
  std::vector<std::string> ids;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string id;
    if (words >> id) ids.push_back(id);
  }
  return ids;
}

// The elements of an XML document as a property tree (text trimmed, comments left out).
// Boost.PropertyTree's read_xml() runs its RapidXML without parse_validate_closing_tags, so that
// <name>cat</nam> would read as <name>cat</name>: the document is parsed here with that check,
// then turned into the tree by read_xml()'s own node conversion.
pt::ptree parse_xml(std::string_view xml, const std::string& source) {
  namespace rapidxml = pt::detail::rapidxml;
  // RapidXML reads up to a NUL byte: the rest would go unread.
  if (const std::size_t nul = xml.find('\0'); nul != std::string_view::npos) {
    throw DataLoss(source + ":" +
                   std::to_string(std::count(xml.begin(), xml.begin() + nul, '\n') + 1) +
                   ": a NUL byte (offset " + std::to_string(nul) + "; the file is not XML text)");
  }
  std::vector<char> text(xml.begin(), xml.end());
  text.push_back('\0');
  rapidxml::xml_document<char> document;
  try {
    constexpr int kFlags = rapidxml::parse_validate_closing_tags |
                           rapidxml::parse_normalize_whitespace | rapidxml::parse_trim_whitespace;
    document.parse<kFlags>(text.data());
  } catch (const rapidxml::parse_error& e) {
    const auto line = std::count(text.data(), e.where<char>(), '\n') + 1;
    throw DataLoss(source + ":" + std::to_string(line) + ": " + e.what() +
                   " (the file is not well-formed XML)");
  }
  pt::ptree tree;
  for (rapidxml::xml_node<char>* node = document.first_node(); node != nullptr;
       node = node->next_sibling()) {
    pt::xml_parser::read_xml_node(node, tree,
                                  pt::xml_parser::no_comments | pt::xml_parser::trim_whitespace);
  }
  return tree;
}

struct VocItem {
  std::string year;
  std::string id;
};

}  // namespace

VocAnnotation parse_voc_annotation(std::string_view xml, const std::string& source) {
  const pt::ptree tree = parse_xml(xml, source);
  AnnotationReader in(source);
  if (tree.size() != 1 || tree.front().first != "annotation") {
    std::string found = tree.empty() ? std::string("no element") : "<" + tree.front().first + ">";
    if (tree.size() > 1) found = std::to_string(tree.size()) + " top-level elements";
    in.fail("/", "found " + found + "; a VOC annotation is one <annotation> element");
  }
  const Element root{tree.front().second, "annotation"};
  VocAnnotation annotation;
  annotation.folder = in.text_of(root, "folder");
  annotation.filename = in.text_of(root, "filename");
  if (annotation.filename.empty()) in.fail(root.path + "/filename", "is empty");
  const Element size = in.child(root, "size");
  annotation.width = in.number_of<int64_t>(size, "width");
  annotation.height = in.number_of<int64_t>(size, "height");
  if (annotation.width <= 0 || annotation.height <= 0) {
    in.fail(size.path, "the image is " + std::to_string(annotation.width) + " x " +
                           std::to_string(annotation.height) +
                           " pixels; width and height must be positive");
  }
  int index = 0;
  for (const auto& [key, node] : root.node) {
    if (key != "object") continue;
    const Element element{node, root.path + "/object[" + std::to_string(++index) + "]"};
    VocObject object;
    object.name = in.text_of(element, "name");
    object.pose = in.text_of(element, "pose");
    object.truncated = in.number_of<int64_t>(element, "truncated");
    object.difficult = in.number_of<int64_t>(element, "difficult") != 0;
    const Element box = in.child(element, "bndbox");
    object.xmin = in.number_of<double>(box, "xmin");
    object.ymin = in.number_of<double>(box, "ymin");
    object.xmax = in.number_of<double>(box, "xmax");
    object.ymax = in.number_of<double>(box, "ymax");
    annotation.objects.push_back(std::move(object));
  }
  return annotation;
}

ConvertVocSummary convert_voc(const ConvertVocOptions& o) {
  if (o.data_dir.empty()) throw InvalidArgument("convert-voc: --data_dir is required");
  if (!one_of(o.year, kYears)) {
    throw InvalidArgument("convert-voc: --year is '" + o.year +
                          "'; expected VOC2007, VOC2012 or merged");
  }
  if (!one_of(o.set, kSets)) {
    throw InvalidArgument("convert-voc: --set is '" + o.set +
                          "'; expected train, val, trainval or test");
  }
  if (o.label_map_path.empty()) throw InvalidArgument("convert-voc: --label_map_path is required");
  if (o.output.empty()) throw InvalidArgument("convert-voc: --output is required");
  if (!fs::is_directory(o.data_dir)) {
    throw NotFound("convert-voc: --data_dir " + o.data_dir + " is not a directory");
  }
  const LabelMapLookup labels(o.label_map_path, LabelMapLookup::Match::kName);

  // Every id first, so that progress knows the total.
  std::vector<VocItem> items;
  const std::vector<std::string> years = o.year == "merged"
                                             ? std::vector<std::string>{"VOC2007", "VOC2012"}
                                             : std::vector<std::string>{o.year};
  for (const std::string& year : years) {
    const fs::path list =
        fs::path(o.data_dir) / year / "ImageSets" / "Main" / ("aeroplane_" + o.set + ".txt");
    for (std::string& id : read_set_list(list.string())) items.push_back({year, std::move(id)});
  }

  ConvertVocSummary summary;
  RecordShards shards("convert-voc", o.output, o.num_shards, /*plain_name_when_one=*/true);
  Progress progress("data convert-voc", "images", static_cast<int64_t>(items.size()), std::cerr);
  for (const VocItem& item : items) {
    const std::string xml_path =
        (fs::path(o.data_dir) / item.year / o.annotations_dir / (item.id + ".xml")).string();
    const VocAnnotation annotation = parse_voc_annotation(
        read_user_file(xml_path, "convert-voc: annotation", kMaxVocAnnotationBytes), xml_path);
    const std::string image_path =
        (fs::path(o.data_dir) / annotation.folder / "JPEGImages" / annotation.filename).string();
    const SourceJpeg jpeg =
        read_source_jpeg(image_path, xml_path, annotation.width, annotation.height);

    wire::tf::Example example;
    add_image_features(jpeg, annotation.filename, annotation.filename, example.mutable_features());
    ObjectFeatures objects(example.mutable_features(), annotation.width, annotation.height);
    auto& f = *example.mutable_features()->mutable_feature();
    auto* difficult = f["image/object/difficult"].mutable_int64_list();
    auto* truncated = f["image/object/truncated"].mutable_int64_list();
    auto* view = f["image/object/view"].mutable_bytes_list();
    for (std::size_t i = 0; i < annotation.objects.size(); ++i) {
      const VocObject& object = annotation.objects[i];
      if (o.ignore_difficult_instances && object.difficult) {
        ++summary.difficult_ignored;
        continue;
      }
      objects.add(object.xmin, object.ymin, object.xmax, object.ymax, object.name,
                  labels.id(object.name,
                            xml_path + ": annotation/object[" + std::to_string(i + 1) + "]/name"));
      difficult->add_value(object.difficult ? 1 : 0);
      truncated->add_value(object.truncated);
      view->add_value(object.pose);
      ++summary.objects;
    }
    shards.write(example);
    ++summary.images;
    progress.advance();
  }
  progress.finish();
  summary.files = shards.commit();
  return summary;
}

}  // namespace trainyard::app
