// trainyard-detect MODEL IMAGE... --output_dir D: runs a detector export (SSD, Faster R-CNN) on
// image files through libtrainyard_infer's C++ wrapper only (trainyard/infer.hpp; no Trainyard
// core headers), and writes, as the Object Detection API's inference tutorial shows them,
//   D/<name>.png      each image with its detections drawn (visualize_boxes_and_labels_on_
//                     image_array's defaults: at most 20 boxes scoring at least
//                     --min_score_threshold, 4-pixel lines, "label: NN%" over each box)
//   D/detections.json every detection of every image as a COCO results list (pycocotools'
//                     loadRes: image_id (the file's name without its extension, a number when
//                     it is one), category_id, bbox [x, y, width, height] in pixels, score),
//                     as `trainyard predict` writes it.
// The images are decoded by the library (JPEG or PNG, as the readers decode them) and run one
// per call, so images of any sizes work with any image_resizer.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "trainyard/infer.hpp"

namespace {

namespace fs = std::filesystem;
namespace ti = trainyard::infer;

constexpr std::uintmax_t kMaxImageFileBytes = std::uintmax_t{256} << 20;
constexpr std::uintmax_t kMaxLabelMapBytes = std::uintmax_t{16} << 20;

struct Flags {
  std::string model;
  std::vector<std::string> images;
  std::string output_dir;
  std::string label_map;
  std::string plugin_path;
  double min_score_threshold = 0.5;
  int max_boxes_to_draw = 20;
  int line_thickness = 4;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "trainyard-detect: " << message
            << "\nusage: trainyard-detect MODEL IMAGE... --output_dir D [--min_score_threshold "
               "0.5] [--label_map label_map.pbtxt] [--max_boxes_to_draw 20] [--line_thickness 4] "
               "[--plugin_path DIRS]\n";
  std::exit(2);
}

double number_flag(const std::string& flag, const std::string& value, double low, double high) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= low && v <= high)) {
    std::ostringstream text;
    text << flag << " is '" << value << "'; expected a number in [" << low << ", " << high << "]";
    usage_error(text.str());
  }
  return v;
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") usage_error("runs a detector export on images");
    if (arg.rfind("--", 0) != 0) {
      positional.push_back(arg);
      continue;
    }
    std::string value;
    const std::size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      usage_error(arg + " needs a value");
    }
    if (arg == "--output_dir") {
      f.output_dir = value;
    } else if (arg == "--label_map" || arg == "--label_map_path") {
      f.label_map = value;
    } else if (arg == "--plugin_path") {
      f.plugin_path = value;
    } else if (arg == "--min_score_threshold") {
      f.min_score_threshold = number_flag(arg, value, 0.0, 1.0);
    } else if (arg == "--max_boxes_to_draw") {
      f.max_boxes_to_draw = static_cast<int>(number_flag(arg, value, 0, 10000));
    } else if (arg == "--line_thickness") {
      f.line_thickness = static_cast<int>(number_flag(arg, value, 1, 100));
    } else {
      usage_error("unknown flag " + arg);
    }
  }
  if (positional.size() < 2) usage_error("give the export directory and at least one image");
  if (f.output_dir.empty()) usage_error("--output_dir is required");
  f.model = positional[0];
  f.images.assign(positional.begin() + 1, positional.end());
  return f;
}

