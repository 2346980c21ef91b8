// Mask R-CNN's detection masks in image coordinates, as the Object Detection API gives them to its
// evaluators and users: utils/ops.py reframe_box_masks_to_image_masks followed by eval_util's
// tf.greater(masks, 0.5) cast to uint8.
//
// A box mask [mask_height, mask_width] covers its detection's box; it is pasted into the image by
// tf.image.crop_and_resize (bilinear, 0 outside) of the unit box expressed relative to the box,
// ((0 - ymin) / (ymax - ymin), (0 - xmin) / (xmax - xmin), (1 - ymin) / (ymax - ymin), ...), each
// extent at least 1e-4 as the API's transform_boxes_relative_to_boxes keeps it, in float32. A
// pixel is in the mask when its value is > 0.5.
#ifndef TRAINYARD_PKG_DETECTION_INSTANCE_MASKS_H_
#define TRAINYARD_PKG_DETECTION_INSTANCE_MASKS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "trainyard/tensor.h"

namespace trainyard::detection {

// reframe_box_masks_to_image_masks itself: `box_masks` [N, mask_height, mask_width] (any real
// dtype), `boxes` N x 4 normalized [ymin, xmin, ymax, xmax] to an image of height x width. Returns
// the pasted f32 values [N, height, width] on the box masks' backend, all at once. No gradient.
// Throws InvalidArgument for shapes that do not agree or an image size below 1.
Tensor reframe_box_masks_to_image_mask_values(const Tensor& box_masks, std::span<const float> boxes,
                                              int64_t height, int64_t width);

// The same thresholded at 0.5, as the evaluators and exports take it. Returns the binary image
// masks u8 [N, height, width], row-major, on the host (the f32 image masks are made on the box
// masks' backend, at most 2^24 pixels at a time). Throws InvalidArgument for shapes that do not
// agree or an image size below 1.
std::vector<uint8_t> reframe_box_masks_to_image_masks(const Tensor& box_masks,
                                                      std::span<const float> boxes, int64_t height,
                                                      int64_t width);

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_INSTANCE_MASKS_H_
