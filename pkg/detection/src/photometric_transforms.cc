// The detection transforms that change pixel values only (transforms.h):
// normalization, brightness, contrast, hue, saturation, colour distortion, black patches.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "trainyard/error.h"
#include "trainyard/pkg/detection/transforms.h"
#include "transform_helpers.h"

namespace trainyard::detection {

using transforms_internal::bad_option;
using transforms_internal::check_probability;
using transforms_internal::check_range;
using transforms_internal::image_values;
using transforms_internal::keep_boxes;
using transforms_internal::read_floats;
using transforms_internal::round_half_even;
using transforms_internal::set_float_image;
using transforms_internal::set_true_image_shape;
using transforms_internal::shape_of;
using transforms_internal::uniform_int;
using transforms_internal::write_floats;

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

// ---- RandomRgbToGray, SubtractChannelMean ----

RandomRgbToGray::RandomRgbToGray(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(options) {
  check_probability(name(), "probability", options_.probability);
}

void RandomRgbToGray::apply(ParsedRecord& record, ExampleRandom& random,
                            const RecordLocation&) const {
  if (!random.bernoulli(options_.probability)) return;
  ParsedFeature& image = record.features.at(names_.image);
  check_rgb(name(), image);
  std::vector<float> v = image_values(image);
  for (std::size_t i = 0; i + 2 < v.size(); i += 3) {
    const float gray = 0.2989f * v[i] + 0.5870f * v[i + 1] + 0.1140f * v[i + 2];
    v[i] = v[i + 1] = v[i + 2] = gray;
  }
  set_float_image(image, v, image.shape);
}

SubtractChannelMean::SubtractChannelMean(Options options, DetectionFeatureNames names)
    : DetectionTransform(std::move(names)), options_(std::move(options)) {
  if (options_.means.empty()) bad_option(name(), "means is empty");
}

void SubtractChannelMean::apply(ParsedRecord& record, ExampleRandom&,
                                const RecordLocation& where) const {
  ParsedFeature& image = record.features.at(names_.image);
  const auto channels = static_cast<std::size_t>(image.shape[2]);
  if (channels != options_.means.size()) {
    throw InvalidArgument(where.file + ", record " + std::to_string(where.record_index) + ": " +
                          name() + ": the image has " + std::to_string(channels) +
                          " channels but means has " + std::to_string(options_.means.size()));
  }
  std::vector<float> v = image_values(image);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] -= options_.means[i % channels];
  set_float_image(image, v, image.shape);
}

}  // namespace trainyard::detection
