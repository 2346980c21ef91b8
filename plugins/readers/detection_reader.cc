// The object detection reader, for tf.Example records in the TF Object Detection API's layout
// (data_decoders/tf_example_decoder.py; the create_*_tf_record.py scripts and
// `trainyard data synth-shapes` write it):
//
//   image/encoded      bytes, required: a JPEG or PNG file's bytes, decoded to RGB
//   image/format       bytes, default "jpeg": "jpeg", "jpg", "JPEG", "png" or "PNG"; the data's
//                      magic bytes choose the decoder, any other name is an error
//   image/height, image/width   int64, optional; when present they must match the image
//   image/source_id, image/filename   bytes, optional: the record's id, in that order (else
//                      the file and record index)
//   image/object/bbox/{ymin,xmin,ymax,xmax}   float lists of one length N, normalized to [0, 1]
//   image/object/class/label   int64 list of N, 1-based (0 is the background)
//   image/object/class/text    bytes list of N: with label_map_path, the names are looked up in
//                      the label map and preferred to the labels, as the decoder's BackupHandler
//                      does (a name the map lacks: see unmapped_class_text)
//   image/object/difficult, image/object/is_crowd, image/object/group_of   int64 lists of N,
//                      optional (absent: 0)
//   image/object/area  float list of N, optional (absent: the box's area in pixels)
//   image/object/mask  read only with the option instance_masks (the input reader's
//                      load_instance_masks and mask_type): "png", a bytes list of N PNG (or
//                      JPEG) images of the image's height and width, one channel (the API's
//                      PNG_MASKS); "numerical", a float list of N x height x width values, mask
//                      by mask, row-major (NUMERICAL_MASKS). A pixel is in the mask where its
//                      value is above 0, as the decoder's tf.greater(mask, 0).
// The per-object lists other than the box must have N values when present; the classes must be
// given (as labels or as texts with a label map) when N > 0.
//
// DetectionReader yields, per record (N: the boxes kept):
//   "image"                  u8 [-1, -1, 3]: the decoded image, HWC
//   "groundtruth_boxes"      f32 [-1, 4]: [ymin, xmin, ymax, xmax], normalized
//   "groundtruth_classes"    i32 [-1]: label - 1, 0-based (as the API's trainer makes them)
//   "groundtruth_difficult"  i32 [-1]
//   "groundtruth_is_crowd"   i32 [-1]
//   "groundtruth_group_of"   i32 [-1]
//   "groundtruth_area"       f32 [-1]
//   "true_image_shape"       i32 [3]: height, width, 3
//   "groundtruth_instance_masks"  u8 [-1, -1, -1]: with instance_masks, [N, height, width] of 0
//                            and 1 (the API's float masks, a quarter of the memory), the masks
//                            of the boxes kept, in their order
// Invalid boxes (a NaN coordinate, ymin > ymax or xmin > xmax, a coordinate outside [0, 1], zero
// height or width), the source of the API's most reported NaN losses, are an error naming the
// record and the box by default; invalid_boxes "clip" clips them to [0, 1] and drops those left
// empty, "drop" drops them. Boxes dropped or clipped are counted; the first record that has any
// is reported once on stderr. Errors name the file and record, and the key: DataLoss for a
// malformed record or an undecodable image, InvalidArgument for everything else. parse() is
// safe to call from several threads at once.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/example.h"
#include "trainyard/options.h"
#include "trainyard/pkg/detection/label_map.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/plugin.h"
#include "trainyard/reader.h"
#include "trainyard/tensor.h"

