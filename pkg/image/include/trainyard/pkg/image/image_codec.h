// Decoding and encoding of JPEG (libjpeg-turbo) and PNG (libpng) images, as TensorFlow's
// tf.io.decode_image, decode_jpeg and decode_png do it for uint8 output.
//
// decode_image() finds the format from the data's first bytes (as decode_image sniffs), so a
// record whose image/format names the other format still decodes. Pixels come back as u8,
// height x width x channels, row-major (HWC). `channels`:
//   0  as stored: JPEG 1 or 3; PNG 1 (gray), 2 (gray + alpha), 3 or 4 (with alpha; a palette
//      with a transparent entry gives 4)
//   1  grayscale: JPEG takes the luma plane (libjpeg's conversion), PNG converts RGB with
//      libpng's ITU-R 601 weights 0.299, 0.587, 0.114 in fixed point, as TensorFlow does
//   3  RGB: gray is replicated, alpha is dropped
// JPEG is decoded as TensorFlow's decode_jpeg with its defaults (fast integer DCT, fancy
// upsampling), so the pixels equal TensorFlow's. 16-bit PNG samples keep their high byte
// (png_set_strip_16, as TensorFlow). Palettes are expanded, bit depths below 8 scaled to 8.
//
// Untrusted data: the image's size is checked against `max_pixels` from its header, before any
// pixel memory is allocated. Every problem (not a JPEG or PNG, truncated data, a corrupt JPEG
// stream, a PNG CRC mismatch, too many pixels) throws trainyard::DataLoss whose message starts
// with `where` ("train.tfrecord, record 17: image/encoded: "). The libraries' errors never
// exit the process and their warnings are not printed. Thread-safe: no state is shared.
#ifndef TRAINYARD_PKG_IMAGE_IMAGE_CODEC_H_
#define TRAINYARD_PKG_IMAGE_IMAGE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trainyard::image {

enum class ImageFormat { kJpeg, kPng };

// "jpeg" or "png".
const char* image_format_name(ImageFormat format);

// The format of an image/format string as TF-Slim's datasets write it: "jpeg", "jpg", "JPEG",
// "png", "PNG"; nullopt for anything else.
std::optional<ImageFormat> image_format_named(std::string_view name);

// The format from the data's magic bytes (JPEG FF D8 FF, PNG's 8-byte signature); nullopt when
// it is neither.
std::optional<ImageFormat> sniff_image_format(std::span<const std::byte> bytes);

// 2^26 pixels (8192 x 8192): larger images are refused unless the caller raises the limit.
inline constexpr int64_t kDefaultMaxImagePixels = int64_t{1} << 26;

struct DecodedImage {
  int64_t height = 0;
  int64_t width = 0;
  int channels = 0;
  ImageFormat format = ImageFormat::kJpeg;  // what the data was
  std::vector<uint8_t> pixels;              // height * width * channels, HWC
};

// Throws InvalidArgument for `channels` other than 0, 1, 3 or max_pixels < 1; DataLoss (see
// above) for anything wrong with the data.
DecodedImage decode_image(std::span<const std::byte> bytes, int channels, const std::string& where,
                          int64_t max_pixels = kDefaultMaxImagePixels);

// PNG of `pixels` (height x width x channels u8, HWC; channels 1, 2, 3 or 4), 8 bits per
// sample, not interlaced. Throws InvalidArgument for bad sizes, Error when libpng fails.
std::string encode_png(std::span<const uint8_t> pixels, int64_t height, int64_t width,
                       int channels);

// Baseline JPEG of `pixels` (channels 1 or 3) at `quality` (1..100), 4:2:0 chroma for color.
// For tests and tools; throws as encode_png.
std::string encode_jpeg(std::span<const uint8_t> pixels, int64_t height, int64_t width,
                        int channels, int quality = 90);

}  // namespace trainyard::image

#endif  // TRAINYARD_PKG_IMAGE_IMAGE_CODEC_H_
