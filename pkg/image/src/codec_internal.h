// What the JPEG and PNG halves of image_codec.cc share. Not installed.
#ifndef TRAINYARD_PKG_IMAGE_SRC_CODEC_INTERNAL_H_
#define TRAINYARD_PKG_IMAGE_SRC_CODEC_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "trainyard/pkg/image/image_codec.h"

namespace trainyard::image::internal {

// Both throw DataLoss "<where>: <what>"; `channels` and `max_pixels` are already checked.
DecodedImage decode_jpeg(std::span<const std::byte> bytes, int channels, const std::string& where,
                         int64_t max_pixels);
DecodedImage decode_png(std::span<const std::byte> bytes, int channels, const std::string& where,
                        int64_t max_pixels);

// Throws DataLoss when height x width is empty or over max_pixels (before anything is
// allocated for the pixels).
void check_image_size(const char* format, int64_t height, int64_t width, int64_t max_pixels,
                      const std::string& where);

// Throws InvalidArgument unless pixels holds height x width x channels values, channels is in
// `allowed` and the sizes fit the format's 32-bit (PNG) or 16-bit (JPEG) fields.
void check_encode_args(const char* format, std::size_t pixels, int64_t height, int64_t width,
                       int channels, std::initializer_list<int> allowed, int64_t max_side);

}  // namespace trainyard::image::internal

#endif  // TRAINYARD_PKG_IMAGE_SRC_CODEC_INTERNAL_H_