namespace trainyard::readers {
namespace {

using Kind = ExampleFeature::Kind;

constexpr const char* kEncoded = "image/encoded";
constexpr const char* kFormat = "image/format";
constexpr const char* kHeight = "image/height";
constexpr const char* kWidth = "image/width";
constexpr const char* kSourceId = "image/source_id";
constexpr const char* kFilename = "image/filename";
constexpr const char* kYmin = "image/object/bbox/ymin";
constexpr const char* kXmin = "image/object/bbox/xmin";
constexpr const char* kYmax = "image/object/bbox/ymax";
constexpr const char* kXmax = "image/object/bbox/xmax";
constexpr const char* kLabel = "image/object/class/label";
constexpr const char* kText = "image/object/class/text";
constexpr const char* kDifficult = "image/object/difficult";
constexpr const char* kIsCrowd = "image/object/is_crowd";
constexpr const char* kGroupOf = "image/object/group_of";
constexpr const char* kArea = "image/object/area";
constexpr const char* kMask = "image/object/mask";

std::string record_name(const RecordLocation& where) {
  return where.file + ", record " + std::to_string(where.record_index);
}

[[noreturn]] void bad_record(const RecordLocation& where, const std::string& message) {
  throw InvalidArgument(record_name(where) + ": " + message);
}

[[noreturn]] void bad_option(const std::string& message) {
  throw InvalidArgument("DetectionReader: " + message);
}

const ExampleFeature* present(const ExampleFeatures& map, const char* key) {
  const ExampleFeature* feature = map.find(key);
  return feature == nullptr || feature->kind() == Kind::kNone ? nullptr : feature;
}

std::optional<std::string_view> single_bytes(const ExampleFeatures& map, const char* key,
                                             const RecordLocation& where) {
  const ExampleFeature* feature = present(map, key);
  if (feature == nullptr) return std::nullopt;
  if (feature->kind() != Kind::kBytes || feature->size() != 1) {
    bad_record(where, std::string("feature '") + key + "' is " + feature->description() +
                          ", expected a bytes list of 1 value");
  }
  return feature->bytes()[0];
}

std::optional<int64_t> single_int64(const ExampleFeatures& map, const char* key,
                                    const RecordLocation& where) {
  const ExampleFeature* feature = present(map, key);
  if (feature == nullptr) return std::nullopt;
  if (feature->kind() != Kind::kInt64 || feature->size() != 1) {
    bad_record(where, std::string("feature '") + key + "' is " + feature->description() +
                          ", expected an int64 list of 1 value");
  }
  return feature->int64s()[0];
}

// A per-object list: nullptr when absent; when present it must be of `kind` and hold `count`
// values (count < 0: any length).
const ExampleFeature* object_list(const ExampleFeatures& map, const char* key, Kind kind,
                                  int64_t count, const RecordLocation& where) {
  const ExampleFeature* feature = present(map, key);
  if (feature == nullptr) return nullptr;
  const char* kind_name = kind == Kind::kFloat   ? "a float list"
                          : kind == Kind::kInt64 ? "an int64 list"
                                                 : "a bytes list";
  if (feature->kind() != kind) {
    bad_record(where, std::string("feature '") + key + "' is " + feature->description() +
                          ", expected " + kind_name);
  }
  if (count >= 0 && static_cast<int64_t>(feature->size()) != count) {
    bad_record(where, std::string("feature '") + key + "' has " + std::to_string(feature->size()) +
                          " values but the record has " + std::to_string(count) +
                          " boxes (image/object/bbox/*)");
  }
  return feature;
}

template <typename T>
ParsedFeature make_feature(DType dtype, const std::vector<T>& values, std::vector<int64_t> shape) {
  ParsedFeature f{dtype, std::move(shape), std::vector<std::byte>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(f.bytes.data(), values.data(), f.bytes.size());
  return f;
}

enum class InvalidBoxes { kError, kClip, kDrop };
enum class InstanceMasks { kNone, kPng, kNumerical };
// The most bytes of instance masks one record may decode to (1 GiB: 100 masks of 3200 x 3200).
constexpr std::size_t kMaxMaskBytes = std::size_t{1} << 30;

class DetectionReader final : public Reader {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"num_classes", OptionType::kInt, "90",
       "Number of classes without the background: labels must lie in [1, num_classes]"},
      {"label_map_path", OptionType::kString, "",
       "StringIntLabelMap text file: image/object/class/text is looked up in it and preferred "
       "to image/object/class/label (the decoder's BackupHandler)"},
      {"use_display_name", OptionType::kBool, "false",
       "Look class texts up by the label map's display_name instead of name"},
      {"unmapped_class_text", OptionType::kString, "drop",
       "A class text the label map lacks: drop (the box, as the API's "
       "filter_unrecognized_classes) or error"},
      {"invalid_boxes", OptionType::kString, "error",
       "A box with a NaN, inverted or outside-[0, 1] coordinate or zero area: error (naming the "
       "record and box), clip (to [0, 1]; dropped when left empty) or drop"},
      {"max_image_pixels", OptionType::kInt, "67108864",
       "Larger images (height x width, from their header) are refused before decoding"},
      {"instance_masks", OptionType::kString, "none",
       "Read image/object/mask into groundtruth_instance_masks: none, png (a PNG per object, "
       "the API's PNG_MASKS) or numerical (N x height x width floats, NUMERICAL_MASKS)"},
  };

