// The image ops of ops.h (core/src/engine/ops/image.cc declares and implements them):
// crop_and_resize, TensorFlow's tf.image.crop_and_resize, and position_sensitive_crop_regions, the
// Object Detection API's R-FCN pooling built on it. Errors as ops.h says.
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

// position_sensitive_crop_regions and its gradient with respect to the image (ops/image.h).
struct PositionSensitiveCropAttrs {
  int64_t crop_height = 1, crop_width = 1;
  int64_t bins_y = 1, bins_x = 1;  // num_spatial_bins
  bool global_pool = true;
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

// The Object Detection API's utils/ops.py batch_position_sensitive_crop_regions (R-FCN's
// position-sensitive RoI pooling): `image` [N, H, W, C] (f32 or f64) with boxes [N, B, 4] of the
// image's dtype, B boxes (y1, x1, y2, x2) per image normalized as crop_and_resize's.
//
// With num_spatial_bins (bins_y, bins_x) and crop_size (crop_h, crop_w), each box splits into
// bins_y x bins_x equal bins, bin (i, j) = (y1 + i step_y, x1 + j step_x, y1 + (i + 1) step_y,
// x1 + (j + 1) step_x) with step_y = (y2 - y1) / bins_y (computed in the image's dtype as the
// API computes it), and bin k = i bins_x + j is crop_and_resize'd (bilinear, 0 outside the
// image) to crop_h / bins_y x crop_w / bins_x from channels [k C', (k + 1) C') of its image,
// C' = C / (bins_y bins_x). Output [N, B, crop_h, crop_w, C'] with bin (i, j)'s crop at rows
// i crop_h / bins_y.. and columns j crop_w / bins_x.. (the API's space_to_depth /
// batch_to_space_nd / depth_to_space assembly), or with global_pool [N, B, 1, 1, C'], the mean
// of that over rows and columns (the API's mean over bins, then over positions).
//
// The API crops with tf.image.crop_and_resize, or with matmul_crop_and_resize when all shapes
// are static; the two differ only for samples less than a pixel outside the image, which the
// matmul path weighs with the border pixel (R-FCN's proposals are clipped to the image).
//
// Differentiable in `image` only: the boxes get no gradient (the API's R-FCN stops the gradient
// into its proposals).
//
// Throws InvalidArgument naming the op and the argument for: an image not of rank 4 or without
// rows or columns, boxes not [N, B, 4] of its dtype, a bin count below 1, a crop size not a
// positive multiple of the bins, channels not divisible by bins_y bins_x, and (as the API's
// ValueError) bins of unequal height and width (crop_h / bins_y != crop_w / bins_x) without
// global_pool.
TRAINYARD_API Tensor position_sensitive_crop_regions(const Tensor& image, const Tensor& boxes,
                                                     std::pair<int64_t, int64_t> crop_size,
                                                     std::pair<int64_t, int64_t> num_spatial_bins,
                                                     bool global_pool);

}  // namespace ops
}  // namespace trainyard

#endif  // TRAINYARD_OPS_IMAGE_H_
