// The image ops. crop_and_resize (TensorFlow's CropAndResize sampling grid) and its gradient
// with respect to the image (CropAndResizeGradImage).
#include <array>
#include <span>
#include <string>

#include "engine/ops/common.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_IMAGE_OPS(X) \
  X(kCropAndResize, "crop_and_resize", 3, 1, CropAndResizeAttrs, "(image [N, H, W, C], boxes [B, 4] normalized (y1, x1, y2, x2), box_ind [B] i32) -> crops [B, crop_h, crop_w, C]: tf.image.crop_and_resize's sampling grid, bilinear or nearest, extrapolation_value outside the image; box_ind outside [0, N) is InvalidArgument naming the box. Differentiable in the image only: no gradient for boxes (the Object Detection API stops gradients into proposals)") \
  X(kCropAndResizeGradImage, "crop_and_resize_grad_image", 3, 1, CropAndResizeAttrs, "(dcrops [B, crop_h, crop_w, C], boxes, box_ind) -> dimage of image_shape: each in-image sample's gradient added to the pixels it read, with their interpolation weights")
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

}  // namespace ops
}  // namespace trainyard
