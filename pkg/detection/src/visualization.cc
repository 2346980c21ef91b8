#include "trainyard/pkg/detection/visualization.h"

#include <cstddef>
#include <string>

#include "trainyard/error.h"

namespace trainyard::detection {

uint8_t blend_mask_channel(uint8_t value, uint8_t color, double alpha) {
  // np.uint8(255.0 * alpha * (mask > 0)): truncated.
  const auto m = static_cast<uint32_t>(255.0 * alpha);
  const uint32_t t = uint32_t{value} * (255 - m) + uint32_t{color} * m + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

void draw_instance_masks(const RgbView& image, const uint8_t* masks, int64_t num_masks,
                         int64_t mask_height, int64_t mask_width,
                         std::span<const std::array<uint8_t, 3>> colors, double alpha) {
  if (image.height < 0 || image.width < 0 || image.row_stride < image.width ||
      (image.pixels == nullptr && image.height * image.width > 0)) {
    throw InvalidArgument("draw_instance_masks: a malformed image view");
  }
  if (!(alpha >= 0.0 && alpha <= 1.0)) {
    throw InvalidArgument("draw_instance_masks: alpha is " + std::to_string(alpha) +
                          "; expected a value in [0, 1]");
  }
  if (num_masks <= 0) return;
  if (masks == nullptr) throw InvalidArgument("draw_instance_masks: no mask data");
  if (mask_height < image.height || mask_width < image.width) {
    throw InvalidArgument("draw_instance_masks: the masks are " + std::to_string(mask_height) +
                          " x " + std::to_string(mask_width) + ", smaller than the image's " +
                          std::to_string(image.height) + " x " + std::to_string(image.width));
  }
  if (static_cast<int64_t>(colors.size()) < num_masks) {
    throw InvalidArgument("draw_instance_masks: " + std::to_string(colors.size()) +
                          " colours for " + std::to_string(num_masks) + " masks");
  }
  for (int64_t k = 0; k < num_masks; ++k) {
    const uint8_t* mask = masks + k * mask_height * mask_width;
    const std::array<uint8_t, 3>& color = colors[static_cast<std::size_t>(k)];
    for (int64_t y = 0; y < image.height; ++y) {
      for (int64_t x = 0; x < image.width; ++x) {
        if (mask[y * mask_width + x] == 0) continue;
        uint8_t* pixel = image.pixels + (y * image.row_stride + x) * 3;
        for (std::size_t c = 0; c < 3; ++c)
          pixel[c] = blend_mask_channel(pixel[c], color[c], alpha);
      }
    }
  }
}

}  // namespace trainyard::detection
