#include "trainyard/core/detection_transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "trainyard/core/example_transforms.h"
#include "trainyard/error.h"
#include "trainyard/image_ops.h"
#include "trainyard/proto/od_preprocessor.pb.h"

namespace trainyard {
namespace {

[[noreturn]] void bad_option(const std::string& step, const std::string& message) {
  throw InvalidArgument(step + ": " + message);
}

void check_probability(const std::string& step, const char* name, float p) {
  if (!(p >= 0.0f && p <= 1.0f)) {
    bad_option(step, std::string(name) + " is " + std::to_string(p) + "; it must be in [0, 1]");
  }
}

void check_range(const std::string& step, const char* lo_name, float lo, const char* hi_name,
                 float hi) {
  if (!(lo <= hi)) {
    bad_option(step, std::string(lo_name) + " " + std::to_string(lo) + " is above " + hi_name +
                         " " + std::to_string(hi));
  }
}

image::ImageShape shape_of(const ParsedFeature& image) {
  return {image.shape[0], image.shape[1], image.shape[2]};
}

std::vector<float> read_floats(const ParsedFeature& f) {
  std::vector<float> v(f.bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), f.bytes.data(), v.size() * sizeof(float));
  return v;
}

void write_floats(ParsedFeature& f, const std::vector<float>& v) {
  f.bytes.resize(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(f.bytes.data(), v.data(), f.bytes.size());
}

// The image's values as floats (u8 or f32).
std::vector<float> image_values(const ParsedFeature& image) {
  if (image.dtype == DType::kF32) return read_floats(image);
  std::vector<float> v(image.bytes.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(std::to_integer<uint8_t>(image.bytes[i]));
  }
  return v;
}

void set_float_image(ParsedFeature& image, const std::vector<float>& values,
                     std::vector<int64_t> shape) {
  image.dtype = DType::kF32;
  image.shape = std::move(shape);
  write_floats(image, values);
}

void set_true_image_shape(const DetectionFeatureNames& names, ParsedRecord& record,
                          const ParsedFeature& image) {
  auto it = record.features.find(names.true_image_shape);
  if (names.true_image_shape.empty() || it == record.features.end()) return;
  const int32_t shape[3] = {static_cast<int32_t>(image.shape[0]),
                            static_cast<int32_t>(image.shape[1]),
                            static_cast<int32_t>(image.shape[2])};
  it->second.dtype = DType::kI32;
  it->second.shape = {3};
  it->second.bytes.resize(sizeof(shape));
  std::memcpy(it->second.bytes.data(), shape, sizeof(shape));
}

// Keeps rows `keep` (ascending indices) of the boxes and of the per-box features the record has.
void keep_boxes(const DetectionFeatureNames& names, ParsedRecord& record,
                const std::vector<std::size_t>& keep, std::size_t count) {
  std::vector<std::string> all = names.per_box;
  all.push_back(names.boxes);
  for (const std::string& name : all) {
    auto it = record.features.find(name);
    if (it == record.features.end()) continue;
    ParsedFeature& f = it->second;
    if (f.shape.empty() || count == 0) continue;
    const std::size_t row = f.bytes.size() / count;
    std::vector<std::byte> kept(keep.size() * row);
    for (std::size_t k = 0; k < keep.size(); ++k) {
      std::memcpy(kept.data() + k * row, f.bytes.data() + keep[k] * row, row);
    }
    f.bytes = std::move(kept);
    f.shape[0] = static_cast<int64_t>(keep.size());
  }
}

int64_t round_half_even(float v) { return static_cast<int64_t>(std::lrintf(v)); }

// Uniform integer in [0, n) from the record's stream (n >= 1).
int64_t uniform_int(ExampleRandom& random, int64_t n) {
  return std::min<int64_t>(n - 1, static_cast<int64_t>(random.uniform() * static_cast<float>(n)));
}

}  // namespace

// ---- DetectionTransform ----

DetectionTransform::DetectionTransform(DetectionFeatureNames names) : names_(std::move(names)) {
  if (names_.image.empty()) throw InvalidArgument("detection transform: the image name is empty");
}

std::vector<FeatureSpec> DetectionTransform::features(std::vector<FeatureSpec> input) const {
  auto find = [&](const std::string& n) {
    return std::find_if(input.begin(), input.end(),
                        [&](const FeatureSpec& s) { return s.name == n; });
  };
  auto image = find(names_.image);
  if (image == input.end()) {
    throw InvalidArgument(name() + ": no image feature '" + names_.image + "'");
  }
  if (image->shape.size() != 3 || (image->dtype != DType::kU8 && image->dtype != DType::kF32)) {
    throw InvalidArgument(name() + ": image feature '" + names_.image + "' is " +
                          dtype_name(image->dtype) + " of rank " +
                          std::to_string(image->shape.size()) +
                          "; it must be u8 or f32 [height, width, channels]");
  }
  if (float_image()) image->dtype = DType::kF32;
  if (!names_.boxes.empty()) {
    auto boxes = find(names_.boxes);
    if (boxes == input.end()) {
      throw InvalidArgument(name() + ": no boxes feature '" + names_.boxes + "'");
    }
    if (boxes->dtype != DType::kF32 || boxes->shape.size() != 2 || boxes->shape[1] != 4) {
      throw InvalidArgument(
          name() + ": boxes feature '" + names_.boxes + "' is " + dtype_name(boxes->dtype) +
          " of rank " + std::to_string(boxes->shape.size()) + "; it must be f32 [num_boxes, 4]");
    }
  }
  return input;
}

// ---- RandomVerticalFlip ----

RandomVerticalFlip::RandomVerticalFlip(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  check_probability(name(), "probability", options_.probability);
}

void RandomVerticalFlip::apply(ParsedRecord& record, ExampleRandom& random,
                               const RecordLocation&) const {
  if (!random.bernoulli(options_.probability)) return;
  ParsedFeature& image = record.features.at(names_.image);
  const image::ImageShape s = shape_of(image);
  const std::size_t row = static_cast<std::size_t>(s.width * s.channels) * dtype_size(image.dtype);
  std::vector<std::byte> tmp(row);
  for (int64_t y = 0; y < s.height / 2; ++y) {
    std::byte* a = image.bytes.data() + static_cast<std::size_t>(y) * row;
    std::byte* b = image.bytes.data() + static_cast<std::size_t>(s.height - 1 - y) * row;
    std::memcpy(tmp.data(), a, row);
    std::memcpy(a, b, row);
    std::memcpy(b, tmp.data(), row);
  }
  if (names_.boxes.empty()) return;
  ParsedFeature& boxes = record.features.at(names_.boxes);
  std::vector<float> v = read_floats(boxes);
  for (std::size_t i = 0; i + 3 < v.size(); i += 4) {
    const float ymin = v[i];
    v[i] = 1.0f - v[i + 2];
    v[i + 2] = 1.0f - ymin;
  }
  write_floats(boxes, v);
}

// ---- RandomRotation90 ----

RandomRotation90::RandomRotation90(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  check_probability(name(), "probability", options_.probability);
}

void RandomRotation90::apply(ParsedRecord& record, ExampleRandom& random,
                             const RecordLocation&) const {
  if (!random.bernoulli(options_.probability)) return;
  ParsedFeature& image = record.features.at(names_.image);
  const image::ImageShape s = shape_of(image);
  const std::size_t pixel = static_cast<std::size_t>(s.channels) * dtype_size(image.dtype);
  std::vector<std::byte> out(image.bytes.size());
  // Counter-clockwise: output (i, j), i < W, j < H, is input (j, W - 1 - i).
  for (int64_t i = 0; i < s.width; ++i) {
    for (int64_t j = 0; j < s.height; ++j) {
      std::memcpy(
          out.data() + static_cast<std::size_t>(i * s.height + j) * pixel,
          image.bytes.data() + static_cast<std::size_t>(j * s.width + s.width - 1 - i) * pixel,
          pixel);
    }
  }
  image.bytes = std::move(out);
  image.shape = {s.width, s.height, s.channels};
  set_true_image_shape(names_, record, image);
  if (names_.boxes.empty()) return;
  ParsedFeature& boxes = record.features.at(names_.boxes);
  std::vector<float> v = read_floats(boxes);
  for (std::size_t i = 0; i + 3 < v.size(); i += 4) {
    const float ymin = v[i], xmin = v[i + 1], ymax = v[i + 2], xmax = v[i + 3];
    v[i] = 1.0f - xmax;
    v[i + 1] = ymin;
    v[i + 2] = 1.0f - xmin;
    v[i + 3] = ymax;
  }
  write_floats(boxes, v);
}

// ---- RandomCropImage ----

namespace {

void check_crop_options(const std::string& step, const RandomCropImage::Options& o) {
  check_probability(step, "min_object_covered", o.min_object_covered);
  check_probability(step, "overlap_thresh", o.overlap_thresh);
  check_probability(step, "random_coef", o.random_coef);
  if (!(o.min_aspect_ratio > 0.0f)) {
    bad_option(step, "min_aspect_ratio is " + std::to_string(o.min_aspect_ratio) +
                         "; it must be positive");
  }
  check_range(step, "min_aspect_ratio", o.min_aspect_ratio, "max_aspect_ratio", o.max_aspect_ratio);
  if (!(o.min_area > 0.0f && o.max_area <= 1.0f)) {
    bad_option(step, "the area range is [" + std::to_string(o.min_area) + ", " +
                         std::to_string(o.max_area) + "]; it must lie in (0, 1]");
  }
  check_range(step, "min_area", o.min_area, "max_area", o.max_area);
}

struct PixelRect {
  int64_t xmin, ymin, xmax, ymax;
  int64_t area() const { return (xmax - xmin) * (ymax - ymin); }
};

// tf.image.sample_distorted_bounding_box's GenerateRandomCrop for one aspect ratio.
bool random_crop_rect(int64_t height, int64_t width, float aspect, float min_rel, float max_rel,
                      ExampleRandom& random, PixelRect* rect) {
  const float min_area = min_rel * static_cast<float>(width) * static_cast<float>(height);
  const float max_area = max_rel * static_cast<float>(width) * static_cast<float>(height);
  int64_t h = round_half_even(std::sqrt(min_area / aspect));
  int64_t max_h = round_half_even(std::sqrt(max_area / aspect));
  if (round_half_even(static_cast<float>(max_h) * aspect) > width) {
    // The largest height whose rounded width still fits.
    max_h = static_cast<int64_t>((static_cast<float>(width) + 0.5f - 1e-7f) / aspect);
  }
  max_h = std::min(max_h, height);
  h = std::min(h, max_h);
  if (h < max_h) h += uniform_int(random, max_h - h + 1);
  int64_t w = round_half_even(static_cast<float>(h) * aspect);
  float area = static_cast<float>(w * h);
  if (area < min_area) {
    h += 1;
    w = round_half_even(static_cast<float>(h) * aspect);
    area = static_cast<float>(w * h);
  }
  if (area > max_area) {
    h -= 1;
    w = round_half_even(static_cast<float>(h) * aspect);
    area = static_cast<float>(w * h);
  }
  if (area < min_area || area > max_area || w > width || h > height || w <= 0 || h <= 0) {
    return false;
  }
  const int64_t y = h < height ? uniform_int(random, height - h) : 0;
  const int64_t x = w < width ? uniform_int(random, width - w) : 0;
  *rect = {x, y, x + w, y + h};
  return true;
}

bool covers_an_object(const PixelRect& crop, const std::vector<PixelRect>& objects,
                      float min_object_covered) {
  if (crop.area() < 1) return false;
  for (const PixelRect& o : objects) {
    const int64_t area = o.area();
    if (area < 1) continue;
    const int64_t w = std::min(crop.xmax, o.xmax) - std::max(crop.xmin, o.xmin);
    const int64_t h = std::min(crop.ymax, o.ymax) - std::max(crop.ymin, o.ymin);
    const int64_t inter = w > 0 && h > 0 ? w * h : 0;
    if (static_cast<float>(inter) / static_cast<float>(area) >= min_object_covered) return true;
  }
  return false;
}

}  // namespace

RandomCropImage::RandomCropImage(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  check_crop_options(name(), options_);
}

RandomCropImage::Window RandomCropImage::sample_window(int64_t height, int64_t width,
                                                       const std::vector<float>& boxes,
                                                       const Options& options,
                                                       ExampleRandom& random) {
  std::vector<PixelRect> objects;
  for (std::size_t i = 0; i + 3 < boxes.size(); i += 4) {
    auto c = [&](std::size_t k) { return std::clamp(boxes[i + k], 0.0f, 1.0f); };
    objects.push_back({static_cast<int64_t>(c(1) * static_cast<float>(width)),
                       static_cast<int64_t>(c(0) * static_cast<float>(height)),
                       static_cast<int64_t>(c(3) * static_cast<float>(width)),
                       static_cast<int64_t>(c(2) * static_cast<float>(height))});
  }
  if (objects.empty()) objects.push_back({0, 0, width, height});
  for (int attempt = 0; attempt < 100; ++attempt) {
    const float aspect = random.uniform(options.min_aspect_ratio, options.max_aspect_ratio);
    PixelRect rect{};
    if (!random_crop_rect(height, width, aspect, options.min_area, options.max_area, random,
                          &rect)) {
      continue;
    }
    if (covers_an_object(rect, objects, options.min_object_covered)) {
      return {rect.ymin, rect.xmin, rect.ymax - rect.ymin, rect.xmax - rect.xmin};
    }
  }
  return {0, 0, height, width};
}

void RandomCropImage::crop(const Options& options, const DetectionFeatureNames& names,
                           ParsedRecord& record, ExampleRandom& random) {
  const ParsedFeature& image = record.features.at(names.image);
  std::vector<float> boxes;
  if (!names.boxes.empty()) boxes = read_floats(record.features.at(names.boxes));
  apply_window(options, names, record,
               sample_window(image.shape[0], image.shape[1], boxes, options, random));
}

void RandomCropImage::apply_window(const Options& options, const DetectionFeatureNames& names,
                                   ParsedRecord& record, const Window& w) {
  ParsedFeature& image = record.features.at(names.image);
  const image::ImageShape s = shape_of(image);
  std::vector<float> boxes;
  ParsedFeature* boxes_feature = nullptr;
  if (!names.boxes.empty()) {
    boxes_feature = &record.features.at(names.boxes);
    boxes = read_floats(*boxes_feature);
  }
  const std::size_t element = dtype_size(image.dtype);
  std::vector<std::byte> out(static_cast<std::size_t>(w.height * w.width * s.channels) * element);
  image::crop(image.bytes, s, element, w.top, w.left, w.height, w.width, out);
  image.bytes = std::move(out);
  image.shape = {w.height, w.width, s.channels};
  set_true_image_shape(names, record, image);
  if (boxes_feature == nullptr) return;

  // The window in normalized coordinates, as the API's im_box.
  const float wy0 = static_cast<float>(w.top) / static_cast<float>(s.height);
  const float wx0 = static_cast<float>(w.left) / static_cast<float>(s.width);
  const float wy1 = static_cast<float>(w.top + w.height) / static_cast<float>(s.height);
  const float wx1 = static_cast<float>(w.left + w.width) / static_cast<float>(s.width);
  const std::size_t count = boxes.size() / 4;
  std::vector<std::size_t> keep;
  std::vector<float> kept;
  for (std::size_t i = 0; i < count; ++i) {
    const float* b = &boxes[4 * i];
    if (b[0] >= wy1 || b[1] >= wx1 || b[2] <= wy0 || b[3] <= wx0) continue;  // outside
    const float inter =
        (std::min(b[2], wy1) - std::max(b[0], wy0)) * (std::min(b[3], wx1) - std::max(b[1], wx0));
    const float area = (b[2] - b[0]) * (b[3] - b[1]);
    if (!(area > 0.0f) || !(inter / area >= options.overlap_thresh)) continue;
    float nb[4] = {(b[0] - wy0) / (wy1 - wy0), (b[1] - wx0) / (wx1 - wx0),
                   (b[2] - wy0) / (wy1 - wy0), (b[3] - wx0) / (wx1 - wx0)};
    if (options.clip_boxes) {
      for (float& v : nb) v = std::clamp(v, 0.0f, 1.0f);
    }
    keep.push_back(i);
    kept.insert(kept.end(), nb, nb + 4);
  }
  keep_boxes(names, record, keep, count);
  write_floats(*boxes_feature, kept);
}

void RandomCropImage::apply(ParsedRecord& record, ExampleRandom& random,
                            const RecordLocation&) const {
  if (random.uniform() < options_.random_coef) return;
  crop(options_, names_, record, random);
}

// ---- SsdRandomCrop ----

std::vector<RandomCropImage::Options> SsdRandomCrop::default_operations() {
  std::vector<RandomCropImage::Options> ops;
  for (float t : {0.0f, 0.1f, 0.3f, 0.5f, 0.7f, 0.9f, 1.0f}) {
    ops.push_back({.min_object_covered = t,
                   .min_aspect_ratio = 0.5f,
                   .max_aspect_ratio = 2.0f,
                   .min_area = 0.1f,
                   .max_area = 1.0f,
                   .overlap_thresh = t,
                   .clip_boxes = true,
                   .random_coef = 0.15f});
  }
  return ops;
}

SsdRandomCrop::SsdRandomCrop(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(std::move(options)) {
  if (options_.operations.empty()) bad_option(name(), "no operations");
  for (std::size_t i = 0; i < options_.operations.size(); ++i) {
    check_crop_options(name() + " operation " + std::to_string(i), options_.operations[i]);
  }
}

void SsdRandomCrop::apply(ParsedRecord& record, ExampleRandom& random,
                          const RecordLocation&) const {
  const auto n = static_cast<int64_t>(options_.operations.size());
  const RandomCropImage::Options& op =
      options_.operations[static_cast<std::size_t>(uniform_int(random, n))];
  if (random.uniform() < op.random_coef) return;
  RandomCropImage::crop(op, names_, record, random);
}

// ---- ResizeImage ----

ResizeImage::ResizeImage(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  if (options_.new_height < 1 || options_.new_width < 1) {
    bad_option(name(), "new_height x new_width is " + std::to_string(options_.new_height) + " x " +
                           std::to_string(options_.new_width) + "; both must be at least 1");
  }
}

std::vector<FeatureSpec> ResizeImage::features(std::vector<FeatureSpec> input) const {
  input = DetectionTransform::features(std::move(input));
  for (FeatureSpec& f : input) {
    if (f.name == names_.image) f.shape = {options_.new_height, options_.new_width, f.shape[2]};
  }
  return input;
}

void ResizeImage::apply(ParsedRecord& record, ExampleRandom&, const RecordLocation&) const {
  ParsedFeature& image = record.features.at(names_.image);
  const image::ImageShape s = shape_of(image);
  const int64_t oh = options_.new_height, ow = options_.new_width;
  std::vector<float> out(static_cast<std::size_t>(oh * ow * s.channels));
  if (options_.method == Method::kBilinear) {
    if (image.dtype == DType::kU8) {
      image::resize_bilinear(
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(image.bytes.data()),
                                   image.bytes.size()),
          s, out, oh, ow);
    } else {
      const std::vector<float> in = read_floats(image);
      image::resize_bilinear(in, s, out, oh, ow);
    }
  } else {
    const std::vector<float> in = image_values(image);
    const float sy = static_cast<float>(s.height) / static_cast<float>(oh);
    const float sx = static_cast<float>(s.width) / static_cast<float>(ow);
    for (int64_t y = 0; y < oh; ++y) {
      const int64_t iy =
          std::min(s.height - 1, static_cast<int64_t>(std::floor(static_cast<float>(y) * sy)));
      for (int64_t x = 0; x < ow; ++x) {
        const int64_t ix =
            std::min(s.width - 1, static_cast<int64_t>(std::floor(static_cast<float>(x) * sx)));
        for (int64_t c = 0; c < s.channels; ++c) {
          out[static_cast<std::size_t>((y * ow + x) * s.channels + c)] =
              in[static_cast<std::size_t>((iy * s.width + ix) * s.channels + c)];
        }
      }
    }
  }
  set_float_image(image, out, {oh, ow, s.channels});
  set_true_image_shape(names_, record, image);
}

// ---- NormalizeImage ----

NormalizeImage::NormalizeImage(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  if (!(options_.original_maxval != options_.original_minval)) {
    bad_option(name(), "original_minval and original_maxval are both " +
                           std::to_string(options_.original_minval));
  }
}

void NormalizeImage::apply(ParsedRecord& record, ExampleRandom&, const RecordLocation&) const {
  ParsedFeature& image = record.features.at(names_.image);
  std::vector<float> v = image_values(image);
  const float scale = (options_.target_maxval - options_.target_minval) /
                      (options_.original_maxval - options_.original_minval);
  for (float& x : v) x = (x - options_.original_minval) * scale + options_.target_minval;
  set_float_image(image, v, image.shape);
}

// ---- Colour ----

RandomPixelValueScale::RandomPixelValueScale(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  check_range(name(), "minval", options_.minval, "maxval", options_.maxval);
}

void RandomPixelValueScale::apply(ParsedRecord& record, ExampleRandom& random,
                                  const RecordLocation&) const {
  ParsedFeature& image = record.features.at(names_.image);
  std::vector<float> v = image_values(image);
  for (float& x : v) {
    x = std::clamp(x * random.uniform(options_.minval, options_.maxval), 0.0f, 255.0f);
  }
  set_float_image(image, v, image.shape);
}

RandomAdjustBrightness::RandomAdjustBrightness(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  if (!(options_.max_delta >= 0.0f)) {
    bad_option(name(),
               "max_delta is " + std::to_string(options_.max_delta) + "; it must be at least 0");
  }
}

void RandomAdjustBrightness::apply(ParsedRecord& record, ExampleRandom& random,
                                   const RecordLocation&) const {
  ParsedFeature& image = record.features.at(names_.image);
  const float delta = random.uniform(-options_.max_delta, options_.max_delta) * 255.0f;
  std::vector<float> v = image_values(image);
  for (float& x : v) x = std::clamp(x + delta, 0.0f, 255.0f);
  set_float_image(image, v, image.shape);
}

RandomAdjustContrast::RandomAdjustContrast(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  check_range(name(), "min_delta", options_.min_delta, "max_delta", options_.max_delta);
}

void RandomAdjustContrast::apply(ParsedRecord& record, ExampleRandom& random,
                                 const RecordLocation&) const {
  ParsedFeature& image = record.features.at(names_.image);
  const float factor = random.uniform(options_.min_delta, options_.max_delta);
  std::vector<float> v = image_values(image);
  const auto channels = static_cast<std::size_t>(image.shape[2]);
  const std::size_t pixels = channels == 0 ? 0 : v.size() / channels;
  for (std::size_t c = 0; c < channels; ++c) {
    double sum = 0.0;
    for (std::size_t p = 0; p < pixels; ++p) sum += v[p * channels + c];
    const auto mean = static_cast<float>(pixels ? sum / static_cast<double>(pixels) : 0.0);
    for (std::size_t p = 0; p < pixels; ++p) {
      float& x = v[p * channels + c];
      x = std::clamp(mean + (x - mean) * factor, 0.0f, 255.0f);
    }
  }
  set_float_image(image, v, image.shape);
}

// ---- RandomJitterBoxes ----

RandomJitterBoxes::RandomJitterBoxes(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  if (!(options_.ratio >= 0.0f && options_.ratio <= 0.5f)) {
    bad_option(name(), "ratio is " + std::to_string(options_.ratio) + "; it must be in [0, 0.5]");
  }
  if (names_.boxes.empty()) bad_option(name(), "the boxes feature name is empty");
}

void RandomJitterBoxes::apply(ParsedRecord& record, ExampleRandom& random,
                              const RecordLocation&) const {
  ParsedFeature& boxes = record.features.at(names_.boxes);
  std::vector<float> v = read_floats(boxes);
  for (std::size_t i = 0; i + 3 < v.size(); i += 4) {
    const float height = v[i + 2] - v[i], width = v[i + 3] - v[i + 1];
    const float scale[4] = {height, width, height, width};
    for (std::size_t c = 0; c < 4; ++c) {
      v[i + c] = std::clamp(v[i + c] + scale[c] * random.uniform(-options_.ratio, options_.ratio),
                            0.0f, 1.0f);
    }
  }
  write_floats(boxes, v);
}

// ---- Hue, saturation, colour distortion ----

namespace {

void check_rgb(const std::string& step, const ParsedFeature& image) {
  if (image.shape[2] != 3) {
    throw InvalidArgument(step + ": the image has " + std::to_string(image.shape[2]) +
                          " channels; it needs 3 (RGB)");
  }
}

// tf.image.rgb_to_hsv / hsv_to_rgb on values in [0, 1].
void rgb_to_hsv(float r, float g, float b, float* h, float* s, float* v) {
  const float mx = std::max({r, g, b}), mn = std::min({r, g, b});
  const float range = mx - mn;
  *v = mx;
  *s = mx > 0.0f ? range / mx : 0.0f;
  float hue = 0.0f;
  if (range > 0.0f) {
    if (mx == r) {
      hue = (g - b) / range;
    } else if (mx == g) {
      hue = (b - r) / range + 2.0f;
    } else {
      hue = (r - g) / range + 4.0f;
    }
    hue /= 6.0f;
    if (hue < 0.0f) hue += 1.0f;
  }
  *h = hue;
}

void hsv_to_rgb(float h, float s, float v, float* r, float* g, float* b) {
  const float c = v * s;
  const float hp = h * 6.0f;
  const float x = c * (1.0f - std::fabs(std::fmod(hp, 2.0f) - 1.0f));
  float rr = 0, gg = 0, bb = 0;
  if (hp < 1.0f) {
    rr = c, gg = x;
  } else if (hp < 2.0f) {
    rr = x, gg = c;
  } else if (hp < 3.0f) {
    gg = c, bb = x;
  } else if (hp < 4.0f) {
    gg = x, bb = c;
  } else if (hp < 5.0f) {
    rr = x, bb = c;
  } else {
    rr = c, bb = x;
  }
  const float m = v - c;
  *r = rr + m, *g = gg + m, *b = bb + m;
}

template <class F>
void map_hsv(std::vector<float>& rgb, F f) {
  for (std::size_t i = 0; i + 2 < rgb.size(); i += 3) {
    float h, s, v;
    rgb_to_hsv(rgb[i] / 255.0f, rgb[i + 1] / 255.0f, rgb[i + 2] / 255.0f, &h, &s, &v);
    f(h, s, v);
    float r, g, b;
    hsv_to_rgb(h, s, v, &r, &g, &b);
    rgb[i] = std::clamp(r * 255.0f, 0.0f, 255.0f);
    rgb[i + 1] = std::clamp(g * 255.0f, 0.0f, 255.0f);
    rgb[i + 2] = std::clamp(b * 255.0f, 0.0f, 255.0f);
  }
}

void brightness(std::vector<float>& v, float delta) {
  for (float& x : v) x = std::clamp(x + delta * 255.0f, 0.0f, 255.0f);
}

void contrast(std::vector<float>& v, std::size_t channels, float factor) {
  const std::size_t pixels = channels == 0 ? 0 : v.size() / channels;
  for (std::size_t c = 0; c < channels; ++c) {
    double sum = 0.0;
    for (std::size_t p = 0; p < pixels; ++p) sum += v[p * channels + c];
    const auto mean = static_cast<float>(pixels ? sum / static_cast<double>(pixels) : 0.0);
    for (std::size_t p = 0; p < pixels; ++p) {
      float& x = v[p * channels + c];
      x = std::clamp(mean + (x - mean) * factor, 0.0f, 255.0f);
    }
  }
}

}  // namespace

void RandomAdjustHue::adjust_hue(std::vector<float>& rgb, float delta) {
  map_hsv(rgb, [delta](float& h, float&, float&) {
    h = std::fmod(h + delta, 1.0f);
    if (h < 0.0f) h += 1.0f;
  });
}

void RandomAdjustSaturation::adjust_saturation(std::vector<float>& rgb, float factor) {
  map_hsv(rgb, [factor](float&, float& s, float&) { s = std::clamp(s * factor, 0.0f, 1.0f); });
}

RandomAdjustHue::RandomAdjustHue(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  if (!(options_.max_delta >= 0.0f && options_.max_delta <= 0.5f)) {
    bad_option(name(),
               "max_delta is " + std::to_string(options_.max_delta) + "; it must be in [0, 0.5]");
  }
}

void RandomAdjustHue::apply(ParsedRecord& record, ExampleRandom& random,
                            const RecordLocation&) const {
  ParsedFeature& image = record.features.at(names_.image);
  check_rgb(name(), image);
  std::vector<float> v = image_values(image);
  adjust_hue(v, random.uniform(-options_.max_delta, options_.max_delta));
  set_float_image(image, v, image.shape);
}

RandomAdjustSaturation::RandomAdjustSaturation(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  check_range(name(), "min_delta", options_.min_delta, "max_delta", options_.max_delta);
}

void RandomAdjustSaturation::apply(ParsedRecord& record, ExampleRandom& random,
                                   const RecordLocation&) const {
  ParsedFeature& image = record.features.at(names_.image);
  check_rgb(name(), image);
  std::vector<float> v = image_values(image);
  adjust_saturation(v, random.uniform(options_.min_delta, options_.max_delta));
  set_float_image(image, v, image.shape);
}

RandomDistortColor::RandomDistortColor(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  if (options_.color_ordering != 0 && options_.color_ordering != 1) {
    bad_option(name(), "color_ordering is " + std::to_string(options_.color_ordering) +
                           "; it must be 0 or 1");
  }
}

void RandomDistortColor::apply(ParsedRecord& record, ExampleRandom& random,
                               const RecordLocation&) const {
  ParsedFeature& image = record.features.at(names_.image);
  check_rgb(name(), image);
  std::vector<float> v = image_values(image);
  const float max_brightness = 32.0f / 255.0f;
  brightness(v, random.uniform(-max_brightness, max_brightness));
  if (options_.color_ordering == 0) {
    RandomAdjustSaturation::adjust_saturation(v, random.uniform(0.5f, 1.5f));
    RandomAdjustHue::adjust_hue(v, random.uniform(-0.2f, 0.2f));
    contrast(v, 3, random.uniform(0.5f, 1.5f));
  } else {
    contrast(v, 3, random.uniform(0.5f, 1.5f));
    RandomAdjustSaturation::adjust_saturation(v, random.uniform(0.5f, 1.5f));
    RandomAdjustHue::adjust_hue(v, random.uniform(-0.2f, 0.2f));
  }
  set_float_image(image, v, image.shape);
}

// ---- RandomPadImage ----

RandomPadImage::RandomPadImage(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(std::move(options)) {
  for (int64_t size : {options_.min_image_height, options_.min_image_width,
                       options_.max_image_height, options_.max_image_width}) {
    if (size < 0) bad_option(name(), "an image size is negative");
  }
}

void RandomPadImage::pad(const DetectionFeatureNames& names, ParsedRecord& record, int64_t top,
                         int64_t left, int64_t target_height, int64_t target_width,
                         const std::vector<float>& pad_color) {
  ParsedFeature& image = record.features.at(names.image);
  const image::ImageShape s = shape_of(image);
  const std::vector<float> in = image_values(image);
  std::vector<float> out(static_cast<std::size_t>(target_height * target_width * s.channels));
  for (std::size_t p = 0; p < out.size(); ++p) {
    out[p] = pad_color[p % static_cast<std::size_t>(s.channels)];
  }
  for (int64_t y = 0; y < s.height; ++y) {
    std::memcpy(&out[static_cast<std::size_t>(((y + top) * target_width + left) * s.channels)],
                &in[static_cast<std::size_t>(y * s.width * s.channels)],
                static_cast<std::size_t>(s.width * s.channels) * sizeof(float));
  }
  set_float_image(image, out, {target_height, target_width, s.channels});
  set_true_image_shape(names, record, image);
  if (names.boxes.empty()) return;
  ParsedFeature& boxes = record.features.at(names.boxes);
  std::vector<float> v = read_floats(boxes);
  const auto fh = static_cast<float>(s.height), fw = static_cast<float>(s.width);
  for (std::size_t i = 0; i + 3 < v.size(); i += 4) {
    v[i] = (v[i] * fh + static_cast<float>(top)) / static_cast<float>(target_height);
    v[i + 2] = (v[i + 2] * fh + static_cast<float>(top)) / static_cast<float>(target_height);
    v[i + 1] = (v[i + 1] * fw + static_cast<float>(left)) / static_cast<float>(target_width);
    v[i + 3] = (v[i + 3] * fw + static_cast<float>(left)) / static_cast<float>(target_width);
  }
  write_floats(boxes, v);
}

void RandomPadImage::random_pad(const Options& options, const DetectionFeatureNames& names,
                                ParsedRecord& record, ExampleRandom& random) {
  const ParsedFeature& image = record.features.at(names.image);
  const image::ImageShape s = shape_of(image);
  std::vector<float> color = options.pad_color;
  if (color.empty()) {
    const std::vector<float> v = image_values(image);
    color.assign(static_cast<std::size_t>(s.channels), 0.0f);
    std::vector<double> sum(color.size(), 0.0);
    for (std::size_t i = 0; i < v.size(); ++i) sum[i % sum.size()] += v[i];
    const double pixels = std::max<double>(1.0, static_cast<double>(s.height * s.width));
    for (std::size_t c = 0; c < color.size(); ++c) color[c] = static_cast<float>(sum[c] / pixels);
  } else if (static_cast<int64_t>(color.size()) != s.channels) {
    throw InvalidArgument("RandomPadImage: pad_color has " + std::to_string(color.size()) +
                          " values but the image has " + std::to_string(s.channels) + " channels");
  }
  auto draw_size = [&](int64_t size, int64_t min_size, int64_t max_size) {
    const int64_t lo = std::max(min_size > 0 ? min_size : size, size);
    const int64_t hi = std::max(max_size > 0 ? max_size : 2 * size, size);
    return hi > lo ? lo + uniform_int(random, hi - lo) : hi;
  };
  const int64_t th = draw_size(s.height, options.min_image_height, options.max_image_height);
  const int64_t tw = draw_size(s.width, options.min_image_width, options.max_image_width);
  const int64_t top = th > s.height ? uniform_int(random, th - s.height) : 0;
  const int64_t left = tw > s.width ? uniform_int(random, tw - s.width) : 0;
  pad(names, record, top, left, th, tw, color);
}

void RandomPadImage::apply(ParsedRecord& record, ExampleRandom& random,
                           const RecordLocation&) const {
  random_pad(options_, names_, record, random);
}

// ---- RandomCropPadImage, SsdRandomCropPad ----

namespace {

void check_crop_pad(const std::string& step, const CropPadOperation& op) {
  check_crop_options(step, op.crop);
  for (int d = 0; d < 2; ++d) {
    if (!(op.min_padded_size_ratio[d] > 0.0f) ||
        !(op.min_padded_size_ratio[d] <= op.max_padded_size_ratio[d])) {
      bad_option(step, "padded size ratios [" + std::to_string(op.min_padded_size_ratio[d]) + ", " +
                           std::to_string(op.max_padded_size_ratio[d]) +
                           "] must be positive and ordered");
    }
  }
}

}  // namespace

void RandomCropPadImage::crop_pad(const CropPadOperation& op, const DetectionFeatureNames& names,
                                  ParsedRecord& record, ExampleRandom& random) {
  const std::vector<int64_t> original = record.features.at(names.image).shape;
  if (!(random.uniform() < op.crop.random_coef))
    RandomCropImage::crop(op.crop, names, record, random);
  RandomPadImage::Options pad;
  pad.min_image_height =
      static_cast<int64_t>(static_cast<float>(original[0]) * op.min_padded_size_ratio[0]);
  pad.min_image_width =
      static_cast<int64_t>(static_cast<float>(original[1]) * op.min_padded_size_ratio[1]);
  pad.max_image_height =
      static_cast<int64_t>(static_cast<float>(original[0]) * op.max_padded_size_ratio[0]);
  pad.max_image_width =
      static_cast<int64_t>(static_cast<float>(original[1]) * op.max_padded_size_ratio[1]);
  // The API's max(min, image) and max(max, image): at least the cropped image, never unset.
  const std::vector<int64_t>& cropped = record.features.at(names.image).shape;
  pad.min_image_height = std::max(pad.min_image_height, cropped[0]);
  pad.min_image_width = std::max(pad.min_image_width, cropped[1]);
  pad.max_image_height = std::max(pad.max_image_height, cropped[0]);
  pad.max_image_width = std::max(pad.max_image_width, cropped[1]);
  pad.pad_color = op.pad_color;
  RandomPadImage::random_pad(pad, names, record, random);
}

RandomCropPadImage::RandomCropPadImage(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(std::move(options)) {
  check_crop_pad(name(), options_);
}

void RandomCropPadImage::apply(ParsedRecord& record, ExampleRandom& random,
                               const RecordLocation&) const {
  crop_pad(options_, names_, record, random);
}

std::vector<CropPadOperation> SsdRandomCropPad::default_operations() {
  std::vector<CropPadOperation> ops;
  for (float t : {0.1f, 0.3f, 0.5f, 0.7f, 0.9f, 1.0f}) {
    CropPadOperation op;
    op.crop = {.min_object_covered = t,
               .min_aspect_ratio = 0.5f,
               .max_aspect_ratio = 2.0f,
               .min_area = 0.1f,
               .max_area = 1.0f,
               .overlap_thresh = t,
               .clip_boxes = true,
               .random_coef = 0.15f};
    ops.push_back(op);
  }
  return ops;
}

SsdRandomCropPad::SsdRandomCropPad(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(std::move(options)) {
  if (options_.operations.empty()) bad_option(name(), "no operations");
  for (std::size_t i = 0; i < options_.operations.size(); ++i) {
    check_crop_pad(name() + " operation " + std::to_string(i), options_.operations[i]);
  }
}

void SsdRandomCropPad::apply(ParsedRecord& record, ExampleRandom& random,
                             const RecordLocation&) const {
  const auto n = static_cast<int64_t>(options_.operations.size());
  RandomCropPadImage::crop_pad(
      options_.operations[static_cast<std::size_t>(uniform_int(random, n))], names_, record,
      random);
}

// ---- RandomBlackPatches ----

RandomBlackPatches::RandomBlackPatches(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  check_probability(name(), "probability", options_.probability);
  if (!(options_.size_to_image_ratio > 0.0f && options_.size_to_image_ratio < 1.0f)) {
    bad_option(name(), "size_to_image_ratio is " + std::to_string(options_.size_to_image_ratio) +
                           "; it must be in (0, 1)");
  }
  if (options_.max_black_patches < 0) bad_option(name(), "max_black_patches is negative");
}

void RandomBlackPatches::apply(ParsedRecord& record, ExampleRandom& random,
                               const RecordLocation&) const {
  ParsedFeature& image = record.features.at(names_.image);
  const image::ImageShape s = shape_of(image);
  const std::size_t pixel = static_cast<std::size_t>(s.channels) * dtype_size(image.dtype);
  const float ratio = options_.size_to_image_ratio;
  const auto side = static_cast<int64_t>(static_cast<float>(std::min(s.height, s.width)) * ratio);
  for (int i = 0; i < options_.max_black_patches; ++i) {
    if (!random.bernoulli(options_.probability)) continue;
    const auto top =
        static_cast<int64_t>(random.uniform(0.0f, 1.0f - ratio) * static_cast<float>(s.height));
    const auto left =
        static_cast<int64_t>(random.uniform(0.0f, 1.0f - ratio) * static_cast<float>(s.width));
    for (int64_t y = top; y < std::min(s.height, top + side); ++y) {
      const int64_t width = std::min(s.width, left + side) - left;
      std::memset(image.bytes.data() + static_cast<std::size_t>(y * s.width + left) * pixel, 0,
                  static_cast<std::size_t>(width) * pixel);
    }
  }
}

// ---- RandomImageScale ----

RandomImageScale::RandomImageScale(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  if (!(options_.min_scale_ratio > 0.0f)) {
    bad_option(name(), "min_scale_ratio is " + std::to_string(options_.min_scale_ratio) +
                           "; it must be positive");
  }
  check_range(name(), "min_scale_ratio", options_.min_scale_ratio, "max_scale_ratio",
              options_.max_scale_ratio);
}

void RandomImageScale::apply(ParsedRecord& record, ExampleRandom& random,
                             const RecordLocation&) const {
  ParsedFeature& image = record.features.at(names_.image);
  const image::ImageShape s = shape_of(image);
  const float factor = random.uniform(options_.min_scale_ratio, options_.max_scale_ratio);
  const int64_t oh =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<float>(s.height) * factor));
  const int64_t ow =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<float>(s.width) * factor));
  const std::vector<float> in = image_values(image);
  std::vector<float> out(static_cast<std::size_t>(oh * ow * s.channels));
  // align_corners=True: output pixel i samples input (in - 1) / (out - 1) x i.
  const float sy = oh > 1 ? static_cast<float>(s.height - 1) / static_cast<float>(oh - 1) : 0.0f;
  const float sx = ow > 1 ? static_cast<float>(s.width - 1) / static_cast<float>(ow - 1) : 0.0f;
  const auto at = [&](int64_t y, int64_t x, int64_t c) {
    return in[static_cast<std::size_t>((y * s.width + x) * s.channels + c)];
  };
  for (int64_t y = 0; y < oh; ++y) {
    const float fy = static_cast<float>(y) * sy;
    const auto y0 = static_cast<int64_t>(std::floor(fy));
    const int64_t y1 = std::min(y0 + 1, s.height - 1);
    const float dy = fy - static_cast<float>(y0);
    for (int64_t x = 0; x < ow; ++x) {
      const float fx = static_cast<float>(x) * sx;
      const auto x0 = static_cast<int64_t>(std::floor(fx));
      const int64_t x1 = std::min(x0 + 1, s.width - 1);
      const float dx = fx - static_cast<float>(x0);
      for (int64_t c = 0; c < s.channels; ++c) {
        const float top = at(y0, x0, c) + (at(y0, x1, c) - at(y0, x0, c)) * dx;
        const float bottom = at(y1, x0, c) + (at(y1, x1, c) - at(y1, x0, c)) * dx;
        out[static_cast<std::size_t>((y * ow + x) * s.channels + c)] = top + (bottom - top) * dy;
      }
    }
  }
  set_float_image(image, out, {oh, ow, s.channels});
  set_true_image_shape(names_, record, image);
}

