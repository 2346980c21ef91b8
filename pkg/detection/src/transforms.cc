// The geometric detection transforms (transforms.h): flips, rotation, crops, pads,
// resizes and box jitter.
#include "trainyard/pkg/detection/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "trainyard/error.h"
#include "trainyard/image_ops.h"
#include "transform_helpers.h"

namespace trainyard::detection {

using transforms_internal::bad_option;
using transforms_internal::check_probability;
using transforms_internal::check_range;
using transforms_internal::crop_masks;
using transforms_internal::image_values;
using transforms_internal::keep_boxes;
using transforms_internal::map_mask_planes;
using transforms_internal::masks_of;
using transforms_internal::pad_masks;
using transforms_internal::read_floats;
using transforms_internal::resize_masks_nearest;
using transforms_internal::round_half_even;
using transforms_internal::set_float_image;
using transforms_internal::set_true_image_shape;
using transforms_internal::shape_of;
using transforms_internal::uniform_int;
using transforms_internal::write_floats;

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
  if (!names_.masks.empty()) {
    auto masks = find(names_.masks);
    if (masks != input.end() && masks->shape.size() != 3) {
      throw InvalidArgument(name() + ": instance masks feature '" + names_.masks + "' has rank " +
                            std::to_string(masks->shape.size()) +
                            "; it must be [num_boxes, height, width]");
    }
  }
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
  if (ParsedFeature* masks = masks_of(name(), names_, record)) {
    // masks[:, ::-1, :]
    const int64_t height = masks->shape[1], width = masks->shape[2];
    map_mask_planes(*masks, height, width,
                    [&](const std::byte* src, std::byte* dst, std::size_t e) {
                      const std::size_t row = static_cast<std::size_t>(width) * e;
                      for (int64_t y = 0; y < height; ++y) {
                        std::memcpy(dst + static_cast<std::size_t>(y) * row,
                                    src + static_cast<std::size_t>(height - 1 - y) * row, row);
                      }
                    });
  }
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
  if (ParsedFeature* masks = masks_of(name(), names_, record)) {
    // tf.transpose(masks, [0, 2, 1])[:, ::-1, :]: as the image, one value a pixel.
    const int64_t height = masks->shape[1], width = masks->shape[2];
    map_mask_planes(
        *masks, width, height, [&](const std::byte* src, std::byte* dst, std::size_t e) {
          for (int64_t i = 0; i < width; ++i) {
            for (int64_t j = 0; j < height; ++j) {
              std::memcpy(dst + static_cast<std::size_t>(i * height + j) * e,
                          src + static_cast<std::size_t>(j * width + width - 1 - i) * e, e);
            }
          }
        });
  }
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
  // The API's tf.slice(masks, [0, top, left], [-1, height, width]); rows follow the boxes below.
  if (ParsedFeature* masks = masks_of("RandomCropImage", names, record)) {
    crop_masks(*masks, w.top, w.left, w.height, w.width);
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

// ---- RandomCropToAspectRatio ----

RandomCropToAspectRatio::RandomCropToAspectRatio(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  if (!(options_.aspect_ratio > 0.0f)) {
    bad_option(name(), "aspect_ratio is " + std::to_string(options_.aspect_ratio) +
                           "; it must be positive");
  }
  check_probability(name(), "overlap_thresh", options_.overlap_thresh);
}

RandomCropImage::Window RandomCropToAspectRatio::window_size(int64_t height, int64_t width,
                                                             float aspect_ratio) {
  const float original = static_cast<float>(width) / static_cast<float>(height);
  RandomCropImage::Window w{0, 0, height, width};
  if (original < aspect_ratio) {
    w.height = round_half_even(static_cast<float>(width) / aspect_ratio);
  }
  if (original > aspect_ratio) {
    w.width = round_half_even(static_cast<float>(height) * aspect_ratio);
  }
  // round() may give 0 for a sliver of an image; the API's crop would then fail.
  w.height = std::clamp<int64_t>(w.height, 1, height);
  w.width = std::clamp<int64_t>(w.width, 1, width);
  return w;
}

void RandomCropToAspectRatio::apply(ParsedRecord& record, ExampleRandom& random,
                                    const RecordLocation&) const {
  const ParsedFeature& image = record.features.at(names_.image);
  const int64_t height = image.shape[0];
  const int64_t width = image.shape[1];
  RandomCropImage::Window w = window_size(height, width, options_.aspect_ratio);
  w.top = uniform_int(random, height - w.height + 1);
  w.left = uniform_int(random, width - w.width + 1);
  RandomCropImage::Options boxes;
  boxes.overlap_thresh = options_.overlap_thresh;
  boxes.clip_boxes = options_.clip_boxes;
  RandomCropImage::apply_window(boxes, names_, record, w);
}

// ---- SsdRandomCropFixedAspectRatio ----

namespace {

SsdRandomCrop::Options with_aspect_ratio(std::vector<RandomCropImage::Options> operations,
                                         float aspect_ratio) {
  for (RandomCropImage::Options& op : operations) {
    op.min_aspect_ratio = aspect_ratio;
    op.max_aspect_ratio = aspect_ratio;
  }
  return SsdRandomCrop::Options{std::move(operations)};
}

}  // namespace

SsdRandomCropFixedAspectRatio::SsdRandomCropFixedAspectRatio(Options options,
                                                             DetectionFeatureNames names)
    : DetectionTransform(names),
      crop_(with_aspect_ratio(std::move(options.operations), options.aspect_ratio), names),
      to_aspect_ratio_({options.aspect_ratio, 0.3f, true}, names) {}

void SsdRandomCropFixedAspectRatio::apply(ParsedRecord& record, ExampleRandom& random,
                                          const RecordLocation& where) const {
  crop_.apply(record, random, where);
  to_aspect_ratio_.apply(record, random, where);
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
    if (f.name == names_.masks) f.shape = {f.shape[0], options_.new_height, options_.new_width};
  }
  return input;
}

void ResizeImage::apply(ParsedRecord& record, ExampleRandom&, const RecordLocation&) const {
  const int64_t oh = options_.new_height, ow = options_.new_width;
  // Whatever the image's method, the API resizes masks by nearest neighbour (align_corners off).
  if (ParsedFeature* masks = masks_of(name(), names_, record)) {
    resize_masks_nearest(*masks, oh, ow, false);
  }
  ParsedFeature& image = record.features.at(names_.image);
  const image::ImageShape s = shape_of(image);
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
  // The API's tf.image.pad_to_bounding_box(masks[..., None], top, left, ...): zeros around.
  if (ParsedFeature* masks = masks_of("RandomPadImage", names, record)) {
    pad_masks(*masks, top, left, target_height, target_width);
  }
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
  // The API: tf.image.resize_images(masks, ..., NEAREST_NEIGHBOR, align_corners=True).
  if (ParsedFeature* masks = masks_of(name(), names_, record)) {
    resize_masks_nearest(*masks, oh, ow, true);
  }
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

}  // namespace trainyard::detection