  explicit DetectionReader(const Options& options)
      : num_classes_(options.get_int("num_classes")),
        use_display_name_(options.get_bool("use_display_name")),
        max_pixels_(options.get_int("max_image_pixels")) {
    if (num_classes_ <= 0 || num_classes_ > INT32_MAX) {
      bad_option("num_classes is " + std::to_string(num_classes_) +
                 "; expected a positive number of classes");
    }
    if (max_pixels_ <= 0) {
      bad_option("max_image_pixels is " + std::to_string(max_pixels_) +
                 "; expected a positive number of pixels");
    }
    const std::string& invalid = options.get_string("invalid_boxes");
    if (invalid == "error") {
      invalid_boxes_ = InvalidBoxes::kError;
    } else if (invalid == "clip") {
      invalid_boxes_ = InvalidBoxes::kClip;
    } else if (invalid == "drop") {
      invalid_boxes_ = InvalidBoxes::kDrop;
    } else {
      bad_option("invalid_boxes is '" + invalid + "'; expected error, clip or drop");
    }
    const std::string& unmapped = options.get_string("unmapped_class_text");
    if (unmapped != "drop" && unmapped != "error") {
      bad_option("unmapped_class_text is '" + unmapped + "'; expected drop or error");
    }
    drop_unmapped_ = unmapped == "drop";
    const std::string& masks = options.get_string("instance_masks");
    if (masks == "none") {
      masks_ = InstanceMasks::kNone;
    } else if (masks == "png") {
      masks_ = InstanceMasks::kPng;
    } else if (masks == "numerical") {
      masks_ = InstanceMasks::kNumerical;
    } else {
      bad_option("instance_masks is '" + masks + "'; expected none, png or numerical");
    }
    const std::string& path = options.get_string("label_map_path");
    if (!path.empty()) {
      label_map_path_ = path;
      const detection::LabelMap map = detection::load_label_map(path);
      label_ids_ = detection::label_map_dict(map, use_display_name_);
      for (const auto& [label, id] : label_ids_) {
        if (id > num_classes_) {
          bad_option("label map " + path + " gives '" + label + "' the id " + std::to_string(id) +
                     ", above num_classes " + std::to_string(num_classes_));
        }
      }
    }
  }

  std::vector<FeatureSpec> features() const override {
    std::vector<FeatureSpec> specs = {
        {"image", DType::kU8, {-1, -1, 3}},          {"groundtruth_boxes", DType::kF32, {-1, 4}},
        {"groundtruth_classes", DType::kI32, {-1}},  {"groundtruth_difficult", DType::kI32, {-1}},
        {"groundtruth_is_crowd", DType::kI32, {-1}}, {"groundtruth_group_of", DType::kI32, {-1}},
        {"groundtruth_area", DType::kF32, {-1}},     {"true_image_shape", DType::kI32, {3}}};
    if (masks_ != InstanceMasks::kNone) {
      specs.push_back({"groundtruth_instance_masks", DType::kU8, {-1, -1, -1}});
    }
    return specs;
  }

