// The image ops. crop_and_resize (TensorFlow's CropAndResize sampling grid) and its gradient
// with respect to the image (CropAndResizeGradImage); position_sensitive_crop_regions (the Object
// Detection API's R-FCN pooling on that grid) and its gradient with respect to the image.
#include <array>
#include <span>
#include <string>

#include "engine/ops/common.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_IMAGE_OPS(X) \
  X(kCropAndResize, "crop_and_resize", 3, 1, CropAndResizeAttrs, "(image [N, H, W, C], boxes [B, 4] normalized (y1, x1, y2, x2), box_ind [B] i32) -> crops [B, crop_h, crop_w, C]: tf.image.crop_and_resize's sampling grid, bilinear or nearest, extrapolation_value outside the image; box_ind outside [0, N) is InvalidArgument naming the box. Differentiable in the image only: no gradient for boxes (the Object Detection API stops gradients into proposals)") \
  X(kCropAndResizeGradImage, "crop_and_resize_grad_image", 3, 1, CropAndResizeAttrs, "(dcrops [B, crop_h, crop_w, C], boxes, box_ind) -> dimage of image_shape: each in-image sample's gradient added to the pixels it read, with their interpolation weights") \
  X(kPositionSensitiveCropRegions, "position_sensitive_crop_regions", 2, 1, PositionSensitiveCropAttrs, "(image [N, H, W, C], boxes [N, B, 4] normalized (y1, x1, y2, x2)) -> [N, B, crop_h, crop_w, C / (bins_y bins_x)], or [N, B, 1, 1, ...] with global_pool: the Object Detection API's position_sensitive_crop_regions, bin k of each box crop_and_resize'd (bilinear, 0 outside) from channel block k. Differentiable in the image only") \
  X(kPositionSensitiveCropRegionsGradImage, "position_sensitive_crop_regions_grad_image", 2, 1, PositionSensitiveCropAttrs, "(doutput, boxes [N, B, 4]) -> dimage of image_shape: each in-image sample's gradient (with global_pool the output's, divided by crop_h crop_w) added to the pixels it read, with their interpolation weights")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(image, TRAINYARD_IMAGE_OPS)