// The file's bytes; exits naming it when it cannot be read, is not a regular file (opened
// without blocking, so a FIFO is refused rather than waited on) or exceeds `limit`.
std::string read_file(const std::string& path, std::uintmax_t limit, const char* what) {
  auto refuse = [&](const std::string& why) {
    std::cerr << "trainyard-detect: cannot read " << what << " " << path << ": " << why << "\n";
    std::exit(1);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) refuse(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse("not a regular file");
  }
  const auto size = static_cast<std::uintmax_t>(st.st_size);
  if (size > limit) {
    ::close(fd);
    refuse(std::to_string(size) + " bytes, more than the " + std::to_string(limit) + " read");
  }
  std::string bytes(static_cast<std::size_t>(size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      refuse(n < 0 ? std::strerror(errno) : "the file shrank while it was read");
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return bytes;
}

// id -> display name (else name) of a label map in the API's text format (StringIntLabelMap):
// item { id: 1 name: 'circle' display_name: 'Circle' }.
std::map<int64_t, std::string> read_label_map(const std::string& path) {
  const std::string text = read_file(path, kMaxLabelMapBytes, "label map");
  std::map<int64_t, std::string> out;
  std::size_t at = 0;
  auto quoted = [&](std::size_t from, std::size_t end, const std::string& key) -> std::string {
    const std::size_t k = text.find(key, from);
    if (k == std::string::npos || k >= end) return {};
    const std::size_t open = text.find_first_of("'\"", k + key.size());
    if (open == std::string::npos || open >= end) return {};
    const std::size_t close = text.find(text[open], open + 1);
    if (close == std::string::npos || close >= end) return {};
    return text.substr(open + 1, close - open - 1);
  };
  while ((at = text.find("item", at)) != std::string::npos) {
    const std::size_t open = text.find('{', at);
    const std::size_t end = text.find('}', open);
    if (open == std::string::npos || end == std::string::npos) break;
    std::size_t id_at = text.find("id:", open);
    while (id_at != std::string::npos && id_at > 0 && text[id_at - 1] == '_') {
      id_at = text.find("id:", id_at + 3);  // not display_id
    }
    if (id_at != std::string::npos && id_at < end) {
      const int64_t id = std::strtoll(text.c_str() + id_at + 3, nullptr, 10);
      std::string name = quoted(open, end, "display_name");
      if (name.empty()) name = quoted(open, end, "name");
      out[id] = name.empty() ? std::to_string(id) : name;
    }
    at = end;
  }
  if (out.empty()) {
    std::cerr << "trainyard-detect: the label map " << path << " has no item { id: ... }\n";
    std::exit(1);
  }
  return out;
}

// A 5 x 7 font: each glyph 7 rows of 5 bits (the high bit the leftmost pixel).
const std::map<char, std::array<uint8_t, 7>>& font() {
  static const std::map<char, std::array<uint8_t, 7>> glyphs = {
      {'0', {14, 17, 19, 21, 25, 17, 14}}, {'1', {4, 12, 4, 4, 4, 4, 14}},
      {'2', {14, 17, 1, 2, 4, 8, 31}},     {'3', {31, 2, 4, 2, 1, 17, 14}},
      {'4', {2, 6, 10, 18, 31, 2, 2}},     {'5', {31, 16, 30, 1, 1, 17, 14}},
      {'6', {6, 8, 16, 30, 17, 17, 14}},   {'7', {31, 1, 2, 4, 8, 8, 8}},
      {'8', {14, 17, 17, 14, 17, 17, 14}}, {'9', {14, 17, 17, 15, 1, 2, 12}},
      {'A', {14, 17, 17, 31, 17, 17, 17}}, {'B', {30, 17, 17, 30, 17, 17, 30}},
      {'C', {14, 17, 16, 16, 16, 17, 14}}, {'D', {28, 18, 17, 17, 17, 18, 28}},
      {'E', {31, 16, 16, 30, 16, 16, 31}}, {'F', {31, 16, 16, 30, 16, 16, 16}},
      {'G', {14, 17, 16, 23, 17, 17, 15}}, {'H', {17, 17, 17, 31, 17, 17, 17}},
      {'I', {14, 4, 4, 4, 4, 4, 14}},      {'J', {7, 2, 2, 2, 2, 18, 12}},
      {'K', {17, 18, 20, 24, 20, 18, 17}}, {'L', {16, 16, 16, 16, 16, 16, 31}},
      {'M', {17, 27, 21, 21, 17, 17, 17}}, {'N', {17, 17, 25, 21, 19, 17, 17}},
      {'O', {14, 17, 17, 17, 17, 17, 14}}, {'P', {30, 17, 17, 30, 16, 16, 16}},
      {'Q', {14, 17, 17, 17, 21, 18, 13}}, {'R', {30, 17, 17, 30, 20, 18, 17}},
      {'S', {15, 16, 16, 14, 1, 1, 30}},   {'T', {31, 4, 4, 4, 4, 4, 4}},
      {'U', {17, 17, 17, 17, 17, 17, 14}}, {'V', {17, 17, 17, 17, 17, 10, 4}},
      {'W', {17, 17, 17, 21, 21, 21, 10}}, {'X', {17, 17, 10, 4, 10, 17, 17}},
      {'Y', {17, 17, 17, 10, 4, 4, 4}},    {'Z', {31, 1, 2, 4, 8, 16, 31}},
      {':', {0, 12, 12, 0, 12, 12, 0}},    {'%', {24, 25, 2, 4, 8, 19, 3}},
      {'.', {0, 0, 0, 0, 0, 12, 12}},      {'-', {0, 0, 0, 31, 0, 0, 0}},
      {'_', {0, 0, 0, 0, 0, 0, 31}},       {' ', {0, 0, 0, 0, 0, 0, 0}},
  };
  return glyphs;
}

// The API's STANDARD_COLORS begin with these; class id modulo their number picks one.
constexpr uint8_t kColors[][3] = {{240, 248, 255}, {127, 255, 212}, {255, 255, 0},
                                  {255, 0, 255},   {0, 255, 255},   {255, 165, 0},
                                  {50, 205, 50},   {255, 99, 71},   {30, 144, 255}};

struct Canvas {
  std::vector<uint8_t>& pixels;
  int64_t height, width;
  void put(int64_t y, int64_t x, const uint8_t* rgb) {
    if (y < 0 || x < 0 || y >= height || x >= width) return;
    std::memcpy(&pixels[static_cast<std::size_t>((y * width + x) * 3)], rgb, 3);
  }
  void fill(int64_t top, int64_t left, int64_t bottom, int64_t right, const uint8_t* rgb) {
    for (int64_t y = std::max<int64_t>(top, 0); y < std::min(bottom, height); ++y) {
      for (int64_t x = std::max<int64_t>(left, 0); x < std::min(right, width); ++x) put(y, x, rgb);
    }
  }
  // The box's outline, `thickness` pixels inside and out of its edges, as draw_bounding_box's
  // ImageDraw.line of that width.
  void box(int64_t top, int64_t left, int64_t bottom, int64_t right, int thickness,
           const uint8_t* rgb) {
    const int64_t half = thickness / 2;
    fill(top - half, left - half, top - half + thickness, right + half + 1, rgb);
    fill(bottom - half, left - half, bottom - half + thickness, right + half + 1, rgb);
    fill(top - half, left - half, bottom + half + 1, left - half + thickness, rgb);
    fill(top - half, right - half, bottom + half + 1, right - half + thickness, rgb);
  }
  // `text` in black on a box of `rgb` whose bottom-left corner is (bottom, left); above the box
  // when it fits, else below its top edge, as draw_bounding_box_on_image places the label.
  void label(int64_t top, int64_t left, const std::string& text, const uint8_t* rgb, int scale) {
    const int64_t text_h = 7 * scale + 2 * scale;
    const int64_t text_w = static_cast<int64_t>(text.size()) * 6 * scale + 2 * scale;
    const int64_t y0 = top - text_h >= 0 ? top - text_h : top;
    fill(y0, left, y0 + text_h, left + text_w, rgb);
    static const uint8_t kBlack[3] = {0, 0, 0};
    int64_t x0 = left + scale;
    for (char c : text) {
      const char key = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
      auto it = font().find(key);
      const auto& rows = it == font().end() ? font().at('_') : it->second;
      for (int r = 0; r < 7; ++r) {
        for (int b = 0; b < 5; ++b) {
          if (((rows[static_cast<std::size_t>(r)] >> (4 - b)) & 1) == 0) continue;
          fill(y0 + scale + r * scale, x0 + b * scale, y0 + scale + (r + 1) * scale,
               x0 + (b + 1) * scale, kBlack);
        }
      }
      x0 += 6 * scale;
    }
  }
};

// The file's name without its extension: a JSON number when it is one, else a JSON string.
std::string json_id(const std::string& stem) {
  const bool number =
      !stem.empty() && stem.size() < 19 &&
      std::all_of(stem.begin(), stem.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (number) return stem;
  std::string out = "\"";
  for (char c : stem) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

int run(const Flags& flags) {
  const TyInferApi& api = ti::api();
  if (!TY_INFER_HAS(&api, WritePng)) {
    std::cerr << "trainyard-detect: this libtrainyard_infer has no RunImages, DecodeImage and "
                 "WritePng (libtrainyard_infer 0.2 or later is needed)\n";
    return 1;
  }
  std::map<int64_t, std::string> labels;
  if (!flags.label_map.empty()) labels = read_label_map(flags.label_map);
  ti::SessionOptions options;
  if (!flags.plugin_path.empty()) options.add_plugin_path(flags.plugin_path);
  ti::Session session(flags.model, &options);
  bool detector = false;
  for (const ti::TensorInfo& info : session.outputs()) detector |= info.name == "detection_boxes";
  if (!detector) {
    std::cerr << "trainyard-detect: " << flags.model << " holds " << session.model_class()
              << ", not a detection model (its outputs have no detection_boxes)\n";
    return 1;
  }
  std::error_code error;
  fs::create_directories(flags.output_dir, error);
  if (error) {
    std::cerr << "trainyard-detect: cannot create --output_dir " << flags.output_dir << ": "
              << error.message() << "\n";
    return 1;
  }
  std::ostringstream json;
  bool first = true;
  for (const std::string& path : flags.images) {
    const std::string encoded = read_file(path, kMaxImageFileBytes, "image");
    int64_t height = 0, width = 0;
    try {
      ti::check(api.DecodeImage(encoded.data(), encoded.size(), &height, &width, nullptr, 0));
      std::vector<uint8_t> pixels(static_cast<std::size_t>(height * width * 3));
      ti::check(api.DecodeImage(encoded.data(), encoded.size(), &height, &width, pixels.data(),
                                pixels.size()));
      const ti::Outputs out = session.run_images({{pixels.data(), height, width, 3}});
      const std::vector<float>& boxes = out.at("detection_boxes");
      const std::vector<float>& scores = out.at("detection_scores");
      const std::vector<float>& classes = out.at("detection_classes");
      const auto count = static_cast<std::size_t>(out.at("num_detections").at(0));
      const std::string stem = fs::path(path).stem().string();
      Canvas canvas{pixels, height, width};
      const int scale = std::max<int>(1, static_cast<int>(std::min(height, width) / 300));
      int drawn = 0;
      // Drawn in reverse score order so the best box's label is on top.
      std::vector<std::size_t> to_draw;
      for (std::size_t j = 0; j < count; ++j) {
        const float* b = boxes.data() + j * 4;
        const auto category = static_cast<int64_t>(classes[j]);
        json << (first ? "\n" : ",\n") << "{\"image_id\": " << json_id(stem)
             << ", \"category_id\": " << category << ", \"bbox\": [" << std::setprecision(6)
             << std::defaultfloat << b[1] * static_cast<double>(width) << ", "
             << b[0] * static_cast<double>(height) << ", "
             << (b[3] - b[1]) * static_cast<double>(width) << ", "
             << (b[2] - b[0]) * static_cast<double>(height) << "], \"score\": " << scores[j] << "}";
        first = false;
        if (scores[j] >= flags.min_score_threshold && drawn < flags.max_boxes_to_draw) {
          to_draw.push_back(j);
          ++drawn;
        }
      }
      for (auto it = to_draw.rbegin(); it != to_draw.rend(); ++it) {
        const std::size_t j = *it;
        const float* b = boxes.data() + j * 4;
        const auto category = static_cast<int64_t>(classes[j]);
        const uint8_t* color = kColors[static_cast<std::size_t>(category) % std::size(kColors)];
        const auto y = [&](float v) {
          return static_cast<int64_t>(v * static_cast<float>(height));
        };
        const auto x = [&](float v) { return static_cast<int64_t>(v * static_cast<float>(width)); };
        canvas.box(y(b[0]), x(b[1]), y(b[2]), x(b[3]), flags.line_thickness, color);
        auto name = labels.find(category);
        const std::string text = (name != labels.end() ? name->second : "N/A") + ": " +
                                 std::to_string(static_cast<int>(scores[j] * 100.0f)) + "%";
        canvas.label(y(b[0]), x(b[1]), text, color, scale);
      }
      const TyInferImage image{pixels.data(), height, width, 3};
      const std::string png = (fs::path(flags.output_dir) / (stem + ".png")).string();
      ti::check(api.WritePng(png.c_str(), &image));
      std::cout << path << ": " << count << " detections, " << drawn << " drawn in " << png << "\n";
    } catch (const ti::Error& e) {
      std::cerr << "trainyard-detect: " << path << ": " << e.what() << "\n";
      return 1;
    }
  }
  const fs::path results = fs::path(flags.output_dir) / "detections.json";
  std::ofstream out(results);
  out << "[" << json.str() << (first ? "]\n" : "\n]\n");
  out.close();
  if (!out) {
    std::cerr << "trainyard-detect: cannot write " << results << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  try {
    return run(flags);
  } catch (const ti::Error& e) {
    std::cerr << "trainyard-detect: " << e.what() << "\n";
    return 1;
  }
}