  ParsedRecord parse(std::string_view record, const RecordLocation& where) const override {
    const ParsedExample example = parse_example(record, where);
    const ExampleFeatures& map = example.features;

    ParsedRecord parsed;
    if (auto id = single_bytes(map, kSourceId, where)) {
      parsed.id = std::string(*id);
    } else if (auto name = single_bytes(map, kFilename, where)) {
      parsed.id = std::string(*name);
    } else {
      parsed.id = record_name(where);
    }

    const image::DecodedImage decoded = decode(map, where);
    const int64_t height = decoded.height, width = decoded.width;

    // The boxes and their per-object features.
    const ExampleFeature* ymin = object_list(map, kYmin, Kind::kFloat, -1, where);
    const int64_t n = ymin == nullptr ? 0 : static_cast<int64_t>(ymin->size());
    const ExampleFeature* coords[4] = {ymin, object_list(map, kXmin, Kind::kFloat, n, where),
                                       object_list(map, kYmax, Kind::kFloat, n, where),
                                       object_list(map, kXmax, Kind::kFloat, n, where)};
    if (n > 0 || coords[1] != nullptr || coords[2] != nullptr || coords[3] != nullptr) {
      const char* keys[4] = {kYmin, kXmin, kYmax, kXmax};
      for (int c = 0; c < 4; ++c) {
        if (coords[c] == nullptr) {
          bad_record(where, std::string("feature '") + keys[c] +
                                "' is missing; a box needs all four of image/object/bbox/"
                                "{ymin,xmin,ymax,xmax}");
        }
      }
    }
    const ExampleFeature* labels = object_list(map, kLabel, Kind::kInt64, -1, where);
    const ExampleFeature* texts = object_list(map, kText, Kind::kBytes, -1, where);
    const ExampleFeature* difficult = object_list(map, kDifficult, Kind::kInt64, n, where);
    const ExampleFeature* is_crowd = object_list(map, kIsCrowd, Kind::kInt64, n, where);
    const ExampleFeature* group_of = object_list(map, kGroupOf, Kind::kInt64, n, where);
    const ExampleFeature* area = object_list(map, kArea, Kind::kFloat, n, where);
    const bool use_texts = !label_map_path_.empty() && texts != nullptr && texts->size() > 0;
    if (use_texts) {
      object_list(map, kText, Kind::kBytes, n, where);
    } else if (n > 0) {
      if (labels == nullptr) {
        bad_record(where, std::string("feature '") + kLabel + "' is missing" +
                              (label_map_path_.empty() && texts != nullptr
                                   ? std::string(" (image/object/class/text is used only with a "
                                                 "label_map_path)")
                                   : std::string()) +
                              "; the record has " + std::to_string(n) + " boxes");
      }
      object_list(map, kLabel, Kind::kInt64, n, where);
    }

    std::vector<float> boxes;
    std::vector<int32_t> classes, difficult_out, crowd_out, group_of_out;
    std::vector<float> area_out;
    std::vector<int64_t> kept_objects;  // the record's index of each box kept
    int64_t dropped = 0, clipped = 0;
    for (int64_t i = 0; i < n; ++i) {
      const auto at = static_cast<std::size_t>(i);
      int64_t label = 0;
      if (use_texts) {
        const std::string_view text = texts->bytes()[at];
        auto found = label_ids_.find(std::string(text));
        if (found == label_ids_.end()) {
          if (drop_unmapped_) continue;
          bad_record(where, std::string("feature '") + kText + "' value " + std::to_string(i) +
                                " is '" + std::string(text) + "', which the label map " +
                                label_map_path_ + " does not list");
        }
        label = found->second;
      } else {
        label = labels->int64s()[at];
      }
      if (label < 1 || label > num_classes_) {
        bad_record(where, std::string("box ") + std::to_string(i) + " has class " +
                              std::to_string(label) + "; expected 1 <= label <= " +
                              std::to_string(num_classes_) + " (num_classes; 0 is the background)");
      }
      float box[4];
      for (int c = 0; c < 4; ++c) box[c] = coords[c]->floats()[at];
      if (!valid(box)) {
        if (invalid_boxes_ == InvalidBoxes::kError) {
          bad_record(where, "box " + std::to_string(i) +
                                " is [ymin, xmin, ymax, xmax] = " + describe(box) +
                                "; expected 0 <= ymin < ymax <= 1 and 0 <= xmin < xmax <= 1 "
                                "(invalid_boxes: clip or drop to repair or skip such boxes)");
        }
        bool keep = false;
        if (invalid_boxes_ == InvalidBoxes::kClip) {
          for (float& v : box) v = std::isnan(v) ? v : std::clamp(v, 0.0f, 1.0f);
          keep = valid(box);
        }
        if (!keep) {
          ++dropped;
          continue;
        }
        ++clipped;
      }
      boxes.insert(boxes.end(), box, box + 4);
      kept_objects.push_back(i);
      classes.push_back(static_cast<int32_t>(label - 1));
      difficult_out.push_back(difficult ? static_cast<int32_t>(difficult->int64s()[at]) : 0);
      crowd_out.push_back(is_crowd ? static_cast<int32_t>(is_crowd->int64s()[at]) : 0);
      group_of_out.push_back(group_of ? static_cast<int32_t>(group_of->int64s()[at] != 0) : 0);
      area_out.push_back(area ? area->floats()[at]
                              : (box[2] - box[0]) * static_cast<float>(height) * (box[3] - box[1]) *
                                    static_cast<float>(width));
    }
    if (dropped > 0 || clipped > 0) report(where, dropped, clipped);

    const auto kept = static_cast<int64_t>(classes.size());
    ParsedFeature image_feature{DType::kU8, {height, width, 3}, {}};
    image_feature.bytes.resize(decoded.pixels.size());
    std::memcpy(image_feature.bytes.data(), decoded.pixels.data(), decoded.pixels.size());
    parsed.features.emplace("image", std::move(image_feature));
    parsed.features.emplace("groundtruth_boxes", make_feature(DType::kF32, boxes, {kept, 4}));
    parsed.features.emplace("groundtruth_classes", make_feature(DType::kI32, classes, {kept}));
    parsed.features.emplace("groundtruth_difficult",
                            make_feature(DType::kI32, difficult_out, {kept}));
    parsed.features.emplace("groundtruth_is_crowd", make_feature(DType::kI32, crowd_out, {kept}));
    parsed.features.emplace("groundtruth_group_of",
                            make_feature(DType::kI32, group_of_out, {kept}));
    parsed.features.emplace("groundtruth_area", make_feature(DType::kF32, area_out, {kept}));
    const std::vector<int32_t> shape = {static_cast<int32_t>(height), static_cast<int32_t>(width),
                                        3};
    parsed.features.emplace("true_image_shape", make_feature(DType::kI32, shape, {3}));
    if (masks_ != InstanceMasks::kNone) {
      parsed.features.emplace("groundtruth_instance_masks",
                              instance_masks(map, n, kept_objects, height, width, where));
    }
    return parsed;
  }

