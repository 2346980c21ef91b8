// Operations on one image in host memory, as the input threads hold it after decoding:
// height x width x channels values, row-major (HWC), u8 or f32. For readers and per-example
// transforms (transform.h); the core's ImageClassificationPreprocessing is built from them.
//
// Each function checks its sizes and throws InvalidArgument naming what is wrong; buffers are
// the caller's, `out` never overlaps `in`.
#ifndef TRAINYARD_IMAGE_OPS_H_
#define TRAINYARD_IMAGE_OPS_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "trainyard/export.h"

namespace trainyard::image {

struct ImageShape {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;

  std::size_t elements() const {
    return static_cast<std::size_t>(height) * static_cast<std::size_t>(width) *
           static_cast<std::size_t>(channels);
  }
};

// TensorFlow 1's tf.image.resize_bilinear with align_corners=False and half_pixel_centers=False
// (tf.compat.v1.image.resize_bilinear, as TF-Slim calls it): output pixel (y, x) samples the
// input at (y * in_height / out_height, x * in_width / out_width), computed in float, between
// the pixels at floor and ceil of that coordinate (clamped to the last row and column), top
// and bottom rows blended first across x, then across y. The output is f32 whatever the input
// (as TensorFlow's). `out` holds out_height x out_width x in.channels values.
TRAINYARD_API void resize_bilinear(std::span<const float> in, const ImageShape& in_shape,
                                   std::span<float> out, int64_t out_height, int64_t out_width);
TRAINYARD_API void resize_bilinear(std::span<const uint8_t> in, const ImageShape& in_shape,
                                   std::span<float> out, int64_t out_height, int64_t out_width);

struct ResizeSize {
  int64_t height = 0;
  int64_t width = 0;
};

// TF-Slim's vgg_preprocessing._smallest_size_at_least: the size whose shorter side is
// `smallest_side`, keeping the aspect ratio; the scale (smallest_side over the shorter side,
// the height when both are equal) and the products are float, truncated to integers.
TRAINYARD_API ResizeSize smallest_side_size(int64_t height, int64_t width, int64_t smallest_side);

// Copies the crop_height x crop_width window at (top, left) of an image whose elements are
// `element_size` bytes each (tf.slice / tf.image.crop_to_bounding_box). The window must lie
// inside the image.
TRAINYARD_API void crop(std::span<const std::byte> in, const ImageShape& in_shape,
                        std::size_t element_size, int64_t top, int64_t left, int64_t crop_height,
                        int64_t crop_width, std::span<std::byte> out);

// Mirrors the image left to right in place (tf.image.flip_left_right).
TRAINYARD_API void flip_left_right(std::span<std::byte> data, const ImageShape& shape,
                                   std::size_t element_size);

}  // namespace trainyard::image

#endif  // TRAINYARD_IMAGE_OPS_H_
