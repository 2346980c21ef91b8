#include "source_jpeg.h"

#include <optional>
#include <span>
#include <string>

#include "sha256.h"
#include "trainyard/error.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/user_file.h"

namespace trainyard::app {

SourceJpeg read_source_jpeg(const std::string& path, const std::string& where) {
  SourceJpeg jpeg;
  jpeg.bytes = read_user_file(path, where + ": image", kMaxSourceJpegBytes);
  const auto data = std::as_bytes(std::span<const char>(jpeg.bytes.data(), jpeg.bytes.size()));
  const std::optional<image::ImageFormat> format = image::sniff_image_format(data);
  if (format != image::ImageFormat::kJpeg) {
    throw DataLoss(where + ": image " + path + " is " +
                   (format ? std::string("a ") + image::image_format_name(*format) + " file"
                           : std::string("neither a JPEG nor a PNG file")) +
                   ", not a JPEG (the records say image/format 'jpeg', as the API's scripts "
                   "write them)");
  }
  const image::DecodedImage decoded = image::decode_image(data, 0, where + ": image " + path);
  jpeg.height = decoded.height;
  jpeg.width = decoded.width;
  jpeg.sha256 = sha256_hex(jpeg.bytes);
  return jpeg;
}

}  // namespace trainyard::app
