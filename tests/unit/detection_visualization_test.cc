// pkg/detection's draw_instance_masks against the Object Detection API's
// visualization_utils.draw_mask_on_image_array: the expected pixels are what that function
// (PIL 12's Image.composite, run from the interop venv) gave on the same 2 x 2 image, masks,
// colours and alphas. Its blend also matched PIL on every value 0..255 for five colours and
// alphas 0.4, 0.5 and 0.25 when it was written.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/pkg/detection/visualization.h"

namespace trainyard::detection {
namespace {

using Color = std::array<uint8_t, 3>;
using Pixels = std::vector<uint8_t>;

// The 2 x 2 RGB image the pinned outputs start from.
Pixels image() { return {0, 100, 255, 37, 200, 12, 250, 5, 128, 90, 90, 90}; }

RgbView view(Pixels& pixels, int64_t height, int64_t width, int64_t stride, int64_t x0 = 0) {
  return {pixels.data() + x0 * 3, height, width, stride};
}

TEST(DrawInstanceMasks, GivesTheApisDrawMaskOnImageArrayPixels) {
  const std::vector<Color> red{{255, 64, 64}};
  const Pixels mask{1, 0, 1, 1};
  Pixels pixels = image();
  draw_instance_masks(view(pixels, 2, 2, 2), mask.data(), 1, 2, 2, red);
  EXPECT_EQ(pixels, (Pixels{102, 86, 179, 37, 200, 12, 252, 29, 102, 156, 80, 80}));

  // Groundtruth's black, as eval_util draws the groundtruth's masks.
  const std::vector<Color> black{{0, 0, 0}};
  pixels = image();
  draw_instance_masks(view(pixels, 2, 2, 2), mask.data(), 1, 2, 2, black);
  EXPECT_EQ(pixels, (Pixels{0, 60, 153, 37, 200, 12, 150, 3, 77, 54, 54, 54}));

  // Any value other than 0 is on; alpha 0.25.
  const Pixels full{1, 7, 255, 1};
  pixels = image();
  draw_instance_masks(view(pixels, 2, 2, 2), full.data(), 1, 2, 2,
                      std::vector<Color>{{13, 128, 250}}, 0.25);
  EXPECT_EQ(pixels, (Pixels{3, 107, 254, 31, 182, 71, 191, 35, 158, 71, 99, 130}));
}

TEST(DrawInstanceMasks, LaterMasksBlendOverEarlierOnesEachInItsColour) {
  const Pixels masks{1, 0, 1, 1,   // red
                     0, 0, 1, 0};  // blue, over the red at (1, 0)
  const std::vector<Color> colors{{255, 64, 64}, {64, 96, 255}};
  Pixels pixels = image();
  draw_instance_masks(view(pixels, 2, 2, 2), masks.data(), 2, 2, 2, colors);
  EXPECT_EQ(pixels, (Pixels{102, 86, 179, 37, 200, 12, 177, 56, 163, 156, 80, 80}));
}

TEST(DrawInstanceMasks, PaddedMasksAndPanelsOfAWiderImage) {
  // The image as the right panel of a 2 x 4 side-by-side image; the mask padded to 3 x 3 with
  // ones outside the image's 2 x 2 corner, which must not be drawn.
  const Pixels left{1, 2, 3, 4, 5, 6};
  Pixels wide;
  const Pixels img = image();
  for (int y = 0; y < 2; ++y) {
    wide.insert(wide.end(), left.begin(), left.end());
    wide.insert(wide.end(), img.begin() + y * 6, img.begin() + y * 6 + 6);
  }
  const Pixels padded{1, 0, 1,  //
                      1, 1, 1,  //
                      1, 1, 1};
  draw_instance_masks(view(wide, 2, 2, 4, 2), padded.data(), 1, 3, 3,
                      std::vector<Color>{{255, 64, 64}});
  EXPECT_EQ(wide, (Pixels{1, 2, 3, 4, 5, 6, 102, 86, 179, 37,  200, 12,  //
                          1, 2, 3, 4, 5, 6, 252, 29, 102, 156, 80,  80}));
}

TEST(DrawInstanceMasks, NoMasksLeaveTheImageAndBadArgumentsAreRefused) {
  Pixels pixels = image();
  draw_instance_masks(view(pixels, 2, 2, 2), nullptr, 0, 0, 0, {});
  EXPECT_EQ(pixels, image());
  const Pixels mask{1, 1, 1, 1};
  const std::vector<Color> one{{1, 2, 3}};
  EXPECT_THROW(draw_instance_masks(view(pixels, 2, 2, 2), mask.data(), 1, 1, 4, one),
               InvalidArgument);  // a mask smaller than the image
  EXPECT_THROW(draw_instance_masks(view(pixels, 2, 2, 2), mask.data(), 1, 2, 2, {}),
               InvalidArgument);  // no colour
  EXPECT_THROW(draw_instance_masks(view(pixels, 2, 2, 2), mask.data(), 1, 2, 2, one, 1.5),
               InvalidArgument);
  EXPECT_THROW(draw_instance_masks(view(pixels, 2, 2, 1), mask.data(), 1, 2, 2, one),
               InvalidArgument);  // rows overlap
  EXPECT_EQ(pixels, image());
}

}  // namespace
}  // namespace trainyard::detection
