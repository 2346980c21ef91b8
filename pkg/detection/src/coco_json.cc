// COCO's instances and results JSON (see coco_json.h). A reader of its own rather than
// json_text's tree: COCO files run to hundreds of MB, and their segmentations are skipped
// without being stored.
#include "trainyard/pkg/detection/coco_json.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "trainyard/error.h"
#include "trainyard/user_file.h"

namespace trainyard::detection {
namespace {

constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxStringBytes = std::size_t{1} << 20;

class JsonReader {
 public:
  JsonReader(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  [[noreturn]] void fail(const std::string& what) const {
    std::string path = "$";
    for (const std::string& part : path_) path += part;
    throw DataLoss(source_ + ": " + path + ": " + what + " (at byte " + std::to_string(pos_) + ")");
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }

  void finish() {
    if (peek() != '\0' || pos_ < text_.size()) fail("unexpected text after the JSON value");
  }

  const char* kind_here() {
    switch (peek()) {
      case '{':
        return "an object";
      case '[':
        return "an array";
      case '"':
        return "a string";
      case 't':
      case 'f':
        return "a boolean";
      case 'n':
        return "null";
      case '\0':
        return "the end of the file";
      default:
        return "a number";
    }
  }

  // Calls `member(key)` for each member of the object here, with the reader at its value;
  // `member` must consume the value.
  void object(const std::function<void(const std::string&)>& member) {
    if (peek() != '{') fail(std::string("expected an object, found ") + kind_here());
    ++pos_;
    enter();
    if (peek() == '}') {
      ++pos_;
      leave();
      return;
    }
    while (true) {
      if (peek() != '"') fail("expected a member name");
      std::string key = string();
      if (peek() != ':') fail("expected ':' after the member name");
      ++pos_;
      path_.push_back("." + key);
      member(key);
      path_.pop_back();
      const char c = peek();
      ++pos_;
      if (c == '}') break;
      if (c != ',') {
        --pos_;
        fail("expected ',' or '}' in an object");
      }
    }
    leave();
  }

  // Calls `element(index)` for each element of the array here.
  void array(const std::function<void(std::size_t)>& element) {
    if (peek() != '[') fail(std::string("expected an array, found ") + kind_here());
    ++pos_;
    enter();
    if (peek() == ']') {
      ++pos_;
      leave();
      return;
    }
    for (std::size_t i = 0;; ++i) {
      path_.push_back("[" + std::to_string(i) + "]");
      element(i);
      path_.pop_back();
      const char c = peek();
      ++pos_;
      if (c == ']') break;
      if (c != ',') {
        --pos_;
        fail("expected ',' or ']' in an array");
      }
    }
    leave();
  }

  std::string string() {
    if (peek() != '"') fail(std::string("expected a string, found ") + kind_here());
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("string not closed before the end of the file");
      const char c = text_[pos_++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
      } else {
        if (pos_ >= text_.size()) fail("string not closed before the end of the file");
        const char e = text_[pos_++];
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u': {
            uint32_t code = hex4();
            if (code >= 0xD800 && code <= 0xDBFF) {
              if (pos_ + 1 < text_.size() && text_[pos_] == '\\' && text_[pos_ + 1] == 'u') {
                pos_ += 2;
                const uint32_t low = hex4();
                if (low < 0xDC00 || low > 0xDFFF) fail("unpaired surrogate in a \\u escape");
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
              } else {
                fail("unpaired surrogate in a \\u escape");
              }
            } else if (code >= 0xDC00 && code <= 0xDFFF) {
              fail("unpaired surrogate in a \\u escape");
            }
            append_utf8(out, code);
            break;
          }
          default:
            fail(std::string("invalid escape \\") + e + " in a string");
        }
      }
      if (out.size() > kMaxStringBytes) fail("string longer than 1 MiB");
    }
    return out;
  }