  // Boxes dropped and clipped so far (invalid_boxes clip or drop), over all records parsed.
  int64_t dropped_boxes() const { return dropped_.load(); }
  int64_t clipped_boxes() const { return clipped_.load(); }

 private:
  static bool valid(const float* b) {
    for (int c = 0; c < 4; ++c) {
      if (!(b[c] >= 0.0f && b[c] <= 1.0f)) return false;  // also NaN
    }
    return b[0] < b[2] && b[1] < b[3];
  }

  static std::string describe(const float* b) {
    std::string s = "[";
    for (int c = 0; c < 4; ++c) s += (c ? ", " : "") + std::to_string(b[c]);
    return s + "]";
  }

  void report(const RecordLocation& where, int64_t dropped, int64_t clipped) const {
    dropped_ += dropped;
    clipped_ += clipped;
    if (!reported_.exchange(true)) {
      std::cerr << "warning: DetectionReader: " << record_name(where) << " has invalid boxes ("
                << clipped << " clipped, " << dropped << " dropped, invalid_boxes "
                << (invalid_boxes_ == InvalidBoxes::kClip ? "clip" : "drop")
                << "); later records with invalid boxes are not reported\n";
    }
  }

  // The masks of the boxes kept, u8 [kept, height, width], from image/object/mask's n masks.
  ParsedFeature instance_masks(const ExampleFeatures& map, int64_t n,
                               const std::vector<int64_t>& kept, int64_t height, int64_t width,
                               const RecordLocation& where) const {
    const auto plane = static_cast<std::size_t>(height * width);
    if (kept.size() * plane > kMaxMaskBytes) {
      bad_record(where, std::to_string(kept.size()) + " instance masks of " +
                            std::to_string(height) + " x " + std::to_string(width) +
                            " would take " + std::to_string(kept.size() * plane) +
                            " bytes, above the reader's limit of " + std::to_string(kMaxMaskBytes) +
                            " per record");
    }
    ParsedFeature out{DType::kU8, {static_cast<int64_t>(kept.size()), height, width}, {}};
    out.bytes.resize(kept.size() * plane);
    const bool png = masks_ == InstanceMasks::kPng;
    const ExampleFeature* masks = present(map, kMask);
    if (masks == nullptr) {
      if (n == 0) return out;
      bad_record(where, std::string("feature '") + kMask + "' is missing; the record has " +
                            std::to_string(n) + " boxes and instance_masks is " +
                            (png ? "png" : "numerical") + " (load_instance_masks)");
    }
    if (png) {
      object_list(map, kMask, Kind::kBytes, n, where);
    } else {
      object_list(map, kMask, Kind::kFloat, -1, where);
      if (static_cast<int64_t>(masks->size()) != n * height * width) {
        bad_record(where, std::string("feature '") + kMask + "' has " +
                              std::to_string(masks->size()) + " values; expected " +
                              std::to_string(n) + " masks of " + std::to_string(height) + " x " +
                              std::to_string(width) + " (the boxes x the image's size)");
      }
    }
    for (std::size_t k = 0; k < kept.size(); ++k) {
      const auto object = static_cast<std::size_t>(kept[k]);
      std::byte* dst = out.bytes.data() + k * plane;
      if (!png) {
        const float* src = masks->floats().data() + object * plane;
        for (std::size_t p = 0; p < plane; ++p) dst[p] = std::byte{src[p] > 0.0f};
        continue;
      }
      const std::string_view bytes = masks->bytes()[object];
      const std::string name =
          record_name(where) + ": " + kMask + " value " + std::to_string(object);
      const image::DecodedImage mask = image::decode_image(
          std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), 1, name, max_pixels_);
      if (mask.height != height || mask.width != width) {
        bad_record(where, std::string("feature '") + kMask + "' value " + std::to_string(object) +
                              " is a " + std::to_string(mask.height) + " x " +
                              std::to_string(mask.width) + " mask; the image is " +
                              std::to_string(height) + " x " + std::to_string(width));
      }
      for (std::size_t p = 0; p < plane; ++p) dst[p] = std::byte{mask.pixels[p] > 0};
    }
    return out;
  }