// ---- The builder ----

namespace {

[[noreturn]] void unsupported(const std::string& step, const std::string& why) {
  throw ConfigError("data_augmentation_options: " + step + " " + why);
}

RandomCropImage::Options crop_options(float min_object_covered, float min_aspect_ratio,
                                      float max_aspect_ratio, float min_area, float max_area,
                                      float overlap_thresh, bool clip_boxes, float random_coef) {
  return {min_object_covered, min_aspect_ratio, max_aspect_ratio, min_area,
          max_area,           overlap_thresh,   clip_boxes,       random_coef};
}

}  // namespace

std::unique_ptr<ExampleTransform> build_od_preprocessing_step(const od::PreprocessingStep& step,
                                                              const DetectionFeatureNames& names) {
  using Step = od::PreprocessingStep;
  switch (step.preprocessing_step_case()) {
    case Step::kRandomHorizontalFlip: {
      const od::RandomHorizontalFlip& c = step.random_horizontal_flip();
      if (c.keypoint_flip_permutation_size() > 0) {
        unsupported("random_horizontal_flip",
                    "sets keypoint_flip_permutation; keypoints are not "
                    "supported");
      }
      return std::make_unique<RandomHorizontalFlip>(
          RandomHorizontalFlip::Options{names.image, names.boxes, c.probability()});
    }
    case Step::kRandomVerticalFlip: {
      const od::RandomVerticalFlip& c = step.random_vertical_flip();
      if (c.keypoint_flip_permutation_size() > 0) {
        unsupported("random_vertical_flip",
                    "sets keypoint_flip_permutation; keypoints are not "
                    "supported");
      }
      return std::make_unique<RandomVerticalFlip>(RandomVerticalFlip::Options{c.probability()},
                                                  names);
    }
    case Step::kRandomRotation90: {
      const od::RandomRotation90& c = step.random_rotation90();
      if (c.keypoint_rot_permutation_size() > 0) {
        unsupported("random_rotation90",
                    "sets keypoint_rot_permutation; keypoints are not "
                    "supported");
      }
      return std::make_unique<RandomRotation90>(RandomRotation90::Options{c.probability()}, names);
    }
    case Step::kRandomCropImage: {
      const od::RandomCropImage& c = step.random_crop_image();
      return std::make_unique<RandomCropImage>(
          crop_options(c.min_object_covered(), c.min_aspect_ratio(), c.max_aspect_ratio(),
                       c.min_area(), c.max_area(), c.overlap_thresh(), c.clip_boxes(),
                       c.random_coef()),
          names);
    }
    case Step::kSsdRandomCrop: {
      SsdRandomCrop::Options o;
      if (step.ssd_random_crop().operations_size() > 0) {
        o.operations.clear();
        for (const od::SSDRandomCropOperation& c : step.ssd_random_crop().operations()) {
          o.operations.push_back(crop_options(c.min_object_covered(), c.min_aspect_ratio(),
                                              c.max_aspect_ratio(), c.min_area(), c.max_area(),
                                              c.overlap_thresh(), c.clip_boxes(), c.random_coef()));
        }
      }
      return std::make_unique<SsdRandomCrop>(std::move(o), names);
    }
    case Step::kResizeImage: {
      const od::ResizeImage& c = step.resize_image();
      ResizeImage::Method method = ResizeImage::Method::kBilinear;
      if (c.method() == od::ResizeImage::NEAREST_NEIGHBOR) {
        method = ResizeImage::Method::kNearestNeighbor;
      } else if (c.method() != od::ResizeImage::BILINEAR) {
        unsupported("resize_image", "method " + od::ResizeImage::Method_Name(c.method()) +
                                        " is not implemented; use BILINEAR or NEAREST_NEIGHBOR");
      }
      return std::make_unique<ResizeImage>(
          ResizeImage::Options{c.new_height(), c.new_width(), method}, names);
    }
    case Step::kNormalizeImage: {
      const od::NormalizeImage& c = step.normalize_image();
      if (!c.has_original_minval() || !c.has_original_maxval()) {
        unsupported("normalize_image", "needs original_minval and original_maxval");
      }
      return std::make_unique<NormalizeImage>(
          NormalizeImage::Options{c.original_minval(), c.original_maxval(), c.target_minval(),
                                  c.target_maxval()},
          names);
    }
    case Step::kRandomPixelValueScale: {
      const od::RandomPixelValueScale& c = step.random_pixel_value_scale();
      return std::make_unique<RandomPixelValueScale>(
          RandomPixelValueScale::Options{c.minval(), c.maxval()}, names);
    }
    case Step::kRandomAdjustBrightness:
      return std::make_unique<RandomAdjustBrightness>(
          RandomAdjustBrightness::Options{step.random_adjust_brightness().max_delta()}, names);
    case Step::kRandomAdjustContrast: {
      const od::RandomAdjustContrast& c = step.random_adjust_contrast();
      return std::make_unique<RandomAdjustContrast>(
          RandomAdjustContrast::Options{c.min_delta(), c.max_delta()}, names);
    }
    case Step::kRandomJitterBoxes: {
      const od::RandomJitterBoxes& c = step.random_jitter_boxes();
      if (c.jitter_mode() != od::RandomJitterBoxes::DEFAULT) {
        unsupported("random_jitter_boxes",
                    "jitter_mode " + od::RandomJitterBoxes::JitterMode_Name(c.jitter_mode()) +
                        " is not implemented; only DEFAULT is");
      }
      return std::make_unique<RandomJitterBoxes>(RandomJitterBoxes::Options{c.ratio()}, names);
    }
    case Step::kRandomAdjustHue:
      return std::make_unique<RandomAdjustHue>(
          RandomAdjustHue::Options{step.random_adjust_hue().max_delta()}, names);
    case Step::kRandomAdjustSaturation: {
      const od::RandomAdjustSaturation& c = step.random_adjust_saturation();
      return std::make_unique<RandomAdjustSaturation>(
          RandomAdjustSaturation::Options{c.min_delta(), c.max_delta()}, names);
    }
    case Step::kRandomDistortColor:
      return std::make_unique<RandomDistortColor>(
          RandomDistortColor::Options{step.random_distort_color().color_ordering()}, names);
    case Step::kRandomPadImage: {
      const od::RandomPadImage& c = step.random_pad_image();
      RandomPadImage::Options o;
      // As preprocessor_builder: a minimum or maximum size counts only when both sides are set.
      if (c.has_min_image_height() && c.has_min_image_width()) {
        o.min_image_height = c.min_image_height();
        o.min_image_width = c.min_image_width();
      }
      if (c.has_max_image_height() && c.has_max_image_width()) {
        o.max_image_height = c.max_image_height();
        o.max_image_width = c.max_image_width();
      }
      o.pad_color.assign(c.pad_color().begin(), c.pad_color().end());
      return std::make_unique<RandomPadImage>(std::move(o), names);
    }
    case Step::kRandomBlackPatches: {
      const od::RandomBlackPatches& c = step.random_black_patches();
      return std::make_unique<RandomBlackPatches>(
          RandomBlackPatches::Options{c.max_black_patches(), c.probability(),
                                      c.size_to_image_ratio()},
          names);
    }
    case Step::kRandomImageScale: {
      const od::RandomImageScale& c = step.random_image_scale();
      return std::make_unique<RandomImageScale>(
          RandomImageScale::Options{c.min_scale_ratio(), c.max_scale_ratio()}, names);
    }
    case Step::kRandomCropPadImage: {
      const od::RandomCropPadImage& c = step.random_crop_pad_image();
      CropPadOperation op;
      op.crop = crop_options(c.min_object_covered(), c.min_aspect_ratio(), c.max_aspect_ratio(),
                             c.min_area(), c.max_area(), c.overlap_thresh(), c.clip_boxes(),
                             c.random_coef());
      // As preprocessor_builder: the ratios count when both are given.
      if (c.min_padded_size_ratio_size() == 2) {
        op.min_padded_size_ratio[0] = c.min_padded_size_ratio(0);
        op.min_padded_size_ratio[1] = c.min_padded_size_ratio(1);
      }
      if (c.max_padded_size_ratio_size() == 2) {
        op.max_padded_size_ratio[0] = c.max_padded_size_ratio(0);
        op.max_padded_size_ratio[1] = c.max_padded_size_ratio(1);
      }
      op.pad_color.assign(c.pad_color().begin(), c.pad_color().end());
      return std::make_unique<RandomCropPadImage>(std::move(op), names);
    }
    case Step::kSsdRandomCropPad: {
      SsdRandomCropPad::Options o;
      if (step.ssd_random_crop_pad().operations_size() > 0) {
        o.operations.clear();
        for (const od::SSDRandomCropPadOperation& c : step.ssd_random_crop_pad().operations()) {
          CropPadOperation op;
          op.crop = crop_options(c.min_object_covered(), c.min_aspect_ratio(), c.max_aspect_ratio(),
                                 c.min_area(), c.max_area(), c.overlap_thresh(), c.clip_boxes(),
                                 c.random_coef());
          if (c.min_padded_size_ratio_size() != 2 || c.max_padded_size_ratio_size() != 2) {
            unsupported("ssd_random_crop_pad",
                        "operation needs two min_padded_size_ratio and two "
                        "max_padded_size_ratio values (height, width)");
          }
          for (int d = 0; d < 2; ++d) {
            op.min_padded_size_ratio[d] = c.min_padded_size_ratio(d);
            op.max_padded_size_ratio[d] = c.max_padded_size_ratio(d);
          }
          // The API's builder always passes the operation's colour (default black).
          op.pad_color = {c.pad_color_r(), c.pad_color_g(), c.pad_color_b()};
          o.operations.push_back(std::move(op));
        }
      }
      return std::make_unique<SsdRandomCropPad>(std::move(o), names);
    }
    case Step::PREPROCESSING_STEP_NOT_SET:
      throw ConfigError("data_augmentation_options: an empty step (no preprocessing step set)");
    default:
      break;
  }
  const google::protobuf::FieldDescriptor* field =
      Step::descriptor()->FindFieldByNumber(static_cast<int>(step.preprocessing_step_case()));
  unsupported(field != nullptr ? field->name() : std::string("step"),
              "is not implemented by Trainyard (implemented: random_horizontal_flip, "
              "random_vertical_flip, random_rotation90, random_crop_image, ssd_random_crop, "
              "resize_image, normalize_image, random_pixel_value_scale, "
              "random_adjust_brightness, random_adjust_contrast, random_adjust_hue, "
              "random_adjust_saturation, random_distort_color, random_jitter_boxes, "
              "random_pad_image, random_black_patches, random_image_scale, random_crop_pad_image, "
              "ssd_random_crop_pad)");
}

}  // namespace trainyard