namespace ops {
using namespace ops_internal;

Tensor crop_and_resize(const Tensor& image, const Tensor& boxes, const Tensor& box_ind,
                       std::pair<int64_t, int64_t> crop_size, CropMethod method,
                       double extrapolation_value) {
  const char* name = kCropAndResize.name();
  Backend& backend = common_backend(name, {&image, &boxes, &box_ind});
  require_float(name, image);
  if (image.shape().rank() != 4) {
    invalid(name, "expects an NHWC image of rank 4, got " + image.description());
  }
  const Shape& s = image.shape();
  if (s[1] < 1 || s[2] < 1) {
    invalid(name, "the image must have rows and columns, got " + image.description());
  }
  if (boxes.dtype() != image.dtype() || boxes.shape().rank() != 2 || boxes.shape()[1] != 4) {
    invalid(name, "boxes must be [num_boxes, 4] (y1, x1, y2, x2) of the image's dtype, got " +
                      boxes.description() + " for image " + image.description());
  }
  const int64_t num_boxes = boxes.shape()[0];
  if (box_ind.dtype() != DType::kI32 || box_ind.shape() != Shape{num_boxes}) {
    invalid(name, "box_ind must be i32 [" + std::to_string(num_boxes) + "] (one per box of " +
                      boxes.description() + "), got " + box_ind.description());
  }
  if (crop_size.first < 1 || crop_size.second < 1) {
    invalid(name, "crop_size must be positive, got " + std::to_string(crop_size.first) + " x " +
                      std::to_string(crop_size.second));
  }
  CropAndResizeAttrs attrs;
  attrs.crop_height = crop_size.first;
  attrs.crop_width = crop_size.second;
  attrs.nearest = method == CropMethod::kNearest;
  attrs.extrapolation_value = extrapolation_value;
  attrs.image_shape = {s[0], s[1], s[2], s[3]};
  Tensor y = run<3>(backend, kCropAndResize, {image, boxes, box_ind}, &attrs,
                    Shape{num_boxes, crop_size.first, crop_size.second, s[3]}, image.dtype());
  if (should_record({&image})) {
    Tensor bs = detached(boxes), is = detached(box_ind);
    // Only the image is differentiated: the boxes and their indices are constants here.
    record(kCropAndResize.name(), {&image, nullptr, nullptr}, std::span<Tensor>(&y, 1),
           [bs, is, attrs, s, dtype = image.dtype()](GradOutputs g) -> Grads {
             return {
                 run<3>(bs.backend(), kCropAndResizeGradImage, {g[0], bs, is}, &attrs, s, dtype),
                 Tensor(), Tensor()};
           });
  }
  return y;
}

Tensor position_sensitive_crop_regions(const Tensor& image, const Tensor& boxes,
                                       std::pair<int64_t, int64_t> crop_size,
                                       std::pair<int64_t, int64_t> num_spatial_bins,
                                       bool global_pool) {
  const char* name = kPositionSensitiveCropRegions.name();
  Backend& backend = common_backend(name, {&image, &boxes});
  require_float(name, image);
  if (image.shape().rank() != 4) {
    invalid(name, "expects an NHWC image of rank 4, got " + image.description());
  }
  const Shape& s = image.shape();
  if (s[1] < 1 || s[2] < 1) {
    invalid(name, "the image must have rows and columns, got " + image.description());
  }
  if (boxes.dtype() != image.dtype() || boxes.shape().rank() != 3 || boxes.shape()[0] != s[0] ||
      boxes.shape()[2] != 4) {
    invalid(name, "boxes must be [" + std::to_string(s[0]) +
                      ", num_boxes, 4] (y1, x1, y2, x2 per image) of the image's dtype, got " +
                      boxes.description() + " for image " + image.description());
  }
  const auto [bins_y, bins_x] = num_spatial_bins;
  const std::string bins = std::to_string(bins_y) + " x " + std::to_string(bins_x);
  const std::string crop =
      std::to_string(crop_size.first) + " x " + std::to_string(crop_size.second);
  if (bins_y < 1 || bins_x < 1) invalid(name, "num_spatial_bins must be >= 1, got " + bins);
  if (crop_size.first < 1 || crop_size.second < 1 || crop_size.first % bins_y != 0 ||
      crop_size.second % bins_x != 0) {
    invalid(name,
            "crop_size must be a positive multiple of num_spatial_bins " + bins + ", got " + crop);
  }
  if (s[3] % (bins_y * bins_x) != 0) {
    invalid(name, "the image's depth must be divisible by num_spatial_bins " + bins + " (" +
                      std::to_string(bins_y * bins_x) + " bins), got " + image.description());
  }
  if (!global_pool && crop_size.first / bins_y != crop_size.second / bins_x) {
    invalid(name, "without global_pool the bins' crops must be square, got crop_size " + crop +
                      " over num_spatial_bins " + bins);
  }
  PositionSensitiveCropAttrs attrs;
  attrs.crop_height = crop_size.first;
  attrs.crop_width = crop_size.second;
  attrs.bins_y = bins_y;
  attrs.bins_x = bins_x;
  attrs.global_pool = global_pool;
  attrs.image_shape = {s[0], s[1], s[2], s[3]};
  const int64_t out_h = global_pool ? 1 : crop_size.first;
  const int64_t out_w = global_pool ? 1 : crop_size.second;
  Tensor y =
      run<2>(backend, kPositionSensitiveCropRegions, {image, boxes}, &attrs,
             Shape{s[0], boxes.shape()[1], out_h, out_w, s[3] / (bins_y * bins_x)}, image.dtype());
  if (should_record({&image})) {
    Tensor bs = detached(boxes);
    // Only the image is differentiated: the boxes are constants here.
    record(kPositionSensitiveCropRegions.name(), {&image, nullptr}, std::span<Tensor>(&y, 1),
           [bs, attrs, s, dtype = image.dtype()](GradOutputs g) -> Grads {
             return {run<2>(bs.backend(), kPositionSensitiveCropRegionsGradImage, {g[0], bs},
                            &attrs, s, dtype),
                     Tensor()};
           });
  }
  return y;
}

}  // namespace ops
}  // namespace trainyard