  // A number; `integral` tells whether it has an integral value.
  double number() {
    skip_space();
    const std::size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    const std::size_t digits = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ == digits) fail(std::string("expected a number, found ") + kind_here_at(start));
    if (text_[digits] == '0' && pos_ - digits > 1) fail("number with a leading zero");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      const std::size_t frac = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ == frac) fail("number without digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      const std::size_t exp = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ == exp) fail("number without digits in its exponent");
    }
    double value = 0;
    const auto [end, ec] = std::from_chars(text_.data() + start, text_.data() + pos_, value);
    if (ec != std::errc() || end != text_.data() + pos_ || !std::isfinite(value)) {
      fail("number " + std::string(text_.substr(start, pos_ - start)) + " is out of range");
    }
    return value;
  }

  int64_t integer() {
    skip_space();
    const std::size_t start = pos_;
    const double value = number();
    const std::string_view spelled = text_.substr(start, pos_ - start);
    int64_t result = 0;
    if (spelled.find_first_of(".eE") == std::string_view::npos) {
      const auto [end, ec] =
          std::from_chars(spelled.data(), spelled.data() + spelled.size(), result);
      if (ec != std::errc() || end != spelled.data() + spelled.size()) {
        fail("integer " + std::string(spelled) + " is out of the 64-bit range");
      }
      return result;
    }
    if (value != std::floor(value) || std::fabs(value) > 9007199254740992.0) {
      fail("expected an integer, found " + std::string(spelled));
    }
    return static_cast<int64_t>(value);
  }

  // A truth value as Python's bool() of a JSON number or boolean.
  bool truth() {
    const char c = peek();
    if (c == 't' || c == 'f') return literal();
    return number() != 0;
  }

  void skip() { skip_value(0); }

 private:
  void enter() {
    if (++depth_ > kMaxDepth) fail("nesting deeper than 64");
  }
  void leave() { --depth_; }

  const char* kind_here_at(std::size_t at) {
    const std::size_t saved = pos_;
    pos_ = at;
    const char* kind = kind_here();
    pos_ = saved;
    return kind;
  }

  bool literal() {
    skip_space();
    for (const char* word : {"true", "false", "null"}) {
      const std::size_t n = std::strlen(word);
      if (text_.substr(pos_, n) == word) {
        pos_ += n;
        return word[0] == 't';
      }
    }
    fail("invalid literal");
  }

  uint32_t hex4() {
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      if (pos_ >= text_.size()) fail("\\u escape needs 4 hex digits");
      const char c = text_[pos_++];
      uint32_t digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        fail("\\u escape needs 4 hex digits");
      }
      code = code * 16 + digit;
    }
    return code;
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  void skip_value(int depth) {
    switch (peek()) {
      case '{':
        object([&](const std::string&) { skip_value(depth + 1); });
        return;
      case '[':
        array([&](std::size_t) { skip_value(depth + 1); });
        return;
      case '"':
        string();
        return;
      case 't':
      case 'f':
      case 'n':
        literal();
        return;
      case '\0':
        fail("expected a value, found the end of the file");
      default:
        number();
    }
  }

  std::string_view text_;
  const std::string& source_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  std::vector<std::string> path_;
};

std::array<double, 4> read_bbox(JsonReader& in) {
  std::array<double, 4> bbox{};
  std::size_t count = 0;
  in.array([&](std::size_t i) {
    if (i >= 4) in.fail("bbox has more than 4 numbers ([x, y, width, height])");
    bbox[i] = in.number();
    count = i + 1;
  });
  if (count != 4) {
    in.fail("bbox has " + std::to_string(count) + " numbers, not 4 ([x, y, width, height])");
  }
  return bbox;
}

constexpr std::size_t kMaxPolygonNumbers = std::size_t{1} << 22;
constexpr std::size_t kMaxRleCounts = std::size_t{1} << 28;

