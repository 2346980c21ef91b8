// The Object Detection API's visualization_utils.draw_mask_on_image_array: instance masks tinted
// onto an RGB image, as eval_util's side-by-side evaluation images draw them (masks first, then
// the boxes, each mask in its box's colour).
//
// draw_mask_on_image_array composites a solid colour over the image through an 8-bit mask of
// uint8(255 * alpha) where mask > 0 (PIL's Image.composite), so each channel of a masked pixel
// becomes PIL's rounded blend of the image's value v and the colour's c with m = uint8(255 *
// alpha): t = v * (255 - m) + c * m + 128, ((t >> 8) + t) >> 8; the API's default alpha is 0.4
// (m = 102). Pixels where the mask is 0 are left as they are.
#ifndef TRAINYARD_PKG_DETECTION_VISUALIZATION_H_
#define TRAINYARD_PKG_DETECTION_VISUALIZATION_H_

#include <array>
#include <cstdint>
#include <span>

namespace trainyard::detection {

inline constexpr double kMaskAlpha = 0.4;

// A height x width window of an interleaved RGB u8 image whose rows are row_stride pixels
// apart (a panel of a wider image); pixel (y, x) is at pixels + (y * row_stride + x) * 3.
struct RgbView {
  uint8_t* pixels = nullptr;
  int64_t height = 0;
  int64_t width = 0;
  int64_t row_stride = 0;
};

// One channel of the blend above.
uint8_t blend_mask_channel(uint8_t value, uint8_t color, double alpha = kMaskAlpha);

// Tints the image where masks[k] is not 0 toward colors[k], for k = 0 .. num_masks - 1, in that
// order (a later mask blends over an earlier one). `masks` is u8 [num_masks, mask_height,
// mask_width] (image masks, as the API's detection_masks after reframing and its
// groundtruth_instance_masks; 0 off, anything else on), row-major; masks padded past the image
// (pad_to_largest) are read in their top-left image.height x image.width corner. Throws
// InvalidArgument when a mask is smaller than the image, colors has fewer than num_masks entries,
// alpha is outside [0, 1] or the view is malformed.
void draw_instance_masks(const RgbView& image, const uint8_t* masks, int64_t num_masks,
                         int64_t mask_height, int64_t mask_width,
                         std::span<const std::array<uint8_t, 3>> colors, double alpha = kMaskAlpha);

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_VISUALIZATION_H_
