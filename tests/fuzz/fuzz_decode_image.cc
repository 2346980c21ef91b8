// libFuzzer target for pkg/image's decode_image (libjpeg-turbo and libpng behind it).
//
// The first byte picks the channels asked for (0, 1 or 3) and the rest is the image file. The
// decoder must either return an image whose pixel buffer holds height x width x channels values,
// with the channels asked for (or 1 to 4 for 0), or throw DataLoss whose message starts with the
// `where` given; anything else (another exception, a crash, a leak, undefined behaviour) is a
// finding. The pixel limit is lowered to 2^20 so that crafted headers cannot exhaust memory.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_check.h"
#include "trainyard/error.h"
#include "trainyard/pkg/image/image_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr int kChannels[3] = {0, 1, 3};
  const int channels = kChannels[data[0] % 3];
  const auto bytes = std::as_bytes(std::span<const uint8_t>(data + 1, size - 1));
  const std::string where = "fuzz: image/encoded";
  try {
    const trainyard::image::DecodedImage image =
        trainyard::image::decode_image(bytes, channels, where, int64_t{1} << 20);
    FUZZ_CHECK(image.height >= 1 && image.width >= 1 && image.height * image.width <= (1 << 20),
               "size " + std::to_string(image.height) + " x " + std::to_string(image.width));
    FUZZ_CHECK(
        channels == 0 ? image.channels >= 1 && image.channels <= 4 : image.channels == channels,
        "channels " + std::to_string(image.channels) + " for " + std::to_string(channels));
    FUZZ_CHECK(image.pixels.size() ==
                   static_cast<std::size_t>(image.height * image.width * image.channels),
               std::to_string(image.pixels.size()) + " pixel values");
  } catch (const trainyard::DataLoss& e) {
    FUZZ_CHECK(std::string(e.what()).rfind(where + ": ", 0) == 0, e.what());
  }
  return 0;
}