  image::DecodedImage decode(const ExampleFeatures& map, const RecordLocation& where) const {
    const std::optional<std::string_view> encoded = single_bytes(map, kEncoded, where);
    if (!encoded) {
      bad_record(where, std::string("feature '") + kEncoded +
                            "' is missing; expected a bytes list of 1 value (a JPEG or PNG "
                            "image); the record has " +
                            map.describe_keys("features"));
    }
    const std::string_view format = single_bytes(map, kFormat, where).value_or("jpeg");
    if (!image::image_format_named(format)) {
      bad_record(where, std::string("feature '") + kFormat + "' is '" + std::string(format) +
                            "'; expected jpeg, jpg, JPEG, png or PNG (raw and other formats are "
                            "not supported)");
    }
    image::DecodedImage decoded =
        image::decode_image(std::as_bytes(std::span<const char>(encoded->data(), encoded->size())),
                            3, record_name(where) + ": " + kEncoded, max_pixels_);
    for (const auto& [key, size] : {std::pair{kHeight, decoded.height}, {kWidth, decoded.width}}) {
      const std::optional<int64_t> given = single_int64(map, key, where);
      if (given && *given != size) {
        bad_record(where, std::string("feature '") + key + "' is " + std::to_string(*given) +
                              " but '" + kEncoded + "' decodes to a " +
                              std::to_string(decoded.height) + " x " +
                              std::to_string(decoded.width) + " " +
                              image::image_format_name(decoded.format) + " image");
      }
    }
    return decoded;
  }

  int64_t num_classes_;
  bool use_display_name_;
  int64_t max_pixels_;
  InvalidBoxes invalid_boxes_ = InvalidBoxes::kError;
  InstanceMasks masks_ = InstanceMasks::kNone;
  bool drop_unmapped_ = true;
  std::string label_map_path_;
  std::unordered_map<std::string, int32_t> label_ids_;
  mutable std::atomic<int64_t> dropped_{0};
  mutable std::atomic<int64_t> clipped_{0};
  mutable std::atomic<bool> reported_{false};
};

}  // namespace
}  // namespace trainyard::readers

#define TRAINYARD_DETECTION_READER_CLASSES(X)                                            \
  X(reader, DetectionReader, trainyard::readers::DetectionReader,                        \
    "TF Object Detection API tf.Example: the image decoded to u8 [H, W, 3], normalized " \
    "[ymin, xmin, ymax, xmax] boxes, 0-based classes, difficult, is_crowd, group_of, area")
TRAINYARD_PLUGIN(detection_readers, 0, 1, 0, TRAINYARD_DETECTION_READER_CLASSES)