// A `segmentation`: a list of polygons or an RLE object (coco_json.h); the values are checked
// for size only here, the mask's consistency in coco_mask.
CocoSegmentation read_segmentation(JsonReader& in) {
  CocoSegmentation out;
  if (in.peek() == '[') {
    out.kind = CocoSegmentation::Kind::kPolygons;
    in.array([&](std::size_t) {
      std::vector<double>& polygon = out.polygons.emplace_back();
      in.array([&](std::size_t i) {
        if (i >= kMaxPolygonNumbers) in.fail("polygon with more than 2^22 numbers");
        polygon.push_back(in.number());
      });
    });
    return out;
  }
  if (in.peek() != '{') {
    in.fail(std::string("a segmentation must be a list of polygons or an RLE object, found ") +
            in.kind_here());
  }
  bool has_size = false, has_counts = false;
  in.object([&](const std::string& key) {
    if (key == "size") {
      std::size_t n = 0;
      in.array([&](std::size_t i) {
        if (i >= 2) in.fail("size has more than 2 numbers ([height, width])");
        const int64_t v = in.integer();
        if (v < 0) in.fail("size " + std::to_string(v) + " is negative");
        (i == 0 ? out.height : out.width) = v;
        n = i + 1;
      });
      if (n != 2) in.fail("size has " + std::to_string(n) + " numbers, not 2 ([height, width])");
      has_size = true;
    } else if (key == "counts") {
      if (in.peek() == '"') {
        out.kind = CocoSegmentation::Kind::kCompressedRle;
        out.compressed = in.string();
      } else {
        out.kind = CocoSegmentation::Kind::kUncompressedRle;
        in.array([&](std::size_t i) {
          if (i >= kMaxRleCounts) in.fail("RLE counts longer than 2^28");
          const int64_t v = in.integer();
          if (v < 0 || v > int64_t{0xFFFFFFFF}) {
            in.fail("RLE count " + std::to_string(v) + " is not in 0..2^32-1");
          }
          out.counts.push_back(static_cast<uint32_t>(v));
        });
      }
      has_counts = true;
    } else {
      in.skip();
    }
  });
  if (!has_size) in.fail("RLE segmentation without \"size\"");
  if (!has_counts) in.fail("RLE segmentation without \"counts\"");
  return out;
}

void require(JsonReader& in, bool present, const char* member) {
  if (!present) in.fail(std::string("missing member \"") + member + "\"");
}

std::string read_file(const std::string& path, const char* what) {
  return read_user_file(path, what, kMaxCocoJsonBytes);
}

}  // namespace

CocoInstances parse_coco_instances(std::string_view text, const std::string& source,
                                   bool read_segmentations) {
  JsonReader in(text, source);
  CocoInstances out;
  bool has_images = false, has_annotations = false, has_categories = false;
  std::unordered_set<int64_t> image_ids, annotation_ids, category_ids;
  const auto unique = [&](std::unordered_set<int64_t>& ids, int64_t id, const char* what) {
    if (!ids.insert(id).second)
      in.fail(std::string("duplicate ") + what + " id " + std::to_string(id));
  };
  in.object([&](const std::string& key) {
    if (key == "images") {
      has_images = true;
      in.array([&](std::size_t) {
        CocoImageInfo image;
        bool has_id = false;
        in.object([&](const std::string& k) {
          if (k == "id") {
            image.id = in.integer();
            has_id = true;
          } else if (k == "width") {
            image.width = in.integer();
          } else if (k == "height") {
            image.height = in.integer();
          } else if (k == "file_name") {
            image.file_name = in.string();
          } else {
            in.skip();
          }
        });
        require(in, has_id, "id");
        unique(image_ids, image.id, "image");
        out.images.push_back(std::move(image));
      });
    } else if (key == "annotations") {
      has_annotations = true;
      in.array([&](std::size_t) {
        CocoAnnotation ann;
        bool has_id = false, has_image = false, has_category = false, has_bbox = false,
             has_area = false;
        in.object([&](const std::string& k) {
          if (k == "id") {
            ann.id = in.integer();
            has_id = true;
          } else if (k == "image_id") {
            ann.image_id = in.integer();
            has_image = true;
          } else if (k == "category_id") {
            ann.category_id = in.integer();
            has_category = true;
          } else if (k == "bbox") {
            ann.bbox = read_bbox(in);
            has_bbox = true;
          } else if (k == "area") {
            ann.area = in.number();
            has_area = true;
          } else if (k == "iscrowd") {
            ann.iscrowd = in.truth();
          } else if (k == "segmentation" && read_segmentations) {
            ann.segmentation = read_segmentation(in);
          } else {
            in.skip();
          }
        });
        require(in, has_id, "id");
        require(in, has_image, "image_id");
        require(in, has_category, "category_id");
        require(in, has_bbox, "bbox");
        if (!has_area) ann.area = ann.bbox[2] * ann.bbox[3];
        unique(annotation_ids, ann.id, "annotation");
        out.annotations.push_back(ann);
      });
    } else if (key == "categories") {
      has_categories = true;
      in.array([&](std::size_t) {
        CocoCategory category;
        bool has_id = false;
        in.object([&](const std::string& k) {
          if (k == "id") {
            category.id = in.integer();
            has_id = true;
          } else if (k == "name") {
            category.name = in.string();
          } else if (k == "supercategory") {
            category.supercategory = in.string();
          } else {
            in.skip();
          }
        });
        require(in, has_id, "id");
        unique(category_ids, category.id, "category");
        out.categories.push_back(std::move(category));
      });
    } else {
      in.skip();
    }
  });
  in.finish();
  require(in, has_images, "images");
  require(in, has_annotations, "annotations");
  require(in, has_categories, "categories");
  return out;
}

