// Host-side box arithmetic of the Object Detection API (core/box_list_ops.py): areas,
// intersections, IoU and IoA matrices, clipping, scaling and coordinate frames.
//
// A box is [ymin, xmin, ymax, xmax], as in the API; a box collection is a row-major float array
// [N, 4] (N = size / 4). Coordinates may be normalized or absolute, the functions do not care.
// Every function that takes a collection throws InvalidArgument when its size is not a multiple
// of 4. Matrices are row-major [N, M] with row i for boxes1[i] and column j for boxes2[j].
#ifndef TRAINYARD_PKG_DETECTION_BOX_OPS_H_
#define TRAINYARD_PKG_DETECTION_BOX_OPS_H_

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace trainyard::detection {

// [ymin, xmin, ymax, xmax] of a clip window.
using BoxWindow = std::array<float, 4>;

// The number of boxes in a [N, 4] array; throws InvalidArgument naming `what` otherwise.
int64_t num_boxes(std::span<const float> boxes, const char* what = "boxes");

// (ymax - ymin) * (xmax - xmin) per box, [N] (negative for a flipped box, as the API's).
std::vector<float> area(std::span<const float> boxes);

// Pairwise intersection areas [N, M] (0 where the boxes do not overlap).
std::vector<float> intersection(std::span<const float> boxes1, std::span<const float> boxes2);

// Pairwise intersection over union [N, M]; 0 where the intersection is 0 (so two empty boxes
// give 0, not NaN), as box_list_ops.iou. O(N M) with the areas computed once per box.
std::vector<float> iou(std::span<const float> boxes1, std::span<const float> boxes2);

// Pairwise intersection over the area of the box of boxes2 [N, M], as box_list_ops.ioa(boxes1,
// boxes2): element (i, j) is how much of boxes2[j] lies inside boxes1[i]. Not symmetric; a
// zero-area box of boxes2 gives NaN or inf, as the API's division does.
std::vector<float> ioa(std::span<const float> boxes1, std::span<const float> boxes2);

// IoU of corresponding boxes [N] (box_list_ops.matched_iou); both collections hold N boxes.
std::vector<float> matched_iou(std::span<const float> boxes1, std::span<const float> boxes2);

// Each coordinate clamped into the window (box_list_ops.clip_to_window). With
// filter_nonoverlapping, boxes whose clipped area is not > 0 are dropped; `kept_indices`, when
// given, receives the input index of each returned box.
std::vector<float> clip_to_window(std::span<const float> boxes, const BoxWindow& window,
                                  bool filter_nonoverlapping = true,
                                  std::vector<int64_t>* kept_indices = nullptr);

// y coordinates times y_scale, x coordinates times x_scale (box_list_ops.scale).
std::vector<float> scale(std::span<const float> boxes, float y_scale, float x_scale);

// Absolute coordinates divided by the image height and width (to_normalized_coordinates
// without its range check) and back (to_absolute_coordinates).
std::vector<float> to_normalized_coordinates(std::span<const float> boxes, float height,
                                             float width);
std::vector<float> to_absolute_coordinates(std::span<const float> boxes, float height, float width);

// Boxes expressed relative to the window: (y - wymin) / (wymax - wymin), likewise for x
// (box_list_ops.change_coordinate_frame).
std::vector<float> change_coordinate_frame(std::span<const float> boxes, const BoxWindow& window);

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_BOX_OPS_H_
