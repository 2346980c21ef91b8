// image_ops.h: resize_bilinear against TensorFlow's tf.compat.v1.image.resize_bilinear
// (align_corners=False, half_pixel_centers=False) on the golden inputs of
// tests/golden/make_images_golden.py, TF-Slim's _smallest_size_at_least, crop and flip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/image_ops.h"

namespace trainyard::image {
namespace {

using ::testing::HasSubstr;

const std::string kGolden = std::string(TRAINYARD_SOURCE_DIR) + "/tests/golden/images/";

template <class T>
std::vector<T> read_values(const std::string& name) {
  std::ifstream in(kGolden + name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + kGolden + name);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

struct Size {
  int64_t height, width;
};

constexpr Size kResizeSizes[] = {{4, 5}, {13, 11}, {7, 9}, {3, 20}, {1, 1}};

template <class T>
void expect_resize_equals_tensorflow(const char* input, const char* tag, ImageShape shape) {
  const std::vector<T> in = read_values<T>(input);
  ASSERT_EQ(in.size(), shape.elements());
  for (const Size& size : kResizeSizes) {
    const std::string name = std::string("resize_") + tag + "_" + std::to_string(size.height) +
                             "x" + std::to_string(size.width) + ".f32";
    const std::vector<float> expected = read_values<float>(name);
    std::vector<float> out(expected.size());
    resize_bilinear(std::span<const T>(in), shape, out, size.height, size.width);
    float worst = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      worst = std::max(worst, std::abs(out[i] - expected[i]));
    }
    // The same float operations in the same order as TensorFlow's kernel: equal, bit for bit.
    EXPECT_EQ(worst, 0.0f) << name;
  }
}

TEST(ResizeBilinear, EqualsTensorFlowOnF32) {
  expect_resize_equals_tensorflow<float>("resize_in_f32.f32", "f32", {7, 9, 3});
}

TEST(ResizeBilinear, EqualsTensorFlowOnU8) {
  expect_resize_equals_tensorflow<uint8_t>("resize_in_u8.u8", "u8", {7, 9, 2});
}

TEST(ResizeBilinear, SameSizeIsACopy) {
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};
  std::vector<float> out(6);
  resize_bilinear(std::span<const float>(in), {2, 3, 1}, out, 2, 3);
  EXPECT_EQ(out, in);
}

TEST(ResizeBilinear, BadSizesAreInvalidArgument) {
  const std::vector<float> in(6);
  std::vector<float> out(4);
  EXPECT_THROW(resize_bilinear(std::span<const float>(in), {2, 2, 1}, out, 2, 2),
               InvalidArgument);  // 6 values for 4
  EXPECT_THROW(resize_bilinear(std::span<const float>(in), {2, 3, 1}, out, 2, 3),
               InvalidArgument);  // output too small
  EXPECT_THROW(resize_bilinear(std::span<const float>(in), {2, 3, 1}, out, 0, 4), InvalidArgument);
}

TEST(SmallestSideSize, EqualsTensorFlowSlim) {
  // (height, width, smallest_side) -> TF-Slim's (new_height, new_width), from the manifest.
  struct Case {
    int64_t h, w, side, new_h, new_w;
  };
  for (const Case& c :
       {Case{480, 640, 256, 256, 341}, Case{333, 500, 256, 256, 384}, Case{500, 333, 224, 336, 224},
        Case{100, 100, 256, 256, 256}, Case{375, 500, 256, 256, 341}, Case{7, 1000, 3, 3, 428}}) {
    const ResizeSize size = smallest_side_size(c.h, c.w, c.side);
    EXPECT_EQ(size.height, c.new_h) << c.h << " x " << c.w << " to " << c.side;
    EXPECT_EQ(size.width, c.new_w) << c.h << " x " << c.w << " to " << c.side;
  }
  EXPECT_THROW(smallest_side_size(0, 5, 3), InvalidArgument);
}

TEST(Crop, CopiesTheWindow) {
  // 3 x 4 x 2 u8: value = 10 * y + x, channel c adds 100 c.
  std::vector<uint8_t> in;
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 4; ++x) {
      for (int c = 0; c < 2; ++c) in.push_back(static_cast<uint8_t>(10 * y + x + 100 * c));
    }
  }
  std::vector<uint8_t> out(2 * 2 * 2);
  crop(std::as_bytes(std::span<const uint8_t>(in)), {3, 4, 2}, 1, 1, 2, 2, 2,
       std::as_writable_bytes(std::span<uint8_t>(out)));
  EXPECT_EQ(out, (std::vector<uint8_t>{12, 112, 13, 113, 22, 122, 23, 123}));
  try {
    crop(std::as_bytes(std::span<const uint8_t>(in)), {3, 4, 2}, 1, 2, 3, 2, 2,
         std::as_writable_bytes(std::span<uint8_t>(out)));
    ADD_FAILURE() << "a window outside the image was cropped";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("window 2 x 2 at (2, 3) is not inside the 3 x 4 x 2 image"));
  }
}

TEST(FlipLeftRight, MirrorsEachRow) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // 2 x 3 x 2
  flip_left_right(std::as_writable_bytes(std::span<float>(data)), {2, 3, 2}, sizeof(float));
  EXPECT_EQ(data, (std::vector<float>{5, 6, 3, 4, 1, 2, 11, 12, 9, 10, 7, 8}));
}

}  // namespace
}  // namespace trainyard::image