CocoInstances read_coco_instances(const std::string& path, bool read_segmentations) {
  return parse_coco_instances(read_file(path, "COCO annotations"), path, read_segmentations);
}

std::vector<CocoResult> parse_coco_results(std::string_view text, const std::string& source,
                                           const CocoInstances* groundtruth,
                                           bool read_segmentations) {
  std::unordered_set<int64_t> image_ids;
  if (groundtruth != nullptr) {
    for (const CocoImageInfo& image : groundtruth->images) image_ids.insert(image.id);
  }
  JsonReader in(text, source);
  std::vector<CocoResult> out;
  if (in.peek() != '[') {
    in.fail(
        "the results must be an array of objects (pycocotools' loadRes: \"results in not "
        "an array of objects\")");
  }
  in.array([&](std::size_t) {
    CocoResult result;
    bool has_image = false, has_category = false, has_bbox = false, has_score = false;
    in.object([&](const std::string& k) {
      if (k == "image_id") {
        result.image_id = in.integer();
        has_image = true;
      } else if (k == "category_id") {
        result.category_id = in.integer();
        has_category = true;
      } else if (k == "bbox") {
        result.bbox = read_bbox(in);
        has_bbox = true;
      } else if (k == "score") {
        result.score = in.number();
        has_score = true;
      } else if (k == "segmentation" && read_segmentations) {
        result.segmentation = read_segmentation(in);
      } else {
        in.skip();
      }
    });
    require(in, has_image, "image_id");
    require(in, has_category, "category_id");
    result.has_bbox = has_bbox;
    if (result.segmentation.kind == CocoSegmentation::Kind::kNone) require(in, has_bbox, "bbox");
    require(in, has_score, "score");
    if (groundtruth != nullptr && image_ids.count(result.image_id) == 0) {
      in.fail("image_id " + std::to_string(result.image_id) +
              " is not an image of the groundtruth (pycocotools' loadRes: \"Results do not "
              "correspond to current coco set\")");
    }
    out.push_back(result);
  });
  in.finish();
  return out;
}

std::vector<CocoResult> read_coco_results(const std::string& path, const CocoInstances* groundtruth,
                                          bool read_segmentations) {
  return parse_coco_results(read_file(path, "COCO results"), path, groundtruth, read_segmentations);
}

std::string coco_results_json(const std::vector<CocoResult>& results) {
  const auto append_number = [](std::string& out, double value) {
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    out.append(buf, ec == std::errc() ? end : buf);
  };
  std::string out = "[";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const CocoResult& r = results[i];
    out += i == 0 ? "\n" : ",\n";
    out += "{\"image_id\": " + std::to_string(r.image_id) +
           ", \"category_id\": " + std::to_string(r.category_id) + ", \"bbox\": [";
    for (int j = 0; j < 4; ++j) {
      if (j > 0) out += ", ";
      append_number(out, r.bbox[j]);
    }
    out += "], \"score\": ";
    append_number(out, r.score);
    out += "}";
  }
  out += results.empty() ? "]\n" : "\n]\n";
  return out;
}

void write_coco_results(const std::string& path, const std::vector<CocoResult>& results) {
  for (const CocoResult& r : results) {
    for (double v : {r.bbox[0], r.bbox[1], r.bbox[2], r.bbox[3], r.score}) {
      if (!std::isfinite(v)) {
        throw InvalidArgument("COCO results for " + path + ": image " + std::to_string(r.image_id) +
                              " has a value that is not finite");
      }
    }
  }
  write_file_atomically(path, coco_results_json(results));
}

}  // namespace trainyard::detection
