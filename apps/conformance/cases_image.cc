// Op cases of the image family (op_cases.h; the ops are declared in core/src/engine/ops/image.cc):
// crop_and_resize, bilinear and nearest, and position_sensitive_crop_regions, pooled and
// assembled, and their gradients with respect to the image.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

namespace {

// Boxes (y1, x1, y2, x2) of every kind: inside, flipped in both axes, partly outside the image
// (extrapolation), small, a single point, and outside on the left. No sample lands within
// rounding of a pixel edge, a half pixel (nearest) or the image's border, where f32 and the
// reference's f64 coordinates could round to different pixels.
const std::vector<double> kBoxes = {0.11,  0.21,  0.83, 0.93,  //
                                    0.91,  0.71,  0.13, 0.07,  //
                                    -0.31, 0.41,  0.63, 1.27,  //
                                    0.33,  0.27,  0.61, 0.52,  //
                                    0.47,  0.57,  0.47, 0.57,  //
                                    0.21,  -0.13, 1.09, 0.31};
const std::vector<double> kBoxInd = {1, 0, 1, 0, 1, 0};

}  // namespace

void add_image_cases(std::vector<OpCase>& c) {
  using namespace ops;
  struct Crop {
    const char* name;
    DType dtype;
    int64_t height, width;
    CropMethod method;
    double extrapolation_value;
  };
  for (const Crop& k :
       {Crop{"crop_and_resize_bilinear", DType::kF32, 3, 4, CropMethod::kBilinear, 0.25},
        Crop{"crop_and_resize_nearest", DType::kF32, 4, 3, CropMethod::kNearest, 0.0},
        Crop{"crop_and_resize_1x1_f64", DType::kF64, 1, 1, CropMethod::kBilinear, -1.0}}) {
    c.push_back({"crop_and_resize",
                 k.name,
                 {of(k.dtype, Shape{2, 5, 6, 3}), fixed(Shape{6, 4}, k.dtype, kBoxes),
                  fixed(Shape{6}, DType::kI32, kBoxInd)},
                 [k](Backend&, const Inputs& x) {
                   return Outputs{crop_and_resize(x[0], x[1], x[2], {k.height, k.width}, k.method,
                                                  k.extrapolation_value)};
                 },
                 kElementwise,
                 true});
  }
  // The gradient kernel alone, on an output gradient of its own.
  for (bool nearest : {false, true}) {
    CropAndResizeAttrs attrs;
    attrs.crop_height = 3;
    attrs.crop_width = 4;
    attrs.nearest = nearest;
    attrs.image_shape = {2, 5, 6, 3};
    c.push_back({"crop_and_resize_grad_image",
                 nearest ? "crop_and_resize_grad_image_nearest" : "crop_and_resize_grad_image",
                 {f32(Shape{6, 3, 4, 3}), fixed(Shape{6, 4}, DType::kF32, kBoxes),
                  fixed(Shape{6}, DType::kI32, kBoxInd)},
                 [attrs](Backend& b, const Inputs& x) {
                   return call_kernel(b, "crop_and_resize_grad_image", x,
                                      {{Shape{2, 5, 6, 3}, DType::kF32}}, &attrs);
                 },
                 kAccumulating});
  }
  // position_sensitive_crop_regions on kBoxes as [2, 3, 4] (image 0's boxes, then image 1's),
  // 36 channels: 4 per bin for 3 x 3 bins, 6 for 2 x 3, 9 for 2 x 2.
  struct PsCrop {
    const char* name;
    DType dtype;
    int64_t crop_h, crop_w, bins_y, bins_x;
    bool global_pool;
  };
  for (const PsCrop& k :
       {PsCrop{"psroi_pool_crop6x6_bins3x3", DType::kF32, 6, 6, 3, 3, true},
        PsCrop{"psroi_pool_crop3x3_bins3x3", DType::kF32, 3, 3, 3, 3, true},
        PsCrop{"psroi_pool_crop4x2_bins2x2_f64", DType::kF64, 4, 2, 2, 2, true},
        PsCrop{"psroi_assemble_crop4x6_bins2x3", DType::kF32, 4, 6, 2, 3, false},
        PsCrop{"psroi_assemble_crop4x4_bins2x2", DType::kF32, 4, 4, 2, 2, false}}) {
    c.push_back({"position_sensitive_crop_regions",
                 k.name,
                 {of(k.dtype, Shape{2, 5, 6, 36}), fixed(Shape{2, 3, 4}, k.dtype, kBoxes)},
                 [k](Backend&, const Inputs& x) {
                   return Outputs{position_sensitive_crop_regions(
                       x[0], x[1], {k.crop_h, k.crop_w}, {k.bins_y, k.bins_x}, k.global_pool)};
                 },
                 kAccumulating,
                 true});
  }
  // The gradient kernel alone, on an output gradient of its own.
  for (bool global_pool : {true, false}) {
    PositionSensitiveCropAttrs attrs;
    attrs.crop_height = 4;
    attrs.crop_width = 6;
    attrs.bins_y = 2;
    attrs.bins_x = 3;
    attrs.global_pool = global_pool;
    attrs.image_shape = {2, 5, 6, 36};
    const Shape dout = global_pool ? Shape{2, 3, 1, 1, 6} : Shape{2, 3, 4, 6, 6};
    c.push_back({"position_sensitive_crop_regions_grad_image",
                 global_pool ? "psroi_pool_grad_image" : "psroi_assemble_grad_image",
                 {f32(dout), fixed(Shape{2, 3, 4}, DType::kF32, kBoxes)},
                 [attrs](Backend& b, const Inputs& x) {
                   return call_kernel(b, "position_sensitive_crop_regions_grad_image", x,
                                      {{Shape{2, 5, 6, 36}, DType::kF32}}, &attrs);
                 },
                 kAccumulating});
  }
}

}  // namespace trainyard::conformance
