// Helpers shared by the detection transforms' sources (transforms.cc, photometric_transforms.cc);
// internal to pkg/detection.
#ifndef TRAINYARD_PKG_DETECTION_SRC_TRANSFORM_HELPERS_H_
#define TRAINYARD_PKG_DETECTION_SRC_TRANSFORM_HELPERS_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/image_ops.h"
#include "trainyard/pkg/detection/transforms.h"

namespace trainyard::detection::transforms_internal {

[[noreturn]] inline void bad_option(const std::string& step, const std::string& message) {
  throw InvalidArgument(step + ": " + message);
}

inline void check_probability(const std::string& step, const char* name, float p) {
  if (!(p >= 0.0f && p <= 1.0f)) {
    bad_option(step, std::string(name) + " is " + std::to_string(p) + "; it must be in [0, 1]");
  }
}

inline void check_range(const std::string& step, const char* lo_name, float lo, const char* hi_name,
                        float hi) {
  if (!(lo <= hi)) {
    bad_option(step, std::string(lo_name) + " " + std::to_string(lo) + " is above " + hi_name +
                         " " + std::to_string(hi));
  }
}

inline image::ImageShape shape_of(const ParsedFeature& image) {
  return {image.shape[0], image.shape[1], image.shape[2]};
}

inline std::vector<float> read_floats(const ParsedFeature& f) {
  std::vector<float> v(f.bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), f.bytes.data(), v.size() * sizeof(float));
  return v;
}

