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

// Keeps rows `keep` (ascending indices) of the boxes and of the per-box features the record has.
inline void keep_boxes(const DetectionFeatureNames& names, ParsedRecord& record,
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

inline int64_t round_half_even(float v) { return static_cast<int64_t>(std::lrintf(v)); }

// Uniform integer in [0, n) from the record's stream (n >= 1).
inline int64_t uniform_int(ExampleRandom& random, int64_t n) {
  return std::min<int64_t>(n - 1, static_cast<int64_t>(random.uniform() * static_cast<float>(n)));
}

}  // namespace trainyard::detection::transforms_internal

#endif  // TRAINYARD_PKG_DETECTION_SRC_TRANSFORM_HELPERS_H_
