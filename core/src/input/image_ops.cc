#include "trainyard/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "trainyard/error.h"

namespace trainyard::image {
namespace {

std::string shape_text(const ImageShape& s) {
  return std::to_string(s.height) + " x " + std::to_string(s.width) + " x " +
         std::to_string(s.channels);
}

void check_shape(const char* op, const ImageShape& s, std::size_t values) {
  if (s.height < 1 || s.width < 1 || s.channels < 1) {
    throw InvalidArgument(std::string(op) + ": the image is " + shape_text(s) +
                          "; every dimension must be positive");
  }
  if (values != s.elements()) {
    throw InvalidArgument(std::string(op) + ": " + std::to_string(values) + " values for a " +
                          shape_text(s) + " image (expected " + std::to_string(s.elements()) + ")");
  }
}

// Where output column (or row) i samples the input, as TensorFlow's legacy scaler computes it.
struct Sample {
  std::size_t lower = 0;
  std::size_t upper = 0;
  float lerp = 0;
};

std::vector<Sample> samples(int64_t in_size, int64_t out_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  std::vector<Sample> out(static_cast<std::size_t>(out_size));
  for (int64_t i = 0; i < out_size; ++i) {
    const float at = static_cast<float>(i) * scale;
    const float below = std::floor(at);
    Sample& s = out[static_cast<std::size_t>(i)];
    s.lower = static_cast<std::size_t>(std::max<int64_t>(static_cast<int64_t>(below), 0));
    s.upper = static_cast<std::size_t>(
        std::min<int64_t>(static_cast<int64_t>(std::ceil(at)), in_size - 1));
    s.lerp = at - below;
  }
  return out;
}

template <typename T>
void resize(std::span<const T> in, const ImageShape& in_shape, std::span<float> out,
            int64_t out_height, int64_t out_width) {
  check_shape("resize_bilinear", in_shape, in.size());
  if (out_height < 1 || out_width < 1) {
    throw InvalidArgument("resize_bilinear: output size " + std::to_string(out_height) + " x " +
                          std::to_string(out_width) + "; both must be positive");
  }
  const ImageShape out_shape{out_height, out_width, in_shape.channels};
  if (out.size() != out_shape.elements()) {
    throw InvalidArgument("resize_bilinear: the output has " + std::to_string(out.size()) +
                          " values for a " + shape_text(out_shape) + " image");
  }
  const std::vector<Sample> ys = samples(in_shape.height, out_height);
  const std::vector<Sample> xs = samples(in_shape.width, out_width);
  const auto channels = static_cast<std::size_t>(in_shape.channels);
  const std::size_t in_row = static_cast<std::size_t>(in_shape.width) * channels;
  float* o = out.data();
  for (const Sample& y : ys) {
    const T* top = in.data() + y.lower * in_row;
    const T* bottom = in.data() + y.upper * in_row;
    for (const Sample& x : xs) {
      const std::size_t left = x.lower * channels;
      const std::size_t right = x.upper * channels;
      for (std::size_t c = 0; c < channels; ++c) {
        const auto top_left = static_cast<float>(top[left + c]);
        const auto top_right = static_cast<float>(top[right + c]);
        const auto bottom_left = static_cast<float>(bottom[left + c]);
        const auto bottom_right = static_cast<float>(bottom[right + c]);
        const float upper = top_left + (top_right - top_left) * x.lerp;
        const float lower = bottom_left + (bottom_right - bottom_left) * x.lerp;
        *o++ = upper + (lower - upper) * y.lerp;
      }
    }
  }
}

}  // namespace

void resize_bilinear(std::span<const float> in, const ImageShape& in_shape, std::span<float> out,
                     int64_t out_height, int64_t out_width) {
  resize(in, in_shape, out, out_height, out_width);
}

void resize_bilinear(std::span<const uint8_t> in, const ImageShape& in_shape, std::span<float> out,
                     int64_t out_height, int64_t out_width) {
  resize(in, in_shape, out, out_height, out_width);
}

ResizeSize smallest_side_size(int64_t height, int64_t width, int64_t smallest_side) {
  if (height < 1 || width < 1 || smallest_side < 1) {
    throw InvalidArgument("smallest_side_size: image " + std::to_string(height) + " x " +
                          std::to_string(width) + ", smallest side " +
                          std::to_string(smallest_side) + "; all must be positive");
  }
  const auto h = static_cast<float>(height);
  const auto w = static_cast<float>(width);
  const auto side = static_cast<float>(smallest_side);
  const float scale = height > width ? side / w : side / h;
  return {static_cast<int64_t>(h * scale), static_cast<int64_t>(w * scale)};
}

void crop(std::span<const std::byte> in, const ImageShape& in_shape, std::size_t element_size,
          int64_t top, int64_t left, int64_t crop_height, int64_t crop_width,
          std::span<std::byte> out) {
  if (element_size == 0 || in.size() % element_size != 0) {
    throw InvalidArgument("crop: " + std::to_string(in.size()) +
                          " bytes are not a whole number of " + std::to_string(element_size) +
                          "-byte elements");
  }
  check_shape("crop", in_shape, in.size() / element_size);
  if (crop_height < 1 || crop_width < 1 || top < 0 || left < 0 ||
      top + crop_height > in_shape.height || left + crop_width > in_shape.width) {
    throw InvalidArgument("crop: window " + std::to_string(crop_height) + " x " +
                          std::to_string(crop_width) + " at (" + std::to_string(top) + ", " +
                          std::to_string(left) + ") is not inside the " + shape_text(in_shape) +
                          " image");
  }
  const std::size_t pixel = static_cast<std::size_t>(in_shape.channels) * element_size;
  const std::size_t in_row = static_cast<std::size_t>(in_shape.width) * pixel;
  const std::size_t out_row = static_cast<std::size_t>(crop_width) * pixel;
  if (out.size() != out_row * static_cast<std::size_t>(crop_height)) {
    throw InvalidArgument("crop: the output has " + std::to_string(out.size()) +
                          " bytes, expected " +
                          std::to_string(out_row * static_cast<std::size_t>(crop_height)));
  }
  for (int64_t y = 0; y < crop_height; ++y) {
    std::memcpy(out.data() + static_cast<std::size_t>(y) * out_row,
                in.data() + static_cast<std::size_t>(top + y) * in_row +
                    static_cast<std::size_t>(left) * pixel,
                out_row);
  }
}

void flip_left_right(std::span<std::byte> data, const ImageShape& shape, std::size_t element_size) {
  if (element_size == 0 || data.size() % element_size != 0) {
    throw InvalidArgument("flip_left_right: " + std::to_string(data.size()) +
                          " bytes are not a whole number of " + std::to_string(element_size) +
                          "-byte elements");
  }
  check_shape("flip_left_right", shape, data.size() / element_size);
  const std::size_t pixel = static_cast<std::size_t>(shape.channels) * element_size;
  const auto width = static_cast<std::size_t>(shape.width);
  std::vector<std::byte> tmp(pixel);
  for (int64_t y = 0; y < shape.height; ++y) {
    std::byte* row = data.data() + static_cast<std::size_t>(y) * width * pixel;
    for (std::size_t x = 0; x < width / 2; ++x) {
      std::byte* a = row + x * pixel;
      std::byte* b = row + (width - 1 - x) * pixel;
      std::memcpy(tmp.data(), a, pixel);
      std::memcpy(a, b, pixel);
      std::memcpy(b, tmp.data(), pixel);
    }
  }
}

}  // namespace trainyard::image