inline void write_floats(ParsedFeature& f, const std::vector<float>& v) {
  f.bytes.resize(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(f.bytes.data(), v.data(), f.bytes.size());
}

// The image's values as floats (u8 or f32).
inline std::vector<float> image_values(const ParsedFeature& image) {
  if (image.dtype == DType::kF32) return read_floats(image);
  std::vector<float> v(image.bytes.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(std::to_integer<uint8_t>(image.bytes[i]));
  }
  return v;
}

inline void set_float_image(ParsedFeature& image, const std::vector<float>& values,
                            std::vector<int64_t> shape) {
  image.dtype = DType::kF32;
  image.shape = std::move(shape);
  write_floats(image, values);
}

inline void set_true_image_shape(const DetectionFeatureNames& names, ParsedRecord& record,
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

// Keeps rows `keep` (ascending indices) of the boxes, of the per-box features and of the masks
// the record has.
inline void keep_boxes(const DetectionFeatureNames& names, ParsedRecord& record,
                       const std::vector<std::size_t>& keep, std::size_t count) {
  std::vector<std::string> all = names.per_box;
  all.push_back(names.boxes);
  if (!names.masks.empty()) all.push_back(names.masks);
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

// ---- Instance masks: [N, height, width] of any dtype, one plane per box ----

// The record's masks, or nullptr when it has none (or names.masks is empty). Throws
// InvalidArgument naming `step` when they are not [N, height, width] with N the boxes' count and
// height x width the image's: a step must never move the image without them.
inline ParsedFeature* masks_of(const std::string& step, const DetectionFeatureNames& names,
                               ParsedRecord& record) {
  if (names.masks.empty()) return nullptr;
  auto it = record.features.find(names.masks);
  if (it == record.features.end()) return nullptr;
  ParsedFeature& masks = it->second;
  const ParsedFeature& image = record.features.at(names.image);
  int64_t boxes = -1;
  if (!names.boxes.empty()) {
    auto b = record.features.find(names.boxes);
    if (b != record.features.end() && !b->second.shape.empty()) boxes = b->second.shape[0];
  }
  if (masks.shape.size() != 3 || masks.shape[1] != image.shape[0] ||
      masks.shape[2] != image.shape[1] || (boxes >= 0 && masks.shape[0] != boxes)) {
    std::string shape;
    for (int64_t d : masks.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw InvalidArgument(step + ": instance masks '" + names.masks + "' are [" + shape +
                          "]; they must be [num_boxes (" + std::to_string(boxes) +
                          "), height, width] of the image (" + std::to_string(image.shape[0]) +
                          " x " + std::to_string(image.shape[1]) + ")");
  }
  return &masks;
}

// Replaces every mask plane by `plane(src, dst)` of the new size out_height x out_width;
// `src` and `dst` address one plane, `element` bytes a value.
template <typename Plane>
void map_mask_planes(ParsedFeature& masks, int64_t out_height, int64_t out_width, Plane plane) {
  const std::size_t element = dtype_size(masks.dtype);
  const auto n = static_cast<std::size_t>(masks.shape[0]);
  const std::size_t in_plane = static_cast<std::size_t>(masks.shape[1] * masks.shape[2]) * element;
  const std::size_t out_plane = static_cast<std::size_t>(out_height * out_width) * element;
  std::vector<std::byte> out(n * out_plane, std::byte{0});
  for (std::size_t k = 0; k < n; ++k) {
    plane(masks.bytes.data() + k * in_plane, out.data() + k * out_plane, element);
  }
  masks.bytes = std::move(out);
  masks.shape = {masks.shape[0], out_height, out_width};
}

// masks[:, top:top + height, left:left + width] (the window lies inside the masks).
inline void crop_masks(ParsedFeature& masks, int64_t top, int64_t left, int64_t height,
                       int64_t width) {
  const int64_t in_width = masks.shape[2];
  map_mask_planes(masks, height, width, [&](const std::byte* src, std::byte* dst, std::size_t e) {
    for (int64_t y = 0; y < height; ++y) {
      std::memcpy(dst + static_cast<std::size_t>(y * width) * e,
                  src + static_cast<std::size_t>((y + top) * in_width + left) * e,
                  static_cast<std::size_t>(width) * e);
    }
  });
}

// tf.image.pad_to_bounding_box on masks[..., None]: each plane at (top, left) of a zero canvas of
// height x width.
inline void pad_masks(ParsedFeature& masks, int64_t top, int64_t left, int64_t height,
                      int64_t width) {
  const int64_t in_height = masks.shape[1], in_width = masks.shape[2];
  map_mask_planes(masks, height, width, [&](const std::byte* src, std::byte* dst, std::size_t e) {
    for (int64_t y = 0; y < in_height; ++y) {
      std::memcpy(dst + static_cast<std::size_t>((y + top) * width + left) * e,
                  src + static_cast<std::size_t>(y * in_width) * e,
                  static_cast<std::size_t>(in_width) * e);
    }
  });
}

// tf.image.resize_nearest_neighbor (half_pixel_centers=False) of each plane: output row y takes
// input row min(floor(y x scale), in - 1), scale = in / out; with align_corners, min(round(y x
// scale), in - 1), scale = (in - 1) / (out - 1). Values are copied, so 0/1 masks stay 0/1.
inline void resize_masks_nearest(ParsedFeature& masks, int64_t height, int64_t width,
                                 bool align_corners) {
  const int64_t in_height = masks.shape[1], in_width = masks.shape[2];
  auto scale = [&](int64_t in, int64_t out) {
    return align_corners && out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
                                    : static_cast<float>(in) / static_cast<float>(out);
  };
  auto source = [&](int64_t i, float s, int64_t in) {
    const float v = static_cast<float>(i) * s;
    const auto at = static_cast<int64_t>(align_corners ? std::round(v) : std::floor(v));
    return std::min(at, in - 1);
  };
  const float sy = scale(in_height, height), sx = scale(in_width, width);
  std::vector<int64_t> columns(static_cast<std::size_t>(width));
  for (int64_t x = 0; x < width; ++x)
    columns[static_cast<std::size_t>(x)] = source(x, sx, in_width);
  map_mask_planes(masks, height, width, [&](const std::byte* src, std::byte* dst, std::size_t e) {
    for (int64_t y = 0; y < height; ++y) {
      const int64_t iy = source(y, sy, in_height);
      for (int64_t x = 0; x < width; ++x) {
        std::memcpy(
            dst + static_cast<std::size_t>(y * width + x) * e,
            src +
                static_cast<std::size_t>(iy * in_width + columns[static_cast<std::size_t>(x)]) * e,
            e);
      }
    }
  });
}

inline int64_t round_half_even(float v) { return static_cast<int64_t>(std::lrintf(v)); }

// Uniform integer in [0, n) from the record's stream (n >= 1).
inline int64_t uniform_int(ExampleRandom& random, int64_t n) {
  return std::min<int64_t>(n - 1, static_cast<int64_t>(random.uniform() * static_cast<float>(n)));
}

}  // namespace trainyard::detection::transforms_internal

#endif  // TRAINYARD_PKG_DETECTION_SRC_TRANSFORM_HELPERS_H_
