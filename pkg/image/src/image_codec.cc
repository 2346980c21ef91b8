#include "trainyard/pkg/image/image_codec.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "codec_internal.h"
#include "trainyard/error.h"

namespace trainyard::image {

const char* image_format_name(ImageFormat format) {
  return format == ImageFormat::kJpeg ? "jpeg" : "png";
}

std::optional<ImageFormat> image_format_named(std::string_view name) {
  if (name == "jpeg" || name == "jpg" || name == "JPEG" || name == "JPG") return ImageFormat::kJpeg;
  if (name == "png" || name == "PNG") return ImageFormat::kPng;
  return std::nullopt;
}

std::optional<ImageFormat> sniff_image_format(std::span<const std::byte> bytes) {
  static constexpr unsigned char kJpeg[] = {0xFF, 0xD8, 0xFF};
  static constexpr unsigned char kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() >= sizeof(kJpeg) && std::memcmp(bytes.data(), kJpeg, sizeof(kJpeg)) == 0) {
    return ImageFormat::kJpeg;
  }
  if (bytes.size() >= sizeof(kPng) && std::memcmp(bytes.data(), kPng, sizeof(kPng)) == 0) {
    return ImageFormat::kPng;
  }
  return std::nullopt;
}

namespace {

// "starts with 47 49 46 38 (GIF)": what the data is instead, for the error message.
std::string describe_start(std::span<const std::byte> bytes) {
  if (bytes.empty()) return "is empty";
  std::string out = std::to_string(bytes.size()) + " bytes starting with";
  const std::size_t n = std::min<std::size_t>(bytes.size(), 8);
  for (std::size_t i = 0; i < n; ++i) {
    char hex[4];
    std::snprintf(hex, sizeof(hex), " %02x", static_cast<unsigned>(bytes[i]));
    out += hex;
  }
  auto starts = [&](std::string_view magic) {
    return bytes.size() >= magic.size() &&
           std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
  };
  if (starts("GIF8")) out += " (a GIF image)";
  if (starts("BM")) out += " (a BMP image?)";
  if (starts("RIFF")) out += " (a RIFF file: WebP?)";
  return out;
}

}  // namespace

DecodedImage decode_image(std::span<const std::byte> bytes, int channels, const std::string& where,
                          int64_t max_pixels) {
  if (channels != 0 && channels != 1 && channels != 3) {
    throw InvalidArgument(where + ": channels is " + std::to_string(channels) +
                          "; expected 0 (as stored), 1 (grayscale) or 3 (RGB)");
  }
  if (max_pixels < 1) {
    throw InvalidArgument(where + ": max_pixels is " + std::to_string(max_pixels) +
                          "; expected a positive limit");
  }
  const std::optional<ImageFormat> format = sniff_image_format(bytes);
  if (!format) {
    throw DataLoss(where + ": not a JPEG or PNG image: " + describe_start(bytes));
  }
  return *format == ImageFormat::kJpeg ? internal::decode_jpeg(bytes, channels, where, max_pixels)
                                       : internal::decode_png(bytes, channels, where, max_pixels);
}

namespace internal {

void check_image_size(const char* format, int64_t height, int64_t width, int64_t max_pixels,
                      const std::string& where) {
  if (height < 1 || width < 1) {
    throw DataLoss(where + ": " + format + " header gives an empty image (" +
                   std::to_string(height) + " x " + std::to_string(width) + ")");
  }
  // Both sides are below 2^32, so the product fits in 64 bits.
  if (height * width > max_pixels) {
    throw DataLoss(where + ": " + format + " image is " + std::to_string(height) + " x " +
                   std::to_string(width) + " = " + std::to_string(height * width) +
                   " pixels, over the limit of " + std::to_string(max_pixels) +
                   " (max_image_pixels)");
  }
}

void check_encode_args(const char* format, std::size_t pixels, int64_t height, int64_t width,
                       int channels, std::initializer_list<int> allowed, int64_t max_side) {
  std::string what = std::string("encode_") + format;
  if (std::find(allowed.begin(), allowed.end(), channels) == allowed.end()) {
    std::string list;
    for (int c : allowed) list += (list.empty() ? "" : ", ") + std::to_string(c);
    throw InvalidArgument(what + ": channels is " + std::to_string(channels) + "; expected " +
                          list);
  }
  if (height < 1 || width < 1 || height > max_side || width > max_side) {
    throw InvalidArgument(what + ": image is " + std::to_string(height) + " x " +
                          std::to_string(width) + "; each side must be in [1, " +
                          std::to_string(max_side) + "]");
  }
  const auto expected = static_cast<std::size_t>(height) * static_cast<std::size_t>(width) *
                        static_cast<std::size_t>(channels);
  if (pixels != expected) {
    throw InvalidArgument(what + ": " + std::to_string(pixels) + " values for a " +
                          std::to_string(height) + " x " + std::to_string(width) + " x " +
                          std::to_string(channels) + " image (expected " +
                          std::to_string(expected) + ")");
  }
}

}  // namespace internal
}  // namespace trainyard::image
