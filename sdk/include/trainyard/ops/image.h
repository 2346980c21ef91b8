// The image ops of ops.h (core/src/engine/ops/image.cc declares and implements them):
// crop_and_resize, TensorFlow's tf.image.crop_and_resize. Errors as ops.h says.
#ifndef TRAINYARD_OPS_IMAGE_H_
#define TRAINYARD_OPS_IMAGE_H_

#include <array>
#include <cstdint>
#include <utility>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The attribute structs of the image family's ops (what their kernels receive as
// KernelArgs::attrs; op.h has the family-neutral ones).
// crop_and_resize and its gradient with respect to the image (ops/image.h).
struct CropAndResizeAttrs {
  int64_t crop_height = 1, crop_width = 1;
  bool nearest = false;  // "nearest" sampling instead of "bilinear"
  double extrapolation_value = 0.0;
  std::array<int64_t, 4> image_shape{};  // N, H, W, C
};

// How crop_and_resize reads the image at a sample point.
enum class CropMethod { kBilinear, kNearest };

namespace ops {

// tf.image.crop_and_resize: crops [B, crop_height, crop_width, C] of `image` [N, H, W, C] (f32
// or f64), one per row of `boxes` [B, 4] (the image's dtype), resized to crop_size.
//
// A box is (y1, x1, y2, x2) normalized to the image: y = 0 is row 0, y = 1 row H - 1. y1 > y2
// (or x1 > x2) crops upside down (mirrored); a box may extend past the image. `box_ind` [B] i32
// names the image of each box. Crop row y samples the image at
//   in_y = y1 (H - 1) + y (y2 - y1) (H - 1) / (crop_height - 1)   when crop_height > 1,
//   in_y = (y1 + y2) (H - 1) / 2                                  when crop_height == 1,
// and columns likewise, computed in the image's dtype as TensorFlow computes them (f32 equals
// TensorFlow's kernel). A sample outside [0, H - 1] x [0, W - 1] is extrapolation_value;
// bilinear interpolates the four pixels around the sample (floor and ceil of in_y, in_x),
// nearest reads the pixel at round(in_y), round(in_x).
//
// Differentiable in `image` only: boxes and box_ind get no gradient (the Object Detection API
// stops the gradient into the proposals). A sample outside the image contributes nothing.
//
// Throws InvalidArgument for shapes or dtypes that do not fit, a crop size below 1, an image
// without rows or columns, and (where the backend reads box_ind, at the latest at the next
// synchronisation) a box_ind outside [0, N), naming the box.
TRAINYARD_API Tensor crop_and_resize(const Tensor& image, const Tensor& boxes,
                                     const Tensor& box_ind, std::pair<int64_t, int64_t> crop_size,
                                     CropMethod method = CropMethod::kBilinear,
                                     double extrapolation_value = 0.0);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_IMAGE_H_
